//! The conditions the Handoff loop sets on a handoff's status: `Linted`,
//! `Mirrored` and, on an object whose name is not derived from its key,
//! `KeyBound` False. Times are whole seconds, as `metav1.Time` keeps them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::{KEY_BOUND, LINTED, MIRRORED, NAME_NOT_DERIVED, NOTE_KEY_CHARS};
use crate::api::Handoff;
use crate::api::naming::name_for_key;
use crate::loops::quoted;
use crate::settings::Budget;

/// A time truncated to whole seconds (what `metav1.Time` keeps).
pub(crate) fn whole_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// The `Linted` condition: `True` (reason `NoWarnings`) when the body
/// passes [`crate::lint::lint`] under the namespace's budget, else `False`
/// (reason `Warnings`) with every warning in the message — the same
/// warnings `write_handoff` returns, for writers that do not use the bridge.
/// A bad budget setting (the default was used) ends the message.
pub(crate) fn linted_condition(
    body: &str,
    generation: Option<i64>,
    budget: &Budget,
    now: Timestamp,
) -> Condition {
    let warnings = crate::lint::lint(body, budget.tokens);
    let (status, reason, mut message) = if warnings.is_empty() {
        (
            "True",
            "NoWarnings",
            "the body passes the handoff lint".to_owned(),
        )
    } else {
        ("False", "Warnings", crate::lint::summary(&warnings))
    };
    if let Some(problem) = &budget.problem {
        message.push_str(&format!("; {problem}"));
    }
    Condition {
        type_: LINTED.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time: Time(whole_seconds(now)),
    }
}

/// The `Mirrored` condition.
pub(crate) fn mirrored_condition(
    ok: bool,
    message: String,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    Condition {
        type_: MIRRORED.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: if ok {
            "RowCurrent"
        } else {
            "MirrorUnavailable"
        }
        .into(),
        message,
        observed_generation: generation,
        last_transition_time: Time(whole_seconds(now)),
    }
}

/// The False `KeyBound` condition of `h`, an object whose name is not the
/// one derived from its key: the message names that name and how to
/// remove the object.
pub(crate) fn unbound_condition(h: &Handoff, now: Timestamp) -> Condition {
    let name = h.name_any();
    let expected = name_for_key(&h.spec.handoff_key);
    Condition {
        type_: KEY_BOUND.into(),
        status: "False".into(),
        reason: NAME_NOT_DERIVED.into(),
        message: format!(
            "metadata.name {name:?} is not {expected:?}, the name derived from spec.handoffKey {}: \
             this object is not the key's handoff, so it is neither mirrored nor listed. \
             Remove it with `kubectl delete handoff {name} -n {}`; the key's handoff \
             (at {expected:?}) and its history stay",
            quoted(&h.spec.handoff_key, NOTE_KEY_CHARS),
            h.namespace().unwrap_or_default(),
        ),
        observed_generation: h.metadata.generation,
        last_transition_time: Time(whole_seconds(now)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::set_condition;
    use crate::handoff::fixture::at;

    #[test]
    fn conditions_keep_their_transition_time_while_unchanged() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            mirrored_condition(true, "ok".into(), Some(1), at(10)),
        );
        set_condition(
            &mut conditions,
            mirrored_condition(true, "ok".into(), Some(2), at(20)),
        );
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, Time(at(10)));
        set_condition(
            &mut conditions,
            mirrored_condition(false, "down".into(), Some(2), at(30)),
        );
        assert_eq!(conditions[0].last_transition_time, Time(at(30)));
        assert_eq!(conditions[0].reason, "MirrorUnavailable");
    }
}
