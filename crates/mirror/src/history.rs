//! The history: `handoff_revisions` holds one row per counted revision
//! (recorded by [`Mirror::write_batch`]), kept as [`Retention`] says; this
//! module reads it (one revision, or a key's revisions newest first, for
//! `get_handoff{revision}`, `list_revisions`, `diff_handoff` and `handoff
//! history`) and expires it by age (resync).
//!
//! Reads never cross objects: revision N of a key is revision N of one
//! object — the object whose row the key has (its current handoff), or,
//! when the key has no row (deleted, history kept for audit), the object
//! that recorded the key's newest revision (the `object` of [`REVISION`]
//! and [`REVISIONS`]). Before migration 0004 a lookup took the newest
//! revision N of any object naming the key, so an object made by hand
//! under a name of its own could hide the current handoff's revisions and
//! serve its own body instead.

use std::num::NonZeroU32;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::{ListedRow, Mirror, MirrorError};

/// The default of `--history-revisions`: revisions kept per key.
pub const DEFAULT_HISTORY_REVISIONS: NonZeroU32 = NonZeroU32::new(50).expect("50 is not zero");

/// How much history the mirror keeps (the controller's `--history-*` and
/// `--keep-history-on-delete` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Most revisions kept per key (namespace + key, every incarnation);
    /// recording one more drops the oldest.
    pub revisions: NonZeroU32,
    /// Past revisions written longer ago than this are dropped by resync
    /// (the current revision of a live handoff stays). Off when unset.
    pub max_age: Option<Duration>,
    /// Keep a deleted handoff's revisions (audit) instead of deleting them
    /// with its row.
    pub keep_on_delete: bool,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            revisions: DEFAULT_HISTORY_REVISIONS,
            max_age: None,
            keep_on_delete: false,
        }
    }
}

/// Pure: revisions written before the returned time are past `max_age` at
/// `now`; `None` when nothing can be that old (no limit, or before the
/// earliest time there is).
pub(crate) fn history_cutoff(now: Timestamp, max_age: Option<Duration>) -> Option<Timestamp> {
    now.checked_sub(max_age?).ok()
}

/// At most `$3` past revisions written before `$2` (of namespace `$1`, or
/// of all): never the revision a live row holds.
const EXPIRE_HISTORY: &str = r#"
DELETE FROM handoff_revisions
WHERE (namespace, handoff_key, handoff_id, revision) IN (
    SELECT r.namespace, r.handoff_key, r.handoff_id, r.revision FROM handoff_revisions r
    WHERE ($1::text IS NULL OR r.namespace = $1) AND r.written_at < $2
      AND NOT EXISTS (SELECT 1 FROM handoffs h
                      WHERE h.namespace = r.namespace AND h.handoff_key = r.handoff_key
                        AND h.id = r.handoff_id AND h.revision = r.revision)
    LIMIT $3
)
"#;

/// Rows deleted per statement when history expires (a first pass after
/// the limit is set may have many; each batch is its own transaction).
const EXPIRE_BATCH: i64 = 1000;

impl Mirror {
    /// Drops past revisions (of `namespace`, or of all) older than the
    /// retention's `max_age` at `now`, in batches; returns how many. The
    /// revision a live row holds stays. Nothing without an age limit.
    pub async fn expire_history(
        &self,
        namespace: Option<&str>,
        now: Timestamp,
    ) -> Result<u64, MirrorError> {
        let Some(cutoff) = history_cutoff(now, self.retention.max_age) else {
            return Ok(0);
        };
        let mut total = 0;
        loop {
            let n = self
                .with(|c| async move {
                    c.execute(EXPIRE_HISTORY, &[&namespace, &cutoff, &EXPIRE_BATCH])
                        .await
                })
                .await?;
            total += n;
            if n < EXPIRE_BATCH.unsigned_abs() {
                return Ok(total);
            }
        }
    }

