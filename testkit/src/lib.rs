//! The test kit of `handoff`: what the integration suites and benchmarks
//! share, kept out of the shipped binary (this crate is only a
//! dev-dependency). It builds on the local control plane of `handoff dev`
//! ([`handoff_local`]: etcd + kube-apiserver, PostgreSQL), re-exported here.
//!
//! Test suites use [`shared`]: one control plane per test binary, started on
//! first use, with the CRDs installed, and a namespace per test
//! ([`TestEnv::namespace`]). With `USE_EXISTING_CLUSTER=true` the same suites
//! run against the current kubeconfig instead (a kind cluster, say). A suite
//! that needs the control plane and cannot start it fails with the reason —
//! it never skips.

pub mod admission;
pub mod bearer_proxy;
pub mod bench;
pub mod browser;
pub mod claude_image;
pub mod cluster;
pub mod controller;
pub mod http;
pub mod image;
pub mod mirror;
pub mod model;
pub mod plot;
pub mod previous;
pub mod rng;
pub mod rpc;
mod served;
pub mod spec;
pub mod wait;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::config::Kubeconfig;
use kube::{Client, ResourceExt};

pub use handoff_local::{
    Assets, ControlPlane, PlaneOptions, Postgres, ServerTls, StaticToken, Versions, assets,
    client_from, install_crds, postgres, process,
};
pub use served::{
    BridgeProcess, ConsoleProcess, ControllerProcess, ManagedWebhookProcess, WebhookProcess,
};

/// What a test needs to reach the cluster under test.
#[derive(Clone)]
pub struct TestEnv {
    kubeconfig: Kubeconfig,
    kubeconfig_path: PathBuf,
    kubectl: PathBuf,
    existing_cluster: bool,
    pids: Vec<u32>,
}

/// The control planes of this process, kept until exit.
static PLANES: Mutex<Vec<ControlPlane>> = Mutex::new(Vec::new());
static POSTGRES: Mutex<Option<Postgres>> = Mutex::new(None);

/// The shared test environment of this test binary, started on first use.
/// Panics with an actionable message when it cannot start: a suite that
/// needs a control plane must fail, not skip.
pub fn shared() -> &'static TestEnv {
    static ENV: OnceLock<TestEnv> = OnceLock::new();
    ENV.get_or_init(|| start_or_panic("the test control plane"))
}

/// A second control plane of this test binary, for the suite that installs
/// cluster-wide objects (`config/default`: the admission policy that checks
/// every writer's `createdBy`, ClusterRoles): on [`shared`] they would
/// change what every other suite may write. Against an existing cluster
/// (`USE_EXISTING_CLUSTER=true`) it is that cluster, like [`shared`].
pub fn installation() -> &'static TestEnv {
    static ENV: OnceLock<TestEnv> = OnceLock::new();
    ENV.get_or_init(|| start_or_panic("the installation test control plane"))
}

fn start_or_panic(what: &str) -> TestEnv {
    // Start on a runtime of our own: the caller's (a #[tokio::test]'s)
    // ends with its test.
    let started = std::thread::spawn(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(TestEnv::start()))
    })
    .join();
    match started {
        Ok(Ok(env)) => env,
        Ok(Err(err)) => panic!("{what} could not start: {err:#}"),
        Err(_) => panic!("{what} could not start: its thread panicked"),
    }
}

/// The shared PostgreSQL of this test binary (`DATABASE_URL` when set),
/// started on first use; panics with an actionable message when it cannot.
pub fn shared_postgres_url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("DATABASE_URL") {
            return url;
        }
        let pg = Postgres::start()
            .unwrap_or_else(|e| panic!("the test PostgreSQL could not start: {e:#}"));
        let url = pg.url();
        if let Ok(mut slot) = POSTGRES.lock() {
            *slot = Some(pg);
        }
        register_exit_cleanup();
        url
    })
    .clone()
}

impl TestEnv {
    async fn start() -> anyhow::Result<Self> {
        if use_existing_cluster() {
            return Self::existing().await;
        }
        let plane = ControlPlane::start(Assets::locate()?).await?;
        install_crds(&plane.client().await?).await?;
        let env = Self {
            kubeconfig: plane.kubeconfig().clone(),
            kubeconfig_path: plane.kubeconfig_path().to_owned(),
            kubectl: plane.assets().bin("kubectl"),
            existing_cluster: false,
            pids: plane.pids(),
        };
        PLANES
            .lock()
            .map_err(|_| anyhow::anyhow!("control plane lock poisoned"))?
            .push(plane);
        register_exit_cleanup();
        Ok(env)
    }

