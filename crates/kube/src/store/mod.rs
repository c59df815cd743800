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
//! ([`handoff_core::handoff::outcome::outcome`]): `201 Created` is a creation; a response whose
//! `status.observedGeneration` equals `metadata.generation` was counted by
//! the controller before this apply and not changed by it (a spec change
//! bumps the generation past anything counted); a version this process
//! already received from an earlier write before sending this one
//! (`outcome::Seen`), or whose last change by the bridge's field manager is older
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
//!
//! By concern: this file is the store and its plain calls (get, write,
//! delete); `outcome` makes an apply and gathers what its answer says
//! (what the apply did is decided by [`handoff_core::handoff::outcome`]),
//! `conditional` is the write at an expected revision, and `paging` the
//! list order and the project reads page by page. The one rule for the
//! revision and time a handoff shows is [`handoff_core::handoff::view`].

mod conditional;
mod outcome;
mod paging;

use std::time::Duration;

use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};

use handoff_core::api::naming::{labels_for, name_for_key};
use handoff_core::api::{Handoff, HandoffSpec};
use handoff_core::handoff::outcome::{WriteOutcome, outcome};
use handoff_core::names::BRIDGE_FIELD_MANAGER;

pub use self::conditional::{RevisionConflict, WriteError};
pub use self::paging::{FirstOf, SortKey, newest_first, sort_key};

/// A query of one project's handoffs.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Project to list.
    pub project: String,
    /// Only this repository, when set.
    pub repo: Option<String>,
    /// Only this kind of work, when set.
    pub kind: Option<String>,
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
