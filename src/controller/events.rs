//! The controller's Events about Handoffs (`Written`, `Superseded`,
//! `Groomed`), aggregated so a busy key does not flood the namespace.
//!
//! Occurrences of one reason about one object (its uid) form a series: the
//! first creates an events.k8s.io Event; each later one, within
//! [`SERIES_GAP`] of the previous, updates that same Event in place — its
//! note becomes the latest occurrence's (so it names the latest revision)
//! and `series.count` / `series.lastObservedTime` say how many and when
//! (`kubectl describe` shows `(xN over …)`). After a quiet gap, after the
//! Event expired (the apiserver's `--event-ttl`), or after a restart of the
//! controller, a new Event starts a new series.
//!
//! The note is immutable through events.k8s.io/v1, so the update is a merge
//! patch of the same object through the core/v1 Events API (as client-go's
//! own recorder does); kube's `Recorder` could only keep the first note.
//! Which Event a series extends is remembered in a bounded map (at most
//! [`MAX_SERIES`] series; quiet ones go first).
//!
//! [`decide`] and [`evict`] are the decisions, [`Context::event`] the I/O.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};

use super::Context;
use super::handoff::reference;
use crate::api::Handoff;
use crate::loops::bounded_note;

/// A series ends when its reason did not occur for this long.
pub const SERIES_GAP: Duration = Duration::from_secs(600);
/// Most series remembered at once.
pub const MAX_SERIES: usize = 4096;

/// `(uid of the regarding object, reason)`.
pub type Key = (String, String);

/// The Event a series extends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The Event's namespace.
    pub namespace: String,
    /// The Event's name.
    pub name: String,
    /// Occurrences so far.
    pub count: i32,
    /// The latest occurrence.
    pub last: Instant,
}

/// What to do with one occurrence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Publish {
    /// A new Event (a new series).
    Create,
    /// Update the Event `name`: its series now counts `count`.
    Extend {
        /// The Event.
        name: String,
        /// Occurrences including this one (at least 2).
        count: i32,
    },
}

/// Extends the series of `entry` unless it went quiet for `gap` (or is of
/// another namespace, which a uid never is, but a name must match).
pub fn decide(entry: Option<&Entry>, namespace: &str, now: Instant, gap: Duration) -> Publish {
    match entry {
        Some(e) if e.namespace == namespace && now.saturating_duration_since(e.last) < gap => {
            Publish::Extend {
                name: e.name.clone(),
                count: e.count.saturating_add(1).max(2),
            }
        }
        _ => Publish::Create,
    }
}

/// Makes room for one more series in `series`: drops every one quiet for
/// `gap`, then the quietest until fewer than `cap` remain.
pub fn evict(series: &mut HashMap<Key, Entry>, cap: usize, now: Instant, gap: Duration) {
    series.retain(|_, e| now.saturating_duration_since(e.last) < gap);
    while series.len() >= cap.max(1) {
        let Some(quietest) = series
            .iter()
            .min_by_key(|(_, e)| e.last)
            .map(|(k, _)| k.clone())
        else {
            break;
        };
        series.remove(&quietest);
    }
}

/// The series this controller is extending.
#[derive(Debug)]
pub struct Series {
    entries: Mutex<HashMap<Key, Entry>>,
    cap: usize,
    gap: Duration,
}

impl Default for Series {
    fn default() -> Self {
        Self::new(MAX_SERIES, SERIES_GAP)
    }
}

impl Series {
    /// At most `cap` series, each ending after `gap` without an occurrence.
    pub fn new(cap: usize, gap: Duration) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            cap,
            gap,
        }
    }

    fn plan(&self, key: &Key, namespace: &str, now: Instant) -> Publish {
        let entries = self.entries.lock();
        decide(
            entries.as_ref().ok().and_then(|m| m.get(key)),
            namespace,
            now,
            self.gap,
        )
    }

    fn record(&self, key: Key, entry: Entry) {
        if let Ok(mut entries) = self.entries.lock() {
            if !entries.contains_key(&key) {
                evict(&mut entries, self.cap, entry.last, self.gap);
            }
            entries.insert(key, entry);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map(|m| m.len()).unwrap_or(0)
    }
}

