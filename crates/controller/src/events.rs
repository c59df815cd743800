//! The controller's Events about Handoffs (`Superseded`, `Groomed`, and
//! the Warning `NameNotDerivedFromKey`: see [`event_type`]),
//! aggregated so a busy key neither floods the namespace nor costs an
//! Event write per update.
//!
//! Occurrences of one reason about one object (its uid) form a series, as
//! in client-go's events library (k8s.io/client-go/tools/events,
//! `event_broadcaster.go`): the first occurrence creates an events.k8s.io
//! Event at once; later ones only count in this controller's memory
//! (client-go's `recordToSink`: `isomorphicEvent.Series.Count++`, no
//! request) and every `--event-refresh` each series with new occurrences
//! is written once (client-go's `refreshExistingEventSeries`, every
//! `refreshTime`): its note becomes the latest occurrence's (so it names
//! the latest revision) and `series.count` / `series.lastObservedTime` say
//! how many and when (`kubectl describe` shows `(xN over …)`). A series
//! quiet for [`SERIES_GAP`] is forgotten once its count is written
//! (client-go's `finishSeries`); on a graceful stop the leader writes what
//! is pending. Unlike client-go, the second occurrence waits for the
//! refresh too (client-go sends it at once), so a series costs one create
//! plus at most one update per refresh interval however busy the key is.
//! After a quiet gap, after the Event expired (the apiserver's
//! `--event-ttl`), or after a restart of the controller, a new Event starts
//! a new series; counts not yet written when leadership is lost are lost
//! with it (the new leader starts its own series).
//!
//! The note is immutable through events.k8s.io/v1, so the update is a merge
//! patch of the same object through the core/v1 Events API (as client-go's
//! own recorder does); kube's `Recorder` could only keep the first note.
//! Which Event a series extends is remembered in a bounded map (at most
//! [`MAX_SERIES`] series; quiet ones go first, and one dropped with
//! occurrences still to write is written first).
//!
//! [`decide`], [`due`] and [`evict`] are the decisions (pure, in
//! [`handoff_core::events`]), [`Events::event`] and [`Events::flush`] the
//! I/O. [`Events`] holds all it needs (client,
//! reporter, timeout, series), so the loops that record Events (the
//! Handoff loop, grooming) share it without this module knowing them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;
use kube::{Client, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

use handoff_core::api::Handoff;
use handoff_core::events::{
    Entry, Key, MAX_SERIES, Publish, SERIES_GAP, decide, due, event_type, evict,
};
use handoff_core::loops::bounded_note;

/// The series this controller is counting.
#[derive(Debug)]
pub(crate) struct Series {
    entries: Mutex<HashMap<Key, Entry>>,
    cap: usize,
    gap: Duration,
}

impl Default for Series {
    fn default() -> Self {
        Self::new(MAX_SERIES, SERIES_GAP)
    }
}

/// One occurrence, as [`Series::occur`] needs it.
struct Occurrence<'a> {
    namespace: &'a str,
    note: &'a str,
    now: Instant,
    observed: Timestamp,
    regarding: ObjectReference,
}

