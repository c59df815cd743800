//! Logging. Every process logs structured JSON to stderr (stdout is reserved
//! for command output and, over stdio, for MCP frames). `RUST_LOG` filters;
//! the default is `info` for this crate and `warn` for dependencies, except
//! kube-client's per-request failure log, which would report every expected
//! 404/409/500 (absent handoffs, readiness polls) as an error; callers log
//! the failures that matter with context.

use tracing_subscriber::EnvFilter;

/// Installs the JSON subscriber once; later calls are no-ops.
pub fn init_logging() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("warn,handoff=info,kube_client::client::builder=off"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of a tool call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolCallLabels {
    /// Tool name.
    pub tool: String,
    /// A contract profile, or `other` (keeps the label's cardinality bounded).
    pub profile: String,
    /// `ok`, `refused`, `invalid`, `forbidden`, `unavailable` or `error`.
    pub outcome: String,
}

/// Labels of a tool's latency.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ToolLabels {
    /// Tool name.
    pub tool: String,
}

/// Labels of an identity review (a SelfSubjectReview of a bearer token).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReviewLabels {
    /// `ok` (the apiserver named the caller), `rejected` (401) or
    /// `unavailable` (the apiserver could not be asked).
    pub result: &'static str,
}

/// Labels of a request the HTTP bridge refused before any tool ran.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RefusalLabels {
    /// `unauthorized` (401), `unavailable` (503: the caller could not be
    /// identified), `over_share` (429: the caller's fair share and queue
    /// are full), `overloaded` (503: the whole bridge is full while the
    /// caller is within its share), `timeout` (503: the request took too
    /// long) or `too_large` (413).
    pub reason: &'static str,
}

/// A metric family `/metrics` lists from the start, before its first
/// series: its `# HELP` and `# TYPE` lines are written even while no label
/// combination has been recorded (an empty family is otherwise left out).
/// So the exposition names every metric a process has, which
/// docs/flags-metrics-columns.md is generated from, and a rule's expression finds its
/// family on a fresh process.
#[derive(Debug)]
pub struct Listed<M>(pub M);

impl<M: EncodeMetric> EncodeMetric for Listed<M> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }

    fn is_empty(&self) -> bool {
        false
    }
}

/// The bridge's metrics.
pub struct BridgeMetrics {
    registry: Registry,
    calls: Family<ToolCallLabels, Counter>,
    latency: Family<ToolLabels, Histogram>,
    reviews: Family<ReviewLabels, Counter>,
    refusals: Family<RefusalLabels, Counter>,
    in_flight: Gauge,
    queued: Gauge,
    queue_wait: Histogram,
    settings_reads: Counter,
}

impl BridgeMetrics {
    /// Registers `handoff_mcp_tool_calls_total`,
    /// `handoff_mcp_tool_call_duration_seconds`,
    /// `handoff_mcp_identity_reviews_total`, `handoff_mcp_http_refusals_total`,
    /// `handoff_mcp_http_requests_in_flight`,
    /// `handoff_mcp_http_requests_queued`,
    /// `handoff_mcp_http_queue_wait_seconds` and
    /// `handoff_mcp_settings_reads_total`. None has an identity label: the
    /// fair share's gauges are totals over every caller.
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("handoff_mcp");
        let calls = Family::<ToolCallLabels, Counter>::default();
        let latency = Family::<ToolLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 14))
        });
        let reviews = Family::<ReviewLabels, Counter>::default();
        let refusals = Family::<RefusalLabels, Counter>::default();
        let in_flight = Gauge::default();
        let queued = Gauge::default();
        let queue_wait = Histogram::new(exponential_buckets(0.001, 2.0, 12));
        let settings_reads = Counter::default();
        registry.register(
            "settings_reads",
            "Reads of a namespace's handoff-settings ConfigMap the bridge made with its own identity",
            settings_reads.clone(),
        );
        registry.register(
            "identity_reviews",
            "SelfSubjectReviews the bridge made to identify bearer tokens, by result",
            Listed(reviews.clone()),
        );
        registry.register(
            "http_refusals",
            "HTTP requests refused before any tool ran, by reason",
            Listed(refusals.clone()),
        );
        registry.register(
            "http_requests_in_flight",
            "HTTP requests of authenticated callers holding a slot of the fair share and not yet answered",
            in_flight.clone(),
        );
        registry.register(
            "http_requests_queued",
            "HTTP requests waiting for a slot of their caller's fair share",
            queued.clone(),
        );
        registry.register(
            "http_queue_wait_seconds",
            "How long requests waited for a slot of their caller's fair share (granted or not)",
            queue_wait.clone(),
        );
        registry.register(
            "tool_calls",
            "MCP tool calls by tool, profile and outcome",
            Listed(calls.clone()),
        );
        registry.register(
            "tool_call_duration_seconds",
            "MCP tool call latency",
            Listed(latency.clone()),
        );
        Arc::new(Self {
            registry,
            calls,
            latency,
            reviews,
            refusals,
            in_flight,
            queued,
            queue_wait,
            settings_reads,
        })
    }

    /// The counter of settings reads (see [`crate::settings::Budgets::counted`]).
    pub fn settings_reads(&self) -> &Counter {
        &self.settings_reads
    }

    /// Counts one identity review.
    pub fn identity_review(&self, result: &'static str) {
        self.reviews.get_or_create(&ReviewLabels { result }).inc();
    }

    /// Counts one refused request.
    pub fn refusal(&self, reason: &'static str) {
        self.refusals.get_or_create(&RefusalLabels { reason }).inc();
    }

    /// The gauge of admitted requests not yet answered.
    pub fn in_flight(&self) -> &Gauge {
        &self.in_flight
    }

    /// The gauge of requests waiting for a slot of their caller's share.
    pub fn queued(&self) -> &Gauge {
        &self.queued
    }

    /// Records how long one request waited for a slot.
    pub fn queue_waited(&self, waited: Duration) {
        self.queue_wait.observe(waited.as_secs_f64());
    }

    /// Records one call.
    pub fn record(&self, labels: ToolCallLabels, elapsed: Duration) {
        self.latency
            .get_or_create(&ToolLabels {
                tool: labels.tool.clone(),
            })
            .observe(elapsed.as_secs_f64());
        self.calls.get_or_create(&labels).inc();
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Serves `/metrics`, `/healthz` and `/readyz` on `listener` until `shutdown` resolves.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    metrics: Arc<BridgeMetrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_endpoints(
        listener,
        Arc::new(move || metrics.encode()),
        Arc::new(|| true),
        Arc::new(|| Ok(())),
        shutdown,
    )
    .await
}

