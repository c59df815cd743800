//! What one apply of the bridge did, read from the apiserver's answer
//! (the I/O, and the full reasoning, are `handoff_kube::store`): created,
//! counted before it, a version this process had already received, or a
//! bridge change older than the round trip explains.

use std::time::Duration;

use super::managed_fields::{latest, object_writes_by};
use crate::api::Handoff;
use crate::names::BRIDGE_FIELD_MANAGER;

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WriteOutcome {
    /// No handoff existed for the key.
    Created,
    /// The stored spec changed: new content, or the same content from
    /// another writer (see `handoff_kube::store`).
    Updated,
    /// The handoff already held this content from this writer; nothing was
    /// written.
    Unchanged,
}

/// What the apiserver's answer to one apply says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The answer was `201 Created`.
    pub created: bool,
    /// `metadata.generation` of the object returned.
    pub generation: Option<i64>,
    /// `status.observedGeneration` of the object returned.
    pub observed_generation: Option<i64>,
    /// This process received the same `(uid, resourceVersion)` from an
    /// earlier write before it sent this one (`handoff_kube::store`'s
    /// record of the versions it received).
    pub seen_before: bool,
    /// The last change by the bridge's field manager (managedFields
    /// `time`, whole seconds since the epoch).
    pub applied_at: Option<i64>,
    /// The answer's `Date` header (whole seconds since the epoch).
    pub date: Option<i64>,
    /// How long the request took, as this process measured it.
    pub round_trip: Duration,
}

/// What an apply did, from its [`Answer`] (see the module docs):
///
/// 1. `201 Created`: created;
/// 2. counted at the returned generation: the apply changed no spec (it
///    would have bumped the generation past the count), so unchanged;
/// 3. a version this process had received before sending: unchanged;
/// 4. the bridge's last change is at least one second plus the round trip
///    older than the answer: had this apply written, the apiserver would
///    have stamped it after the request was sent, so it wrote nothing
///    (whole seconds shorten a real interval by less than one second);
/// 5. otherwise: updated.
pub fn outcome(answer: &Answer) -> WriteOutcome {
    if answer.created {
        return WriteOutcome::Created;
    }
    if answer.observed_generation.is_some() && answer.observed_generation == answer.generation {
        return WriteOutcome::Unchanged;
    }
    if answer.seen_before {
        return WriteOutcome::Unchanged;
    }
    if let (Some(applied), Some(date)) = (answer.applied_at, answer.date) {
        let apart = Duration::from_secs(u64::try_from(date - applied).unwrap_or(0));
        if apart >= answer.round_trip + Duration::from_secs(1) {
            return WriteOutcome::Unchanged;
        }
    }
    WriteOutcome::Updated
}

/// Seconds since the epoch of an HTTP `Date` header (RFC 9110's
/// IMF-fixdate, a form of RFC 2822).
pub fn http_date(text: &str) -> Option<i64> {
    jiff::fmt::rfc2822::parse(text)
        .ok()
        .map(|d| d.timestamp().as_second())
}

/// When the bridge's field manager last changed `h` (managedFields).
pub fn applied_at(h: &Handoff) -> Option<i64> {
    latest(
        object_writes_by(&h.metadata, BRIDGE_FIELD_MANAGER)
            .filter(|m| m.operation.as_deref() == Some("Apply")),
    )
    .map(|t| t.0.as_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_apply_says_what_it_did_from_its_answer() {
        use WriteOutcome::{Created, Unchanged, Updated};
        let ms = Duration::from_millis;
        // (created, generation, observed, seen before, applied at, date, round trip)
        let rows = [
            (
                true,
                Some(1),
                None,
                false,
                Some(100),
                Some(100),
                ms(20),
                Created,
                "201: a creation",
            ),
            (
                true,
                Some(1),
                Some(1),
                true,
                Some(10),
                Some(100),
                ms(20),
                Created,
                "201 wins over every other fact",
            ),
            (
                false,
                Some(3),
                Some(3),
                false,
                Some(100),
                Some(100),
                ms(20),
                Unchanged,
                "counted at this generation: no spec change",
            ),
            (
                false,
                Some(4),
                Some(3),
                false,
                Some(100),
                Some(100),
                ms(20),
                Updated,
                "a new generation, stamped now",
            ),
            (
                false,
                Some(1),
                None,
                false,
                Some(100),
                Some(101),
                ms(20),
                Updated,
                "never counted, stamped a second before the answer",
            ),
            (
                false,
                Some(4),
                Some(3),
                true,
                Some(100),
                Some(100),
                ms(20),
                Unchanged,
                "a version received before this apply was sent",
            ),
            (
                false,
                Some(4),
                Some(3),
                false,
                Some(98),
                Some(100),
                ms(20),
                Unchanged,
                "stamped two seconds before a 20 ms round trip",
            ),
            (
                false,
                Some(4),
                Some(3),
                false,
                Some(99),
                Some(100),
                ms(20),
                Updated,
                "one second apart: could be this apply",
            ),
            (
                false,
                Some(4),
                Some(3),
                false,
                Some(97),
                Some(100),
                ms(2500),
                Updated,
                "a slow round trip explains three seconds",
            ),
            (
                false,
                Some(4),
                Some(3),
                false,
                Some(96),
                Some(100),
                ms(2500),
                Unchanged,
                "but not four",
            ),
            (
                false,
                Some(4),
                Some(3),
                false,
                None,
                Some(100),
                ms(20),
                Updated,
                "no bridge stamp (kubectl wrote it)",
            ),
            (
                false,
                Some(4),
                Some(3),
                false,
                Some(50),
                None,
                ms(20),
                Updated,
                "no Date header",
            ),
            (
                false,
                None,
                None,
                false,
                None,
                None,
                ms(20),
                Updated,
                "nothing known: the apply may have written",
            ),
        ];
        for (
            created,
            generation,
            observed,
            seen_before,
            applied_at,
            date,
            round_trip,
            expected,
            why,
        ) in rows
        {
            let answer = Answer {
                created,
                generation,
                observed_generation: observed,
                seen_before,
                applied_at,
                date,
                round_trip,
            };
            assert_eq!(outcome(&answer), expected, "{why}: {answer:?}");
        }
    }

    #[test]
    fn the_date_header_is_read_to_the_second() {
        for (text, expected) in [
            ("Tue, 01 Dec 2026 05:09:29 GMT", Some(1_796_101_769)),
            ("Thu, 01 Jan 1970 00:00:01 GMT", Some(1)),
            ("yesterday", None),
        ] {
            assert_eq!(http_date(text), expected, "{text}");
        }
    }
}
