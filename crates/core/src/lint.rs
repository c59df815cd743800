//! The quality lint of a handoff body: warnings, never errors.
//!
//! A handoff is read by every agent that continues the conversation, so a
//! missing section, a body past the token budget or pasted logs cost every
//! later reader. The bridge returns these warnings in the `write_handoff`
//! result (so the writing agent can fix them at once) and the controller
//! sets them as the `Linted` condition (so `kubectl` writers see them too).
//! Both call the same pure [`lint`].
//!
//! The rules, each measurable:
//! - `missing-section`: a heading of the skill's (`## State`, `## Done`,
//!   `## Next`, `## Open questions`, `## Refs`; any heading level, case
//!   insensitive) is absent;
//! - `over-budget`: the body's approximate tokens (bytes / 4, rounded up)
//!   exceed the budget ([`DEFAULT_TOKEN_BUDGET`] unless the namespace sets
//!   another: `handoff_kube::settings`, the caller passes it in);
//! - `big-code-block`: a fenced code block of more than
//!   [`MAX_CODE_BLOCK_LINES`] lines;
//! - `log-output`: more than [`MAX_LOG_LINES`] lines that look like log
//!   records or shell transcripts (a leading timestamp, a bracketed or bare
//!   level such as `INFO`/`ERROR`, or a `$ ` prompt);
//! - `stack-trace`: more than [`MAX_FRAME_LINES`] stack-frame lines (Python
//!   `File "…", line N`, Java/JS `at f(file:N)`, Rust/Go `N: path::fn` or
//!   `file.go:N`), or a `Traceback (most recent call last)` header.

use std::sync::LazyLock;

use regex::Regex;

/// The soft budget of a body, in approximate tokens.
pub const DEFAULT_TOKEN_BUDGET: i64 = 2_000;
/// Bytes per approximate token.
pub const BYTES_PER_TOKEN: usize = 4;
/// Most lines of one fenced code block before it reads like a paste.
pub(crate) const MAX_CODE_BLOCK_LINES: usize = 20;
/// Most log-like lines before the body reads like tool output.
pub(crate) const MAX_LOG_LINES: usize = 8;
/// Most stack-frame lines before the body holds a stack trace.
pub(crate) const MAX_FRAME_LINES: usize = 3;

/// The sections of the skill (skills/handoff/SKILL.md), in its order.
pub(crate) const SECTIONS: [&str; 5] = ["State", "Done", "Next", "Open questions", "Refs"];

/// One lint warning.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Warning {
    /// `missing-section`, `over-budget`, `big-code-block`, `log-output` or `stack-trace`.
    pub code: &'static str,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// A cheap token estimate: one token per [`BYTES_PER_TOKEN`] bytes of
/// UTF-8, rounded up. Tokenizers average 3.5–4.5 bytes per token on English
/// prose and markdown; this is an order of magnitude for budgets, not a count.
pub fn approx_tokens(body: &str) -> i64 {
    i64::try_from(body.len().div_ceil(BYTES_PER_TOKEN)).unwrap_or(i64::MAX)
}

static LOG_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\s*(?:\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}|\[?(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\]?[\s:]|\$ \S)",
    )
    .expect("log line pattern")
});

static FRAME_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"^\s*(?:File ".+", line \d+|at [\w$.<>]+ ?\(.*:\d+(?::\d+)?\)|at .+:\d+:\d+$|\d+: [\w:<>]+::|\S+\.go:\d+)"#,
    )
    .expect("frame line pattern")
});

/// The warnings for `body` under a budget of `budget` approximate tokens.
pub fn lint(body: &str, budget: i64) -> Vec<Warning> {
    let mut warnings = Vec::new();
    let missing: Vec<&str> = SECTIONS
        .iter()
        .copied()
        .filter(|section| !has_heading(body, section))
        .collect();
    if !missing.is_empty() {
        warnings.push(Warning {
            code: "missing-section",
            message: format!(
                "the body lacks the section(s) {}: use the skill's headings \
                 (## State, ## Done, ## Next, ## Open questions, ## Refs)",
                missing.join(", ")
            ),
        });
    }
    let tokens = approx_tokens(body);
    if tokens > budget {
        warnings.push(Warning {
            code: "over-budget",
            message: format!(
                "the body is about {tokens} tokens, over the budget of {budget}: \
                 summarize, link to logs and diffs instead of pasting them"
            ),
        });
    }
    if let Some(lines) = longest_code_block(body).filter(|n| *n > MAX_CODE_BLOCK_LINES) {
        warnings.push(Warning {
            code: "big-code-block",
            message: format!(
                "a code block of {lines} lines (more than {MAX_CODE_BLOCK_LINES}): \
                 keep the few lines that matter and reference the file"
            ),
        });
    }
    let logs = body.lines().filter(|l| LOG_LINE.is_match(l)).count();
    if logs > MAX_LOG_LINES {
        warnings.push(Warning {
            code: "log-output",
            message: format!(
                "{logs} lines read like log or tool output (more than {MAX_LOG_LINES}): \
                 state what they showed in a sentence"
            ),
        });
    }
    let frames = body.lines().filter(|l| FRAME_LINE.is_match(l)).count();
    if frames > MAX_FRAME_LINES || body.contains("Traceback (most recent call last)") {
        warnings.push(Warning {
            code: "stack-trace",
            message: format!(
                "the body holds a stack trace ({frames} frame lines): name the error \
                 and the failing function instead"
            ),
        });
    }
    warnings
}

