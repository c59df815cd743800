//! The findings of issue 29 on hand-written fixtures
//! (`tests/fixtures/transcripts/findings/`, see the README there): each
//! fixture reproduces the record shapes of one finding, and each test reads
//! it as `handoff transcript read` and `handoff rescue` do (the reader, then
//! the rescued body).
//!
//! The turns are compared through their JSON (role, text, mark, agent), the
//! shape `handoff transcript read` prints and the agents tiers consume.

use std::path::{Path, PathBuf};

use handoff_transcript::rescue::{self, DEFAULT_MAX_TOKENS, Source};
use handoff_transcript::{AgentKind, Budget, Locations, Outcome, locate, read_file, read_with};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/transcripts/findings")
        .join(name)
}

fn read(kind: AgentKind, name: &str) -> Outcome {
    let path = fixture(name);
    match read_file(kind, &path, None, Budget::UNLIMITED) {
        Ok(Some(outcome)) => outcome,
        other => panic!("{}: {other:?}", path.display()),
    }
}

/// A turn as `handoff transcript read` prints it: role, text, tools, and
/// the mark and agent when there are any ("" when not).
#[derive(Debug, PartialEq)]
struct Seen {
    role: String,
    text: String,
    tools: Vec<String>,
    mark: String,
    agent: String,
}

