//! `handoff hook <event>` and `handoff rescue`, run as the agents run them
//! (the event's JSON on stdin, shaped as Claude Code's and Codex's hook
//! references document it), through the real bridge process over HTTP or
//! with the kubeconfig, against the real kube-apiserver.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::agents::{Served, served, writer_token};
use common::{Bridge, agent_token, apply_agent_roles, call, env, ok};
use handoff::hook::stop_reason;
use handoff_core::api::naming::name_for_key;
use handoff_core::api::{Handoff, HandoffSpec};
use handoff_testkit::spec::{Fields, spec};
use handoff_transcript::rescue::{RESCUE_MARK, approx_tokens};
use kube::api::Api;
use serde_json::{Value, json};

/// How a hook process reaches handoff.
enum Via<'a> {
    /// The bridge, with the token in a file (and for https, a CA file).
    Bridge {
        url: &'a str,
        token_file: &'a Path,
        ca: Option<&'a Path>,
    },
    /// The admin kubeconfig, in a namespace.
    Kubeconfig { namespace: String },
}

/// A fresh namespace named after `prefix`, and the kubeconfig way into it.
async fn kubeconfig_in(prefix: &str) -> (String, Via<'static>) {
    let namespace = env().namespace(prefix).await;
    let via = Via::Kubeconfig {
        namespace: namespace.clone(),
    };
    (namespace, via)
}

/// Writes `spec` as the admin: a handoff an agent wrote.
async fn agent_write(namespace: &str, spec: &HandoffSpec) {
    handoff_kube::store::HandoffStore::new(env().client().await, namespace)
        .write(spec)
        .await
        .expect("agent write");
}

fn handoff_command(via: &Via<'_>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_handoff"));
    for var in [
        "HANDOFF_MCP_URL",
        "HANDOFF_TOKEN",
        "HANDOFF_TOKEN_FILE",
        "HANDOFF_NAMESPACE",
        "HANDOFF_PROFILE",
        "HANDOFF_PROJECT",
        "HANDOFF_REPO",
        "HANDOFF_KIND",
        "CONVERSATION_OBJECT_KEY",
    ] {
        cmd.env_remove(var);
    }
    match via {
        Via::Bridge {
            url,
            token_file,
            ca,
        } => {
            cmd.env("HANDOFF_MCP_URL", url)
                .env("HANDOFF_TOKEN_FILE", token_file)
                .env("KUBECONFIG", "/nonexistent/kubeconfig")
                .env_remove("HANDOFF_CA_FILE");
            if let Some(ca) = ca {
                cmd.env("HANDOFF_CA_FILE", ca);
            }
        }
        Via::Kubeconfig { namespace } => {
            cmd.env("KUBECONFIG", env().kubeconfig_path())
                .env("HANDOFF_NAMESPACE", namespace);
        }
    }
    cmd
}

