//! The options of `handoff controller`: one type, [`ControllerOptions`],
//! that is the command line (clap's `Args`), and what `handoff dev`, the
//! tests and the benches start the controller with. Its defaults are the
//! flags' and nowhere else: [`ControllerOptions::defaults`] parses an empty
//! command line, and the tests below tie the constants other modules keep
//! (the offer loop's retention, the liveness default, the mirror's batch,
//! pool and history settings) to the flags.

use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroUsize};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;

use crate::schedule::ttl::{DefaultTtl, TtlPolicy};
use handoff_core::leader::LeaseConfig;
use handoff_core::time::{parse_duration, positive_duration};
use handoff_mirror::batch::{BatchSettings, DEFAULT_BATCH_ROWS};
use handoff_mirror::dsn::PostgresArgs;
use handoff_mirror::{DEFAULT_HISTORY_REVISIONS, Retention};

/// The default of `--concurrency`. Reconciles wait on the apiserver and
/// PostgreSQL, not on CPU, and concurrent ones share mirror batches: a
/// Handoff reconcile holds its slot through the status write, so how fast
/// the mirror takes rows in is about the concurrency over the apiserver's
/// write latency, and under load that latency grows. On the 2-core scaling
/// bench the mirror caught up 31.7 s after the last of 10,000 writes with
/// 16 and 11.0 s with 32; on the throughput bench (64 writers, the machine
/// shared), 32 took in ~160 rows/s while writers made ~250/s, 128 kept up
/// with them (caught up 0.2 s after the last of 20,000 writes). Each
/// reconcile in flight may hold one fetched body (typically kilobytes, at
/// most 1 MiB).
pub(crate) const DEFAULT_CONCURRENCY: u16 = 128;

/// Where the controller reads the mirror's URL from, first found first
/// (after `--postgres-url` and `--postgres-url-file`).
pub const POSTGRES_URL_VARS: [&str; 2] = ["HANDOFF_POSTGRES_URL", "DATABASE_URL"];

