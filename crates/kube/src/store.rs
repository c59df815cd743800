//! Handoff reads and writes with one identity: upsert, get, list, delete.
//! The MCP bridge uses it as the calling agent and the schedule loop as the
//! controller (to list a project's open handoffs), so the semantics of "one
//! current handoff per key" live here. (The controller's own bookkeeping —
//! status, labels, finalizer, grooming deletes — is in `controller`.)
//!
//! - the object name is [`name_for_key`] of the key, so a write is a
//!   server-side apply to one name and the apiserver's name uniqueness is the
//!   upsert;
//! - the apply carries the `project` / `repo` / `kind` labels, so the
//!   controller has no metadata of its own to add to what the bridge wrote;
//! - applies are forced (the bridge's field manager owns the spec), so
//!   concurrent writers never see a field conflict: latest wins.
//!
//! One round trip: [`HandoffStore::write`] applies without reading first.
//! The apiserver persists nothing for an apply that changes nothing (no
//! new resourceVersion, no generation, no watch event, so no status write
//! or Event downstream): identical content from the same writer writes
//! nothing. Whether *this* apply wrote is read from its answer
//! ([`outcome`]): `201 Created` is a creation; a response whose
//! `status.observedGeneration` equals `metadata.generation` was counted by
//! the controller before this apply and not changed by it (a spec change
//! bumps the generation past anything counted); a version this process
//! already received from an earlier write before sending this one
//! ([`Seen`]), or whose last change by the bridge's field manager is older
//! than this round trip could explain (managedFields `time` against the
//! `Date` header, both the apiserver's clock in whole seconds), was not
//! written by it either. What is left is reported `updated`; the one case
//! where that is not what happened is precise: *another* process (a second
//! bridge replica, kubectl) applied the identical spec within about a
//! second before this call and the controller has not counted it yet —
//! this call then wrote nothing but says `updated`.
//!
//! `updated` means the stored spec changed: new content, or identical
//! content from another writer (the apply records that writer in
//! `createdBy`; the controller counts no new revision for it).
//! [`HandoffStore::write_if_at`] keeps its read-check-apply: the check
//! needs the current revision before anything is written.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};

use crate::cluster::Pages;
use handoff_core::api::naming::{labels_for, name_for_key};
use handoff_core::api::{Handoff, HandoffSpec};
use handoff_core::names::BRIDGE_FIELD_MANAGER;

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WriteOutcome {
    /// No handoff existed for the key.
    Created,
    /// The stored spec changed: new content, or the same content from
    /// another writer (see the module docs).
    Updated,
    /// The handoff already held this content from this writer; nothing was
    /// written.
    Unchanged,
}

/// A query of one project's handoffs.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Project to list.
    pub project: String,
    /// Only this repository, when set.
    pub repo: Option<String>,
}

/// Handoff operations in one namespace, with one identity's client.
#[derive(Clone)]
pub struct HandoffStore {
    api: Api<Handoff>,
    client: Client,
    namespace: String,
}