    async fn existing() -> anyhow::Result<Self> {
        let kubeconfig = Kubeconfig::read()?;
        let kubeconfig_path = std::env::var_os("KUBECONFIG")
            .and_then(|v| std::env::split_paths(&v).next())
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".kube/config")))
            .ok_or_else(|| anyhow::anyhow!("USE_EXISTING_CLUSTER=true but no kubeconfig found"))?;
        let kubectl = Assets::locate()
            .map(|a| a.bin("kubectl"))
            .unwrap_or_else(|_| "kubectl".into());
        install_crds(&client_from(&kubeconfig).await?).await?;
        Ok(Self {
            kubeconfig,
            kubeconfig_path,
            kubectl,
            existing_cluster: true,
            pids: Vec::new(),
        })
    }

    /// The environment of a [`cluster::Cluster`] (the e2e tier): its admin
    /// kubeconfig and kubectl, its processes' ids.
    pub fn of_cluster(cluster: &cluster::Cluster) -> Self {
        Self {
            kubeconfig: cluster.kubeconfig().clone(),
            kubeconfig_path: cluster.kubeconfig_path().to_owned(),
            kubectl: cluster.assets().bin("kubectl"),
            existing_cluster: false,
            pids: cluster.pids(),
        }
    }

    /// A fresh client (make one per test: clients are bound to their runtime).
    pub async fn client(&self) -> Client {
        client_from(&self.kubeconfig)
            .await
            .unwrap_or_else(|e| panic!("cannot build a client for the test cluster: {e:#}"))
    }

    /// Creates a namespace `<prefix>-<random>` for one test and returns its name.
    /// (envtest has no namespace controller, so namespaces are not deleted.)
    pub async fn namespace(&self, prefix: &str) -> String {
        let api: Api<Namespace> = Api::all(self.client().await);
        let mut ns = Namespace::default();
        ns.metadata.generate_name = Some(format!("{prefix}-"));
        // Claimed for the tests' own controllers: a controller already
        // running in the cluster (`handoff dev`, an installation) leaves it
        // alone (see `handoff_kube::cluster::NamespaceScope`).
        ns.metadata.labels = Some(
            [(
                handoff_core::names::CONTROLLER_LABEL.to_owned(),
                TEST_CONTROLLER.to_owned(),
            )]
            .into(),
        );
        let created = api
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("cannot create a test namespace: {e}"));
        created.name_any()
    }

    /// `kubectl --kubeconfig <admin kubeconfig>`.
    pub fn kubectl(&self) -> Command {
        let mut cmd = Command::new(&self.kubectl);
        cmd.arg("--kubeconfig").arg(&self.kubeconfig_path);
        cmd
    }

    /// The admin kubeconfig file.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &Kubeconfig {
        &self.kubeconfig
    }

    /// Whether this runs against an existing cluster (`USE_EXISTING_CLUSTER=true`).
    pub fn existing_cluster(&self) -> bool {
        self.existing_cluster
    }

    /// Process ids of the local control plane (empty for an existing cluster).
    pub fn pids(&self) -> &[u32] {
        &self.pids
    }
}

/// The `handoff.dev/controller` label of every test namespace.
pub const TEST_CONTROLLER: &str = "handoff-tests";

/// `USE_EXISTING_CLUSTER=true` (as in controller-runtime's envtest).
pub fn use_existing_cluster() -> bool {
    std::env::var("USE_EXISTING_CLUSTER").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Stops the shared processes and removes their directories when the process
/// exits normally (statics are never dropped). On abnormal exit the kernel
/// still kills them (parent-death signal); only the temp dirs remain.
fn register_exit_cleanup() {
    static REGISTERED: OnceLock<()> = OnceLock::new();
    REGISTERED.get_or_init(|| {
        extern "C" fn cleanup() {
            if let Ok(mut planes) = PLANES.lock() {
                planes.clear();
            }
            if let Ok(mut pg) = POSTGRES.lock() {
                drop(pg.take());
            }
        }
        // SAFETY: `cleanup` is a plain extern "C" fn with no arguments.
        unsafe {
            libc::atexit(cleanup);
        }
    });
}

/// A plane (pinned assets) that also accepts `token` as a static bearer
/// token of `user` in `system:masters`, with the CRDs installed: for
/// benchmarks and fault suites that call the bridge as a fixed agent.
pub async fn plane_with_admin_token(token: &str, user: &str) -> anyhow::Result<ControlPlane> {
    plane_with_admin_token_and(token, user, PlaneOptions::default()).await
}

/// [`plane_with_admin_token`] with further `options` (e.g. the benchmark's
/// etcd quota); their static tokens are replaced by `token`'s.
pub async fn plane_with_admin_token_and(
    token: &str,
    user: &str,
    options: PlaneOptions,
) -> anyhow::Result<ControlPlane> {
    let options = PlaneOptions {
        static_tokens: vec![StaticToken {
            token: token.into(),
            user: user.into(),
            groups: vec!["system:masters".into()],
        }],
        ..options
    };
    let plane = ControlPlane::start_with(Assets::locate()?, options).await?;
    install_crds(&plane.client().await?).await?;
    Ok(plane)
}

/// A client of `url` whose connection runs on the current Tokio runtime.
pub async fn connect_postgres(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| anyhow::anyhow!("connect to {url}: {e}"))?;
    tokio::spawn(connection);
    Ok(client)
}

/// Whether a process is gone: no `/proc` entry, or a zombie.
pub fn is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => proc_stat(&stat).is_some_and(|(state, _)| state == 'Z'),
    }
}

/// Pure: the state letter (`T` stopped, `Z` zombie) and the parent pid of
/// a `/proc/<pid>/stat` line.
pub fn proc_stat(stat: &str) -> Option<(char, i32)> {
    // The command name is in parentheses and may hold spaces.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, parent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_state_and_parent_follow_the_command_name() {
        for (stat, want) in [
            ("4242 (postgres) T 1 4242 4242 0 -1", Some(('T', 1))),
            ("7 (a (b) c) S 42 7", Some(('S', 42))),
            ("9 (defunct) Z 1 9", Some(('Z', 1))),
            ("7 (postgres) R", None),
            ("7 (postgres)", None),
            ("", None),
        ] {
            assert_eq!(proc_stat(stat), want, "{stat:?}");
        }
    }
}
