//! Properties of the readers: arbitrary bytes and arbitrary JSON lines never
//! panic, every line is accounted for (used, ignored or skipped), and the
//! budget holds.

use std::io::Write;

use handoff_transcript::budget::turn_bytes;
use handoff_transcript::{AgentKind, Budget, Outcome, linearize, read_file};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Lines as the readers count them: split on '\n', a final piece without
/// newline counting when it is not empty.
fn line_count(bytes: &[u8]) -> usize {
    let pieces = bytes.split(|&b| b == b'\n').count();
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        pieces - 1
    } else {
        pieces
    }
}

/// Checks the accounting and the budget. Each turn comes from a used
/// record of its own, except in Gemini CLI sessions: one checkpoint line
/// holds many messages, and one message is both a sub-agent's call and
/// its report.
fn check(
    kind: AgentKind,
    outcome: &Outcome,
    lines: usize,
    budget: Budget,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(outcome.records, lines);
    prop_assert!(outcome.is_balanced(), "{:?}", outcome);
    if kind != AgentKind::Gemini {
        prop_assert!(outcome.turns.len() <= outcome.used);
    }
    if let Some(max) = budget.max_turns {
        prop_assert!(outcome.turns.len() <= max);
    }
    if let Some(max) = budget.max_bytes {
        let bytes: usize = outcome.turns.iter().map(turn_bytes).sum();
        prop_assert!(bytes <= max, "{} > {}", bytes, max);
    }
    Ok(())
}

fn budget() -> impl Strategy<Value = Budget> {
    (0usize..6, prop_oneof![Just(0usize), 1usize..400]).prop_map(|(t, b)| Budget::new(t, b))
}

/// Bytes biased towards JSON punctuation and newlines.
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        any::<u8>(),
        prop::sample::select(b"{}[]\":,\n \\tu0".to_vec()),
    ];
    prop::collection::vec(byte, 0..1500)
}

/// Field names and type names the readers look for.
const KEYS: &[&str] = &[
    "type",
    "role",
    "content",
    "message",
    "payload",
    "text",
    "name",
    "toolName",
    "input",
    "arguments",
    "isSidechain",
    "isMeta",
    "isCompactSummary",
    "subtype",
    "command",
    "action",
    "encrypted_content",
    "record_type",
    "id",
    "filename",
    "toolCallName",
    "toolCall",
    "$set",
    "$rewindTo",
    "toolCalls",
    "functionResponse",
];
const WORDS: &[&str] = &[
    "user",
    "assistant",
    "system",
    "summary",
    "developer",
    "tool",
    "text",
    "tool_use",
    "tool_result",
    "thinking",
    "image",
    "message",
    "response_item",
    "event_msg",
    "compacted",
    "session_meta",
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "reasoning",
    "user_message",
    "agent_message",
    "tool-call",
    "tool_call",
    "compact_boundary",
    "input_text",
    "output_text",
    "<environment_context>",
    "<system-reminder>x</system-reminder>",
    "{\"command\":\"ls\"}",
    "gemini",
    "<hook_context>h</hook_context>",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        prop::sample::select(WORDS).prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(KEYS).prop_map(str::to_owned),
        1 => "[a-z]{1,6}",
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// An object of the given fields, whose values may also be anything.
fn object(fields: Vec<(&'static str, Value)>) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// One of `words`, as a JSON string.
fn one_of(words: &[&'static str]) -> impl Strategy<Value = Value> + use<> {
    prop::sample::select(words.to_vec()).prop_map(Value::from)
}

/// A flag: mostly absent or false, sometimes true, sometimes anything.
fn flag() -> impl Strategy<Value = Value> {
    prop_oneof![3 => Just(Value::Bool(false)), 1 => Just(Value::Bool(true)), 1 => leaf()]
}

/// A text, mostly a string.
fn text() -> impl Strategy<Value = Value> {
    prop_oneof![3 => any::<String>().prop_map(Value::from), 1 => leaf()]
}

/// A content block or part of one of the formats.
fn block() -> impl Strategy<Value = Value> {
    let kinds = [
        "text",
        "text",
        "tool_use",
        "tool-call",
        "thinking",
        "reasoning",
        "image",
        "input_text",
        "output_text",
        "tool_result",
        "file",
        "mystery",
    ];
    (one_of(&kinds), text(), text(), value()).prop_map(|(kind, text, name, input)| {
        object(vec![
            ("type", kind),
            ("text", text),
            ("name", name.clone()),
            ("toolName", name),
            ("input", input),
        ])
    })
}

/// Message content: a string, blocks, or anything.
fn content() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => prop::collection::vec(block(), 0..5).prop_map(Value::Array),
        1 => text(),
        1 => value(),
    ]
}

/// Records shaped like each format's, with arbitrary values inside.
fn shaped() -> impl Strategy<Value = Value> {
    let claude_types = [
        "user",
        "assistant",
        "user",
        "assistant",
        "system",
        "summary",
        "x",
    ];
    let codex_types = [
        "response_item",
        "response_item",
        "event_msg",
        "compacted",
        "turn_context",
    ];
    let items = [
        "message",
        "message",
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "reasoning",
        "user_message",
        "agent_message",
        "x",
    ];
    let roles = ["user", "assistant", "developer", "system", "tool", "x"];
    let claude = (one_of(&claude_types), content(), flag(), flag(), flag()).prop_map(
        |(kind, content, sidechain, meta, summary)| {
            object(vec![
                ("type", kind),
                ("isSidechain", sidechain),
                ("isMeta", meta),
                ("isCompactSummary", summary),
                ("message", object(vec![("content", content)])),
            ])
        },
    );
    let codex = (
        one_of(&codex_types),
        one_of(&items),
        one_of(&roles),
        content(),
        text(),
    )
        .prop_map(|(kind, item, role, content, message)| {
            object(vec![
                ("type", kind),
                (
                    "payload",
                    object(vec![
                        ("type", item),
                        ("role", role),
                        ("content", content),
                        ("message", message.clone()),
                        ("arguments", message),
                    ]),
                ),
            ])
        });
    let grok = (one_of(&roles), content())
        .prop_map(|(role, content)| object(vec![("role", role), ("content", content)]));
    let copilot_types = [
        "user.message",
        "assistant.message",
        "assistant.message",
        "tool.execution_complete",
        "subagent.started",
        "subagent.failed",
        "hook.end",
        "session.compaction_complete",
        "x",
    ];
    let copilot = (
        one_of(&copilot_types),
        text(),
        value(),
        text(),
        prop::option::of(text()),
    )
        .prop_map(|(kind, content, requests, call, agent)| {
            let mut event = vec![
                ("type", kind),
                (
                    "data",
                    object(vec![
                        ("content", content.clone()),
                        ("toolRequests", requests),
                        ("toolCallId", call),
                        ("result", object(vec![("content", content.clone())])),
                        (
                            "output",
                            object(vec![("decision", json!("block")), ("reason", content)]),
                        ),
                    ]),
                ),
            ];
            if let Some(agent) = agent {
                event.push(("agentId", agent));
            }
            object(event)
        });
    // Boxed: one strategy type per format keeps the generator's frames
    // small (unboxed, the nested types overflowed a test thread's stack).
    prop_oneof![
        claude.boxed(),
        codex.boxed(),
        grok.boxed(),
        copilot.boxed(),
        gemini().boxed(),
    ]
}

/// Ids of Gemini CLI messages: few, so that updates and rewinds meet.
const GEMINI_IDS: [&str; 3] = ["a", "b", "c"];

/// A Gemini CLI message, with a tool call.
fn gemini_message() -> impl Strategy<Value = Value> {
    let kinds = ["user", "gemini", "gemini", "info", "x"];
    (
        one_of(&GEMINI_IDS),
        one_of(&kinds),
        content(),
        value(),
        text(),
    )
        .prop_map(|(id, kind, content, args, name)| {
            let call = object(vec![
                ("name", name.clone()),
                ("args", args),
                ("status", Value::from("success")),
                ("result", content.clone()),
                ("agentId", name),
            ]);
            object(vec![
                ("id", id),
                ("type", kind),
                ("content", content),
                ("toolCalls", Value::Array(vec![call])),
            ])
        })
}

/// A Gemini CLI session line: a message, a checkpoint, a rewind or a
/// header.
fn gemini() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => gemini_message(),
        1 => prop::collection::vec(gemini_message(), 0..4).prop_map(|messages| {
            object(vec![("$set", object(vec![("messages", Value::Array(messages))]))])
        }),
        1 => one_of(&["a", "b", "c", "z"]).prop_map(|id| object(vec![("$rewindTo", id)])),
        1 => one_of(&["main", "subagent"]).prop_map(|kind| {
            object(vec![
                ("sessionId", Value::from("s")),
                ("projectHash", Value::from("h")),
                ("kind", kind),
            ])
        }),
    ]
}