impl HandoffStore {
    /// A store for `namespace`, acting with `client`'s identity.
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            api: Api::namespaced(client.clone(), namespace),
            client,
            namespace: namespace.to_owned(),
        }
    }

    /// The namespace this store works in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The current handoff for `key`, if any.
    pub async fn get(&self, key: &str) -> Result<Option<Handoff>, kube::Error> {
        let found = self.api.get_opt(&name_for_key(key)).await?;
        Ok(found.filter(|h| h.spec.handoff_key == key))
    }

    /// Upserts the handoff for `spec.handoff_key` in one apply, and says
    /// what that apply did (see the module docs and [`outcome`]).
    pub async fn write(&self, spec: &HandoffSpec) -> Result<(WriteOutcome, Handoff), kube::Error> {
        let name = name_for_key(&spec.handoff_key);
        let desired = desired(&name, spec);
        let params = PatchParams::apply(BRIDGE_FIELD_MANAGER).force();
        let patch = Patch::Apply(&desired);
        let (answer, written) = retry_conflicts(|| self.apply(&name, &params, &patch)).await?;
        Ok((outcome(&answer), written))
    }

    /// One server-side apply, with what its answer says about it.
    async fn apply(
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

    /// Replaces the handoff for `spec.handoff_key` only if it is still at
    /// content revision `expected` (optimistic concurrency, see
    /// [`check_revision`]): the apply carries the `resourceVersion` of the
    /// read that passed the check, so a write in between makes the
    /// apiserver answer 409; then the handoff is read and checked again (a
    /// status-only change by the controller keeps the revision and the
    /// generation, so the write goes ahead; a content change is a
    /// [`RevisionConflict`]). Identical content at `expected` writes nothing.
    pub async fn write_if_at(
        &self,
        spec: &HandoffSpec,
        expected: i64,
    ) -> Result<(WriteOutcome, Handoff), WriteError> {
        let name = name_for_key(&spec.handoff_key);
        let desired = desired(&name, spec);
        let params = PatchParams::apply(BRIDGE_FIELD_MANAGER).force();
        let mut attempt = 0u32;
        loop {
            let current = self.get(&spec.handoff_key).await?;
            let current = check_revision(&spec.handoff_key, current, expected)?;
            if current.spec.same_content(spec) {
                return Ok((WriteOutcome::Unchanged, current));
            }
            let mut guarded = desired.clone();
            guarded.metadata.resource_version = current.metadata.resource_version.clone();
            match self
                .api
                .patch(&name, &params, &Patch::Apply(&guarded))
                .await
            {
                Ok(written) => return Ok((WriteOutcome::Updated, written)),
                Err(kube::Error::Api(status)) if status.code == 409 && attempt < 5 => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(10 * u64::from(attempt))).await;
                }
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// Deletes the handoff for `key`; `false` when there was none.
    pub async fn delete(&self, key: &str) -> Result<bool, kube::Error> {
        match self
            .api
            .delete(&name_for_key(key), &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// The first `keep` handoffs of a project (and repo) in list order
    /// ([`newest_first`]) strictly after `after`, and how many the project
    /// has in all. The apiserver has no such order, so every page of the
    /// project is read, but only one page and the `keep` first so far are
    /// in memory at once ([`keep_first`]): memory does not grow with the
    /// project (time does; the PostgreSQL mirror answers from an index).
    pub async fn list_first(
        &self,
        query: &ListQuery,
        after: Option<&SortKey>,
        keep: usize,
    ) -> Result<FirstOf, kube::Error> {
        let params = ListParams::default().fields(&project_fields(query));
        let mut first = FirstOf::default();
        let mut pages = Pages::new(&self.api, &params);
        while let Some(page) = pages.next().await? {
            first.total += page.len();
            first.items = keep_first(first.items, page, sort_key, after, keep);
        }
        Ok(first)
    }

    /// Reads the handoffs of a project (and repo) page by page, handing
    /// each page to `visit`, until all are read or `cap` were; returns how
    /// many were read and whether the cap stopped the scan before the end.
    pub async fn scan(
        &self,
        query: &ListQuery,
        cap: usize,
        mut visit: impl FnMut(Vec<Handoff>),
    ) -> Result<(usize, bool), kube::Error> {
        let params = ListParams::default().fields(&project_fields(query));
        let mut pages = Pages::new(&self.api, &params);
        let mut scanned = 0;
        while let Some(mut page) = pages.next().await? {
            if scanned + page.len() > cap {
                page.truncate(cap - scanned);
                scanned += page.len();
                visit(page);
                return Ok((scanned, true));
            }
            scanned += page.len();
            visit(page);
        }
        Ok((scanned, false))
    }
}

/// The object a write of `spec` applies: the spec and its labels.
fn desired(name: &str, spec: &HandoffSpec) -> Handoff {
    let mut desired = Handoff::new(name, spec.clone());
    desired.metadata.labels = Some(labels_for(
        &spec.project,
        spec.repo.as_deref(),
        spec.kind.as_deref(),
    ));
    desired
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
fn applied_at(h: &Handoff) -> Option<i64> {
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

/// Why [`HandoffStore::write_if_at`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The apiserver refused or failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// The handoff is not at the expected revision.
    #[error(transparent)]
    Conflict(#[from] RevisionConflict),
}

/// The handoff is not (or not yet known to be) at the revision the writer
/// expected; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevisionConflict {
    /// No handoff exists for the key (it was never written, or deleted).
    #[error(
        "conflict on `expected_revision`: you expected revision {expected} of `{key}`, but no handoff \
         exists for it (deleted, or never written); nothing was written. Call get_handoff, then \
         write_handoff without `expected_revision` to create it"
    )]
    Missing {
        /// The key written.
        key: String,
        /// The revision the writer expected.
        expected: i64,
    },
    /// Another content revision is current.
    #[error(
        "conflict on `expected_revision`: you expected revision {expected} of `{key}`, but it is at \
         revision {current}, written by {writer} at {at}; nothing was written. Call get_handoff, merge \
         your changes into that revision, and write again with expected_revision {current}"
    )]
    Moved {
        /// The key written.
        key: String,
        /// The revision the writer expected.
        expected: i64,
        /// The current revision.
        current: i64,
        /// Who wrote it.
        writer: String,
        /// When its content was written.
        at: String,
    },
    /// A write the controller has not counted yet came after the last
    /// counted revision, so the current revision is not known yet.
    #[error(
        "conflict on `expected_revision`: you expected revision {expected} of `{key}`, but a write \
         by {writer} at {at} is not counted yet (the last counted revision is {counted}), so it is not \
         known to be revision {expected}; nothing was written. Call get_handoff until it shows the \
         revision, then decide again"
    )]
    Uncounted {
        /// The key written.
        key: String,
        /// The revision the writer expected.
        expected: i64,
        /// The last revision the controller counted (0: none yet).
        counted: i64,
        /// Who wrote the uncounted content.
        writer: String,
        /// When.
        at: String,
    },
}

