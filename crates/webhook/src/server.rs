//! The webhook's HTTPS server: `POST /validate` takes an `AdmissionReview`
//! (kube's admission types) and answers with [`decide`]'s verdict; `GET
//! /healthz` answers `ok` and `/readyz` `ok` once a certificate is loaded
//! for the kubelet's probes (on the same TLS port).
//!
//! Each connection is bounded: the TLS handshake and each request's headers
//! within [`HANDSHAKE_TIMEOUT`], so a client that connects and stays silent
//! holds nothing. Shutdown lets open connections finish their request.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::http::StatusCode;
use axum::routing::{get, post};
use handoff_kube::tls::ServedCert;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use kube::core::DynamicObject;
use kube::core::admission::{self, AdmissionRequest, AdmissionResponse, AdmissionReview};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::decision::{Operation, Request, Verdict, decide};
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
    serve(listener, served, shutdown).await
}

/// Serves the webhook on `listener` with `cert` (as it changes) until
/// `shutdown`; /readyz fails while no certificate is loaded.
pub async fn serve(
    listener: TcpListener,
    cert: Arc<ServedCert>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let tls = handoff_kube::tls::acceptor(cert.clone())?;
    let app = axum::Router::new()
        .route("/validate", post(validate))
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

async fn validate(
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(request) => request,
        Err(err) => return Json(AdmissionResponse::invalid(err).into_review()),
    };
    Json(answer(&request).into_review())
}

fn spec(object: Option<&DynamicObject>) -> Option<&serde_json::Value> {
    object.and_then(|o| o.data.get("spec"))
}

/// The response to one request.
fn answer(request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
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
    match verdict {
        Verdict::Allowed => response,
        Verdict::Refused { code, message } => {
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
    }
}
