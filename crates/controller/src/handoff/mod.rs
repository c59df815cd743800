//! The Handoff loop: counts content revisions into `status`, adds the
//! `project` / `repo` / `kind` labels an object arrived without, announces
//! superseded revisions as Events and keeps the PostgreSQL mirror's row
//! current.
//!
//! Only the current handoff of a key — the object whose name is derived
//! from its key ([`handoff_core::handoff::canonical`]) — is mirrored. Another
//! (a *twin*: a name of its own and another object's key; a *squat*: the
//! name of one key holding another key), made where nothing checked the
//! name, is reported instead: its `KeyBound` condition is False (reason
//! `NameNotDerivedFromKey`, the message names the expected name and how to
//! remove it), one Warning Event says so, and the
//! `noncanonical_handoffs` gauge counts it; it has no `Mirrored` condition
//! and no row (resync forgets any it had), and its revisions announce no
//! `Superseded` Event (they are not the key's).
//!
//! One reconcile is observe → [`handoff_core::handoff::plan`] → apply:
//!
//! - **observe**: the cached copy holds no body
//!   ([`handoff_core::handoff::cached`], see
//!   "Memory" below); when the object must be counted or mirrored
//!   ([`handoff_core::handoff::plan::cached_plan`]: not counted at this generation, its `Mirrored`
//!   condition not True for it, or mirror work for its key owed in the
//!   loop's [`crate::backlog::Backlog`]) the reconcile takes the whole
//!   object its watch event delivered, when it is still held for it
//!   ([`watched`]), or else GETs it (bounded by
//!   `--apiserver-timeout`), and reads the namespace's lint budget (through
//!   the cache of [`handoff_kube::settings`]: a request at most once per
//!   namespace per [`handoff_kube::settings::BUDGET_TTL`]); the clock says
//!   when.
//! - **plan** (pure, [`handoff_core::handoff::plan`]): the counted status, then, given the row
//!   write's outcome, every effect: the status patch, the `Superseded`
//!   Event, the labels, the history append, whether to retry.
//! - **apply**, in an order chosen so nothing is counted twice and nothing
//!   is lost: the mirror row first (rows never move backwards, so a retry
//!   or a stale copy is harmless), its outcome the `Mirrored` condition;
//!   the status, one merge patch of the status subresource *carrying the
//!   resourceVersion that was read*, so a reconcile working on a stale
//!   copy gets 409 and retries instead of counting a revision twice; the
//!   `Superseded` Event only after that write succeeded (a series per
//!   object and reason, written once per `--event-refresh`: see
//!   [`super::events`]); the labels, a server-side apply with the
//!   controller's own field manager naming only the labels the object
//!   lacks or the controller already owns, so it never fights a writer's
//!   labels (the bridge's apply carries them, so a bridge-written handoff
//!   needs none); the history append only now that the apiserver holds the
//!   revision (the same statement drops the key's revisions beyond
//!   `--history-revisions`); last, a failed row write fails the reconcile
//!   (retried with backoff), so status never waits for PostgreSQL.
//!
//! Writes per agent write of new content: the agent's apply and this
//! loop's status write — two; plus, for an update, the `Superseded`
//! series' share (one create per series, then at most one update per
//! refresh interval). A writer that leaves the labels out (kubectl by
//! hand) costs a third, the metadata apply, once per handoff.
//!
//! Memory: the watch cache is most of the controller's memory, and a body
//! (up to 1 MiB, typically kilobytes) is most of an object, so the cache
//! keeps no body ([`handoff_core::handoff::cached`]). The alternative, kube's metadata-only watch,
//! would keep even less, but without `status`: every reconcile — and, after
//! a restart, every object — would need a GET just to learn whether it is
//! counted and mirrored. With the full watch made compact before the
//! reflector stores it, a restart over counted, mirrored objects reads their status
//! and `Mirrored` condition from the cache and fetches nothing; only a
//! changed object or one whose mirror row is not known current is
//! fetched, and the fetched body lives only while its reconcile runs. A
//! changed object's watch event carries it whole: it is held until its
//! reconcile takes it, at most [`watched::HELD_BYTES`] of them in all
//! (past that, the reconcile GETs it), which spares the apiserver one GET
//! per agent write. (The `Mirrored` condition is trusted across restarts
//! and leaderships; a row lost meanwhile — a restored or re-created
//! database — is resync's to repair, and resync runs as each leadership
//! starts.) The mirror writes go through the batcher
//! ([`handoff_mirror::batch`]): concurrent reconciles share transactions.
//!
//! PostgreSQL stalls: every mirror call is bounded by `--postgres-timeout`
//! and, once one found PostgreSQL unavailable, the others fail at once
//! until a probe gets an answer ([`handoff_mirror::pool::Gate`]): a stalled
//! server delays only the reconciles in flight when it stalled, by at most
//! that timeout; every later one counts, writes its status (`Mirrored`
//! False), labels and Events at apiserver speed, and is retried with
//! backoff; resync catches the mirror up. Every apiserver request of this
//! loop is bounded by `--apiserver-timeout`.
//!
//! Deletes: the mirror holds no finalizer, so deleting a handoff (or its
//! namespace) never waits for PostgreSQL. The controller deletes the row
//! (and, unless `--keep-history-on-delete`, that uid's history) as soon as
//! its watch sees the delete ([`delete_rows`]); a delete it could not
//! mirror then (PostgreSQL unavailable, the controller stopped, an upsert
//! racing the delete) is an orphan row that the next resync deletes, with
//! its history, by the same statement.
//!
//! `status.updatedAt` is the controller's clock (whole seconds, as
//! `metav1.Time` serializes) when it counted the change — normally within a
//! second of the write. Before that, [`handoff_core::handoff::view::updated_at`] falls back
//! to the write time in managedFields; afterwards both the bridge and the
//! mirror order by this same value.

