//! The controller's run: `handoff controller` from its flags ([`run_cli`]),
//! leader election around the leader's loops ([`run`]), and the one place
//! loops are assembled ([`lead`]): each loop is one module and one line
//! here, run by [`handoff_kube::runner`] with the plumbing made here.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::events::Reporter;
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use tokio_util::sync::CancellationToken;

use crate::leader::LeaderElector;
use crate::metrics::ControllerMetrics;
use crate::options::{ControllerOptions, POSTGRES_URL_VARS};
use crate::schedule::ttl::TtlPolicy;
use crate::{backlog, events, grooming, handoff, resync};
use handoff_core::api::Handoff;
use handoff_core::names::CONTROLLER_FIELD_MANAGER;
use handoff_core::time::{Clock, SystemClock};
use handoff_kube::cluster::{NamespaceScope, scoped};
use handoff_kube::runner::{self, Plumbing};
use handoff_mirror::Mirror;
use handoff_mirror::batch::Batcher;

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

/// Runs `handoff controller` from its flags until SIGTERM / Ctrl-C.
pub async fn run_cli(mut options: ControllerOptions) -> anyhow::Result<()> {
    // The mirror's URL first: a wrong one stops the process before it
    // talks to anyone.
    let postgres_url = options
        .postgres
        .resolve(&POSTGRES_URL_VARS, |name| std::env::var(name).ok())?;
    if let Some(url) = &postgres_url {
        Mirror::new(url, true)?.with_pool(options.postgres.pool())?;
        options = options.with_mirror(url);
    }
    let client = Client::try_from(handoff_kube::proxy::infer().await?)?;
    let metrics = ControllerMetrics::new();
    let shutdown = CancellationToken::new();
    let listener = tokio::net::TcpListener::bind(options.metrics_listen)
        .await
        .map_err(|e| anyhow::anyhow!("--metrics-listen {}: {e}", options.metrics_listen))?;
    eprintln!(
        "handoff controller: metrics on http://{}/metrics",
        listener.local_addr()?
    );
    metrics.serve(listener, shutdown.clone());
    let stop = shutdown.clone();
    tokio::spawn(async move {
        handoff_kube::telemetry::shutdown_signal().await;
        tracing::info!("shutting down");
        stop.cancel();
    });
    run(client, options, Arc::new(SystemClock), metrics, shutdown).await
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
    let lease = options.lease(client.default_namespace());
    lease.validate().map_err(anyhow::Error::msg)?;
    metrics.liveness.set_wedged_after(options.wedged_after);
    // The URL as the flags give it (`run_cli` resolved the environment).
    let mirror = options
        .postgres
        .resolve(&[], |_| None)?
        .map(|url| {
            Mirror::new(&url, true)
                .and_then(|m| m.with_pool(options.postgres.pool()))
                .map(|m| m.with_retention(options.retention()))
        })
        .transpose()?
        .map(Arc::new);
    if let Some(mirror) = &mirror {
        tracing::info!(postgres = %mirror.describe(), "mirroring handoffs into PostgreSQL");
    }
    // Every replica keeps the schedules' TTLs (a read); only the leader grooms.
    let (ttl, feed) =
        crate::schedule::ttl::watch(client.clone(), options.namespace.as_deref(), options.ttl());
    let stop_feed = shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = feed => {}
            () = stop_feed.cancelled() => {}
        }
    });
    let reporter = Reporter {
        controller: CONTROLLER_FIELD_MANAGER.into(),
        instance: Some(lease.identity.clone()),
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
        identity: lease.identity.clone(),
        clock,
        metrics: metrics.clone(),
        writes: mirror.clone().map(|mirror| {
            let sizes = metrics.mirror_batch_rows.clone();
            Batcher::start(mirror, options.batch(), move |n| {
                sizes.observe(n as f64);
            })
        }),
        mirror,
        ttl,
        reporter,
        api_timeout: options.apiserver_timeout,
        events: events::Series::default(),
        budgets: handoff_kube::settings::Budgets::new(client.clone(), options.apiserver_timeout),
    });
    let mut elector = LeaderElector::new(client, lease.clone());
    metrics.ready.store(true, Ordering::Relaxed);
    tracing::info!(identity = %lease.identity, lease = %lease.name, "waiting for the lease");
    loop {
        if !elector.acquire(&shutdown).await {
            metrics.ready.store(false, Ordering::Relaxed);
            return Ok(());
        }
        tracing::info!(identity = %lease.identity, "leading");
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
        metrics.report_noncanonical(None);
        // What was pending is the next leader's: no loop runs here now.
        metrics.liveness.reset();
        if shutdown.is_cancelled() {
            metrics.ready.store(false, Ordering::Relaxed);
            elector.release().await;
            tracing::info!("stopped; the lease is released");
            return Ok(());
        }
        tracing::warn!(identity = %lease.identity, "lost the lease; waiting to lead again");
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
    let (cache, writer) =
        reflector::store::<DeserializeGuard<handoff_core::handoff::cached::CachedHandoff>>();
    // The gauge of objects whose name is not derived from their key is
    // counted from this cache at each scrape (see `metrics`).
    let counted = cache.clone();
    ctx.metrics.report_noncanonical(Some(Box::new(move || {
        counted
            .state()
            .iter()
            .filter(|guard| guard.0.as_ref().is_ok_and(|h| !h.canonical))
            .count()
    })));
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
                options.mirror_resync_interval,
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
