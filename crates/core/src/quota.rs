//! A team's ResourceQuota refusing a write: what the apiserver's
//! `ResourceQuota` admission said ([`refusal`], read from its 403
//! message) and what an agent is told instead ([`Refusal::message`]),
//! naming the quota, the resource, the numbers and what to do — never the
//! apiserver's own text, which names `count/…` keys and no remedy.
//!
//! The admission plugin's wording (k8s.io/apiserver, plugin/resourcequota)
//! is stable since Kubernetes 1.9: `exceeded quota: <name>, requested:
//! <k=v,…>, used: <k=v,…>, limited: <k=v,…>` when a create would pass
//! `status.hard`, and `status unknown for quota: <name>, resources: <k,…>`
//! when the quota controller has not yet counted the namespace. Each comes
//! after the usual `<resource> "<name>" is forbidden: ` prefix. A message in
//! neither shape is not a quota refusal ([`refusal`] answers `None`) and
//! the caller maps it as any other 403.
//!
//! config/tenant and the chart's tenants ship the quota (docs/operate.md,
//! "Quotas: sizing against etcd").

use std::fmt::Write as _;

/// One resource a create would take past its quota.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    /// The quota's resource name, e.g. `count/handoffs.handoff.dev`.
    pub resource: String,
    /// What the write asked for (`1` for one object).
    pub requested: String,
    /// What the namespace already uses.
    pub used: String,
    /// The quota's limit (`status.hard`).
    pub limited: String,
}

/// Why a team's ResourceQuota refused a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The write would take these resources past quota `quota`.
    Exceeded {
        /// The ResourceQuota's name.
        quota: String,
        /// Each resource over its limit (at least one).
        resources: Vec<Exceeded>,
    },
    /// The quota controller has not counted these resources yet (a new
    /// quota, or the controller-manager down): retriable.
    StatusUnknown {
        /// The ResourceQuota's name.
        quota: String,
        /// The resources without a count.
        resources: Vec<String>,
    },
}

/// `k=v,k=v` as pairs; `None` when an item has no `=`.
fn pairs(list: &str) -> Option<Vec<(&str, &str)>> {
    list.split(',')
        .filter(|item| !item.is_empty())
        .map(|item| item.split_once('='))
        .collect()
}

/// The refusal the apiserver's 403 `message` states, if it is the
/// ResourceQuota admission's (see the module docs for its wording).
pub fn refusal(message: &str) -> Option<Refusal> {
    if let Some((_, rest)) = message.split_once("exceeded quota: ") {
        let (quota, rest) = rest.split_once(", requested: ")?;
        let (requested, rest) = rest.split_once(", used: ")?;
        let (used, limited) = rest.split_once(", limited: ")?;
        let (requested, used, limited) = (pairs(requested)?, pairs(used)?, pairs(limited)?);
        let value = |list: &[(&str, &str)], resource: &str| {
            list.iter()
                .find(|(k, _)| *k == resource)
                .map_or_else(|| "0".to_owned(), |(_, v)| (*v).to_owned())
        };
        let resources: Vec<Exceeded> = limited
            .iter()
            .filter(|(resource, _)| requested.iter().any(|(k, _)| k == resource))
            .map(|(resource, limit)| Exceeded {
                resource: (*resource).to_owned(),
                requested: value(&requested, resource),
                used: value(&used, resource),
                limited: (*limit).to_owned(),
            })
            .collect();
        return (!quota.is_empty() && !resources.is_empty()).then(|| Refusal::Exceeded {
            quota: quota.to_owned(),
            resources,
        });
    }
    let (_, rest) = message.split_once("status unknown for quota: ")?;
    let (quota, resources) = rest.split_once(", resources: ")?;
    let resources: Vec<String> = resources
        .split(',')
        .filter(|r| !r.is_empty())
        .map(str::to_owned)
        .collect();
    (!quota.is_empty() && !resources.is_empty()).then(|| Refusal::StatusUnknown {
        quota: quota.to_owned(),
        resources,
    })
}

/// What an agent reads of `resource` (a quota's resource name): the
/// objects it counts and how room is made for more.
fn objects_of(resource: &str) -> (&str, &str) {
    match resource {
        "count/handoffs.handoff.dev" => (
            "handoffs",
            "updating an existing handoff key still works; for a new key, make room: the refine \
             agent grooms handoffs no longer needed (delete_handoff), and TTL grooming deletes \
             those not updated within their project's TTL",
        ),
        "count/handoffoffers.handoff.dev" => (
            "offers",
            "the controller deletes finished offers (taken, rejected, superseded) once past their \
             retention, which makes room; reject_offer finishes an offer no longer wanted",
        ),
        "count/brainstormschedules.handoff.dev" => {
            ("brainstorm schedules", "delete a schedule no longer needed")
        }
        other => (other, "delete objects no longer needed"),
    }
}

