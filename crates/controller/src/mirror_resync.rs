//! The mirror's resync loop: the mirror is compared with the apiserver at the start
//! of each leadership and every `--mirror-resync-interval`, and repaired by
//! the pure plan of [`handoff_mirror::resync`]. An orphan row is deleted
//! with its object's history (unless `--keep-history-on-delete`), and past
//! revisions older than `--history-max-age` are dropped. An object whose
//! name is not derived from its key ([`handoff_core::handoff::canonical`]:
//! a twin or a squat, made where nothing checked the name) is never
//! mirrored: a pass forgets its row and history, whatever the retention
//! (they may have been written before the mirror refused such objects),
//! and does not count it as its key's object, so a row it replaced is
//! rewritten from the key's current handoff, or deleted. It lives here,
//! not in the mirror, because it updates the controller's metrics (the
//! keys the mirror no longer owes work).

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, ListParams};
use kube::core::DeserializeGuard;
use tokio_util::sync::CancellationToken;

use crate::handoff::state::HandoffLoop;
use handoff_core::api::Handoff;
use handoff_core::liveness::PASS;
use handoff_core::loops::{Category, delay};
use handoff_kube::cluster::Pages;
use handoff_mirror::resync::{Pass, ResyncError};
use handoff_mirror::{Mirror, Row};

/// One pass; returns `(written, deleted)`. It streams (see
/// [`handoff_mirror::resync`]): each page of objects is compared and its
/// rows written before the next is listed.
pub(crate) async fn resync_once(
    ctx: &HandoffLoop,
    mirror: &Mirror,
    api: &Api<DeserializeGuard<Handoff>>,
    namespace: Option<&str>,
) -> Result<(usize, usize), ResyncError> {
    let mut rows = mirror.versions(namespace).await?;
    // Rows of namespaces another controller manages are its business.
    rows.retain(|row| ctx.plumbing.scope().includes(&row.namespace));
    let mut pass = Pass::new(rows);
    let (mut written, mut deleted) = (0, 0);
    let mut forget = Vec::new();
    let mut pages = Pages::new(api, &ListParams::default());
    loop {
        let page = tokio::time::timeout(ctx.api_timeout, pages.next())
            .await
            .map_err(|_| ResyncError::ApiTimeout(ctx.api_timeout))??;
        let Some(page) = page else { break };
        let mut write = Vec::new();
        for guard in page {
            let h = match guard.0 {
                Ok(h) => h,
                Err(invalid) => {
                    pass.unreadable(
                        invalid.metadata.namespace.unwrap_or_default(),
                        invalid.metadata.name.unwrap_or_default(),
                    );
                    continue;
                }
            };
            let namespace = h.metadata.namespace.clone().unwrap_or_default();
            if !ctx.plumbing.scope().includes(&namespace) {
                continue;
            }
            let key = h.spec.handoff_key.as_str();
            if !handoff_core::handoff::canonical(&h) {
                if let Some(uid) = h.metadata.uid.clone() {
                    forget.push((namespace, key.to_owned(), uid));
                }
                continue;
            }
            let counted = h.status.as_ref().and_then(|s| s.revision);
            match (
                h.metadata.deletion_timestamp.is_some(),
                counted,
                h.metadata.uid.as_deref(),
            ) {
                (false, Some(revision), Some(uid)) => {
                    if pass.live(&namespace, key, uid, revision) {
                        match Row::of(&h) {
                            Ok(Some(row)) => write.push(row),
                            Ok(None) => {}
                            Err(err) => tracing::warn!(error = %err, "skipped in resync"),
                        }
                    }
                }
                // Being deleted, or not counted yet (its reconcile writes
                // the row): any row stays as it is.
                _ => pass.keep(&namespace, key),
            }
        }
        for row in &write {
            if mirror.upsert(row).await? {
                written += 1;
                ctx.metrics.count_repair("written");
            }
            let dropped = mirror.record_revision(row).await?;
            ctx.metrics.count_history_purged("cap", dropped);
            ctx.backlog
                .caught_up(&(row.namespace.clone(), row.handoff_key.clone()));
        }
    }
    for (namespace, key, uid) in forget {
        let gone = mirror.forget(&namespace, &key, &uid).await?;
        ctx.metrics
            .count_history_purged("noncanonical", gone.history);
        if gone.row {
            deleted += 1;
            ctx.metrics.count_repair("deleted");
        }
    }
    for row in pass.orphans() {
        let gone = mirror
            .delete(&row.namespace, &row.handoff_key, &row.id)
            .await?;
        ctx.metrics.count_history_purged("deleted", gone.history);
        ctx.backlog
            .caught_up(&(row.namespace.clone(), row.handoff_key.clone()));
        if gone.row {
            deleted += 1;
            ctx.metrics.count_repair("deleted");
        }
    }
    let expired = mirror.expire_history(namespace, ctx.clock.now()).await?;
    ctx.metrics.count_history_purged("age", expired);
    ctx.metrics.count_resync();
    Ok((written, deleted))
}

/// Resyncs now and every `interval` until `stop`; a failed pass (say,
/// PostgreSQL down) is retried after the loops' backoff
/// ([`handoff_core::loops::delay`]: doubling from 1 s, at most a minute),
/// never later than `interval`.
pub(crate) async fn run(
    ctx: Arc<HandoffLoop>,
    mirror: Arc<Mirror>,
    api: Api<DeserializeGuard<Handoff>>,
    namespace: Option<String>,
    interval: Duration,
    stop: CancellationToken,
) {
    let progress = ctx.metrics.liveness.track("resync", interval);
    let mut failures = 0u32;
    loop {
        let attempt = progress.start(PASS.into());
        let result = resync_once(&ctx, &mirror, &api, namespace.as_deref()).await;
        attempt.end(result.is_ok());
        let pause = match result {
            Ok((written, deleted)) => {
                failures = 0;
                if written + deleted > 0 {
                    tracing::info!(written, deleted, "mirror resync repaired rows");
                }
                interval
            }
            Err(err) => {
                ctx.metrics.count_mirror_error();
                failures = failures.saturating_add(1);
                let retry = delay(failures, Category::Transient);
                tracing::warn!(error = %err, retry_s = retry.as_secs(), "mirror resync failed");
                retry.min(interval)
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}
