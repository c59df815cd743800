//! `handoff controller`: the reconcile loops, leader-elected.
//!
//! Every replica runs the leader election ([`leader`]); only the lease
//! holder runs the loops, and therefore only it writes — status, labels,
//! Events, finalizers, mirror rows, grooming deletes. Replicas that do not
//! hold the lease only wait for it (the bridge, not the controller, serves
//! reads to agents). Losing the lease stops the loops before another
//! replica may take over (see [`leader`]); a graceful shutdown (SIGTERM,
//! Ctrl-C) lets in-flight reconciles finish (for at most
//! [`SHUTDOWN_GRACE`]), then releases the lease.
//!
//! This is the only module that assembles loops: it starts, with one
//! context, the loops of this module and those of [`crate::schedule`] and
//! [`crate::offers`]; every loop shares [`handoff_kube::loops`] (guarded objects,
//! error categories, one backoff policy, progress for `/healthz`) and
//! reports events.k8s.io Events as `handoff-controller`.
//!
//! - [`handoff`]: the Handoff loop (status, labels, Events, mirror row).
//! - [`events`]: the Handoff loop's Events, one series per object and reason.
//! - [`grooming`]: TTL grooming.
//! - [`leader`]: Lease-based leader election.
//! - [`resync`]: the mirror's periodic repair (the plan is [`handoff_mirror::resync`]).
//!
//! Operator notes: `/healthz` (every loop makes progress: 503 naming the
//! loop once one with pending work made none for `--wedged-after`, see
//! [`handoff_core::liveness`]), `/readyz` (started, not shutting down) and
//! `/metrics` (OpenMetrics, prefix
//! `handoff_controller_`) are served on `--metrics-listen`. Logs are JSON on
//! stderr. The rights the loops use are exactly those of
//! `config/rbac/controller.yaml` (each rule says which loop needs it).

pub(crate) mod backlog;
pub(crate) mod events;
pub(crate) mod grooming;
pub mod handoff;
pub mod leader;
pub mod offers;
pub(crate) mod resync;
pub mod schedule;

use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroUsize};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::events::Reporter;
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use self::leader::{LeaderElector, LeaseConfig};
use crate::schedule::ttl::{DefaultTtl, TtlPolicy};
use handoff_core::api::Handoff;
use handoff_core::liveness::{Health, Liveness};
use handoff_core::names::CONTROLLER_FIELD_MANAGER;
use handoff_core::time::{Clock, SystemClock, parse_duration};
use handoff_kube::cluster::{NamespaceScope, scoped};
use handoff_kube::loops::LoopMetrics;
use handoff_kube::runner::{self, Plumbing};
use handoff_mirror::batch::{BatchSettings, Batcher, DEFAULT_BATCH_ROWS};
use handoff_mirror::dsn::PostgresArgs;
use handoff_mirror::pool::PoolSettings;
use handoff_mirror::{DEFAULT_HISTORY_REVISIONS, Mirror, Retention};

/// Arguments of `handoff controller`.
#[derive(Debug, Args)]
pub struct ControllerArgs {
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
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub default_handoff_ttl: Option<Duration>,
    /// Serve /metrics, /healthz and /readyz on this address.
    #[arg(long, env = "HANDOFF_METRICS_LISTEN", default_value = "0.0.0.0:8080")]
    pub metrics_listen: SocketAddr,
    /// Name of the Lease used for leader election.
    #[arg(long, default_value = "handoff-controller")]
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
    #[arg(long, default_value_t = DEFAULT_CONCURRENCY)]
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
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub renew_deadline: Duration,
    /// Pause between Lease acquire / renew attempts.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub retry_period: Duration,
    /// How often the mirror is compared with the apiserver and repaired.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub mirror_resync_interval: Duration,
    /// How often expired handoffs are looked for.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
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

/// A [`parse_duration`] above zero.
fn positive_duration(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        Duration::ZERO => Err(format!("{text:?} must be above zero")),
        d => Ok(d),
    }
}

impl ControllerArgs {
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
}

