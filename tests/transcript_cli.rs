//! `handoff transcript …` as a user runs it.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use handoff_transcript::Outcome;

fn handoff(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_handoff"))
        .arg("transcript")
        .args(args)
        .env_remove("XDG_STATE_HOME")
        .output()
        .unwrap()
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/transcripts")
        .join(name)
        .display()
        .to_string()
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn read_prints_the_outcome_as_json() {
    let file = fixture("codex/rollout.jsonl");
    let out = stdout(&handoff(&["read", "--agent", "codex", "--file", &file]));
    let outcome: Outcome = serde_json::from_str(&out).unwrap();
    assert_eq!(outcome.records, 19);
    assert_eq!(outcome.turns.len(), 2);
}

#[test]
fn read_finds_a_session_under_the_agent_home() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("projects/-work-app");
    fs::create_dir_all(&dir).unwrap();
    fs::copy(fixture("claude/session.jsonl"), dir.join("abc-1.jsonl")).unwrap();
    let home_arg = home.path().display().to_string();
    let args = [
        "read",
        "--agent",
        "claude",
        "--session",
        "abc-1",
        "--cwd",
        "/work/app",
        "--agent-home",
        &home_arg,
    ];
    let outcome: Outcome = serde_json::from_str(&stdout(&handoff(&args))).unwrap();
    assert_eq!(outcome.turns.len(), 4);
}

#[test]
fn read_takes_a_gemini_cli_file_or_session() {
    let file = fixture("agents/gemini/session-0.61.0.jsonl");
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join(".gemini");
    let chats = root.join("tmp/proj/chats");
    fs::create_dir_all(&chats).unwrap();
    fs::write(
        root.join("projects.json"),
        r#"{"projects":{"/tmp/gem/proj":"proj"}}"#,
    )
    .unwrap();
    fs::copy(&file, chats.join("session-2026-12-05T02-20-4cfa479a.jsonl")).unwrap();
    let root_arg = root.display().to_string();
    let session = "4cfa479a-e6f6-4e9e-9523-9081eaaae968";
    let by_file = ["read", "--agent", "gemini", "--file", &file];
    let by_session = [
        "read",
        "--agent",
        "gemini-cli",
        "--session",
        session,
        "--cwd",
        "/tmp/gem/proj",
        "--agent-home",
        &root_arg,
    ];
    for args in [&by_file[..], &by_session[..]] {
        let outcome: Outcome = serde_json::from_str(&stdout(&handoff(args))).unwrap();
        let texts: Vec<&str> = outcome.turns.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(texts, ["say hi", "done."], "{args:?}");
    }
    let logs = home.path().join("logs.json");
    fs::write(
        &logs,
        r#"[{"sessionId":"a","messageId":0,"timestamp":"t","type":"user","message":"fix it"}]"#,
    )
    .unwrap();
    let logs = logs.display().to_string();
    let by_logs = [
        "read",
        "--agent",
        "gemini",
        "--file",
        &logs,
        "--session",
        "a",
    ];
    let outcome: Outcome = serde_json::from_str(&stdout(&handoff(&by_logs))).unwrap();
    assert_eq!(outcome.turns.len(), 1);
    let unnamed = handoff(&["read", "--agent", "gemini", "--file", &logs]);
    let err = String::from_utf8_lossy(&unnamed.stderr);
    assert!(
        !unnamed.status.success() && err.contains("logs.json holds many sessions"),
        "{err}"
    );
}

#[test]
fn build_writes_the_document_and_prints_path_and_message() {
    let state = tempfile::tempdir().unwrap();
    let state_arg = state.path().display().to_string();
    let file = fixture("claude/session.jsonl");
    let out = stdout(&handoff(&[
        "build",
        "--agent",
        "claude",
        "--file",
        &file,
        "--state-dir",
        &state_arg,
        "--task",
        "Allow tabs.",
    ]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let path = Path::new(lines[0]);
    assert!(path.starts_with(state.path()), "{out}");
    assert!(
        lines[1].contains(lines[0]) && lines[1].ends_with("Allow tabs."),
        "{out}"
    );
    let document = fs::read_to_string(path).unwrap();
    assert!(document.contains("Why does the parser reject tabs?"));

    let swept = stdout(&handoff(&[
        "sweep",
        "--max-age",
        "1d",
        "--state-dir",
        &state_arg,
    ]));
    assert_eq!(swept, "", "a fresh document is not swept");
    assert!(path.exists());
}

#[test]
fn bad_input_is_refused_with_the_flag_named() {
    let cases: [(&[&str], &str); 5] = [
        (&["read", "--agent", "cursor", "--session", "s"], "--agent"),
        (
            &["read", "--agent", "claude", "--file", "/nonexistent.jsonl"],
            "--file /nonexistent.jsonl: no such file",
        ),
        (&["sweep", "--max-age", "tomorrow"], "--max-age"),
        (&["read", "--agent", "grok", "--file", "/tmp"], "--file"),
        (
            &[
                "read",
                "--agent",
                "codex",
                "--session",
                "nope",
                "--agent-home",
                "/nonexistent",
            ],
            "no Codex transcript of session nope under /nonexistent",
        ),
    ];
    for (args, want) in cases {
        let output = handoff(args);
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}
