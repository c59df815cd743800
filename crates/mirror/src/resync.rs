//! The resync plan (pure; the loop that runs it is
//! `controller::mirror_resync`): the mirror is compared with the apiserver at the start of each
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
//! incarnation is never removed. This is what removes a deleted handoff's
//! row and history for certain: the controller deletes it as soon as it
//! sees the delete, but holds no finalizer for it (deletes never wait for
//! PostgreSQL), so a delete made while PostgreSQL was unavailable or the
//! controller stopped is mirrored here.
//!
//! A pass streams: the rows' versions (uid, revision; no body) are read in
//! pages of [`super::VERSIONS_PAGE`], then the objects are listed a page at
//! a time, and each page's stale or missing rows are written before the
//! next page is read — only the bodies of rows to write are ever built,
//! one page's worth at most.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::row::is_stale;
use crate::{MirrorError, RowVersion};
use handoff_core::api::naming::name_for_key;

/// One resync pass's comparison: the rows not yet matched with an object.
#[derive(Debug, Default)]
pub struct Pass {
    rows: HashMap<(String, String), RowVersion>,
    unreadable: HashSet<(String, String)>,
}

impl Pass {
    /// A pass over the rows read (before the objects are listed).
    pub fn new(rows: Vec<RowVersion>) -> Self {
        Self {
            rows: rows
                .into_iter()
                .map(|r| ((r.namespace.clone(), r.handoff_key.clone()), r))
                .collect(),
            unreadable: HashSet::new(),
        }
    }

    /// A counted object of uid `id` at `revision`: whether its row must be
    /// written (missing, older, or of another incarnation of the key).
    pub fn live(&mut self, namespace: &str, key: &str, id: &str, revision: i64) -> bool {
        let row = self.rows.remove(&(namespace.to_owned(), key.to_owned()));
        is_stale(row.as_ref(), id, revision)
    }

    /// An object whose row stays as it is: being deleted, or not counted
    /// yet (its reconcile writes the row).
    pub fn keep(&mut self, namespace: &str, key: &str) {
        self.rows.remove(&(namespace.to_owned(), key.to_owned()));
    }

    /// An object that does not deserialize (its key is unknown): the row of
    /// the key named `name` stays.
    pub fn unreadable(&mut self, namespace: String, name: String) {
        self.unreadable.insert((namespace, name));
    }

    /// The rows no object matched: to delete, in `(namespace, key)` order.
    pub fn orphans(self) -> Vec<RowVersion> {
        let unreadable = self.unreadable;
        let mut orphans: Vec<RowVersion> = self
            .rows
            .into_values()
            .filter(|r| !unreadable.contains(&(r.namespace.clone(), name_for_key(&r.handoff_key))))
            .collect();
        orphans.sort_by(|a, b| (&a.namespace, &a.handoff_key).cmp(&(&b.namespace, &b.handoff_key)));
        orphans
    }
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
    /// The apiserver did not answer a list within `--apiserver-timeout`.
    #[error("apiserver: no answer within {0:?}")]
    ApiTimeout(Duration),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(namespace: &str, key: &str, id: &str, revision: i64) -> RowVersion {
        RowVersion {
            namespace: namespace.into(),
            handoff_key: key.into(),
            id: id.into(),
            revision,
            resource_version: 10,
        }
    }

    #[test]
    fn missing_stale_and_orphan_rows() {
        let mut pass = Pass::new(vec![
            version("ns", "current", "a", 2),
            version("ns", "stale", "b", 1),
            version("ns", "orphan", "c", 1),
            version("ns", "recreated", "old", 3),
            version("ns", "terminating", "e", 1),
            version("ns", "broken", "f", 1),
        ]);
        assert!(!pass.live("ns", "current", "a", 2), "current");
        assert!(pass.live("ns", "stale", "b", 2), "older revision");
        assert!(pass.live("ns", "missing", "d", 1), "no row");
        assert!(
            pass.live("ns", "recreated", "new", 1),
            "another incarnation"
        );
        pass.keep("ns", "terminating");
        pass.unreadable("ns".into(), name_for_key("broken"));
        let deleted: Vec<String> = pass.orphans().into_iter().map(|r| r.handoff_key).collect();
        assert_eq!(deleted, ["orphan"]);
    }

    #[test]
    fn a_row_newer_than_the_object_seen_is_kept() {
        let mut pass = Pass::new(vec![version("ns", "k", "a", 3)]);
        assert!(!pass.live("ns", "k", "a", 2), "rows never move backwards");
        assert!(pass.orphans().is_empty());
    }

    #[test]
    fn rows_of_other_namespaces_are_separate() {
        let mut pass = Pass::new(vec![version("other", "k", "a", 1)]);
        assert!(pass.live("ns", "k", "a", 1));
        let deleted: Vec<String> = pass.orphans().into_iter().map(|r| r.namespace).collect();
        assert_eq!(deleted, ["other"]);
    }
}
