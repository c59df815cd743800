//! One handoff as a row of a page: pure, from the stored object, the
//! project's TTL and the time now.

use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;

use crate::model::{HandoffRow, LintStatus, Origin};
use handoff_core::api::Handoff;
use handoff_core::grooming::expiry;
use handoff_core::handoff::LINTED;
use handoff_core::handoff::view::{counted, revision, updated_at};

/// The row of `h`, whose project's TTL is `ttl` (none: nothing is stale).
pub(super) fn handoff_row(h: &Handoff, ttl: Option<Duration>, now: Timestamp) -> HandoffRow {
    let spec = &h.spec;
    HandoffRow {
        name: h.name_any(),
        key: spec.handoff_key.clone(),
        project: spec.project.clone(),
        repo: spec.repo.clone(),
        kind: spec.kind.clone(),
        writer: spec.created_by.clone(),
        updated: updated_at(h).map(|t| t.0),
        revision: revision(h),
        // The counted size, else the same estimate of the stored body.
        tokens: Some(
            counted(h)
                .and_then(|s| s.approx_tokens)
                .unwrap_or_else(|| handoff_core::lint::approx_tokens(&spec.body)),
        ),
        lint: lint_status(h),
        origin: if handoff_transcript::rescue::is_rescued(&spec.body) {
            Origin::Rescued
        } else {
            Origin::Written
        },
        stale: expiry(h, ttl, now).is_some(),
    }
}

/// The `Linted` condition of the stored generation: pending while the
/// controller has not judged it.
pub(super) fn lint_status(h: &Handoff) -> LintStatus {
    let condition = h
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == LINTED));
    match condition {
        Some(c)
            if c.observed_generation.is_some()
                && c.observed_generation == h.metadata.generation =>
        {
            match c.status.as_str() {
                "True" => LintStatus::Passed,
                "False" => LintStatus::Failed(c.message.clone()),
                _ => LintStatus::Pending,
            }
        }
        _ => LintStatus::Pending,
    }
}

#[cfg(test)]
pub(super) mod fixture {
    //! Stored objects for the pure tests of the pages.

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    use super::*;
    use handoff_core::api::naming::name_for_key;
    use handoff_core::api::{HandoffSpec, HandoffStatus};

    pub(in crate::data) fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).expect("timestamp")
    }

    pub(in crate::data) fn condition(type_: &str, status: &str, generation: i64) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: "Reason".into(),
            message: format!("{type_} is {status}"),
            observed_generation: Some(generation),
            last_transition_time: Time(at(0)),
        }
    }

    /// A counted handoff of `key` in project `shop`, generation 1, updated
    /// at `updated` seconds, with these conditions.
    pub(in crate::data) fn stored(
        key: &str,
        body: &str,
        updated: i64,
        conditions: Vec<Condition>,
    ) -> Handoff {
        let spec = HandoffSpec {
            repo: Some("o/r".into()),
            kind: Some("issue".into()),
            created_by: Some("alice".into()),
            ..HandoffSpec::new(key, "shop", body)
        };
        let mut h = Handoff::new(&name_for_key(key), spec);
        h.metadata.namespace = Some("team".into());
        h.metadata.generation = Some(1);
        h.status = Some(HandoffStatus {
            revision: Some(2),
            updated_at: Some(Time(at(updated))),
            approx_tokens: Some(7),
            content_hash: Some(h.spec.content_hash()),
            conditions,
            ..HandoffStatus::default()
        });
        h
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::*;
    use super::*;

    const DAY: u64 = 86_400;

    #[test]
    fn a_row_says_what_the_object_and_its_conditions_say() {
        let plain = stored(
            "k",
            "## State\nwork",
            100,
            vec![condition(LINTED, "True", 1)],
        );
        let mut uncounted = plain.clone();
        uncounted.spec.body = "new body of sixteen".into();
        let mut old_lint = plain.clone();
        old_lint.metadata.generation = Some(2);
        let rescued = stored(
            "r",
            &format!(
                "{}\nfrom a transcript",
                handoff_transcript::rescue::RESCUE_MARK
            ),
            100,
            vec![condition(LINTED, "False", 1)],
        );
        let now = at(100 + 2 * DAY as i64);
        // (case, handoff, ttl, revision, tokens, lint, origin, stale)
        let cases = [
            (
                "counted, linted",
                &plain,
                None,
                Some(2),
                7,
                LintStatus::Passed,
                Origin::Written,
                false,
            ),
            (
                "within its TTL",
                &plain,
                Some(3 * DAY),
                Some(2),
                7,
                LintStatus::Passed,
                Origin::Written,
                false,
            ),
            (
                "past its TTL",
                &plain,
                Some(DAY),
                Some(2),
                7,
                LintStatus::Passed,
                Origin::Written,
                true,
            ),
            (
                "not counted yet",
                &uncounted,
                None,
                None,
                5,
                LintStatus::Passed,
                Origin::Written,
                false,
            ),
            (
                "linted an older generation",
                &old_lint,
                None,
                Some(2),
                7,
                LintStatus::Pending,
                Origin::Written,
                false,
            ),
            (
                "rescued, lint failed",
                &rescued,
                None,
                Some(2),
                7,
                LintStatus::Failed("Linted is False".into()),
                Origin::Rescued,
                false,
            ),
        ];
        for (case, h, ttl, rev, tokens, lint, origin, stale) in cases {
            let row = handoff_row(h, ttl.map(Duration::from_secs), now);
            assert_eq!(
                (row.revision, row.tokens, row.lint, row.origin, row.stale),
                (rev, Some(tokens), lint, origin, stale),
                "{case}"
            );
            assert_eq!(
                (row.key.as_str(), row.project.as_str()),
                (h.spec.handoff_key.as_str(), "shop")
            );
            assert_eq!(row.writer.as_deref(), Some("alice"), "{case}");
        }
    }

    #[test]
    fn a_handoff_without_a_lint_condition_is_pending() {
        let h = stored("k", "b", 1, Vec::new());
        assert_eq!(lint_status(&h), LintStatus::Pending);
        let mut unknown = stored("k", "b", 1, vec![condition(LINTED, "Unknown", 1)]);
        assert_eq!(lint_status(&unknown), LintStatus::Pending);
        unknown.status = None;
        assert_eq!(lint_status(&unknown), LintStatus::Pending);
    }
}
