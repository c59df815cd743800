//! The rescue handoff: a compact, extractive handoff built from a
//! transcript, deterministically and without a model, for when the agent
//! never wrote one (it forgot, ran out of context, or its pod was killed).
//!
//! # Why extractive
//!
//! A rescue runs in a hook, at compaction or at the end of a session, where
//! there is no model to ask and no time to wait. So it only copies what the
//! transcript already says, in the skill's sections (State, Done, Next,
//! Open questions, Refs), under a header saying plainly that the agent did
//! not write it:
//!
//! - State: the last real request (interrupts, shell-mode input, slash
//!   commands, hook feedback and other marked turns are not requests, and
//!   are listed as what they are), whether a reply followed it, and that
//!   reply (where it stopped);
//! - Done: the files and commands touched, from the tool calls, newest
//!   last: the newest that fit, after a line counting the older ones left
//!   out;
//! - Next: the first and the last request (what was asked, and last asked);
//! - the reader's gaps (its warnings), so the next agent knows what is
//!   missing;
//! - Refs: the session's title and the references the transcript records
//!   (the agent's last prompt, a pull request).
//!
//! # Budget
//!
//! The body stays within `max_tokens` (≈ characters / 4, as
//! `status.approxTokens`; 2,000 by default): each extracted part has a
//! share of the budget and is cut at a character boundary with `…`; a
//! final cut guards the total. The same transcript always gives the same
//! body, so a second rescue of it is an unchanged write.
//!
//! # Credentials
//!
//! Transcript text can hold credentials (a pasted token, a command line
//! with a password). Every piece of transcript text that goes into the body
//! passes through [`scrub`], and only through it.

use std::io::{BufReader, Read};
use std::path::Path;

use jiff::Timestamp;

use super::linear::next_text_line;
use super::{AgentKind, Mark, Outcome, Role};

pub use handoff_core::api::{RESCUE_MARK, is_rescued};

/// The default budget of a rescued body, in approximate tokens.
pub const DEFAULT_MAX_TOKENS: usize = 2_000;

/// The smallest budget accepted: room for the header and the sections.
pub const MIN_MAX_TOKENS: usize = 300;

/// What a rescued handoff's `kind` ends with (`rescued` alone when no kind
/// is known): the mark `kubectl get handoffs` shows in its Kind column.
pub(crate) const RESCUED_KIND: &str = "rescued";

/// How many leading lines are searched for the transcript's first
/// timestamp.
const START_SCAN_LINES: usize = 1_000;
/// How many leading bytes are searched for it.
const START_SCAN_BYTES: u64 = 8 << 20;
/// The longest line looked at for it (a first record is small).
const START_SCAN_LINE_BYTES: usize = 1 << 20;

/// Most tool calls listed.
const MAX_TOOLS: usize = 40;

/// Removes credentials from transcript text before it is stored: the one
/// place transcript text passes on its way into a rescued body. Every
/// finding of the write check's detector becomes `[redacted: <rule id>]`,
/// so a rescue is never refused for what the session printed.
pub(crate) fn scrub(text: &str) -> String {
    handoff_core::secrets::redact(text)
}

/// Approximate tokens of `text` as `status.approxTokens` counts them
/// ([`handoff_core::lint::approx_tokens`]), as a `usize` for budgets.
pub fn approx_tokens(text: &str) -> usize {
    text.len().div_ceil(handoff_core::lint::BYTES_PER_TOKEN)
}

/// The `kind` of a rescued handoff: `<kind>.rescued`, or `rescued`; a kind
/// that is already marked is kept as it is.
pub fn rescued_kind(kind: Option<&str>) -> String {
    match kind.map(str::trim).filter(|k| !k.is_empty()) {
        None => RESCUED_KIND.to_owned(),
        Some(k) if k == RESCUED_KIND || k.ends_with(&format!(".{RESCUED_KIND}")) => k.to_owned(),
        Some(k) => format!("{k}.{RESCUED_KIND}"),
    }
}

