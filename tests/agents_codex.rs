//! The agents tier, Codex half: the real Codex CLI (`@openai/codex`, pinned
//! by `tests/agents/codex/package-lock.json`, installed by `make
//! agents-codex`) runs whole `codex exec --json` sessions against the
//! scripted Responses API of the test kit, with the shipped
//! `examples/codex/config.toml` and `hooks.json` used verbatim: only what a
//! user fills in (the kubeconfig, `PATH` to `handoff`, the key) and the
//! model provider are added. The apiserver is this binary's own control
//! plane.
//!
//! Why: `tests/it/hooks.rs` feeds the hooks payloads shaped as documented;
//! only the CLI itself shows whether it passes the MCP server its
//! environment, runs the hooks at all, and feeds their answers to the
//! model. Assertions read what the model saw (the server's request log),
//! what was stored (the cluster) and what the CLI printed (its JSONL).
//!
//! Network hygiene: the model, the apiserver and the MCP server are on
//! 127.0.0.1, and every session runs behind a dead proxy with `NO_PROXY`
//! covering loopback, so nothing else can leave the machine; `HOME` and
//! `CODEX_HOME` are a temp dir per test (nothing of this machine's user
//! config is read or written); update checks, analytics and feedback are
//! off in the config.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use handoff_testkit::model::openai::{Responses, Turn};
use handoff_testkit::{self as testing, TestEnv};
use serde_json::{Value, json};

use common::tier::{next_second, stored, workdir};

/// The pinned Codex CLI; fails (never skips) when it is not installed.
fn codex() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/agents/codex/node_modules/.bin/codex");
    assert!(
        bin.exists(),
        "the Codex CLI is missing at {}: run `make agents-codex` (npm ci in tests/agents/codex)",
        bin.display()
    );
    bin
}

