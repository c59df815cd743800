//! The token economy: what a fresh agent reads to continue a conversation
//! by replaying its transcript, against what it reads with a handoff (the
//! continuation preamble plus the `get_handoff` answer for a typical compact
//! summary). Synthetic Claude Code transcripts of several sizes are
//! generated; `--transcripts DIR` (or `TOKENS_TRANSCRIPTS=DIR`) adds real
//! ones (`*.jsonl`, counted by their bytes: an upper bound).
//!
//! Then the rescue (`handoff rescue`, `handoff hook pre-compact|session-end`):
//! the rescued handoff's size against the transcript it was extracted
//! from, on the shared third-party transcripts
//! (`../shared/fixtures/transcripts`, read in place), on the transcripts
//! the real CLIs wrote in the agents tier's scripted sessions
//! (`tests/fixtures/transcripts/agents/`) and the findings fixtures, and
//! on a synthetic Claude Code session of more than 100k tokens; and what
//! the `session-start` hook adds to the agent's context.
//!
//! Tokens are estimated as characters / 4, the usual rule of thumb for
//! English and code; the ratio, not the absolute count, is the point.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use handoff::hook::{Stored, capped_context, session_context};
use handoff_bridge::tools::get::{self, GetResult};
use handoff_bridge::tools::{HandoffFacts, HandoffView};
use handoff_core::goals::preamble;
use handoff_transcript::rescue::{self, DEFAULT_MAX_TOKENS, Source};
use handoff_transcript::{AgentKind, Budget, Outcome, linearize, read_file};

/// A typical compact handoff: state, done, next, questions, refs.
const TYPICAL_SUMMARY: &str = "## State\nThe CSV importer parses all fixture files; streaming mode is wired but \
the progress bar is not.\n\n## Done\n- `import::csv` reader with header detection (PR #212)\n- error rows \
collected into `ImportReport` with line numbers\n- golden tests for 14 fixtures\n\n## Next\n1. show progress \
in `cli/import.rs` (use the existing `Progress` helper)\n2. handle the `;` delimiter reported in #219\n3. \
document `--strict` in the README\n\n## Open questions\n- should a bad row abort in `--strict` or only be \
reported? (asked @maria on #219)\n\n## Refs\n- src/import/csv.rs, src/cli/import.rs\n- PR #212, issue #219\n";

fn approx_tokens(chars: usize) -> usize {
    chars.div_ceil(4)
}

/// Characters an agent re-reads when a synthetic session of `turns` turns
/// is replayed: every prompt, answer, tool call and tool result.
fn synthetic_session_chars(turns: usize) -> usize {
    let user = 240;
    let assistant = 700;
    let tool_calls = 2 * 350;
    let tool_results = 2 * 2_400;
    turns * (user + assistant + tool_calls + tool_results)
}

fn handoff_chars(key: &str) -> usize {
    let result = GetResult {
        found: true,
        handoff: Some(HandoffView {
            facts: HandoffFacts {
                handoff_key: key.into(),
                project: "shop".into(),
                repo: Some("acme/shop".into()),
                kind: Some("issue".into()),
                created_by: Some("system:serviceaccount:agents:implement".into()),
                updated_at: Some("2026-11-29T10:00:00Z".into()),
            },
            body: TYPICAL_SUMMARY.into(),
            revision: Some(7),
            object: "agents/acme-shop-219-0123456789abcdef".into(),
        }),
    };
    let answer = get::text(key, &result) + &serde_json::to_string(&result).unwrap_or_default();
    preamble(key).unwrap_or_default().len() + answer.len()
}

fn given_transcripts() -> Vec<PathBuf> {
    let args: Vec<String> = std::env::args().collect();
    let dir = args
        .iter()
        .position(|a| a == "--transcripts")
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| std::env::var("TOKENS_TRANSCRIPTS").ok());
    let Some(dir) = dir else { return Vec::new() };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "jsonl"));
    files.sort();
    files
}

