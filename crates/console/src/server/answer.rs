//! The answers handlers give besides their page: error and refusal pages
//! with their status, redirects, and [`Early`], the answer given instead
//! of a page (a leaf: every handler module uses it).

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::Markup;

use crate::data::ReadError;
use crate::model::Viewer;
use crate::render;

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