fn shipped(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/codex")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `config.toml` for `CODEX_HOME`: the root keys (model, provider, no
/// update check), then the shipped file verbatim, then the tables this
/// test adds (the provider on 127.0.0.1, analytics and feedback off).
fn config_toml(shipped: &str, base_url: &str) -> String {
    format!(
        "model = \"scripted\"\nmodel_provider = \"scripted\"\ncheck_for_update_on_startup = false\n\n\
         {shipped}\n\
         [model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{base_url}\"\n\
         wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n\
         [analytics]\nenabled = false\n\n[feedback]\nenabled = false\n"
    )
}

/// The proxy of every session: nothing listens on port 9 of loopback, so a
/// request for anything but loopback (which `NO_PROXY` covers) fails here
/// instead of leaving the machine. Finding 8: behind it the tools and the
/// hooks still work (before, every `handoff` client refused the
/// environment's proxy, "requires the disabled feature kube/http-proxy",
/// and the hooks, which get Codex's whole environment, did nothing).
const DEAD_PROXY: &str = "http://127.0.0.1:9";

/// One test's Codex: its directories, its kubeconfig (the test's
/// namespace as the context's), the model server.
struct Agent {
    dir: tempfile::TempDir,
    model: Responses,
    key: String,
    /// A copy of `/etc` mounted over it for each session (in a mount
    /// namespace of its own): Codex's system layer is `/etc/codex`.
    system: Option<PathBuf>,
}

impl Agent {
    fn new(env: &TestEnv, namespace: &str, key: &str, config: &str) -> Self {
        let model = Responses::start(Vec::new()).expect("the scripted model starts");
        let dir = workdir(env, namespace, &["home", "codex-home", "work"]);
        let home = dir.path().join("codex-home");
        std::fs::write(
            home.join("config.toml"),
            config_toml(config, &model.base_url()),
        )
        .expect("config.toml");
        std::fs::write(home.join("hooks.json"), shipped("hooks.json")).expect("hooks.json");
        Self {
            dir,
            model,
            key: key.to_owned(),
            system: None,
        }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// Moves the hooks out of `CODEX_HOME` and gives every session a
    /// system layer, `/etc/codex`, holding `files`: a copy of this
    /// machine's `/etc` with them added, mounted over `/etc` in a private
    /// mount namespace (`unshare`), so nothing outside the session sees it.
    fn with_system_layer(mut self, files: &[(&str, &str)]) -> Self {
        std::fs::remove_file(self.path("codex-home/hooks.json")).expect("hooks.json moved");
        let etc = self.path("etc");
        let copied = Command::new("cp")
            .arg("-a")
            .arg("/etc")
            .arg(&etc)
            .status()
            .expect("cp runs");
        assert!(copied.success(), "cannot copy /etc for the system layer");
        std::fs::create_dir_all(etc.join("codex")).expect("etc/codex");
        for (name, text) in files {
            std::fs::write(etc.join("codex").join(name), text).expect("system layer file");
        }
        self.system = Some(etc);
        self
    }

    /// `codex` itself, or `codex` in a mount namespace whose `/etc` is the
    /// system layer's copy (`unshare` from util-linux; a user namespace,
    /// so no privilege is needed).
    fn command(&self) -> Command {
        let Some(etc) = &self.system else {
            return Command::new(codex());
        };
        let mut command = Command::new("unshare");
        command
            .args([
                "--user",
                "--map-root-user",
                "--mount",
                "--propagation",
                "private",
            ])
            .args(["sh", "-c", r#"mount --bind "$0" /etc && exec "$@""#])
            .arg(etc)
            .arg(codex());
        command
    }

    /// One `codex exec --json` session playing `script`, behind
    /// [`DEAD_PROXY`]; its JSONL events (it must succeed).
    fn session(&self, script: Vec<Turn>, extra: &[&str]) -> Vec<Value> {
        let (ok, events, stderr) = self.run(script, extra);
        assert!(ok, "codex exec failed:\n{events:#?}\n{stderr}");
        events
    }

    /// [`Self::session`] that may fail: whether `codex exec` succeeded, its
    /// JSONL events and its stderr.
    fn run(&self, script: Vec<Turn>, extra: &[&str]) -> (bool, Vec<Value>, String) {
        self.model.play(script);
        let path = format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            self.path("bin").display()
        );
        let out = self
            .command()
            .current_dir(self.path("work"))
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.path("home"))
            .env("CODEX_HOME", self.path("codex-home"))
            .env("KUBECONFIG", self.path("kubeconfig"))
            .env("CONVERSATION_OBJECT_KEY", &self.key)
            .env("HANDOFF_PROJECT", "agents-tier")
            .env("HTTPS_PROXY", DEAD_PROXY)
            .env("HTTP_PROXY", DEAD_PROXY)
            .env("NO_PROXY", "127.0.0.1,localhost")
            .args(["exec", "--json", "--skip-git-repo-check"])
            .args(extra)
            .arg("Continue the work.")
            .stdin(Stdio::null())
            .output()
            .expect("codex runs");
        let events = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.success(), events, stderr)
    }
}

impl Agent {
    /// `handoff transcript read` of this agent's session `id`.
    fn transcript(&self, id: &str) -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_handoff"))
            .args([
                "transcript",
                "read",
                "--agent",
                "codex",
                "--session",
                id,
                "--agent-home",
            ])
            .arg(self.path("codex-home"))
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

/// The functions Codex offered the model under `namespace` in `request`.
fn offered(request: &Value, namespace: &str) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "namespace" && t["name"] == namespace)
        .flat_map(|t| t["tools"].as_array().into_iter().flatten())
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// The model request's input as text (every item, in order).
fn input_text(request: &Value) -> String {
    request["input"].to_string()
}

/// The handoff stored under `key` in `namespace`, if any.
const BODY: &str = "## State\nThe agents tier runs Codex.\n\n## Done\n- the scripted model\n\n## Next\n- resume\n\n## Open questions\n- none\n\n## Refs\n- tests/agents_codex.rs\n";

fn write_call(key: &str, body: &str) -> Turn {
    Turn::mcp(
        "handoff",
        "write_handoff",
        json!({"handoff_key": key, "project": "agents-tier", "body": body}),
    )
}

/// The messages of the CLI's `error` items (its warnings about the config).
fn errors(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "error")
        .filter_map(|e| e["item"]["message"].as_str().map(str::to_owned))
        .collect()
}

