//! The console's routes and the middleware every answer passes, outermost
//! first: the security headers (so refusals carry them too), the Host rule
//! (421 and an empty body for a name that is not this console's), the
//! Origin rule for anything but GET and HEAD (403 naming the rule), the
//! request timeout (503), then the handler. The CSRF rule is checked by
//! each action, which reads the form.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use maud::Markup;
use tower::{BoxError, ServiceBuilder};

use handoff_bridge::call::Services;
use handoff_bridge::limits::Limits;

use super::door::{Front, sign_in_page};
use super::guard::{CsrfKey, Hosts, SECURITY_HEADERS, check_origin};
use super::secret::{Redeemed, set_cookie};
use super::{actions, live, pages};
use crate::data::ReadError;
use crate::model::{Mode, Viewer};
use crate::render::{self, SignIn};
use crate::routes;

/// Everything a handler reads, built once.
pub(super) struct App {
    pub(super) front: Front,
    pub(super) hosts: Hosts,
    pub(super) csrf: CsrfKey,
    pub(super) services: Services,
    /// Namespaces the front page looks in.
    pub(super) candidates: Vec<String>,
    pub(super) live: live::Bounds,
    /// How often a live stream sends a keep-alive.
    pub(super) keep_alive: Duration,
}

/// What handlers share.
pub(super) type Shared = State<Arc<App>>;

/// The console's router, guarded.
pub(super) fn router(app: Arc<App>, limits: &Limits) -> Router {
    let pages = Router::new()
        .route(routes::HOME, get(pages::overview))
        .route(routes::LOGIN, get(login))
        .route(routes::SIGN_IN, get(sign_in))
        .route(routes::HEALTHZ, get(|| async { "ok" }))
        .route(routes::STYLESHEET, get(stylesheet))
        .route(routes::SCRIPT, get(script))
        .route(routes::PROJECT_PATTERN, get(pages::project))
        .route(routes::EXPORT_PATTERN, get(actions::export))
        .route(routes::HANDOFF_PATTERN, get(pages::handoff))
        .route(routes::DIFF_PATTERN, get(pages::diff))
        .route(
            routes::DELETE_PATTERN,
            get(actions::confirm_delete).post(actions::delete),
        )
        .route(routes::SEARCH_PATTERN, get(pages::search))
        .route(routes::OFFERS_PATTERN, get(pages::offers))
        .route(
            routes::REJECT_PATTERN,
            get(actions::confirm_reject).post(actions::reject),
        )
        .route(routes::SCHEDULES_PATTERN, get(pages::schedules))
        .route(routes::PROBLEMS_PATTERN, get(pages::problems))
        .route(routes::LIVE_PATTERN, get(live::stream))
        .fallback(not_found)
        .with_state(app.clone());
    let timed = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(|err: BoxError| async move {
            timed_out(&err)
        }))
        .timeout(limits.request_timeout)
        .service(pages);
    Router::new()
        .fallback_service(timed)
        .layer(middleware::from_fn_with_state(app.clone(), origin_rule))
        .layer(middleware::from_fn_with_state(app, host_rule))
        .layer(middleware::from_fn(security_headers))
}

/// Adds [`SECURITY_HEADERS`] to every answer, and `Cache-Control:
/// no-store` unless the answer set its own.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

/// 421 with no content for a Host that is not this console's.
async fn host_rule(State(app): Shared, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !app.hosts.allows(host) {
        return StatusCode::MISDIRECTED_REQUEST.into_response();
    }
    next.run(request).await
}

/// 403 naming the rule for a request other than GET or HEAD whose Origin
/// is not this console's.
async fn origin_rule(State(app): Shared, request: Request, next: Next) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD) {
        return next.run(request).await;
    }
    let headers = request.headers();
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let host = text(header::HOST).unwrap_or_default();
    let behind_proxy = app.front.mode() == Mode::Proxy;
    match check_origin(text(header::ORIGIN), host, behind_proxy) {
        Ok(()) => next.run(request).await,
        Err(refusal) => forbidden(None, refusal.message()),
    }
}

fn timed_out(err: &BoxError) -> Response {
    if !err.is::<tower::timeout::error::Elapsed>() {
        tracing::error!(error = %err, "unexpected error in the console's limits");
    }
    page(
        StatusCode::SERVICE_UNAVAILABLE,
        render::error(
            None,
            503,
            "Too slow",
            "This page took too long to read. Try again in a moment.",
        ),
    )
}

