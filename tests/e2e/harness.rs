//! The e2e suite's shared cluster, started once per test binary: the
//! control plane with one real node ([`Cluster`]), the project's images
//! imported into it, a PostgreSQL the Pods reach on the pod network's
//! gateway, and `config/default` with the PostgreSQL overlay installed
//! ([`installed`]). Like kubebuilder's `test/e2e` suite: one installation,
//! the scenarios in namespaces of their own.

use std::process::Output;
use std::sync::{Mutex, OnceLock};

use crate::common;
use handoff_testkit::TestEnv;
use handoff_testkit::cluster::Cluster;
use handoff_testkit::postgres::Postgres;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, PostParams};

/// The namespace `config/default` installs into.
pub(crate) const SYSTEM: &str = "handoff-system";

/// The e2e cluster and what the suites need to know of it.
pub(crate) struct E2e {
    /// Admin access (kubeconfig, kubectl, clients).
    pub(crate) env: TestEnv,
    /// The mirror's PostgreSQL as the host reaches it.
    pub(crate) postgres_url: String,
    /// The same database as the Pods reach it (the gateway address).
    pub(crate) postgres_url_for_pods: String,
    /// The PostgreSQL server's (postmaster's) process id. Its backends
    /// are its children but not in its process group (each calls
    /// `setsid()`): stalling the server means stopping each of them.
    pub(crate) postgres_pid: u32,
}

/// The installation as the scenarios share it. Every scenario whose
/// outcome needs it as installed (PostgreSQL answering, both controller
/// replicas ready: install, agent, schedule, namespaces) holds it shared
/// (`read`); a scenario that disturbs it (liveness stalls PostgreSQL,
/// leader kills the leading Pod) holds it exclusively (`write`), so it
/// never runs beside the others. A tokio lock: each `#[tokio::test]` has
/// its own runtime, and a guard held across awaits must not block a
/// thread; it is not poisoned by a panic.
pub(crate) static UNDISTURBED: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Kept until the process exits, then torn down (see [`register_teardown`]).
static CLUSTER: Mutex<Option<Cluster>> = Mutex::new(None);
static POSTGRES: Mutex<Option<Postgres>> = Mutex::new(None);

/// The shared cluster, started on first use; panics with the reason when
/// it cannot start (never skips).
pub(crate) fn e2e() -> &'static E2e {
    static E2E: OnceLock<E2e> = OnceLock::new();
    E2E.get_or_init(|| {
        let started = std::thread::spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(anyhow::Error::from)
                .and_then(|rt| rt.block_on(start()))
        })
        .join();
        match started {
            Ok(Ok(e2e)) => e2e,
            Ok(Err(err)) => panic!("the e2e cluster could not start: {err:#}"),
            Err(_) => panic!("the e2e cluster could not start: its thread panicked"),
        }
    })
}

async fn start() -> anyhow::Result<E2e> {
    let images = crate::images::archives()?;
    let cluster = Cluster::start(images.paths()).await?;
    let network = cluster.network();
    let postgres = Postgres::start_for_pods(network.gateway, &network.cidr())?;
    let e2e = E2e {
        env: TestEnv::of_cluster(&cluster),
        postgres_url: postgres.url(),
        postgres_url_for_pods: format!(
            "postgres://postgres@{}:{}/postgres?sslmode=disable",
            network.gateway,
            postgres.port()
        ),
        postgres_pid: postgres.pid(),
    };
    *CLUSTER
        .lock()
        .map_err(|_| anyhow::anyhow!("cluster lock poisoned"))? = Some(cluster);
    *POSTGRES
        .lock()
        .map_err(|_| anyhow::anyhow!("postgres lock poisoned"))? = Some(postgres);
    register_teardown();
    Ok(e2e)
}

/// Runs `f` with the cluster (its node's processes, imports).
pub(crate) fn with_cluster<T>(f: impl FnOnce(&mut Cluster) -> T) -> T {
    e2e();
    let mut slot = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    match slot.as_mut() {
        Some(cluster) => f(cluster),
        None => panic!("the e2e cluster is gone"),
    }
}

/// Tears the cluster down when the process exits normally (statics are
/// never dropped): Pods, the node's processes, mounts, rules, the bridge.
fn register_teardown() {
    static REGISTERED: OnceLock<()> = OnceLock::new();
    REGISTERED.get_or_init(|| {
        extern "C" fn teardown() {
            if let Ok(mut cluster) = CLUSTER.lock() {
                drop(cluster.take());
            }
            if let Ok(mut pg) = POSTGRES.lock() {
                drop(pg.take());
            }
        }
        // SAFETY: `teardown` is a plain extern "C" fn with no arguments.
        unsafe {
            libc::atexit(teardown);
        }
    });
}

pub(crate) use crate::common::kubectl::must;

/// `kubectl …` against the e2e cluster, from the repository root.
pub(crate) fn kubectl(args: &[&str]) -> Output {
    common::kubectl::kubectl(&e2e().env, args)
}

/// `kubectl …` with `stdin`.
pub(crate) fn kubectl_stdin(args: &[&str], stdin: &str) -> Output {
    common::kubectl::kubectl_stdin(&e2e().env, args, stdin)
}

/// A namespace `<prefix>-<random>` that the installed controller manages
/// (unlike the `it` suite's, it carries no `handoff.dev/controller` claim).
#[allow(
    dead_code,
    reason = "the suites in namespaces of their own; not on every branch"
)]
pub(crate) async fn namespace(prefix: &str) -> String {
    let api: Api<Namespace> = Api::all(e2e().env.client().await);
    let mut ns = Namespace::default();
    ns.metadata.generate_name = Some(format!("{prefix}-"));
    api.create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("cannot create a namespace: {e}"))
        .name_any()
}
