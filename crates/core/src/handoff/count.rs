//! Revision counting: the status a handoff's spec is counted into. The
//! revision goes up by one only when the content changed; new content is
//! dated when its spec was written, so the time a reader shows does not
//! move when the count lands ([`super::view`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::conditions::{linted_condition, whole_seconds};
use crate::api::{HandoffOrigin, HandoffPhase, HandoffSpec, HandoffStatus, set_condition};
use crate::lint::approx_tokens;
use crate::settings::Budget;

/// What counting found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// First count of this object: revision 1.
    Created,
    /// The content changed: `from` → `to`.
    Superseded {
        /// The revision replaced.
        from: i64,
        /// The new revision.
        to: i64,
    },
    /// Same content as last counted.
    Unchanged,
}

/// The status for `spec` at `generation`, given the current status: the
/// revision goes up by one only when the content hash differs, and new
/// content is dated `written`, when its spec was written
/// ([`super::view::written_at`]), not when it is counted: the time
/// the bridge shows before the count ([`super::view::updated_at`])
/// stays the same after it. The `Linted` condition is set from
/// [`linted_condition`] under `budget` at `now`; other conditions are
/// carried over unchanged.
pub(crate) fn count(
    spec: &HandoffSpec,
    current: Option<&HandoffStatus>,
    generation: Option<i64>,
    budget: &Budget,
    written: Timestamp,
    now: Timestamp,
) -> (HandoffStatus, Change) {
    let hash = spec.content_hash();
    let current = current.cloned().unwrap_or_default();
    let (revision, updated_at, change) = match (current.revision, &current.content_hash) {
        (Some(rev), Some(h)) if *h == hash => (rev, current.updated_at.clone(), Change::Unchanged),
        (Some(rev), _) => (
            rev + 1,
            Some(Time(whole_seconds(written))),
            Change::Superseded {
                from: rev,
                to: rev + 1,
            },
        ),
        (None, _) => (1, Some(Time(whole_seconds(written))), Change::Created),
    };
    let status = HandoffStatus {
        revision: Some(revision),
        content_hash: Some(hash),
        updated_at,
        body_bytes: Some(i64::try_from(spec.body.len()).unwrap_or(i64::MAX)),
        approx_tokens: Some(approx_tokens(&spec.body)),
        origin: Some(HandoffOrigin::of(&spec.body)),
        phase: Some(HandoffPhase::Current),
        observed_generation: generation,
        conditions: current.conditions,
    };
    let mut status = status;
    set_condition(
        &mut status.conditions,
        linted_condition(&spec.body, generation, budget, now),
    );
    (status, change)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::fixture::{at, spec};

    #[test]
    fn content_hash_covers_content_only() {
        let base = spec("b");
        let h = base.content_hash();
        assert_eq!(h.len(), 16);
        let mut writer = base.clone();
        writer.created_by = Some("bob".into());
        assert_eq!(writer.content_hash(), h, "the writer is not content");
        for changed in [
            HandoffSpec {
                project: "q".into(),
                ..base.clone()
            },
            HandoffSpec {
                repo: None,
                ..base.clone()
            },
            HandoffSpec {
                kind: Some("pr".into()),
                ..base.clone()
            },
            HandoffSpec {
                body: "c".into(),
                ..base.clone()
            },
        ] {
            assert_ne!(changed.content_hash(), h, "{changed:?}");
        }
        let a = HandoffSpec {
            repo: Some("ab".into()),
            kind: Some("c".into()),
            ..base.clone()
        };
        let b = HandoffSpec {
            repo: Some("a".into()),
            kind: Some("bc".into()),
            ..base
        };
        assert_ne!(a.content_hash(), b.content_hash(), "fields are delimited");
    }

    #[test]
    fn revisions_count_content_changes_only() {
        let (first, change) = count(
            &spec("one"),
            None,
            Some(1),
            &Budget::default_budget(),
            at(100),
            at(100),
        );
        assert_eq!(change, Change::Created);
        assert_eq!(first.revision, Some(1));
        assert_eq!(first.updated_at, Some(Time(at(100))));
        assert_eq!(first.body_bytes, Some(3));
        assert_eq!(first.approx_tokens, Some(1));
        assert_eq!(first.phase, Some(HandoffPhase::Current));
        assert_eq!(first.observed_generation, Some(1));

        let mut writer_only = spec("one");
        writer_only.created_by = Some("bob".into());
        let (same, change) = count(
            &writer_only,
            Some(&first),
            Some(2),
            &Budget::default_budget(),
            at(200),
            at(200),
        );
        assert_eq!(change, Change::Unchanged);
        assert_eq!(same.revision, Some(1));
        assert_eq!(
            same.updated_at,
            Some(Time(at(100))),
            "no content change, no new time"
        );
        assert_eq!(same.observed_generation, Some(2));

        let (second, change) = count(
            &spec("two!"),
            Some(&same),
            Some(3),
            &Budget::default_budget(),
            at(300),
            at(300),
        );
        assert_eq!(change, Change::Superseded { from: 1, to: 2 });
        assert_eq!(second.revision, Some(2));
        assert_eq!(second.updated_at, Some(Time(at(300))));
        assert_eq!(second.body_bytes, Some(4));
    }

    #[test]
    fn a_status_without_a_hash_is_recounted_once() {
        let legacy = HandoffStatus {
            revision: Some(4),
            ..HandoffStatus::default()
        };
        let (status, change) = count(
            &spec("x"),
            Some(&legacy),
            None,
            &Budget::default_budget(),
            at(1),
            at(1),
        );
        assert_eq!(change, Change::Superseded { from: 4, to: 5 });
        let (_, again) = count(
            &spec("x"),
            Some(&status),
            None,
            &Budget::default_budget(),
            at(2),
            at(2),
        );
        assert_eq!(again, Change::Unchanged);
    }

    #[test]
    fn updated_at_is_whole_seconds() {
        let t = Timestamp::from_millisecond(1_500).expect("ts");
        let (status, _) = count(&spec("x"), None, None, &Budget::default_budget(), t, t);
        assert_eq!(status.updated_at, Some(Time(at(1))));
    }

    #[test]
    fn the_origin_is_read_from_the_body() {
        let rescued = format!(
            "{}: extracted by `handoff rescue`\n## State\nx",
            crate::api::RESCUE_MARK
        );
        // (body, origin)
        let cases = [
            ("## State\nwritten by an agent", HandoffOrigin::Written),
            (rescued.as_str(), HandoffOrigin::Rescued),
            (
                "quoting > **Rescued handoff** later is no rescue",
                HandoffOrigin::Written,
            ),
        ];
        for (body, origin) in cases {
            let (status, _) = count(
                &spec(body),
                None,
                None,
                &Budget::default_budget(),
                at(1),
                at(1),
            );
            assert_eq!(status.origin, Some(origin), "{body}");
        }
    }
}
