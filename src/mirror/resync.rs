//! The resync plan (pure; the loop that runs it is
//! `controller::resync`): the mirror is compared with the apiserver at the start of each
//! leadership and every `--mirror-resync-interval`, and repaired — a CR
//! without a row gets one, a row without a CR is deleted, a stale row
//! (older revision, or another incarnation of the key) is rewritten. This
//! is also how the mirror catches up after PostgreSQL was down or the
//! controller was stopped: nothing depends on having seen every event.
//!
//! Rows are read *before* the objects are listed: a row written after the
//! read is not in the comparison (so never taken for an orphan), and an
//! object deleted after the read is gone from the list (so its row is
//! rightly deleted). Orphans are deleted by `(namespace, key, uid)`, with
//! that uid's history (unless it is kept), so a row or history of a newer
//! incarnation is never removed.

use std::collections::{HashMap, HashSet};

use super::{MirrorError, Row, RowVersion, is_stale};

/// What a resync pass does.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Rows to write (missing or stale).
    pub write: Vec<Row>,
    /// Rows to delete (no object).
    pub delete: Vec<RowVersion>,
}

/// Pure: compares `rows` with the counted objects `current` (objects being
/// deleted are absent from `current` but listed in `terminating`, whose rows
/// their finalizer removes).
pub fn plan(
    rows: &[RowVersion],
    current: Vec<Row>,
    terminating: &HashSet<(String, String)>,
) -> Plan {
    let by_key: HashMap<(&str, &str), &RowVersion> = rows
        .iter()
        .map(|r| ((r.namespace.as_str(), r.handoff_key.as_str()), r))
        .collect();
    let live: HashSet<(String, String)> = current
        .iter()
        .map(|r| (r.namespace.clone(), r.handoff_key.clone()))
        .collect();
    let delete = rows
        .iter()
        .filter(|r| {
            let key = (r.namespace.clone(), r.handoff_key.clone());
            !live.contains(&key) && !terminating.contains(&key)
        })
        .cloned()
        .collect();
    let write = current
        .into_iter()
        .filter(|row| {
            by_key
                .get(&(row.namespace.as_str(), row.handoff_key.as_str()))
                .is_none_or(|existing| is_stale(existing, row))
        })
        .collect();
    Plan { write, delete }
}

/// Why a resync pass failed.
#[derive(Debug, thiserror::Error)]
pub enum ResyncError {
    /// The mirror failed.
    #[error("mirror: {0}")]
    Mirror(#[from] MirrorError),
    /// The apiserver failed.
    #[error("apiserver: {0}")]
    Kube(#[from] kube::Error),
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn row(key: &str, id: &str, revision: i64) -> Row {
        Row {
            id: id.into(),
            namespace: "ns".into(),
            handoff_key: key.into(),
            project: "p".into(),
            repo: None,
            kind: None,
            created_by: String::new(),
            body: "b".into(),
            revision,
            resource_version: 10,
            created_at: Timestamp::UNIX_EPOCH,
            updated_at: Timestamp::UNIX_EPOCH,
        }
    }

    fn version(key: &str, id: &str, revision: i64) -> RowVersion {
        RowVersion {
            namespace: "ns".into(),
            handoff_key: key.into(),
            id: id.into(),
            revision,
            resource_version: 10,
        }
    }

    #[test]
    fn missing_stale_and_orphan_rows() {
        let rows = vec![
            version("current", "a", 2),
            version("stale", "b", 1),
            version("orphan", "c", 1),
            version("recreated", "old", 3),
            version("terminating", "e", 1),
        ];
        let objects = vec![
            row("current", "a", 2),
            row("stale", "b", 2),
            row("missing", "d", 1),
            row("recreated", "new", 1),
        ];
        let terminating = HashSet::from([("ns".to_owned(), "terminating".to_owned())]);
        let plan = plan(&rows, objects, &terminating);
        let written: Vec<&str> = plan.write.iter().map(|r| r.handoff_key.as_str()).collect();
        assert_eq!(written, ["stale", "missing", "recreated"]);
        let deleted: Vec<&str> = plan.delete.iter().map(|r| r.handoff_key.as_str()).collect();
        assert_eq!(deleted, ["orphan"]);
    }

    #[test]
    fn rows_of_other_namespaces_are_separate() {
        let mut other = version("k", "a", 1);
        other.namespace = "other".into();
        let plan = plan(&[other], vec![row("k", "a", 1)], &HashSet::new());
        assert_eq!(plan.write.len(), 1);
        assert_eq!(plan.delete.len(), 1);
    }
}
