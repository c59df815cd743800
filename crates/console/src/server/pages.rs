//! The read-only pages: sign the person in, read as them (`data`), draw
//! (`render`). A read that fails is its error page; a query parameter
//! that is not understood is a 400 page naming it.

use std::collections::HashMap;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::Markup;
use serde::Deserialize;

use super::door::Signed;
use super::router::{Early, Shared, bad_input, either, page, read_error};
use crate::data::{self, ReadError};
use crate::model::{ListFilters, Viewer};
use crate::render;

/// A route's path parameters (each route fills the ones it has).
#[derive(Debug, Deserialize)]
pub(super) struct Place {
    pub(super) namespace: String,
    #[serde(default)]
    pub(super) project: String,
    #[serde(default)]
    pub(super) name: String,
}

/// A route's path, or the 400 page of one that is not understood.
pub(super) type PlaceOf = Result<Path<Place>, PathRejection>;
/// A route's query, or the 400 page of one that is not understood.
pub(super) type Params = Result<Query<HashMap<String, String>>, QueryRejection>;

/// The path's parts, or a 400 page.
pub(super) fn place(place: PlaceOf) -> Result<Place, Early> {
    place.map(|Path(p)| p).map_err(|_| {
        Early::from(page(
            StatusCode::BAD_REQUEST,
            render::error(
                None,
                400,
                "Not understood",
                "path: this address has a part that is not valid UTF-8 text once decoded (rule: names are text).",
            ),
        ))
    })
}

/// The query's parameters, or a 400 page.
pub(super) fn params(viewer: &Viewer, params: Params) -> Result<HashMap<String, String>, Early> {
    params.map(|Query(q)| q).map_err(|_| {
        Early::from(bad_input(
            viewer,
            "query",
            "name=value pairs joined by & and percent-encoded",
            "the query of this address could not be read",
        ))
    })
}

/// Signs in for `namespace` (or none), answering the door's page if not.
pub(super) async fn signed(
    app: &Shared,
    headers: &HeaderMap,
    namespace: Option<&str>,
) -> Result<Signed, Early> {
    app.0.front.sign_in(&app.0.csrf, headers, namespace).await
}

/// The page of `read` drawn by `draw`, or the read's error page.
fn drawn<T>(
    viewer: &Viewer,
    read: Result<T, ReadError>,
    draw: impl FnOnce(&Viewer, &T) -> Markup,
) -> Response {
    match read {
        Ok(model) => page(StatusCode::OK, draw(viewer, &model)),
        Err(err) => read_error(viewer, err),
    }
}

/// A present, non-empty parameter.
fn text<'a>(params: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    params
        .get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// A required whole-number revision parameter, or a 400 page.
fn revision(
    viewer: &Viewer,
    params: &HashMap<String, String>,
    field: &'static str,
) -> Result<i64, Early> {
    let value = params.get(field).map(String::as_str).unwrap_or_default();
    match value.parse::<i64>() {
        Ok(n) if n > 0 => Ok(n),
        _ if value.is_empty() => Err(bad_input(
            viewer,
            field,
            "a revision number, 1 or more",
            "it is missing",
        )
        .into()),
        _ => Err(bad_input(
            viewer,
            field,
            "a revision number, 1 or more",
            &format!("{value:?} is not one"),
        )
        .into()),
    }
}

/// `/`: the namespaces and projects the person can see.
pub(super) async fn overview(app: Shared, headers: HeaderMap) -> Response {
    either(
        async {
            let signed = signed(&app, &headers, None).await?;
            let read = data::overview(&signed.client, &app.0.candidates).await;
            Ok(drawn(&signed.viewer, read, render::overview))
        }
        .await,
    )
}

/// A project's handoffs, filtered and paged as `list_handoffs`.
pub(super) async fn project(
    app: Shared,
    headers: HeaderMap,
    at: PlaceOf,
    query: Params,
) -> Response {
    either(
        async {
            let at = place(at)?;
            let signed = signed(&app, &headers, Some(&at.namespace)).await?;
            let params = params(&signed.viewer, query)?;
            let filters = ListFilters {
                repo: text(&params, "repo").map(str::to_owned),
                kind: text(&params, "kind").map(str::to_owned),
            };
            let read = data::project(
                signed.caller()?,
                &at.project,
                &filters,
                text(&params, "cursor"),
            )
            .await;
            Ok(drawn(&signed.viewer, read, render::project))
        }
        .await,
    )
}

/// One handoff.
pub(super) async fn handoff(app: Shared, headers: HeaderMap, at: PlaceOf) -> Response {
    either(
        async {
            let at = place(at)?;
            let signed = signed(&app, &headers, Some(&at.namespace)).await?;
            let read = data::handoff(signed.caller()?, &app.0.services, &at.name).await;
            Ok(drawn(&signed.viewer, read, render::handoff))
        }
        .await,
    )
}

/// The diff between two revisions of one handoff.
pub(super) async fn diff(app: Shared, headers: HeaderMap, at: PlaceOf, query: Params) -> Response {
    either(
        async {
            let at = place(at)?;
            let signed = signed(&app, &headers, Some(&at.namespace)).await?;
            let params = params(&signed.viewer, query)?;
            let from = revision(&signed.viewer, &params, "from")?;
            let to = revision(&signed.viewer, &params, "to")?;
            let read = data::diff(signed.caller()?, &app.0.services, &at.name, from, to).await;
            Ok(drawn(&signed.viewer, read, render::diff))
        }
        .await,
    )
}

/// The mirror's full-text search.
pub(super) async fn search(
    app: Shared,
    headers: HeaderMap,
    at: PlaceOf,
    query: Params,
) -> Response {
    either(
        async {
            let at = place(at)?;
            let signed = signed(&app, &headers, Some(&at.namespace)).await?;
            let params = params(&signed.viewer, query)?;
            let read = data::search(
                signed.caller()?,
                &app.0.services,
                params.get("q").map(String::as_str).unwrap_or_default(),
                text(&params, "project"),
                text(&params, "cursor"),
            )
            .await;
            Ok(drawn(&signed.viewer, read, render::search))
        }
        .await,
    )
}

/// Offers per destination.
pub(super) async fn offers(app: Shared, headers: HeaderMap, at: PlaceOf) -> Response {
    either(
        async {
            let at = place(at)?;
            let signed = signed(&app, &headers, Some(&at.namespace)).await?;
            let read = data::offers(signed.caller()?).await;
            Ok(drawn(&signed.viewer, read, render::offers))
        }
        .await,
    )
}

/// Schedules and their last cycles.
pub(super) async fn schedules(app: Shared, headers: HeaderMap, at: PlaceOf) -> Response {
    either(
        async {
            let at = place(at)?;
            let signed = signed(&app, &headers, Some(&at.namespace)).await?;
            let read = data::schedules(signed.caller()?).await;
            Ok(drawn(&signed.viewer, read, render::schedules))
        }
        .await,
    )
}

/// What needs a person's attention.
pub(super) async fn problems(app: Shared, headers: HeaderMap, at: PlaceOf) -> Response {
    either(
        async {
            let at = place(at)?;
            let signed = signed(&app, &headers, Some(&at.namespace)).await?;
            let read = data::problems(signed.caller()?, &app.0.services).await;
            Ok(drawn(&signed.viewer, read, render::problems))
        }
        .await,
    )
}
