//! TTL grooming: a handoff whose content was not updated within its
//! project's TTL is deleted — deterministic grooming, next to the refine
//! agent's judgement.
//!
//! The TTL of a project comes from a [`TtlPolicy`]: the project's
//! `BrainstormSchedule.spec.handoffTTL`, else the controller-wide
//! `--default-handoff-ttl` (off by default); see [`crate::schedule::ttl`].
//!
//! Each deletion carries the object's uid and resourceVersion as
//! preconditions, so a handoff rewritten between the list and the delete
//! survives. Each is recorded as a `Groomed` Event on the Handoff itself
//! (its regarding object is the deleted object, in its namespace, so `kubectl
//! get events -n <ns>` shows it) and counted in `handoff_controller_groomed_handoffs_total`.
//! Expiry is judged by the injected [`handoff_core::time::Clock`], never by
//! sleeping; which handoff is deleted, and the Event's note, is decided in
//! [`handoff_core::grooming`].

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};
use kube::core::DeserializeGuard;
use tokio_util::sync::CancellationToken;

use crate::handoff::state::HandoffLoop;
use handoff_core::api::Handoff;
use handoff_core::grooming::{Expiry, expiry};
use handoff_core::liveness::PASS;
use handoff_kube::cluster::Pages;

/// Grooms every `interval` until `stop` is cancelled.
pub(crate) async fn run(
    ctx: Arc<HandoffLoop>,
    api: Api<DeserializeGuard<Handoff>>,
    interval: Duration,
    stop: CancellationToken,
) {
    let progress = ctx.metrics.liveness.track("grooming", interval);
    loop {
        let attempt = progress.start(PASS.into());
        let result = groom_once(&ctx, &api).await;
        attempt.end(result.is_ok());
        if let Err(err) = result {
            tracing::warn!(error = %err, "grooming pass failed; retrying next interval");
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

/// One pass: deletes every expired handoff; returns how many. Objects that
/// do not deserialize are left alone (the Handoff loop reports them).
pub(crate) async fn groom_once(
    ctx: &HandoffLoop,
    api: &Api<DeserializeGuard<Handoff>>,
) -> Result<usize, kube::Error> {
    let now = ctx.clock.now();
    let mut deleted = 0;
    let mut pages = Pages::new(api, &ListParams::default());
    while let Some(page) = pages.next().await? {
        for h in page.iter().filter_map(|guard| guard.0.as_ref().ok()) {
            let namespace = h.namespace().unwrap_or_default();
            if !ctx.plumbing.scope().includes(&namespace) {
                continue;
            }
            let ttl = ctx.ttl.ttl_for(&namespace, &h.spec.project);
            let Some(expired) = expiry(h, ttl, now) else {
                continue;
            };
            if delete(ctx, h, expired).await? {
                deleted += 1;
            }
        }
    }
    Ok(deleted)
}

async fn delete(ctx: &HandoffLoop, h: &Handoff, expiry: Expiry) -> Result<bool, kube::Error> {
    let namespace = h.namespace().unwrap_or_default();
    let api: Api<Handoff> = Api::namespaced(ctx.client.clone(), &namespace);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: h.uid(),
            resource_version: h.resource_version(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(&h.name_any(), &params).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => return Ok(false),
        Err(err) => return Err(err),
    }
    ctx.metrics.count_groomed();
    let note = expiry.note(h);
    tracing::info!(handoff = %handoff_core::handoff::describe(h), "groomed");
    ctx.events.event(h, "Groomed", note).await;
    Ok(true)
}