pub(crate) mod cached;
pub(crate) mod state;
pub(crate) mod watched;

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;

use self::state::HandoffLoop;
use handoff_core::api::{Handoff, HandoffStatus};
use handoff_core::handoff::NAME_NOT_DERIVED;
use handoff_core::handoff::cached::CachedHandoff;
use handoff_core::handoff::plan::{Mirroring, Observed, Plan, cached_plan, counting, plan};
use handoff_core::loops::{Categorized, Category};
use handoff_core::names::CONTROLLER_FIELD_MANAGER;
use handoff_kube::loops::{KubeCategory, describe};
use handoff_kube::runner::{LoopError, Plumbing, Reconcile};
use handoff_mirror::batch::Batcher;
use handoff_mirror::{MirrorError, Row};

/// Why a reconcile failed (retried by the backoff of [`handoff_kube::loops`]):
/// one variant per step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object has no namespace (Handoffs are namespaced).
    #[error("handoff {0} has no namespace")]
    NoNamespace(String),
    /// Reading the whole object (observe).
    #[error("apiserver: {0}")]
    Get(ApiError),
    /// Writing the mirror row.
    #[error("mirror: {0}")]
    WriteRow(MirrorError),
    /// Writing the status.
    #[error("apiserver: {0}")]
    PatchStatus(ApiError),
    /// Applying the labels the object lacks.
    #[error("apiserver: {0}")]
    ApplyLabels(ApiError),
    /// Appending the revision to the mirror's history.
    #[error("mirror: {0}")]
    RecordRevision(MirrorError),
}

/// How an apiserver request of the loop failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The apiserver refused or could not be reached.
    #[error("{0}")]
    Refused(kube::Error),
    /// The apiserver did not answer within `--apiserver-timeout`.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

impl ApiError {
    fn category(&self) -> Category {
        match self {
            Self::Refused(err) => Category::of_kube(err),
            Self::Timeout(_) => Category::Transient,
        }
    }
}

impl Categorized for Error {
    fn category(&self) -> Category {
        match self {
            Self::NoNamespace(_) => Category::Invalid,
            Self::Get(err) | Self::PatchStatus(err) | Self::ApplyLabels(err) => err.category(),
            Self::WriteRow(err) | Self::RecordRevision(err) => err.category(),
        }
    }
}

impl LoopError for Error {
    fn step(&self) -> &'static str {
        match self {
            Self::NoNamespace(_) => "namespace",
            Self::Get(_) => "get",
            Self::WriteRow(_) => "write_row",
            Self::PatchStatus(_) => "patch_status",
            Self::ApplyLabels(_) => "apply_labels",
            Self::RecordRevision(_) => "record_revision",
        }
    }
}

/// The Handoff loop, run by [`handoff_kube::runner`] with its state: each
/// reconcile is timed and counted.
impl Reconcile for HandoffLoop {
    type Object = CachedHandoff;
    type Error = Error;

    fn plumbing(&self) -> &Plumbing {
        &self.plumbing
    }

    /// Reconciles one Handoff (see the module docs for the order).
    async fn reconcile(&self, h: &CachedHandoff) -> Result<Action, Error> {
        let started = std::time::Instant::now();
        let result = reconcile_inner(h, self).await;
        self.metrics
            .observe_reconcile(result.is_ok(), started.elapsed());
        result
    }
}