/// When the session began: the first top-level `timestamp` of a JSON-lines
/// transcript (Claude Code and Codex write one on every record; Gemini CLI
/// on every message, and `startTime` in the header before them), within
/// its first [`START_SCAN_LINES`] lines and [`START_SCAN_BYTES`] bytes; a
/// line longer than [`START_SCAN_LINE_BYTES`] is passed over unread, so a
/// file whose first line has no end costs at most that. `None` when there
/// is none (or the file is not JSON lines, as a Grok database or a Gemini
/// CLI session of before 0.39, one indented JSON document).
pub fn started_at(path: &Path) -> Option<Timestamp> {
    let file = std::fs::File::open(path).ok()?;
    let mut reader = BufReader::new(file.take(START_SCAN_BYTES));
    let mut buf = Vec::new();
    for _ in 0..START_SCAN_LINES {
        match next_text_line(&mut reader, &mut buf, START_SCAN_LINE_BYTES) {
            Ok(Some(Some(line))) => {
                if let Some(at) = line_timestamp(&line) {
                    return Some(at);
                }
            }
            Ok(Some(None)) => {}
            Ok(None) | Err(_) => return None,
        }
    }
    None
}

/// The top-level `timestamp` (or `startTime`, a Gemini CLI header's) of
/// one JSON line, if it has a valid one.
fn line_timestamp(line: &str) -> Option<Timestamp> {
    #[derive(serde::Deserialize)]
    struct Stamped {
        timestamp: Option<String>,
        #[serde(rename = "startTime")]
        start_time: Option<String>,
    }
    let stamped: Stamped = serde_json::from_str(line).ok()?;
    stamped.timestamp.or(stamped.start_time)?.parse().ok()
}

/// Where the transcript came from, for the header and Refs.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub agent: AgentKind,
    /// The session id, when known.
    pub session: Option<&'a str>,
    /// When the session began, when known.
    pub started: Option<Timestamp>,
}

/// The rescued body of `outcome`, at most `max_tokens` (see the module
/// docs).
pub fn body(outcome: &Outcome, source: Source<'_>, max_tokens: usize) -> String {
    let budget = max_tokens.max(MIN_MAX_TOKENS) * 4;
    // The extracts share a pool that shrinks until the whole body fits.
    let mut pool = budget;
    loop {
        let text = compose(outcome, source, pool);
        if text.len() <= budget || pool < 400 {
            // The extracts are scrubbed one by one; what they form side by
            // side, or once clipped, is scrubbed as a whole.
            return scrub(&clip(&scrub(&text), budget));
        }
        pool = pool * 4 / 5;
    }
}

/// The body with the extracts cut to their shares of `pool` characters.
fn compose(outcome: &Outcome, source: Source<'_>, pool: usize) -> String {
    let users: Vec<&str> = texts(outcome, Role::User);
    let assistants: Vec<&str> = texts(outcome, Role::Assistant);
    let tools = tools(outcome);
    let share = |percent: usize| pool * percent / 100;

    let mut header = format!(
        "{RESCUE_MARK}: extracted by `handoff rescue` from a {} transcript",
        source.agent.label()
    );
    if let Some(session) = source.session {
        header.push_str(&format!(" (session `{}`", scrub(session)));
        if let Some(started) = source.started {
            header.push_str(&format!(", started {started}"));
        }
        header.push(')');
    }
    header.push_str(
        ", NOT written by the agent. It copies what the transcript says; verify it against the \
         repository before relying on it, and replace it with a real summary (write_handoff).",
    );

    let state = state(outcome, share(30));
    let done = done(&tools, share(25));

    let mut next = "## Next\n".to_owned();
    match (users.first(), users.last()) {
        (Some(first), Some(last)) if users.len() > 1 => {
            next.push_str("First request:\n");
            next.push_str(&quote(first, share(12)));
            next.push_str("Last request:\n");
            next.push_str(&quote(last, share(15)));
        }
        (Some(only), _) => {
            next.push_str("The request:\n");
            next.push_str(&quote(only, share(25)));
        }
        _ => next.push_str("No user request was found.\n"),
    }

    let mut gaps = "## Open questions\n- What the agent judged done and still open is not in a \
                    transcript: check the last request against the repository.\n"
        .to_owned();
    for warning in outcome.warnings.iter().take(5) {
        gaps.push_str(&format!("- reader: {}\n", clip(&scrub(warning), 200)));
    }

    let mut refs = format!(
        "## Refs\n- transcript: {} records, {} turns ({} user, {} assistant)",
        outcome.records,
        outcome.turns.len(),
        users.len(),
        assistants.len()
    );
    refs.push('\n');
    if let Some(title) = &outcome.title {
        refs.push_str(&format!("- session title: {}\n", clip(&scrub(title), 200)));
    }
    for reference in &outcome.refs {
        refs.push_str(&format!("- {}\n", clip(&scrub(reference), 300)));
    }

    [header, String::new(), state, done, next, gaps, refs].join("\n")
}

