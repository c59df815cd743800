//! Live updates: a page that shows a project's list or one handoff opens
//! an event stream (Server-Sent Events) here, and the console's script
//! fetches the page again when an event named `changed` arrives.
//!
//! The stream is a watch on Handoffs made with the PERSON's client (RBAC
//! needs `watch`; without it the stream is refused, 403), selected by the
//! `project` label or by the object's name. The first listing is not a
//! change: after it the stream sends `ready`; then each change sends
//! `changed` with the object's name and resourceVersion, changes within
//! [`COALESCE`] of each other as one (a burst of writes is one reload). A
//! watch that ends or fails ends the stream; the browser reconnects.
//! Keep-alive comments are sent well within the listener's idle timeout,
//! and the request timeout does not cut the stream (it covers the answer's
//! start, not its body).
//!
//! Streams are bounded: per person and in all ([`Bounds`]); past a bound
//! the answer is a 429 page.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::Api;
use kube::runtime::watcher::{self, Event};

use handoff_core::api::Handoff;
use handoff_core::names::PROJECT_LABEL;

use super::pages::{Params, PlaceOf, params, place, signed};
use super::router::{Early, Shared, bad_input, either, forbidden, page};
use crate::render;

/// Changes closer together than this are sent as one.
const COALESCE: Duration = Duration::from_millis(250);
/// When the browser tries again after a stream ended.
const RETRY: Duration = Duration::from_secs(3);

/// How many streams are open, in all and per person.
#[derive(Default)]
struct Open {
    total: usize,
    by_person: HashMap<String, usize>,
}

/// The bounds of open streams.
pub(crate) struct Bounds {
    total: usize,
    per_person: usize,
    open: Arc<Mutex<Open>>,
}

/// One open stream's place; given back when the stream is dropped.
struct Permit {
    open: Arc<Mutex<Open>>,
    person: String,
}

impl Bounds {
    pub(crate) fn new(total: usize, per_person: usize) -> Self {
        Self {
            total,
            per_person,
            open: Arc::default(),
        }
    }

    /// A place for one more stream of `person`, if within both bounds.
    fn admit(&self, person: &str) -> Option<Permit> {
        let mut open = self.open.lock().ok()?;
        let mine = open.by_person.get(person).copied().unwrap_or(0);
        if open.total >= self.total || mine >= self.per_person {
            return None;
        }
        open.total += 1;
        open.by_person.insert(person.to_owned(), mine + 1);
        Some(Permit {
            open: self.open.clone(),
            person: person.to_owned(),
        })
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let Ok(mut open) = self.open.lock() else {
            return;
        };
        open.total = open.total.saturating_sub(1);
        if let Some(mine) = open.by_person.get_mut(&self.person) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 {
                open.by_person.remove(&self.person);
            }
        }
    }
}

/// What a stream watches.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// A project's handoffs (its label).
    Project(String),
    /// One handoff, by object name.
    Handoff(String),
}

/// Pure: the target `?project=` or `?handoff=` names, or the field, rule
/// and problem of a query that names neither or a value that cannot be one.
fn target(
    project: Option<&str>,
    handoff: Option<&str>,
) -> Result<Target, (&'static str, &'static str, String)> {
    match (project, handoff) {
        (Some(project), None) if is_label_value(project) => Ok(Target::Project(project.to_owned())),
        (Some(project), None) => Err((
            "project",
            "a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
            format!("{project:?} is not one"),
        )),
        (None, Some(name)) if is_object_name(name) => Ok(Target::Handoff(name.to_owned())),
        (None, Some(name)) => Err((
            "handoff",
            "an object name: at most 253 lowercase letters, digits, '-' or '.'",
            format!("{name:?} is not one"),
        )),
        _ => Err((
            "query",
            "exactly one of project= or handoff=",
            "the address names neither or both".to_owned(),
        )),
    }
}

fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    (1..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

fn is_object_name(value: &str) -> bool {
    (1..=253).contains(&value.len())
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.'))
}

impl Target {
    fn config(&self) -> watcher::Config {
        match self {
            Self::Project(project) => {
                watcher::Config::default().labels(&format!("{PROJECT_LABEL}={project}"))
            }
            Self::Handoff(name) => {
                watcher::Config::default().fields(&format!("metadata.name={name}"))
            }
        }
    }
}

/// `GET /ns/{namespace}/live?project=…|handoff=…`.
pub(super) async fn stream(
    app: Shared,
    headers: HeaderMap,
    at: PlaceOf,
    query: Params,
) -> Response {
    let answer = async {
        let at = place(at)?;
        let signed = signed(&app, &headers, Some(&at.namespace)).await?;
        let viewer = &signed.viewer;
        let params = params(viewer, query)?;
        let text = |name| {
            params
                .get(name)
                .map(String::as_str)
                .filter(|v: &&str| !v.is_empty())
        };
        let target =
            target(text("project"), text("handoff")).map_err(|(field, rule, problem)| {
                Early::from(bad_input(viewer, field, rule, &problem))
            })?;
        match signed.caller()?.may("watch").await {
            Ok(true) => {}
            Ok(false) => {
                return Err(forbidden(
                    Some(viewer),
                    &format!(
                        "You may not watch handoffs in namespace {} (RBAC), so this page cannot update itself; reload it to see changes.",
                        at.namespace
                    ),
                )
                .into());
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot review a person's right to watch");
                return Err(page(
                    StatusCode::SERVICE_UNAVAILABLE,
                    render::error(Some(viewer), 503, "Not available", "The Kubernetes API did not answer whether you may watch these handoffs. Try again in a moment."),
                )
                .into());
            }
        }
        let permit = app.0.live.admit(&viewer.username).ok_or_else(|| {
            Early::from(page(
                StatusCode::TOO_MANY_REQUESTS,
                render::error(
                    Some(viewer),
                    429,
                    "Too many live pages",
                    "Too many pages that update themselves are open (yours, or everyone's on this console). Close some tabs; this page still works, reload it to see changes.",
                ),
            ))
        })?;
        let api: Api<Handoff> = Api::namespaced(signed.client.clone(), &at.namespace);
        let events = watcher::watcher(api, target.config()).boxed();
        let body = changes(Watch {
            events,
            listed: false,
            _permit: permit,
        });
        Ok(Sse::new(body)
            .keep_alive(KeepAlive::new().interval(app.0.keep_alive))
            .into_response())
    };
    either(answer.await)
}

/// A watch and its stream's place.
struct Watch {
    events: BoxStream<'static, Result<Event<Handoff>, watcher::Error>>,
    /// Whether the first listing has ended.
    listed: bool,
    _permit: Permit,
}

/// What the watch saw next.
enum Seen {
    /// The first listing ended: the stream is ready.
    Ready,
    /// An object changed (`name resourceVersion`), or the watch listed
    /// again after a gap, in which anything may have changed.
    Change(String),
    /// The watch ended or failed.
    End,
}

async fn next_seen(watch: &mut Watch) -> Seen {
    loop {
        match watch.events.next().await {
            None => return Seen::End,
            Some(Err(err)) => {
                tracing::debug!(error = %err, "a live watch ended");
                return Seen::End;
            }
            Some(Ok(Event::Apply(handoff) | Event::Delete(handoff))) => {
                let name = handoff.metadata.name.unwrap_or_default();
                let version = handoff.metadata.resource_version.unwrap_or_default();
                return Seen::Change(format!("{name} {version}"));
            }
            Some(Ok(Event::Init | Event::InitApply(_))) => {}
            Some(Ok(Event::InitDone)) if watch.listed => {
                return Seen::Change("listed-again".to_owned());
            }
            Some(Ok(Event::InitDone)) => {
                watch.listed = true;
                return Seen::Ready;
            }
        }
    }
}

/// The events of `watch`: `ready`, then one `changed` per burst of changes.
fn changes(watch: Watch) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    futures::stream::unfold(Some(watch), |state| async move {
        let mut watch = state?;
        let mut last = match next_seen(&mut watch).await {
            Seen::End => return None,
            Seen::Ready => {
                let ready = SseEvent::default()
                    .event("ready")
                    .retry(RETRY)
                    .data("watching");
                return Some((Ok(ready), Some(watch)));
            }
            Seen::Change(change) => change,
        };
        let quiet = tokio::time::sleep(COALESCE);
        tokio::pin!(quiet);
        let mut ended = false;
        loop {
            tokio::select! {
                () = &mut quiet => break,
                seen = next_seen(&mut watch) => match seen {
                    Seen::Change(change) => last = change,
                    Seen::Ready => {}
                    Seen::End => {
                        ended = true;
                        break;
                    }
                },
            }
        }
        let changed = SseEvent::default().event("changed").data(last);
        Some((Ok(changed), (!ended).then_some(watch)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(
            target(Some("shop"), None),
            Ok(Target::Project("shop".into()))
        );
        assert_eq!(
            target(None, Some("h-1.x")),
            Ok(Target::Handoff("h-1.x".into()))
        );
        let refused = [
            (None, None, "query"),
            (Some("a"), Some("b"), "query"),
            (Some("a,b"), None, "project"),
            (Some("a=b"), None, "project"),
            (Some("-a"), None, "project"),
            (None, Some("A"), "handoff"),
            (None, Some("a,metadata.namespace=x"), "handoff"),
        ];
        for (project, handoff, field) in refused {
            let err = target(project, handoff).expect_err("refused");
            assert_eq!(err.0, field, "{project:?} {handoff:?}");
        }
    }

    #[test]
    fn streams_are_bounded_per_person_and_in_all() {
        let bounds = Bounds::new(3, 2);
        let a1 = bounds.admit("a").expect("a's first");
        let a2 = bounds.admit("a").expect("a's second");
        assert!(bounds.admit("a").is_none(), "a's third is past a's bound");
        let b1 = bounds.admit("b").expect("b's first");
        assert!(bounds.admit("c").is_none(), "past the bound of all");
        drop(a1);
        let c1 = bounds.admit("c").expect("a place was given back");
        drop((a2, b1, c1));
        let open = bounds.open.lock().expect("lock");
        assert_eq!(open.total, 0);
        assert!(open.by_person.is_empty());
    }
}