fn main() {
    let key = "acme/shop#219";
    let with_handoff = approx_tokens(handoff_chars(key));
    println!("\n## Token economy (≈ characters / 4)\n");
    println!(
        "| session | restore: replay the transcript | continue: preamble + get_handoff | ratio |"
    );
    println!("|---|---:|---:|---:|");
    for turns in [20, 100, 400] {
        let restore = approx_tokens(synthetic_session_chars(turns));
        println!(
            "| synthetic, {turns} turns (tool calls and results) | {restore} | {with_handoff} | {:.0}× |",
            restore as f64 / with_handoff as f64
        );
    }
    for path in given_transcripts() {
        let bytes = std::fs::metadata(&path)
            .map(|m| m.len() as usize)
            .unwrap_or(0);
        let restore = approx_tokens(bytes);
        println!(
            "| {} (file bytes, upper bound) | {restore} | {with_handoff} | {:.0}× |",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("?"),
            restore as f64 / with_handoff as f64
        );
    }
    rescue_table();
    session_start_table();
}

/// A synthetic Claude Code session of `turns` turns: a request, an
/// answer with two tool calls, and their (large) results per turn.
fn synthetic_claude_session(turns: usize) -> String {
    let mut lines = Vec::new();
    for i in 0..turns {
        let t = format!("2026-11-29T10:{:02}:{:02}.000Z", (i / 60) % 60, i % 60);
        let request = format!(
            "Step {i}: make the importer handle case {i}; {}",
            "context ".repeat(25)
        );
        lines.push(
            serde_json::json!({"type": "user", "timestamp": t, "uuid": format!("u{i}"),
            "message": {"role": "user", "content": request}}),
        );
        let answer = format!(
            "Handled case {i} in the reader. {}",
            "explanation ".repeat(55)
        );
        lines.push(serde_json::json!({"type": "assistant", "timestamp": t, "uuid": format!("a{i}"),
            "message": {"id": format!("m{i}"), "role": "assistant", "content": [
                {"type": "text", "text": answer},
                {"type": "tool_use", "id": format!("t{i}a"), "name": "Edit", "input": {"file_path": format!("src/import/case{}.rs", i % 37)}},
                {"type": "tool_use", "id": format!("t{i}b"), "name": "Bash", "input": {"command": format!("cargo test import::case{i}")}}]}}));
        let output = "test output line\n".repeat(150);
        lines.push(
            serde_json::json!({"type": "user", "timestamp": t, "uuid": format!("r{i}"),
            "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("t{i}a"), "content": output},
                {"type": "tool_result", "tool_use_id": format!("t{i}b"), "content": output}]}}),
        );
    }
    lines.iter().map(|l| l.to_string() + "\n").collect()
}

fn rescued_tokens(outcome: &Outcome, agent: AgentKind) -> usize {
    let source = Source {
        agent,
        session: Some("bench"),
        started: None,
    };
    rescue::approx_tokens(&rescue::body(outcome, source, DEFAULT_MAX_TOKENS))
}

fn rescue_row(name: &str, transcript_bytes: usize, outcome: &Outcome, agent: AgentKind) {
    let transcript = approx_tokens(transcript_bytes);
    let rescued = rescued_tokens(outcome, agent);
    println!(
        "| {name} | {} | {transcript} | {rescued} | {:.1}× |",
        outcome.turns.len(),
        transcript as f64 / rescued.max(1) as f64
    );
}

