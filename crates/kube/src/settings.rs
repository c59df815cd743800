//! A namespace's handoff settings: the ConfigMap [`SETTINGS_CONFIGMAP`]
//! its owners may create, read by the bridge (for `write_handoff`'s
//! warnings) and the controller (for the `Linted` condition) through the
//! same [`Budgets`] cache, so both lint a body under the same budget.
//!
//! What its data sets — one key today, the lint's soft token budget — is
//! decided without I/O by [`handoff_core::settings::budget_from`]; a bad
//! value never fails a write (the default is used, the [`Budget`] carries
//! the problem).
//!
//! The bridge reads a namespace's budget only after the caller's own
//! write there succeeded, never beside or before it: a caller whose RBAC
//! refuses the write must not make the bridge read anything with its own
//! identity (a confused deputy, and a read per namespace the caller names).
//! Its reads are counted ([`Budgets::counted`]).
//!
//! Reads are cached per namespace for [`BUDGET_TTL`] (a missing ConfigMap
//! and a forbidden read too), so a change takes effect within that time and
//! steady-state writes add no request. A read that fails otherwise (an
//! unreachable apiserver, no answer within the timeout) gives the default
//! and is not cached: the next write asks again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::Api;

use handoff_core::names::SETTINGS_CONFIGMAP;
use handoff_core::settings::{Budget, budget_from};

/// How long a namespace's budget is reused before it is read again: a
/// change of the ConfigMap takes effect within this time.
pub const BUDGET_TTL: Duration = Duration::from_secs(30);

/// Most namespaces cached at once (past it, expired entries are dropped,
/// then everything).
pub(crate) const BUDGET_CACHE_CAPACITY: usize = 4096;

/// Most time the bridge's read of the ConfigMap may take before the
/// default is used (the controller uses its `--apiserver-timeout`).
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// What one read found, as cached.
#[derive(Clone)]
enum Found {
    /// The ConfigMap's verdict (or no ConfigMap: the default).
    Budget(Budget),
    /// The reader may not get the ConfigMap (its RBAC rule is not installed).
    Forbidden,
}

/// The budgets of namespaces, read with one identity and cached per
/// namespace for [`BUDGET_TTL`].
pub struct Budgets {
    client: Client,
    timeout: Duration,
    cache: Mutex<HashMap<String, (Instant, Found)>>,
    reads: Option<prometheus_client::metrics::counter::Counter>,
}

impl Budgets {
    /// Budgets read with `client`, each read bounded by `timeout`.
    pub fn new(client: Client, timeout: Duration) -> Self {
        Self {
            client,
            timeout,
            cache: Mutex::default(),
            reads: None,
        }
    }

    /// These budgets, counting each read of the ConfigMap in `reads`.
    pub fn counted(mut self, reads: prometheus_client::metrics::counter::Counter) -> Self {
        self.reads = Some(reads);
        self
    }

    /// The budget of `namespace`: cached, else read (one GET).
    pub async fn budget(&self, namespace: &str) -> Budget {
        let cached = self.cache.lock().ok().and_then(|cache| {
            cache
                .get(namespace)
                .filter(|(at, _)| at.elapsed() < BUDGET_TTL)
                .map(|(_, found)| found.clone())
        });
        let found = match cached {
            Some(found) => found,
            None => match self.read(namespace).await {
                Some(found) => {
                    self.remember(namespace, &found);
                    found
                }
                None => Found::Budget(Budget::default_budget()),
            },
        };
        match found {
            Found::Budget(budget) => budget,
            Found::Forbidden => Budget::default_budget(),
        }
    }

    /// One read; `None` when it failed in a way worth asking again.
    async fn read(&self, namespace: &str) -> Option<Found> {
        if let Some(reads) = &self.reads {
            reads.inc();
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        match tokio::time::timeout(self.timeout, api.get_opt(SETTINGS_CONFIGMAP)).await {
            Ok(Ok(map)) => {
                let budget = budget_from(map.as_ref().and_then(|m| m.data.as_ref()));
                if let Some(problem) = &budget.problem {
                    tracing::warn!(%namespace, %problem, "bad handoff setting");
                }
                Some(Found::Budget(budget))
            }
            Ok(Err(kube::Error::Api(status))) if status.code == 403 => Some(Found::Forbidden),
            Ok(Err(err)) => {
                tracing::warn!(%namespace, error = %err, "cannot read the ConfigMap {SETTINGS_CONFIGMAP}; the default lint budget is used");
                None
            }
            Err(_) => {
                tracing::warn!(%namespace, timeout = ?self.timeout, "no answer reading the ConfigMap {SETTINGS_CONFIGMAP}; the default lint budget is used");
                None
            }
        }
    }

    /// Caches `found`; a first forbidden read of a namespace is logged.
    fn remember(&self, namespace: &str, found: &Found) {
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        let was_forbidden = matches!(cache.get(namespace), Some((_, Found::Forbidden)));
        if matches!(found, Found::Forbidden) && !was_forbidden {
            tracing::warn!(%namespace, "may not get the ConfigMap {SETTINGS_CONFIGMAP} (RBAC rule not installed?); the default lint budget is used");
        }
        if cache.len() >= BUDGET_CACHE_CAPACITY && !cache.contains_key(namespace) {
            cache.retain(|_, (at, _)| at.elapsed() < BUDGET_TTL);
            if cache.len() >= BUDGET_CACHE_CAPACITY {
                cache.clear();
            }
        }
        cache.insert(namespace.to_owned(), (Instant::now(), found.clone()));
    }
}
