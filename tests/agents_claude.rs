//! The agents tier, Claude Code half: the real `claude` CLI (pinned by
//! `tests/agents/claude/package-lock.json`, installed by `make
//! agents-claude`) runs whole `-p` sessions against the scripted Anthropic
//! Messages API of the test kit, with the shipped plugin
//! (`plugins/handoff/`: its hooks, its stdio MCP server, its skill) loaded
//! verbatim by `--plugin-dir`, the real `handoff` binary on its `PATH` and
//! the real control plane behind it. Only what a user fills in is ours: the
//! kubeconfig, the namespace, the key, the project, the API's address and a
//! fake key.
//!
//! The headersHelper scenarios (finding 12) run the CLI without the plugin,
//! against a real `handoff mcp --listen` on loopback that authenticates a
//! ServiceAccount's token with TokenReview, wired by
//! `examples/mcp/claude-code-headers-helper.mcp-config.json` as shipped:
//! where Claude Code runs the helper (`--mcp-config`, user scope, a trusted
//! project) the token reaches the bridge and `spec.createdBy` names the
//! account; where it does not (a project's `.mcp.json` without persisted
//! trust under `-p`), the model is offered no handoff tools.
//!
//! The newcomer's path (`newcomer`): the README's quickstart, its own
//! `claude -p …` line run by bash against `handoff dev`.
//!
//! Each scenario asserts what the model saw (the server's request log),
//! what was stored (the cluster) and what the CLI reported (its JSON
//! output); none waits on a clock.
//!
//! Hygiene: everything listens on 127.0.0.1; the CLI runs with an empty
//! environment but what is set here, `HOME` and `TMPDIR` in a temporary
//! directory per session (nothing of this machine's user config is read or
//! written), and nonessential traffic, telemetry, error reports and the
//! auto-updater off (`CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`, and each
//! of its parts, as Claude Code's settings documentation names them).
//! Every session runs behind [`DEAD_PROXY`] with `NO_PROXY` covering
//! loopback, so nothing else can leave the machine.

mod common;
#[path = "agents_claude/newcomer.rs"]
mod newcomer;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::agents::writer_token;
use common::apply_agent_roles;
use handoff::hook::stop_reason;
use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_testkit::model::anthropic::{Anthropic, Logged, Turn};
use handoff_testkit::{BridgeProcess, TestEnv, shared};
use handoff_transcript::rescue::{DEFAULT_MAX_TOKENS, RESCUE_MARK, approx_tokens};
use kube::api::Api;
use serde_json::{Value, json};

const REPO: &str = env!("CARGO_MANIFEST_DIR");
const PROJECT: &str = "shop";

/// The proxy of every session: nothing listens on port 9 of loopback, so a
/// request for anything but loopback (which `NO_PROXY` covers) fails here
/// instead of leaving the machine. Claude Code honours `NO_PROXY` for the
/// model's base URL and its HTTP MCP servers, and proxies even loopback
/// without it (then no request reaches the scripted model). Finding 8: the
/// hooks and the plugin's stdio bridge get Claude's whole environment and
/// still reach the apiserver on loopback (before, every `handoff` client
/// refused the environment's proxy, "requires the disabled feature
/// kube/http-proxy": no context at start, no block at stop, no tools).
const DEAD_PROXY: &str = "http://127.0.0.1:9";

/// What every session's environment holds besides its home, `TMPDIR`,
/// `PATH` and the user-filled values: the privacy switches, the tools
/// offered in the first request rather than behind tool search, and
/// [`DEAD_PROXY`] with `NO_PROXY` covering loopback.
const SESSION_ENV: &[(&str, &str)] = &[
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ("DISABLE_TELEMETRY", "1"),
    ("DISABLE_ERROR_REPORTING", "1"),
    ("DISABLE_AUTOUPDATER", "1"),
    ("DISABLE_BUG_COMMAND", "1"),
    ("ENABLE_TOOL_SEARCH", "false"),
    ("HTTPS_PROXY", DEAD_PROXY),
    ("HTTP_PROXY", DEAD_PROXY),
    ("NO_PROXY", "127.0.0.1,localhost"),
];

