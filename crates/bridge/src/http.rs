//! Streamable HTTP transport at `/mcp`: bearer-token authentication in front
//! of rmcp's service, which validates the `Host` header against an
//! allow-list (DNS-rebinding protection; in-cluster Service names must be
//! listed) and serves each request statelessly, so any number of bridge
//! replicas can sit behind one Service.
//!
//! Every request passes, outermost first: the request timeout (503 +
//! `Retry-After`), the body limit (a declared Content-Length over
//! `--max-body-bytes` is 413 before anything is read or authenticated; a
//! streamed body is stopped at the same limit), authentication, then the
//! fair share ([`super::fair`]): a slot of its caller's share of
//! `--max-in-flight`, or a wait in its caller's queue, or 429 (over its
//! share) / 503 (the bridge is full) with `Retry-After`. A caller that is
//! not authenticated only ever reads one of the fixed texts below, never
//! the apiserver's wording.
//!
//! No in-flight limit sits in front of authentication: one there would be
//! shared by every caller, so one identity's queued requests could fill it
//! and starve the rest. The work before the fair share is bounded
//! otherwise: `--max-connections` (one request at a time per HTTP/1.1
//! connection), `--max-concurrent-reviews` for tokens not yet known, and
//! the rejected-token cache, which answers a known bad token without
//! asking the apiserver.
//!
//! An authenticated POST gets exactly one JSON-RPC answer: its body is
//! judged before rmcp sees it ([`crate::jsonrpc::judge`]), and a body rmcp
//! could not read (not JSON, not an object, params that do not fit, a
//! notification that is not an MCP message) is answered `400` with a
//! JSON-RPC error (under the request's id when it has one), not rmcp's
//! plain-text `415`. A `Content-Type` other than JSON is `415` (the HTTP
//! status for it, which rmcp gives too) with the same JSON-RPC body; a
//! refusal rmcp makes itself on the headers (e.g. `406` for the `Accept`
//! header) keeps its status and gets a JSON-RPC body, with rmcp's text as
//! the message.
//! Connections (plain or TLS, timeouts) are [`super::listener`]'s.

use std::sync::Arc;

use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use tower::{BoxError, ServiceBuilder};

use super::auth::{AuthError, NamespaceError, PROFILE_HEADER, TokenResolver, bearer_token};
use super::call::OfferSettings;
use super::fair::{FairShare, Identity, RETRY_AFTER_SECONDS, fair_share};
use super::jsonrpc::{INVALID_REQUEST, PARSE_ERROR, Refusal, Verdict, id_of, judge};
use super::limits::Limits;
use super::server::HandoffServer;
use handoff_kube::settings::Budgets;
use handoff_kube::telemetry::BridgeMetrics;
use handoff_mirror::Mirror;

/// Hosts always allowed (loopback); `--allowed-host` adds more.
pub(crate) const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// 401 without a bearer token.
pub const MISSING_TOKEN: &str =
    "missing bearer token: send `Authorization: Bearer <ServiceAccount token>`";
/// 401 for a token the apiserver rejected.
pub const REJECTED_TOKEN: &str = "the apiserver did not accept this bearer token";
/// 503 when the caller cannot be identified (the apiserver's error is logged, not sent).
pub const UNAVAILABLE: &str = "the Kubernetes API is unavailable; retriable";
/// 503 when a request outlives `--request-timeout`.
pub(crate) const TIMED_OUT: &str = "the request took longer than the bridge allows; retriable";
/// 413 for a declared body over `--max-body-bytes`.
pub(crate) const TOO_LARGE: &str = "the request body is larger than the bridge accepts";

/// What the HTTP transport serves besides the defaults.
pub struct HttpOptions {
    /// Accepted `Host` header values.
    pub allowed_hosts: Vec<String>,
    /// How the offer tools check agent activity.
    pub offers: OfferSettings,
    /// The namespaces' lint budgets, read with the bridge's own identity.
    pub budgets: Arc<Budgets>,
    /// The PostgreSQL mirror lists and history are read from, if any.
    pub mirror: Option<Arc<Mirror>>,
    /// Request and connection limits.
    pub limits: Limits,
    /// Serve HTTPS with this acceptor (its certificate reloads itself).
    pub tls: Option<tokio_rustls::TlsAcceptor>,
}