impl Refusal {
    /// The message an agent gets for this refusal of a write in
    /// `namespace`: the quota, each resource with its numbers, that
    /// nothing was written, and what to do.
    pub fn message(&self, namespace: &str) -> String {
        match self {
            Refusal::Exceeded { quota, resources } => {
                let mut text = format!(
                    "the namespace {namespace} is at its quota, so nothing was written: \
                     ResourceQuota {quota}"
                );
                for (i, r) in resources.iter().enumerate() {
                    let (objects, _) = objects_of(&r.resource);
                    let _ = write!(
                        text,
                        "{} allows {} {objects} ({}), {} are in use and this write needs {} more",
                        if i == 0 { "" } else { ";" },
                        r.limited,
                        r.resource,
                        r.used,
                        r.requested
                    );
                }
                text.push_str(". What to do: ");
                for r in resources {
                    text.push_str(objects_of(&r.resource).1);
                    text.push_str("; ");
                }
                let _ = write!(
                    text,
                    "or ask your cluster admin for a larger quota (ResourceQuota {quota} in \
                     namespace {namespace}). Not retriable until then."
                );
                text
            }
            Refusal::StatusUnknown { quota, resources } => format!(
                "the namespace {namespace}'s ResourceQuota {quota} has not counted {} yet (the \
                 quota controller of kube-controller-manager fills it in), so the apiserver wrote \
                 nothing; retriable: try again shortly. If it persists, ask your cluster admin to \
                 check kube-controller-manager.",
                resources.join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HANDOFFS: &str = "count/handoffs.handoff.dev";

    fn exceeded(resource: &str, requested: &str, used: &str, limited: &str) -> Exceeded {
        Exceeded {
            resource: resource.into(),
            requested: requested.into(),
            used: used.into(),
            limited: limited.into(),
        }
    }

    #[test]
    fn the_quota_admissions_messages_are_read_and_others_are_not() {
        let prefix = "handoffs.handoff.dev \"k-0123\" is forbidden: ";
        let cases: Vec<(&str, String, Option<Refusal>)> = vec![
            (
                "one resource, as the apiserver words it",
                format!(
                    "{prefix}exceeded quota: handoff-quota, requested: {HANDOFFS}=1, used: \
                     {HANDOFFS}=5, limited: {HANDOFFS}=5"
                ),
                Some(Refusal::Exceeded {
                    quota: "handoff-quota".into(),
                    resources: vec![exceeded(HANDOFFS, "1", "5", "5")],
                }),
            ),
            (
                "two resources over, a third within its limit left out",
                "exceeded quota: q, requested: count/a=1,count/b=2, used: count/a=3, \
                 limited: count/a=3,count/b=1,count/c=9"
                    .into(),
                Some(Refusal::Exceeded {
                    quota: "q".into(),
                    resources: vec![
                        exceeded("count/a", "1", "3", "3"),
                        exceeded("count/b", "2", "0", "1"),
                    ],
                }),
            ),
            (
                "the quota not counted yet",
                format!("{prefix}status unknown for quota: handoff-quota, resources: {HANDOFFS}"),
                Some(Refusal::StatusUnknown {
                    quota: "handoff-quota".into(),
                    resources: vec![HANDOFFS.into()],
                }),
            ),
            (
                "RBAC's refusal",
                "handoffs.handoff.dev is forbidden: User \"u\" cannot create resource \"handoffs\""
                    .into(),
                None,
            ),
            (
                "an admission policy's refusal",
                "ValidatingAdmissionPolicy 'p' denied request: no".into(),
                None,
            ),
            (
                "truncated after the name",
                "exceeded quota: q, requested: count/a=1".into(),
                None,
            ),
            (
                "a list item without a value",
                "exceeded quota: q, requested: count/a, used: count/a=1, limited: count/a=1".into(),
                None,
            ),
            (
                "no quota name",
                "exceeded quota: , requested: count/a=1, used: count/a=1, limited: count/a=1"
                    .into(),
                None,
            ),
            (
                "nothing requested is limited",
                "exceeded quota: q, requested: count/a=1, used: count/b=1, limited: count/b=1"
                    .into(),
                None,
            ),
            (
                "unknown status without resources",
                "status unknown for quota: q, resources: ".into(),
                None,
            ),
        ];
        for (what, message, want) in cases {
            assert_eq!(refusal(&message), want, "{what}: {message}");
        }
    }

    #[test]
    fn the_message_names_the_quota_the_resource_the_numbers_and_the_remedy() {
        let over = |resource: &str| Refusal::Exceeded {
            quota: "handoff-quota".into(),
            resources: vec![exceeded(resource, "1", "5", "5")],
        };
        // (what, the refusal, what the message must say)
        let cases: Vec<(&str, Refusal, Vec<&str>)> = vec![
            (
                "handoffs",
                over(HANDOFFS),
                vec![
                    "the namespace team-a is at its quota, so nothing was written",
                    "ResourceQuota handoff-quota allows 5 handoffs (count/handoffs.handoff.dev), \
                     5 are in use and this write needs 1 more",
                    "updating an existing handoff key still works",
                    "refine agent grooms",
                    "ask your cluster admin for a larger quota (ResourceQuota handoff-quota in \
                     namespace team-a)",
                ],
            ),
            (
                "offers",
                over("count/handoffoffers.handoff.dev"),
                vec![
                    "allows 5 offers (count/handoffoffers.handoff.dev)",
                    "deletes finished offers",
                ],
            ),
            (
                "schedules",
                over("count/brainstormschedules.handoff.dev"),
                vec!["allows 5 brainstorm schedules", "delete a schedule"],
            ),
            (
                "another team's own quota item",
                over("count/jobs.batch"),
                vec!["allows 5 count/jobs.batch (count/jobs.batch)"],
            ),
            (
                "not counted yet",
                Refusal::StatusUnknown {
                    quota: "handoff-quota".into(),
                    resources: vec![HANDOFFS.into(), "count/handoffoffers.handoff.dev".into()],
                },
                vec![
                    "ResourceQuota handoff-quota has not counted count/handoffs.handoff.dev, \
                     count/handoffoffers.handoff.dev yet",
                    "retriable",
                ],
            ),
        ];
        for (what, refusal, want) in cases {
            let got = refusal.message("team-a");
            for part in want {
                assert!(got.contains(part), "{what}: want {part:?} in {got:?}");
            }
            assert!(
                !got.contains("exceeded quota:") && !got.contains("limited:"),
                "{what}: the apiserver's own wording leaked: {got}"
            );
        }
    }
}
