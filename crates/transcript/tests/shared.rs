//! Checks the readers against the public third-party transcripts in
//! `../shared/fixtures/transcripts` (see its SOURCES.md). They are read in
//! place and never copied into the project. The directory is expected next
//! to the work tree, locally and in CI: when it is missing, this test fails
//! rather than skip silently.

mod support;

use handoff_transcript::{AgentKind, Budget, Outcome, read_file};
use support::{assert_warnings, shared_dir};

fn read(kind: AgentKind, name: &str) -> (Outcome, usize) {
    let path = shared_dir().join(name);
    let lines = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
        .lines()
        .count();
    let outcome = read_file(kind, &path, None, Budget::UNLIMITED)
        .unwrap()
        .unwrap_or_else(|| panic!("{} not found", path.display()));
    (outcome, lines)
}

/// What one shared transcript reads as.
struct Expect {
    kind: AgentKind,
    file: &'static str,
    turns: usize,
    used: usize,
    ignored: usize,
    skipped: usize,
    /// Words each warning holds, in order.
    warnings: &'static [&'static str],
}

const fn expect(
    kind: AgentKind,
    file: &'static str,
    (turns, used, ignored, skipped): (usize, usize, usize, usize),
    warnings: &'static [&'static str],
) -> Expect {
    Expect {
        kind,
        file,
        turns,
        used,
        ignored,
        skipped,
        warnings,
    }
}

#[test]
fn shared_transcripts_read_as_expected() {
    use AgentKind::{Claude, Codex};
    let cases = [
        expect(
            Claude,
            "claude/representative_messages.jsonl",
            (7, 9, 3, 0),
            &["passed over (summary ×1)"],
        ),
        expect(
            Claude,
            "claude/sidechain_integrated.jsonl",
            (3, 3, 3, 0),
            &["3 sidechain"],
        ),
        expect(
            Claude,
            "claude/dag_compact_after_rewind.jsonl",
            (11, 11, 1, 0),
            &["1 compaction", "passed over (system ×1)"],
        ),
        expect(Claude, "claude/system_reminder.jsonl", (2, 2, 1, 0), &[]),
        expect(
            Claude,
            "claude/sample_session.jsonl",
            (4, 5, 3, 0),
            &["passed over (summary ×1)"],
        ),
        expect(
            Codex,
            "codex/rollout-synthetic-all-types.jsonl",
            (2, 5, 8, 1),
            &[
                "1 encrypted reasoning",
                "future_synthetic_record",
                "passed over (custom_tool_call_output ×1, function_call_output ×2, session_meta ×1, turn_context ×1)",
            ],
        ),
        expect(
            Codex,
            "codex/rollout-malformed.jsonl",
            (1, 1, 1, 1),
            &[
                "not valid JSON",
                "1 message was read from an event record",
                "passed over (session_meta ×1)",
            ],
        ),
        expect(
            Codex,
            "codex/sample_codex_session.jsonl",
            (2, 2, 1, 0),
            &["passed over (session_meta ×1)"],
        ),
    ];
    for case in cases {
        let name = case.file;
        let (o, lines) = read(case.kind, name);
        assert_eq!(o.records, lines, "{name}: every line is a record");
        assert!(o.is_balanced(), "{name}");
        assert_eq!(
            (o.turns.len(), o.used, o.ignored, o.skipped),
            (case.turns, case.used, case.ignored, case.skipped),
            "{name}: turns, used, ignored, skipped"
        );
        assert_warnings(name, &o.warnings, case.warnings);
    }
}

#[test]
fn shared_transcripts_keep_what_matters() {
    let (claude, _) = read(AgentKind::Claude, "claude/system_reminder.jsonl");
    assert_eq!(
        claude.turns[0].text,
        "Please review the change.\n\n# Project notes\nThe tail content still renders as user text."
    );
    let (sample, _) = read(AgentKind::Claude, "claude/sample_session.jsonl");
    assert_eq!(
        sample.turns[1].tools,
        [
            "[tool] Write: /project/hello.py",
            "[tool] Bash: git add . && git commit -m 'Add hello function'"
        ]
    );
    let (codex, _) = read(AgentKind::Codex, "codex/rollout-synthetic-all-types.jsonl");
    let text = serde_json::to_string(&codex).unwrap();
    assert!(!text.contains("SYNTHETIC_ENCRYPTED_CONTENT_MUST_NOT_RENDER"));
    assert_eq!(codex.turns[0].text, "List the synthetic files.");
    assert_eq!(
        codex.turns[1].tools,
        [
            "[tool] exec_command: find . -maxdepth 1 -type f",
            "[tool] apply_patch: gamma.txt",
            "[tool] mcp__synthetic__lookup: fixture"
        ]
    );
}
