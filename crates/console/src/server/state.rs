//! What every handler shares ([`App`], built once) and reads from its
//! request first: the route's path and query, and who is asking.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use handoff_bridge::call::Services;

use super::answer::{Early, bad_input, page};
use super::bounds::Bounds;
use super::door::{Front, Signed};
use super::guard::{CsrfKey, Hosts};
use crate::model::Viewer;
use crate::render;

/// Everything a handler reads, built once.
pub(super) struct App {
    pub(super) front: Front,
    pub(super) hosts: Hosts,
    pub(super) csrf: CsrfKey,
    pub(super) services: Services,
    /// Namespaces the front page looks in.
    pub(super) candidates: Vec<String>,
    pub(super) live: Bounds,
    /// Cancelled when the console stops: live streams end then (an open
    /// page would otherwise hold the shutdown until it is killed).
    pub(super) shutdown: CancellationToken,
    /// How often a live stream sends a keep-alive.
    pub(super) keep_alive: Duration,
}

/// What handlers share.
pub(super) type Shared = State<Arc<App>>;

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
