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

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

/// Where the lease is and how it is held.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity (pod name or hostname).
    pub identity: String,
    /// How long a lease stays valid without renewal.
    pub lease_duration: Duration,
    /// How long the holder keeps leading without a successful renewal.
    pub renew_deadline: Duration,
    /// Pause between attempts to acquire or renew.
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// Checks that `retry_period < renew_deadline < lease_duration`, the
    /// order that keeps two leaders from overlapping; the error names the
    /// rule broken first.
    pub fn validate(&self) -> Result<(), String> {
        if self.lease_duration.as_secs() < 1 {
            return Err("--lease-duration must be at least 1s".into());
        }
        let order = format!(
            "retry period ({:?}) < renew deadline ({:?}) < lease duration ({:?})",
            self.retry_period, self.renew_deadline, self.lease_duration
        );
        if self.renew_deadline >= self.lease_duration {
            return Err(format!(
                "lease timings must satisfy {order}: the renew deadline is not below the lease duration"
            ));
        }
        if self.retry_period >= self.renew_deadline {
            return Err(format!(
                "lease timings must satisfy {order}: the retry period is not below the renew deadline"
            ));
        }
        Ok(())
    }
}

/// What a candidate does with the lease it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// We hold it: write a new renewTime.
    Renew,
    /// Free or expired: take it.
    Take,
    /// Someone else holds a live lease.
    Wait,
}

/// Pure decision: `holder` of the lease read, and how long (on our own
/// monotonic clock) its record has been unchanged.
pub fn decide(
    holder: Option<&str>,
    me: &str,
    unchanged_for: Duration,
    lease_duration: Duration,
) -> Decision {
    match holder.filter(|h| !h.is_empty()) {
        Some(h) if h == me => Decision::Renew,
        None => Decision::Take,
        Some(_) if unchanged_for >= lease_duration => Decision::Take,
        Some(_) => Decision::Wait,
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions() {
        let d = Duration::from_secs(15);
        let s = Duration::from_secs;
        let cases = [
            (None, s(0), Decision::Take, "no holder"),
            (Some(""), s(0), Decision::Take, "released"),
            (Some("me"), s(100), Decision::Renew, "ours, even if old"),
            (Some("other"), s(0), Decision::Wait, "just observed"),
            (Some("other"), s(14), Decision::Wait, "not yet expired"),
            (
                Some("other"),
                s(15),
                Decision::Take,
                "unchanged for a lease duration",
            ),
        ];
        for (holder, unchanged, expected, why) in cases {
            assert_eq!(decide(holder, "me", unchanged, d), expected, "{why}");
        }
    }

    #[test]
    fn timings_are_ordered() {
        let config = |lease, renew, retry| LeaseConfig {
            name: "l".into(),
            namespace: "n".into(),
            identity: "i".into(),
            lease_duration: Duration::from_secs(lease),
            renew_deadline: Duration::from_secs(renew),
            retry_period: Duration::from_secs(retry),
        };
        const RENEW: &str = "the renew deadline is not below the lease duration";
        const RETRY: &str = "the retry period is not below the renew deadline";
        // (lease, renew, retry) in seconds, and the rule it breaks (none: valid).
        let cases = [
            ((15, 10, 2), None),
            ((15, 15, 2), Some(RENEW)),
            ((15, 20, 2), Some(RENEW)),
            ((15, 10, 10), Some(RETRY)),
            ((15, 16, 20), Some(RENEW)),
        ];
        for ((lease, renew, retry), broken) in cases {
            let want = broken.map_or(Ok(()), |rule| {
                Err(format!(
                    "lease timings must satisfy retry period ({retry}s) < renew deadline ({renew}s) < lease duration ({lease}s): {rule}"
                ))
            });
            assert_eq!(
                config(lease, renew, retry).validate(),
                want,
                "{lease} {renew} {retry}"
            );
        }
        assert_eq!(
            config(0, 0, 0).validate(),
            Err("--lease-duration must be at least 1s".into())
        );
    }
}