/// Finding 1: Codex passes a stdio MCP server no environment by default,
/// so the shipped config must forward `KUBECONFIG`; else the bridge cannot
/// start and Codex shows the model no handoff tools. Finding 2: the shipped
/// config draws no deprecation warning (`[features] codex_hooks`).
#[tokio::test]
async fn the_shipped_config_gives_codex_the_handoff_tools() {
    let env = testing::shared();
    let ns = env.namespace("codex-tools").await;
    let agent = Agent::new(env, &ns, "issue-28-tools", &shipped("config.toml"));
    let events = agent.session(vec![Turn::text("Nothing to do.")], &[]);
    let deprecated: Vec<_> = errors(&events)
        .into_iter()
        .filter(|m| m.contains("deprecated"))
        .collect();
    assert!(deprecated.is_empty(), "Codex warns: {deprecated:?}");
    let requests = agent.model.model_requests();
    let first = requests.first().expect("Codex asked the model");
    let tools = offered(first, "mcp__handoff");
    for tool in ["get_handoff", "write_handoff", "list_handoffs"] {
        assert!(
            tools.iter().any(|t| t == tool),
            "Codex offered no `{tool}` (offered under mcp__handoff: {tools:?})"
        );
    }
}

/// Codex runs hooks that are not managed only once they are trusted; the
/// supported way for automation that vets its hook files itself (a test,
/// an Agent Job whose image ships them) is this flag.
const TRUST_HOOKS: &str = "--dangerously-bypass-hook-trust";

