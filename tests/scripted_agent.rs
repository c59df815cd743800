//! The e2e node's scripted agent (hack/e2e/agent, the official Go MCP SDK)
//! against the real bridge, before it runs in a Job (issue 30): over
//! streamable HTTP with a bearer token read from a file for every request
//! and the profile header, and over stdio spawning `handoff mcp --stdio`.
//! A step's expected failure passes, an unexpected one fails the agent, and
//! a token replaced mid-script is the one the next request carries.
//!
//! The agent is built by hack/e2e/build.sh (`make e2e-assets`); the control
//! plane is the test kit's, with a static token for the agent.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use handoff_testkit::image::Digest;
use handoff_testkit::{BridgeProcess, ControlPlane};
use serde_json::{Value, json};

const TOKEN: &str = "scripted-agent-token";
const NAMESPACE: &str = "default";

fn handoff() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_handoff"))
}

/// The agent of hack/e2e/build.sh's cache directory.
fn agent_binary() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/e2e/build.sh");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .expect("hack/e2e/build.sh");
    assert!(
        out.status.success(),
        "hack/e2e/build.sh failed (see above): `make e2e-assets` builds the agent"
    );
    let dir = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .expect("the cache directory")
        .trim()
        .to_owned();
    PathBuf::from(dir).join("agent")
}

struct Setup {
    _plane: ControlPlane,
    bridge: BridgeProcess,
    kubeconfig: PathBuf,
    agent: PathBuf,
    dir: tempfile::TempDir,
}

impl Setup {
    async fn start() -> Self {
        let plane = handoff_testkit::plane_with_admin_token(TOKEN, "scripted-agent")
            .await
            .unwrap_or_else(|e| panic!("control plane: {e:#}"));
        let bridge = BridgeProcess::start(handoff(), plane.kubeconfig_path(), NAMESPACE, &[])
            .unwrap_or_else(|e| panic!("bridge: {e:#}"));
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("token"), TOKEN).expect("token");
        let kubeconfig = plane.kubeconfig_path().to_owned();
        Self {
            _plane: plane,
            bridge,
            kubeconfig,
            agent: agent_binary(),
            dir,
        }
    }

    fn token_file(&self) -> PathBuf {
        self.dir.path().join("token")
    }

    /// The agent over HTTP as `profile`, running `script`.
    fn http(&self, profile: &str, script: &Value) -> Command {
        let mut command = Command::new(&self.agent);
        command
            .env("HANDOFF_MCP_URL", self.bridge.url())
            .env("HANDOFF_TOKEN_FILE", self.token_file())
            .env("HANDOFF_PROFILE", profile)
            .env("E2E_SCRIPT", script.to_string())
            .env_remove("HANDOFF_GOAL");
        command
    }
}

/// The agent's JSON lines.
fn json_lines(out: &Output) -> Vec<Value> {
    parse_lines(&String::from_utf8_lossy(&out.stdout))
}

fn parse_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn run(mut command: Command) -> Output {
    command.output().expect("the agent")
}