/// `call`, or an error once `timeout` has passed without an answer: an
/// Event is never worth a stalled reconcile (`--apiserver-timeout`).
async fn bounded<T>(
    timeout: std::time::Duration,
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, kube::Error> {
    tokio::time::timeout(timeout, call)
        .await
        .unwrap_or_else(|_| {
            Err(kube::Error::Service(
                format!("the apiserver gave no answer within {timeout:?}").into(),
            ))
        })
}

impl Context {
    /// Records an occurrence of `reason` about `h` (see the module docs). A
    /// failure or a call past `--apiserver-timeout` is logged, never fatal
    /// (the state it reports is already written).
    pub async fn event(&self, h: &Handoff, reason: &str, note: String) {
        let note = bounded_note(note);
        let namespace = h.namespace().unwrap_or_default();
        let key = (h.uid().unwrap_or_else(|| h.name_any()), reason.to_owned());
        let now = Instant::now();
        if let Publish::Extend { name, count } = self.events.plan(&key, &namespace, now) {
            match bounded(
                self.api_timeout,
                self.extend(&namespace, &name, count, &note),
            )
            .await
            {
                Ok(()) => {
                    let entry = Entry {
                        namespace,
                        name,
                        count,
                        last: now,
                    };
                    self.events.record(key, entry);
                    return;
                }
                // Expired (or deleted): a new series.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(err) => {
                    tracing::warn!(handoff = %crate::store::describe(h), reason, error = %err, "could not update an Event");
                    return;
                }
            }
        }
        match bounded(self.api_timeout, self.create(h, &namespace, reason, note)).await {
            Ok(name) => {
                let entry = Entry {
                    namespace,
                    name,
                    count: 1,
                    last: now,
                };
                self.events.record(key, entry);
            }
            Err(err) => {
                tracing::warn!(handoff = %crate::store::describe(h), reason, error = %err, "could not record an Event");
            }
        }
    }

    /// Creates the first Event of a series; returns its name.
    async fn create(
        &self,
        h: &Handoff,
        namespace: &str,
        reason: &str,
        note: String,
    ) -> Result<String, kube::Error> {
        let now = Timestamp::now();
        let name = format!("{}.{:x}", h.name_any(), now.as_nanosecond());
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            action: Some(reason.to_owned()),
            reason: Some(reason.to_owned()),
            note: Some(note),
            type_: Some("Normal".into()),
            event_time: Some(MicroTime(now)),
            regarding: Some(reference(h)),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            ..Event::default()
        };
        Api::<Event>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), &event)
            .await?;
        Ok(name)
    }

    /// The latest note and the count of a series, in place (core/v1: the
    /// events.k8s.io API refuses to change a note).
    async fn extend(
        &self,
        namespace: &str,
        name: &str,
        count: i32,
        note: &str,
    ) -> Result<(), kube::Error> {
        let patch = serde_json::json!({
            "message": note,
            "count": count,
            "series": { "count": count, "lastObservedTime": MicroTime(Timestamp::now()) },
        });
        Api::<CoreEvent>::namespaced(self.client.clone(), namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {

    #[tokio::test]
    async fn an_event_call_past_the_timeout_is_an_error_not_a_hang() {
        let hung = bounded(
            std::time::Duration::from_millis(10),
            std::future::pending::<Result<(), kube::Error>>(),
        )
        .await;
        let message = hung.expect_err("timed out").to_string();
        assert!(message.contains("no answer within 10ms"), "{message}");
        let answered = bounded(std::time::Duration::from_secs(5), async { Ok(7) }).await;
        assert_eq!(answered.expect("answered"), 7);
    }

    use super::*;

    const GAP: Duration = Duration::from_secs(600);

    fn entry(t0: Instant, name: &str, count: i32, last: u64) -> Entry {
        Entry {
            namespace: "ns".into(),
            name: name.into(),
            count,
            last: t0 + Duration::from_secs(last),
        }
    }

    #[test]
    fn occurrences_extend_a_series_until_a_quiet_gap() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let extend = |count| Publish::Extend {
            name: "e".into(),
            count,
        };
        let cases = [
            (None, "ns", at(0), Publish::Create, "first occurrence"),
            (
                Some(entry(t0, "e", 1, 0)),
                "ns",
                at(1),
                extend(2),
                "second: a series of 2",
            ),
            (
                Some(entry(t0, "e", 999, 0)),
                "ns",
                at(599),
                extend(1000),
                "within the gap",
            ),
            (
                Some(entry(t0, "e", 7, 0)),
                "ns",
                at(600),
                Publish::Create,
                "quiet for the gap: a new Event",
            ),
            (
                Some(entry(t0, "e", 3, 0)),
                "other",
                at(1),
                Publish::Create,
                "another namespace",
            ),
            (
                Some(entry(t0, "e", i32::MAX, 0)),
                "ns",
                at(1),
                extend(i32::MAX),
                "the count saturates",
            ),
        ];
        for (entry, namespace, now, expected, why) in cases {
            assert_eq!(
                decide(entry.as_ref(), namespace, now, GAP),
                expected,
                "{why}"
            );
        }
    }

    #[test]
    fn eviction_drops_quiet_series_then_the_quietest() {
        let t0 = Instant::now();
        let key = |k: &str| (k.to_owned(), "Superseded".to_owned());
        let mut series: HashMap<Key, Entry> = [
            (key("a"), entry(t0, "a", 1, 0)),
            (key("b"), entry(t0, "b", 1, 700)),
            (key("c"), entry(t0, "c", 1, 650)),
            (key("d"), entry(t0, "d", 1, 800)),
        ]
        .into();
        evict(&mut series, 10, t0 + Duration::from_secs(900), GAP);
        let mut left: Vec<&str> = series.keys().map(|(k, _)| k.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, ["b", "c", "d"], "a was quiet for the gap");
        evict(&mut series, 2, t0 + Duration::from_secs(900), GAP);
        let mut left: Vec<&str> = series.keys().map(|(k, _)| k.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, ["d"], "room for one more under a cap of 2");
    }

    #[test]
    fn the_map_never_grows_past_its_cap() {
        let series = Series::new(3, GAP);
        let now = Instant::now();
        for i in 0..100 {
            series.record(
                (format!("uid-{i}"), "Written".into()),
                Entry {
                    namespace: "ns".into(),
                    name: format!("e{i}"),
                    count: 1,
                    last: now + Duration::from_millis(i),
                },
            );
            assert!(series.len() <= 3);
        }
        let newest = ("uid-99".to_owned(), "Written".to_owned());
        assert_eq!(
            series.plan(&newest, "ns", now + Duration::from_secs(1)),
            Publish::Extend {
                name: "e99".into(),
                count: 2
            }
        );
    }
}