/// Runs `handoff hook <event> --agent <agent>` for `key` with `payload` on
/// stdin: (exit success, stdout JSON or Null when empty, stderr).
fn hook(
    via: &Via<'_>,
    agent: &str,
    event: &str,
    key: &str,
    payload: &Value,
) -> (bool, Value, String) {
    let child = fed(
        handoff_command(via)
            .args(["hook", event, "--agent", agent, "--project", "shop"])
            .env("CONVERSATION_OBJECT_KEY", key),
        payload,
    );
    let out = child.wait_with_output().expect("hook output");
    let json = stdout_json(&out);
    (
        out.status.success(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts that a hook's answer is the plain line of a rescue that found
/// nothing new to write.
fn unchanged(out: &Value) {
    let line = out.as_str().expect("a plain line");
    assert!(line.ends_with("(unchanged)"), "{out}");
}

/// Spawns the hook `cmd` with piped stdio and `payload` written to its
/// stdin, which is closed then, as an agent does.
pub(crate) fn fed(cmd: &mut Command, payload: &Value) -> std::process::Child {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("handoff hook runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(payload.to_string().as_bytes())
        .expect("payload");
    child
}

fn rescue(via: &Via<'_>, args: &[&str]) -> Output {
    handoff_command(via)
        .arg("rescue")
        .args(args)
        .output()
        .expect("handoff rescue runs")
}

/// `rescue`'s arguments for `agent`'s transcript `file`, written to `key`
/// in project shop.
fn rescue_args<'a>(agent: &'a str, file: &'a str, key: &'a str) -> [&'a str; 8] {
    [
        "--agent",
        agent,
        "--file",
        file,
        "--key",
        key,
        "--project",
        "shop",
    ]
}

fn rescue_json(via: &Via<'_>, args: &[&str]) -> Value {
    let out = rescue(via, args);
    assert!(
        out.status.success(),
        "rescue {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("rescue prints JSON")
}

// The payloads, shaped as the references document them (docs/agents.md
// cites the pages): Claude Code's common fields plus each event's own.

fn claude(event: &str, transcript: &Path, extra: Value) -> Value {
    let mut payload = json!({
        "session_id": "abc123",
        "transcript_path": transcript,
        "cwd": "/work",
        "permission_mode": "default",
        "hook_event_name": event,
    });
    merge(&mut payload, extra);
    payload
}

// Codex's common fields (session_id, transcript_path, cwd, hook_event_name,
// model) plus each event's own (turn_id on turn-scoped events).
fn codex(event: &str, transcript: &Path, extra: Value) -> Value {
    let mut payload = json!({
        "session_id": "0199a213-81c0-7800-8aa1-bbab2a035a53",
        "transcript_path": transcript,
        "cwd": "/work",
        "hook_event_name": event,
        "model": "gpt-5-codex",
    });
    merge(&mut payload, extra);
    payload
}

fn merge(payload: &mut Value, extra: Value) {
    if let (Some(p), Value::Object(e)) = (payload.as_object_mut(), extra) {
        p.extend(e);
    }
}

/// A Claude Code transcript whose session began `ago` seconds before now.
fn claude_transcript(dir: &Path, ago: i64) -> PathBuf {
    let t = (jiff::Timestamp::now() - jiff::SignedDuration::from_secs(ago)).to_string();
    let lines = [
        json!({"type": "user", "timestamp": t, "sessionId": "abc123", "cwd": "/work", "uuid": "u1",
            "message": {"role": "user", "content": "Wire --format into the CLI"}}),
        json!({"type": "assistant", "timestamp": t, "sessionId": "abc123", "uuid": "u2",
            "message": {"id": "m1", "role": "assistant", "content": [
                {"type": "text", "text": "Added the flag; the README still needs it."},
                {"type": "tool_use", "id": "t1", "name": "Edit", "input": {"file_path": "src/cli.rs"}},
                {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "cargo test"}}]}}),
    ];
    write_lines(&dir.join(format!("claude{ago}.jsonl")), &lines)
}

/// A Codex rollout whose session began `ago` seconds before now.
fn codex_transcript(dir: &Path, ago: i64) -> PathBuf {
    let t = (jiff::Timestamp::now() - jiff::SignedDuration::from_secs(ago)).to_string();
    let lines = [
        json!({"timestamp": t, "type": "session_meta", "payload": {"id": "0199a213", "timestamp": t, "cwd": "/work"}}),
        json!({"timestamp": t, "type": "response_item", "payload": {"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "Fix the flaky import test"}]}}),
        json!({"timestamp": t, "type": "response_item", "payload": {"type": "function_call", "name": "shell",
            "arguments": "{\"command\":[\"cargo\",\"test\",\"import\"]}", "call_id": "c1"}}),
        json!({"timestamp": t, "type": "response_item", "payload": {"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "The race is in the temp dir; fixing."}]}}),
    ];
    write_lines(&dir.join(format!("rollout{ago}.jsonl")), &lines)
}

fn write_lines(path: &Path, lines: &[Value]) -> PathBuf {
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(path, text.join("\n") + "\n").expect("transcript");
    path.to_owned()
}

async fn stored(namespace: &str, key: &str) -> Option<Handoff> {
    Api::<Handoff>::namespaced(env().client().await, namespace)
        .get_opt(&name_for_key(key))
        .await
        .expect("get handoff")
}

fn write(key: &str, body: &str) -> Value {
    call(
        "write_handoff",
        json!({"handoff_key": key, "project": "shop", "kind": "issue", "body": body}),
    )
}

/// A scripted Claude Code session end to end through the real bridge:
/// session-start injects the existing handoff; stop blocks while none was
/// written in this session, then passes after a write_handoff; session-end
/// rescues when the agent never wrote one, and a second session-end
/// changes nothing.
#[tokio::test]
async fn a_scripted_claude_code_session_through_the_bridge() {
    let env = env();
    let Served { ns, bridge, token } = served(env, "hooks-claude", "implement").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &token).expect("token file");
    let via = Via::Bridge {
        url: &bridge.url,
        token_file: &token_file,
        ca: None,
    };
    let transcript = claude_transcript(dir.path(), 5);
    let writer = format!("system:serviceaccount:{ns}:implement");

    // session-start: an existing handoff is injected, fenced, with its author.
    ok(&bridge.drive(
        &token,
        "",
        json!([write("acme/api#41", "## State\nParser done.")]),
    )[0]);
    let session_start = |key: &str, source: &str| {
        let payload = json!({"source": source, "model": "claude-sonnet-4-5"});
        let start = claude("SessionStart", &transcript, payload);
        hook(&via, "claude", "session-start", key, &start)
    };
    let (success, out, _) = session_start("acme/api#41", "startup");
    assert!(success);
    assert_eq!(
        out["hookSpecificOutput"]["hookEventName"],
        json!("SessionStart")
    );
    let context = out["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .expect("context");
    assert!(
        context.starts_with("Prior handoff for continuation key `acme/api#41` (revision "),
        "{context}"
    );
    assert!(
        context.contains(&format!("written by {writer}")),
        "{context}"
    );
    assert!(
        context.contains("~~~markdown prior-handoff\n## State\nParser done.\n~~~\n"),
        "{context}"
    );
    // No handoff: nothing is injected.
    let (success, out, _) = session_start("acme/api#42", "resume");
    assert!(success);
    assert_eq!(out, Value::Null);

    // stop: blocks while nothing was written in this session…
    let stop = claude("Stop", &transcript, json!({"stop_hook_active": false}));
    let (success, out, _) = hook(&via, "claude", "stop", "acme/api#42", &stop);
    assert!(success);
    assert_eq!(
        out,
        json!({"decision": "block", "reason": stop_reason("acme/api#42")})
    );
    // …and an old agent handoff, from before this session began, does not count.
    let old_transcript = claude_transcript(dir.path(), -3600);
    let (_, out, _) = hook(
        &via,
        "claude",
        "stop",
        "acme/api#41",
        &claude("Stop", &old_transcript, json!({"stop_hook_active": false})),
    );
    assert_eq!(
        out["decision"],
        json!("block"),
        "a handoff older than the session is not fresh"
    );
    // …passes after the agent's write_handoff.
    ok(&bridge.drive(
        &token,
        "",
        json!([write("acme/api#42", "## State\nFlag wired.")]),
    )[0]);
    let (success, out, _) = hook(&via, "claude", "stop", "acme/api#42", &stop);
    assert!(success);
    assert_eq!(out, Value::Null, "a fresh handoff lets the agent stop");

    // session-end: the agent never wrote one for #43, so a rescue is written.
    let end = claude(
        "SessionEnd",
        &transcript,
        json!({"reason": "prompt_input_exit"}),
    );
    let (success, out, stderr) = hook(&via, "claude", "session-end", "acme/api#43", &end);
    assert!(success, "{stderr}");
    assert!(
        out.as_str()
            .expect("a plain line")
            .contains("at the session's end (reason prompt_input_exit), a rescued one was extracted from the transcript (created)"),
        "{out}"
    );
    let rescued = stored(&ns, "acme/api#43").await.expect("a rescued handoff");
    assert!(
        rescued.spec.body.starts_with(RESCUE_MARK),
        "{}",
        rescued.spec.body
    );
    assert!(rescued.spec.body.contains("> Wire --format into the CLI"));
    assert!(rescued.spec.body.contains("- Edit: src/cli.rs"));
    assert_eq!(rescued.spec.kind.as_deref(), Some("rescued"));
    assert_eq!(rescued.spec.created_by.as_deref(), Some(writer.as_str()));
    // A second session-end (or a pre-compact) changes nothing.
    let (_, out, _) = hook(&via, "claude", "session-end", "acme/api#43", &end);
    unchanged(&out);
    let pre = claude(
        "PreCompact",
        &transcript,
        json!({"trigger": "auto", "custom_instructions": ""}),
    );
    let (_, out, _) = hook(&via, "claude", "pre-compact", "acme/api#43", &pre);
    unchanged(&out);
    let again = stored(&ns, "acme/api#43").await.expect("still there");
    assert_eq!(
        again.metadata.resource_version,
        rescued.metadata.resource_version
    );
    // The rescued mark shows in list_handoffs and get_handoff.
    let seen = bridge.drive(
        &token,
        "",
        json!([
            call("list_handoffs", json!({"project": "shop"})),
            call("get_handoff", json!({"handoff_key": "acme/api#43"})),
        ]),
    );
    let listed = ok(&seen[0])["handoffs"]
        .as_array()
        .expect("handoffs")
        .iter()
        .find(|h| h["handoff_key"] == json!("acme/api#43"))
        .expect("listed")
        .clone();
    assert_eq!(listed["kind"], json!("rescued"));
    assert!(
        listed["preview"]
            .as_str()
            .expect("preview")
            .starts_with(RESCUE_MARK),
        "{listed}"
    );
    assert!(
        ok(&seen[1])["handoff"]["body"]
            .as_str()
            .expect("body")
            .starts_with(RESCUE_MARK)
    );
    // A pre-compact on #42, freshly written by the agent, keeps it.
    let (_, out, _) = hook(&via, "claude", "pre-compact", "acme/api#42", &pre);
    assert_eq!(out, Value::Null);
    assert_eq!(
        stored(&ns, "acme/api#42").await.expect("kept").spec.body,
        "## State\nFlag wired."
    );
}

/// Codex: its documented payloads; the loop guard (a stop with
/// `stop_hook_active` never blocks, and rescues instead, since Codex has no
/// session-end event); pre-compact over a rescue is unchanged; and the
/// kubeconfig path gives the same answers as the bridge.
#[tokio::test]
async fn codex_hooks_the_loop_guard_and_the_kubeconfig_path() {
    let (ns, via) = kubeconfig_in("hooks-codex").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let transcript = codex_transcript(dir.path(), 5);

    let start = codex("SessionStart", &transcript, json!({"source": "startup"}));
    let (success, out, _) = hook(&via, "codex", "session-start", "shop#7", &start);
    assert!(success);
    assert_eq!(out, Value::Null);

    let stop = |active: bool| {
        codex(
            "Stop",
            &transcript,
            json!({"turn_id": "t-1",
        "permission_mode": "default", "stop_hook_active": active,
        "last_assistant_message": "The race is in the temp dir; fixing."}),
        )
    };
    let (_, out, _) = hook(&via, "codex", "stop", "shop#7", &stop(false));
    assert_eq!(
        out,
        json!({"decision": "block", "reason": stop_reason("shop#7")})
    );
    assert!(
        stored(&ns, "shop#7").await.is_none(),
        "blocking writes nothing"
    );
    // The loop guard: the second stop passes, with a rescue.
    let (success, out, _) = hook(&via, "codex", "stop", "shop#7", &stop(true));
    assert!(success);
    assert_ne!(out["decision"], json!("block"));
    assert!(
        out["systemMessage"]
            .as_str()
            .expect("message")
            .ends_with("(created)"),
        "{out}"
    );
    let rescued = stored(&ns, "shop#7").await.expect("rescued");
    common::assert_contains(
        &rescued.spec.body,
        &["from a Codex transcript", "- shell: cargo test import"],
    );
    let compact = codex(
        "PreCompact",
        &transcript,
        json!({"turn_id": "t-2", "trigger": "auto"}),
    );
    let (_, out, _) = hook(&via, "codex", "pre-compact", "shop#7", &compact);
    assert!(
        out["systemMessage"]
            .as_str()
            .expect("message")
            .ends_with("(unchanged)"),
        "{out}"
    );
    assert_eq!(
        stored(&ns, "shop#7")
            .await
            .expect("rescued")
            .metadata
            .resource_version,
        rescued.metadata.resource_version
    );
    // A rescue is not a handoff the agent wrote: stop still blocks.
    let (_, out, _) = hook(&via, "codex", "stop", "shop#7", &stop(false));
    assert_eq!(out["decision"], json!("block"));
    // session-start injects the rescue, marked.
    let (_, out, _) = hook(&via, "codex", "session-start", "shop#7", &start);
    let context = out["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .expect("context");
    assert!(context.contains(RESCUE_MARK), "{context}");
    // A hook for another event than the agent sent says so and goes on.
    let (success, out, _) = hook(&via, "codex", "stop", "shop#7", &start);
    assert!(success);
    assert!(
        out["systemMessage"]
            .as_str()
            .expect("message")
            .contains("this is the Stop hook, and the agent sent \"SessionStart\""),
        "{out}"
    );
}

/// An unreachable bridge never fails the session: exit 0, one line on
/// stderr and the same line as the agent's systemMessage, no block.
#[test]
fn an_unreachable_bridge_lets_the_session_go_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "t").expect("token");
    // Port 9 (discard) on loopback: nothing listens, the connection is refused.
    let via = Via::Bridge {
        url: "http://127.0.0.1:9/mcp",
        token_file: &token_file,
        ca: None,
    };
    let transcript = claude_transcript(dir.path(), 5);
    for (event, name, extra) in [
        (
            "session-start",
            "SessionStart",
            json!({"source": "startup"}),
        ),
        ("stop", "Stop", json!({"stop_hook_active": false})),
        (
            "pre-compact",
            "PreCompact",
            json!({"trigger": "manual", "custom_instructions": ""}),
        ),
        ("session-end", "SessionEnd", json!({"reason": "other"})),
    ] {
        let (success, out, stderr) = hook(
            &via,
            "claude",
            event,
            "k",
            &claude(name, &transcript, extra),
        );
        assert!(success, "{event}: {stderr}");
        // Claude Code shows a systemMessage from SessionStart and Stop; from
        // PreCompact and SessionEnd it would ignore one: a plain line there.
        let message = match event {
            "pre-compact" | "session-end" => out.as_str(),
            _ => out["systemMessage"].as_str(),
        }
        .unwrap_or_else(|| panic!("{event}: {out}"));
        assert!(
            message.contains("http://127.0.0.1:9/mcp is unreachable"),
            "{event}: {message}"
        );
        assert!(
            message.ends_with("the session goes on without it"),
            "{message}"
        );
        assert_eq!(stderr.trim(), message, "{event}: one line on stderr");
        assert!(
            out.is_string() || out.as_object().map(|o| o.len()) == Some(1),
            "{event}: no block, no context: {out}"
        );
    }
}

/// The token file is read again at every call: after it is rewritten with
/// the token of an identity RBAC refuses, the next hook is refused by
/// name; rewritten back, it works again.
#[tokio::test]
async fn the_token_file_is_read_again_at_every_call() {
    let env = env();
    let Served {
        ns,
        bridge,
        token: good,
    } = served(env, "hooks-token", "implement").await;
    let nobody = agent_token(env, &ns, "nobody", Some("implement"), None).await;
    ok(&bridge.drive(&good, "", json!([write("k", "## State\nx")]))[0]);
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = dir.path().join("token");
    let via = Via::Bridge {
        url: &bridge.url,
        token_file: &token_file,
        ca: None,
    };
    let transcript = claude_transcript(dir.path(), 5);
    let start = claude("SessionStart", &transcript, json!({"source": "startup"}));
    let injected = |out: &Value| out["hookSpecificOutput"]["additionalContext"].is_string();

    std::fs::write(&token_file, &good).expect("token");
    assert!(injected(
        &hook(&via, "claude", "session-start", "k", &start).1
    ));
    std::fs::write(&token_file, &nobody).expect("rotated");
    let (success, out, _) = hook(&via, "claude", "session-start", "k", &start);
    assert!(success);
    let message = out["systemMessage"].as_str().expect("message");
    assert!(
        message.contains(&format!(
            "system:serviceaccount:{ns}:nobody may not get handoffs"
        )),
        "{message}"
    );
    std::fs::write(&token_file, &good).expect("rotated back");
    assert!(injected(
        &hook(&via, "claude", "session-start", "k", &start).1
    ));
}

/// An https bridge: the hook verifies it against HANDOFF_CA_FILE, and
/// refuses it (saying so, exit 0) when the certificate is not trusted.
#[tokio::test]
async fn an_https_bridge_is_verified_against_the_ca_file() {
    let env = env();
    let ns = env.namespace("hooks-https").await;
    apply_agent_roles(env);
    let dir = tempfile::tempdir().expect("tempdir");
    let certified =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .expect("a self-signed certificate");
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, certified.cert.pem()).expect("cert");
    std::fs::write(&key, certified.signing_key.serialize_pem()).expect("key");
    let (cert_arg, key_arg) = (cert.display().to_string(), key.display().to_string());
    let bridge = Bridge::start_with(env, &ns, &["--tls-cert", &cert_arg, "--tls-key", &key_arg]);
    assert!(bridge.url.starts_with("https://"), "{}", bridge.url);
    let token = writer_token(env, &ns, "implement").await;
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &token).expect("token");
    let transcript = claude_transcript(dir.path(), 5);
    let start = claude("SessionStart", &transcript, json!({"source": "startup"}));
    agent_write(&ns, &spec("tls").body("## State\nover https")).await;

    let trusted = Via::Bridge {
        url: &bridge.url,
        token_file: &token_file,
        ca: Some(&cert),
    };
    let (success, out, _) = hook(&trusted, "claude", "session-start", "tls", &start);
    assert!(success);
    let context = out["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_else(|| panic!("{out}"));
    assert!(context.contains("## State\nover https"), "{context}");

    let untrusted = Via::Bridge {
        url: &bridge.url,
        token_file: &token_file,
        ca: None,
    };
    let (success, out, _) = hook(&untrusted, "claude", "session-start", "tls", &start);
    assert!(success);
    let message = out["systemMessage"]
        .as_str()
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        message.contains("is unreachable") && message.contains("certificate"),
        "{message}"
    );
}

/// Rescue on every shared transcript: within the default budget, marked,
/// idempotent (the second run is `unchanged`, same resourceVersion), and
/// never over an agent-written handoff newer than the transcript.
#[tokio::test]
async fn rescue_on_every_shared_transcript() {
    let (ns, via) = kubeconfig_in("hooks-rescue").await;
    let mut checked = 0;
    for agent in ["claude", "codex"] {
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(crate::transcript_support::shared_dir().join(agent))
                .expect("fixtures")
                .map(|e| e.expect("entry").path())
                .collect();
        files.sort();
        for file in files {
            let name = file
                .file_stem()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            let key = format!("rescue/{agent}/{name}");
            let path = file.display().to_string();
            let args = [&rescue_args(agent, &path, &key)[..], &["--kind", "issue"]].concat();
            let first = rescue_json(&via, &args);
            assert_eq!(first["outcome"], json!("created"), "{key}: {first}");
            let tokens = first["approx_tokens"].as_u64().expect("tokens");
            assert!(tokens > 0 && tokens <= 2_000, "{key}: {tokens}");
            let h = stored(&ns, &key).await.expect("stored");
            assert!(h.spec.body.starts_with(RESCUE_MARK), "{key}");
            assert_eq!(approx_tokens(&h.spec.body) as u64, tokens);
            assert_eq!(h.spec.kind.as_deref(), Some("issue.rescued"));
            let second = rescue_json(&via, &args);
            assert_eq!(second["outcome"], json!("unchanged"), "{key}: {second}");
            let again = stored(&ns, &key).await.expect("stored");
            assert_eq!(
                again.metadata.resource_version, h.metadata.resource_version,
                "{key}"
            );

            // An agent-written handoff newer than the transcript stays.
            let agent_key = format!("{key}/agent");
            let spec = spec(agent_key.clone())
                .kind("issue")
                .body("## State\nwritten by the agent");
            agent_write(&ns, &spec).await;
            let before = stored(&ns, &agent_key).await.expect("agent handoff");
            let kept = rescue_json(&via, &rescue_args(agent, &path, &agent_key));
            assert_eq!(kept["outcome"], json!("kept"), "{agent_key}: {kept}");
            assert!(
                kept["reason"]
                    .as_str()
                    .expect("reason")
                    .contains("since this session began"),
                "{kept}"
            );
            let after = stored(&ns, &agent_key).await.expect("agent handoff");
            assert_eq!(
                after.metadata.resource_version,
                before.metadata.resource_version
            );
            assert_eq!(after.spec.body, "## State\nwritten by the agent");
            checked += 1;
        }
    }
    assert_eq!(
        checked, 8,
        "every shared transcript (5 Claude Code, 3 Codex)"
    );
}

/// `rescue --agent grok` reads a session of a Grok database given as
/// `--file grok.db --session ID`, as `handoff transcript read` does: the
/// session picks its rows (never the other session's) and names the rescue.
#[tokio::test]
async fn rescue_reads_a_session_of_a_grok_database() {
    let (ns, via) = kubeconfig_in("hooks-rescue-grok").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("grok.db");
    crate::transcript_support::grok_db(&db);
    let db = db.display().to_string();
    let out = rescue_json(
        &via,
        &[
            "--agent",
            "grok",
            "--file",
            &db,
            "--session",
            "sess-a",
            "--key",
            "grok/1",
            "--project",
            "shop",
        ],
    );
    assert_eq!(out["outcome"], json!("created"), "{out}");
    let body = stored(&ns, "grok/1").await.expect("rescued").spec.body;
    assert!(
        body.starts_with(&format!(
            "{RESCUE_MARK}: extracted by `handoff rescue` from a Grok CLI transcript \
             (session `sess-a`)"
        )),
        "{body}"
    );
    assert!(body.contains("> Ship it"), "the last request: {body}");
    assert!(body.contains("- bash: npm test"), "the tool call: {body}");
    assert!(!body.contains("Another session"), "sess-b's rows: {body}");
}

/// A rescue replaces an agent handoff older than the session (a previous
/// session's), and refuses bad flags by name.
#[tokio::test]
async fn rescue_replaces_a_handoff_older_than_the_session_and_names_bad_flags() {
    let (ns, via) = kubeconfig_in("hooks-rescue-old").await;
    let dir = tempfile::tempdir().expect("tempdir");
    // A session that began after the handoff below was written.
    let transcript = claude_transcript(dir.path(), -3600).display().to_string();
    let spec = spec("old")
        .repo("acme/api")
        .kind("issue")
        .body("## State\nprevious session");
    agent_write(&ns, &spec).await;
    let out = rescue_json(
        &via,
        &["--agent", "claude", "--file", &transcript, "--key", "old"],
    );
    assert_eq!(out["outcome"], json!("updated"), "{out}");
    let h = stored(&ns, "old").await.expect("rescued");
    assert_eq!(
        (
            h.spec.project.as_str(),
            h.spec.repo.as_deref(),
            h.spec.kind.as_deref()
        ),
        ("shop", Some("acme/api"), Some("issue.rescued")),
        "project, repo and kind carried over"
    );

    let cases: [(&[&str], &str); 3] = [
        (
            &["--agent", "claude", "--file", &transcript, "--key", "new"],
            "pass --project or set HANDOFF_PROJECT",
        ),
        (
            &[
                "--agent",
                "claude",
                "--file",
                &transcript,
                "--key",
                "new",
                "--project",
                "shop",
                "--max-tokens",
                "10",
            ],
            "--max-tokens",
        ),
        (
            &["--agent", "claude", "--key", "new", "--project", "shop"],
            "--session",
        ),
    ];
    for (args, want) in cases {
        let out = rescue(&via, args);
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    assert!(
        stored(&ns, "new").await.is_none(),
        "a refused rescue writes nothing"
    );
}

/// Waits for `child` at most `patience` (a guard against a hung test, not a
/// speed bound: the hook's own `--timeout` is far shorter), then kills it.
fn wait_or_kill(mut child: std::process::Child, patience: std::time::Duration) -> Output {
    let since = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if since.elapsed() > patience {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "the hook was still running after {patience:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

/// The hook's one JSON line on stdout, a plain notice line as a string, or
/// Null when it printed nothing.
fn stdout_json(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if stdout.is_empty() {
        return Value::Null;
    }
    if !stdout.starts_with('{') {
        // A notice as a plain line (Claude Code's PreCompact, SessionEnd).
        return Value::String(stdout);
    }
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout}"))
}

/// [`stdout_json`], after checking the hook exited 0.
fn answered(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout_json(out)
}

/// A transcript whose first line has no end for 3 GiB (a sparse file), then
/// one real record: the hook reads a bounded head (for the session's start)
/// and a bounded tail (for the rescue), and does so under an address-space
/// limit below the file's size, where reading the line whole cannot work.
#[tokio::test]
async fn a_transcript_line_of_gigabytes_is_skipped_within_bounded_memory() {
    let env = env();
    let ns = env.namespace("hooks-huge").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("huge.jsonl");
    let t = jiff::Timestamp::now().to_string();
    let record = json!({"type": "user", "timestamp": t, "sessionId": "abc123", "uuid": "u9",
        "message": {"role": "user", "content": "Ship the refund fix after the huge paste"}});
    {
        use std::io::{Seek, SeekFrom};
        let mut file = std::fs::File::create(&path).expect("create");
        let hole = 3u64 << 30;
        file.set_len(hole).expect("sparse");
        file.seek(SeekFrom::Start(hole)).expect("seek");
        writeln!(file, "\n{record}").expect("record");
    }
    let payload = claude("SessionEnd", &path, json!({"reason": "other"}));
    // `ulimit -v` in KiB: 2 GiB, below the 3 GiB line.
    let child = fed(
        Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 2097152 && exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_handoff"))
            .args(CLAUDE_SESSION_END)
            .args(["--timeout", "60s"])
            .env("KUBECONFIG", env.kubeconfig_path())
            .env("HANDOFF_NAMESPACE", &ns)
            .env("CONVERSATION_OBJECT_KEY", "shop#huge")
            .env_remove("HANDOFF_MCP_URL"),
        &payload,
    );
    let out = wait_or_kill(child, std::time::Duration::from_secs(300));
    let said = answered(&out);
    let message = said.as_str().unwrap_or_default();
    assert!(
        message.contains("a rescued one was extracted from the transcript (created)"),
        "{said}"
    );
    let rescued = stored(&ns, "shop#huge").await.expect("rescued");
    assert!(
        rescued
            .spec
            .body
            .contains("Ship the refund fix after the huge paste"),
        "{}",
        rescued.spec.body
    );

    // A transcript_path that is a FIFO (no writer: opening it would block)
    // is not read at all.
    let fifo = dir.path().join("transcript.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let via = Via::Kubeconfig {
        namespace: ns.clone(),
    };
    let (success, said, _) = hook(
        &via,
        "claude",
        "session-end",
        "shop#fifo",
        &claude("SessionEnd", &fifo, json!({"reason": "other"})),
    );
    assert!(success);
    let message = said.as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "no handoff for `shop#fifo`, and its transcript_path {} is not a regular file",
            fifo.display()
        )),
        "{said}"
    );
}

/// The arguments of Claude Code's session-end hook in project shop, for
/// the tests that run the binary without `handoff_command`.
const CLAUDE_SESSION_END: [&str; 6] = [
    "hook",
    "session-end",
    "--agent",
    "claude",
    "--project",
    "shop",
];

/// Stdin that never ends (a pipe whose writer stays open without writing)
/// and stdin that never stops (`/dev/zero`): each hook exits 0 with one
/// notice, within its `--timeout`.
#[test]
fn endless_input_still_gets_one_answer() {
    let base = |stdin: Stdio| {
        Command::new(env!("CARGO_BIN_EXE_handoff"))
            .args(CLAUDE_SESSION_END)
            .args(["--timeout", "2s", "--key", "k"])
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .env("HANDOFF_MCP_URL", "http://127.0.0.1:9/mcp")
            .env("HANDOFF_TOKEN", "t")
            .env_remove("CONVERSATION_OBJECT_KEY")
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("handoff hook runs")
    };
    let patience = std::time::Duration::from_secs(120);

    let mut silent = base(Stdio::piped());
    let writer = silent.stdin.take().expect("stdin");
    let out = wait_or_kill(silent, patience);
    drop(writer);
    let said = answered(&out);
    assert_eq!(
        said,
        json!("handoff hook SessionEnd: gave up after 2s; the session goes on without it"),
        "{said}"
    );

    let zeros = std::fs::File::open("/dev/zero").expect("/dev/zero");
    let said = answered(&wait_or_kill(base(Stdio::from(zeros)), patience));
    let message = said.as_str().unwrap_or_default();
    assert!(
        message.contains("the hook's input is longer than 16777216 bytes"),
        "{said}"
    );
}

/// A hook line this binary cannot parse (a flag of a newer release, a
/// typo) exits 1, not clap's 2: Claude Code and Gemini CLI take a hook's
/// exit 2 as a block with its stderr as the reason, so the usage text would
/// be fed to the model turn after turn. Help still exits 0; other
/// subcommands keep clap's 2.
#[test]
fn a_hook_line_that_does_not_parse_exits_1() {
    let code = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_handoff"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("handoff runs")
            .status
            .code()
    };
    let cases: [(&[&str], Option<i32>); 4] = [
        (
            &["hook", "stop", "--agent", "gemini", "--no-such-flag"],
            Some(1),
        ),
        (&["hook", "after-agent"], Some(1)),
        (&["hook", "stop", "--help"], Some(0)),
        (&["rescue", "--no-such-flag"], Some(2)),
    ];
    for (args, want) in cases {
        assert_eq!(code(args), want, "{args:?}");
    }
}