/// The options of `handoff controller`: its flags, and what `handoff dev`
/// and the tests run it with. The defaults are the flags' (their clap
/// attributes are the only place they are written): [`Self::defaults`]
/// parses an empty command line.
#[derive(Debug, Clone, Parser)]
pub struct ControllerOptions {
    /// Label selector of the Jobs that make a destination agent active (its
    /// pending offers are superseded); `{to}` and `{project}` are replaced.
    #[arg(long, env = "HANDOFF_ACTIVE_AGENT_SELECTOR", default_value = handoff_core::offers::DEFAULT_ACTIVE_SELECTOR)]
    pub active_agent_selector: String,
    /// How long finished offers (Completed, Rejected, Superseded) are kept,
    /// counted from when they finished (`status.finishedAt`, else their
    /// creation); then they are deleted.
    #[arg(long, env = "HANDOFF_OFFER_RETENTION", default_value = "7d", value_parser = parse_duration, value_name = "DURATION")]
    pub offer_retention: Duration,
    /// Mirror handoffs into this PostgreSQL database (off when unset).
    #[command(flatten)]
    pub postgres: PostgresArgs,
    /// Delete handoffs not updated within this time (e.g. 72h) in every
    /// project without a TTL of its own. Off when unset.
    #[arg(long, env = "HANDOFF_DEFAULT_HANDOFF_TTL", value_name = "DURATION", value_parser = parse_duration)]
    pub default_handoff_ttl: Option<Duration>,
    /// Serve /metrics, /healthz and /readyz on this address.
    #[arg(long, env = "HANDOFF_METRICS_LISTEN", default_value = "0.0.0.0:8080")]
    pub metrics_listen: SocketAddr,
    /// Name of the Lease used for leader election.
    #[arg(long, env = "HANDOFF_LEASE_NAME", default_value = "handoff-controller")]
    pub lease_name: String,
    /// Namespace of the Lease (default: the pod's or the kubeconfig's namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// This replica's identity in the Lease (default: pod name, else hostname_pid).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, env = "HANDOFF_NAMESPACE")]
    pub namespace: Option<String>,
    /// Manage only the namespaces whose labels match this selector (e.g.
    /// `!handoff.dev/controller`: skip namespaces another controller claims
    /// with that label). Empty: every namespace. Ignored with --namespace.
    #[arg(
        long,
        env = "HANDOFF_NAMESPACE_SELECTOR",
        default_value = "",
        value_name = "SELECTOR"
    )]
    pub namespace_selector: String,
    /// Most reconciles running at once.
    #[arg(long, env = "HANDOFF_CONCURRENCY", value_name = "N", default_value_t = DEFAULT_CONCURRENCY)]
    pub concurrency: u16,
    /// Most mirror writes (row upserts and history appends) in one batch.
    #[arg(long, env = "HANDOFF_MIRROR_BATCH_ROWS", value_name = "N", default_value_t = DEFAULT_BATCH_ROWS)]
    pub mirror_batch_rows: NonZeroUsize,
    /// Most time a mirror batch waits for more writes after its first.
    #[arg(long, env = "HANDOFF_MIRROR_BATCH_LINGER", value_name = "DURATION", default_value = "2ms", value_parser = parse_duration)]
    pub mirror_batch_linger: Duration,
    /// Most time one apiserver request of the Handoff loop or the mirror's
    /// resync may take (a status write, a label patch, a list page).
    #[arg(long, env = "HANDOFF_APISERVER_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub apiserver_timeout: Duration,
    /// How long a Lease stays valid without renewal.
    #[arg(long, env = "HANDOFF_LEASE_DURATION", value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal.
    #[arg(long, env = "HANDOFF_RENEW_DEADLINE", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub renew_deadline: Duration,
    /// Pause between Lease acquire / renew attempts.
    #[arg(long, env = "HANDOFF_RETRY_PERIOD", value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub retry_period: Duration,
    /// How often the mirror is compared with the apiserver and repaired.
    #[arg(long, env = "HANDOFF_MIRROR_RESYNC_INTERVAL", value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub mirror_resync_interval: Duration,
    /// How often expired handoffs are looked for.
    #[arg(long, env = "HANDOFF_GROOM_INTERVAL", value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    pub groom_interval: Duration,
    /// Revisions of each handoff key kept in the mirror's history; recording
    /// one more drops the oldest.
    #[arg(long, env = "HANDOFF_HISTORY_REVISIONS", value_name = "N", default_value_t = DEFAULT_HISTORY_REVISIONS)]
    pub history_revisions: NonZeroU32,
    /// Drop past revisions written longer ago than this (e.g. 30d) from the
    /// mirror's history at each resync; the current revision of a live
    /// handoff stays. Off when unset.
    #[arg(long, env = "HANDOFF_HISTORY_MAX_AGE", value_name = "DURATION", value_parser = parse_duration)]
    pub history_max_age: Option<Duration>,
    /// Keep a deleted (or groomed) handoff's history in the mirror, for
    /// audit. By default it is deleted with the handoff's row.
    #[arg(long, env = "HANDOFF_KEEP_HISTORY_ON_DELETE")]
    pub keep_history_on_delete: bool,
    /// `/healthz` answers 503 when a loop with pending work made no
    /// progress for this long (plus its period for the periodic resync
    /// and grooming), or one reconcile has run this long.
    #[arg(long, env = "HANDOFF_WEDGED_AFTER", value_name = "DURATION", default_value = "5m", value_parser = positive_duration)]
    pub wedged_after: Duration,
    /// How often the Events of repeated occurrences (a busy key's
    /// `Superseded`) are written: each series with new occurrences costs
    /// one Event update per interval, however many it counted.
    #[arg(long, env = "HANDOFF_EVENT_REFRESH", value_name = "DURATION", default_value = "1m", value_parser = positive_duration)]
    pub event_refresh: Duration,
}

impl ControllerOptions {
    /// How the mirror's writes are batched.
    pub fn batch(&self) -> BatchSettings {
        BatchSettings {
            rows: self.mirror_batch_rows,
            linger: self.mirror_batch_linger,
        }
    }

    /// The history retention these flags ask for.
    pub fn retention(&self) -> Retention {
        Retention {
            revisions: self.history_revisions,
            max_age: self.history_max_age,
            keep_on_delete: self.keep_history_on_delete,
        }
    }

    /// The flags' defaults (an empty command line; the `env` of a flag is
    /// read as the process would read it).
    pub fn defaults() -> Self {
        Self::parse_from(["handoff-controller"])
    }

    /// Mirrors into the PostgreSQL database at `url`.
    pub fn with_mirror(mut self, url: &str) -> Self {
        self.postgres.postgres_url = Some(url.into());
        self
    }

    /// The leader election these flags ask for; the Lease lives in
    /// `--lease-namespace`, else `default_namespace` (the client's).
    pub fn lease(&self, default_namespace: &str) -> LeaseConfig {
        LeaseConfig {
            name: self.lease_name.clone(),
            namespace: self
                .lease_namespace
                .clone()
                .unwrap_or_else(|| default_namespace.to_owned()),
            identity: self.identity.clone().unwrap_or_else(default_identity),
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        }
    }

    /// The TTL of projects without a schedule that sets one.
    pub(crate) fn ttl(&self) -> Arc<dyn TtlPolicy> {
        Arc::new(DefaultTtl(self.default_handoff_ttl))
    }
}

