//! Helpers shared by the integration suites: the real MCP client (Python
//! SDK) driver, bridge processes, agent ServiceAccounts with tokens.

#![allow(dead_code)] // each suite uses a different subset

pub(crate) mod agents;
pub(crate) mod bad_args;
pub(crate) mod kubectl;
pub(crate) mod objects;
pub(crate) mod tier;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use handoff_testkit::{self as testing, BridgeProcess, TestEnv};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kube::api::{Api, PostParams};
use serde_json::Value;

/// The Python interpreter with the `mcp` SDK (`make test-deps` makes `.venv`).
pub(crate) fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("HANDOFF_MCP_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    assert!(
        venv.exists(),
        "the MCP Python SDK is missing: run `make test-deps` (creates .venv with `mcp`) or set HANDOFF_MCP_PYTHON"
    );
    venv
}

/// `handoff mcp --stdio --profile implement --namespace namespace`
/// reading `kubeconfig`, its stdin and stdout piped (stderr is the
/// caller's to set).
pub(crate) fn mcp_stdio(namespace: &str, kubeconfig: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_handoff"));
    cmd.args(["mcp", "--stdio", "--profile", "implement"])
        .args(["--namespace", namespace])
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    cmd
}

fn driver() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/mcp_driver.py")
}

/// Runs a plan through the real MCP client; one JSON result per step.
pub(crate) fn drive(mode_args: &[&str], plan: Value, extra_env: &[(&str, &str)]) -> Vec<Value> {
    let mut cmd = Command::new(python());
    cmd.arg(driver())
        .args(mode_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("python runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(plan.to_string().as_bytes())
        .expect("plan");
    let out = child.wait_with_output().expect("driver output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "MCP driver failed ({}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("driver output is not JSON ({e}): {stdout}"))
}

/// Runs a plan against `handoff mcp --stdio` with the admin kubeconfig.
pub(crate) fn drive_stdio(
    env: &TestEnv,
    namespace: &str,
    profile: &str,
    plan: Value,
) -> Vec<Value> {
    let bin = env!("CARGO_BIN_EXE_handoff");
    let kubeconfig = env.kubeconfig_path().display().to_string();
    drive(
        &[
            "stdio",
            bin,
            "mcp",
            "--stdio",
            "--profile",
            profile,
            "--namespace",
            namespace,
        ],
        plan,
        &[("KUBECONFIG", &kubeconfig)],
    )
}

/// A `handoff mcp --listen` process for one namespace, killed on drop.
pub(crate) struct Bridge {
    /// The process (logs, pid).
    pub process: BridgeProcess,
    /// `http://127.0.0.1:<port>/mcp`
    pub url: String,
}

impl Bridge {
    /// Starts a bridge on a free loopback port, acting as admin for SA lookups.
    pub(crate) fn start(env: &TestEnv, namespace: &str) -> Self {
        Self::start_with(env, namespace, &[])
    }

    /// [`Bridge::start`] with extra `handoff mcp` flags.
    pub(crate) fn start_with(env: &TestEnv, namespace: &str, extra: &[&str]) -> Self {
        let process = BridgeProcess::start(
            Path::new(env!("CARGO_BIN_EXE_handoff")),
            env.kubeconfig_path(),
            namespace,
            extra,
        )
        .unwrap_or_else(|e| panic!("the bridge did not start: {e:#}"));
        let url = process.url().to_owned();
        Self { process, url }
    }

    /// Runs a plan over HTTP with `token` and `profile` header.
    pub(crate) fn drive(&self, token: &str, profile: &str, plan: Value) -> Vec<Value> {
        drive(&["http", self.process.url(), token, profile], plan, &[])
    }

    /// Calls `tool` once per argument object in `args_list`, all at once, with
    /// `token` and no profile header; the answers, in the order of the list.
    pub(crate) fn concurrent(&self, token: &str, tool: &str, args_list: Vec<Value>) -> Vec<Value> {
        let plan = serde_json::json!([{"op": "concurrent", "tool": tool, "args_list": args_list}]);
        let mut results = self.drive(token, "", plan);
        match results[0]["results"].take() {
            Value::Array(answers) => answers,
            other => panic!("a concurrent step answers a list, got {other}"),
        }
    }
}

/// Applies `config/rbac/agent_roles.yaml` (the ClusterRoles agents are bound to).
pub(crate) fn apply_agent_roles(env: &TestEnv) {
    apply_config(env, "config/rbac/agent_roles.yaml");
}

/// Applies the committed manifest at `relative` (a path from the
/// repository's root) server-side, as GitOps would.
pub(crate) fn apply_config(env: &TestEnv, relative: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative);
    let out = env
        .kubectl()
        .args(["apply", "--server-side", "-f"])
        .arg(path)
        .output()
        .expect("kubectl");
    assert!(
        out.status.success(),
        "apply {relative}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Creates ServiceAccount `name` (labelled with `profile` when given), binds
/// it to `cluster_role` in `namespace` when given, and returns a token for it.
pub(crate) async fn agent_token(
    env: &TestEnv,
    namespace: &str,
    name: &str,
    profile: Option<&str>,
    cluster_role: Option<&str>,
) -> String {
    let client = env.client().await;
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some(name.to_owned());
    if let Some(p) = profile {
        sa.metadata.labels = Some([("handoff.dev/profile".to_owned(), p.to_owned())].into());
    }
    sas.create(&PostParams::default(), &sa)
        .await
        .expect("create ServiceAccount");
    if let Some(role) = cluster_role {
        let binding = RoleBinding {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("{name}-{role}")),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "ClusterRole".into(),
                name: role.into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: name.into(),
                namespace: Some(namespace.into()),
                ..Default::default()
            }]),
        };
        Api::<RoleBinding>::namespaced(client.clone(), namespace)
            .create(&PostParams::default(), &binding)
            .await
            .expect("create RoleBinding");
    }
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let issued = sas
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("token request");
    issued.status.and_then(|s| s.token).expect("issued token")
}

