//! Revision counting: the status a handoff's spec is counted into. The
//! revision goes up by one only when the content changed; new content is
//! dated when its spec was written, so the time a reader shows does not
//! move when the count lands ([`super::view`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::conditions::{linted_condition, whole_seconds};
use crate::api::{HandoffPhase, HandoffSpec, HandoffStatus, set_condition};
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
