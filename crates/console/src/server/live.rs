//! Live updates: a page that shows a project's list or one handoff opens
//! an event stream (Server-Sent Events) here, and the console's script
//! fetches the page again when an event named `changed` arrives.
//!
//! The stream is a watch on Handoffs made with the PERSON's client (RBAC
//! needs `watch`; without it the stream is refused, 403), selected by the
//! `project` label or by the object's name. A page names the
//! resourceVersion it drew (`?since=`): the watch starts there, so a write
//! between the page's read and the stream's start is still announced (a
//! list-then-watch would fold it into its first listing). The stream sends
//! `ready` at once; then each change sends `changed` with the object's name
//! and resourceVersion, changes within [`COALESCE`] of each other as one (a
//! burst of writes is one reload). When the apiserver no longer has that
//! version (410, expired) the stream sends `changed` and ends: the page is
//! fetched again and names a fresh version. Without `since` the watch
//! lists first, and the end of that listing sends `ready`. A watch that
//! ends or fails ends the stream; the browser reconnects.
//! Keep-alive comments are sent well within the listener's idle timeout,
//! and the request timeout does not cut the stream (it covers the answer's
//! start, not its body).
//!
//! Streams are bounded: per person and in all (`bounds`); past a bound
//! the answer is a 429 page. Every stream ends when the console stops, so
//! an open page does not hold up its shutdown (the browser reconnects to
//! the next console).

use std::convert::Infallible;
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::Api;
use kube::api::{WatchEvent, WatchParams};
use kube::runtime::watcher::{self, Event};

use handoff_core::api::Handoff;
use handoff_core::names::PROJECT_LABEL;

use super::answer::{Early, bad_input, either, forbidden, page};
use super::bounds::Permit;
use super::state::{Params, PlaceOf, Shared, params, place, signed};
use crate::render;

/// Changes closer together than this are sent as one.
const COALESCE: Duration = Duration::from_millis(250);
/// When the browser tries again after a stream ended.
const RETRY: Duration = Duration::from_secs(3);
/// The most digits a resourceVersion given in `?since=` may have (a u64's).
const SINCE_DIGITS: usize = 20;

/// A refusal of the query: the field, the rule and the problem.
type Refusal = (&'static str, &'static str, String);

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
fn target(project: Option<&str>, handoff: Option<&str>) -> Result<Target, Refusal> {
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

/// Pure: the resourceVersion `?since=` names, when given, or the field,
/// rule and problem of one that cannot be a resourceVersion.
fn since(value: Option<&str>) -> Result<Option<String>, Refusal> {
    match value {
        None => Ok(None),
        Some(v)
            if (1..=SINCE_DIGITS).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_digit()) =>
        {
            Ok(Some(v.to_owned()))
        }
        Some(v) => Err((
            "since",
            "a resourceVersion: 1 to 20 digits",
            format!("{v:?} is not one"),
        )),
    }
}

impl Target {
    fn labels(&self) -> Option<String> {
        match self {
            Self::Project(project) => Some(format!("{PROJECT_LABEL}={project}")),
            Self::Handoff(_) => None,
        }
    }

    fn fields(&self) -> Option<String> {
        match self {
            Self::Project(_) => None,
            Self::Handoff(name) => Some(format!("metadata.name={name}")),
        }
    }

    fn config(&self) -> watcher::Config {
        watcher::Config {
            label_selector: self.labels(),
            field_selector: self.fields(),
            ..watcher::Config::default()
        }
    }

    fn params(&self) -> WatchParams {
        WatchParams {
            label_selector: self.labels(),
            field_selector: self.fields(),
            ..WatchParams::default()
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
        let refused =
            |(field, rule, problem): Refusal| Early::from(bad_input(viewer, field, rule, &problem));
        let target = target(text("project"), text("handoff")).map_err(refused)?;
        let since = since(text("since")).map_err(refused)?;
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
        let client = app.0.front.watcher(&signed).map_err(|err| {
            tracing::warn!(error = %err, "cannot make a client for a live watch");
            Early::from(page(
                StatusCode::SERVICE_UNAVAILABLE,
                render::error(Some(viewer), 503, "Not available", "The console could not start watching these handoffs. Reload the page to see changes."),
            ))
        })?;
        let api: Api<Handoff> = Api::namespaced(client, &at.namespace);
        let seen = match since {
            Some(since) => from_version(api, &target, since),
            None => listed_first(api, &target),
        };
        let body = changes(Watch {
            seen,
            _permit: permit,
        });
        let body = body.take_until(app.0.shutdown.clone().cancelled_owned());
        Ok(Sse::new(body)
            .keep_alive(KeepAlive::new().interval(app.0.keep_alive))
            .into_response())
    };
    either(answer.await)
}

/// A watch and its stream's place.
struct Watch {
    seen: BoxStream<'static, Seen>,
    _permit: Permit,
}

/// What the watch saw next.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// The watch is under way: the stream is ready.
    Ready,
    /// An object changed (`name resourceVersion`), or the watch listed
    /// again after a gap or lost its place, in which anything may have
    /// changed.
    Change(String),
    /// The watch ended or failed.
    End,
}

/// A watch from `since` (the version the page drew): ready at once, then
/// every change after that version.
fn from_version(api: Api<Handoff>, target: &Target, since: String) -> BoxStream<'static, Seen> {
    let params = target.params();
    let events = futures::stream::once(async move { api.watch(&params, &since).await }).flat_map(
        |started| match started {
            Ok(events) => events.boxed(),
            Err(err) => futures::stream::iter([Err(err)]).boxed(),
        },
    );
    futures::stream::iter([Seen::Ready])
        .chain(events.flat_map(|event| futures::stream::iter(seen_raw(event))))
        .chain(futures::stream::iter([Seen::End]))
        .boxed()
}

