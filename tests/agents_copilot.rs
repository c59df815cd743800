//! The agents tier, Copilot half: the real GitHub Copilot CLI
//! (`@github/copilot`, pinned by `tests/agents/copilot/package-lock.json`,
//! installed by `make agents-copilot`) runs whole `copilot -p` sessions
//! against the scripted Responses API of the test kit (its BYOK provider:
//! `COPILOT_PROVIDER_BASE_URL`, wire API `responses`), with the shipped
//! `examples/copilot/hooks.json` (as `.github/hooks/handoff.json`) and
//! `mcp-config.json` (as `$COPILOT_HOME/mcp-config.json`) used verbatim.
//! The apiserver is this binary's own control plane.
//!
//! Why: only the CLI itself shows which payload its hooks get (camelCase,
//! no transcript path), which answer it reads (`additionalContext` at the
//! top), how it names an MCP tool (`handoff-write_handoff`) and what its
//! session file holds. Assertions read what the model saw (the server's
//! request log), what was stored (the cluster) and what the reader makes
//! of the CLI's own `events.jsonl`.
//!
//! Network hygiene: `COPILOT_OFFLINE=true` (no GitHub authentication, no
//! telemetry: only the BYOK provider is contacted), the model, the
//! apiserver and the MCP server on 127.0.0.1, every session behind a dead
//! proxy with `NO_PROXY` covering loopback; `HOME` and `COPILOT_HOME` are a
//! temp dir per test, and auto-update is off.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use handoff_testkit::model::openai::{Responses, Turn};
use handoff_testkit::{self as testing, TestEnv};
use serde_json::{Value, json};

use common::tier::{next_second, stored, workdir};

/// The pinned Copilot CLI; fails (never skips) when it is not installed.
fn copilot() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/agents/copilot/node_modules/.bin/copilot");
    assert!(
        bin.exists(),
        "the Copilot CLI is missing at {}: run `make agents-copilot` (npm ci in tests/agents/copilot)",
        bin.display()
    );
    bin
}