/// An HTML page with `status`.
pub(super) fn page(status: StatusCode, markup: Markup) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

/// 403 with `message` (a refusal of a guard).
pub(super) fn forbidden(viewer: Option<&Viewer>, message: &str) -> Response {
    page(
        StatusCode::FORBIDDEN,
        render::error(viewer, 403, "Refused", message),
    )
}

/// The page of a read that failed: 403, 404, 400 or 503 with the read's
/// sentence.
pub(super) fn read_error(viewer: &Viewer, err: ReadError) -> Response {
    let (status, title, message) = match err {
        ReadError::Forbidden(message) => (StatusCode::FORBIDDEN, "Not allowed", message),
        ReadError::NotFound(message) => (StatusCode::NOT_FOUND, "Not found", message),
        ReadError::Invalid {
            field,
            rule,
            problem,
        } => (
            StatusCode::BAD_REQUEST,
            "Not understood",
            format!("{field}: {problem} (rule: {rule})."),
        ),
        ReadError::Unavailable(message) => {
            (StatusCode::SERVICE_UNAVAILABLE, "Not available", message)
        }
    };
    page(
        status,
        render::error(Some(viewer), status.as_u16(), title, &message),
    )
}

/// A 400 page for a query parameter or form field that is not understood.
pub(super) fn bad_input(
    viewer: &Viewer,
    field: &'static str,
    rule: &str,
    problem: &str,
) -> Response {
    read_error(
        viewer,
        ReadError::Invalid {
            field,
            rule: rule.to_owned(),
            problem: problem.to_owned(),
        },
    )
}

/// An answer given instead of the page asked for (the sign-in page, a
/// refusal, an error page), boxed: a response is large, and most requests
/// get their page.
pub(super) struct Early(Box<Response>);

impl From<Response> for Early {
    fn from(response: Response) -> Self {
        Self(Box::new(response))
    }
}

/// The page, or the answer given instead.
pub(super) fn either(result: Result<Response, Early>) -> Response {
    result.unwrap_or_else(|Early(early)| *early)
}

/// A 303 to `location`.
pub(super) fn see_other(location: &str) -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
}

async fn not_found(State(app): Shared, headers: HeaderMap) -> Response {
    let signed = app.front.sign_in(&app.csrf, &headers, None).await.ok();
    page(
        StatusCode::NOT_FOUND,
        render::error(
            signed.as_ref().map(|s| &s.viewer),
            404,
            "Not found",
            "The console has no page at this address.",
        ),
    )
}

/// `?token=` of the one-time link: swapped for the session cookie and a
/// 303 to the front page, so the secret leaves the address bar.
async fn login(
    State(app): Shared,
    query: Result<
        Query<std::collections::HashMap<String, String>>,
        axum::extract::rejection::QueryRejection,
    >,
) -> Response {
    let Front::Laptop(laptop) = &app.front else {
        return see_other(routes::HOME);
    };
    let presented = query
        .ok()
        .and_then(|Query(q)| q.get("token").cloned())
        .unwrap_or_default();
    match laptop.link.redeem(&presented) {
        Redeemed::First => match laptop.session.start() {
            Ok(id) => (
                StatusCode::SEE_OTHER,
                [
                    (header::LOCATION, routes::HOME.to_owned()),
                    (header::SET_COOKIE, set_cookie(&id)),
                ],
            )
                .into_response(),
            Err(err) => {
                tracing::error!(error = %err, "cannot start a session");
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
        },
        Redeemed::Used => sign_in_page(Mode::Laptop, SignIn::LinkUsed),
        Redeemed::Wrong if presented.is_empty() => sign_in_page(Mode::Laptop, SignIn::LinkMissing),
        Redeemed::Wrong => sign_in_page(Mode::Laptop, SignIn::TokenRejected),
    }
}

/// The page that says how to sign in (200: it is what was asked for).
async fn sign_in(State(app): Shared) -> Response {
    let mode = app.front.mode();
    page(StatusCode::OK, render::sign_in(mode, SignIn::NoToken))
}

async fn stylesheet() -> Response {
    asset("text/css; charset=utf-8", render::STYLESHEET)
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", render::SCRIPT)
}

/// A file shipped in the binary: it changes only with the binary, so a
/// browser asks again each time (`no-cache`) but may keep it.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from(body),
    )
        .into_response()
}