/// Everything [`run`] needs besides the client.
#[derive(Clone)]
pub struct ControllerOptions {
    /// Only this namespace, or all.
    pub namespace: Option<String>,
    /// A label selector of the namespaces managed (empty: all); ignored
    /// when `namespace` is set.
    pub namespace_selector: String,
    /// Leader election.
    pub lease: LeaseConfig,
    /// Most reconciles at once.
    pub concurrency: u16,
    /// The mirror's URL, when enabled.
    pub postgres_url: Option<String>,
    /// The mirror's pool and call timeout.
    pub postgres: PoolSettings,
    /// How the mirror's writes are batched.
    pub batch: BatchSettings,
    /// Most time one apiserver request of the Handoff loop or resync takes.
    pub api_timeout: Duration,
    /// Resync period of the mirror.
    pub resync_interval: Duration,
    /// Grooming period.
    pub groom_interval: Duration,
    /// The TTL of projects without a schedule that sets one.
    pub ttl: Arc<dyn TtlPolicy>,
    /// Label selector template of an agent's Jobs (offers).
    pub active_agent_selector: String,
    /// How long finished offers are kept.
    pub offer_retention: Duration,
    /// How much history the mirror keeps.
    pub history: Retention,
    /// How often counted Event occurrences are written.
    pub event_refresh: Duration,
}

impl ControllerOptions {
    /// The flags' defaults around `lease`: every namespace, no mirror, no
    /// default TTL. Callers (`handoff dev`, tests) change what they need
    /// with struct update syntax, so a new option changes one place.
    pub fn defaults(lease: LeaseConfig) -> Self {
        Self {
            namespace: None,
            namespace_selector: String::new(),
            lease,
            concurrency: DEFAULT_CONCURRENCY,
            postgres_url: None,
            postgres: PoolSettings::default(),
            batch: BatchSettings::default(),
            api_timeout: Duration::from_secs(10),
            resync_interval: Duration::from_secs(300),
            groom_interval: Duration::from_secs(60),
            ttl: Arc::new(DefaultTtl(None)),
            active_agent_selector: handoff_core::offers::DEFAULT_ACTIVE_SELECTOR.into(),
            offer_retention: crate::offers::DEFAULT_OFFER_RETENTION,
            history: Retention::default(),
            event_refresh: events::DEFAULT_EVENT_REFRESH,
        }
    }
}

/// Shared state of the loops.
pub(crate) struct Context {
    /// The controller's own client.
    pub(crate) client: Client,
    /// This replica's identity (Events name it as reporting instance).
    pub(crate) identity: String,
    /// Time source.
    pub(crate) clock: Arc<dyn Clock>,
    /// Metrics.
    pub(crate) metrics: Arc<ControllerMetrics>,
    /// The mirror, when enabled (resync, deletes).
    pub(crate) mirror: Option<Arc<Mirror>>,
    /// The mirror's batched writes, when enabled (the Handoff loop's rows
    /// and history appends).
    pub(crate) writes: Option<Batcher>,
    /// The TTL of each project.
    pub(crate) ttl: Arc<dyn TtlPolicy>,
    /// Reports Events as the controller (`reportingInstance` = identity).
    pub(crate) reporter: Reporter,
    /// The Handoff loop's recorder, backoff, progress (`/healthz`) and
    /// namespace scope (the scope every loop shares).
    pub(crate) plumbing: Plumbing,
    /// Most time one apiserver request of the Handoff loop or resync takes.
    pub(crate) api_timeout: Duration,
    /// The mirror work owed per key (the Handoff loop's; the metrics report it).
    pub(crate) backlog: Arc<backlog::Backlog>,
    /// Repeated Events of one object count into one Event's series.
    pub(crate) events: events::Series,
    /// The namespaces' lint budgets (the `Linted` condition), cached.
    pub(crate) budgets: handoff_kube::settings::Budgets,
}

/// The default of `--concurrency`. Reconciles wait on the apiserver and
/// PostgreSQL, not on CPU, and concurrent ones share mirror batches: on
/// the 2-core scaling bench the mirror caught up 31.7 s after the last of
/// 10,000 writes with 16 and 11.0 s with 32 (BENCHMARKS.md).
pub(crate) const DEFAULT_CONCURRENCY: u16 = 32;

/// Where the controller reads the mirror's URL from, first found first
/// (after `--postgres-url` and `--postgres-url-file`).
pub const POSTGRES_URL_VARS: [&str; 2] = ["HANDOFF_POSTGRES_URL", "DATABASE_URL"];

