//! A namespace's handoff settings: the ConfigMap [`SETTINGS_CONFIGMAP`]
//! its owners may create, read by the bridge (for `write_handoff`'s
//! warnings) and the controller (for the `Linted` condition) through the
//! same [`Budgets`] cache, so both lint a body under the same budget.
//!
//! One key today, [`BUDGET_KEY`]: the lint's soft token budget, a positive
//! integer of approximate tokens ([`handoff_core::lint`]). A namespace without the
//! ConfigMap or the key uses [`DEFAULT_TOKEN_BUDGET`]. A bad value never
//! fails a write: the default is used and the [`Budget`] carries the
//! problem (the controller puts it in the `Linted` condition's message; both
//! log it).
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

use handoff_core::lint::DEFAULT_TOKEN_BUDGET;
use handoff_core::names::SETTINGS_CONFIGMAP;

/// The key of [`SETTINGS_CONFIGMAP`] holding the lint's soft budget.
pub const BUDGET_KEY: &str = "lintBudgetTokens";

/// How long a namespace's budget is reused before it is read again: a
/// change of the ConfigMap takes effect within this time.
pub const BUDGET_TTL: Duration = Duration::from_secs(30);

/// Most namespaces cached at once (past it, expired entries are dropped,
/// then everything).
pub(crate) const BUDGET_CACHE_CAPACITY: usize = 4096;

/// Most time the bridge's read of the ConfigMap may take before the
/// default is used (the controller uses its `--apiserver-timeout`).
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The budget a namespace's bodies are linted under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// Approximate tokens.
    pub tokens: i64,
    /// Why the default is used although the namespace set a value (names
    /// the ConfigMap, the key and the problem); `None` when all is well.
    pub problem: Option<String>,
}

impl Budget {
    /// [`DEFAULT_TOKEN_BUDGET`], with no problem.
    pub fn default_budget() -> Self {
        Self {
            tokens: DEFAULT_TOKEN_BUDGET,
            problem: None,
        }
    }
}

/// Pure: the budget the data of [`SETTINGS_CONFIGMAP`] sets (`None`: no
/// ConfigMap). No key → the default; a value that is not a positive integer
/// → the default, with the problem.
pub(crate) fn budget_from(data: Option<&std::collections::BTreeMap<String, String>>) -> Budget {
    let Some(value) = data.and_then(|d| d.get(BUDGET_KEY)) else {
        return Budget::default_budget();
    };
    let problem = match value.trim().parse::<i64>() {
        Ok(tokens) if tokens > 0 => {
            return Budget {
                tokens,
                problem: None,
            };
        }
        Ok(_) => format!("got {value:?}, not positive"),
        Err(_) => format!("got {value:?}, not an integer"),
    };
    Budget {
        tokens: DEFAULT_TOKEN_BUDGET,
        problem: Some(format!(
            "ConfigMap {SETTINGS_CONFIGMAP} key {BUDGET_KEY} must be a positive integer \
             (approximate tokens): {problem}; the default {DEFAULT_TOKEN_BUDGET} is used"
        )),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn the_budget_comes_from_the_key_or_is_the_default_with_the_problem() {
        // (value of the key or None for no key, tokens, problem fragment)
        let cases: [(Option<&str>, i64, Option<&str>); 8] = [
            (None, DEFAULT_TOKEN_BUDGET, None),
            (Some("500"), 500, None),
            (Some(" 8000\n"), 8000, None),
            (Some("1"), 1, None),
            (
                Some("0"),
                DEFAULT_TOKEN_BUDGET,
                Some("got \"0\", not positive"),
            ),
            (
                Some("-5"),
                DEFAULT_TOKEN_BUDGET,
                Some("got \"-5\", not positive"),
            ),
            (
                Some("2k"),
                DEFAULT_TOKEN_BUDGET,
                Some("got \"2k\", not an integer"),
            ),
            (
                Some(""),
                DEFAULT_TOKEN_BUDGET,
                Some("got \"\", not an integer"),
            ),
        ];
        for (value, tokens, problem) in cases {
            let mut data = BTreeMap::from([("other".to_owned(), "x".to_owned())]);
            if let Some(value) = value {
                data.insert(BUDGET_KEY.to_owned(), value.to_owned());
            }
            let budget = budget_from(Some(&data));
            assert_eq!(budget.tokens, tokens, "{value:?}");
            match (&budget.problem, problem) {
                (None, None) => {}
                (Some(got), Some(want)) => assert!(
                    got.contains(want)
                        && got.contains("ConfigMap handoff-settings key lintBudgetTokens")
                        && got.contains("the default 2000 is used"),
                    "{value:?}: {got}"
                ),
                (got, want) => panic!("{value:?}: got {got:?}, want {want:?}"),
            }
        }
        assert_eq!(budget_from(None), Budget::default_budget(), "no ConfigMap");
    }
}