fn write(key: &str) -> Value {
    json!({"tool": "write_handoff", "args": {"handoff_key": key, "project": "e2e", "repo": "org/repo", "kind": "note", "body": "where I left off"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scripted_agent_drives_the_bridge_over_http_and_stdio() {
    let setup = Setup::start().await;

    let script = json!([
        {"list_tools": true},
        write("go-agent-1"),
        {"tool": "get_handoff", "args": {"handoff_key": "go-agent-1"}},
        {"tool": "list_handoffs", "args": {"project": "e2e"}},
        {"sleep_ms": 1},
        {"tool": "delete_handoff", "args": {"handoff_key": "go-agent-1"}},
    ]);
    let mut command = setup.http("refine", &script);
    command.env("HANDOFF_GOAL", "groom the project");
    let out = run(command);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{}", setup.bridge.log());
    let lines = json_lines(&out);
    assert_eq!(lines[0], json!({"goal": "groom the project"}));
    let tools = lines[1]["tools"].as_array().expect("tools");
    assert!(
        tools.contains(&json!("delete_handoff")),
        "refine may delete: {tools:?}"
    );
    assert_eq!(lines[2]["tool"], "write_handoff");
    assert_eq!(lines[2]["is_error"], false);
    assert_eq!(lines[2]["result"]["outcome"], "created", "{}", lines[2]);
    assert!(
        lines[3]["result"].to_string().contains("scripted-agent"),
        "the writer is the token's user: {}",
        lines[3]
    );
    assert!(
        lines[4]["result"].to_string().contains("go-agent-1"),
        "{}",
        lines[4]
    );
    assert_eq!(lines[5]["tool"], "delete_handoff");
    assert_eq!(lines.len(), 6, "a sleep prints nothing");

    // implement may not delete: expected, the refusal passes; unexpected, it fails the agent.
    let refused = json!({"tool": "delete_handoff", "args": {"handoff_key": "go-agent-1"}});
    let mut expected = refused.clone();
    expected["expect_error"] = json!(true);
    let out = run(setup.http("implement", &json!([expected])));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json_lines(&out)[0]["is_error"], true);
    let out = run(setup.http("implement", &json!([refused])));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("step 0: delete_handoff failed"),
        "{out:?}"
    );
    let mut succeeding = write("go-agent-2");
    succeeding["expect_error"] = json!(true);
    let out = run(setup.http("implement", &json!([succeeding])));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("expects it to fail"),
        "{out:?}"
    );

    token_is_read_for_every_request(&setup);
    stdio(&setup);
}

/// The token file replaced while the agent waits for a new token: the next
/// call carries the new (unknown) token and is refused, and each step's
/// line names the token its call carried by digest.
fn token_is_read_for_every_request(setup: &Setup) {
    let unknown = "a-token-the-apiserver-does-not-know";
    let script = json!([write("go-agent-3"), {"wait_new_token": true}, {"tool": "get_handoff", "args": {"handoff_key": "go-agent-3"}}]);
    let mut child = setup
        .http("implement", &script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agent");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("the write's line");
    assert!(first.contains(r#""is_error":false"#), "{first}");
    std::fs::write(setup.token_file(), unknown).expect("rotate");
    let mut rest = String::new();
    stdout
        .read_to_string(&mut rest)
        .expect("the agent's other lines");
    let out = child.wait_with_output().expect("agent");
    std::fs::write(setup.token_file(), TOKEN).expect("restore");
    let digest = |token: &str| Digest::of(token.as_bytes()).as_str().to_owned();
    let first: Value = serde_json::from_str(&first).expect("the write's line");
    assert_eq!(first["token"], digest(TOKEN), "{first}");
    let refused = parse_lines(&rest);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["step"], 2, "{refused:?}");
    assert_eq!(refused[0]["token"], digest(unknown), "{refused:?}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "the call after the rotation is refused"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("step 2"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `--stdio`: the agent spawns `handoff mcp --stdio` with the plane's
/// kubeconfig.
fn stdio(setup: &Setup) {
    let script = setup.dir.path().join("script.json");
    std::fs::write(&script, json!([write("go-agent-4"), {"tool": "get_handoff", "args": {"handoff_key": "go-agent-4"}}]).to_string())
        .expect("script");
    let mut command = Command::new(&setup.agent);
    command
        .args(["--stdio", "--handoff"])
        .arg(handoff())
        .arg("--script")
        .arg(&script)
        .args(["--", "--namespace", NAMESPACE, "--profile", "implement"])
        .env("KUBECONFIG", &setup.kubeconfig)
        .env_remove("E2E_SCRIPT")
        .env_remove("HANDOFF_POSTGRES_URL");
    let out = run(command);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out);
    assert_eq!(lines[0]["result"]["outcome"], "created", "{}", lines[0]);
    assert!(
        lines[1]["result"].to_string().contains("go-agent-4"),
        "{}",
        lines[1]
    );
}
