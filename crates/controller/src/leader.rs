//! Leader election on a `coordination.k8s.io/v1` Lease, written directly on
//! kube's Lease API (this module) rather than taken from a crate:
//! the maintained crates either compare the Lease's `renewTime` with the
//! local wall clock (so a replica whose clock runs ahead steals a live
//! lease) or pull in a second Kubernetes client stack. This follows
//! client-go's `leaderelection` algorithm instead:
//!
//! - **clock skew**: a candidate never compares another replica's
//!   timestamps with its own clock. It remembers *when it observed* the
//!   lease record change (holder, renewTime, transitions) on its own
//!   monotonic clock, and treats the lease as expired only when the record
//!   has not changed for a whole `leaseDurationSeconds` of local time.
//! - **renew**: the holder renews every `retry_period`; every write is a
//!   `replace` carrying the resourceVersion it read, so two candidates can
//!   never both win the same record (the loser gets 409).
//! - **step down**: a holder that has not renewed successfully within
//!   `renew_deadline` (shorter than the lease duration) stops leading
//!   *before* any other replica may take over — every lease request is
//!   bounded by that deadline, so an apiserver that stops answering cannot
//!   keep a renewal pending past it — and its loops are abandoned at once.
//!   On graceful shutdown it lets in-flight work finish, then releases the
//!   lease (empty holder) so a successor need not wait.
//!
//! The settings and the decision are pure, in [`handoff_core::leader`]
//! ([`LeaseConfig`], [`decide`]); this module reads and writes the Lease.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use handoff_core::leader::{Decision, LeaseConfig, decide};

/// The part of a lease record whose change proves its holder alive.
#[derive(Debug, Clone, PartialEq)]
struct Record {
    holder: Option<String>,
    renew_time: Option<Timestamp>,
    transitions: Option<i32>,
}

/// One replica's view of the lease.
pub(crate) struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    observed: Option<(Record, Instant)>,
}

impl LeaderElector {
    /// An elector for `config`, using `client`.
    pub(crate) fn new(client: Client, config: LeaseConfig) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
        }
    }

    /// Waits until this replica holds the lease (`true`) or `shutdown` is
    /// cancelled (`false`). Each attempt is bounded by the renew deadline,
    /// so an apiserver that stops answering delays, never wedges, it.
    pub(crate) async fn acquire(&mut self, shutdown: &CancellationToken) -> bool {
        loop {
            let attempt = tokio::select! {
                _ = shutdown.cancelled() => return false,
                attempt = tokio::time::timeout(self.config.renew_deadline, self.try_acquire_or_renew()) => attempt,
            };
            match attempt {
                Ok(Ok(true)) => return true,
                Ok(Ok(false)) => {}
                Ok(Err(err)) => {
                    tracing::warn!(error = %err, lease = %self.config.name, "cannot read or write the lease")
                }
                Err(_) => {
                    tracing::warn!(lease = %self.config.name, "the apiserver did not answer a lease request within the renew deadline")
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return false,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
    }

    /// Renews every retry period. Cancels `leading` and returns when the
    /// lease was taken by another replica, or when no renewal succeeded
    /// within the renew deadline — a renewal still waiting for the
    /// apiserver at the deadline counts as failed, so a leader cut off from
    /// the apiserver stops before the lease can expire for the others. On
    /// `shutdown` it cancels `leading` and returns while still holding the
    /// lease: the caller releases it once in-flight work has finished.
    pub(crate) async fn hold(&mut self, leading: &CancellationToken, shutdown: &CancellationToken) {
        let mut renewed = Instant::now();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => {
                    leading.cancel();
                    return;
                }
                _ = leading.cancelled() => return,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
            let left = self.config.renew_deadline.saturating_sub(renewed.elapsed());
            match tokio::time::timeout(left, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => renewed = Instant::now(),
                Ok(Ok(false)) => {
                    tracing::warn!(lease = %self.config.name, "the lease was taken by another replica; stepping down");
                    leading.cancel();
                    return;
                }
                Ok(Err(err)) => {
                    tracing::warn!(error = %err, lease = %self.config.name, "lease renewal failed")
                }
                Err(_) => {}
            }
            if renewed.elapsed() >= self.config.renew_deadline {
                tracing::warn!(lease = %self.config.name, "no renewal within the renew deadline; stepping down");
                leading.cancel();
                return;
            }
        }
    }

    /// Reads the lease and acquires or renews it; `Ok(true)` when we hold it.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = MicroTime(Timestamp::now());
        let seconds = i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(err) => Err(err),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let record = Record {
            holder: spec.holder_identity.clone(),
            renew_time: spec.renew_time.as_ref().map(|t| t.0),
            transitions: spec.lease_transitions,
        };
        let unchanged_for = match &self.observed {
            Some((seen, at)) if *seen == record => at.elapsed(),
            _ => {
                self.observed = Some((record, Instant::now()));
                Duration::ZERO
            }
        };
        let their_duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs)
            .unwrap_or(self.config.lease_duration);
        let decision = decide(
            spec.holder_identity.as_deref(),
            &self.config.identity,
            unchanged_for,
            their_duration,
        );
        let mut next = spec.clone();
        match decision {
            Decision::Wait => return Ok(false),
            Decision::Renew => {}
            Decision::Take => {
                next.holder_identity = Some(self.config.identity.clone());
                next.acquire_time = Some(now.clone());
                next.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            }
        }
        next.renew_time = Some(now);
        next.lease_duration_seconds = Some(seconds);
        lease.spec = Some(next);
        match self
            .api
            .replace(&lease.name_any(), &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Gives the lease up (empty holder) if we hold it, so a successor need
    /// not wait out the lease duration. Bounded by the renew deadline: when
    /// the apiserver does not answer, the lease simply expires.
    pub(crate) async fn release(&self) {
        if tokio::time::timeout(self.config.renew_deadline, self.release_now())
            .await
            .is_err()
        {
            tracing::warn!(lease = %self.config.name, "the apiserver did not answer the release; the next leader waits for the lease to expire");
        }
    }

    async fn release_now(&self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.config.name).await else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        if let Err(err) = self
            .api
            .replace(&lease.name_any(), &PostParams::default(), &lease)
            .await
        {
            tracing::warn!(error = %err, "could not release the lease; the next leader waits for it to expire");
        }
    }
}