impl Series {
    /// At most `cap` series, each ending after `gap` without an occurrence.
    pub(crate) fn new(cap: usize, gap: Duration) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            cap,
            gap,
        }
    }

    /// Counts an occurrence into its series when there is one (no request);
    /// [`Publish::Create`] when a new Event must be created.
    fn occur(&self, key: &Key, o: Occurrence<'_>) -> Publish {
        let Ok(mut entries) = self.entries.lock() else {
            return Publish::Create;
        };
        let publish = decide(entries.get(key), o.namespace, o.now, self.gap);
        if let (Publish::Count, Some(e)) = (publish, entries.get_mut(key)) {
            e.count = e.count.saturating_add(1);
            o.note.clone_into(&mut e.note);
            e.last = o.now;
            e.observed = o.observed;
            e.regarding = o.regarding;
        }
        publish
    }

    /// Remembers a new series; returns the series dropped to make room
    /// that still have a count to write.
    fn record(&self, key: Key, entry: Entry) -> Vec<(Key, Entry)> {
        let Ok(mut entries) = self.entries.lock() else {
            return Vec::new();
        };
        let dropped = if entries.contains_key(&key) {
            Vec::new()
        } else {
            evict(&mut entries, self.cap, entry.last, self.gap)
        };
        entries.insert(key, entry);
        dropped
    }

    /// The series with a count to write; forgets those quiet for the gap
    /// whose count is written.
    fn pending(&self, now: Instant) -> Vec<(Key, Entry)> {
        let Ok(mut entries) = self.entries.lock() else {
            return Vec::new();
        };
        let gap = self.gap;
        entries.retain(|_, e| due(e).is_some() || now.saturating_duration_since(e.last) < gap);
        entries
            .iter()
            .filter(|(_, e)| due(e).is_some())
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect()
    }

    /// The Event of `key` now shows `count` (or, after `renamed`, is a new
    /// Event showing its first occurrence).
    fn shown(&self, key: &Key, count: i32, renamed: Option<String>) {
        if let Ok(mut entries) = self.entries.lock()
            && let Some(e) = entries.get_mut(key)
        {
            match renamed {
                Some(name) => {
                    e.name = name;
                    e.count = e.count.saturating_sub(count).saturating_add(1);
                    e.shown = 1;
                }
                None => e.shown = e.shown.max(count),
            }
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

/// The Handoff loop's Events: the series counted here, written with the
/// controller's client as its reporter, every call bounded by
/// `--apiserver-timeout`.
pub(crate) struct Events {
    client: Client,
    reporter: Reporter,
    api_timeout: Duration,
    series: Series,
}

impl Events {
    /// Events written with `client`, reported as `reporter`, each call
    /// given at most `api_timeout`.
    pub(crate) fn new(client: Client, reporter: Reporter, api_timeout: Duration) -> Self {
        Self {
            client,
            reporter,
            api_timeout,
            series: Series::default(),
        }
    }

    /// Records an occurrence of `reason` about `h` (see the module docs):
    /// a new series' Event is created now; an occurrence of a known series
    /// is only counted. A failure or a call past `--apiserver-timeout` is
    /// logged, never fatal (the state it reports is already written).
    ///
    /// Boxed: the create and the writes of evicted series make a large
    /// future, which would otherwise be inlined into every loop that
    /// records an Event (and overflowed a worker's stack in debug builds).
    pub(crate) async fn event(&self, h: &Handoff, reason: &str, note: String) {
        Box::pin(self.record_event(h, reason, note)).await;
    }

    async fn record_event(&self, h: &Handoff, reason: &str, note: String) {
        let note = bounded_note(note);
        let namespace = h.namespace().unwrap_or_default();
        let key = (h.uid().unwrap_or_else(|| h.name_any()), reason.to_owned());
        let now = Instant::now();
        let observed = Timestamp::now();
        let regarding = reference(h);
        let occurrence = Occurrence {
            namespace: &namespace,
            note: &note,
            now,
            observed,
            regarding: regarding.clone(),
        };
        if self.series.occur(&key, occurrence) == Publish::Count {
            return;
        }
        match bounded(
            self.api_timeout,
            self.create(&namespace, reason, &note, &regarding),
        )
        .await
        {
            Ok(name) => {
                let entry = Entry::first(namespace, name, note, now, observed, regarding);
                for (key, dropped) in self.series.record(key, entry) {
                    self.write_series(&key, &dropped).await;
                }
            }
            Err(err) => {
                tracing::warn!(handoff = %handoff_core::handoff::describe(h), reason, error = %err, "could not record an Event");
            }
        }
    }

    /// Writes every series' occurrences its Event does not show yet: one
    /// update per series, whatever the number of occurrences.
    pub(crate) async fn flush(&self) {
        for (key, entry) in self.series.pending(Instant::now()) {
            Box::pin(self.write_series(&key, &entry)).await;
        }
    }

    /// Updates the Event of one series to its count and latest note; an
    /// Event that expired meanwhile is created anew.
    async fn write_series(&self, key: &Key, entry: &Entry) {
        let Some(count) = due(entry) else {
            return;
        };
        match bounded(self.api_timeout, self.extend(entry, count)).await {
            Ok(()) => self.series.shown(key, count, None),
            // Expired (or deleted): a new series.
            Err(kube::Error::Api(s)) if s.code == 404 => {
                match bounded(
                    self.api_timeout,
                    self.create(&entry.namespace, &key.1, &entry.note, &entry.regarding),
                )
                .await
                {
                    Ok(name) => self.series.shown(key, count, Some(name)),
                    Err(err) => {
                        tracing::warn!(event = %entry.name, reason = %key.1, error = %err, "could not record an Event");
                    }
                }
            }
            Err(err) => {
                tracing::warn!(event = %entry.name, reason = %key.1, error = %err, "could not update an Event");
            }
        }
    }

    /// Creates the first Event of a series; returns its name.
    async fn create(
        &self,
        namespace: &str,
        reason: &str,
        note: &str,
        regarding: &ObjectReference,
    ) -> Result<String, kube::Error> {
        let now = Timestamp::now();
        let object = regarding.name.as_deref().unwrap_or("handoff");
        let name = format!("{object}.{:x}", now.as_nanosecond());
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            action: Some(reason.to_owned()),
            reason: Some(reason.to_owned()),
            note: Some(note.to_owned()),
            type_: Some(event_type(reason).into()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
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
    async fn extend(&self, entry: &Entry, count: i32) -> Result<(), kube::Error> {
        let patch = serde_json::json!({
            "message": entry.note,
            "count": count,
            "series": { "count": count, "lastObservedTime": MicroTime(entry.observed) },
        });
        Api::<CoreEvent>::namespaced(self.client.clone(), &entry.namespace)
            .patch(&entry.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }
}

/// Writes the counted occurrences every `every` until `stop` (the leader's
/// refresh; the final write on a graceful stop is the caller's, after the
/// loops that count have ended).
pub(crate) async fn refresh(events: &Events, every: Duration, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => events.flush().await,
        }
    }
}

/// A reference to `h` for Events (kept valid after `h` is deleted).
pub(crate) fn reference(h: &Handoff) -> ObjectReference {
    ObjectReference {
        api_version: Some(Handoff::api_version(&()).into_owned()),
        kind: Some(Handoff::kind(&()).into_owned()),
        name: h.metadata.name.clone(),
        namespace: h.metadata.namespace.clone(),
        uid: h.metadata.uid.clone(),
        resource_version: h.metadata.resource_version.clone(),
        field_path: None,
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

    /// A series `name` begun at `at` (one occurrence, shown).
    fn begun(at: Instant, name: &str) -> Entry {
        let regarding = ObjectReference::default();
        let note = format!("{name} note");
        Entry::first(
            "ns".into(),
            name.into(),
            note,
            at,
            Timestamp::UNIX_EPOCH,
            regarding,
        )
    }

    #[test]
    fn events_regard_the_handoff_at_its_version() {
        let mut h = Handoff::new("obj", handoff_core::api::HandoffSpec::new("k", "p", "b"));
        h.metadata.namespace = Some("ns".into());
        h.metadata.uid = Some("u-1".into());
        h.metadata.resource_version = Some("42".into());
        let r = reference(&h);
        assert_eq!(r.kind.as_deref(), Some("Handoff"));
        assert_eq!(r.api_version.as_deref(), Some("handoff.dev/v1alpha1"));
        assert_eq!(r.namespace.as_deref(), Some("ns"));
        assert_eq!(r.name.as_deref(), Some("obj"));
        assert_eq!(r.uid.as_deref(), Some("u-1"));
        assert_eq!(r.resource_version.as_deref(), Some("42"));
    }

    #[test]
    fn many_occurrences_are_one_write_per_refresh() {
        let series = Series::new(10, GAP);
        let t0 = Instant::now();
        let key: Key = ("uid".into(), "Superseded".into());
        let occur = |s: u64, note: &str| {
            series.occur(
                &key,
                Occurrence {
                    namespace: "ns",
                    note,
                    now: t0 + Duration::from_secs(s),
                    observed: Timestamp::UNIX_EPOCH,
                    regarding: ObjectReference::default(),
                },
            )
        };
        assert_eq!(occur(0, "r2"), Publish::Create, "nothing known yet");
        assert!(series.record(key.clone(), begun(t0, "e")).is_empty());
        assert!(series.pending(t0).is_empty(), "the create showed it");
        for (s, note) in [(1, "r3"), (2, "r4"), (3, "r5")] {
            assert_eq!(occur(s, note), Publish::Count);
        }
        let pending = series.pending(t0 + Duration::from_secs(4));
        assert_eq!(pending.len(), 1, "one write for three occurrences");
        let (_, e) = &pending[0];
        assert_eq!(
            (due(e), e.note.as_str()),
            (Some(4), "r5"),
            "the latest note"
        );
        series.shown(&key, 4, None);
        assert!(series.pending(t0 + Duration::from_secs(5)).is_empty());
        // An occurrence while the write was in flight stays due.
        assert_eq!(occur(6, "r6"), Publish::Count);
        series.shown(&key, 4, None);
        assert_eq!(series.pending(t0 + Duration::from_secs(7)).len(), 1);
        // Expired meanwhile: a new Event that shows its first occurrence and
        // still owes the one counted after the write was sent.
        series.shown(&key, 4, Some("e2".into()));
        let pending = series.pending(t0 + Duration::from_secs(8));
        assert_eq!(pending[0].1.name, "e2");
        assert_eq!((pending[0].1.count, pending[0].1.shown), (2, 1));
        series.shown(&key, 2, None);
        // Quiet for the gap with nothing to write: forgotten.
        assert!(series.pending(t0 + Duration::from_secs(6) + GAP).is_empty());
        assert_eq!(series.len(), 0);
    }

    #[test]
    fn the_map_never_grows_past_its_cap() {
        let series = Series::new(3, GAP);
        let now = Instant::now();
        for i in 0..100 {
            series.record(
                (format!("uid-{i}"), "Superseded".into()),
                Entry {
                    last: now + Duration::from_millis(i),
                    ..begun(now, &format!("e{i}"))
                },
            );
            assert!(series.len() <= 3);
        }
        let newest = ("uid-99".to_owned(), "Superseded".to_owned());
        let occurrence = Occurrence {
            namespace: "ns",
            note: "n",
            now: now + Duration::from_secs(1),
            observed: Timestamp::UNIX_EPOCH,
            regarding: ObjectReference::default(),
        };
        assert_eq!(series.occur(&newest, occurrence), Publish::Count);
    }
}
