//! Resync: the mirror is compared with the apiserver at the start of each
//! leadership and every `--mirror-resync-interval`, and repaired — a CR
//! without a row gets one, a row without a CR is deleted, a stale row
//! (older revision, or another incarnation of the key) is rewritten. This
//! is also how the mirror catches up after PostgreSQL was down or the
//! controller was stopped: nothing depends on having seen every event.
//!
//! Rows are read *before* the objects are listed: a row written after the
//! read is not in the comparison (so never taken for an orphan), and an
//! object deleted after the read is gone from the list (so its row is
//! rightly deleted). Orphans are deleted by `(namespace, key, uid)`, so a
//! row of a newer incarnation is never removed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, ListParams};
use tokio_util::sync::CancellationToken;

use super::{Mirror, MirrorError, Row, RowVersion, is_stale};
use crate::api::Handoff;
use crate::controller::Context;

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

/// One pass; returns `(written, deleted)`.
pub async fn resync_once(
    ctx: &Context,
    mirror: &Mirror,
    api: &Api<Handoff>,
    namespace: Option<&str>,
) -> Result<(usize, usize), ResyncError> {
    let rows = mirror.versions(namespace).await?;
    let mut current = Vec::new();
    let mut terminating = HashSet::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await?;
        for h in &page.items {
            let key = (
                h.metadata.namespace.clone().unwrap_or_default(),
                h.spec.handoff_key.clone(),
            );
            if h.metadata.deletion_timestamp.is_some() {
                terminating.insert(key);
                continue;
            }
            match Row::of(h) {
                Ok(Some(row)) => current.push(row),
                // Not counted yet: its reconcile writes the row; keep any row.
                Ok(None) => {
                    terminating.insert(key);
                }
                Err(err) => tracing::warn!(error = %err, "skipped in resync"),
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    let plan = plan(&rows, current, &terminating);
    let (mut written, mut deleted) = (0, 0);
    for row in &plan.write {
        if mirror.upsert(row).await? {
            written += 1;
            ctx.metrics.count_repair("written");
        }
        mirror.record_revision(row).await?;
        if let Ok(mut m) = ctx.mirrored.lock() {
            m.insert(
                (row.namespace.clone(), row.handoff_key.clone()),
                (row.id.clone(), row.revision),
            );
        }
    }
    for row in &plan.delete {
        if mirror
            .delete(&row.namespace, &row.handoff_key, Some(&row.id))
            .await?
        {
            deleted += 1;
            ctx.metrics.count_repair("deleted");
        }
    }
    ctx.metrics.count_resync();
    Ok((written, deleted))
}

/// Resyncs now and every `interval` until `stop`; a failed pass (say,
/// PostgreSQL down) is retried with a doubling pause up to `interval`.
pub async fn run(
    ctx: Arc<Context>,
    mirror: Arc<Mirror>,
    api: Api<Handoff>,
    namespace: Option<String>,
    interval: Duration,
    stop: CancellationToken,
) {
    let mut retry = Duration::from_secs(1);
    loop {
        let pause = match resync_once(&ctx, &mirror, &api, namespace.as_deref()).await {
            Ok((written, deleted)) => {
                retry = Duration::from_secs(1);
                if written + deleted > 0 {
                    tracing::info!(written, deleted, "mirror resync repaired rows");
                }
                interval
            }
            Err(err) => {
                ctx.metrics.count_mirror_error();
                tracing::warn!(error = %err, retry_s = retry.as_secs(), "mirror resync failed");
                let pause = retry.min(interval);
                retry = (retry * 2).min(Duration::from_secs(60));
                pause
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
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
