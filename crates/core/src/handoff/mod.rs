//! The pure decisions about one Handoff that more than one process makes:
//! which object is its key's handoff ([`canonical`]), the revision and time
//! it shows ([`view`]), what an apply did, read from its answer
//! ([`outcome`]), and the Handoff loop's plan. The I/O around them is
//! `handoff_kube::store` (the bridge's reads and writes) and
//! `handoff_controller::handoff` (the loop).
//!
//! - `managed_fields`: the one walker over managedFields, which three
//!   decisions read (when the spec was written, when the bridge last
//!   applied, which labels the controller owns).
//! - [`view`]: the revision and time a handoff shows, one rule for every
//!   reader.
//! - [`outcome`]: what one apply did (created, updated, unchanged).
//! - the Handoff loop's decisions (observe → plan → apply, the loop is
//!   `handoff_controller::handoff`): [`cached`] (what the watch cache
//!   keeps), `count` (the counted status), `conditions` (`Linted`,
//!   `Mirrored`, `KeyBound`), `metadata` (the labels the controller
//!   applies) and [`plan`] (every effect of one reconcile). The shared
//!   pieces sit in leaf modules, so [`cached`] and [`plan`] do not import
//!   each other in a circle: [`plan`] reads [`cached`], both read
//!   `metadata`.

pub mod cached;
mod conditions;
mod count;
#[cfg(test)]
mod fixture;
mod managed_fields;
mod metadata;
pub mod outcome;
pub mod plan;
pub mod view;

use crate::api::Handoff;
use crate::api::naming::name_for_key;

/// Characters of a key quoted in an Event's note (keys may be 1 KiB; the
/// whole note may not).
pub const NOTE_KEY_CHARS: usize = 200;

/// The condition that reports the mirror row.
pub const MIRRORED: &str = "Mirrored";

/// The condition that reports the quality lint of the body.
pub const LINTED: &str = "Linted";

/// The condition that reports, False, an object whose name is not derived
/// from its key (set on such objects only: name and key never change).
pub const KEY_BOUND: &str = "KeyBound";

/// The reason of a False [`KEY_BOUND`] and of its Warning Event.
pub const NAME_NOT_DERIVED: &str = "NameNotDerivedFromKey";

/// `namespace/name` of a handoff, for messages and logs.
pub fn describe(h: &Handoff) -> String {
    format!(
        "{}/{}",
        h.metadata.namespace.as_deref().unwrap_or_default(),
        h.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Whether `h` is the current handoff of its key: its name is the one
/// derived from `spec.handoffKey` ([`name_for_key`]). Only such an object
/// is mirrored or listed; another (a *twin* holding another object's key
/// under a name of its own, or a *squat* at the name of another key) was
/// made past the name check and is reported, never served.
pub fn canonical(h: &Handoff) -> bool {
    h.metadata.name.as_deref() == Some(name_for_key(&h.spec.handoff_key).as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::HandoffSpec;

    #[test]
    fn only_the_name_derived_from_the_key_is_canonical() {
        let spec = |key: &str| HandoffSpec {
            handoff_key: key.into(),
            project: "p".into(),
            repo: None,
            kind: None,
            body: "b".into(),
            created_by: None,
        };
        let cases = [
            (Some(name_for_key("k")), "k", true, "the derived name"),
            (Some("my-handoff".to_owned()), "k", false, "a twin"),
            (Some(name_for_key("k2")), "k3", false, "a squat"),
            (None, "k", false, "no name"),
        ];
        for (name, key, want, why) in cases {
            let mut h = Handoff::new("x", spec(key));
            h.metadata.name = name;
            assert_eq!(canonical(&h), want, "{why}");
        }
    }

    #[test]
    fn a_handoff_is_described_as_namespace_and_name() {
        let mut h = Handoff::new("obj", HandoffSpec::new("k", "p", "b"));
        assert_eq!(describe(&h), "/obj");
        h.metadata.namespace = Some("ns".into());
        assert_eq!(describe(&h), "ns/obj");
    }
}
