//! The I/O of one apply and the facts its answer carries (see the store's
//! module docs): the response code, the `Date` header, the round trip, and
//! whether this process had received the returned version before ([`Seen`]).
//! What the apply did is decided from them, without I/O, by
//! [`handoff_core::handoff::outcome::outcome`].

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use kube::api::{Patch, PatchParams};
use kube::{Resource, ResourceExt};

use super::HandoffStore;
use handoff_core::api::Handoff;
use handoff_core::handoff::outcome::{Answer, applied_at, http_date};

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
