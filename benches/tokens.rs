//! The token economy: what a fresh agent reads to continue a conversation
//! by replaying its transcript, against what it reads with a handoff (the
//! continuation preamble plus the `get_handoff` answer for a typical compact
//! summary). Synthetic Claude Code transcripts of several sizes are
//! generated; `--transcripts DIR` (or `TOKENS_TRANSCRIPTS=DIR`) adds real
//! ones (`*.jsonl`, counted by their bytes: an upper bound).
//!
//! Tokens are estimated as characters / 4, the usual rule of thumb for
//! English and code; the ratio, not the absolute count, is the point.

use std::path::PathBuf;

use handoff::goals::preamble;
use handoff::mcp::tools::HandoffView;
use handoff::mcp::tools::get::{self, GetResult};

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
            handoff_key: key.into(),
            project: "shop".into(),
            repo: Some("acme/shop".into()),
            kind: Some("issue".into()),
            body: TYPICAL_SUMMARY.into(),
            created_by: Some("system:serviceaccount:agents:implement".into()),
            updated_at: Some("2026-11-29T10:00:00Z".into()),
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
}
