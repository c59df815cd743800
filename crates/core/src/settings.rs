//! A namespace's handoff settings, decided without I/O: the lint budget
//! the data of the ConfigMap [`SETTINGS_CONFIGMAP`] sets ([`budget_from`]).
//! Reading the ConfigMap, and the cache both the bridge and the controller
//! read it through, is `handoff_kube::settings`.
//!
//! One key today, [`BUDGET_KEY`]: the lint's soft token budget, a positive
//! integer of approximate tokens ([`crate::lint`]). A namespace without the
//! ConfigMap or the key uses [`DEFAULT_TOKEN_BUDGET`]. A bad value never
//! fails a write: the default is used and the [`Budget`] carries the
//! problem (the controller puts it in the `Linted` condition's message; both
//! log it).

use std::collections::BTreeMap;

use crate::lint::DEFAULT_TOKEN_BUDGET;
use crate::names::SETTINGS_CONFIGMAP;

/// The key of [`SETTINGS_CONFIGMAP`] holding the lint's soft budget.
pub const BUDGET_KEY: &str = "lintBudgetTokens";

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
pub fn budget_from(data: Option<&BTreeMap<String, String>>) -> Budget {
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

#[cfg(test)]
mod tests {
    use super::*;

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