fn has_heading(body: &str, section: &str) -> bool {
    body.lines().any(|line| {
        let line = line.trim();
        let text = line.trim_start_matches('#');
        text.len() < line.len() && text.trim().eq_ignore_ascii_case(section)
    })
}

/// The line count of the longest fenced (```) block, if any.
fn longest_code_block(body: &str) -> Option<usize> {
    let mut longest = None;
    let mut open: Option<usize> = None;
    for line in body.lines() {
        if line.trim_start().starts_with("```") {
            match open.take() {
                Some(lines) => longest = longest.max(Some(lines)),
                None => open = Some(0),
            }
        } else if let Some(lines) = open.as_mut() {
            *lines += 1;
        }
    }
    longest.max(open)
}

/// One line with every warning's code and message (a condition's message).
pub fn summary(warnings: &[Warning]) -> String {
    warnings
        .iter()
        .map(|w| format!("{}: {}", w.code, w.message))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str =
        "## State\nok\n## Done\n- a\n## Next\n- b\n## Open questions\n- none\n## Refs\n- #1\n";

    fn codes(body: &str, budget: i64) -> Vec<&'static str> {
        lint(body, budget).iter().map(|w| w.code).collect()
    }

    #[test]
    fn each_rule_fires_on_its_case_only() {
        let code_block = format!("{GOOD}```\n{}```\n", "let x = 1;\n".repeat(21));
        let short_block = format!("{GOOD}```\n{}```\n", "let x = 1;\n".repeat(20));
        let unclosed = format!("{GOOD}```\n{}", "x\n".repeat(25));
        let logs = format!(
            "{GOOD}{}",
            "2026-12-01T04:00:00Z INFO reconcile ok\n".repeat(9)
        );
        let few_logs = format!("{GOOD}{}", "[ERROR] one\n".repeat(8));
        let shell = format!("{GOOD}{}", "$ cargo test\n".repeat(9));
        let python = format!(
            "{GOOD}Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n"
        );
        let java = format!(
            "{GOOD}{}",
            "    at com.acme.Api.call(Api.java:42)\n".repeat(4)
        );
        let rust = format!("{GOOD}{}", "  12: handoff::store::write\n".repeat(4));
        let cases: Vec<(&str, &str, i64, Vec<&str>)> = vec![
            ("the skill's sections", GOOD, 2000, vec![]),
            (
                "any heading level, any case",
                "# state\n### DONE\n## next\n## Open Questions\n#### refs\n",
                2000,
                vec![],
            ),
            ("no sections", "just text", 2000, vec!["missing-section"]),
            (
                "a heading word in prose is no heading",
                "State Done Next Open questions Refs",
                2000,
                vec!["missing-section"],
            ),
            ("over budget", GOOD, 10, vec!["over-budget"]),
            ("at budget", GOOD, approx_tokens(GOOD), vec![]),
            (
                "a big code block",
                &code_block,
                2000,
                vec!["big-code-block"],
            ),
            ("a code block at the limit", &short_block, 2000, vec![]),
            (
                "an unclosed block counts to the end",
                &unclosed,
                2000,
                vec!["big-code-block"],
            ),
            ("log lines", &logs, 2000, vec!["log-output"]),
            ("log lines at the limit", &few_logs, 2000, vec![]),
            ("a shell transcript", &shell, 2000, vec!["log-output"]),
            ("a Python traceback", &python, 2000, vec!["stack-trace"]),
            ("Java frames", &java, 2000, vec!["stack-trace"]),
            ("Rust backtrace frames", &rust, 2000, vec!["stack-trace"]),
        ];
        for (name, body, budget, want) in cases {
            assert_eq!(codes(body, budget), want, "{name}");
        }
    }

    #[test]
    fn missing_sections_are_named() {
        let warnings = lint("## State\nok\n## Refs\n- x", DEFAULT_TOKEN_BUDGET);
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0]
                .message
                .contains("the section(s) Done, Next, Open questions:"),
            "{}",
            warnings[0].message
        );
    }

    #[test]
    fn approx_tokens_rounds_up_per_four_bytes() {
        for (body, tokens) in [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("é", 1)] {
            assert_eq!(approx_tokens(body), tokens, "{body:?}");
        }
    }
}