/// `POD_NAME` is preferred (see the flag); otherwise `hostname_pid`.
fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let host = if host.is_empty() { "handoff" } else { &host };
    format!("{host}_{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_mirror::pool::PoolSettings;

    fn parse(line: &[&str]) -> Result<ControllerOptions, clap::Error> {
        ControllerOptions::try_parse_from(
            std::iter::once("handoff-controller").chain(line.iter().copied()),
        )
    }

    #[test]
    fn the_defaults_are_the_flags_and_the_constants_other_modules_keep() {
        let defaults = ControllerOptions::defaults();
        assert_eq!(
            defaults.offer_retention,
            crate::offer_loops::DEFAULT_OFFER_RETENTION,
            "OfferLoops::new"
        );
        assert_eq!(defaults.concurrency, DEFAULT_CONCURRENCY);
        assert_eq!(defaults.batch(), BatchSettings::default());
        assert_eq!(defaults.retention(), Retention::default());
        assert_eq!(defaults.postgres.pool(), PoolSettings::default());
        assert_eq!(
            defaults.wedged_after,
            handoff_core::liveness::DEFAULT_WEDGED_AFTER,
            "the liveness default"
        );
        assert_eq!(defaults.namespace, None);
        assert_eq!(defaults.namespace_selector, "");
        assert!(defaults.postgres.postgres_url.is_none(), "no mirror");
        assert_eq!(defaults.default_handoff_ttl, None, "no default TTL");
        let lease = defaults.lease("ns");
        assert_eq!(
            (
                lease.name.as_str(),
                lease.namespace.as_str(),
                lease.lease_duration,
                lease.renew_deadline,
                lease.retry_period
            ),
            (
                "handoff-controller",
                "ns",
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_secs(2)
            )
        );
        assert_eq!(lease.validate(), Ok(()));
    }

    #[test]
    fn history_flags() {
        let parse = |line: &[&str]| super::tests::parse(line).map(|o| o.retention());
        assert_eq!(
            parse(&[]).expect("defaults"),
            Retention {
                revisions: NonZeroU32::new(50).expect("50"),
                max_age: None,
                keep_on_delete: false,
            },
            "50 revisions per key, no age limit, forgotten on delete"
        );
        assert_eq!(
            parse(&[
                "--history-revisions",
                "5",
                "--history-max-age",
                "30d",
                "--keep-history-on-delete"
            ])
            .expect("every flag"),
            Retention {
                revisions: NonZeroU32::new(5).expect("5"),
                max_age: Some(Duration::from_secs(30 * 86_400)),
                keep_on_delete: true,
            }
        );
        assert!(
            parse(&["--history-revisions", "0"]).is_err(),
            "at least one revision"
        );
        let err = parse(&["--history-max-age", "a month"])
            .expect_err("the duration grammar")
            .to_string();
        assert!(err.contains("30m, 24h, 7d"), "{err}");
    }

    #[test]
    fn batch_flags() {
        let parse = |line: &[&str]| super::tests::parse(line).map(|o| o.batch());
        assert_eq!(
            parse(&[]).expect("defaults"),
            BatchSettings {
                rows: NonZeroUsize::new(256).expect("256"),
                linger: Duration::from_millis(2),
            }
        );
        assert_eq!(
            parse(&["--mirror-batch-rows", "32", "--mirror-batch-linger", "10ms"]).expect("both"),
            BatchSettings {
                rows: NonZeroUsize::new(32).expect("32"),
                linger: Duration::from_millis(10),
            }
        );
        assert!(
            parse(&["--mirror-batch-rows", "0"]).is_err(),
            "at least one write per batch"
        );
        let err = parse(&["--mirror-batch-linger", "soon"])
            .expect_err("the duration grammar")
            .to_string();
        assert!(err.contains("invalid duration \"soon\""), "{err}");
    }

    #[test]
    fn offer_retention_flag() {
        let parse = |line: &[&str]| super::tests::parse(line).map(|o| o.offer_retention);
        assert_eq!(
            parse(&[]).expect("default"),
            crate::offer_loops::DEFAULT_OFFER_RETENTION
        );
        assert_eq!(
            parse(&["--offer-retention", "36h"]).expect("36h"),
            Duration::from_secs(36 * 3600)
        );
        let err = parse(&["--offer-retention", "a week"])
            .expect_err("the duration grammar")
            .to_string();
        assert!(err.contains("invalid duration \"a week\""), "{err}");
    }

    #[test]
    fn wedged_after_is_a_positive_duration_of_five_minutes_by_default() {
        let parse = |line: &[&str]| super::tests::parse(line).map(|o| o.wedged_after);
        assert_eq!(parse(&[]).expect("default"), Duration::from_secs(300));
        assert_eq!(
            parse(&["--wedged-after", "10s"]).expect("10s"),
            Duration::from_secs(10)
        );
        let err = parse(&["--wedged-after", "0s"])
            .expect_err("zero")
            .to_string();
        assert!(err.contains("\"0s\": must be longer than zero"), "{err}");
    }
}
