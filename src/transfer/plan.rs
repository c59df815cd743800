//! What an import does, decided before anything is written: a pure
//! function of the validated file, the target namespace's objects and
//! `--overwrite`.
//!
//! For each entry, against the object at the name derived from its key:
//!
//! - none, and no other object holds the key → **create**;
//! - the same key, the same content (project, repo, kind, body: what a
//!   revision counts) → **unchanged**: nothing is sent, so importing a file
//!   twice leaves every resourceVersion as it was;
//! - the same key, another content → **refused** unless `--overwrite`
//!   (then **update**): an import never silently replaces what someone
//!   wrote in the target since;
//! - another key at that name (a squat), or the key under another name (a
//!   twin) → **refused**: the target must be repaired first.
//!
//! One refusal refuses the whole import: nothing is written.

use std::collections::HashMap;

use handoff_core::api::naming::name_for_key;
use handoff_core::text::visible_line;

use super::format::Entry;

/// What the import needs to know of an object in the target namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    /// `metadata.name`.
    pub name: String,
    /// `spec.handoffKey`.
    pub key: String,
    /// [`handoff_core::api::HandoffSpec::content_hash`] of its spec.
    pub content_hash: String,
    /// `metadata.resourceVersion`: an update is made only at it.
    pub resource_version: Option<String>,
}

/// What happens to one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Created at the derived name.
    Create,
    /// Already there with the same content: nothing is sent.
    Unchanged,
    /// Replaced (`--overwrite`), at the object's resourceVersion.
    Update {
        /// The resourceVersion read.
        resource_version: Option<String>,
    },
}

/// The plan: one action per entry, in file order, or the refusals.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// `(entry index, action)`, 0-based.
    pub actions: Vec<(usize, Action)>,
    /// Why entries cannot be imported (each names the entry and key).
    pub refusals: Vec<String>,
}

impl Plan {
    /// `(created, unchanged, updated)`.
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut counts = (0, 0, 0);
        for (_, action) in &self.actions {
            match action {
                Action::Create => counts.0 += 1,
                Action::Unchanged => counts.1 += 1,
                Action::Update { .. } => counts.2 += 1,
            }
        }
        counts
    }
}

/// Pure: the plan of importing `entries` into a namespace holding
/// `existing` (see the module docs).
pub fn plan(entries: &[Entry], existing: &[Existing], overwrite: bool) -> Plan {
    let by_name: HashMap<&str, &Existing> = existing.iter().map(|e| (e.name.as_str(), e)).collect();
    let mut by_key: HashMap<&str, Vec<&str>> = HashMap::new();
    for e in existing {
        by_key
            .entry(e.key.as_str())
            .or_default()
            .push(e.name.as_str());
    }
    let mut out = Plan::default();
    for (index, entry) in entries.iter().enumerate() {
        let key = entry.spec.handoff_key.as_str();
        let name = name_for_key(key);
        let at = format!("entry {}, key `{}`", index + 1, visible_line(key));
        if let Some(twin) = by_key
            .get(key)
            .and_then(|names| names.iter().find(|n| **n != name))
        {
            out.refusals.push(format!(
                "{at}: the target holds this key under the name {twin:?}, not {name:?} (a twin; \
                 rule: one handoff per key, at the name derived from it): delete it first"
            ));
            continue;
        }
        let action = match by_name.get(name.as_str()) {
            None => Action::Create,
            Some(found) if found.key != key => {
                out.refusals.push(format!(
                    "{at}: the target's object {name:?} holds the key `{}` (a squat; rule: a \
                     name holds the key it is derived from): delete it first",
                    visible_line(&found.key)
                ));
                continue;
            }
            Some(found) if found.content_hash == entry.spec.content_hash() => Action::Unchanged,
            Some(found) if overwrite => Action::Update {
                resource_version: found.resource_version.clone(),
            },
            Some(_) => {
                out.refusals.push(format!(
                    "{at}: the target holds a different handoff for this key (rule: an import \
                     does not replace what is there): compare with `handoff get`, or pass \
                     --overwrite"
                ));
                continue;
            }
        };
        out.actions.push((index, action));
    }
    out
}

#[cfg(test)]
mod tests {
    use handoff_core::api::HandoffSpec;

    use super::*;

    fn entry(key: &str, body: &str) -> Entry {
        Entry {
            name: name_for_key(key),
            spec: HandoffSpec::new(key, "shop", body),
            created_at: None,
            revision: None,
            updated_at: None,
            history: Vec::new(),
        }
    }

    fn existing(name: &str, key: &str, body: &str) -> Existing {
        Existing {
            name: name.to_owned(),
            key: key.to_owned(),
            content_hash: HandoffSpec::new(key, "shop", body).content_hash(),
            resource_version: Some("7".to_owned()),
        }
    }

    /// (case, the target's objects, --overwrite, actions, refusal fragments)
    type Case = (
        &'static str,
        Vec<Existing>,
        bool,
        Vec<Action>,
        Vec<&'static str>,
    );

    #[test]
    fn each_entry_gets_its_action_or_refusal() {
        let a = name_for_key("a");
        let b = name_for_key("b");
        let update = Action::Update {
            resource_version: Some("7".to_owned()),
        };
        let cases: Vec<Case> = vec![
            (
                "empty target: created",
                vec![],
                false,
                vec![Action::Create],
                vec![],
            ),
            (
                "same content: unchanged",
                vec![existing(&a, "a", "x")],
                false,
                vec![Action::Unchanged],
                vec![],
            ),
            (
                "same content, overwrite: still unchanged",
                vec![existing(&a, "a", "x")],
                true,
                vec![Action::Unchanged],
                vec![],
            ),
            (
                "another body: refused",
                vec![existing(&a, "a", "y")],
                false,
                vec![],
                vec!["entry 1, key `a`", "a different handoff", "--overwrite"],
            ),
            (
                "another body, overwrite: updated at its version",
                vec![existing(&a, "a", "y")],
                true,
                vec![update],
                vec![],
            ),
            (
                "the key under another name: a twin, refused",
                vec![existing("my-twin", "a", "x")],
                true,
                vec![],
                vec!["entry 1, key `a`", "\"my-twin\"", "a twin"],
            ),
            (
                "another key at the name: a squat, refused",
                vec![existing(&a, "b", "x")],
                true,
                vec![],
                vec!["entry 1, key `a`", "holds the key `b`", "a squat"],
            ),
            (
                "other keys are left alone",
                vec![existing(&b, "b", "x")],
                false,
                vec![Action::Create],
                vec![],
            ),
        ];
        for (case, target, overwrite, actions, refusals) in cases {
            let got = plan(&[entry("a", "x")], &target, overwrite);
            let want: Vec<(usize, Action)> = actions.into_iter().map(|a| (0, a)).collect();
            assert_eq!(got.actions, want, "{case}");
            assert_eq!(
                got.refusals.len(),
                usize::from(!refusals.is_empty()),
                "{case}"
            );
            for fragment in refusals {
                assert!(got.refusals[0].contains(fragment), "{case}: {got:?}");
            }
        }
    }

    #[test]
    fn counts_add_up() {
        let a = name_for_key("a");
        let c = name_for_key("c");
        let got = plan(
            &[entry("a", "x"), entry("b", "x"), entry("c", "new")],
            &[existing(&a, "a", "x"), existing(&c, "c", "old")],
            true,
        );
        assert_eq!(got.counts(), (1, 1, 1));
        assert!(got.refusals.is_empty());
    }
}