/// Runs `handoff controller` from its arguments until SIGTERM / Ctrl-C.
pub async fn run_cli(args: ControllerArgs) -> anyhow::Result<()> {
    // The mirror's URL first: a wrong one stops the process before it
    // talks to anyone.
    let postgres_url = args
        .postgres
        .resolve(&POSTGRES_URL_VARS, |name| std::env::var(name).ok())?;
    if let Some(url) = &postgres_url {
        Mirror::new(url, true)?.with_pool(args.postgres.pool())?;
    }
    let config = kube::Config::infer().await?;
    let lease_namespace = args
        .lease_namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config)?;
    let identity = args.identity.clone().unwrap_or_else(default_identity);
    let options = ControllerOptions {
        namespace: args.namespace.clone(),
        namespace_selector: args.namespace_selector.clone(),
        lease: LeaseConfig {
            name: args.lease_name.clone(),
            namespace: lease_namespace,
            identity,
            lease_duration: args.lease_duration,
            renew_deadline: args.renew_deadline,
            retry_period: args.retry_period,
        },
        concurrency: args.concurrency,
        postgres_url,
        postgres: args.postgres.pool(),
        batch: args.batch(),
        api_timeout: args.apiserver_timeout,
        resync_interval: args.mirror_resync_interval,
        groom_interval: args.groom_interval,
        ttl: Arc::new(DefaultTtl(args.default_handoff_ttl)),
        active_agent_selector: args.active_agent_selector.clone(),
        offer_retention: args.offer_retention,
        history: args.retention(),
        event_refresh: args.event_refresh,
    };
    let metrics = ControllerMetrics::new();
    metrics.liveness.set_wedged_after(args.wedged_after);
    let shutdown = CancellationToken::new();
    let listener = tokio::net::TcpListener::bind(args.metrics_listen)
        .await
        .map_err(|e| anyhow::anyhow!("--metrics-listen {}: {e}", args.metrics_listen))?;
    eprintln!(
        "handoff controller: metrics on http://{}/metrics",
        listener.local_addr()?
    );
    let served = metrics.clone();
    let ready = metrics.clone();
    let live = metrics.clone();
    let stop = shutdown.clone();
    tokio::spawn(handoff_kube::telemetry::serve_endpoints(
        listener,
        Arc::new(move || served.encode()),
        Arc::new(move || ready.is_ready()),
        Arc::new(move || live.live()),
        async move { stop.cancelled().await },
    ));
    let stop = shutdown.clone();
    tokio::spawn(async move {
        handoff_kube::telemetry::shutdown_signal().await;
        tracing::info!("shutting down");
        stop.cancel();
    });
    run(client, options, Arc::new(SystemClock), metrics, shutdown).await
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

