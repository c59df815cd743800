//! Streamable HTTP transport at `/mcp`: bearer-token authentication in front
//! of rmcp's service, which validates the `Host` header against an
//! allow-list (DNS-rebinding protection; in-cluster Service names must be
//! listed) and serves each request statelessly, so any number of bridge
//! replicas can sit behind one Service.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::auth::{AuthError, PROFILE_HEADER, TokenResolver, bearer_token};
use super::call::OfferSettings;
use super::server::HandoffServer;
use crate::mirror::Mirror;
use crate::telemetry::BridgeMetrics;

/// Hosts always allowed (loopback); `--allowed-host` adds more.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// What the HTTP transport serves besides the defaults.
pub struct HttpOptions {
    /// Accepted `Host` header values.
    pub allowed_hosts: Vec<String>,
    /// How the offer tools check agent activity.
    pub offers: OfferSettings,
    /// The PostgreSQL mirror lists and history are read from, if any.
    pub mirror: Option<Arc<Mirror>>,
}

/// The router: `/mcp` behind authentication.
pub fn router(
    resolver: Arc<TokenResolver>,
    metrics: Arc<BridgeMetrics>,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> axum::Router {
    let mut config =
        StreamableHttpServerConfig::default().with_allowed_hosts(options.allowed_hosts);
    let offers = options.offers;
    let mirror = options.mirror;
    config.legacy_session_mode = false;
    config.json_response = true;
    config.cancellation_token = shutdown;
    let service = StreamableHttpService::new(
        move || {
            Ok(HandoffServer::per_request(metrics.clone(), offers.clone())
                .with_mirror(mirror.clone()))
        },
        Arc::new(LocalSessionManager::default()),
        config,
    );
    axum::Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(resolver, authenticate))
}

/// Serves the router on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: tokio::net::TcpListener,
    resolver: Arc<TokenResolver>,
    metrics: Arc<BridgeMetrics>,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let app = router(resolver, metrics, options, shutdown.clone());
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

/// Resolves the bearer token into a caller and hands it to the MCP service
/// in the request's extensions; 401 without a valid token.
async fn authenticate(
    State(resolver): State<Arc<TokenResolver>>,
    mut request: Request,
    next: Next,
) -> Response {
    let token = header_text(&request, header::AUTHORIZATION.as_str())
        .and_then(|v| bearer_token(&v).map(str::to_owned));
    let Some(token) = token else {
        return unauthorized(
            "missing bearer token: send `Authorization: Bearer <ServiceAccount token>`",
            None,
        );
    };
    let profile = header_text(&request, PROFILE_HEADER);
    match resolver.caller(&token, profile.as_deref()).await {
        Ok(caller) => {
            request.extensions_mut().insert(Arc::new(caller));
            next.run(request).await
        }
        Err(AuthError::InvalidToken) => unauthorized(
            "the apiserver did not accept this bearer token",
            Some("invalid_token"),
        ),
        Err(err @ AuthError::Unavailable(_)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "2")],
            format!("{err}; retriable"),
        )
            .into_response(),
    }
}

fn header_text(request: &Request, name: &str) -> Option<String> {
    request
        .headers()
        .get(name)
        .and_then(|v: &HeaderValue| v.to_str().ok())
        .map(str::to_owned)
}

fn unauthorized(message: &str, error: Option<&str>) -> Response {
    let challenge = match error {
        Some(e) => format!("Bearer realm=\"handoff\", error=\"{e}\""),
        None => "Bearer realm=\"handoff\"".to_owned(),
    };
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
        message.to_owned(),
    )
        .into_response()
}
