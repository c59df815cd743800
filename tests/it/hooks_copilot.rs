//! Copilot CLI's hooks without the CLI: the shipped wiring
//! (`examples/copilot/`) names Copilot's events and our commands, and
//! `handoff hook … --agent copilot` answers Copilot's payloads (camelCase,
//! no transcript path, as the agents tier recorded them from Copilot CLI
//! 1.0.102) against the real apiserver. `tests/agents_copilot.rs` runs the
//! real CLI.

use crate::common::{assert_contains, env, parses};
use crate::hooks::fed;

use std::path::Path;
use std::process::Command;

use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_testkit::spec::{Fields, spec};
use kube::api::Api;
use serde_json::{Value, json};

fn read_json(path: &str) -> Value {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"))
}

/// Copilot's events with command hooks, and ours for the ones wired.
const WIRED: [(&str, &str); 3] = [
    ("sessionStart", "session-start"),
    ("agentStop", "stop"),
    ("sessionEnd", "session-end"),
];

#[test]
fn the_copilot_wiring_names_its_events_and_our_commands() {
    let what = "examples/copilot/hooks.json";
    let hooks = read_json(what);
    assert_eq!(hooks["version"], 1, "{what}: the format's version");
    let events = hooks["hooks"].as_object().expect("hooks");
    let wired: Vec<&str> = events.keys().map(String::as_str).collect();
    let mut want: Vec<&str> = WIRED.iter().map(|(event, _)| *event).collect();
    want.sort_unstable();
    assert_eq!(wired, want, "{what}");
    for (event, ours) in WIRED {
        for handler in events[event].as_array().expect("a list") {
            let keys: Vec<&str> = handler
                .as_object()
                .expect("a handler")
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(keys, ["bash", "timeoutSec", "type"], "{what}: {event}");
            assert_eq!(handler["type"], "command", "{what}: {event}");
            let command = handler["bash"].as_str().expect("bash");
            let words: Vec<&str> = command.split_whitespace().collect();
            assert_eq!(
                words,
                ["handoff", "hook", ours, "--agent", "copilot"],
                "{what}: {event}"
            );
            parses(what, &words[1..]);
        }
    }

    let what = "examples/copilot/mcp-config.json";
    let server = &read_json(what)["mcpServers"]["handoff"];
    assert_eq!(server["type"], "local", "{what}");
    assert_eq!(server["command"], "handoff", "{what}");
    assert_eq!(
        server["env"],
        json!({"KUBECONFIG": "${KUBECONFIG}"}),
        "{what}"
    );
    let args: Vec<&str> = server["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    parses(what, &args);
}

/// Runs `handoff hook <event> --agent copilot` for `key` with `payload` on
/// stdin, Copilot's home at `home`, the admin kubeconfig in `namespace`:
/// its stdout (JSON, or Null when empty).
fn hook(home: &Path, namespace: &str, event: &str, key: &str, payload: &Value) -> Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_handoff"));
    cmd.args(["hook", event, "--agent", "copilot", "--project", "shop"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("COPILOT_HOME", home)
        .env("KUBECONFIG", env().kubeconfig_path())
        .env("HANDOFF_NAMESPACE", namespace)
        .env("CONVERSATION_OBJECT_KEY", key);
    let out = fed(&mut cmd, payload)
        .wait_with_output()
        .expect("hook output");
    assert!(out.status.success(), "a hook never fails the session");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.trim().is_empty() {
        return Value::Null;
    }
    serde_json::from_str(stdout.trim()).unwrap_or_else(|_| json!(stdout.trim()))
}

async fn stored(namespace: &str, key: &str) -> Option<Handoff> {
    Api::<Handoff>::namespaced(env().client().await, namespace)
        .get_opt(&name_for_key(key))
        .await
        .expect("get handoff")
}

/// One Copilot event line.
fn event(kind: &str, data: Value) -> String {
    json!({"type": kind, "data": data, "id": "e", "parentId": null,
        "timestamp": jiff::Timestamp::now().to_string()})
    .to_string()
}

/// sessionStart answers the handoff as top-level `additionalContext` (the
/// shape Copilot reads); sessionEnd, given only `sessionId`, finds the
/// session's `events.jsonl` under `COPILOT_HOME` and rescues from it.
#[tokio::test]
async fn copilot_payloads_start_with_the_handoff_and_end_with_a_rescue() {
    let namespace = env().namespace("hooks-copilot").await;
    let home = tempfile::tempdir().expect("tempdir");
    let session = "3d2d1305-aca8-4770-96f1-b46f7d94ceb8";
    let started = json!({"sessionId": session, "timestamp": 1_796_440_021_993_i64,
        "cwd": "/work", "source": "new", "initialPrompt": "Fix the parser."});

    let out = hook(home.path(), &namespace, "session-start", "cp#1", &started);
    assert_eq!(out, Value::Null, "no handoff yet: nothing to add");
    handoff_kube::store::HandoffStore::new(env().client().await, &namespace)
        .write(&spec("cp#1").body("## State\nThe parser takes tabs."))
        .await
        .expect("agent write");
    let out = hook(home.path(), &namespace, "session-start", "cp#1", &started);
    let context = out["additionalContext"]
        .as_str()
        .unwrap_or_else(|| panic!("{out}"));
    assert_contains(context, &["cp#1", "The parser takes tabs."]);
    assert!(out.get("hookSpecificOutput").is_none(), "{out}");

    let ended = json!({"sessionId": session, "timestamp": 1_796_440_023_551_i64,
        "cwd": "/work", "reason": "complete"});
    let dir = home.path().join("session-state").join(session);
    std::fs::create_dir_all(&dir).expect("session dir");
    let lines = [
        event("session.start", json!({"sessionId": session})),
        event(
            "user.message",
            json!({"content": "Make the lexer take tabs."}),
        ),
        event(
            "assistant.message",
            json!({"content": "The lexer takes tabs now.",
            "toolRequests": [{"toolCallId": "c1", "name": "bash",
                "arguments": {"command": "cargo test lexer"}}]}),
        ),
        event(
            "hook.start",
            json!({"hookType": "sessionEnd", "input": ended}),
        ),
    ];
    std::fs::write(dir.join("events.jsonl"), lines.join("\n") + "\n").expect("events");
    let out = hook(home.path(), &namespace, "session-end", "cp#2", &ended);
    let notice = out["systemMessage"]
        .as_str()
        .unwrap_or_else(|| panic!("{out}"));
    assert!(notice.ends_with("(created)"), "{notice}");
    let rescued = stored(&namespace, "cp#2").await.expect("rescued");
    assert_contains(
        &rescued.spec.body,
        &[
            "from a Copilot CLI transcript",
            session,
            "Make the lexer take tabs.",
            "The lexer takes tabs now.",
            "bash: cargo test lexer",
        ],
    );
}