/// Runs the controller until `shutdown` is cancelled: elect, lead while
/// holding the lease, wait again after losing it.
pub async fn run(
    client: Client,
    options: ControllerOptions,
    clock: Arc<dyn Clock>,
    metrics: Arc<ControllerMetrics>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    options.lease.validate().map_err(anyhow::Error::msg)?;
    let mirror = options
        .postgres_url
        .as_deref()
        .map(|url| {
            Mirror::new(url, true)
                .and_then(|m| m.with_pool(options.postgres))
                .map(|m| m.with_retention(options.history))
        })
        .transpose()?
        .map(Arc::new);
    if let Some(mirror) = &mirror {
        tracing::info!(postgres = %mirror.describe(), "mirroring handoffs into PostgreSQL");
    }
    // Every replica keeps the schedules' TTLs (a read); only the leader grooms.
    let (ttl, feed) = crate::schedule::ttl::watch(
        client.clone(),
        options.namespace.as_deref(),
        options.ttl.clone(),
    );
    let stop_feed = shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = feed => {}
            () = stop_feed.cancelled() => {}
        }
    });
    let reporter = Reporter {
        controller: CONTROLLER_FIELD_MANAGER.into(),
        instance: Some(options.lease.identity.clone()),
    };
    let selector = match options.namespace {
        Some(_) => "",
        None => options.namespace_selector.as_str(),
    };
    let scope = NamespaceScope::watch(client.clone(), selector, shutdown.clone())
        .await
        .map_err(|e| anyhow::anyhow!("--namespace-selector {selector:?}: {e}"))?;
    if !selector.is_empty() {
        tracing::info!(%selector, "managing the namespaces whose labels match");
    }
    let backlog = Arc::new(backlog::Backlog::default());
    metrics.report_backlog(backlog.clone());
    let ctx = Arc::new(Context {
        backlog,
        plumbing: Plumbing::new(
            client.clone(),
            reporter.clone(),
            metrics.liveness.track("handoff", Duration::ZERO),
            metrics.loops.clone(),
        )
        .with_scope(scope),
        client: client.clone(),
        identity: options.lease.identity.clone(),
        clock,
        metrics: metrics.clone(),
        writes: mirror.clone().map(|mirror| {
            let sizes = metrics.mirror_batch_rows.clone();
            Batcher::start(mirror, options.batch, move |n| {
                sizes.observe(n as f64);
            })
        }),
        mirror,
        ttl,
        reporter,
        api_timeout: options.api_timeout,
        events: events::Series::default(),
        budgets: handoff_kube::settings::Budgets::new(client.clone(), options.api_timeout),
    });
    let mut elector = LeaderElector::new(client, options.lease.clone());
    metrics.ready.store(true, Ordering::Relaxed);
    tracing::info!(identity = %options.lease.identity, lease = %options.lease.name, "waiting for the lease");
    loop {
        if !elector.acquire(&shutdown).await {
            metrics.ready.store(false, Ordering::Relaxed);
            return Ok(());
        }
        tracing::info!(identity = %options.lease.identity, "leading");
        metrics.leader.set(1);
        let leading = shutdown.child_token();
        let work = bounded(
            lead(ctx.clone(), &options, leading.clone()),
            &leading,
            &shutdown,
        );
        let hold = elector.hold(&leading, &shutdown);
        tokio::join!(work, hold);
        metrics.leader.set(0);
        // What was pending is the next leader's: no loop runs here now.
        metrics.liveness.reset();
        if shutdown.is_cancelled() {
            metrics.ready.store(false, Ordering::Relaxed);
            elector.release().await;
            tracing::info!("stopped; the lease is released");
            return Ok(());
        }
        tracing::warn!(identity = %options.lease.identity, "lost the lease; waiting to lead again");
    }
}

/// How long in-flight work may take to finish on a graceful shutdown
/// (the lease is still held meanwhile) before it is abandoned.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Runs `work` to its end, but not past the end of leadership: when the
/// lease is lost, at once (another replica may lead soon, and two must
/// never write together); on shutdown, at most [`SHUTDOWN_GRACE`] after
/// `leading` is cancelled.
async fn bounded(
    work: impl std::future::Future<Output = ()>,
    leading: &CancellationToken,
    shutdown: &CancellationToken,
) {
    tokio::select! {
        () = work => {}
        () = async {
            leading.cancelled().await;
            if shutdown.is_cancelled() {
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            }
        } => {
            if shutdown.is_cancelled() {
                tracing::warn!(grace_s = SHUTDOWN_GRACE.as_secs(), "in-flight work did not finish within the grace period; abandoning it");
            } else {
                tracing::warn!("leadership lost: in-flight work abandoned");
            }
        }
    }
}

