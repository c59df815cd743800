//! Goal texts given to agents. For now: the continuation preamble of the
//! contract (DESIGN §2), prepended to an agent's first goal when it has a
//! conversation object key.

use std::io::{Read, Write};

use clap::Args;

/// The environment variable that carries the conversation object key.
pub const KEY_ENV: &str = "CONVERSATION_OBJECT_KEY";

/// The exact preamble of the contract for `key`; `None` when the key is empty.
pub fn preamble(key: &str) -> Option<String> {
    let key = key.trim();
    (!key.is_empty()).then(|| {
        format!(
            "Continuation key: {key}. If you have prior context, call get_handoff with this key \
             before starting, and write_handoff an updated summary before you finish."
        )
    })
}

/// `goal` with the preamble in front (separated by a blank line), or `goal`
/// unchanged when there is no key.
pub fn prepend(key: &str, goal: &str) -> String {
    match preamble(key) {
        Some(p) if goal.is_empty() => p,
        Some(p) => format!("{p}\n\n{goal}"),
        None => goal.to_owned(),
    }
}

/// Arguments of `handoff preamble`.
#[derive(Debug, Args)]
pub struct PreambleArgs {
    /// The conversation object key (stable per issue).
    #[arg(long, env = KEY_ENV, default_value = "")]
    pub key: String,
    /// Read a goal on stdin and write preamble + goal to stdout.
    #[arg(long)]
    pub prepend: bool,
}

/// Runs `handoff preamble`.
pub fn run_preamble(args: PreambleArgs) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if args.prepend {
        let mut goal = String::new();
        std::io::stdin().read_to_string(&mut goal)?;
        out.write_all(prepend(&args.key, &goal).as_bytes())?;
    } else if let Some(p) = preamble(&args.key) {
        writeln!(out, "{p}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preamble_matches_the_contract_exactly() {
        assert_eq!(
            preamble("acme/api#42").as_deref(),
            Some(
                "Continuation key: acme/api#42. If you have prior context, call get_handoff with \
                 this key before starting, and write_handoff an updated summary before you finish."
            )
        );
    }

    #[test]
    fn prepend_cases() {
        let cases = [
            ("", "do it", "do it"),
            ("  ", "do it", "do it"),
            ("k", "", "Continuation key: k."),
            ("k", "do it", "do it"),
        ];
        for (key, goal, expect_contains) in cases {
            let out = prepend(key, goal);
            assert!(out.contains(expect_contains), "{key:?} {goal:?} → {out:?}");
            assert_eq!(out.starts_with("Continuation key:"), !key.trim().is_empty());
        }
    }
}