/// Produces the OpenMetrics text of `/metrics`.
pub(crate) type Encoder = Arc<dyn Fn() -> String + Send + Sync>;
/// Answers whether `/readyz` is ok.
pub(crate) type Readiness = Arc<dyn Fn() -> bool + Send + Sync>;
/// Answers `/healthz`: ok, or the one-line reason the process is not live.
pub type Liveness = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Serves `/metrics` (from `encode`), `/healthz` (200 `ok` unless `live`
/// gives a reason: 503 with it) and `/readyz` (503 unless `ready`) on
/// `listener` until `shutdown` resolves.
pub async fn serve_endpoints(
    listener: tokio::net::TcpListener,
    encode: Encoder,
    ready: Readiness,
    live: Liveness,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::http::StatusCode;
    use axum::routing::get;
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let encode = encode.clone();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        encode(),
                    )
                }
            }),
        )
        .route(
            "/healthz",
            get(move || {
                let live = live.clone();
                async move {
                    match live() {
                        Ok(()) => (StatusCode::OK, "ok".to_owned()),
                        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason),
                    }
                }
            }),
        )
        .route(
            "/readyz",
            get(move || {
                let ready = ready.clone();
                async move {
                    if ready() {
                        (StatusCode::OK, "ok")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
                    }
                }
            }),
        );
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status line and body of `GET path` on `addr`.
    async fn get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("request");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.expect("answer");
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let status = head.lines().next().unwrap_or_default().to_owned();
        (status, body.to_owned())
    }

    #[tokio::test]
    async fn healthz_answers_503_with_the_reason_and_readyz_stays_separate() {
        let live = Arc::new(std::sync::Mutex::new(Ok::<(), String>(())));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let answer = live.clone();
        let stop = tokio_util::sync::CancellationToken::new();
        let stopped = stop.clone();
        let server = tokio::spawn(serve_endpoints(
            listener,
            Arc::new(String::new),
            Arc::new(|| true),
            Arc::new(move || answer.lock().map_or(Ok(()), |a| a.clone())),
            async move { stopped.cancelled().await },
        ));
        assert_eq!(
            get(addr, "/healthz").await,
            ("HTTP/1.1 200 OK".to_owned(), "ok".to_owned())
        );
        let reason =
            "wedged: loop handoff has pending work and made no progress for 12s (limit 10s)";
        if let Ok(mut a) = live.lock() {
            *a = Err(reason.to_owned());
        }
        assert_eq!(
            get(addr, "/healthz").await,
            (
                "HTTP/1.1 503 Service Unavailable".to_owned(),
                reason.to_owned()
            )
        );
        assert_eq!(get(addr, "/readyz").await.0, "HTTP/1.1 200 OK");
        stop.cancel();
        server.await.expect("join").expect("served");
    }
}