/// The loops of the leader, until `leading` is cancelled.
async fn lead(ctx: Arc<Context>, options: &ControllerOptions, leading: CancellationToken) {
    ctx.metrics.liveness.reset();
    let api: Api<DeserializeGuard<Handoff>> =
        scoped(ctx.client.clone(), options.namespace.as_deref());
    // The cache holds compact copies, without bodies (see `handoff::cached`):
    // its memory is most of the controller's, and grows with the number of
    // handoffs. A reconcile fetches the object when it needs it.
    // Objects that do not deserialize are kept as such and skipped by the
    // reconcile (see `handoff_kube::loops`).
    let (cache, writer) = reflector::store();
    // Deleted handoffs go to the mirror's deleter (there is no finalizer:
    // deletes never wait for PostgreSQL; resync removes what it missed).
    let (deleted, deletions) = tokio::sync::mpsc::unbounded_channel();
    let handoffs = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .map_ok(handoff::cached::cached_event)
        .reflect(writer)
        .inspect(move |event| {
            if let Ok(watcher::Event::Delete(DeserializeGuard(Ok(h)))) = event {
                // Closed only when the deleter ended with leadership.
                let _ = deleted.send(h.clone());
            }
        })
        .applied_objects();
    let deleter = handoff::delete_rows(ctx.clone(), deletions, leading.clone());
    let controller = runner::run(
        Controller::for_stream(handoffs, cache),
        ctx.clone(),
        options.concurrency,
        leading.clone(),
    );
    let groom = grooming::run(
        ctx.clone(),
        api.clone(),
        options.groom_interval,
        leading.clone(),
    );
    let resync = async {
        if let Some(mirror) = ctx.mirror.clone() {
            resync::run(
                ctx.clone(),
                mirror,
                api.clone(),
                options.namespace.clone(),
                options.resync_interval,
                leading.clone(),
            )
            .await;
        }
    };
    let plumbing = |name| {
        Plumbing::new(
            ctx.client.clone(),
            ctx.reporter.clone(),
            ctx.metrics.liveness.track(name, Duration::ZERO),
            ctx.metrics.loops.clone(),
        )
        .with_scope(ctx.plumbing.scope().clone())
    };
    let schedules = crate::schedule::reconcile::run(
        Arc::new(
            crate::schedule::reconcile::Context::new(
                ctx.client.clone(),
                ctx.clock.clone(),
                &ctx.identity,
            )
            .with_plumbing(plumbing("schedule")),
        ),
        options.namespace.as_deref(),
        options.concurrency,
        leading.clone(),
    );
    let offers = crate::offers::run(
        Arc::new(
            crate::offers::Context::new(
                ctx.client.clone(),
                &options.active_agent_selector,
                ctx.reporter.clone(),
                ctx.metrics.loops.clone(),
            )
            .with_retention(options.offer_retention, ctx.clock.clone())
            .with_plumbing(plumbing("offers")),
        ),
        options.namespace.as_deref(),
        options.concurrency,
        leading.clone(),
    );
    let refresh = events::refresh(ctx.clone(), options.event_refresh, leading.clone());
    tokio::join!(
        controller, groom, resync, schedules, offers, deleter, refresh
    );
    // Still leading (a lost lease abandons this future before): write the
    // occurrences counted since the last refresh.
    ctx.flush_events().await;
}

/// The controller's metrics (prefix `handoff_controller_`).
pub struct ControllerMetrics {
    registry: Registry,
    reconciles: Family<ResultLabel, Counter>,
    reconcile_seconds: Histogram,
    leader: Gauge,
    revisions: Counter,
    groomed: Counter,
    mirror_errors: Counter,
    mirror_lag_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    mirror_pending_rows: Gauge,
    mirror_batch_rows: Histogram,
    resync_repairs: Family<RepairLabel, Counter>,
    history_purged: Family<HistoryLabel, Counter>,
    backlog: Mutex<Option<Arc<backlog::Backlog>>>,
    ready: AtomicBool,
    resyncs: AtomicI64,
    loop_stalled_seconds: Family<LoopLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    loop_pending: Family<LoopLabel, Gauge>,
    /// What every loop reports: errors by category, invalid objects.
    pub loops: Arc<LoopMetrics>,
    /// Each loop's progress, judged by `--wedged-after` (`/healthz`).
    pub liveness: Arc<Liveness>,
}

/// `loop` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub(crate) struct LoopLabel {
    /// `handoff`, `resync`, `grooming`, `schedule` or `offers`.
    pub r#loop: String,
}

/// `result` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub(crate) struct ResultLabel {
    /// `ok` or `error`.
    pub result: String,
}

/// `reason` label of history rows the controller deleted.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub(crate) struct HistoryLabel {
    /// `deleted` (with the handoff's row), `cap` (beyond
    /// `--history-revisions`) or `age` (older than `--history-max-age`).
    pub reason: String,
}

/// `action` label of resync repairs.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub(crate) struct RepairLabel {
    /// `written` (missing or stale row) or `deleted` (orphan row).
    pub action: String,
}