/// `current` if it is at content revision `expected`: the controller has
/// counted the latest spec (`status.observedGeneration` equals
/// `metadata.generation`, so no write came after the count) and that count
/// (`status.revision`) is `expected`.
pub(crate) fn check_revision(
    key: &str,
    current: Option<Handoff>,
    expected: i64,
) -> Result<Handoff, RevisionConflict> {
    let Some(current) = current else {
        return Err(RevisionConflict::Missing {
            key: key.to_owned(),
            expected,
        });
    };
    let status = current.status.clone().unwrap_or_default();
    let writer = current
        .spec
        .created_by
        .clone()
        .unwrap_or_else(|| "an unknown writer".to_owned());
    let at = updated_at(&current).map_or_else(|| "an unknown time".to_owned(), |t| t.0.to_string());
    let counted = status.revision.unwrap_or(0);
    if status.observed_generation.is_none()
        || status.observed_generation != current.metadata.generation
    {
        return Err(RevisionConflict::Uncounted {
            key: key.to_owned(),
            expected,
            counted,
            writer,
            at,
        });
    }
    if counted != expected {
        return Err(RevisionConflict::Moved {
            key: key.to_owned(),
            expected,
            current: counted,
            writer,
            at,
        });
    }
    Ok(current)
}

/// What [`HandoffStore::list_first`] found.
#[derive(Debug, Default)]
pub struct FirstOf {
    /// The first handoffs in list order.
    pub items: Vec<Handoff>,
    /// How many handoffs the project (and repo) has.
    pub total: usize,
}

/// `kept` (already in list order) merged with `page`: the first `keep`
/// items strictly after `after`, in [`newest_first`] order.
pub(crate) fn keep_first<T>(
    mut kept: Vec<T>,
    page: Vec<T>,
    key: impl Fn(&T) -> SortKey,
    after: Option<&SortKey>,
    keep: usize,
) -> Vec<T> {
    kept.extend(
        page.into_iter()
            .filter(|item| after.is_none_or(|a| newest_first(&key(item), a).is_gt())),
    );
    kept.sort_by(|a, b| newest_first(&key(a), &key(b)));
    kept.truncate(keep);
    kept
}

/// When a handoff's content last changed: `status.updatedAt` (the
/// controller's), else the last spec write recorded in managedFields, else
/// the creation time.
pub fn updated_at(h: &Handoff) -> Option<Time> {
    h.status
        .as_ref()
        .and_then(|s| s.updated_at.clone())
        .or_else(|| {
            h.metadata
                .managed_fields
                .iter()
                .flatten()
                .filter(|m| m.subresource.as_deref().unwrap_or_default().is_empty())
                .filter_map(|m| m.time.clone())
                .max_by(|a, b| a.0.cmp(&b.0))
        })
        .or_else(|| h.metadata.creation_timestamp.clone())
}

/// The order of lists: `(updated_at desc, handoff_key asc)`.
pub type SortKey = (Option<Time>, String);

/// A handoff's position in list order.
pub fn sort_key(h: &Handoff) -> SortKey {
    (updated_at(h), h.spec.handoff_key.clone())
}

/// Newest first; ties broken by key so the order is total and pages are stable.
pub fn newest_first(a: &SortKey, b: &SortKey) -> std::cmp::Ordering {
    b.0.as_ref()
        .map(|t| t.0)
        .cmp(&a.0.as_ref().map(|t| t.0))
        .then_with(|| a.1.cmp(&b.1))
}

/// The field selector of a project (and repo).
fn project_fields(query: &ListQuery) -> String {
    let mut fields = format!("spec.project={}", escape_field_value(&query.project));
    if let Some(repo) = query.repo.as_deref().filter(|r| !r.is_empty()) {
        fields.push_str(&format!(",spec.repo={}", escape_field_value(repo)));
    }
    fields
}