/// observe → plan → apply (see the module docs).
async fn reconcile_inner(cached: &CachedHandoff, ctx: &HandoffLoop) -> Result<Action, Error> {
    let namespace = cached
        .namespace()
        .ok_or_else(|| Error::NoNamespace(cached.name_any()))?;
    let api: Api<Handoff> = Api::namespaced(ctx.client.clone(), &namespace);
    let owed = ctx.backlog.owes(&(namespace.clone(), cached.key.clone()));
    let mirror = ctx.writes.is_some();
    if let Some(plan) = cached_plan(cached, mirror, owed) {
        return apply(ctx, &api, cached, None, plan, None).await;
    }
    let held = match (cached.uid(), cached.resource_version()) {
        (Some(uid), Some(version)) => ctx.watched.take(&uid, &version),
        _ => None,
    };
    let h = match held {
        Some(h) => h,
        None => match within(ctx, api.get_opt(&cached.name_any()))
            .await
            .map_err(Error::Get)?
        {
            Some(full) if full.uid() == cached.uid() => full,
            // Deleted (or re-created) since: its watch event decides.
            _ => return Ok(Action::await_change()),
        },
    };
    let budget = ctx.budgets.budget(&namespace).await;
    let observed = Observed {
        handoff: &h,
        canonical: cached.canonical,
        budget: &budget,
        mirror,
        now: ctx.clock.now(),
    };
    let counted = counting(&observed);
    let written = match (&ctx.writes, counted.write_row) {
        (Some(writes), true) => Some(write_row(ctx, writes, &h, &counted.status).await),
        _ => None,
    };
    let mirroring = match &written {
        None => Mirroring::Skipped,
        Some(Ok(row)) => Mirroring::Written {
            revision: row.as_ref().map_or(0, |r| r.revision),
            history: row.is_some(),
        },
        Some(Err(err)) => Mirroring::Failed(err.to_string()),
    };
    let plan = plan(&observed, counted, &mirroring);
    apply(ctx, &api, cached, Some(&h), plan, written).await
}

/// Carries out `plan` for `cached` (see the module docs for the order):
/// the status is written conditional on the resourceVersion of `fetched`,
/// the object the plan was made from; `written` is the outcome of the row
/// write made for it, if any.
async fn apply(
    ctx: &HandoffLoop,
    api: &Api<Handoff>,
    cached: &CachedHandoff,
    fetched: Option<&Handoff>,
    plan: Plan,
    written: Option<Result<Option<Row>, MirrorError>>,
) -> Result<Action, Error> {
    let name = cached.name_any();
    if let (Some(status), Some(h)) = (&plan.status, fetched) {
        let current =
            match within(ctx, write_status(api, &name, h.resource_version(), status)).await {
                Ok(current) => current,
                Err(ApiError::Refused(kube::Error::Api(s))) if s.code == 409 => {
                    // A newer version exists: its watch event reconciles it.
                    return Ok(Action::requeue(Duration::from_secs(1)));
                }
                Err(err) => return Err(Error::PatchStatus(err)),
            };
        if let Some(note) = plan.superseded {
            ctx.events.event(&current, "Superseded", note).await;
        }
        if let Some(note) = plan.unbound {
            ctx.events.event(&current, NAME_NOT_DERIVED, note).await;
        }
        if plan.counted {
            ctx.metrics.count_revision();
        }
    }
    if let Some(labels) = &plan.labels {
        let params = PatchParams::apply(CONTROLLER_FIELD_MANAGER);
        match within(ctx, api.patch(&name, &params, &Patch::Apply(labels))).await {
            Ok(_) => {}
            Err(ApiError::Refused(kube::Error::Api(s))) if s.code == 409 => {
                tracing::info!(handoff = %describe(cached), message = %s.message, "labels owned by another writer are left alone");
            }
            Err(err) => return Err(Error::ApplyLabels(err)),
        }
    }
    match (written, &ctx.writes) {
        (Some(Err(err)), _) if plan.retry => Err(Error::WriteRow(err)),
        (Some(Ok(Some(row))), Some(mirror)) if plan.history => {
            record_revision(ctx, mirror, &row)
                .await
                .map_err(Error::RecordRevision)?;
            Ok(Action::await_change())
        }
        _ => Ok(Action::await_change()),
    }
}

/// Writes the row of `h` counted as `status` into the mirror (in a
/// batch), marking its key behind in the backlog first; `None` for an
/// object the mirror has no row for yet.
async fn write_row(
    ctx: &HandoffLoop,
    mirror: &Batcher,
    h: &Handoff,
    status: &HandoffStatus,
) -> Result<Option<Row>, MirrorError> {
    let mut counted = h.clone();
    counted.status = Some(status.clone());
    let Some(row) = Row::of(&counted)? else {
        return Ok(None);
    };
    ctx.backlog
        .behind(&(row.namespace.clone(), row.handoff_key.clone()));
    mirror.upsert(&row).await.inspect_err(|_| {
        ctx.metrics.count_mirror_error();
    })?;
    Ok(Some(row))
}