/// One event of a watch from a version, or why it failed.
type RawEvent = Result<WatchEvent<Handoff>, kube::Error>;

/// Whether the apiserver said the watched version is too old.
fn expired(code: u16, reason: &str) -> bool {
    code == 410 || matches!(reason, "Expired" | "Gone")
}

/// Pure: what one event of a watch from a version means for the stream.
fn seen_raw(event: RawEvent) -> Vec<Seen> {
    let lost = || vec![Seen::Change("expired".to_owned()), Seen::End];
    match event {
        Ok(WatchEvent::Added(h) | WatchEvent::Modified(h) | WatchEvent::Deleted(h)) => {
            let name = h.metadata.name.unwrap_or_default();
            let version = h.metadata.resource_version.unwrap_or_default();
            vec![Seen::Change(format!("{name} {version}"))]
        }
        Ok(WatchEvent::Bookmark(_)) => Vec::new(),
        Ok(WatchEvent::Error(status)) if expired(status.code, &status.reason) => lost(),
        Err(kube::Error::Api(status)) if expired(status.code, &status.reason) => lost(),
        Ok(WatchEvent::Error(status)) => {
            tracing::warn!(code = status.code, reason = %status.reason, "a live watch failed; the page's stream ends and the browser opens it again");
            vec![Seen::End]
        }
        Err(err) => {
            tracing::warn!(error = %err, "a live watch failed; the page's stream ends and the browser opens it again");
            vec![Seen::End]
        }
    }
}

/// A watch that lists first (a page that names no version): ready when
/// the first listing ends, which is not a change.
fn listed_first(api: Api<Handoff>, target: &Target) -> BoxStream<'static, Seen> {
    let mut listed = false;
    watcher::watcher(api, target.config())
        .filter_map(move |event| {
            let seen = match event {
                Err(err) => {
                    tracing::warn!(error = %err, "a live watch failed; the page's stream ends and the browser opens it again");
                    Some(Seen::End)
                }
                Ok(Event::Apply(handoff) | Event::Delete(handoff)) => {
                    let name = handoff.metadata.name.unwrap_or_default();
                    let version = handoff.metadata.resource_version.unwrap_or_default();
                    Some(Seen::Change(format!("{name} {version}")))
                }
                Ok(Event::Init | Event::InitApply(_)) => None,
                Ok(Event::InitDone) if listed => Some(Seen::Change("listed-again".to_owned())),
                Ok(Event::InitDone) => {
                    listed = true;
                    Some(Seen::Ready)
                }
            };
            futures::future::ready(seen)
        })
        .chain(futures::stream::iter([Seen::End]))
        .boxed()
}

async fn next_seen(watch: &mut Watch) -> Seen {
    watch.seen.next().await.unwrap_or(Seen::End)
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
    fn since_is_a_bounded_number() {
        let cases = [
            (None, Ok(None)),
            (Some("0"), Ok(Some("0"))),
            (
                Some("18446744073709551615"),
                Ok(Some("18446744073709551615")),
            ),
            (Some("123456789012345678901"), Err("since")),
            (Some("12a"), Err("since")),
            (Some("-1"), Err("since")),
            (Some(" 1"), Err("since")),
            (Some("1&project=x"), Err("since")),
        ];
        for (given, want) in cases {
            let got = since(given);
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(got.as_deref(), want, "{given:?}"),
                (Err((field, rule, problem)), Err(want)) => {
                    assert_eq!(field, want, "{given:?}");
                    assert!(!rule.is_empty() && problem.contains("is not one"));
                }
                (got, want) => panic!("{given:?}: {got:?}, wanted {want:?}"),
            }
        }
    }

    fn handoff(name: &str, version: &str) -> Handoff {
        let spec = handoff_core::api::HandoffSpec::new("github.com/o/r#1", "p", "b");
        let mut h = Handoff::new(name, spec);
        h.metadata.resource_version = Some(version.into());
        h
    }

    fn status(code: u16, reason: &str) -> Box<kube::core::Status> {
        let mut status = kube::core::Status::failure("watch", reason);
        status.code = code;
        Box::new(status)
    }

    #[test]
    fn a_watch_from_a_version_sees_changes_and_its_end() {
        let change = |s: &str| Seen::Change(s.to_owned());
        let expired = vec![change("expired"), Seen::End];
        let cases: Vec<(RawEvent, Vec<Seen>)> = vec![
            (
                Ok(WatchEvent::Added(handoff("a", "5"))),
                vec![change("a 5")],
            ),
            (
                Ok(WatchEvent::Modified(handoff("a", "6"))),
                vec![change("a 6")],
            ),
            (
                Ok(WatchEvent::Deleted(handoff("a", "7"))),
                vec![change("a 7")],
            ),
            (
                Ok(WatchEvent::Bookmark(
                    serde_json::from_value(serde_json::json!({
                        "apiVersion": "handoff.dev/v1alpha1", "kind": "Handoff",
                        "metadata": {"resourceVersion": "9"}
                    }))
                    .expect("a bookmark"),
                )),
                vec![],
            ),
            (
                Ok(WatchEvent::Error(status(410, "Expired"))),
                expired.clone(),
            ),
            (Ok(WatchEvent::Error(status(0, "Gone"))), expired.clone()),
            (Err(kube::Error::Api(status(410, "Gone"))), expired),
            (
                Ok(WatchEvent::Error(status(500, "InternalError"))),
                vec![Seen::End],
            ),
            (
                Err(kube::Error::Api(status(403, "Forbidden"))),
                vec![Seen::End],
            ),
        ];
        for (event, want) in cases {
            let shown = format!("{event:?}");
            assert_eq!(seen_raw(event), want, "{shown}");
        }
    }
}