/// The function calls Codex answered in `request` (outputs of earlier calls).
fn call_outputs(request: &Value) -> Vec<Value> {
    request["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "function_call_output")
        .cloned()
        .collect()
}

/// Resume: session 1 writes through the real MCP client; session 2's first
/// model request already holds the handoff (SessionStart's
/// additionalContext), so the model resumes with no tool call.
#[tokio::test]
async fn a_second_session_starts_with_the_handoff_of_the_first() {
    let env = testing::shared();
    let ns = env.namespace("codex-resume").await;
    let key = "issue-28-resume";
    let agent = Agent::new(env, &ns, key, &shipped("config.toml"));

    agent.session(
        vec![write_call(key, BODY), Turn::text("Written; stopping.")],
        &[TRUST_HOOKS],
    );
    let first = agent.model.model_requests();
    // A write early in the session (here, its first answer) is fresh: Stop
    // lets the session end with no block (finding 9: `updated_at` has
    // whole seconds, the transcript's start milliseconds).
    assert_eq!(first.len(), 2, "one write, one end: no block");
    let outputs = call_outputs(first.last().expect("session 1 asked the model"));
    assert_eq!(outputs.len(), 1, "one write_handoff answered: {outputs:?}");
    assert!(
        !input_text(&first[0]).contains("The agents tier runs Codex."),
        "session 1 began without a handoff"
    );
    let handoff = stored(env, &ns, key).expect("session 1 stored the handoff");
    assert_eq!(handoff["spec"]["body"], BODY);
    assert_eq!(handoff["spec"]["project"], "agents-tier");

    // Session 2 needs no get_handoff: its first answer is already the work
    // (here, the next write), and it stops with no block.
    let next = BODY.replace("- resume\n", "- forget\n");
    agent.session(
        vec![write_call(key, &next), Turn::text("Resumed; stopping.")],
        &[TRUST_HOOKS],
    );
    let second = agent.model.model_requests();
    assert_eq!(
        second.len(),
        2,
        "one write, one end: no get_handoff, no block"
    );
    let seen = input_text(&second[0]);
    assert!(
        seen.contains("The agents tier runs Codex.") && seen.contains(key),
        "session 2's first request holds the handoff: {seen}"
    );
    let handoff = stored(env, &ns, key).expect("still stored");
    assert_eq!(handoff["spec"]["body"], next.as_str(), "session 2's write");
}

/// Forget: the model ends its turn without writing; the Stop hook blocks
/// once with its reason, Codex asks the model again, the model writes, and
/// the session ends with the agent's handoff stored (not a rescue).
#[tokio::test]
async fn stop_blocks_once_until_the_model_writes() {
    let env = testing::shared();
    let ns = env.namespace("codex-forget").await;
    let key = "issue-28-forget";
    let agent = Agent::new(env, &ns, key, &shipped("config.toml"));
    let events = agent.session(
        vec![
            Turn::text("All done."),
            write_call(key, BODY),
            Turn::text("Written; stopping."),
        ],
        &[TRUST_HOOKS],
    );
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
    let last = events
        .iter()
        .rev()
        .find(|e| e["type"] == "item.completed" && e["item"]["type"] == "agent_message")
        .expect("an agent message");
    assert_eq!(last["item"]["text"], "Written; stopping.");

    // Codex's own rollout under $CODEX_HOME/sessions, as the reader sees it.
    let thread = events
        .iter()
        .find(|e| e["type"] == "thread.started")
        .and_then(|e| e["thread_id"].as_str())
        .expect("a thread id");
    let read = agent.transcript(thread);
    let turns: Vec<(String, String, Value)> = read["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| {
            let text = t["text"].as_str().unwrap_or_default().to_owned();
            (
                t["role"].as_str().unwrap_or_default().to_owned(),
                text,
                t["tools"].clone(),
            )
        })
        .collect();
    let roles: Vec<&str> = turns.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "user", "assistant"],
        "{read:#}"
    );
    assert_eq!(turns[0].1, "Continue the work.");
    assert_eq!(turns[1].1, "All done.");
    assert!(
        turns[2].1.contains(&reason),
        "the block, as Codex recorded it"
    );
    assert_eq!(turns[3].1, "Written; stopping.");
    assert_eq!(turns[3].2, json!(["[tool] write_handoff"]));
}