/// The texts of the unmarked turns of `role` (the user's requests, the
/// assistant's replies), oldest first, without empty ones.
fn texts(outcome: &Outcome, role: Role) -> Vec<&str> {
    outcome
        .turns
        .iter()
        .filter(|t| t.role == role && t.mark.is_none())
        .map(|t| t.text.trim())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Where the session stopped: the last real request (marked turns, such as
/// interrupts, shell-mode input and commands, are not requests), whether a
/// reply followed it, and what the transcript records after it.
fn state(outcome: &Outcome, max: usize) -> String {
    let turns = &outcome.turns;
    let mut state = "## State\n".to_owned();
    if turns.is_empty() {
        state.push_str("The transcript holds no conversational turn.\n");
        return state;
    }
    let asked = turns
        .iter()
        .rposition(|t| t.is_request() && !t.text.trim().is_empty());
    let after = &turns[asked.map_or(0, |i| i + 1)..];
    let reply = after
        .iter()
        .rev()
        .find(|t| t.is_reply() && !t.text.trim().is_empty());
    let calls: usize = after
        .iter()
        .filter(|t| t.is_reply())
        .map(|t| t.tools.len())
        .sum();
    match (asked.map(|i| &turns[i]), reply) {
        (Some(request), Some(reply)) => {
            state.push_str(&format!(
                "The last request ({}) got a reply. It stopped after this assistant reply:\n",
                excerpt(&request.text)
            ));
            state.push_str(&quote(&reply.text, max));
        }
        (Some(request), None) => {
            state.push_str(&format!(
                "It stopped on a user request that got no reply (see Next): {}",
                excerpt(&request.text)
            ));
            if calls > 0 {
                state.push_str(&format!(
                    "; the agent made {calls} tool call{} on it without replying",
                    if calls == 1 { "" } else { "s" }
                ));
            }
            state.push_str(".\n");
        }
        (None, Some(reply)) => {
            state.push_str("No user request was found. It stopped after this assistant reply:\n");
            state.push_str(&quote(&reply.text, max));
        }
        (None, None) => state.push_str("No user request or assistant reply was found.\n"),
    }
    let marked: Vec<String> = after
        .iter()
        .filter_map(|t| t.mark.map(|mark| (mark, t)))
        .map(|(mark, t)| format!("{}: {}", mark_label(mark), excerpt(&t.text)))
        .collect();
    if !marked.is_empty() {
        state.push_str("Recorded after that request, and not a request:\n");
        let skip = marked.len().saturating_sub(MAX_MARKED);
        if skip > 0 {
            state.push_str(&format!("- […] {skip} earlier ones left out\n"));
        }
        for line in &marked[skip..] {
            state.push_str(&format!("- {line}\n"));
        }
    }
    state
}

/// Marked turns named in State, the newest.
const MAX_MARKED: usize = 5;

/// What a marked turn is, for people.
fn mark_label(mark: Mark) -> &'static str {
    match mark {
        Mark::Interrupt => "the user interrupted",
        Mark::Shell => "shell-mode input or output",
        Mark::Command => "a slash command",
        Mark::Hook => "hook feedback",
        Mark::Summary => "a compaction summary",
        Mark::Sidechain => "a sub-agent's report",
    }
}

/// A short one-line excerpt of `text`, quoted.
fn excerpt(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("\"{}\"", clip(&scrub(&line), 100))
}

/// The Done section: the newest tool calls that fit `max` characters,
/// newest last, after a line saying how many older ones were left out.
fn done(tools: &[String], max: usize) -> String {
    let mut done = "## Done\nFiles and commands touched (tool calls, newest last):\n".to_owned();
    if tools.is_empty() {
        done.push_str("- none recorded\n");
        return done;
    }
    let mut kept: Vec<String> = Vec::new();
    let mut used = 0;
    for tool in tools.iter().rev() {
        let line = format!("- {}\n", clip(&scrub(tool), 160));
        if kept.len() >= MAX_TOOLS || (used + line.len() > max && !kept.is_empty()) {
            break;
        }
        used += line.len();
        kept.push(line);
    }
    let left_out = tools.len() - kept.len();
    if left_out > 0 {
        done.push_str(&format!(
            "- […] {left_out} older call{} left out\n",
            if left_out == 1 { "" } else { "s" }
        ));
    }
    kept.reverse();
    done.extend(kept);
    done
}

/// The tool calls of the transcript (`name: argument`), each once at its
/// last use, newest last.
fn tools(outcome: &Outcome) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut kept: Vec<String> = outcome
        .turns
        .iter()
        .rev()
        .flat_map(|t| t.tools.iter().rev())
        .map(|t| t.strip_prefix("[tool] ").unwrap_or(t))
        .filter(|tool| seen.insert(*tool))
        .map(str::to_owned)
        .collect();
    kept.reverse();
    kept
}