fn rescue_table() {
    println!(
        "\n## Rescue: the rescued handoff against its transcript (≈ characters / 4, budget {DEFAULT_MAX_TOKENS})\n"
    );
    println!("| transcript | turns | transcript tokens (file) | rescued handoff tokens | ratio |");
    println!("|---|---:|---:|---:|---:|");
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/transcripts");
    for (dir, agent) in [("claude", AgentKind::Claude), ("codex", AgentKind::Codex)] {
        let Ok(entries) = std::fs::read_dir(shared.join(dir)) else {
            println!(
                "| ({} missing: no shared rows) | | | | |",
                shared.join(dir).display()
            );
            continue;
        };
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for file in files {
            let bytes = std::fs::metadata(&file)
                .map(|m| m.len() as usize)
                .unwrap_or(0);
            let Ok(Some(outcome)) = read_file(agent, &file, None, Budget::UNLIMITED) else {
                continue;
            };
            let name = format!(
                "shared {dir}/{}",
                file.file_name().and_then(|n| n.to_str()).unwrap_or("?")
            );
            rescue_row(&name, bytes, &outcome, agent);
        }
    }
    // The project's own transcripts: those the real CLIs wrote in the
    // agents tier's scripted sessions, and the hand-written findings.
    let ours = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/transcripts");
    for (dir, agent) in [
        ("agents/claude", AgentKind::Claude),
        ("agents/codex", AgentKind::Codex),
        ("findings", AgentKind::Claude),
    ] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(ours.join(dir))
            .map(|entries| entries.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.retain(|p| p.extension().is_some_and(|e| e == "jsonl"));
        files.sort();
        for file in files {
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("?");
            // A findings file names its agent.
            let agent = [AgentKind::Codex, AgentKind::Grok]
                .into_iter()
                .find(|kind| name.starts_with(kind.name()))
                .unwrap_or(agent);
            let bytes = std::fs::metadata(&file)
                .map(|m| m.len() as usize)
                .unwrap_or(0);
            let Ok(Some(outcome)) = read_file(agent, &file, None, Budget::UNLIMITED) else {
                continue;
            };
            rescue_row(&format!("{dir}/{name}"), bytes, &outcome, agent);
        }
    }
    for turns in [100, 300] {
        let session = synthetic_claude_session(turns);
        let outcome = linearize(
            AgentKind::Claude,
            Cursor::new(session.as_bytes()),
            Budget::UNLIMITED,
        );
        rescue_row(
            &format!("synthetic Claude Code, {turns} turns"),
            session.len(),
            &outcome,
            AgentKind::Claude,
        );
    }
}

fn session_start_table() {
    println!("\n## Session start: what the hook adds to the context (≈ characters / 4)\n");
    println!("| handoff | additionalContext tokens | body tokens |");
    println!("|---|---:|---:|");
    let session = synthetic_claude_session(300);
    let outcome = linearize(
        AgentKind::Claude,
        Cursor::new(session.as_bytes()),
        Budget::UNLIMITED,
    );
    let rescued = rescue::body(
        &outcome,
        Source {
            agent: AgentKind::Claude,
            session: Some("bench"),
            started: None,
        },
        DEFAULT_MAX_TOKENS,
    );
    let done = "- checked one more part of the input against the schema, and kept notes\n";
    let long = format!(
        "## State\nHalf done.\n## Next\n- write the output\n## Done\n{}",
        done.repeat(160)
    );
    for (name, body, agent) in [
        ("typical compact summary", TYPICAL_SUMMARY.to_owned(), None),
        ("rescued, synthetic 300 turns", rescued, None),
        (
            "12 KB handoff, cut for Claude Code (10,000 characters)",
            long.clone(),
            Some(AgentKind::Claude),
        ),
        (
            "12 KB handoff, cut for Codex (10,000 bytes)",
            long,
            Some(AgentKind::Codex),
        ),
    ] {
        let h = Stored {
            handoff_key: "acme/shop#219".into(),
            project: "shop".into(),
            repo: Some("acme/shop".into()),
            kind: Some("issue".into()),
            body: body.clone(),
            created_by: Some("system:serviceaccount:agents:implement".into()),
            updated_at: Some("2026-11-29T10:00:00Z".into()),
            revision: Some(7),
        };
        let context = match agent {
            Some(agent) => capped_context(&h, agent.context_limit()),
            None => session_context(&h),
        };
        println!(
            "| {name} | {} | {} |",
            approx_tokens(context.len()),
            approx_tokens(body.len())
        );
    }
}