/// What authentication needs.
#[derive(Clone)]
struct Gate {
    resolver: Arc<TokenResolver>,
    metrics: Arc<BridgeMetrics>,
}

/// The route of a call in a namespace the caller names (people, CI
/// identities: callers that are not ServiceAccounts, whose own namespace
/// `/mcp` uses).
pub(crate) const NAMESPACE_ROUTE: &str = "/mcp/ns/{namespace}";

/// Pure: the namespace a request path names (`/mcp/ns/<namespace>`), if any.
pub(crate) fn route_namespace(path: &str) -> Option<&str> {
    path.strip_prefix("/mcp/ns/")
        .map(|rest| rest.trim_end_matches('/'))
}

/// The router: `/mcp` (and [`NAMESPACE_ROUTE`]) behind authentication,
/// behind the request limits.
pub(crate) fn router(
    resolver: Arc<TokenResolver>,
    metrics: Arc<BridgeMetrics>,
    options: &HttpOptions,
    shutdown: CancellationToken,
) -> axum::Router {
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(options.allowed_hosts.clone())
        .with_max_request_body_bytes(options.limits.max_body_bytes);
    let offers = options.offers.clone();
    let budgets = options.budgets.clone();
    let mirror = options.mirror.clone();
    config.legacy_session_mode = false;
    config.json_response = true;
    config.cancellation_token = shutdown;
    let server_metrics = metrics.clone();
    let service = StreamableHttpService::new(
        move || {
            Ok(
                HandoffServer::per_request(server_metrics.clone(), offers.clone(), budgets.clone())
                    .with_mirror(mirror.clone()),
            )
        },
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let gate = Gate {
        resolver,
        metrics: metrics.clone(),
    };
    let app = axum::Router::new()
        .route_service("/mcp", service.clone())
        .route_service(NAMESPACE_ROUTE, service)
        .layer(axum::middleware::from_fn_with_state(
            options.limits.max_body_bytes,
            one_answer,
        ))
        .layer(axum::middleware::from_fn_with_state(
            fair(&options.limits, metrics.clone()),
            fair_share,
        ))
        .layer(axum::middleware::from_fn_with_state(gate, authenticate));
    guarded(app, &options.limits, metrics)
}

/// The fair share `limits` set.
fn fair(limits: &Limits, metrics: Arc<BridgeMetrics>) -> Arc<FairShare> {
    FairShare::new(limits.shares(), limits.queue_wait, metrics)
}

/// `app` behind the request timeout and the declared-body limit (see the
/// module docs), counting refusals.
fn guarded(app: axum::Router, limits: &Limits, metrics: Arc<BridgeMetrics>) -> axum::Router {
    let refusals = metrics.clone();
    let limited = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(move |err: BoxError| {
            let metrics = refusals.clone();
            async move { refused(&err, &metrics) }
        }))
        .timeout(limits.request_timeout)
        .layer(axum::middleware::from_fn_with_state(
            (metrics, limits.max_body_bytes),
            admit,
        ))
        .service(app);
    axum::Router::new().fallback_service(limited)
}

/// The answer to a request a limit stopped.
fn refused(err: &BoxError, metrics: &BridgeMetrics) -> Response {
    if !err.is::<tower::timeout::error::Elapsed>() {
        tracing::error!(error = %err, "unexpected error in the HTTP limits");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    metrics.refusal("timeout");
    retry_later(TIMED_OUT)
}

fn retry_later(text: &'static str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, RETRY_AFTER_SECONDS)],
        text,
    )
        .into_response()
}

