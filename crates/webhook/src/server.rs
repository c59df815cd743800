//! The webhook's HTTPS server: `POST /validate` takes an `AdmissionReview`
//! (kube's admission types) and answers with [`decide`]'s verdict; `GET
//! /healthz` answers `ok` and `/readyz` `ok` once a certificate is loaded
//! for the kubelet's probes (on the same TLS port). Each review is counted
//! in [`WebhookMetrics`], served over plain HTTP on `--metrics-listen`
//! (with `/healthz` and `/readyz` there too) by handoff-kube's telemetry.
//!
//! Each connection is bounded: the TLS handshake and each request's headers
//! within [`HANDSHAKE_TIMEOUT`], so a client that connects and stays silent
//! holds nothing. Shutdown lets open connections finish their request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use handoff_kube::tls::ServedCert;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use kube::core::DynamicObject;
use kube::core::admission::{self, AdmissionRequest, AdmissionResponse, AdmissionReview};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::decision::{Operation, Reason, Request, Verdict, decide};
use crate::metrics::{Outcome, WebhookMetrics, resource_label};
use crate::options::{Mode, WebhookArgs};

/// How long a client has for the TLS handshake, and for each request's headers.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves until Ctrl-C or SIGTERM.
pub async fn run(args: WebhookArgs) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    let served = match args.mode().map_err(anyhow::Error::msg)? {
        Mode::Files { cert, key, every } => {
            handoff_kube::tls::reloading(&cert, &key, every, &shutdown)?
        }
        Mode::Managed(managed) => {
            let client = kube::Client::try_default().await?;
            let served = ServedCert::empty();
            let manager = crate::certs::Manager::new(client, managed, served.clone());
            tokio::spawn(manager.run(shutdown.clone()));
            served
        }
    };
    let metrics = WebhookMetrics::new();
    if let Some(addr) = args.metrics_listen {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("--metrics-listen {addr}: {e}"))?;
        eprintln!(
            "handoff webhook: metrics on http://{}/metrics",
            listener.local_addr()?
        );
        let (encoded, loaded, stop) = (metrics.clone(), served.clone(), shutdown.clone());
        tokio::spawn(handoff_kube::telemetry::serve_endpoints(
            listener,
            Arc::new(move || encoded.encode()),
            Arc::new(move || loaded.loaded()),
            Arc::new(|| Ok(())),
            async move { stop.cancelled().await },
        ));
    }
    let listener = TcpListener::bind(args.listen).await?;
    println!(
        "handoff webhook: serving https://{}/validate",
        listener.local_addr()?
    );
    let stop = shutdown.clone();
    tokio::spawn(async move {
        handoff_kube::telemetry::shutdown_signal().await;
        stop.cancel();
    });
    serve(listener, served, metrics, shutdown).await
}

/// Serves the webhook on `listener` with `cert` (as it changes), counting
/// each review in `metrics`, until `shutdown`; /readyz fails while no
/// certificate is loaded.
pub async fn serve(
    listener: TcpListener,
    cert: Arc<ServedCert>,
    metrics: Arc<WebhookMetrics>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let tls = handoff_kube::tls::acceptor(cert.clone())?;
    let app = axum::Router::new()
        .route("/validate", post(validate).with_state(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || async move {
                if cert.loaded() {
                    (StatusCode::OK, "ok")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "no certificate loaded")
                }
            }),
        );
    let open = TaskTracker::new();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    tracing::warn!(error = %err, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let (tls, app, shutdown) = (tls.clone(), app.clone(), shutdown.clone());
        open.spawn(async move {
            let Ok(Ok(stream)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await
            else {
                return;
            };
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(HANDSHAKE_TIMEOUT);
            let connection =
                http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    open.close();
    open.wait().await;
    Ok(())
}

/// Answers one review and counts it; a body that is no admission request
/// is answered as before (axum's rejection, or an invalid review) and
/// counted `malformed`.
async fn validate(
    State(metrics): State<Arc<WebhookMetrics>>,
    review: Result<Json<AdmissionReview<DynamicObject>>, JsonRejection>,
) -> Response {
    let started = Instant::now();
    let request: Result<AdmissionRequest<DynamicObject>, Response> = match review {
        Ok(Json(review)) => review
            .try_into()
            .map_err(|err| Json(AdmissionResponse::invalid(err).into_review()).into_response()),
        Err(rejection) => Err(rejection.into_response()),
    };
    match request {
        Ok(request) => {
            let (response, reason) = answer(&request);
            metrics.record(
                Outcome::Decided {
                    resource: resource_label(&request.resource.resource),
                    reason,
                },
                started.elapsed(),
            );
            Json(response.into_review()).into_response()
        }
        Err(malformed) => {
            metrics.record(Outcome::Malformed, started.elapsed());
            malformed
        }
    }
}

fn spec(object: Option<&DynamicObject>) -> Option<&serde_json::Value> {
    object.and_then(|o| o.data.get("spec"))
}

/// The response to one request, and why.
fn answer(request: &AdmissionRequest<DynamicObject>) -> (AdmissionResponse, Reason) {
    let operation = match request.operation {
        admission::Operation::Create => Operation::Create,
        admission::Operation::Update => Operation::Update,
        admission::Operation::Delete | admission::Operation::Connect => Operation::Other,
    };
    let name = request
        .object
        .as_ref()
        .and_then(|o| o.metadata.name.as_deref())
        .unwrap_or(&request.name);
    let verdict = decide(&Request {
        operation,
        group: &request.kind.group,
        kind: &request.kind.kind,
        name,
        spec: spec(request.object.as_ref()),
        old_spec: spec(request.old_object.as_ref()),
    });
    let response = AdmissionResponse::from(request);
    let reason = verdict.reason();
    let response = match verdict {
        Verdict::Allowed(_) => response,
        Verdict::Refused { code, message, .. } => {
            tracing::info!(
                namespace = request.namespace.as_deref().unwrap_or_default(),
                name,
                kind = %request.kind.kind,
                user = request.user_info.username.as_deref().unwrap_or_default(),
                reason = %message,
                "refused a write"
            );
            let mut refused = response.deny(message);
            refused.result.code = code;
            refused.result.reason = "Invalid".to_owned();
            refused
        }
    };
    (response, reason)
}
