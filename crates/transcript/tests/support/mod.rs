//! Helpers of the transcript suites, shared by the crate's test binaries
//! and by the `it` suite's hooks tests (which include this file): where
//! the fixtures are, and a Grok CLI database to read.

#![allow(dead_code)] // each suite uses a different subset

use std::path::{Path, PathBuf};

use rusqlite::Connection;

/// The work tree: the nearest directory above the crate that holds
/// `Cargo.lock` (this file serves crates at different depths).
pub(crate) fn work_tree() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())
        .expect("the work tree holds Cargo.lock")
        .to_path_buf()
}

/// A hand-written transcript fixture (`tests/fixtures/transcripts`).
pub(crate) fn fixture(name: &str) -> PathBuf {
    work_tree().join("tests/fixtures/transcripts").join(name)
}

/// The shared third-party transcripts, `../shared/fixtures/transcripts`
/// beside the work tree (see its SOURCES.md): read in place, never copied
/// into the project, and expected locally and in CI, so their absence is a
/// failure rather than a silent skip.
pub(crate) fn shared_dir() -> PathBuf {
    let dir = work_tree().join("../shared/fixtures/transcripts");
    assert!(
        dir.is_dir(),
        "the shared third-party transcripts are missing: expected them at {} \
         (../shared/fixtures/transcripts beside the work tree)",
        dir.display()
    );
    dir
}

/// Checks that `got` holds one warning per `want`, each containing its
/// words, in order.
pub(crate) fn assert_warnings(name: &str, got: &[String], want: &[&str]) {
    assert_eq!(got.len(), want.len(), "{name}: {got:#?}");
    for (got, want) in got.iter().zip(want) {
        assert!(
            got.contains(want),
            "{name}: {got:?} should contain {want:?}"
        );
    }
}

/// A database with Grok CLI's schema: two sessions, interleaved.
pub(crate) fn grok_db(path: &Path) {
    let db = Connection::open(path).unwrap();
    db.execute_batch(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, model TEXT NOT NULL) STRICT;
         CREATE TABLE messages (
           session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
           seq INTEGER NOT NULL,
           role TEXT NOT NULL,
           message_json TEXT NOT NULL,
           created_at TEXT NOT NULL,
           PRIMARY KEY (session_id, seq)
         ) STRICT;
         INSERT INTO sessions VALUES ('sess-a', 'grok-4'), ('sess-b', 'grok-4');",
    )
    .unwrap();
    let rows: [(&str, i64, &str, &str); 9] = [
        (
            "sess-a",
            1,
            "system",
            r#"{"role":"system","content":"You are Grok."}"#,
        ),
        (
            "sess-b",
            1,
            "user",
            r#"{"role":"user","content":"Another session"}"#,
        ),
        (
            "sess-a",
            2,
            "user",
            r#"{"role":"user","content":"Run the tests"}"#,
        ),
        (
            "sess-a",
            3,
            "assistant",
            r#"{"role":"assistant","content":[{"type":"reasoning","text":"npm test, probably"},{"type":"text","text":"Running them."},{"type":"tool-call","toolCallId":"c1","toolName":"bash","input":{"command":"npm test"}}]}"#,
        ),
        (
            "sess-a",
            4,
            "tool",
            r#"{"role":"tool","content":[{"type":"tool-result","toolCallId":"c1","toolName":"bash","output":{"type":"json","value":{"success":true,"output":"12 passing"}}}]}"#,
        ),
        (
            "sess-a",
            6,
            "user",
            r#"{"role":"user","content":[{"type":"text","text":"Ship it"},{"type":"image","image":"aGk="},{"type":"file","filename":"notes.txt","data":"aGk=","mediaType":"text/plain"}]}"#,
        ),
        (
            "sess-a",
            5,
            "assistant",
            r#"{"role":"assistant","content":[{"type":"text","text":"All 12 tests pass."}]}"#,
        ),
        ("sess-a", 7, "assistant", "not json"),
        (
            "sess-b",
            2,
            "assistant",
            r#"{"role":"assistant","content":"Other"}"#,
        ),
    ];
    for (session, seq, role, json) in rows {
        db.execute(
            "INSERT INTO messages VALUES (?1, ?2, ?3, ?4, '2025-06-01T00:00:00Z')",
            (session, seq, role, json),
        )
        .unwrap();
    }
}