/// Refuses a declared body over the limit before it is read.
async fn admit(
    State((metrics, max_body_bytes)): State<(Arc<BridgeMetrics>, usize)>,
    request: Request,
    next: Next,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > max_body_bytes as u64) {
        metrics.refusal("too_large");
        return (StatusCode::PAYLOAD_TOO_LARGE, TOO_LARGE).into_response();
    }
    let response = next.run(request).await;
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE {
        metrics.refusal("too_large");
    }
    response
}

/// Most bytes of a plain-text refusal of rmcp's turned into a JSON-RPC error.
const MAX_REFUSAL_BYTES: usize = 64 * 1024;

/// Gives an authenticated POST exactly one JSON-RPC answer (see the module
/// docs): a body rmcp could not read is answered `400` here; a plain-text
/// client error of rmcp's keeps its status and gets a JSON-RPC body.
async fn one_answer(State(max_body_bytes): State<usize>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, max_body_bytes).await else {
        let refusal = Refusal {
            id: serde_json::Value::Null,
            code: INVALID_REQUEST,
            message: TOO_LARGE.to_owned(),
        };
        return json_rpc_error(StatusCode::PAYLOAD_TOO_LARGE, &refusal);
    };
    let is_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("application/json")
        });
    if !is_json {
        let refusal = Refusal {
            id: id_of(&bytes),
            code: INVALID_REQUEST,
            message: "Unsupported Media Type: Content-Type must be application/json".to_owned(),
        };
        return json_rpc_error(StatusCode::UNSUPPORTED_MEDIA_TYPE, &refusal);
    }
    let refusal = match judge(&bytes) {
        Verdict::Forward => None,
        Verdict::Blank => Some(Refusal {
            id: serde_json::Value::Null,
            code: PARSE_ERROR,
            message: "Parse error: the request body is empty".to_owned(),
        }),
        Verdict::Drop => Some(Refusal {
            id: serde_json::Value::Null,
            code: INVALID_REQUEST,
            message: "Invalid Request: a notification the server cannot read".to_owned(),
        }),
        Verdict::Answer(refusal) => Some(refusal),
    };
    if let Some(refusal) = refusal {
        return json_rpc_error(StatusCode::BAD_REQUEST, &refusal);
    }
    let id = id_of(&bytes);
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let status = response.status();
    if !status.is_client_error() || is_json {
        return response;
    }
    let text = axum::body::to_bytes(response.into_body(), MAX_REFUSAL_BYTES)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|_| status.to_string());
    json_rpc_error(
        status,
        &Refusal {
            id,
            code: INVALID_REQUEST,
            message: text,
        },
    )
}

fn json_rpc_error(status: StatusCode, refusal: &Refusal) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        refusal.to_line(),
    )
        .into_response()
}

/// Serves the router on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: tokio::net::TcpListener,
    resolver: Arc<TokenResolver>,
    metrics: Arc<BridgeMetrics>,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let app = router(resolver, metrics, &options, shutdown.clone());
    super::listener::serve(listener, app, options.tls, &options.limits, shutdown).await
}

/// Resolves the bearer token into a caller and hands it to the MCP service
/// in the request's extensions; 401 without a valid token, 503 when the
/// apiserver cannot be asked; either with a fixed text.
async fn authenticate(State(gate): State<Gate>, mut request: Request, next: Next) -> Response {
    let token = header_text(&request, header::AUTHORIZATION.as_str())
        .and_then(|v| bearer_token(&v).map(str::to_owned));
    let Some(token) = token else {
        gate.metrics.refusal("unauthorized");
        return unauthorized(MISSING_TOKEN, None);
    };
    let profile = header_text(&request, PROFILE_HEADER);
    let route = route_namespace(request.uri().path()).map(str::to_owned);
    match gate
        .resolver
        .caller(&token, profile.as_deref(), route.as_deref())
        .await
    {
        Ok(caller) => {
            let identity = Identity(Arc::from(caller.known_username()));
            request.extensions_mut().insert(identity);
            request.extensions_mut().insert(Arc::new(caller));
            next.run(request).await
        }
        Err(AuthError::InvalidToken) => {
            gate.metrics.refusal("unauthorized");
            unauthorized(REJECTED_TOKEN, Some("invalid_token"))
        }
        Err(AuthError::Namespace(err)) => {
            gate.metrics.refusal("namespace");
            let status = match err {
                NamespaceError::NotServed { .. } => StatusCode::NOT_FOUND,
                NamespaceError::Unnamed { .. } | NamespaceError::Invalid { .. } => {
                    StatusCode::BAD_REQUEST
                }
            };
            (status, err.to_string()).into_response()
        }
        Err(AuthError::Unavailable(detail)) => {
            tracing::warn!(error = %detail, "cannot identify a caller: the Kubernetes API is unavailable");
            gate.metrics.refusal("unavailable");
            retry_later(UNAVAILABLE)
        }
    }
}