/// `text` as a markdown quote of at most `max` characters.
fn quote(text: &str, max: usize) -> String {
    let clipped = clip(&scrub(text), max.max(40));
    let mut out = String::new();
    for line in clipped.lines() {
        out.push_str("> ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `text` cut to at most `max` bytes at a character boundary, with `…`
/// when cut.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let ellipsis = "…";
    let mut end = max.saturating_sub(ellipsis.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ellipsis}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Turn;

    fn turn(role: Role, text: &str, tools: &[&str]) -> Turn {
        Turn {
            tools: tools.iter().map(|t| format!("[tool] {t}")).collect(),
            ..Turn::new(role, text)
        }
    }

    const SOURCE: Source<'static> = Source {
        agent: AgentKind::Claude,
        session: Some("s-1"),
        started: None,
    };

    #[test]
    fn the_body_has_the_header_the_sections_and_the_extracts() {
        let o = Outcome::of_turns(vec![
            turn(Role::User, "Add --format to the CLI", &[]),
            turn(Role::Assistant, "Looking.", &["Read: src/cli.rs"]),
            turn(Role::User, "Also update the README", &[]),
            turn(
                Role::Assistant,
                "Done with the flag; README next.",
                &["Edit: src/cli.rs", "Bash: cargo test"],
            ),
        ]);
        let body = body(&o, SOURCE, DEFAULT_MAX_TOKENS);
        assert!(is_rescued(&body), "{body}");
        assert!(body.contains("NOT written by the agent"));
        assert!(body.contains("session `s-1`"));
        for section in [
            "## State",
            "## Done",
            "## Next",
            "## Open questions",
            "## Refs",
        ] {
            assert!(body.contains(section), "{section} missing:\n{body}");
        }
        assert!(body.contains("First request:\n> Add --format to the CLI\n"));
        assert!(body.contains("Last request:\n> Also update the README\n"));
        assert!(body.contains("this assistant reply:\n> Done with the flag; README next.\n"));
        assert!(body.contains("- Read: src/cli.rs\n- Edit: src/cli.rs\n- Bash: cargo test\n"));
        assert!(body.contains("4 turns (2 user, 2 assistant)"));
    }

    #[test]
    fn credentials_in_the_transcript_are_redacted_in_the_body() {
        // Built from parts, so no credential-shaped string sits in the source.
        let token = format!(
            "ghp_{}",
            "a1B2c3D4e5".repeat(4).get(..36).unwrap_or_default()
        );
        let o = Outcome::of_turns(vec![
            turn(Role::User, &format!("Use the token {token} to push"), &[]),
            turn(
                Role::Assistant,
                &format!("Pushed with {token}."),
                &[&format!("Bash: GH_TOKEN={token} git push")],
            ),
        ]);
        let body = body(&o, SOURCE, DEFAULT_MAX_TOKENS);
        assert!(!body.contains(&token), "{body}");
        assert!(body.contains("[redacted: github-pat]"), "{body}");
        assert_eq!(handoff_core::secrets::find(&body).len(), 0, "{body}");
    }

    #[test]
    fn the_body_stays_within_the_budget_and_is_deterministic() {
        let long = "word ".repeat(20_000);
        let tools: Vec<String> = (0..500).map(|i| format!("Edit: src/file{i}.rs")).collect();
        let tool_refs: Vec<&str> = tools.iter().map(String::as_str).collect();
        let o = Outcome::of_turns(vec![
            turn(Role::User, &long, &[]),
            turn(Role::Assistant, &long, &tool_refs),
            turn(Role::User, &long, &[]),
            turn(Role::Assistant, &long, &[]),
        ]);
        for max in [MIN_MAX_TOKENS, 1_000, DEFAULT_MAX_TOKENS, 8_000] {
            let b = body(&o, SOURCE, max);
            assert!(approx_tokens(&b) <= max, "{max}: {}", approx_tokens(&b));
            assert_eq!(b, body(&o, SOURCE, max), "deterministic");
            assert!(b.contains("## Refs"), "{max}: the last section survives");
        }
    }

    #[test]
    fn where_it_stopped_follows_the_last_turn() {
        let cases = [
            (vec![], "no conversational turn"),
            (
                vec![turn(Role::User, "please do X", &[])],
                "a user request that got no reply",
            ),
            (
                vec![
                    turn(Role::User, "do X", &[]),
                    turn(Role::Assistant, "did X", &[]),
                ],
                "after this assistant reply:\n> did X",
            ),
        ];
        for (turns, want) in cases {
            let b = body(&Outcome::of_turns(turns), SOURCE, DEFAULT_MAX_TOKENS);
            assert!(b.contains(want), "{want}:\n{b}");
        }
    }

    fn marked(role: Role, text: &str, mark: Mark) -> Turn {
        Turn {
            mark: Some(mark),
            ..Turn::new(role, text)
        }
    }

    #[test]
    fn state_names_the_last_real_request_and_whether_it_was_answered() {
        let ask = turn(Role::User, "do X", &[]);
        let did = turn(Role::Assistant, "did X", &[]);
        let working = turn(Role::Assistant, "", &["Bash: make", "Bash: make test"]);
        let interrupt = marked(Role::User, "[Request interrupted by user]", Mark::Interrupt);
        let shell = marked(Role::User, "$ git status", Mark::Shell);
        let report = marked(Role::Assistant, "sub-agent found Y", Mark::Sidechain);
        // (turns, words State holds, words it must not hold)
        let cases: [(Vec<Turn>, &[&str], &[&str]); 6] = [
            (
                vec![ask.clone(), did.clone(), interrupt.clone(), shell.clone()],
                &[
                    "The last request (\"do X\") got a reply",
                    "> did X\n",
                    "- the user interrupted: \"[Request interrupted by user]\"",
                    "- shell-mode input or output: \"$ git status\"",
                ],
                &["no reply"],
            ),
            (
                vec![did.clone(), ask.clone(), working.clone(), interrupt.clone()],
                &[
                    "a user request that got no reply (see Next): \"do X\"",
                    "made 2 tool calls on it without replying",
                    "the user interrupted",
                ],
                &["got a reply"],
            ),
            (
                vec![ask.clone(), report.clone()],
                &["got no reply", "a sub-agent's report"],
                &["sub-agent found Y\n"],
            ),
            (
                vec![interrupt.clone()],
                &["No user request or assistant reply was found."],
                &[],
            ),
            (
                vec![did.clone()],
                &["No user request was found. It stopped after this assistant reply:\n> did X"],
                &[],
            ),
            (vec![], &["no conversational turn"], &[]),
        ];
        for (turns, words, not) in cases {
            let state = state(&Outcome::of_turns(turns.clone()), 1_000);
            for w in words {
                assert!(state.contains(w), "{w:?} not in:\n{state}");
            }
            for w in not {
                assert!(!state.contains(w), "{w:?} in:\n{state}");
            }
        }
    }

    #[test]
    fn done_keeps_the_newest_calls_that_fit() {
        let tools =
            |n: usize| -> Vec<String> { (0..n).map(|i| format!("Edit: f{i:02}")).collect() };
        let line = "- Edit: f00\n".len();
        // (calls, room, the first and last listed, the line about the rest)
        let cases = [
            (0, 100, None, None, None),
            (3, 100, Some("- Edit: f00"), Some("- Edit: f02"), None),
            (
                10,
                3 * line,
                Some("- Edit: f07"),
                Some("- Edit: f09"),
                Some("- […] 7 older calls left out"),
            ),
            (
                2,
                line,
                Some("- Edit: f01"),
                Some("- Edit: f01"),
                Some("- […] 1 older call left out"),
            ),
            (
                50,
                10_000,
                Some("- Edit: f10"),
                Some("- Edit: f49"),
                Some("- […] 10 older calls left out"),
            ),
        ];
        for (n, room, first, last, rest) in cases {
            let done = done(&tools(n), room);
            let lines: Vec<&str> = done
                .lines()
                .skip(2)
                .filter(|l| !l.contains("[…]"))
                .collect();
            if n == 0 {
                assert!(done.contains("- none recorded"), "{done}");
                continue;
            }
            assert_eq!(lines.first().copied(), first, "{n}, {room}:\n{done}");
            assert_eq!(lines.last().copied(), last, "{n}, {room}:\n{done}");
            let said = done.lines().find(|l| l.contains("[…]"));
            assert_eq!(said, rest, "{n}, {room}:\n{done}");
        }
    }

    #[test]
    fn tools_are_listed_once_at_their_last_use() {
        let o = Outcome::of_turns(vec![turn(
            Role::Assistant,
            "",
            &["Read: a", "Read: b", "Read: a"],
        )]);
        assert_eq!(tools(&o), vec!["Read: b", "Read: a"]);
    }

    #[test]
    fn rescued_kinds() {
        let cases = [
            (None, "rescued"),
            (Some(""), "rescued"),
            (Some("issue"), "issue.rescued"),
            (Some("issue.rescued"), "issue.rescued"),
            (Some("rescued"), "rescued"),
        ];
        for (kind, want) in cases {
            assert_eq!(rescued_kind(kind), want, "{kind:?}");
        }
    }

    #[test]
    fn line_timestamps() {
        let cases = [
            (
                r#"{"timestamp":"2025-12-24T10:00:00.000Z","type":"user"}"#,
                Some("2025-12-24T10:00:00Z"),
            ),
            (
                r#"{"sessionId":"s","projectHash":"h","startTime":"2026-12-05T02:20:19.689Z"}"#,
                Some("2026-12-05T02:20:19.689Z"),
            ),
            (
                r#"{"$set":{"lastUpdated":"2026-12-05T02:20:19.718Z"}}"#,
                None,
            ),
            (r#"{"type":"summary"}"#, None),
            (r#"{"timestamp":"yesterday"}"#, None),
            ("not json", None),
        ];
        for (line, want) in cases {
            assert_eq!(
                line_timestamp(line).map(|t| t.to_string()),
                want.map(str::to_owned),
                "{line}"
            );
        }
    }

    #[test]
    fn clip_cuts_at_a_character_boundary() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("ééé", 5), "é…");
        assert!(clip(&"é".repeat(100), 50).len() <= 50);
    }
}