/// Field-selector values escape `\`, `,` and `=` with a backslash.
fn escape_field_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Retries an apiserver call a few times on 409 Conflict (two first writes
/// racing to create the same object), with a short growing pause.
async fn retry_conflicts<T, F, Fut>(mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 0u32;
    loop {
        match call().await {
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < 5 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(10 * u64::from(attempt))).await;
            }
            other => return other,
        }
    }
}

/// `namespace/name` of a handoff, for messages and logs.
pub fn describe(h: &Handoff) -> String {
    format!(
        "{}/{}",
        h.metadata.namespace.as_deref().unwrap_or_default(),
        h.metadata.name.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Option<Time> {
        Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(secs).expect("ts"),
        ))
    }

    #[test]
    fn newest_first_then_by_key() {
        let mut keys: Vec<SortKey> = vec![
            (at(1), "b".into()),
            (at(3), "a".into()),
            (None, "z".into()),
            (at(3), "0".into()),
            (at(1), "a".into()),
        ];
        keys.sort_by(newest_first);
        let order: Vec<&str> = keys.iter().map(|k| k.1.as_str()).collect();
        assert_eq!(order, ["0", "a", "a", "b", "z"]);
        assert_eq!(keys[0].0, at(3));
        assert_eq!(keys[4].0, None, "undated entries sort last");
    }

    /// A handoff at `generation`, counted at `observed` as `revision`.
    fn counted(generation: i64, observed: Option<i64>, revision: Option<i64>) -> Handoff {
        let mut h = Handoff::new(
            "k",
            HandoffSpec {
                handoff_key: "k".into(),
                project: "p".into(),
                repo: None,
                kind: None,
                body: "b".into(),
                created_by: Some("system:serviceaccount:ns:agent".into()),
            },
        );
        h.metadata.generation = Some(generation);
        h.status = Some(handoff_core::api::HandoffStatus {
            revision,
            updated_at: at(60),
            observed_generation: observed,
            ..Default::default()
        });
        h
    }

    #[test]
    fn a_write_goes_ahead_only_at_the_counted_expected_revision() {
        assert!(check_revision("k", Some(counted(3, Some(3), Some(2))), 2).is_ok());
        let cases = [
            (None, "no handoff exists for it"),
            (
                Some(counted(3, Some(3), Some(3))),
                "it is at revision 3, written by system:serviceaccount:ns:agent at 1970-01-01T00:01:00Z",
            ),
            (
                Some(counted(4, Some(3), Some(2))),
                "is not counted yet (the last counted revision is 2)",
            ),
            (
                Some(counted(1, None, None)),
                "the last counted revision is 0",
            ),
        ];
        for (current, fragment) in cases {
            let err = check_revision("k", current, 2).expect_err("a conflict");
            let message = err.to_string();
            assert!(
                message
                    .starts_with("conflict on `expected_revision`: you expected revision 2 of `k`"),
                "{message}"
            );
            assert!(
                message.contains(fragment),
                "{fragment:?} not in {message:?}"
            );
            assert!(message.contains("nothing was written"), "{message}");
        }
    }

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

    #[test]
    fn field_values_are_escaped() {
        assert_eq!(escape_field_value("org/repo"), "org/repo");
        assert_eq!(escape_field_value(r"a,b=c\d"), r"a\,b\=c\\d");
    }

    #[test]
    fn keeping_the_first_page_by_page_equals_sorting_everything() {
        let items: Vec<SortKey> = (0..57)
            .map(|i| (at((i * 7919) % 23), format!("k{:02}", (i * 31) % 57)))
            .collect();
        let mut sorted = items.clone();
        sorted.sort_by(newest_first);
        for (after, keep) in [
            (None, 1),
            (None, 10),
            (None, 100),
            (Some(sorted[9].clone()), 5),
            (Some(sorted[56].clone()), 5),
        ] {
            let mut kept = Vec::new();
            for page in items.chunks(8) {
                kept = keep_first(kept, page.to_vec(), Clone::clone, after.as_ref(), keep);
                assert!(kept.len() <= keep, "never more than `keep` in memory");
            }
            let expected: Vec<SortKey> = sorted
                .iter()
                .filter(|k| after.as_ref().is_none_or(|a| newest_first(k, a).is_gt()))
                .take(keep)
                .cloned()
                .collect();
            assert_eq!(kept, expected, "after {after:?}, keep {keep}");
        }
    }
}