/// The API key of every session: the scripted model checks none.
const FAKE_API_KEY: &str = "scripted-model-no-key";

/// The pinned CLI, or a failure that says how to install it: this tier
/// never skips.
fn claude() -> PathBuf {
    let bin = Path::new(REPO).join("tests/agents/claude/node_modules/.bin/claude");
    assert!(
        bin.exists(),
        "the Claude Code CLI is not installed at {}: run `make agents-claude` \
         (npm ci --prefix tests/agents/claude, which needs the npm registry)",
        bin.display()
    );
    bin
}

/// One user's machine: a home, a working directory and a `PATH` with the
/// `handoff` binary under test, for one key in one namespace.
struct Machine {
    dir: tempfile::TempDir,
    namespace: String,
    key: String,
}

impl Machine {
    async fn new(env: &TestEnv, prefix: &str) -> Machine {
        let dir = tempfile::tempdir().expect("tempdir");
        for sub in ["home", "work", "bin", "tmp"] {
            std::fs::create_dir(dir.path().join(sub)).expect("mkdir");
        }
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_handoff"),
            dir.path().join("bin/handoff"),
        )
        .expect("symlink handoff");
        let namespace = env.namespace(prefix).await;
        Machine {
            dir,
            key: format!("acme/api#{prefix}"),
            namespace,
        }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// `claude` with this machine's environment and nothing else: the
    /// home, the `PATH`, the privacy switches, [`DEAD_PROXY`], the
    /// user-filled values.
    fn claude(&self) -> tokio::process::Command {
        let dir = self.dir.path();
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", dir.join("bin").display());
        let mut cmd = tokio::process::Command::new(claude());
        cmd.env_clear()
            .current_dir(dir.join("work"))
            .envs(SESSION_ENV.iter().copied())
            .envs([
                ("PATH", path.as_str()),
                ("HOME", &*self.home().to_string_lossy()),
                ("TMPDIR", &*dir.join("tmp").to_string_lossy()),
                ("KUBECONFIG", &*shared().kubeconfig_path().to_string_lossy()),
                ("HANDOFF_NAMESPACE", &self.namespace),
                ("CONVERSATION_OBJECT_KEY", &self.key),
                ("HANDOFF_PROJECT", PROJECT),
            ])
            .stdin(Stdio::null());
        cmd
    }

    /// [`Machine::claude`] asking the scripted `model`.
    fn claude_on(&self, model: &Anthropic) -> tokio::process::Command {
        let mut cmd = self.claude();
        cmd.envs([
            ("ANTHROPIC_BASE_URL", model.url()),
            ("ANTHROPIC_API_KEY", FAKE_API_KEY),
        ]);
        cmd
    }

