//! The controller's run: `handoff controller` from its flags ([`run_cli`]),
//! leader election around the leader's loops ([`run`]), and the one place
//! loops are assembled: [`lead`] walks [`LOOPS`], where each loop is one
//! row — a function that starts it for one leadership from [`Leading`]
//! (the Handoff loop's state, the flags, the Handoff API, the stop token,
//! the plumbing made here). Adding a loop is one module and one row. This
//! module only assembles: nothing imports it but `lib.rs`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use kube::Client;
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::events::Reporter;
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use tokio_util::sync::CancellationToken;

use crate::events::Events;
use crate::handoff::state::HandoffLoop;
use crate::leader::LeaderElector;
use crate::metrics::ControllerMetrics;
use crate::offer_loops::OfferLoops;
use crate::options::{ControllerOptions, POSTGRES_URL_VARS};
use crate::schedule::reconcile::ScheduleLoop;
use crate::{backlog, events, grooming, handoff, mirror_resync, offer_loops, schedule};
use handoff_core::api::Handoff;
use handoff_core::names::CONTROLLER_FIELD_MANAGER;
use handoff_core::time::{Clock, SystemClock};
use handoff_kube::cluster::{NamespaceScope, scoped};
use handoff_kube::runner::{self, Plumbing};
use handoff_mirror::Mirror;
use handoff_mirror::batch::Batcher;

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
    let ctx = Arc::new(HandoffLoop {
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
        events: Events::new(client.clone(), reporter.clone(), options.apiserver_timeout),
        api_timeout: options.apiserver_timeout,
        budgets: handoff_kube::settings::Budgets::new(client.clone(), options.apiserver_timeout),
        watched: handoff::watched::Watched::new(handoff::watched::HELD_BYTES),
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
            lead(ctx.clone(), &options, &reporter, leading.clone()),
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

/// What each loop of a leadership is started from.
struct Leading<'a> {
    /// The Handoff loop's state (shared with the tasks on Handoffs).
    handoff: Arc<HandoffLoop>,
    /// The flags.
    options: &'a ControllerOptions,
    /// Events are reported as the controller, this replica the instance.
    reporter: &'a Reporter,
    /// The Handoffs of the managed namespaces (`--namespace`, else all).
    api: Api<DeserializeGuard<Handoff>>,
    /// Cancelled when leadership ends.
    stop: CancellationToken,
}

impl Leading<'_> {
    /// The plumbing of a loop tracked as `name` on `/healthz`, counting
    /// into the loop metrics, managing the Handoff loop's namespaces.
    fn plumbing(&self, name: &'static str) -> Plumbing {
        let ctx = &self.handoff;
        Plumbing::new(
            ctx.client.clone(),
            self.reporter.clone(),
            ctx.metrics.liveness.track(name, Duration::ZERO),
            ctx.metrics.loops.clone(),
        )
        .with_scope(ctx.plumbing.scope().clone())
    }
}

/// A row of [`LOOPS`]: starts one loop for one leadership.
type Start = for<'a> fn(&'a Leading<'a>) -> BoxFuture<'a, ()>;

/// The leader's loops, one row each; [`lead`] runs them all until the
/// leadership ends.
const LOOPS: [Start; 6] = [
    handoffs,
    grooming,
    mirror_resync,
    schedules,
    offers,
    event_refresh,
];

/// The loops of the leader ([`LOOPS`]), until `leading` is cancelled.
async fn lead(
    handoff: Arc<HandoffLoop>,
    options: &ControllerOptions,
    reporter: &Reporter,
    leading: CancellationToken,
) {
    handoff.metrics.liveness.reset();
    let leading = Leading {
        api: scoped(handoff.client.clone(), options.namespace.as_deref()),
        handoff,
        options,
        reporter,
        stop: leading,
    };
    futures::future::join_all(LOOPS.iter().map(|start| start(&leading))).await;
    // Still leading (a lost lease abandons this future before): write the
    // occurrences counted since the last refresh.
    leading.handoff.events.flush().await;
}