    /// Revision `revision` of `key` from the history of the key's object
    /// (see the module docs).
    pub async fn revision(
        &self,
        namespace: &str,
        key: &str,
        revision: i64,
    ) -> Result<Option<ListedRow>, MirrorError> {
        self.with(|c| async move {
            let row = c
                .query_opt(REVISION, &[&namespace, &key, &revision])
                .await?;
            Ok(row.as_ref().map(ListedRow::of))
        })
        .await
    }
}

/// The SQL of the key's object, `object(id)`, for key `$2` in namespace
/// `$1`: the object of the key's row, else the object that recorded the
/// key's newest revision (a deleted handoff whose history is kept). A
/// macro, as `concat!` joins only literals.
macro_rules! key_object {
    () => {
        r#"
WITH object AS (
    SELECT COALESCE(
        (SELECT id FROM handoffs WHERE namespace = $1 AND handoff_key = $2),
        (SELECT handoff_id FROM handoff_revisions WHERE namespace = $1 AND handoff_key = $2
         ORDER BY written_at DESC, revision DESC LIMIT 1)) AS id
)
"#
    };
}

/// Revision `$3` of key `$2` in namespace `$1`, of the key's object (see
/// `key_object`).
const REVISION: &str = concat!(
    key_object!(),
    r#"SELECT r.handoff_key, r.project, r.repo, r.kind, r.created_by, r.body, r.written_at, r.revision
FROM handoff_revisions r, object o
WHERE r.namespace = $1 AND r.handoff_key = $2 AND r.handoff_id = o.id AND r.revision = $3
"#
);

/// At most `$4` revisions of key `$2` in namespace `$1`, of the key's
/// object (see `key_object`), newest first, below `$3` when given.
const REVISIONS: &str = concat!(
    key_object!(),
    r#"SELECT r.revision, r.written_at, r.created_by, octet_length(r.body)::bigint AS bytes
FROM handoff_revisions r, object o
WHERE r.namespace = $1 AND r.handoff_key = $2 AND r.handoff_id = o.id
  AND ($3::bigint IS NULL OR r.revision < $3)
ORDER BY r.revision DESC
LIMIT $4
"#
);

/// One revision of a key, without its body.
#[derive(Debug, Clone, PartialEq)]
pub struct RevisionEntry {
    /// Revision number.
    pub revision: i64,
    /// When it was counted (its `updatedAt`).
    pub written_at: Timestamp,
    /// Who wrote it (empty when unknown).
    pub created_by: String,
    /// Size of its body in bytes.
    pub bytes: i64,
}

impl Mirror {
    /// At most `limit` revisions of `key` in `namespace`, newest first,
    /// below `before` when given.
    pub async fn revisions(
        &self,
        namespace: &str,
        key: &str,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<RevisionEntry>, MirrorError> {
        self.with(|c| async move {
            let rows = c
                .query(REVISIONS, &[&namespace, &key, &before, &limit])
                .await?;
            Ok(rows
                .iter()
                .map(|r| RevisionEntry {
                    revision: r.get(0),
                    written_at: r.get(1),
                    created_by: r.get(2),
                    bytes: r.get(3),
                })
                .collect())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_keeps_fifty_revisions_and_forgets_on_delete_by_default() {
        let retention = Retention::default();
        assert_eq!(retention.revisions.get(), 50);
        assert_eq!(retention.max_age, None);
        assert!(!retention.keep_on_delete);
    }

    #[test]
    fn history_cutoffs() {
        let now = Timestamp::from_second(10_000).expect("ts");
        let hour = Duration::from_secs(3600);
        assert_eq!(history_cutoff(now, None), None, "no limit");
        assert_eq!(
            history_cutoff(now, Some(hour)),
            Some(Timestamp::from_second(6_400).expect("ts"))
        );
        assert_eq!(history_cutoff(now, Some(Duration::ZERO)), Some(now));
        assert_eq!(
            history_cutoff(now, Some(Duration::from_secs(u64::MAX))),
            None,
            "older than any time there is"
        );
    }
}