fn header_text(request: &Request, name: &str) -> Option<String> {
    request
        .headers()
        .get(name)
        .and_then(|v: &HeaderValue| v.to_str().ok())
        .map(str::to_owned)
}

fn unauthorized(message: &'static str, error: Option<&str>) -> Response {
    let challenge = match error {
        Some(e) => format!("Bearer realm=\"handoff\", error=\"{e}\""),
        None => "Bearer realm=\"handoff\"".to_owned(),
    };
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
        message,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn route_namespaces() {
        for (path, want) in [
            ("/mcp", None),
            ("/mcp/ns/team-a", Some("team-a")),
            ("/mcp/ns/team-a/", Some("team-a")),
            ("/mcp/ns/", Some("")),
            ("/other/ns/x", None),
        ] {
            assert_eq!(route_namespace(path), want, "{path}");
        }
    }

    use std::time::Duration;

    use axum::body::Body;
    use axum::routing::post;
    use tower::ServiceExt;

    use super::*;

    fn limits(max_in_flight: usize, request_timeout: Duration) -> Limits {
        Limits {
            max_in_flight,
            request_timeout,
            max_body_bytes: 16,
            ..Limits::default()
        }
    }

    fn post_mcp(body: &'static str) -> Request {
        Request::post("/mcp")
            .header(header::CONTENT_LENGTH, body.len())
            .body(Body::from(body))
            .expect("request")
    }

    async fn text(response: Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .expect("body");
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// `/mcp` answers once `gate` lets it (one permit per request).
    fn held(gate: Arc<tokio::sync::Semaphore>) -> axum::Router {
        axum::Router::new().route(
            "/mcp",
            post(move || {
                let gate = gate.clone();
                async move {
                    let _permit = gate.acquire().await.expect("gate open");
                    "answered"
                }
            }),
        )
    }

    #[tokio::test]
    async fn a_request_past_its_timeout_is_a_retriable_503() {
        let metrics = BridgeMetrics::new();
        let never = Arc::new(tokio::sync::Semaphore::new(0));
        let app = guarded(
            held(never),
            &limits(4, Duration::from_millis(50)),
            metrics.clone(),
        );
        let answer = app.oneshot(post_mcp("{}")).await.expect("infallible");
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer.headers()[header::RETRY_AFTER], "1");
        assert_eq!(text(answer).await, TIMED_OUT);
    }

    #[tokio::test]
    async fn a_declared_body_over_the_limit_is_413_before_the_handler_runs() {
        let metrics = BridgeMetrics::new();
        let closed = Arc::new(tokio::sync::Semaphore::new(0));
        let app = guarded(
            held(closed),
            &limits(4, Duration::from_secs(60)),
            metrics.clone(),
        );
        let answer = app
            .oneshot(post_mcp("{\"seventeen\":\"b\"}"))
            .await
            .expect("infallible");
        assert_eq!(answer.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(text(answer).await, TOO_LARGE);
        assert!(
            metrics
                .encode()
                .contains("handoff_mcp_http_refusals_total{reason=\"too_large\"} 1")
        );
    }

    /// `/mcp` behind [`one_answer`], where the inner service answers
    /// `inner` (status, content type, body) to whatever reaches it.
    fn answering(inner: (StatusCode, &'static str, &'static str)) -> axum::Router {
        axum::Router::new()
            .route(
                "/mcp",
                post(move || async move {
                    (inner.0, [(header::CONTENT_TYPE, inner.1)], inner.2).into_response()
                }),
            )
            .layer(axum::middleware::from_fn_with_state(64usize, one_answer))
    }

    /// The id and code of the JSON-RPC error expected, if one is.
    type Refused = Option<(serde_json::Value, i64)>;

    #[tokio::test]
    async fn every_post_gets_one_json_rpc_answer() {
        let ok = (
            StatusCode::OK,
            "application/json",
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        );
        let unsupported = (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "text/plain",
            "Unsupported Media Type: Content-Type must be application/json",
        );
        // (inner answer, body, status, id, code; None: the inner answer unchanged)
        let cases: Vec<(_, &'static str, StatusCode, Refused)> = vec![
            (
                ok,
                r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
                StatusCode::OK,
                None,
            ),
            (
                ok,
                r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":""}"#,
                StatusCode::BAD_REQUEST,
                Some((serde_json::json!(1), -32602)),
            ),
            (
                ok,
                r#"{"jsonrpc":"2.0","id":"s","method":"tools/list","params":[null]}"#,
                StatusCode::BAD_REQUEST,
                Some((serde_json::json!("s"), -32602)),
            ),
            (
                ok,
                "{not json",
                StatusCode::BAD_REQUEST,
                Some((serde_json::Value::Null, -32700)),
            ),
            (
                ok,
                "",
                StatusCode::BAD_REQUEST,
                Some((serde_json::Value::Null, -32700)),
            ),
            (
                ok,
                "-1",
                StatusCode::BAD_REQUEST,
                Some((serde_json::Value::Null, -32600)),
            ),
            (
                ok,
                r#"{"jsonrpc":"2.0","method":"ping","params":5}"#,
                StatusCode::BAD_REQUEST,
                Some((serde_json::Value::Null, -32600)),
            ),
            (
                ok,
                "x",
                StatusCode::BAD_REQUEST,
                Some((serde_json::Value::Null, -32700)),
            ),
            (
                unsupported,
                r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                Some((serde_json::json!(4), -32600)),
            ),
        ];
        for (inner, body, status, error) in cases {
            let request = Request::post("/mcp")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body))
                .expect("request");
            let answer = answering(inner).oneshot(request).await.expect("infallible");
            assert_eq!(answer.status(), status, "{body}");
            let got = text(answer).await;
            match error {
                None => assert_eq!(got, inner.2, "{body}"),
                Some((id, code)) => {
                    let got: serde_json::Value =
                        serde_json::from_str(&got).expect("a JSON-RPC body");
                    assert_eq!(
                        (&got["id"], got["error"]["code"].as_i64()),
                        (&id, Some(code)),
                        "{body}: {got}"
                    );
                }
            }
        }
        let plain = Request::post("/mcp")
            .header(header::CONTENT_TYPE, "text/plain")
            .body(Body::from(r#"{"jsonrpc":"2.0","id":"t","method":"ping"}"#))
            .expect("request");
        let answer = answering(ok).oneshot(plain).await.expect("infallible");
        assert_eq!(answer.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let got: serde_json::Value = serde_json::from_str(&text(answer).await).expect("JSON");
        assert_eq!(
            (&got["id"], got["error"]["code"].as_i64()),
            (&serde_json::json!("t"), Some(-32600))
        );
        let long = Request::post("/mcp")
            .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
            .body(Body::from(
                "{\"x\":\"".to_owned() + &"y".repeat(100) + "\"}",
            ))
            .expect("request");
        let answer = answering(ok).oneshot(long).await.expect("infallible");
        assert_eq!(answer.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let got: serde_json::Value = serde_json::from_str(&text(answer).await).expect("JSON");
        assert_eq!(got["error"]["message"], TOO_LARGE);
    }
}