/// The Handoff loop, fed by a watch whose cache holds compact copies, and
/// the mirror's deleter, fed by the same watch's deletes.
fn handoffs<'a>(l: &'a Leading<'a>) -> BoxFuture<'a, ()> {
    let ctx = &l.handoff;
    // The cache holds compact copies, without bodies (see `handoff::cached`):
    // its memory is most of the controller's, and grows with the number of
    // handoffs. A reconcile fetches the object when it needs it (unless the
    // watch event that announced it is still held: `handoff::watched`).
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
    // An object its reconcile needs whole is held for it from the event
    // (see `handoff::watched`); this watch delivers every object again.
    ctx.watched.clear();
    let held = ctx.clone();
    let mirror = ctx.writes.is_some();
    let handoffs = watcher(l.api.clone(), watcher::Config::default())
        .default_backoff()
        .map_ok(move |event| {
            handoff::cached::hold_for_reconcile(
                &held.watched,
                held.plumbing.scope(),
                mirror,
                &event,
            );
            handoff::cached::cached_event(event)
        })
        .reflect(writer)
        .inspect(move |event| {
            if let Ok(watcher::Event::Delete(DeserializeGuard(Ok(h)))) = event {
                // Closed only when the deleter ended with leadership.
                let _ = deleted.send(h.clone());
            }
        })
        .applied_objects();
    let deleter = handoff::delete_rows(ctx.clone(), deletions, l.stop.clone());
    let controller = runner::run(
        Controller::for_stream(handoffs, cache),
        ctx.clone(),
        l.options.concurrency,
        l.stop.clone(),
    );
    async move {
        tokio::join!(controller, deleter);
    }
    .boxed()
}

/// TTL grooming.
fn grooming<'a>(l: &'a Leading<'a>) -> BoxFuture<'a, ()> {
    let interval = l.options.groom_interval;
    grooming::run(l.handoff.clone(), l.api.clone(), interval, l.stop.clone()).boxed()
}

/// The mirror's resync, when there is a mirror.
fn mirror_resync<'a>(l: &'a Leading<'a>) -> BoxFuture<'a, ()> {
    async move {
        if let Some(mirror) = l.handoff.mirror.clone() {
            let every = l.options.mirror_resync_interval;
            let namespace = l.options.namespace.clone();
            mirror_resync::run(
                l.handoff.clone(),
                mirror,
                l.api.clone(),
                namespace,
                every,
                l.stop.clone(),
            )
            .await;
        }
    }
    .boxed()
}

/// The `BrainstormSchedule` loop.
fn schedules<'a>(l: &'a Leading<'a>) -> BoxFuture<'a, ()> {
    let ctx = &l.handoff;
    let schedule = ScheduleLoop::new(ctx.client.clone(), ctx.clock.clone(), &ctx.identity)
        .with_plumbing(l.plumbing("schedule"))
        .counting_cycles(ctx.metrics.schedule_cycles());
    let namespace = l.options.namespace.as_deref();
    schedule::reconcile::run(
        Arc::new(schedule),
        namespace,
        l.options.concurrency,
        l.stop.clone(),
    )
    .boxed()
}

/// The offer and agent Job loops.
fn offers<'a>(l: &'a Leading<'a>) -> BoxFuture<'a, ()> {
    let (ctx, options) = (&l.handoff, l.options);
    let offers = OfferLoops::new(
        ctx.client.clone(),
        &options.active_agent_selector,
        l.reporter.clone(),
        ctx.metrics.loops.clone(),
    )
    .with_retention(options.offer_retention, ctx.clock.clone())
    .with_plumbing(l.plumbing("offers"));
    let namespace = options.namespace.as_deref();
    offer_loops::run(
        Arc::new(offers),
        namespace,
        options.concurrency,
        l.stop.clone(),
    )
    .boxed()
}

/// The Events' refresh (series written every `--event-refresh`).
fn event_refresh<'a>(l: &'a Leading<'a>) -> BoxFuture<'a, ()> {
    events::refresh(&l.handoff.events, l.options.event_refresh, l.stop.clone()).boxed()
}
