//! The decisions of the controller's Event series (see
//! `handoff_controller::events` for the whole design, after client-go's
//! events library): the type of an Event ([`event_type`]), whether an
//! occurrence counts into its series or starts a new Event ([`decide`]),
//! what a refresh writes ([`due`]) and which series the bounded map
//! forgets to make room ([`evict`]). The map, its lock, the Event writes
//! and the refresh task are the controller's.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;

use crate::handoff::NAME_NOT_DERIVED;

/// The type of an Event of `reason`: `Warning` for an object an admin must
/// act on (one whose name is not derived from its key), else `Normal`.
pub fn event_type(reason: &str) -> &'static str {
    match reason {
        NAME_NOT_DERIVED => "Warning",
        _ => "Normal",
    }
}

/// A series ends when its reason did not occur for this long.
pub const SERIES_GAP: Duration = Duration::from_secs(600);
/// Most series remembered at once.
pub const MAX_SERIES: usize = 4096;

/// `(uid of the regarding object, reason)`.
pub type Key = (String, String);

/// A series: the Event it extends and what it has counted.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The Event's namespace.
    pub namespace: String,
    /// The Event's name.
    pub name: String,
    /// Occurrences so far.
    pub count: i32,
    /// Occurrences the Event on the apiserver shows.
    pub shown: i32,
    /// The latest occurrence's note.
    pub note: String,
    /// The latest occurrence.
    pub last: Instant,
    /// The latest occurrence, on the wall clock (`series.lastObservedTime`).
    pub observed: Timestamp,
    /// The object, at its latest occurrence (a new series names it).
    pub regarding: ObjectReference,
}

impl Entry {
    /// The series a just-created Event starts: one occurrence, shown.
    pub fn first(
        namespace: String,
        name: String,
        note: String,
        last: Instant,
        observed: Timestamp,
        regarding: ObjectReference,
    ) -> Self {
        Self {
            namespace,
            name,
            count: 1,
            shown: 1,
            note,
            last,
            observed,
            regarding,
        }
    }
}

/// What to do with one occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publish {
    /// A new Event (a new series), now.
    Create,
    /// Count it in the series; the next refresh writes it.
    Count,
}

/// Counts into the series of `entry` unless it went quiet for `gap` (or is
/// of another namespace, which a uid never is, but a name must match).
pub fn decide(entry: Option<&Entry>, namespace: &str, now: Instant, gap: Duration) -> Publish {
    match entry {
        Some(e) if e.namespace == namespace && now.saturating_duration_since(e.last) < gap => {
            Publish::Count
        }
        _ => Publish::Create,
    }
}

/// The count to write for `entry`, when it counted occurrences its Event
/// does not show yet.
pub fn due(entry: &Entry) -> Option<i32> {
    (entry.count > entry.shown).then_some(entry.count)
}

/// Makes room for one more series in `series`: drops every one quiet for
/// `gap`, then the quietest until fewer than `cap` remain. Returns the
/// dropped series that still have a count to write ([`due`]).
pub fn evict(
    series: &mut HashMap<Key, Entry>,
    cap: usize,
    now: Instant,
    gap: Duration,
) -> Vec<(Key, Entry)> {
    let mut dropped = Vec::new();
    let quiet: Vec<Key> = series
        .iter()
        .filter(|(_, e)| now.saturating_duration_since(e.last) >= gap)
        .map(|(k, _)| k.clone())
        .collect();
    for key in quiet {
        if let Some(e) = series.remove(&key) {
            dropped.push((key, e));
        }
    }
    while series.len() >= cap.max(1) {
        let Some(quietest) = series
            .iter()
            .min_by_key(|(_, e)| e.last)
            .map(|(k, _)| k.clone())
        else {
            break;
        };
        if let Some(e) = series.remove(&quietest) {
            dropped.push((quietest, e));
        }
    }
    dropped.retain(|(_, e)| due(e).is_some());
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    const GAP: Duration = Duration::from_secs(600);

    fn entry(t0: Instant, name: &str, count: i32, last: u64) -> Entry {
        let at = t0 + Duration::from_secs(last);
        let note = format!("{name} note");
        let first = Entry::first(
            "ns".into(),
            name.into(),
            note,
            at,
            Timestamp::UNIX_EPOCH,
            ObjectReference::default(),
        );
        Entry {
            count,
            shown: count,
            ..first
        }
    }

    #[test]
    fn only_an_object_to_act_on_is_a_warning() {
        for (reason, want) in [
            ("NameNotDerivedFromKey", "Warning"),
            ("Superseded", "Normal"),
            ("Groomed", "Normal"),
        ] {
            assert_eq!(event_type(reason), want, "{reason}");
        }
    }

    #[test]
    fn occurrences_count_into_a_series_until_a_quiet_gap() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let cases = [
            (None, "ns", at(0), Publish::Create, "first occurrence"),
            (
                Some(entry(t0, "e", 1, 0)),
                "ns",
                at(1),
                Publish::Count,
                "second: counted, not written",
            ),
            (
                Some(entry(t0, "e", 999, 0)),
                "ns",
                at(599),
                Publish::Count,
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
    fn a_series_is_due_while_it_counted_more_than_its_event_shows() {
        let t0 = Instant::now();
        let shown = |count, shown| Entry {
            shown,
            ..entry(t0, "e", count, 0)
        };
        for (e, expected) in [
            (shown(1, 1), None),
            (shown(2, 1), Some(2)),
            (shown(57, 12), Some(57)),
            (shown(3, 5), None),
        ] {
            assert_eq!(due(&e), expected, "{e:?}");
        }
    }

    #[test]
    fn eviction_drops_quiet_series_then_the_quietest_and_returns_what_is_owed() {
        let t0 = Instant::now();
        let key = |k: &str| (k.to_owned(), "Superseded".to_owned());
        let owing = Entry {
            shown: 1,
            ..entry(t0, "a", 3, 0)
        };
        let mut series: HashMap<Key, Entry> = [
            (key("a"), owing.clone()),
            (key("b"), entry(t0, "b", 1, 700)),
            (key("c"), entry(t0, "c", 1, 650)),
            (key("d"), entry(t0, "d", 1, 800)),
        ]
        .into();
        let dropped = evict(&mut series, 10, t0 + Duration::from_secs(900), GAP);
        assert_eq!(dropped, [(key("a"), owing)], "a was quiet, and owes 3");
        let mut left: Vec<&str> = series.keys().map(|(k, _)| k.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, ["b", "c", "d"]);
        let dropped = evict(&mut series, 2, t0 + Duration::from_secs(900), GAP);
        assert!(dropped.is_empty(), "b and c owed nothing");
        let mut left: Vec<&str> = series.keys().map(|(k, _)| k.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, ["d"], "room for one more under a cap of 2");
    }
}