/// The shared control plane (or the existing cluster).
pub(crate) fn env() -> &'static TestEnv {
    testing::shared()
}

/// A plan step calling `tool` with `args`.
pub(crate) fn call(tool: &str, args: Value) -> Value {
    serde_json::json!({"op": "call", "tool": tool, "args": args})
}

/// The structured content of a successful call (fails the test otherwise).
pub(crate) fn ok(result: &Value) -> &Value {
    assert_eq!(
        result["is_error"],
        serde_json::json!(false),
        "expected success: {result}"
    );
    &result["structured"]
}

/// The text of a tool error (fails the test on success).
pub(crate) fn err_text(result: &Value) -> String {
    assert_eq!(
        result["is_error"],
        serde_json::json!(true),
        "expected a tool error: {result}"
    );
    result["text"].as_str().unwrap_or_default().to_owned()
}

/// The `events.k8s.io/v1` Events of `namespace` with `reason`.
pub(crate) async fn events_with_reason(
    client: kube::Client,
    namespace: &str,
    reason: &str,
) -> Vec<k8s_openapi::api::events::v1::Event> {
    Api::<k8s_openapi::api::events::v1::Event>::namespaced(client, namespace)
        .list(&kube::api::ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// Asserts that a tool list (the `tools` of a step's answer) is the
/// implement profile's as far as writes go: it writes, it does not delete
/// (`why` says where the profile came from).
pub(crate) fn assert_writes_and_does_not_delete(tools: &Value, why: &str) {
    let names: Vec<&str> = tools
        .as_array()
        .unwrap_or_else(|| panic!("no tool list: {tools}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(names.contains(&"write_handoff"), "{names:?}");
    assert!(!names.contains(&"delete_handoff"), "{why}: {names:?}");
}

/// Asserts that `text` contains each of `parts`.
pub(crate) fn assert_contains(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} not in:\n{text}");
    }
}

/// Waits until the apiserver's clock (whole seconds, as managedFields and
/// `status.updatedAt` keep time) is past `second`: a probe ConfigMap is
/// created in `namespace` until its `creationTimestamp` is later. Two
/// writes then carry distinct times, whatever the machine's load; nothing
/// depends on how long that takes.
pub(crate) async fn apiserver_clock_past(
    client: &kube::Client,
    namespace: &str,
    second: k8s_openapi::jiff::Timestamp,
) {
    use k8s_openapi::api::core::v1::ConfigMap;
    let probes: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    handoff_testkit::wait::eventually(
        &format!("the apiserver's clock past {second}"),
        std::time::Duration::from_secs(30),
        || async {
            let mut probe = ConfigMap::default();
            probe.metadata.generate_name = Some("clock-probe-".into());
            let made = probes
                .create(&PostParams::default(), &probe)
                .await
                .expect("probe");
            let name = made.metadata.name.clone().unwrap_or_default();
            probes
                .delete(&name, &kube::api::DeleteParams::default())
                .await
                .expect("delete probe");
            let at = made.metadata.creation_timestamp?.0;
            (at.as_second() > second.as_second()).then_some(())
        },
    )
    .await;
}

/// `args` (a command line of ours, without `handoff`) parses: the binary
/// accepts it with `--help` appended. `what` names where the line comes
/// from.
pub(crate) fn parses(what: &str, args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_handoff"))
        .args(args)
        .arg("--help")
        .output()
        .expect("handoff runs");
    assert!(
        out.status.success(),
        "{what}: `handoff {}` is not our CLI: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}