/// Never writes: the model ends every turn without writing. Stop blocks
/// once; the guarded Stop and SessionEnd rescue the transcript, marked as
/// rescued; Codex draws no warning about the shipped hooks.
#[tokio::test]
async fn a_session_that_never_writes_is_rescued() {
    let env = testing::shared();
    let ns = env.namespace("codex-never").await;
    let key = "issue-28-never";
    let agent = Agent::new(env, &ns, key, &shipped("config.toml"));
    let events = agent.session(
        vec![Turn::text("All done."), Turn::text("Still done.")],
        &[TRUST_HOOKS],
    );
    let about_ours: Vec<_> = errors(&events)
        .into_iter()
        .filter(|m| {
            m.contains("hooks.json") || m.contains("config.toml") || m.contains("deprecated")
        })
        .collect();
    assert!(
        about_ours.is_empty(),
        "Codex warns about the shipped files: {about_ours:?}"
    );
    let requests = agent.model.model_requests();
    assert_eq!(
        requests.len(),
        2,
        "one block, then the guarded stop lets it end"
    );
    let handoff = stored(env, &ns, key).expect("a rescue is stored");
    let body = handoff["spec"]["body"].as_str().unwrap_or_default();
    assert!(body.starts_with("> **Rescued handoff**"), "{body}");
    assert_eq!(handoff["spec"]["kind"], "rescued");
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

/// Finding 3: hooks that are not managed run only once trusted. Without
/// trust, the shipped hooks do nothing and say nothing: the model ends its
/// turn unasked and nothing is stored (docs/agents.md, "Codex", "Trust";
/// the other scenarios pass [`TRUST_HOOKS`]).
#[tokio::test]
async fn untrusted_hooks_silently_do_nothing() {
    let env = testing::shared();
    let ns = env.namespace("codex-untrusted").await;
    let key = "issue-28-untrusted";
    let agent = Agent::new(env, &ns, key, &shipped("config.toml"));
    agent.session(vec![Turn::text("All done.")], &[]);
    assert_eq!(agent.model.model_requests().len(), 1, "no Stop block");
    assert!(stored(env, &ns, key).is_none(), "no rescue either");
}

/// Finding 10 (Codex): a session that writes the very handoff the key
/// already holds (`unchanged`: no new `updated_at`, older than the
/// session) has written it: the Stop hook sees the write in Codex's own
/// rollout, neither blocks nor rescues over it.
#[tokio::test]
async fn an_identical_rewrite_is_not_rescued_over() {
    let env = testing::shared();
    let ns = env.namespace("codex-same").await;
    let key = "issue-28-same";
    let agent = Agent::new(env, &ns, key, &shipped("config.toml"));
    agent.session(
        vec![write_call(key, BODY), Turn::text("Written.")],
        &[TRUST_HOOKS],
    );
    let before = stored(env, &ns, key).expect("session 1 stored the handoff");
    next_second();

    agent.session(
        vec![write_call(key, BODY), Turn::text("Written again.")],
        &[TRUST_HOOKS],
    );
    // No controller counts revisions in this tier, so a rewrite within a
    // second of the first write may be answered `updated` (the store's
    // documented blind spot); what matters is that nothing was written, and
    // so `updated_at` stays older than this session.
    let requests = agent.model.model_requests();
    assert_eq!(
        requests.len(),
        2,
        "one write, one end: the Stop hook blocked ({})",
        input_text(requests.last().expect("a request"))
    );
    let after = stored(env, &ns, key).expect("still stored");
    assert_eq!(after["spec"]["body"], BODY, "rescued over");
    assert_eq!(
        after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
        "nothing was written after session 1"
    );
}

/// Finding 6 (Codex): Codex keeps 2,500 of its tokens (a quarter of the
/// bytes) of a hook's `additionalContext`, cuts the middle out of a longer
/// one and names a file for the whole. A handoff longer than that reaches
/// the next session as its head, the key and "call get_handoff for the
/// rest", whole, with no cut of Codex's own.
#[tokio::test]
async fn a_long_handoff_reaches_the_next_session_as_its_head_and_the_key() {
    let env = testing::shared();
    let ns = env.namespace("codex-cap").await;
    let key = "issue-28-cap";
    let agent = Agent::new(env, &ns, key, &shipped("config.toml"));
    let done = "- checked one more part of the input against the schema, and kept notes\n";
    let long = format!(
        "## State\nThe cap work is half done.\n## Next\n- write the output\n## Done\n{}## Open questions\n- none\n## Refs\n- the-last-line-of-the-handoff\n",
        done.repeat(155)
    );
    assert!(long.len() > 11_000, "{}", long.len());
    agent.session(
        vec![write_call(key, &long), Turn::text("Written.")],
        &[TRUST_HOOKS],
    );
    agent.session(
        vec![write_call(key, BODY), Turn::text("Resumed.")],
        &[TRUST_HOOKS],
    );
    let requests = agent.model.model_requests();
    let first = requests.first().expect("session 2 asked the model");
    let context = first["input"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|item| item["content"].as_array().into_iter().flatten())
        .filter_map(|part| part["text"].as_str())
        .find(|text| text.contains("Prior handoff for continuation key"))
        .expect("the handoff reached the model");
    assert!(
        !context.contains("truncated") && !context.contains("Full hook output saved"),
        "Codex cut the context itself: {context}"
    );
    assert!(
        context.contains("The cap work is half done.\n## Next\n- write the output"),
        "the head is missing: {context}"
    );
    assert!(
        context.ends_with(&format!(
            "Call get_handoff with handoff_key `{key}` for the rest.\n"
        )),
        "the context does not end with where the rest is: {context}"
    );
    assert!(
        !context.contains("the-last-line-of-the-handoff"),
        "{context}"
    );
}

/// Finding 3, automated: the Codex Agent Job
/// (`examples/agent/codex-agent-job.yaml`) mounts the shipped config.toml
/// and hooks.json at `/etc/codex`, Codex's system layer, whose hooks are
/// managed: trusted by policy, they run with no review and no
/// `--dangerously-bypass-hook-trust` (the same hooks in `CODEX_HOME` do
/// nothing: `untrusted_hooks_silently_do_nothing`). The files are taken
/// from the Job's ConfigMap, and the MCP server comes from that layer too.
#[tokio::test]
async fn the_agent_job_runs_the_hooks_as_managed() {
    let env = testing::shared();
    let ns = env.namespace("codex-job").await;
    let key = "issue-28-job";
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/agent/codex-agent-job.yaml");
    let job = std::fs::read_to_string(&path).expect("the Codex Job example");
    let documents: Vec<Value> = serde_saphyr::from_str_multiple(&job).expect("the Job's YAML");
    let data = &documents
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .expect("the Job's ConfigMap")["data"];
    let (config, hooks) = (
        data["config.toml"].as_str().expect("config.toml"),
        data["hooks.json"].as_str().expect("hooks.json"),
    );
    assert_eq!(
        config,
        shipped("config.toml"),
        "the Job carries examples/codex/config.toml"
    );
    let as_json = |text: &str| serde_json::from_str::<Value>(text).expect("hooks.json is JSON");
    assert_eq!(
        as_json(hooks),
        as_json(&shipped("hooks.json")),
        "the Job carries examples/codex/hooks.json"
    );
    assert!(
        job.contains(r#"exec codex exec --skip-git-repo-check "$GOAL""#),
        "the Job runs codex exec as this test does"
    );
    assert!(
        job.contains("mountPath: /etc/codex"),
        "the Job mounts them at /etc/codex"
    );

    let agent = Agent::new(env, &ns, key, "")
        .with_system_layer(&[("config.toml", config), ("hooks.json", hooks)]);
    agent.session(
        vec![
            Turn::text("All done."),
            write_call(key, BODY),
            Turn::text("Written; stopping."),
        ],
        &[],
    );
    let requests = agent.model.model_requests();
    assert_eq!(requests.len(), 3, "one block, one write, one end");
    let reason = format!("No handoff was written for `{key}` in this session.");
    assert!(
        input_text(&requests[1]).contains(&reason),
        "the managed Stop hook blocked: {}",
        input_text(&requests[1])
    );
    let handoff = stored(env, &ns, key).expect("the model's write is stored");
    assert_eq!(handoff["spec"]["body"], BODY);
}

/// Finding 4: Codex has a SessionEnd event, and the shipped hooks.json
/// wires it. A session whose turn fails (the model's response fails, so
/// no turn ends and no Stop hook runs) never wrote, and is rescued at its
/// end: before, without SessionEnd, nothing was stored.
#[tokio::test]
async fn a_session_whose_turn_fails_is_rescued_at_its_end() {
    let env = testing::shared();
    let ns = env.namespace("codex-end").await;
    let key = "issue-28-end";
    let agent = Agent::new(env, &ns, key, &shipped("config.toml"));
    let (ok, events, stderr) = agent.run(vec![Turn::Fail], &[TRUST_HOOKS]);
    assert!(!ok, "the session fails with its turn: {stderr}");
    assert!(
        events.iter().any(|e| e["type"] == "turn.failed"),
        "Codex reports the failed turn: {events:#?}"
    );
    let requests = agent.model.model_requests();
    assert_eq!(requests.len(), 1, "one request, which failed");
    let handoff = stored(env, &ns, key).expect("a rescue is stored at the session's end");
    let body = handoff["spec"]["body"].as_str().unwrap_or_default();
    assert!(body.starts_with("> **Rescued handoff**"), "{body}");
    assert_eq!(handoff["spec"]["kind"], "rescued");
    assert!(body.contains("Continue the work."), "the request: {body}");
}