/// A record: mostly shaped like a real one, sometimes anything.
fn record() -> impl Strategy<Value = Value> {
    prop_oneof![3 => shaped(), 1 => value()]
}

fn json_lines() -> impl Strategy<Value = String> {
    prop::collection::vec(record(), 0..24).prop_map(|records| {
        records
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_are_accounted_for(bytes in bytes(), budget in budget()) {
        for kind in AgentKind::ALL {
            let outcome = linearize(kind, bytes.as_slice(), budget);
            check(kind, &outcome, line_count(&bytes), budget)?;
        }
    }

    #[test]
    fn arbitrary_json_lines_are_accounted_for(text in json_lines(), budget in budget()) {
        for kind in AgentKind::ALL {
            let outcome = linearize(kind, text.as_bytes(), budget);
            check(kind, &outcome, line_count(text.as_bytes()), budget)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn arbitrary_grok_session_files_are_accounted_for(
        messages in prop::collection::vec(record(), 0..16),
        budget in budget(),
    ) {
        let mut file = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
        let document = serde_json::json!({ "id": "s", "messages": messages });
        file.write_all(document.to_string().as_bytes()).unwrap();
        let outcome = read_file(AgentKind::Grok, file.path(), None, budget).unwrap().unwrap();
        check(AgentKind::Grok, &outcome, messages.len(), budget)?;
    }

    #[test]
    fn arbitrary_gemini_session_documents_are_accounted_for(
        messages in prop::collection::vec(prop_oneof![gemini_message(), record()], 0..16),
        budget in budget(),
    ) {
        let mut file = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
        let document = serde_json::json!({ "sessionId": "s", "messages": messages });
        file.write_all(document.to_string().as_bytes()).unwrap();
        let outcome = read_file(AgentKind::Gemini, file.path(), None, budget).unwrap().unwrap();
        check(AgentKind::Gemini, &outcome, messages.len(), budget)?;
    }
}

#[test]
fn line_count_cases() {
    let cases: [(&[u8], usize); 6] = [
        (b"", 0),
        (b"a", 1),
        (b"a\n", 1),
        (b"\n", 1),
        (b"a\n\nb", 3),
        (b"a\nb\n", 2),
    ];
    for (bytes, want) in cases {
        assert_eq!(line_count(bytes), want, "{bytes:?}");
    }
}
