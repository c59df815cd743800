//! An in-process controller for a test: one builder instead of a setup per
//! suite. [`InProcess::new`] starts from the flags' defaults
//! ([`ControllerOptions::defaults`]), watching one namespace, with a short
//! Lease there (a stopped leader is replaced within seconds) and the clock
//! the test drives (a [`handoff_core::time::ManualClock`], or the system's
//! where the test needs real time to pass); [`InProcess::options`] changes
//! what a test needs, and [`InProcess::start`] runs it.

use std::sync::Arc;
use std::time::Duration;

use handoff_controller::{ControllerMetrics, ControllerOptions};
use handoff_core::time::Clock;
use kube::Client;
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