fn seen(outcome: &Outcome) -> Vec<Seen> {
    let Ok(Value::Object(json)) = serde_json::to_value(outcome) else {
        panic!("an outcome is an object");
    };
    let field = |turn: &Value, name: &str| turn[name].as_str().unwrap_or_default().to_owned();
    json["turns"]
        .as_array()
        .map(|turns| {
            turns
                .iter()
                .map(|t| Seen {
                    role: field(t, "role"),
                    text: field(t, "text"),
                    tools: t["tools"]
                        .as_array()
                        .map(|tools| {
                            tools
                                .iter()
                                .filter_map(|x| x.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default(),
                    mark: field(t, "mark"),
                    agent: field(t, "agent"),
                })
                .collect()
        })
        .unwrap_or_default()
}

const U: &str = "user";
const A: &str = "assistant";

/// An unmarked turn of `role` as expected, with its tool calls.
fn turn(role: &str, text: &str, tools: &[&str]) -> Seen {
    Seen {
        role: role.to_owned(),
        text: text.to_owned(),
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        mark: String::new(),
        agent: String::new(),
    }
}

/// A turn of `role` marked `mark`, as expected.
fn marked(role: &str, mark: &str, text: &str) -> Seen {
    Seen {
        mark: mark.to_owned(),
        ..turn(role, text, &[])
    }
}

/// The report of the sub-agent `agent`, as expected.
fn sidechain(agent: &str, text: &str) -> Seen {
    Seen {
        agent: agent.to_owned(),
        ..marked(A, "sidechain", text)
    }
}

fn body(kind: AgentKind, outcome: &Outcome) -> String {
    let source = Source {
        agent: kind,
        session: None,
        started: None,
    };
    rescue::body(outcome, source, DEFAULT_MAX_TOKENS)
}

/// The text of one section of a rescued body (`## Name` up to the next).
fn section<'b>(body: &'b str, name: &str) -> &'b str {
    let head = format!("## {name}\n");
    let Some(start) = body.find(&head) else {
        panic!("no {name} section:\n{body}");
    };
    let rest = &body[start + head.len()..];
    rest.find("\n## ").map_or(rest, |end| &rest[..end])
}

#[test]
fn each_fixture_reads_as_its_turns() {
    let cases: [(AgentKind, &str, Vec<Seen>); 5] = [
        // B1: prompts only in event messages, among response-item messages.
        (
            AgentKind::Codex,
            "codex-event-prompts.jsonl",
            vec![
                turn(U, "Count the TODOs in src/.", &[]),
                turn(
                    A,
                    "There are 4 TODOs: 3 in a.rs, 1 in b.rs.",
                    &["[tool] shell: bash -lc grep -rc TODO src/"],
                ),
                turn(U, "Fix the one in b.rs.", &[]),
                turn(
                    A,
                    "Removed the TODO in b.rs.",
                    &["[tool] apply_patch: src/b.rs"],
                ),
                turn(U, "Now run the tests.", &[]),
                turn(A, "All tests pass.", &["[tool] shell: bash -lc cargo test"]),
            ],
        ),
        // B2: a queued message taken back (popAll), edited and delivered.
        (
            AgentKind::Claude,
            "claude-steering-edited.jsonl",
            vec![
                turn(U, "Build the project.", &[]),
                turn(A, "", &["[tool] Bash: make"]),
                turn(U, "Use clang, not gcc.", &[]),
                turn(A, "Switching to clang as you asked.", &[]),
            ],
        ),
        // Codex 0.171.0 records: the sub-agent's message, tool search,
        // image generation, a message between agents, a hook's prompt.
        (
            AgentKind::Codex,
            "codex-newer-records.jsonl",
            vec![
                turn(U, "Review the parser with a helper agent.", &[]),
                turn(
                    A,
                    "",
                    &[
                        "[tool] tool_search: parser review tools",
                        "[tool] spawn_agent: Read src/parser.rs and list its error paths.",
                    ],
                ),
                sidechain(
                    "explorer",
                    "parser.rs has three error paths: EOF, bad token, depth.",
                ),
                turn(
                    A,
                    "The helper found three error paths.",
                    &["[tool] image_generation: a diagram of the parser states"],
                ),
                marked(
                    U,
                    "hook",
                    "Write the handoff before you stop (write_handoff).",
                ),
                turn(A, "Handoff written.", &[]),
            ],
        ),
        // Claude Code 2.1.332: a Task sub-agent's report (not its steps), a
        // Stop hook's feedback, a compaction summary, the /compact command.
        (
            AgentKind::Claude,
            "claude-newer-records.jsonl",
            vec![
                turn(U, "Find why the login test is flaky.", &[]),
                turn(
                    A,
                    "I'll ask a sub-agent to search.",
                    &["[tool] Task: Search for flaky login tests"],
                ),
                sidechain(
                    "Explore",
                    "Report: tests/login.rs::timeout races the mock server; add a readiness wait.",
                ),
                turn(
                    A,
                    "The sub-agent found the race; adding a readiness wait.",
                    &["[tool] Edit: /w/tests/login.rs"],
                ),
                marked(
                    U,
                    "hook",
                    "Stop hook feedback:\n[handoff hook stop]: write the handoff before you stop",
                ),
                turn(
                    A,
                    "Fixed the race in tests/login.rs and wrote the handoff.",
                    &[],
                ),
                marked(
                    U,
                    "summary",
                    "[compaction summary] This session is being continued from a previous \
                     conversation. Summary: the login race is fixed.",
                ),
                marked(U, "command", "/compact"),
            ],
        ),
        // B4: interrupts and shell-mode input after the last answer.
        (
            AgentKind::Claude,
            "claude-interrupted.jsonl",
            vec![
                turn(U, "Set up CI for the workspace.", &[]),
                turn(A, "Setting up CI.", &[]),
                turn(U, "Now make every crate's tests pass, one by one.", &[]),
            ],
        ),
    ];
    for (kind, name, turns) in cases {
        let o = read(kind, name);
        let got = seen(&o);
        // The long tool run of the interrupted session is checked by the
        // rescue test; here its first and last turns.
        let got = if name == "claude-interrupted.jsonl" {
            let mut head: Vec<Seen> = got.into_iter().take(3).collect();
            head.truncate(turns.len());
            head
        } else {
            got
        };
        assert_eq!(got, turns, "{name}: {:#?}", o.turns);
        assert!(o.is_balanced(), "{name}: {o:?}");
        assert_eq!(o.skipped, 0, "{name}: {:?}", o.warnings);
    }
}

/// B5: a Grok CLI session's `chat_history.jsonl`, given as `--file` or
/// found by its session id under `sessions/<URL-encoded cwd>/<id>/`.
#[test]
fn grok_chat_histories_are_read_as_files_and_by_session() {
    let turns = vec![
        turn(U, "Rename the config loader to load_settings.", &[]),
        turn(
            A,
            "I'll find its uses first.\n\nRenamed load_config to load_settings in src/config.rs and \
             src/main.rs.",
            &[
                "[tool] search: load_config",
                "[tool] str_replace_editor: str_replace",
            ],
        ),
    ];
    let file = read(AgentKind::Grok, "grok-chat_history.jsonl");
    assert_eq!(seen(&file), turns, "{file:?}");
    assert!(file.is_balanced() && file.skipped == 0, "{file:?}");

    let home = tempfile::tempdir().expect("tempdir");
    let session = "0b8e4c1e-1f0a-4b7e-9d3a-000000000005";
    let dir = home.path().join("sessions/%2Fwork%2Fapp").join(session);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::copy(
        fixture("grok-chat_history.jsonl"),
        dir.join("chat_history.jsonl"),
    )
    .expect("copy");
    let locations = Locations::default().with_root(AgentKind::Grok, home.path().to_owned());
    let found = read_with(
        &locations,
        AgentKind::Grok,
        session,
        Path::new("/work/app"),
        Budget::UNLIMITED,
    );
    assert_eq!(found.as_ref().map(seen), Some(turns));
    assert_eq!(
        locate(&locations, AgentKind::Grok, session, Path::new("/work/app")),
        Some(dir.join("chat_history.jsonl"))
    );
}

#[test]
fn an_edited_queued_message_is_delivered_as_edited() {
    let o = read(AgentKind::Claude, "claude-steering-edited.jsonl");
    let texts: Vec<&str> = o.turns.iter().map(|t| t.text.as_str()).collect();
    assert!(
        !texts.iter().any(|t| t.contains("Use gcc.")),
        "the message taken back was never delivered: {texts:?}"
    );
}

#[test]
fn interrupts_and_shell_input_are_marked_not_requests() {
    let o = read(AgentKind::Claude, "claude-interrupted.jsonl");
    let tail: Vec<Seen> = seen(&o).into_iter().rev().take(4).rev().collect();
    assert_eq!(
        tail,
        vec![
            marked(U, "interrupt", "[Request interrupted by user for tool use]"),
            marked(U, "interrupt", "[Request interrupted by user]"),
            marked(U, "shell", "$ git status"),
            marked(U, "shell", "On branch main\nnothing to commit")
        ]
    );
}

#[test]
fn record_types_passed_over_are_named_not_unknown() {
    let cases = [
        (
            AgentKind::Claude,
            "claude-newer-records.jsonl",
            &[
                "permission-mode ×1",
                "mode ×1",
                "agent-name ×1",
                "worktree-state ×1",
                "api-request ×1",
                "atis-latch ×1",
                "cost-state ×1",
            ][..],
        ),
        (
            AgentKind::Codex,
            "codex-newer-records.jsonl",
            &[
                "token_usage_record ×1",
                "world_state ×1",
                "item_completed ×2",
                "session_meta ×1",
            ][..],
        ),
    ];
    for (kind, name, names) in cases {
        let o = read(kind, name);
        assert!(
            !o.warnings.iter().any(|w| w.contains("unknown")),
            "{name}: {:?}",
            o.warnings
        );
        let passed = o
            .warnings
            .iter()
            .find(|w| w.contains("passed over"))
            .unwrap_or_else(|| panic!("{name}: no passed-over warning in {:?}", o.warnings));
        for n in names {
            assert!(passed.contains(n), "{name}: {n} not in {passed}");
        }
    }
}

#[test]
fn the_title_and_references_are_what_the_records_say() {
    let o = read(AgentKind::Claude, "claude-newer-records.jsonl");
    let json = serde_json::to_value(&o).unwrap_or_default();
    assert_eq!(json["title"], "Fix flaky login test");
    assert_eq!(
        json["refs"],
        serde_json::json!([
            "pull request: https://github.com/example/app/pull/42",
            "last prompt: Find why the login test is flaky."
        ])
    );
    let body = body(AgentKind::Claude, &o);
    let refs = section(&body, "Refs");
    for want in [
        "- session title: Fix flaky login test",
        "- pull request: https://github.com/example/app/pull/42",
        "- last prompt: Find why the login test is flaky.",
    ] {
        assert!(refs.contains(want), "{want} not in Refs:\n{body}");
    }
}

/// The rescued body: which request is the last, whether it was answered,
/// and which tool calls Done keeps.
#[test]
fn the_rescue_names_the_last_real_request_and_the_newest_calls() {
    // (fixture, the last request, words of State, words State must not
    // hold)
    type Case<'a> = (AgentKind, &'a str, &'a str, &'a [&'a str], &'a [&'a str]);
    let cases: [Case<'_>; 3] = [
        (
            AgentKind::Claude,
            "claude-interrupted.jsonl",
            "Now make every crate's tests pass, one by one.",
            &[
                "got a reply",
                "Every crate's tests pass now",
                "the user interrupted",
                "shell-mode input or output",
            ],
            &["got no reply"],
        ),
        (
            AgentKind::Claude,
            "claude-newer-records.jsonl",
            "Find why the login test is flaky.",
            &[
                "got a reply",
                "Fixed the race in tests/login.rs",
                "a slash command",
            ],
            &["got no reply", "/compact\" got"],
        ),
        (
            AgentKind::Codex,
            "codex-event-prompts.jsonl",
            "Now run the tests.",
            &["got a reply", "All tests pass."],
            &["got no reply"],
        ),
    ];
    for (kind, name, last, words, not) in cases {
        let o = read(kind, name);
        let body = body(kind, &o);
        let next = section(&body, "Next");
        assert!(
            next.contains(&format!("request:\n> {last}\n")) && next.trim_end().ends_with(last),
            "{name}: the last request is {last:?}:\n{body}"
        );
        let state = section(&body, "State");
        for w in words {
            assert!(state.contains(w), "{name}: State lacks {w:?}:\n{body}");
        }
        for w in not {
            assert!(!state.contains(w), "{name}: State holds {w:?}:\n{body}");
        }
    }
}

#[test]
fn done_keeps_the_newest_calls_and_counts_the_older_ones() {
    let o = read(AgentKind::Claude, "claude-interrupted.jsonl");
    let body = body(AgentKind::Claude, &o);
    let done = section(&body, "Done");
    let lines: Vec<&str> = done.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(
        lines.last().copied(),
        Some("- Bash: cargo test --workspace --final-check"),
        "the newest call is last:\n{done}"
    );
    assert!(
        !done.contains("crate-number-00 "),
        "the oldest call is left out:\n{done}"
    );
    // The reader keeps the last 40 calls of a turn (and says so); of those,
    // Done lists what fits and counts the rest.
    let calls: usize = o.turns.iter().map(|t| t.tools.len()).sum();
    assert_eq!(calls, 40, "{:?}", o.warnings);
    let listed = lines.len() - 1;
    let left_out = calls - listed;
    assert_eq!(
        lines.first().copied(),
        Some(format!("- […] {left_out} older calls left out").as_str()),
        "{done}"
    );
}

fn agents_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/transcripts/agents")
        .join(name)
}

/// The transcripts the real CLIs wrote in our scripted sessions
/// (`tests/fixtures/transcripts/agents/`, see the README there): every
/// record is of a known type, and the marked turns are where the CLI put
/// them. (role, text start, mark, agent) per turn.
#[test]
fn the_real_agents_transcripts_read_as_their_sessions() {
    type Case<'a> = (
        AgentKind,
        &'a str,
        &'a [(&'a str, &'a str, &'a str, &'a str)],
    );
    let cases: [Case<'_>; 4] = [
        (
            AgentKind::Claude,
            "claude/session.jsonl",
            &[
                ("user", "Count the TODOs in notes.txt.", "", ""),
                ("assistant", "There are 2 TODOs in notes.txt.", "", ""),
                ("user", "Mark the second one done.", "", ""),
                ("assistant", "Marked the second TODO done.", "", ""),
                ("user", "Ask a sub-agent which TODOs are left.", "", ""),
                ("assistant", "Report: one TODO is left", "", ""),
                (
                    "assistant",
                    "[completed] Agent \"Find remaining TODOs\" finished\n\nThe sub-agent found one TODO left: `TODO one`.",
                    "sidechain",
                    "general-purpose",
                ),
                ("assistant", "ok", "", ""),
                ("user", "Summarize the TODO state.", "", ""),
                ("assistant", "Both TODOs are tracked.", "", ""),
                (
                    "user",
                    "Stop hook feedback:\nWrite the handoff before you stop.",
                    "hook",
                    "",
                ),
                ("assistant", "Handoff noted; stopping now.", "", ""),
                (
                    "user",
                    "[compaction summary] This session is being continued",
                    "summary",
                    "",
                ),
                ("user", "/compact", "command", ""),
            ],
        ),
        (
            AgentKind::Claude,
            "claude/subagent.jsonl",
            &[(
                "assistant",
                "The sub-agent found one TODO left",
                "sidechain",
                "a5fb8bb137fa46ecb",
            )],
        ),
        (
            AgentKind::Codex,
            "codex/rollout.jsonl",
            &[
                ("user", "Write hello into greeting.txt.", "", ""),
                ("assistant", "Wrote greeting.txt.", "", ""),
                ("user", "What does greeting.txt hold?", "", ""),
                ("assistant", "It holds: hello.", "", ""),
                ("user", "Check the greeting once more.", "", ""),
                ("assistant", "Greeting checked.", "", ""),
                ("user", "Write the handoff before you stop.", "hook", ""),
                ("assistant", "Handoff noted; stopping.", "", ""),
            ],
        ),
        (
            AgentKind::Copilot,
            "copilot/events.jsonl",
            &[
                ("user", "Continue the work.", "", ""),
                ("assistant", "Written; stopping.", "", ""),
            ],
        ),
    ];
    for (kind, name, want) in cases {
        let path = agents_fixture(name);
        let o = match read_file(kind, &path, None, Budget::UNLIMITED) {
            Ok(Some(o)) => o,
            other => panic!("{name}: {other:?}"),
        };
        let got: Vec<(String, String, String, String)> = seen(&o)
            .into_iter()
            .map(|t| (t.role, t.text, t.mark, t.agent))
            .collect();
        assert_eq!(got.len(), want.len(), "{name}: {got:#?}");
        for (got, want) in got.iter().zip(want) {
            assert_eq!(
                (got.0.as_str(), got.2.as_str(), got.3.as_str()),
                (want.0, want.2, want.3),
                "{name}: {got:?}"
            );
            assert!(got.1.starts_with(want.1), "{name}: {got:?}");
        }
        assert_eq!(
            o.skipped, 0,
            "{name}: every record is of a known type: {:?}",
            o.warnings
        );
        assert!(o.is_balanced(), "{name}");
    }
}

/// After `/compact` the last request is still the last one the user
/// typed, answered before the compaction.
#[test]
fn the_rescue_of_a_real_compacted_session_names_its_last_request() {
    let path = agents_fixture("claude/session.jsonl");
    let o = match read_file(AgentKind::Claude, &path, None, Budget::UNLIMITED) {
        Ok(Some(o)) => o,
        other => panic!("{other:?}"),
    };
    let body = body(AgentKind::Claude, &o);
    let next = section(&body, "Next");
    assert!(
        next.trim_end()
            .ends_with("Last request:\n> Summarize the TODO state."),
        "{body}"
    );
    let state = section(&body, "State");
    for want in [
        "The last request (\"Summarize the TODO state.\") got a reply",
        "> Handoff noted; stopping now.\n",
        "- hook feedback:",
        "- a slash command: \"/compact\"",
    ] {
        assert!(state.contains(want), "{want:?} not in State:\n{body}");
    }
    assert!(
        section(&body, "Refs").contains("- last prompt: Summarize the TODO state."),
        "{body}"
    );
}

/// Copilot CLI's own `events.jsonl` (agents/copilot) shows its successful
/// `handoff-write_handoff` of the key, and of no other key.
#[test]
fn the_real_copilot_session_shows_its_write() {
    let file = std::fs::read(agents_fixture("copilot/events.jsonl")).expect("the fixture");
    let wrote =
        |key: &str| handoff_transcript::writes::wrote_handoff(AgentKind::Copilot, &file[..], key);
    assert!(wrote("issue-40-resume"));
    assert!(!wrote("issue-40-other"));
}
