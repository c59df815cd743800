//! The Handoff loop: counts content revisions into `status`, adds the
//! `project` / `repo` / `kind` labels an object arrived without, announces
//! superseded revisions as Events and keeps the PostgreSQL mirror's row
//! current.
//!
//! Decisions are pure functions ([`count`],
//! [`approx_tokens`], [`metadata_plan`]); the reconcile is the
//! thin I/O shell around them. Its order is chosen so nothing is counted
//! twice and nothing is lost:
//!
//! 1. a terminating object: nothing (its delete event removes the row,
//!    see "Deletes" below);
//! 2. the object: the cached copy holds no body ([`slim`], see "Memory"
//!    below); when the reconcile must count or mirror ([`needs_body`]) it
//!    GETs the object (bounded by `--apiserver-timeout`), otherwise only
//!    the metadata step (7) runs;
//! 3. count: the new status (revision, updatedAt, sizes, the `Linted`
//!    condition of [`handoff_core::lint`] under the namespace's budget, read
//!    through the cache of [`handoff_kube::settings`] — a request at most once per
//!    namespace per [`handoff_kube::settings::BUDGET_TTL`]) is computed;
//! 4. the mirror row of that status is upserted (rows never move
//!    backwards, so a retry or a stale copy is harmless) and the `Mirrored`
//!    condition set from the outcome;
//! 5. status: one merge patch of the status subresource *carrying the
//!    resourceVersion that was read*, so a reconcile working on a stale
//!    cached copy gets 409 and retries instead of counting a revision twice;
//! 6. the `Superseded` Event, only after that write succeeded (a series
//!    per object and reason, counted in memory and written once per
//!    `--event-refresh`: see [`super::events`]); a creation has no Event
//!    (status revision 1, `updatedAt`, the mirror's history and the audit
//!    log record it);
//! 7. metadata (labels): a server-side apply with the
//!    controller's own field manager that names only the labels the object
//!    lacks or that the controller already owns, so it never fights a
//!    writer's labels (kubectl, GitOps, the bridge). The bridge's apply
//!    carries the labels ([`handoff_kube::store`]), so a bridge-written handoff
//!    needs none ([`metadata_plan`] is `None`);
//! 8. the revision is appended to the mirror's history only now that the
//!    apiserver holds it, so a number is never recorded for other content
//!    (the same statement drops the key's revisions beyond
//!    `--history-revisions`);
//!    a failed mirror write fails the reconcile (retried with backoff)
//!    after the status was written, so status never waits for PostgreSQL.
//!
//! Writes per agent write of new content: the agent's apply and this
//! loop's status write — two; plus, for an update, the `Superseded`
//! series' share (one create per series, then at most one update per
//! refresh interval). A writer that leaves the labels out (kubectl by
//! hand) costs a third, the metadata apply, once per handoff.
//!
//! Memory: the watch cache is most of the controller's memory, and a body
//! (up to 1 MiB, typically kilobytes) is most of an object, so the cache
//! keeps no body ([`slim`]). The alternative, kube's metadata-only watch,
//! would keep even less, but without `status`: every reconcile — and, after
//! a restart, every object — would need a GET just to learn whether it is
//! counted and mirrored. With the full watch slimmed before the reflector
//! stores it, a restart over counted, mirrored objects reads their status
//! and `Mirrored` condition from the cache and fetches nothing; only a
//! changed object (one GET per change) or one whose mirror row is not known
//! current is fetched, and the fetched body lives only while its
//! reconcile runs. (The `Mirrored` condition is trusted across restarts
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
//! second of the write. Before that, [`handoff_kube::store::updated_at`] falls back
//! to the write time in managedFields; afterwards both the bridge and the
//! mirror order by this same value.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition, FieldsV1, ManagedFieldsEntry, Time,
};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::Context;
use handoff_core::api::naming::labels_for;
use handoff_core::api::{Handoff, HandoffPhase, HandoffSpec, HandoffStatus, set_condition};
use handoff_core::names::CONTROLLER_FIELD_MANAGER;
use handoff_kube::loops::{Categorized, Category, quoted};
use handoff_kube::runner::{Plumbing, Reconcile};
use handoff_kube::settings::Budget;
use handoff_mirror::batch::Batcher;
use handoff_mirror::{MirrorError, Row};