    /// Runs one `claude -p` session against `model`: its JSON result.
    async fn session(&self, model: &Anthropic, prompt: &str) -> Value {
        let mut cmd = self.claude_on(model);
        cmd.args(["-p", prompt, "--output-format", "json"]);
        let output = with_plugin(&mut cmd).output().await.expect("run claude");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "claude failed ({}):\nstdout: {stdout}\nstderr: {stderr}\nrequests: {:#?}",
            output.status,
            model.log()
        );
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!("claude's output is not JSON ({e}):\n{stdout}\nstderr: {stderr}")
        })
    }

    /// Runs `claude <args>` with `--output-format stream-json` and the
    /// hooks' lifecycle events: every line the CLI printed, as JSON.
    async fn stream(&self, model: &Anthropic, args: &[&str]) -> Vec<Value> {
        let mut cmd = self.claude_on(model);
        cmd.args(args)
            .args(["--output-format", "stream-json", "--verbose"])
            .arg("--include-hook-events");
        let output = with_plugin(&mut cmd).output().await.expect("run claude");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "claude failed ({}):\nstdout: {stdout}\nstderr: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        json_lines(&stdout)
    }

    /// Runs `claude -p <prompt> <args>` without the plugin (no hooks, no
    /// stdio server: the MCP servers are the ones `args` and the files
    /// configure), with `--output-format stream-json` and `--debug`: every
    /// line it printed, as JSON, and its stderr.
    async fn bare(
        &self,
        model: &Anthropic,
        prompt: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (Vec<Value>, String) {
        let output = self
            .claude_on(model)
            .envs(env.iter().copied())
            .args(["-p", prompt, "--output-format", "stream-json", "--verbose"])
            .args(["--debug", "--allowedTools", "mcp__handoff"])
            .args(args)
            .output()
            .await
            .expect("run claude");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "claude failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
            output.status,
        );
        (json_lines(&stdout), stderr)
    }

    /// Runs `claude args` and asserts that it succeeds; else fails with
    /// `what` and its output.
    async fn claude_succeeds(&self, args: &[&str], what: &str) {
        let out = self.claude().args(args).output().await.expect("run claude");
        assert!(
            out.status.success(),
            "{what}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// What `--debug` wrote of the latest session (`~/.claude/debug/latest`).
    fn debug_log(&self) -> String {
        std::fs::read_to_string(self.home().join(".claude/debug/latest")).unwrap_or_default()
    }

    async fn stored(&self) -> Option<Handoff> {
        Api::<Handoff>::namespaced(shared().client().await, &self.namespace)
            .get_opt(&name_for_key(&self.key))
            .await
            .expect("get handoff")
    }

    fn write(&self, body: &str) -> Turn {
        Turn::tool(
            "write_handoff",
            json!({"handoff_key": self.key, "project": PROJECT, "kind": "issue", "body": body}),
        )
    }
}

/// `cmd` with the plugin as shipped and its MCP server's tools allowed.
fn with_plugin(cmd: &mut tokio::process::Command) -> &mut tokio::process::Command {
    cmd.arg("--plugin-dir")
        .arg(Path::new(REPO).join("plugins/handoff"))
        .args(["--allowedTools", "mcp__plugin_handoff_handoff"])
}

/// Every non-empty line of `stdout`, as JSON.
fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Runs `cmd`, asserts that it succeeds and returns its stdout as JSON.
fn json_out(cmd: &mut std::process::Command) -> Value {
    let out = cmd.output().expect("handoff runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// A compact body in the skill's sections, marked by `tag`.
fn body(tag: &str) -> String {
    format!(
        "## State\nThe {tag} work is half done.\n## Done\n- parsed the input\n## Next\n- write the output\n## Open questions\n- none\n## Refs\n- src/lib.rs\n"
    )
}

/// What the scripted model was asked, for failure messages.
fn asked(turns: &[Logged]) -> String {
    turns
        .iter()
        .enumerate()
        .map(|(i, t)| format!("--- turn {i}:\n{}", t.text()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn resume_session_two_starts_with_session_ones_handoff() {
    let m = Machine::new(shared(), "resume").await;
    let written = body("resume");
    let model = writes_then_stops(&m, &written, "Written; stopping.");

    let first = m.session(&model, "Parse the input.").await;
    let turns = model.turns();
    assert_eq!(first["is_error"], json!(false), "{first}");
    played_out(&model, &turns);
    let stored = m.stored().await.expect("session 1 wrote its handoff");
    assert_eq!(stored.spec.body, written);
    assert!(!stored.spec.body.starts_with(RESCUE_MARK));
    assert_eq!(
        turns.len(),
        2,
        "the Stop hook let a session with a fresh handoff end: {}",
        asked(&turns)
    );

    // Session 2 resumes with no tool call and writes its own handoff before
    // it ends (without one, its Stop hook would rightly ask for it).
    let next = body("resumed");
    model.play(vec![m.write(&next), Turn::text("Resumed and written.")]);
    let second = m.session(&model, "Continue.").await;
    let turns = model.turns();
    assert_eq!(second["result"], json!("Resumed and written."), "{second}");
    assert_eq!(turns.len(), 2, "{}", asked(&turns));
    let first_request = turns[0].text();
    assert!(
        first_request.contains("The resume work is half done."),
        "session 2's first request lacks the handoff: {first_request}"
    );
    assert!(
        turns[0].tool_uses().is_empty(),
        "session 2 called a tool before its first request: {}",
        asked(&turns)
    );
    assert_eq!(m.stored().await.expect("stored").spec.body, next);
}

/// A model that writes `written` and stops saying `then`.
fn writes_then_stops(m: &Machine, written: &str, then: &str) -> Anthropic {
    Anthropic::start(vec![m.write(written), Turn::text(then)]).expect("model")
}

/// Asserts that the model saw nothing amiss and played its whole script.
fn played_out(model: &Anthropic, turns: &[Logged]) {
    assert!(model.faults().is_empty(), "{:?}", model.faults());
    assert_eq!(
        model.left(),
        0,
        "the script was not played: {}",
        asked(turns)
    );
}

/// A fresh machine named after `tag` and its first session ("Parse the
/// input.") with a model that ends without writing, then (once Stop
/// blocks) writes `body(tag)` and stops: the machine, that body, the model
/// and the session's result.
async fn forgetful_session(tag: &str) -> (Machine, String, Anthropic, Value) {
    let m = Machine::new(shared(), tag).await;
    let written = body(tag);
    let model = Anthropic::start(vec![
        Turn::text("All done."),
        m.write(&written),
        Turn::text("Written; stopping."),
    ])
    .expect("model");
    let out = m.session(&model, "Parse the input.").await;
    (m, written, model, out)
}

#[tokio::test(flavor = "multi_thread")]
async fn forget_the_stop_hook_blocks_once_with_its_reason_then_the_model_writes() {
    let (m, written, model, out) = forgetful_session("forget").await;
    let turns = model.turns();
    assert!(model.faults().is_empty(), "{:?}", model.faults());
    assert_eq!(out["result"], json!("Written; stopping."), "{out}");
    assert_eq!(turns.len(), 3, "{}", asked(&turns));
    let reason = stop_reason(&m.key);
    assert!(
        !turns[0].text().contains(&reason),
        "the reason came before any stop: {}",
        asked(&turns)
    );
    assert!(
        turns[1].text().contains(&reason),
        "the second request lacks the stop hook's reason: {}",
        asked(&turns)
    );
    let stored = m.stored().await.expect("the model wrote after the block");
    assert_eq!(stored.spec.body, written);
    assert_eq!(stored.spec.kind.as_deref(), Some("issue"));
}

#[tokio::test(flavor = "multi_thread")]
async fn never_writes_the_guarded_stop_rescues_from_the_transcript() {
    let m = Machine::new(shared(), "never").await;
    let model = Anthropic::start(vec![
        Turn::text("All done."),
        Turn::text("Still not writing a handoff."),
    ])
    .expect("model");

    let out = m.session(&model, "Parse the input.").await;
    let turns = model.turns();
    assert_eq!(
        out["result"],
        json!("Still not writing a handoff."),
        "{out}"
    );
    assert_eq!(
        turns.len(),
        2,
        "the Stop hook blocked more than once: {}",
        asked(&turns)
    );
    assert!(turns[1].text().contains(&stop_reason(&m.key)));
    let stored = m.stored().await.expect("a rescue was written");
    let body = &stored.spec.body;
    assert!(
        body.starts_with(RESCUE_MARK),
        "not marked as rescued: {body}"
    );
    assert_eq!(stored.spec.kind.as_deref(), Some("rescued"));
    assert_eq!(stored.spec.project, PROJECT);
    assert!(
        body.contains("Still not writing a handoff.") && body.contains("Parse the input."),
        "the rescue lacks the session's last answer or first request: {body}"
    );
    assert!(approx_tokens(body) <= DEFAULT_MAX_TOKENS, "{body}");
}

/// Finding 7: the plugin as shipped passes the CLI's own strict check
/// (it failed on a missing `author`).
#[tokio::test(flavor = "multi_thread")]
async fn the_plugin_passes_claude_plugin_validate_strict() {
    let m = Machine::new(shared(), "validate").await;
    let plugin = Path::new(REPO).join("plugins/handoff");
    m.claude_succeeds(
        &["plugin", "validate", "--strict", &plugin.to_string_lossy()],
        "claude plugin validate --strict refused the plugin",
    )
    .await;
}

/// The marketplace at the repository's root passes the strict check and
/// installs the plugin, as a user does it (a local path, offline).
#[tokio::test(flavor = "multi_thread")]
async fn the_marketplace_installs_the_plugin() {
    let m = Machine::new(shared(), "marketplace").await;
    m.claude_succeeds(
        &["plugin", "validate", "--strict", REPO],
        "claude plugin validate --strict refused the marketplace",
    )
    .await;
    m.claude_succeeds(
        &["plugin", "marketplace", "add", REPO],
        "claude plugin marketplace add refused the repository",
    )
    .await;
    m.claude_succeeds(
        &["plugin", "install", "handoff@handoff-dev"],
        "claude plugin install handoff@handoff-dev failed",
    )
    .await;
    let installed =
        std::fs::read_to_string(m.home().join(".claude/plugins/installed_plugins.json"))
            .expect("installed_plugins.json");
    assert!(installed.contains("handoff@handoff-dev"), "{installed}");
}

/// Finding 6: a handoff longer than the 10,000 characters Claude Code keeps
/// of `additionalContext` reaches the model as its head and the way to the
/// rest (before, Claude Code spilled it to a file and showed a preview).
#[tokio::test(flavor = "multi_thread")]
async fn a_long_handoff_reaches_the_next_session_as_its_head_and_the_key() {
    let m = Machine::new(shared(), "cap").await;
    let done = "- checked one more part of the input against the schema, and kept notes\n";
    let long = format!(
        "## State\nThe cap work is half done.\n## Next\n- write the output\n## Done\n{}## Open questions\n- none\n## Refs\n- the-last-line-of-the-handoff\n",
        done.repeat(155)
    );
    assert!(long.len() > 11_000, "{}", long.len());
    let model = writes_then_stops(&m, &long, "Written.");
    m.session(&model, "Parse the input.").await;
    assert_eq!(m.stored().await.expect("stored").spec.body, long);

    model.play(vec![m.write(&body("cap")), Turn::text("Resumed.")]);
    m.session(&model, "Continue.").await;
    let turns = model.turns();
    let first = turns.first().expect("session 2 asked the model").text();
    assert!(
        first.contains("The cap work is half done.\n## Next\n- write the output"),
        "the head is missing: {first}"
    );
    assert!(
        first.contains(&format!(
            "Call get_handoff with handoff_key `{}` for the rest.",
            m.key
        )),
        "the context does not say where the rest is: {first}"
    );
    assert!(!first.contains("the-last-line-of-the-handoff"), "{first}");
}

/// Finding 5: Claude Code ignores `systemMessage` from PreCompact (it
/// echoes the hook's raw stdout after `/compact`), so the notice of a rescue
/// before compaction is a plain line there, not a JSON object nobody reads.
#[tokio::test(flavor = "multi_thread")]
async fn compact_rescues_before_compaction_and_says_so_in_plain_words() {
    let m = Machine::new(shared(), "compact").await;
    let model =
        Anthropic::start(vec![Turn::text("All done."), Turn::text("Still not.")]).expect("model");
    let first = m.stream(&model, &["-p", "Parse the input."]).await;
    let session = first
        .iter()
        .find_map(|l| l["session_id"].as_str())
        .expect("a session id")
        .to_owned();

    model.play(vec![Turn::text("Summary of the session.")]);
    let lines = m
        .stream(&model, &["-p", "/compact", "--resume", &session])
        .await;
    let boundary = lines
        .iter()
        .find(|l| l["subtype"] == "compact_boundary")
        .unwrap_or_else(|| panic!("no compaction: {lines:#?}"));
    assert_eq!(boundary["compact_metadata"]["trigger"], "manual");
    let said: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["message"]["content"].as_str())
        .filter(|c| c.contains("PreCompact"))
        .collect();
    assert_eq!(said.len(), 1, "{lines:#?}");
    assert!(
        said[0].contains("before compaction (trigger manual), a rescued one was extracted"),
        "{}",
        said[0]
    );
    assert!(!said[0].contains("systemMessage"), "{}", said[0]);
    // The resumed session's SessionEnd rescues again after PreCompact, so
    // what is stored is the later rescue. (Its reader does not show the
    // answer given before the compaction yet: issue 29.)
    let stored = m.stored().await.expect("rescued");
    assert!(
        stored.spec.body.starts_with(RESCUE_MARK),
        "{}",
        stored.spec.body
    );
    common::assert_contains(&stored.spec.body, &["> Parse the input."]);
}

/// Claude Code's own transcript (the JSONL under `~/.claude/projects`) is
/// read by `handoff transcript read` in order, and `handoff rescue` keeps
/// the handoff the agent wrote in that session.
#[tokio::test(flavor = "multi_thread")]
async fn the_clis_own_transcript_is_read_in_order_and_its_fresh_write_kept() {
    let (m, written, _model, out) = forgetful_session("transcript").await;
    let session = out["session_id"].as_str().expect("session_id").to_owned();
    let located = |verb: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_handoff"));
        cmd.args(verb)
            .args(["--agent", "claude", "--session", &session, "--cwd"])
            .arg(m.dir.path().join("work"))
            .arg("--agent-home")
            .arg(m.home().join(".claude"))
            .env("KUBECONFIG", shared().kubeconfig_path())
            .env("HANDOFF_NAMESPACE", &m.namespace)
            .env_remove("HANDOFF_MCP_URL");
        cmd
    };
    let read = json_out(&mut located(&["transcript", "read"]));
    let turns = read["turns"].as_array().expect("turns");
    assert_eq!(turns[0]["role"], "user", "{read:#}");
    assert_eq!(turns[0]["text"], "Parse the input.", "{read:#}");
    let answers: String = turns
        .iter()
        .filter(|t| t["role"] == "assistant")
        .filter_map(|t| t["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let (done, stopping) = (
        answers.find("All done."),
        answers.find("Written; stopping."),
    );
    assert!(
        matches!((done, stopping), (Some(a), Some(b)) if a < b),
        "the answers are not all there in order: {read:#}"
    );
    let tools: Vec<&str> = turns
        .iter()
        .flat_map(|t| t["tools"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.iter().any(|t| t.ends_with("__write_handoff")),
        "{read:#}"
    );

    let said = json_out(located(&["rescue"]).args(["--key", &m.key, "--project", PROJECT]));
    assert_eq!(said["outcome"], "kept", "{said}");
    assert_eq!(m.stored().await.expect("stored").spec.body, written);
}

/// Finding 10: a session that writes the very handoff the key already holds
/// (`unchanged`: no new `updated_at`) has written it; it is not rescued over.
#[tokio::test(flavor = "multi_thread")]
async fn an_identical_rewrite_is_not_rescued_over() {
    let m = Machine::new(shared(), "same").await;
    let written = body("same");
    let model = writes_then_stops(&m, &written, "Written.");
    m.session(&model, "Parse the input.").await;
    assert_eq!(m.stored().await.expect("stored").spec.body, written);

    model.play(vec![m.write(&written), Turn::text("Written again.")]);
    let out = m.session(&model, "Continue.").await;
    let turns = model.turns();
    assert_eq!(out["result"], json!("Written again."), "{out}");
    assert_eq!(turns.len(), 2, "the Stop hook blocked: {}", asked(&turns));
    let stored = m.stored().await.expect("stored");
    assert_eq!(stored.spec.body, written, "rescued over");
}

/// The shipped wiring for the shared bridge over HTTP, the token minted by
/// `handoff mcp-headers` (Claude Code's `headersHelper`) at every connection.
const HELPER_EXAMPLE: &str = "examples/mcp/claude-code-headers-helper.mcp-config.json";
/// What a user fills in of [`HELPER_EXAMPLE`]: the bridge's URL…
const EXAMPLE_URL: &str = "http://handoff-bridge.handoff-system.svc:8080/mcp";
/// … and the path of the projected token.
const EXAMPLE_TOKEN: &str = "/var/run/secrets/handoff/token";

/// The shared bridge of finding 12: `handoff mcp --listen` on loopback in
/// the machine's namespace, authenticating bearer tokens with TokenReview,
/// and the token of an `implement` ServiceAccount in a file, as the kubelet
/// mounts a projected one.
struct SharedBridge {
    process: BridgeProcess,
    token: PathBuf,
    /// The account's username as the apiserver authenticates it.
    username: String,
}

impl SharedBridge {
    async fn start(m: &Machine) -> SharedBridge {
        let env = shared();
        apply_agent_roles(env);
        let token = writer_token(env, &m.namespace, "coder").await;
        let path = m.dir.path().join("token");
        std::fs::write(&path, format!("{token}\n")).expect("token file");
        let process = BridgeProcess::start(
            Path::new(env!("CARGO_BIN_EXE_handoff")),
            env.kubeconfig_path(),
            &m.namespace,
            &[],
        )
        .unwrap_or_else(|e| panic!("the bridge did not start: {e:#}"));
        SharedBridge {
            process,
            token: path,
            username: format!("system:serviceaccount:{}:coder", m.namespace),
        }
    }

    /// [`HELPER_EXAMPLE`] as shipped, with this bridge's URL and token path
    /// filled in.
    fn example(&self) -> String {
        let text =
            std::fs::read_to_string(Path::new(REPO).join(HELPER_EXAMPLE)).expect("the example");
        for placeholder in [EXAMPLE_URL, EXAMPLE_TOKEN] {
            assert!(
                text.contains(placeholder),
                "{HELPER_EXAMPLE} no longer holds {placeholder}: {text}"
            );
        }
        text.replace(EXAMPLE_URL, self.process.url())
            .replace(EXAMPLE_TOKEN, &self.token.to_string_lossy())
    }
}

/// The `status` and `source` of MCP server `handoff` in the init event.
fn handoff_server(lines: &[Value]) -> (String, String) {
    let init = lines
        .iter()
        .find(|l| l["type"] == "system" && l["subtype"] == "init")
        .unwrap_or_else(|| panic!("no init event: {lines:#?}"));
    let server = init["mcp_servers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == "handoff")
        .unwrap_or_else(|| panic!("no server handoff in the init event: {init:#}"));
    let field = |k: &str| server[k].as_str().unwrap_or_default().to_owned();
    (field("status"), field("source"))
}

/// The handoff tools the model was offered in its first request.
fn handoff_tools(model: &Anthropic) -> Vec<String> {
    let turns = model.turns();
    let first = turns.first().expect("the model was asked");
    first
        .tools()
        .into_iter()
        .filter(|t| t.starts_with("mcp__handoff__"))
        .collect()
}

/// A session that may call the bridge's tools: it writes `body(tag)` and
/// stops. Asserts the model was offered the tools, the call succeeded and
/// the handoff is stored as the bridge's ServiceAccount wrote it (the token
/// reached the bridge).
async fn writes_through_the_bridge(
    m: &Machine,
    bridge: &SharedBridge,
    tag: &str,
    args: &[&str],
    source: &str,
) {
    let written = body(tag);
    let model = writes_then_stops(m, &written, "Written.");
    let (lines, stderr) = m.bare(&model, "Parse the input.", args, &[]).await;
    let turns = model.turns();
    assert_eq!(
        handoff_server(&lines),
        ("connected".to_owned(), source.to_owned()),
        "stderr: {stderr}\ndebug: {}\nbridge: {}",
        m.debug_log(),
        bridge.process.log()
    );
    assert!(
        handoff_tools(&model).contains(&"mcp__handoff__write_handoff".to_owned()),
        "{}",
        asked(&turns)
    );
    played_out(&model, &turns);
    let stored = m
        .stored()
        .await
        .expect("the model wrote through the bridge");
    assert_eq!(stored.spec.body, written);
    assert_eq!(
        stored.spec.created_by.as_deref(),
        Some(bridge.username.as_str())
    );
}

/// Finding 12, as a user meets it: the headersHelper wiring as a project's
/// `.mcp.json` (as the examples' README said to copy it) in a folder with
/// no persisted trust, under `-p`. Claude Code does not run the helper, so
/// the bridge gets no token and the model is offered no handoff tools.
#[tokio::test(flavor = "multi_thread")]
async fn headers_helper_in_a_project_mcp_json_is_not_run_under_p() {
    let m = Machine::new(shared(), "helper-project").await;
    let bridge = SharedBridge::start(&m).await;
    std::fs::write(m.dir.path().join("work/.mcp.json"), bridge.example()).expect(".mcp.json");
    let model = Anthropic::start(vec![Turn::text("No handoff tools.")]).expect("model");
    let (lines, stderr) = m.bare(&model, "Parse the input.", &[], &[]).await;
    let (status, source) = handoff_server(&lines);
    assert_eq!(source, "project", "{lines:#?}");
    assert_ne!(status, "connected", "{lines:#?}");
    assert!(
        stderr.contains("headersHelper not run") && stderr.contains("no persisted trust"),
        "{stderr}"
    );
    assert_eq!(handoff_tools(&model), Vec::<String>::new());
    assert!(m.stored().await.is_none());
}

/// Finding 12, the fix: the same file given with `--mcp-config` (what an
/// Agent Job does; Claude Code trusts the operator's command line) runs the
/// helper under `-p` in an untrusted folder, and the token reaches the
/// bridge.
#[tokio::test(flavor = "multi_thread")]
async fn headers_helper_given_with_mcp_config_reaches_the_bridge() {
    let m = Machine::new(shared(), "helper-flag").await;
    let bridge = SharedBridge::start(&m).await;
    let config = m.dir.path().join("mcp-config.json");
    std::fs::write(&config, bridge.example()).expect("config");
    let config = config.to_string_lossy();
    writes_through_the_bridge(&m, &bridge, "flag", &["--mcp-config", &config], "dynamic").await;
}

/// Finding 12, the other working place: the server at user scope
/// (`claude mcp add-json --scope user`, into `~/.claude.json`).
#[tokio::test(flavor = "multi_thread")]
async fn headers_helper_at_user_scope_reaches_the_bridge() {
    let m = Machine::new(shared(), "helper-user").await;
    let bridge = SharedBridge::start(&m).await;
    let example: Value = serde_json::from_str(&bridge.example()).expect("JSON");
    let server = example["mcpServers"]["handoff"].to_string();
    m.claude_succeeds(
        &["mcp", "add-json", "--scope", "user", "handoff", &server],
        "claude mcp add-json failed",
    )
    .await;
    writes_through_the_bridge(&m, &bridge, "user", &[], "user").await;
}

/// Finding 12, the token path: with the project's trust persisted
/// (`projects[<cwd>].hasTrustDialogAccepted` in `~/.claude.json`) Claude
/// Code runs a project's helper, but scrubs its environment of names with
/// TOKEN: a helper relying on `HANDOFF_TOKEN_FILE` mints nothing, while the
/// shipped one, naming the file with `--token-file`, works.
#[tokio::test(flavor = "multi_thread")]
async fn a_trusted_projects_helper_needs_the_token_file_in_its_command() {
    let m = Machine::new(shared(), "helper-trusted").await;
    let bridge = SharedBridge::start(&m).await;
    let work = m.dir.path().join("work");
    let trust = json!({"projects": {work.to_string_lossy(): {"hasTrustDialogAccepted": true}}});
    std::fs::write(m.home().join(".claude.json"), trust.to_string()).expect("~/.claude.json");
    let flag = format!(" --token-file {}", bridge.token.display());
    let example = bridge.example();
    assert!(example.contains(&flag), "{example}");
    std::fs::write(work.join(".mcp.json"), example.replace(&flag, "")).expect(".mcp.json");

    let model = Anthropic::start(vec![Turn::text("No handoff tools.")]).expect("model");
    let token_file = bridge.token.to_string_lossy();
    let (lines, stderr) = m
        .bare(
            &model,
            "Parse the input.",
            &[],
            &[("HANDOFF_TOKEN_FILE", &token_file)],
        )
        .await;
    assert!(!stderr.contains("headersHelper not run"), "{stderr}");
    assert!(
        m.debug_log()
            .contains("headersHelper for MCP server 'handoff' did not return a valid value"),
        "{}",
        m.debug_log()
    );
    assert_ne!(handoff_server(&lines).0, "connected", "{lines:#?}");
    assert_eq!(handoff_tools(&model), Vec::<String>::new());

    std::fs::write(work.join(".mcp.json"), example).expect(".mcp.json");
    writes_through_the_bridge(&m, &bridge, "trusted", &[], "project").await;
}