/// Records a revision the apiserver now holds in status, then marks the
/// key caught up.
async fn record_revision(
    ctx: &HandoffLoop,
    mirror: &Batcher,
    row: &Row,
) -> Result<(), MirrorError> {
    let dropped = mirror
        .record_revision(row)
        .await
        .inspect_err(|_| ctx.metrics.count_mirror_error())?;
    ctx.metrics.count_history_purged("cap", dropped);
    ctx.backlog
        .caught_up(&(row.namespace.clone(), row.handoff_key.clone()));
    Ok(())
}

/// `request` bounded by `--apiserver-timeout`: its own outcome, or
/// [`ApiError::Timeout`].
async fn within<T>(
    ctx: &HandoffLoop,
    request: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, ApiError> {
    tokio::time::timeout(ctx.api_timeout, request)
        .await
        .map_err(|_| ApiError::Timeout(ctx.api_timeout))?
        .map_err(ApiError::Refused)
}

/// Deletes the mirror row (and, unless `--keep-history-on-delete`, the
/// history) of each handoff the watch saw deleted, one at a time, until
/// `stop`. A delete that fails (PostgreSQL unavailable) is left to resync,
/// which finds the row orphaned; deletes themselves never wait for it.
pub(crate) async fn delete_rows(
    ctx: Arc<HandoffLoop>,
    mut deleted: tokio::sync::mpsc::UnboundedReceiver<CachedHandoff>,
    stop: tokio_util::sync::CancellationToken,
) {
    let Some(mirror) = ctx.mirror.clone() else {
        return;
    };
    loop {
        let h = tokio::select! {
            () = stop.cancelled() => return,
            h = deleted.recv() => match h {
                Some(h) => h,
                None => return,
            },
        };
        let (Some(namespace), Some(uid)) = (h.namespace(), h.uid()) else {
            continue;
        };
        if !ctx.plumbing.scope().includes(&namespace) {
            continue;
        }
        let key = (namespace, h.key.clone());
        if !h.canonical {
            // Never mirrored, and its key's work is another object's:
            // only what the mirror may hold of it from before goes.
            if let Err(err) = mirror.forget(&key.0, &key.1, &uid).await {
                ctx.metrics.count_mirror_error();
                tracing::info!(handoff = %describe(&h), error = %err, "what the mirror held of a deleted non-canonical handoff is left to resync");
            }
            continue;
        }
        match mirror.delete(&key.0, &key.1, &uid).await {
            Ok(gone) => {
                ctx.metrics.count_history_purged("deleted", gone.history);
                ctx.backlog.caught_up(&key);
            }
            Err(err) => {
                ctx.metrics.count_mirror_error();
                ctx.backlog.behind(&key);
                tracing::info!(handoff = %describe(&h), error = %err, "the mirror row of a deleted handoff is left to resync");
            }
        }
    }
}

/// Merge-patches the status subresource, conditional on `resource_version`.
async fn write_status(
    api: &Api<Handoff>,
    name: &str,
    resource_version: Option<String>,
    status: &HandoffStatus,
) -> Result<Handoff, kube::Error> {
    let mut body = serde_json::to_value(status).map_err(kube::Error::SerdeError)?;
    if let Some(map) = body.as_object_mut() {
        map.entry("conditions").or_insert(serde_json::json!([]));
    }
    let patch = serde_json::json!({
        "metadata": { "resourceVersion": resource_version },
        "status": body,
    });
    let params = PatchParams {
        field_manager: Some(CONTROLLER_FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    api.patch_status(name, &params, &Patch::Merge(&patch)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_step_names_itself() {
        let kube = crate::test_support::api_error;
        let mirror = || MirrorError::Unavailable(Duration::from_secs(3));
        let timeout = || ApiError::Timeout(Duration::from_secs(5));
        // (error, step, category)
        let cases = [
            (
                Error::NoNamespace("h".into()),
                "namespace",
                Category::Invalid,
            ),
            (
                Error::Get(ApiError::Refused(kube(500))),
                "get",
                Category::Transient,
            ),
            (Error::Get(timeout()), "get", Category::Transient),
            (Error::WriteRow(mirror()), "write_row", Category::Transient),
            (
                Error::PatchStatus(ApiError::Refused(kube(422))),
                "patch_status",
                Category::Invalid,
            ),
            (
                Error::PatchStatus(timeout()),
                "patch_status",
                Category::Transient,
            ),
            (
                Error::ApplyLabels(ApiError::Refused(kube(503))),
                "apply_labels",
                Category::Transient,
            ),
            (
                Error::RecordRevision(mirror()),
                "record_revision",
                Category::Transient,
            ),
        ];
        for (err, step, category) in cases {
            assert_eq!(err.step(), step, "{err}");
            assert_eq!(err.category(), category, "{err}");
        }
        assert_eq!(
            Error::PatchStatus(timeout()).to_string(),
            "apiserver: no answer within 5s",
            "the message is the one before steps"
        );
    }
}