fn shipped(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/copilot")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The proxy of every session: nothing listens on port 9 of loopback, so a
/// request for anything but loopback (which `NO_PROXY` covers) fails here
/// instead of leaving the machine.
const DEAD_PROXY: &str = "http://127.0.0.1:9";

/// A model id the CLI knows (its tool support and token limits), sent to
/// the scripted server as it is.
const MODEL: &str = "gpt-5.4";

/// The prompt of every session.
const PROMPT: &str = "Continue the work.";

/// One test's Copilot: its directories, its kubeconfig (the test's
/// namespace as the context's), the model server.
struct Agent {
    dir: tempfile::TempDir,
    model: Responses,
    key: String,
}

impl Agent {
    fn new(env: &TestEnv, namespace: &str, key: &str) -> Self {
        let model = Responses::start(Vec::new()).expect("the scripted model starts");
        let dir = workdir(
            env,
            namespace,
            &["home", "copilot-home", "work/.github/hooks"],
        );
        std::fs::write(
            dir.path().join("copilot-home/mcp-config.json"),
            shipped("mcp-config.json"),
        )
        .expect("mcp-config.json");
        std::fs::write(
            dir.path().join("work/.github/hooks/handoff.json"),
            shipped("hooks.json"),
        )
        .expect("hooks");
        Self {
            dir,
            model,
            key: key.to_owned(),
        }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// One `copilot -p` session playing `script`, behind [`DEAD_PROXY`],
    /// in a folder trusted for this session only (`--trust-folder`: the
    /// repository's hooks load in prompt mode only in a trusted folder);
    /// its session id (it must succeed).
    fn session(&self, script: Vec<Turn>) -> String {
        self.model.play(script);
        let path = format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            self.path("bin").display()
        );
        let out = Command::new(copilot())
            .current_dir(self.path("work"))
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.path("home"))
            .env("COPILOT_HOME", self.path("copilot-home"))
            .env("COPILOT_OFFLINE", "true")
            .env("CI", "true")
            .env("COPILOT_PROVIDER_BASE_URL", self.model.base_url())
            .env("COPILOT_PROVIDER_TYPE", "openai")
            .env("COPILOT_PROVIDER_WIRE_API", "responses")
            .env("COPILOT_MODEL", MODEL)
            .env("KUBECONFIG", self.path("kubeconfig"))
            .env("CONVERSATION_OBJECT_KEY", &self.key)
            .env("HANDOFF_PROJECT", "agents-tier")
            .env("HTTPS_PROXY", DEAD_PROXY)
            .env("HTTP_PROXY", DEAD_PROXY)
            .env("NO_PROXY", "127.0.0.1,localhost")
            .args(["-p", PROMPT, "--trust-folder", "--allow-all-tools"])
            .args(["--no-auto-update", "--disable-builtin-mcps"])
            .args(["--output-format", "json"])
            .stdin(Stdio::null())
            .output()
            .expect("copilot runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "copilot failed:\n{stdout}\n{stderr}");
        let events: Vec<Value> = stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let failed: Vec<&Value> = events
            .iter()
            .filter(|e| {
                e["type"] == "session.mcp_server_status_changed" && e["data"]["status"] == "failed"
            })
            .collect();
        assert!(failed.is_empty(), "the MCP server failed: {failed:#?}");
        events
            .iter()
            .find(|e| e["type"] == "result")
            .and_then(|e| e["sessionId"].as_str())
            .unwrap_or_else(|| panic!("no result line with a session id:\n{stdout}"))
            .to_owned()
    }

    /// `handoff transcript read` of this agent's session `id`.
    fn transcript(&self, id: &str) -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_handoff"))
            .args([
                "transcript",
                "read",
                "--agent",
                "copilot",
                "--session",
                id,
                "--agent-home",
            ])
            .arg(self.path("copilot-home"))
            .args(["--max-bytes", "0"])
            .env_clear()
            .output()
            .expect("handoff runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("transcript JSON")
    }
}

/// The model request's input as text (every item, in order).
fn input_text(request: &Value) -> String {
    request["input"].to_string()
}

/// The names of the tools offered in `request`.
fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// The handoff stored under `key` in `namespace`, if any.
const BODY: &str = "## State\nThe agents tier runs Copilot.\n\n## Done\n- the scripted model\n\n## Next\n- resume\n\n## Open questions\n- none\n\n## Refs\n- tests/agents_copilot.rs\n";

/// How Copilot names the bridge's `write_handoff` (`<server>-<tool>`).
const WRITE_TOOL: &str = "handoff-write_handoff";

fn write_call(key: &str, body: &str) -> Turn {
    Turn::Call {
        namespace: None,
        name: WRITE_TOOL.to_owned(),
        arguments: json!({"handoff_key": key, "project": "agents-tier", "body": body}),
    }
}

/// The outputs of the function calls Copilot answered in `request`.
fn call_outputs(request: &Value) -> Vec<Value> {
    request["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "function_call_output")
        .cloned()
        .collect()
}

/// Resume: session 1 writes through the real MCP client (the shipped
/// mcp-config.json), and its sessionEnd leaves that fresh write alone;
/// session 2's first model request already holds the handoff (the
/// sessionStart hook's `additionalContext`).
#[tokio::test]
async fn a_second_session_starts_with_the_handoff_of_the_first() {
    let env = testing::shared();
    let ns = env.namespace("copilot-resume").await;
    let key = "issue-40-resume";
    let agent = Agent::new(env, &ns, key);

    agent.session(vec![
        write_call(key, BODY),
        Turn::text("Written; stopping."),
    ]);
    let first = agent.model.model_requests();
    assert_eq!(first.len(), 2, "one write, one end");
    let tools = offered(&first[0]);
    assert!(
        tools.iter().any(|t| t == WRITE_TOOL),
        "Copilot offered no {WRITE_TOOL} (offered: {tools:?})"
    );
    assert!(
        !input_text(&first[0]).contains("The agents tier runs Copilot."),
        "session 1 began without a handoff"
    );
    let outputs = call_outputs(&first[1]);
    assert_eq!(outputs.len(), 1, "one write_handoff answered: {outputs:?}");
    let handoff = stored(env, &ns, key).expect("session 1 stored the handoff");
    assert_eq!(
        handoff["spec"]["body"], BODY,
        "the agent's handoff, not rescued over at the session's end"
    );

    // Session 2 needs no get_handoff: its first answer is already the work
    // (here, the next write), and it stops with no block.
    let next = BODY.replace("- resume\n", "- forget\n");
    agent.session(vec![
        write_call(key, &next),
        Turn::text("Resumed; stopping."),
    ]);
    let second = agent.model.model_requests();
    assert_eq!(
        second.len(),
        2,
        "one write, one end: no get_handoff, no block"
    );
    let seen = input_text(&second[0]);
    assert!(
        seen.contains("The agents tier runs Copilot.") && seen.contains(key),
        "session 2's first request holds the handoff: {seen}"
    );
    let handoff = stored(env, &ns, key).expect("still stored");
    assert_eq!(handoff["spec"]["body"], next.as_str(), "session 2's write");
}

/// Forget: the model ends its turn without writing; the agentStop hook
/// blocks once with its reason, which Copilot sends on as a message, the
/// model writes, and the session ends with the agent's handoff stored (not
/// a rescue). The reader marks the reason as the hook's, not a request.
#[tokio::test]
async fn stop_blocks_once_until_the_model_writes() {
    let env = testing::shared();
    let ns = env.namespace("copilot-forget").await;
    let key = "issue-40-forget";
    let agent = Agent::new(env, &ns, key);
    let id = agent.session(vec![
        Turn::text("All done."),
        write_call(key, BODY),
        Turn::text("Written; stopping."),
    ]);
    let requests = agent.model.model_requests();
    assert_eq!(requests.len(), 3, "one block, one write, one end");
    let reason = format!("No handoff was written for `{key}` in this session.");
    assert!(!input_text(&requests[0]).contains(&reason));
    assert!(
        input_text(&requests[1]).contains(&reason),
        "the block's reason reached the model: {}",
        input_text(&requests[1])
    );
    assert_eq!(
        call_outputs(&requests[2]).len(),
        1,
        "write_handoff was answered"
    );
    let handoff = stored(env, &ns, key).expect("the model's write is stored");
    assert_eq!(
        handoff["spec"]["body"], BODY,
        "the agent's handoff, not a rescue"
    );

    let read = agent.transcript(&id);
    let turns: Vec<(&str, &str, &str)> = read["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| {
            (
                t["role"].as_str().unwrap_or_default(),
                t["text"].as_str().unwrap_or_default(),
                t["mark"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(turns.len(), 4, "{read:#}");
    assert_eq!(turns[0], ("user", PROMPT, ""));
    assert_eq!(turns[1], ("assistant", "All done.", ""));
    assert!(
        turns[2].0 == "user" && turns[2].1.contains(&reason) && turns[2].2 == "hook",
        "the block, as Copilot recorded it: {read:#}"
    );
    assert_eq!(turns[3], ("assistant", "Written; stopping.", ""));
}

/// Never writes: the model ends every turn without writing. agentStop
/// blocks once; then the guarded stop and sessionEnd (Copilot gives it no
/// transcript path: it is found from `sessionId` under `COPILOT_HOME`)
/// rescue the session, marked as rescued, within the default budget, and
/// the rescue's last request is the user's, not the block's reason.
#[tokio::test]
async fn a_session_that_never_writes_is_rescued() {
    let env = testing::shared();
    let ns = env.namespace("copilot-never").await;
    let key = "issue-40-never";
    let agent = Agent::new(env, &ns, key);
    agent.session(vec![Turn::text("All done."), Turn::text("Still done.")]);
    assert_eq!(
        agent.model.model_requests().len(),
        2,
        "one block, then the guarded stop lets it end"
    );
    let handoff = stored(env, &ns, key).expect("a rescue is stored");
    let body = handoff["spec"]["body"].as_str().unwrap_or_default();
    assert!(body.starts_with("> **Rescued handoff**"), "{body}");
    assert_eq!(handoff["spec"]["kind"], "rescued");
    assert!(
        body.contains(&format!("The last request (\"{PROMPT}\") got a reply")),
        "the last request is the user's: {body}"
    );
    assert!(
        body.contains("Still done."),
        "the last assistant text: {body}"
    );
    assert!(
        body.len().div_ceil(4) <= 2_000,
        "within the default --max-tokens: {} bytes",
        body.len()
    );
}

/// A session that writes the very handoff the key already holds
/// (`unchanged`: no new `updated_at`, older than the session) has written
/// it: sessionEnd sees the successful call in Copilot's own
/// `events.jsonl` and does not rescue over it. The reader reads that file
/// as the session: the prompt, then the reply with its tool call.
#[tokio::test]
async fn an_identical_rewrite_is_not_rescued_over() {
    let env = testing::shared();
    let ns = env.namespace("copilot-same").await;
    let key = "issue-40-same";
    let agent = Agent::new(env, &ns, key);
    agent.session(vec![write_call(key, BODY), Turn::text("Written.")]);
    let before = stored(env, &ns, key).expect("session 1 stored the handoff");
    next_second();

    let id = agent.session(vec![write_call(key, BODY), Turn::text("Written again.")]);
    let after = stored(env, &ns, key).expect("still stored");
    assert_eq!(after["spec"]["body"], BODY, "rescued over");
    assert_eq!(
        after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
        "nothing was written after session 1"
    );

    let read = agent.transcript(&id);
    let turns: Vec<(&str, &str, &Value)> = read["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| {
            (
                t["role"].as_str().unwrap_or_default(),
                t["text"].as_str().unwrap_or_default(),
                &t["tools"],
            )
        })
        .collect();
    assert_eq!(
        turns,
        [
            ("user", PROMPT, &Value::Null),
            (
                "assistant",
                "Written again.",
                &json!([format!("[tool] {WRITE_TOOL}")])
            ),
        ],
        "{read:#}"
    );
    assert_eq!(
        read["skipped"], 0,
        "every event is of a known kind: {read:#}"
    );
}
