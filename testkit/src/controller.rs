//! An in-process controller for a test: one builder instead of a setup per
//! suite. [`InProcess::new`] starts from the flags' defaults
//! ([`ControllerOptions::defaults`]), watching one namespace, with a short
//! Lease there (a stopped leader is replaced within seconds) and the clock
//! the test drives (a [`handoff_core::time::ManualClock`], or the system's
//! where the test needs real time to pass); [`InProcess::options`] changes
//! what a test needs, and [`InProcess::start`] runs it.
//!
//! [`Scene`] is the rest of a controller test's set-up: a namespace of its
//! own on the shared control plane, a client, the Handoff API and the
//! store there, and (when the test mirrors) the shared PostgreSQL — so a
//! test starts in a line or two and its body says what it checks.

use std::sync::Arc;
use std::time::Duration;

use handoff_controller::{ControllerMetrics, ControllerOptions};
use handoff_core::api::Handoff;
use handoff_core::time::{Clock, SystemClock};
use handoff_kube::store::HandoffStore;
use kube::{Api, Client};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The Lease of an in-process controller: short enough that a stopped
/// leader is replaced within seconds.
pub const TEST_LEASE: (Duration, Duration, Duration) = (
    Duration::from_secs(3),
    Duration::from_secs(2),
    Duration::from_millis(250),
);

/// How a test's controller is set up (see the module docs).
pub struct InProcess {
    options: ControllerOptions,
    clock: Arc<dyn Clock>,
}

impl InProcess {
    /// A controller of `namespace` identified as `identity`, its Lease in
    /// `namespace`, reading `clock`.
    pub fn new(namespace: &str, identity: &str, clock: Arc<dyn Clock>) -> Self {
        let (lease_duration, renew_deadline, retry_period) = TEST_LEASE;
        let options = ControllerOptions {
            namespace: Some(namespace.to_owned()),
            lease_namespace: Some(namespace.to_owned()),
            identity: Some(identity.to_owned()),
            lease_duration,
            renew_deadline,
            retry_period,
            ..ControllerOptions::defaults()
        };
        Self { options, clock }
    }

    /// Mirrors into the PostgreSQL database at `url`.
    pub fn mirror(mut self, url: &str) -> Self {
        self.options = self.options.with_mirror(url);
        self
    }

    /// Reads `clock` instead.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// What a test waits for comes soon: a mirror resync every 2 s,
    /// grooming and the Events' series counts every 200 ms.
    pub fn prompt(self) -> Self {
        self.options(|o| {
            o.mirror_resync_interval = Duration::from_secs(2);
            o.groom_interval = Duration::from_millis(200);
            o.event_refresh = Duration::from_millis(200);
        })
    }

    /// Changes the options (struct update of what the test needs).
    pub fn options(mut self, change: impl FnOnce(&mut ControllerOptions)) -> Self {
        change(&mut self.options);
        self
    }

    /// Starts the controller with `client`.
    pub fn start(self, client: Client) -> Running {
        let metrics = ControllerMetrics::new();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(handoff_controller::run(
            client,
            self.options,
            self.clock,
            metrics.clone(),
            shutdown.clone(),
        ));
        Running {
            shutdown,
            task,
            metrics,
        }
    }
}

/// A running in-process controller.
pub struct Running {
    shutdown: CancellationToken,
    task: JoinHandle<anyhow::Result<()>>,
    /// Its metrics (leadership, resync passes, `/healthz`).
    pub metrics: Arc<ControllerMetrics>,
}

impl Running {
    /// Graceful stop: in-flight reconciles finish, counted Events are
    /// written, the lease is released; fails the test if the controller
    /// failed or did not stop within 30 s.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("the controller stops within 30s of a graceful shutdown")
            .expect("controller task")
            .expect("controller result");
    }

    /// A crash: the task is dropped where it stands, the lease stays held.
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// A test's namespace on the shared control plane and what the test
/// reads and writes there with (see the module docs).
pub struct Scene {
    /// The namespace, made for this test.
    pub ns: String,
    /// The admin's client.
    pub client: Client,
    /// The Handoffs of [`Scene::ns`].
    pub api: Api<Handoff>,
    /// The store of [`Scene::ns`], as the bridge writes.
    pub store: HandoffStore,
}

impl Scene {
    /// A new namespace named after `prefix` on [`crate::shared`].
    pub async fn new(prefix: &str) -> Self {
        let env = crate::shared();
        let ns = env.namespace(prefix).await;
        let client = env.client().await;
        Self {
            api: Api::namespaced(client.clone(), &ns),
            store: HandoffStore::new(client.clone(), &ns),
            ns,
            client,
        }
    }

    /// A [`prompt`](InProcess::prompt) controller of [`Scene::ns`]
    /// identified as `identity`, on the system clock.
    pub fn controller(&self, identity: &str) -> InProcess {
        InProcess::new(&self.ns, identity, Arc::new(SystemClock)).prompt()
    }
}

/// The URL of the shared PostgreSQL ([`crate::shared_postgres_url`],
/// started on first use) and a connection to it.
pub async fn postgres() -> (String, tokio_postgres::Client) {
    let url = tokio::task::spawn_blocking(crate::shared_postgres_url)
        .await
        .expect("the shared PostgreSQL");
    let db = crate::connect_postgres(&url)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    (url, db)
}