/// Characters of a key quoted in an Event's note (keys may be 1 KiB; the
/// whole note may not).
pub(crate) const NOTE_KEY_CHARS: usize = 200;

/// The condition that reports the mirror row.
pub const MIRRORED: &str = "Mirrored";
pub use handoff_core::lint::{BYTES_PER_TOKEN, approx_tokens};

/// The condition that reports the quality lint of the body.
pub const LINTED: &str = "Linted";

/// Why a reconcile failed (retried by the backoff of [`handoff_kube::loops`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The apiserver refused or could not be reached.
    #[error("apiserver: {0}")]
    Kube(#[from] kube::Error),
    /// The mirror could not be written.
    #[error("mirror: {0}")]
    Mirror(#[from] MirrorError),
    /// The object has no namespace (Handoffs are namespaced).
    #[error("handoff {0} has no namespace")]
    NoNamespace(String),
    /// The apiserver did not answer within `--apiserver-timeout`.
    #[error("apiserver: no answer within {0:?}")]
    ApiTimeout(Duration),
}

impl Categorized for Error {
    fn category(&self) -> Category {
        match self {
            Self::Kube(err) => Category::of_kube(err),
            Self::Mirror(err) => err.category(),
            Self::NoNamespace(_) => Category::Invalid,
            Self::ApiTimeout(_) => Category::Transient,
        }
    }
}

/// A time truncated to whole seconds (what `metav1.Time` keeps).
pub(crate) fn whole_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// What counting found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
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
/// revision goes up by one only when the content hash differs. The
/// `Linted` condition is set from [`linted_condition`] under `budget`;
/// other conditions are carried over unchanged.
pub fn count(
    spec: &HandoffSpec,
    current: Option<&HandoffStatus>,
    generation: Option<i64>,
    budget: &Budget,
    now: Timestamp,
) -> (HandoffStatus, Change) {
    let hash = spec.content_hash();
    let current = current.cloned().unwrap_or_default();
    let (revision, updated_at, change) = match (current.revision, &current.content_hash) {
        (Some(rev), Some(h)) if *h == hash => (rev, current.updated_at.clone(), Change::Unchanged),
        (Some(rev), _) => (
            rev + 1,
            Some(Time(whole_seconds(now))),
            Change::Superseded {
                from: rev,
                to: rev + 1,
            },
        ),
        (None, _) => (1, Some(Time(whole_seconds(now))), Change::Created),
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

/// The `Linted` condition: `True` (reason `NoWarnings`) when the body
/// passes [`handoff_core::lint::lint`] under the namespace's budget, else `False`
/// (reason `Warnings`) with every warning in the message — the same
/// warnings `write_handoff` returns, for writers that do not use the bridge.
/// A bad budget setting (the default was used) ends the message.
pub(crate) fn linted_condition(
    body: &str,
    generation: Option<i64>,
    budget: &Budget,
    now: Timestamp,
) -> Condition {
    let warnings = handoff_core::lint::lint(body, budget.tokens);
    let (status, reason, mut message) = if warnings.is_empty() {
        (
            "True",
            "NoWarnings",
            "the body passes the handoff lint".to_owned(),
        )
    } else {
        ("False", "Warnings", handoff_core::lint::summary(&warnings))
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

/// The label keys the controller's field manager owns on `h` (from the
/// managedFields of its server-side applies).
fn owned_labels(h: &Handoff) -> Vec<String> {
    h.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.manager.as_deref() == Some(CONTROLLER_FIELD_MANAGER) && m.subresource.is_none()
        })
        .filter_map(|m| m.fields_v1.as_ref())
        .filter_map(|f| f.0.get("f:metadata")?.get("f:labels")?.as_object())
        .flat_map(|labels| labels.keys().filter_map(|k| k.strip_prefix("f:")))
        .map(str::to_owned)
        .collect()
}

/// Drops from a cached copy what no decision reads, so the controller's
/// watch cache holds a few hundred bytes per handoff, whatever its body:
/// the body (a reconcile that needs it fetches the object, see
/// [`needs_body`]), every annotation (kubectl's last-applied one is a second
/// copy of the body) and the managedFields of other managers; of the
/// controller's own entry only the label keys [`owned_labels`] reads stay.
pub(crate) fn slim(h: &mut Handoff) {
    h.spec.body = String::new();
    h.metadata.annotations = None;
    if let Some(fields) = h.metadata.managed_fields.as_mut() {
        fields.retain(|m| {
            m.manager.as_deref() == Some(CONTROLLER_FIELD_MANAGER) && m.subresource.is_none()
        });
        for entry in fields.iter_mut() {
            let labels = entry
                .fields_v1
                .as_ref()
                .and_then(|f| f.0.get("f:metadata")?.get("f:labels").cloned());
            *entry = ManagedFieldsEntry {
                manager: entry.manager.take(),
                fields_v1: labels.map(|labels| {
                    FieldsV1(serde_json::json!({ "f:metadata": { "f:labels": labels } }))
                }),
                ..ManagedFieldsEntry::default()
            };
        }
    }
}

/// Whether the reconcile of `h` (a slimmed cached copy, see [`slim`]) needs
/// the object's body, so must fetch the object: when it must count (never
/// counted, or not at this generation: the spec changed), or when the
/// mirror row is not known to be current — `mirror` on and the `Mirrored`
/// condition not True for this generation, or `owed` (this process has
/// mirror work for the key that failed: say, the history append after the
/// status write). With the mirror off, a `Mirrored` condition left by an
/// earlier run is to be removed, which rewrites the status. A counted,
/// mirrored object (every one, after a restart) needs nothing but the
/// metadata step: no GET, no write.
pub(crate) fn needs_body(h: &Handoff, mirror: bool, owed: bool) -> bool {
    let generation = h.metadata.generation;
    let Some(status) = h.status.as_ref() else {
        return true;
    };
    let counted = status.observed_generation == generation
        && generation.is_some()
        && status.revision.is_some()
        && status.updated_at.is_some()
        && status.content_hash.is_some()
        && status.phase == Some(HandoffPhase::Current);
    let condition = status.conditions.iter().find(|c| c.type_ == MIRRORED);
    let mirrored = match (mirror, condition) {
        (true, Some(c)) => c.status == "True" && c.observed_generation == generation && !owed,
        (true, None) => false,
        (false, c) => c.is_none(),
    };
    !(counted && mirrored)
}

/// The metadata the controller applies to `h` (the labels it may set), or
/// `None` when `h` already carries exactly that. A label is the
/// controller's to set when the object lacks it or the controller already
/// owns it; a label another writer set is left alone even when it
/// disagrees with the spec.
pub(crate) fn metadata_plan(h: &Handoff) -> Option<serde_json::Value> {
    let current = h.metadata.labels.clone().unwrap_or_default();
    let owned = owned_labels(h);
    let desired = labels_for(
        &h.spec.project,
        h.spec.repo.as_deref(),
        h.spec.kind.as_deref(),
    );
    let labels: BTreeMap<String, String> = desired
        .into_iter()
        .filter(|(k, _)| !current.contains_key(k) || owned.contains(k))
        .collect();
    let owned_now: BTreeMap<String, String> = owned
        .iter()
        .filter_map(|k| current.get(k).map(|v| (k.clone(), v.clone())))
        .collect();
    if labels == owned_now {
        return None;
    }
    let metadata = serde_json::json!({ "name": h.name_any(), "labels": labels });
    Some(serde_json::json!({
        "apiVersion": "handoff.dev/v1alpha1",
        "kind": "Handoff",
        "metadata": metadata,
    }))
}

/// The Handoff loop, run by [`handoff_kube::runner`] with the controller's
/// context: each reconcile is timed and counted.
impl Reconcile for Context {
    type Object = Handoff;
    type Error = Error;

    fn plumbing(&self) -> &Plumbing {
        &self.plumbing
    }

    /// Reconciles one Handoff (see the module docs for the order).
    async fn reconcile(&self, h: &Handoff) -> Result<Action, Error> {
        let started = std::time::Instant::now();
        let result = reconcile_inner(h, self).await;
        self.metrics
            .observe_reconcile(result.is_ok(), started.elapsed());
        result
    }
}

async fn reconcile_inner(cached: &Handoff, ctx: &Context) -> Result<Action, Error> {
    let namespace = cached
        .namespace()
        .ok_or_else(|| Error::NoNamespace(cached.name_any()))?;
    let api: Api<Handoff> = Api::namespaced(ctx.client.clone(), &namespace);
    let name = cached.name_any();

    if cached.metadata.deletion_timestamp.is_some() {
        // Terminating: its delete event removes the mirror row.
        return Ok(Action::await_change());
    }

    let owed = ctx
        .metrics
        .is_mirror_pending(&(namespace.clone(), cached.spec.handoff_key.clone()));
    let settled = !needs_body(cached, ctx.writes.is_some(), owed);
    let fetched;
    let h = if settled {
        cached
    } else {
        match within(ctx, api.get_opt(&name)).await?? {
            Some(full) if full.uid() == cached.uid() => {
                fetched = full;
                &fetched
            }
            // Deleted (or re-created) since: its watch event decides.
            _ => return Ok(Action::await_change()),
        }
    };

    let now = ctx.clock.now();
    let (mut status, change) = match settled {
        // Counted at this generation: counting again would find the same.
        true => (h.status.clone().unwrap_or_default(), Change::Unchanged),
        false => {
            let budget = ctx.budgets.budget(&namespace).await;
            count(
                &h.spec,
                h.status.as_ref(),
                h.metadata.generation,
                &budget,
                now,
            )
        }
    };
    let mut counted = h.clone();
    counted.status = Some(status.clone());
    let mirrored = match &ctx.writes {
        None => {
            status.conditions.retain(|c| c.type_ != MIRRORED);
            Ok(None)
        }
        // The row is current (the `Mirrored` condition, nothing owed).
        Some(_) if settled => Ok(None),
        Some(mirror) => {
            // The row may go first: rows never move backwards, so if the
            // status write below loses a race the next reconcile corrects it.
            let result = mirror_row(ctx, mirror, &counted).await;
            let condition = match &result {
                Ok((revision, _)) => mirrored_condition(
                    true,
                    format!("the mirror row holds revision {revision}"),
                    h.metadata.generation,
                    now,
                ),
                Err(err) => mirrored_condition(false, err.to_string(), h.metadata.generation, now),
            };
            set_condition(&mut status.conditions, condition);
            result.map(|(_, pending)| pending)
        }
    };
    let mut current = counted;
    if h.status.as_ref() != Some(&status) {
        match within(
            ctx,
            write_status(&api, &name, h.resource_version(), &status),
        )
        .await?
        {
            Ok(written) => current = written,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // A newer version exists: its watch event reconciles it.
                return Ok(Action::requeue(Duration::from_secs(1)));
            }
            Err(err) => return Err(err.into()),
        }
        // A creation has no Event: status revision 1, `updatedAt`, the
        // mirror's history and the audit log record it.
        if let Change::Superseded { from, to } = &change {
            let note = format!(
                "Handoff {}: revision {from} superseded by revision {to} (written by {})",
                quoted(&h.spec.handoff_key, NOTE_KEY_CHARS),
                writer(&h.spec)
            );
            ctx.event(&current, "Superseded", note).await;
        }
        if change != Change::Unchanged {
            ctx.metrics.count_revision();
        }
    }

    if let Some(plan) = metadata_plan(&current) {
        let params = PatchParams::apply(CONTROLLER_FIELD_MANAGER);
        match within(ctx, api.patch(&name, &params, &Patch::Apply(&plan))).await? {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {
                tracing::info!(handoff = %handoff_kube::store::describe(h), message = %s.message, "labels owned by another writer are left alone");
            }
            Err(err) => return Err(err.into()),
        }
    }
    if let (Some(mirror), Some(row)) = (&ctx.writes, mirrored?) {
        record_revision(ctx, mirror, &row).await?;
    }
    Ok(Action::await_change())
}

/// Writes the row of `h` into the mirror (in a batch); returns the
/// revision and the row whose revision is still to be recorded in the
/// history.
async fn mirror_row(
    ctx: &Context,
    mirror: &Batcher,
    h: &Handoff,
) -> Result<(i64, Option<Row>), MirrorError> {
    let Some(row) = Row::of(h)? else {
        return Ok((0, None));
    };
    let key = (row.namespace.clone(), row.handoff_key.clone());
    ctx.metrics.mirror_pending(&key);
    mirror.upsert(&row).await.inspect_err(|_| {
        ctx.metrics.count_mirror_error();
    })?;
    Ok((row.revision, Some(row)))
}

/// Records a revision the apiserver now holds in status, then marks the
/// key caught up.
async fn record_revision(ctx: &Context, mirror: &Batcher, row: &Row) -> Result<(), MirrorError> {
    let key = (row.namespace.clone(), row.handoff_key.clone());
    let dropped = mirror
        .record_revision(row)
        .await
        .inspect_err(|_| ctx.metrics.count_mirror_error())?;
    ctx.metrics.count_history_purged("cap", dropped);
    ctx.metrics.mirror_caught_up(&key);
    Ok(())
}

/// `request` bounded by `--apiserver-timeout`: its own outcome, or
/// [`Error::ApiTimeout`].
async fn within<T>(
    ctx: &Context,
    request: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<Result<T, kube::Error>, Error> {
    tokio::time::timeout(ctx.api_timeout, request)
        .await
        .map_err(|_| Error::ApiTimeout(ctx.api_timeout))
}

/// Deletes the mirror row (and, unless `--keep-history-on-delete`, the
/// history) of each handoff the watch saw deleted, one at a time, until
/// `stop`. A delete that fails (PostgreSQL unavailable) is left to resync,
/// which finds the row orphaned; deletes themselves never wait for it.
pub(crate) async fn delete_rows(
    ctx: Arc<Context>,
    mut deleted: tokio::sync::mpsc::UnboundedReceiver<Handoff>,
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
        let key = (namespace, h.spec.handoff_key.clone());
        match mirror.delete(&key.0, &key.1, &uid).await {
            Ok(gone) => {
                ctx.metrics.count_history_purged("deleted", gone.history);
                ctx.metrics.mirror_caught_up(&key);
            }
            Err(err) => {
                ctx.metrics.count_mirror_error();
                ctx.metrics.mirror_pending(&key);
                tracing::info!(handoff = %handoff_kube::store::describe(&h), error = %err, "the mirror row of a deleted handoff is left to resync");
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

fn writer(spec: &HandoffSpec) -> &str {
    spec.created_by
        .as_deref()
        .filter(|w| !w.is_empty())
        .unwrap_or("an unknown writer")
}

/// A reference to `h` for Events (kept valid after `h` is deleted).
pub fn reference(h: &Handoff) -> ObjectReference {
    ObjectReference {
        api_version: Some(Handoff::api_version(&()).into_owned()),
        kind: Some(Handoff::kind(&()).into_owned()),
        name: h.metadata.name.clone(),
        namespace: h.metadata.namespace.clone(),
        uid: h.metadata.uid.clone(),
        resource_version: h.metadata.resource_version.clone(),
        field_path: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::names::BRIDGE_FIELD_MANAGER;

    fn spec(body: &str) -> HandoffSpec {
        HandoffSpec {
            handoff_key: "k".into(),
            project: "p".into(),
            repo: Some("org/repo".into()),
            kind: Some("issue".into()),
            body: body.into(),
            created_by: Some("alice".into()),
        }
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).expect("ts")
    }

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
        );
        assert_eq!(change, Change::Superseded { from: 4, to: 5 });
        let (_, again) = count(
            &spec("x"),
            Some(&status),
            None,
            &Budget::default_budget(),
            at(2),
        );
        assert_eq!(again, Change::Unchanged);
    }

    #[test]
    fn updated_at_is_whole_seconds() {
        let t = Timestamp::from_millisecond(1_500).expect("ts");
        let (status, _) = count(&spec("x"), None, None, &Budget::default_budget(), t);
        assert_eq!(status.updated_at, Some(Time(at(1))));
    }

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

    fn object(labels: &[(&str, &str)], owned: &[&str]) -> Handoff {
        let mut h = Handoff::new("n", spec("b"));
        h.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        if !owned.is_empty() {
            let fields: serde_json::Map<String, serde_json::Value> = owned
                .iter()
                .map(|k| (format!("f:{k}"), serde_json::json!({})))
                .collect();
            h.metadata.managed_fields = Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
                    manager: Some(CONTROLLER_FIELD_MANAGER.into()),
                    operation: Some("Apply".into()),
                    fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
                        serde_json::json!({"f:metadata": {"f:labels": fields}}),
                    )),
                    ..Default::default()
                },
            ]);
        }
        h
    }

    #[test]
    fn labels_are_added_only_where_missing_or_owned() {
        let plan = metadata_plan(&object(&[], &[])).expect("labels missing");
        assert_eq!(
            plan["metadata"]["labels"],
            serde_json::json!({"project": "p", "kind": "issue"})
        );

        let writer_set = object(&[("project", "other"), ("kind", "issue")], &[]);
        let plan = metadata_plan(&writer_set);
        assert!(plan.is_none(), "a writer's labels are left alone: {plan:?}");

        let ours = object(&[("project", "p"), ("kind", "issue")], &["project", "kind"]);
        assert!(metadata_plan(&ours).is_none(), "already applied");

        let stale = object(
            &[("project", "old"), ("kind", "issue")],
            &["project", "kind"],
        );
        let plan = metadata_plan(&stale).expect("our label follows the spec");
        assert_eq!(plan["metadata"]["labels"]["project"], "p");
    }

    /// kubectl's client-side apply record.
    const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

    #[test]
    fn a_writer_that_applies_the_labels_gets_no_metadata_write() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
        // What the bridge (`store::desired`) and the scaling bench apply:
        // the spec and its labels, under the writer's own field manager.
        for (manager, spec) in [
            (BRIDGE_FIELD_MANAGER, spec("b")),
            (
                "bench-writer",
                HandoffSpec {
                    repo: None,
                    kind: None,
                    ..spec("b")
                },
            ),
        ] {
            let labels = labels_for(&spec.project, spec.repo.as_deref(), spec.kind.as_deref());
            let fields: serde_json::Map<String, serde_json::Value> = labels
                .keys()
                .map(|k| (format!("f:{k}"), serde_json::json!({})))
                .collect();
            let mut h = Handoff::new("n", spec);
            h.metadata.labels = Some(labels);
            h.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
                manager: Some(manager.into()),
                operation: Some("Apply".into()),
                fields_v1: Some(FieldsV1(
                    serde_json::json!({"f:metadata": {"f:labels": fields}, "f:spec": {}}),
                )),
                ..Default::default()
            }]);
            assert_eq!(metadata_plan(&h), None, "{manager}");
            // The same object without its labels (kubectl by hand) gets them.
            h.metadata.labels = None;
            assert!(metadata_plan(&h).is_some(), "{manager} without labels");
        }
    }

    #[test]
    fn slimming_keeps_what_the_plan_reads() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let entry = |manager: &str, subresource: Option<&str>| ManagedFieldsEntry {
            manager: Some(manager.into()),
            subresource: subresource.map(Into::into),
            ..Default::default()
        };
        for (labels, owned) in [
            (vec![], vec![]),
            (vec![("project", "other")], vec![]),
            (
                vec![("project", "old"), ("kind", "issue")],
                vec!["project", "kind"],
            ),
        ] {
            let mut h = object(&labels, &owned);
            let before = metadata_plan(&h);
            let mut fields = h.metadata.managed_fields.take().unwrap_or_default();
            fields.extend([
                entry(BRIDGE_FIELD_MANAGER, None),
                entry(CONTROLLER_FIELD_MANAGER, Some("status")),
            ]);
            h.metadata.managed_fields = Some(fields);
            h.metadata.annotations = Some(
                [
                    (LAST_APPLIED.to_owned(), "{…}".to_owned()),
                    ("keep".into(), "me".into()),
                ]
                .into(),
            );
            slim(&mut h);
            assert_eq!(metadata_plan(&h), before, "{labels:?} {owned:?}");
            assert_eq!(h.spec.body, "", "the body is fetched when needed");
            assert_eq!(h.spec.handoff_key, "k", "the delete watch reads the key");
            let kept = h.metadata.managed_fields.clone().unwrap_or_default();
            assert_eq!(kept.len(), usize::from(!owned.is_empty()));
            assert!(
                kept.iter()
                    .all(|m| m.manager.as_deref() == Some(CONTROLLER_FIELD_MANAGER)
                        && m.subresource.is_none())
            );
            assert_eq!(h.metadata.annotations, None);
            assert!(
                kept.iter()
                    .all(|m| m.time.is_none() && m.operation.is_none()),
                "only the label keys of the controller's entry stay: {kept:?}"
            );
        }
    }

    #[test]
    fn the_body_is_needed_to_count_or_to_mirror() {
        let condition = |ok: bool, generation: i64| {
            mirrored_condition(ok, String::new(), Some(generation), at(1))
        };
        let object = |generation: i64, status: Option<(i64, Vec<Condition>)>| {
            let mut h = Handoff::new("n", spec("b"));
            h.metadata.generation = Some(generation);
            h.status = status.map(|(observed, conditions)| {
                let (mut counted, _) = count(
                    &h.spec,
                    None,
                    Some(observed),
                    &Budget::default_budget(),
                    at(1),
                );
                counted.conditions = conditions;
                counted
            });
            h
        };
        let legacy = {
            let mut h = object(2, Some((2, vec![condition(true, 2)])));
            if let Some(s) = h.status.as_mut() {
                s.content_hash = None;
            }
            h
        };
        let cases = [
            // (object, mirror on, owed, needs the body, why)
            (object(1, None), true, false, true, "never counted"),
            (
                object(2, Some((1, vec![condition(true, 1)]))),
                true,
                false,
                true,
                "the spec changed",
            ),
            (
                legacy,
                true,
                false,
                true,
                "a status without a hash is recounted",
            ),
            (
                object(2, Some((2, vec![condition(true, 2)]))),
                true,
                false,
                false,
                "counted and mirrored",
            ),
            (
                object(2, Some((2, vec![condition(true, 2)]))),
                true,
                true,
                true,
                "mirror work owed",
            ),
            (
                object(2, Some((2, vec![condition(false, 2)]))),
                true,
                false,
                true,
                "the mirror failed",
            ),
            (
                object(2, Some((2, vec![condition(true, 1)]))),
                true,
                false,
                true,
                "mirrored an older generation",
            ),
            (
                object(2, Some((2, vec![]))),
                true,
                false,
                true,
                "never mirrored",
            ),
            (
                object(2, Some((2, vec![]))),
                false,
                false,
                false,
                "counted, no mirror",
            ),
            (
                object(2, Some((2, vec![condition(true, 2)]))),
                false,
                false,
                true,
                "a stale condition to drop",
            ),
        ];
        for (h, mirror, owed, want, why) in cases {
            assert_eq!(needs_body(&h, mirror, owed), want, "{why}");
        }
    }

    #[test]
    fn events_regard_the_handoff_at_its_version() {
        let mut h = Handoff::new("obj", spec("b"));
        h.metadata.namespace = Some("ns".into());
        h.metadata.uid = Some("u-1".into());
        h.metadata.resource_version = Some("42".into());
        let r = reference(&h);
        assert_eq!(r.kind.as_deref(), Some("Handoff"));
        assert_eq!(r.api_version.as_deref(), Some("handoff.dev/v1alpha1"));
        assert_eq!(r.namespace.as_deref(), Some("ns"));
        assert_eq!(r.name.as_deref(), Some("obj"));
        assert_eq!(r.uid.as_deref(), Some("u-1"));
        assert_eq!(r.resource_version.as_deref(), Some("42"));
    }
}