impl ControllerMetrics {
    /// Registers every metric.
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("handoff_controller");
        let reconciles = Family::<ResultLabel, Counter>::default();
        let reconcile_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 14));
        let leader = Gauge::default();
        let revisions = Counter::default();
        let groomed = Counter::default();
        let mirror_errors = Counter::default();
        let mirror_lag_seconds = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        let mirror_pending_rows = Gauge::default();
        let mirror_batch_rows = Histogram::new(exponential_buckets(1.0, 2.0, 10));
        let resync_repairs = Family::<RepairLabel, Counter>::default();
        let history_purged = Family::<HistoryLabel, Counter>::default();
        let loops = Arc::new(LoopMetrics::default());
        loops.register(&mut registry);
        let loop_stalled_seconds =
            Family::<LoopLabel, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        let loop_pending = Family::<LoopLabel, Gauge>::default();
        registry.register(
            "loop_last_progress_seconds",
            "Seconds the loop's pending work has waited for progress (0 while it has none; /healthz fails past --wedged-after)",
            loop_stalled_seconds.clone(),
        );
        registry.register(
            "loop_pending",
            "Objects (or passes) whose work the loop started and has not finished well",
            loop_pending.clone(),
        );
        registry.register(
            "reconciles",
            "Handoff reconciles by result",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Handoff reconcile latency",
            reconcile_seconds.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the lease",
            leader.clone(),
        );
        registry.register("revisions", "Content revisions counted", revisions.clone());
        registry.register(
            "groomed_handoffs",
            "Handoffs deleted by TTL grooming",
            groomed.clone(),
        );
        registry.register(
            "mirror_errors",
            "Failed mirror writes (retried with backoff)",
            mirror_errors.clone(),
        );
        registry.register(
            "mirror_lag_seconds",
            "Age of the oldest change not yet in the mirror (0 when caught up)",
            mirror_lag_seconds.clone(),
        );
        registry.register(
            "mirror_pending_rows",
            "Handoffs whose mirror row is behind",
            mirror_pending_rows.clone(),
        );
        registry.register(
            "mirror_batch_rows",
            "Mirror writes (row upserts and history appends) per batch sent to PostgreSQL",
            mirror_batch_rows.clone(),
        );
        registry.register(
            "mirror_resync_repairs",
            "Rows repaired by resync",
            resync_repairs.clone(),
        );
        registry.register(
            "mirror_history_purged_rows",
            "History rows deleted by retention (with a deleted handoff, beyond the cap, by age)",
            history_purged.clone(),
        );
        Arc::new(Self {
            registry,
            reconciles,
            reconcile_seconds,
            leader,
            revisions,
            groomed,
            mirror_errors,
            mirror_lag_seconds,
            mirror_pending_rows,
            mirror_batch_rows,
            resync_repairs,
            history_purged,
            backlog: Mutex::new(None),
            ready: AtomicBool::new(false),
            resyncs: AtomicI64::new(0),
            loop_stalled_seconds,
            loop_pending,
            loops,
            liveness: Arc::new(Liveness::default()),
        })
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        self.refresh_lag();
        self.refresh_progress();
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// What `/healthz` answers: ok, or which loop is wedged and for how long.
    pub fn live(&self) -> Result<(), String> {
        match self.liveness.check() {
            Health::Healthy => Ok(()),
            wedged => {
                let reason = wedged.reason();
                tracing::warn!(reason = %reason, "/healthz: a loop is wedged");
                Err(reason)
            }
        }
    }

    fn refresh_progress(&self) {
        let now = Instant::now();
        for status in self.liveness.statuses() {
            let label = LoopLabel {
                r#loop: status.name.into(),
            };
            self.loop_stalled_seconds
                .get_or_create(&label)
                .set(status.stalled(now).as_secs_f64());
            self.loop_pending
                .get_or_create(&label)
                .set(i64::try_from(status.pending).unwrap_or(i64::MAX));
        }
    }

    /// Whether `/readyz` answers ok.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Whether this replica leads.
    pub fn is_leader(&self) -> bool {
        self.leader.get() == 1
    }

    /// Completed resync passes (tests wait on it).
    pub fn resyncs(&self) -> i64 {
        self.resyncs.load(Ordering::Relaxed)
    }

    /// Handoffs deleted by grooming.
    pub fn groomed(&self) -> u64 {
        self.groomed.get()
    }

    fn observe_reconcile(&self, ok: bool, elapsed: Duration) {
        self.reconcile_seconds.observe(elapsed.as_secs_f64());
        self.reconciles
            .get_or_create(&ResultLabel {
                result: if ok { "ok" } else { "error" }.into(),
            })
            .inc();
    }

    fn count_revision(&self) {
        self.revisions.inc();
    }

    fn count_groomed(&self) {
        self.groomed.inc();
    }

    pub(crate) fn count_mirror_error(&self) {
        self.mirror_errors.inc();
    }

    pub(crate) fn count_repair(&self, action: &str) {
        self.resync_repairs
            .get_or_create(&RepairLabel {
                action: action.into(),
            })
            .inc();
    }

    pub(crate) fn count_history_purged(&self, reason: &str, rows: u64) {
        if rows > 0 {
            self.history_purged
                .get_or_create(&HistoryLabel {
                    reason: reason.into(),
                })
                .inc_by(rows);
        }
    }

    pub(crate) fn count_resync(&self) {
        self.resyncs.fetch_add(1, Ordering::Relaxed);
    }

    /// Reports `backlog` (the Handoff loop's) in the mirror gauges.
    pub(crate) fn report_backlog(&self, backlog: Arc<backlog::Backlog>) {
        if let Ok(mut reported) = self.backlog.lock() {
            *reported = Some(backlog);
        }
    }

    fn refresh_lag(&self) {
        let Ok(reported) = self.backlog.lock() else {
            return;
        };
        let (rows, oldest) = reported.as_ref().map_or_else(Default::default, |b| b.lag());
        self.mirror_lag_seconds.set(oldest.as_secs_f64());
        self.mirror_pending_rows
            .set(i64::try_from(rows).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: ControllerArgs,
    }

    #[test]
    fn history_flags() {
        let parse = |line: &[&str]| {
            Cli::try_parse_from(std::iter::once("controller").chain(line.iter().copied()))
                .map(|cli| cli.args.retention())
        };
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
        let parse = |line: &[&str]| {
            Cli::try_parse_from(std::iter::once("controller").chain(line.iter().copied()))
                .map(|cli| cli.args.batch())
        };
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
        let parse = |line: &[&str]| {
            Cli::try_parse_from(std::iter::once("controller").chain(line.iter().copied()))
                .map(|cli| cli.args.offer_retention)
        };
        assert_eq!(
            parse(&[]).expect("default"),
            crate::offers::DEFAULT_OFFER_RETENTION
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
        let parse = |line: &[&str]| {
            Cli::try_parse_from(std::iter::once("controller").chain(line.iter().copied()))
                .map(|cli| cli.args.wedged_after)
        };
        assert_eq!(parse(&[]).expect("default"), Duration::from_secs(300));
        assert_eq!(
            parse(&["--wedged-after", "10s"]).expect("10s"),
            Duration::from_secs(10)
        );
        let err = parse(&["--wedged-after", "0s"])
            .expect_err("zero")
            .to_string();
        assert!(err.contains("must be above zero"), "{err}");
    }

    #[test]
    fn loop_gauges_follow_the_progress_record() {
        let m = ControllerMetrics::new();
        let progress = m.liveness.track("handoff", Duration::ZERO);
        progress.start("Handoff ns/a".into()).end(false);
        let text = m.encode();
        assert!(
            text.contains("handoff_controller_loop_pending{loop=\"handoff\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("handoff_controller_loop_last_progress_seconds{loop=\"handoff\"}"),
            "{text}"
        );
        assert_eq!(m.live(), Ok(()), "pending for less than 5 minutes");
        progress.forget("Handoff ns/a");
        let text = m.encode();
        assert!(
            text.contains("handoff_controller_loop_pending{loop=\"handoff\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn the_mirror_gauges_report_the_loops_backlog() {
        let m = ControllerMetrics::new();
        let backlog = Arc::new(backlog::Backlog::default());
        m.report_backlog(backlog.clone());
        let key = ("ns".to_owned(), "k".to_owned());
        backlog.behind(&key);
        assert!(
            m.encode()
                .contains("handoff_controller_mirror_pending_rows 1")
        );
        backlog.caught_up(&key);
        let text = m.encode();
        assert!(
            text.contains("handoff_controller_mirror_pending_rows 0"),
            "{text}"
        );
        assert!(
            text.contains("handoff_controller_mirror_lag_seconds 0"),
            "{text}"
        );
    }
}
