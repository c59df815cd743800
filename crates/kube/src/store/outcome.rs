//! What one apply did, read from its answer (see the store's module
//! docs): created, counted before it, a version this process had already
//! received, or a bridge change older than the round trip explains.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use kube::api::{Patch, PatchParams};
use kube::{Resource, ResourceExt};

use super::{HandoffStore, WriteOutcome};
use handoff_core::api::Handoff;
use handoff_core::names::BRIDGE_FIELD_MANAGER;

impl HandoffStore {
    /// One server-side apply, with what its answer says about it.
    pub(super) async fn apply(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<&Handoff>,
    ) -> Result<(Answer, Handoff), kube::Error> {
        let request = kube::core::Request::new(Handoff::url_path(&(), Some(&self.namespace)))
            .patch(name, params, patch)
            .map_err(kube::Error::BuildRequest)?;
        let mark = seen().mark();
        let sent = Instant::now();
        let response = self
            .client
            .send(request.map(kube::client::Body::from))
            .await?;
        let round_trip = sent.elapsed();
        let code = response.status();
        let date = response
            .headers()
            .get(http::header::DATE)
            .and_then(|d| d.to_str().ok())
            .and_then(http_date);
        let body = response.into_body().collect_bytes().await?;
        if code.is_client_error() || code.is_server_error() {
            return Err(api_error(code, &body));
        }
        let written: Handoff = serde_json::from_slice(&body).map_err(kube::Error::SerdeError)?;
        let version = (written.uid(), written.resource_version());
        let seen_before = seen().check_and_record(version, mark);
        let status = written.status.as_ref();
        let answer = Answer {
            created: code == http::StatusCode::CREATED,
            generation: written.metadata.generation,
            observed_generation: status.and_then(|s| s.observed_generation),
            seen_before,
            applied_at: applied_at(&written),
            date,
            round_trip,
        };
        Ok((answer, written))
    }
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
    /// earlier write before it sent this one ([`Seen`]).
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
fn http_date(text: &str) -> Option<i64> {
    jiff::fmt::rfc2822::parse(text)
        .ok()
        .map(|d| d.timestamp().as_second())
}

/// When the bridge's field manager last changed `h` (managedFields).
pub fn applied_at(h: &Handoff) -> Option<i64> {
    h.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.manager.as_deref() == Some(BRIDGE_FIELD_MANAGER)
                && m.operation.as_deref() == Some("Apply")
                && m.subresource.as_deref().unwrap_or_default().is_empty()
        })
        .filter_map(|m| m.time.as_ref())
        .map(|t| t.0.as_second())
        .max()
}

/// The error kube's own calls make of a failed answer: the apiserver's
/// `Status`, else one carrying the code and the body's text.
fn api_error(code: http::StatusCode, body: &[u8]) -> kube::Error {
    let status = serde_json::from_slice::<kube::core::Status>(body).unwrap_or_else(|_| {
        let text = String::from_utf8_lossy(body);
        kube::core::Status::failure(text.trim(), "Failed to parse error data")
            .with_code(code.as_u16())
    });
    kube::Error::Api(status.boxed())
}

/// Object versions (`(uid, resourceVersion)`) this process received from
/// writes, each with the order it was first received in: a version
/// received before an apply was sent existed before it, so that apply did
/// not write it (a write always makes a new resourceVersion). Bounded: the
/// oldest go first.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    inner: Mutex<SeenInner>,
    cap: usize,
}

#[derive(Debug, Default)]
struct SeenInner {
    order: VecDeque<(String, String)>,
    at: HashMap<(String, String), u64>,
    next: u64,
}

/// Versions remembered at most.
pub(crate) const SEEN_VERSIONS: usize = 4096;

fn seen() -> &'static Seen {
    static SEEN: OnceLock<Seen> = OnceLock::new();
    SEEN.get_or_init(|| Seen::new(SEEN_VERSIONS))
}

impl Seen {
    /// Remembers at most `cap` versions.
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            inner: Mutex::default(),
            cap: cap.max(1),
        }
    }

    /// The mark of a request about to be sent.
    pub(crate) fn mark(&self) -> u64 {
        self.inner.lock().map(|i| i.next).unwrap_or(u64::MAX)
    }

    /// Whether `version` was received before the request marked `mark`
    /// was sent; remembers it as received now.
    pub(crate) fn check_and_record(
        &self,
        version: (Option<String>, Option<String>),
        mark: u64,
    ) -> bool {
        let (Some(uid), Some(rv)) = version else {
            return false;
        };
        let Ok(mut inner) = self.inner.lock() else {
            return false;
        };
        let key = (uid, rv);
        if let Some(first) = inner.at.get(&key) {
            return *first < mark;
        }
        let now = inner.next;
        inner.next += 1;
        inner.at.insert(key.clone(), now);
        inner.order.push_back(key);
        while inner.order.len() > self.cap {
            if let Some(old) = inner.order.pop_front() {
                inner.at.remove(&old);
            }
        }
        false
    }
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
    fn a_version_counts_as_seen_only_when_received_before_the_request_was_sent() {
        let seen = Seen::new(2);
        let v = |rv: &str| (Some("uid".to_owned()), Some(rv.to_owned()));
        let first = seen.mark();
        assert!(!seen.check_and_record(v("5"), first), "new to this process");
        let second = seen.mark();
        assert!(
            seen.check_and_record(v("5"), second),
            "received before the second was sent"
        );
        // Two concurrent requests: the later answer's version arrived after
        // the earlier request was sent, so it proves nothing about it.
        let a = seen.mark();
        let b = seen.mark();
        assert!(!seen.check_and_record(v("6"), b));
        assert!(
            !seen.check_and_record(v("6"), a),
            "arrived while a was in flight"
        );
        assert!(
            !seen.check_and_record((None, Some("7".into())), seen.mark()),
            "no uid"
        );
        // Bounded: the oldest version is forgotten.
        assert!(!seen.check_and_record(v("8"), seen.mark()));
        assert!(!seen.check_and_record(v("5"), seen.mark()), "5 was evicted");
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

    #[test]
    fn a_failed_answer_is_the_apiservers_status() {
        let body = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"denied","reason":"Invalid","code":422}"#;
        match api_error(http::StatusCode::UNPROCESSABLE_ENTITY, body) {
            kube::Error::Api(s) => assert_eq!((s.code, s.message.as_str()), (422, "denied")),
            other => panic!("{other:?}"),
        }
        match api_error(http::StatusCode::BAD_GATEWAY, b" proxy down ") {
            kube::Error::Api(s) => assert_eq!((s.code, s.message.as_str()), (502, "proxy down")),
            other => panic!("{other:?}"),
        }
    }
}
