//! Agent: the agent Job examples (`examples/agent/agent-job.yaml`, Claude
//! Code; `examples/agent/codex-agent-job.yaml`, Codex) as shipped, with only
//! their container's image, command, args and env changed ([`as_scripted`])
//! to run the scripted agent (`hack/e2e/agent/`) in place of an agent CLI we
//! do not have. The rest stays verbatim: the ServiceAccount
//! `agent-implement`, the projected token, the kubeconfig ConfigMap, the
//! security contexts, the labels.
//!
//! - Over stdio, as the examples wire it: the agent spawns `handoff mcp
//!   --stdio` with the arguments of the example's own MCP configuration, and
//!   the bridge reaches the apiserver through the `kubernetes` Service with
//!   the ConfigMap's kubeconfig (the projected token file, the projected CA).
//! - Over HTTP, as the example's notes offer: the bridge's Service name
//!   (`handoff-bridge.handoff-system.svc`, resolved by the cluster DNS),
//!   with the projected token read again for every request.
//!
//! Token rotation: the kubelet refreshes a projected token once 80% of its
//! life has passed (at least 8 of 10 minutes, the shortest lifetime the
//! apiserver issues), too long to wait for here. What is shown instead:
//! the kubelet's token is the example's (bound to the Pod, living
//! `expirationSeconds`), and when the token file changes under a running
//! agent the way the kubelet changes it (a new timestamped directory, the
//! `..data` link swapped), the agent's next request carries the new token,
//! without a restart: a write made while the file holds another account's
//! token is stored as that account, and the run's last write, after a
//! freshly issued Pod-bound token of its own account, as its own. The agent
//! waits for each new token (`wait_new_token`) and logs the digest of the
//! token each call carried, so the kubelet writing its own token back while
//! the test swaps (it resyncs the volume about once a minute) can neither
//! make a write go out with the old token nor pass unnoticed. Not shown:
//! the kubelet's refresh itself (its timing is its own).

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use handoff_core::api::Handoff;
use handoff_testkit::image::Digest;

use crate::harness::{SYSTEM, UNDISTURBED, e2e, kubectl, kubectl_stdin, must, with_cluster};
use crate::images::AGENT_IMAGE;
use crate::install::{diagnose, installed};
use handoff_testkit::wait::eventually;

/// The identity the examples' Jobs run as.
pub(crate) const AGENT_USER: &str = "system:serviceaccount:handoff-system:agent-implement";

/// How the example's agent container is replaced by the scripted agent.
pub(crate) struct Scripted<'a> {
    /// The Job's name (the shipped one, or another for a second run).
    pub(crate) job_name: &'a str,
    /// The container's command (`/agent ...`).
    pub(crate) command: Vec<String>,
    /// The container's args (for `--stdio`: those of `handoff mcp --stdio`).
    pub(crate) args: Vec<String>,
    /// Variables added to the shipped env (a shipped one of the same name is
    /// replaced).
    pub(crate) env: Vec<(&'a str, String)>,
}

/// Pure: the example's objects with its Job's agent container running the
/// scripted agent; every other object and field as shipped.
pub(crate) fn as_scripted(mut objects: Vec<Value>, scripted: &Scripted<'_>) -> Vec<Value> {
    for object in &mut objects {
        if object["kind"] != "Job" {
            continue;
        }
        object["metadata"]["name"] = json!(scripted.job_name);
        let containers = object["spec"]["template"]["spec"]["containers"].as_array_mut();
        for container in containers.into_iter().flatten() {
            container["image"] = json!(AGENT_IMAGE);
            container["imagePullPolicy"] = json!("Never");
            container["command"] = json!(scripted.command);
            container["args"] = json!(scripted.args);
            let mut env: Vec<Value> = container["env"].as_array().cloned().unwrap_or_default();
            env.retain(|var| !scripted.env.iter().any(|(name, _)| var["name"] == *name));
            env.extend(
                scripted
                    .env
                    .iter()
                    .map(|(name, value)| json!({"name": name, "value": value})),
            );
            container["env"] = json!(env);
        }
    }
    objects
}

/// Pure: the arguments after `mcp --stdio` that the example's own MCP
/// configuration gives the bridge (Claude Code's `mcp.json`, passed with
/// `--mcp-config`; Codex's `config.toml`; in the example's first ConfigMap).
pub(crate) fn stdio_bridge_args(objects: &[Value]) -> anyhow::Result<Vec<String>> {
    let data = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap")
        .map(|o| &o["data"])
        .ok_or_else(|| anyhow::anyhow!("the example has no ConfigMap"))?;
    let args: Vec<String> = if let Some(mcp) = data["mcp.json"].as_str() {
        let config: Value = serde_json::from_str(mcp)?;
        serde_json::from_value(config["mcpServers"]["handoff"]["args"].clone())?
    } else if let Some(codex) = data["config.toml"].as_str() {
        let config: toml::Table = toml::from_str(codex)?;
        config
            .get("mcp_servers")
            .and_then(|s| s.get("handoff"))
            .and_then(|h| h.get("args"))
            .and_then(|a| a.as_array())
            .ok_or_else(|| anyhow::anyhow!("config.toml has no mcp_servers.handoff.args"))?
            .iter()
            .map(|a| a.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| anyhow::anyhow!("an argument is not a string"))?
    } else {
        anyhow::bail!("the ConfigMap has neither mcp.json nor config.toml");
    };
    match args.as_slice() {
        [mcp, stdio, rest @ ..] if mcp == "mcp" && stdio == "--stdio" => Ok(rest.to_vec()),
        _ => anyhow::bail!("the bridge is not started as `handoff mcp --stdio`: {args:?}"),
    }
}

/// Pure: the JSON lines of the agent's log (other lines are skipped).
pub(crate) fn log_lines(log: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The line the agent printed for step `n` of its script.
pub(crate) fn step(lines: &[Value], n: u64) -> &Value {
    lines
        .iter()
        .find(|l| l["step"] == n)
        .unwrap_or_else(|| panic!("no step {n} in the log: {lines:?}"))
}

/// The goal the agent printed (`HANDOFF_GOAL`), "" when none.
pub(crate) fn goal(lines: &[Value]) -> &str {
    lines
        .iter()
        .find_map(|l| l["goal"].as_str())
        .unwrap_or_default()
}

/// Pure: the claims of a JWT (its middle part), `None` when it is not one.
pub(crate) fn jwt_claims(token: &str) -> Option<Value> {
    use base64::Engine as _;
    let payload = token.trim().split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

pub(crate) fn example(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(crate::common::kubectl::root().join(path))
        .unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_saphyr::from_str_multiple(&text).unwrap_or_else(|e| panic!("{path} is not YAML: {e}"))
}

pub(crate) fn apply(objects: Vec<Value>) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    let applied = kubectl_stdin(&["apply", "--server-side", "-f", "-"], &list.to_string());
    let warnings = String::from_utf8_lossy(&applied.stderr).into_owned();
    must(applied, "apply the agent example");
    assert!(
        !warnings.contains("PodSecurity"),
        "the agent Job must meet the restricted Pod Security Standard: {warnings}"
    );
}

/// The agent's log (its container's stdout).
pub(crate) fn job_log(job: &str) -> String {
    must(
        kubectl(&["-n", SYSTEM, "logs", &format!("job/{job}")]),
        "the agent's log",
    )
}

/// Waits for the Job to succeed; panics with its log when it fails.
pub(crate) async fn completed(job: &str) {
    let jobs: Api<Job> = Api::namespaced(e2e().env.client().await, SYSTEM);
    let outcome = eventually(
        &format!("job/{job} finishes"),
        Duration::from_secs(180),
        || {
            let jobs = jobs.clone();
            async move {
                let status = jobs
                    .get(job)
                    .await
                    .map_err(|e| e.to_string())?
                    .status
                    .unwrap_or_default();
                match (status.succeeded.unwrap_or(0), status.failed.unwrap_or(0)) {
                    (0, 0) => Err(format!("active {:?}", status.active)),
                    (succeeded, _) => Ok(succeeded > 0),
                }
            }
        },
    )
    .await;
    if !outcome {
        let log = kubectl(&["-n", SYSTEM, "logs", &format!("job/{job}")]);
        panic!(
            "job/{job} failed:\n{}{}\n{}",
            String::from_utf8_lossy(&log.stdout),
            String::from_utf8_lossy(&log.stderr),
            diagnose()
        );
    }
}

/// The stored Handoff of `key` in the installation's namespace.
pub(crate) async fn stored(key: &str) -> Handoff {
    let api: Api<Handoff> = Api::namespaced(e2e().env.client().await, SYSTEM);
    api.list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list handoffs: {e}"))
        .items
        .into_iter()
        .find(|h| h.spec.handoff_key == key)
        .unwrap_or_else(|| panic!("no handoff for {key}"))
}

/// The script of a stdio run: the tools offered, a write, the read back,
/// and a delete that the `implement` profile does not offer.
fn stdio_script(key: &str, body: &str) -> String {
    json!([
        {"list_tools": true},
        {"tool": "write_handoff", "args": {"handoff_key": key, "project": "shop", "kind": "issue", "body": body}},
        {"tool": "get_handoff", "args": {"handoff_key": key}},
        {"tool": "delete_handoff", "args": {"handoff_key": key}, "expect_error": true},
    ])
    .to_string()
}

/// Runs an example's Job over stdio and checks its log and what it stored.
async fn stdio_run(path: &str, job: &str, key: &str) {
    installed();
    let objects = example(path);
    let args = stdio_bridge_args(&objects).unwrap_or_else(|e| panic!("{path}: {e:#}"));
    let body = format!("## State\nWritten by the scripted agent of {path} over stdio.\n");
    apply(as_scripted(
        objects,
        &Scripted {
            job_name: job,
            command: ["/agent", "--stdio", "--handoff", "/handoff", "--"]
                .map(String::from)
                .to_vec(),
            args,
            env: vec![("E2E_SCRIPT", stdio_script(key, &body))],
        },
    ));
    completed(job).await;

    let lines = log_lines(&job_log(job));
    assert_eq!(
        goal(&lines),
        "Implement issue acme/api#42: wire --format into the CLI.",
        "the example's goal: {lines:?}"
    );
    crate::common::assert_writes_and_does_not_delete(
        &step(&lines, 0)["tools"],
        "the implement profile offers no delete",
    );
    let (write, get, delete) = (step(&lines, 1), step(&lines, 2), step(&lines, 3));
    assert_eq!(write["tool"], "write_handoff");
    assert_eq!(write["is_error"], false, "{write}");
    assert_eq!(get["result"]["found"], true, "{get}");
    assert_eq!(get["result"]["handoff"]["body"], body, "{get}");
    assert_eq!(delete["tool"], "delete_handoff");
    assert_eq!(delete["is_error"], true, "{delete}");

    let handoff = stored(key).await;
    assert_eq!(handoff.spec.created_by.as_deref(), Some(AGENT_USER));
    assert_eq!(handoff.spec.body, body);
    assert_eq!(handoff.spec.project, "shop");
}

#[tokio::test]
async fn the_claude_agent_job_writes_and_reads_over_stdio_as_its_service_account() {
    let _undisturbed = UNDISTURBED.read().await;
    stdio_run(
        "examples/agent/agent-job.yaml",
        "implement-acme-api-42",
        "acme/api#42",
    )
    .await;
}

#[tokio::test]
async fn the_codex_agent_job_writes_and_reads_over_stdio_as_its_service_account() {
    let _undisturbed = UNDISTURBED.read().await;
    installed();
    // The example's model key, which the operator creates; the scripted
    // agent needs none.
    must(
        kubectl_stdin(
            &["apply", "--server-side", "-f", "-"],
            &json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "codex-api-key", "namespace": SYSTEM},
                    "stringData": {"key": "unused"}})
            .to_string(),
        ),
        "the codex-api-key Secret",
    );
    stdio_run(
        "examples/agent/codex-agent-job.yaml",
        "implement-codex-acme-api-42",
        "acme/api#42-codex",
    )
    .await;
}

/// The Pod's projected token volume, as the kubelet laid it out on the node.
fn token_volume(pod_uid: &str) -> PathBuf {
    with_cluster(|c| {
        c.dir().join(format!(
            "kubelet/pods/{pod_uid}/volumes/kubernetes.io~projected/handoff-token"
        ))
    })
}

/// Puts `token` in the volume as the kubelet's atomic writer does: the
/// files in a new directory, then the `..data` link swapped to it, with the
/// owner and mode of the current token file.
fn swap_token(volume: &Path, token: &str, generation: usize) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let current = volume.join("token");
    let meta = std::fs::metadata(&current).unwrap_or_else(|e| panic!("the token file: {e}"));
    let ca = std::fs::read(volume.join("ca.crt")).unwrap_or_else(|e| panic!("ca.crt: {e}"));
    let dir_name = format!("..e2e_{generation}");
    let dir = volume.join(&dir_name);
    std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for (name, content) in [("token", token.as_bytes()), ("ca.crt", ca.as_slice())] {
        let file = dir.join(name);
        std::fs::write(&file, content).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(meta.mode() & 0o777))
            .unwrap_or_else(|e| panic!("chmod {}: {e}", file.display()));
        std::os::unix::fs::chown(&file, Some(meta.uid()), Some(meta.gid()))
            .unwrap_or_else(|e| panic!("chown {}: {e}", file.display()));
    }
    let link = volume.join("..data_e2e");
    std::os::unix::fs::symlink(&dir_name, &link).unwrap_or_else(|e| panic!("symlink: {e}"));
    std::fs::rename(&link, volume.join("..data")).unwrap_or_else(|e| panic!("swap ..data: {e}"));
}

/// Keeps `token`, if any, in the volume (the kubelet writes its own back
/// when it resyncs the volume) until the agent has logged step `step`.
async fn hold_token_until_step(
    job: &str,
    volume: &Path,
    token: Option<&str>,
    step: u64,
) -> Vec<Value> {
    let mut generation = step as usize * 1000;
    eventually(
        &format!("job/{job} logs step {step}"),
        Duration::from_secs(90),
        || {
            let current = std::fs::read_to_string(volume.join("token")).unwrap_or_default();
            if let Some(token) = token.filter(|t| t.trim() != current.trim()) {
                generation += 1;
                swap_token(volume, token, generation);
            }
            let log = kubectl(&["-n", SYSTEM, "logs", &format!("job/{job}")]);
            let lines = log_lines(&String::from_utf8_lossy(&log.stdout));
            async move {
                if lines.iter().any(|l| l["step"] == step) {
                    Ok(lines)
                } else {
                    Err(format!("{lines:?}"))
                }
            }
        },
    )
    .await
}

#[tokio::test]
async fn the_agent_job_reaches_the_bridge_by_its_service_name_and_follows_a_rotated_token() {
    let _undisturbed = UNDISTURBED.read().await;
    installed();
    let job = "implement-acme-api-42-http";
    let keys = ["acme/api#44-a", "acme/api#44-b", "acme/api#44-c"];
    let write = |key: &str| {
        json!({"tool": "write_handoff", "args": {"handoff_key": key, "project": "shop",
               "body": format!("## State\n{key} over HTTP.\n")}})
    };
    // At steps 1 and 3 the agent waits for the test to change the token file.
    let script = json!([
        write(keys[0]),
        {"wait_new_token": true},
        write(keys[1]),
        {"wait_new_token": true},
        write(keys[2]),
        {"tool": "get_handoff", "args": {"handoff_key": keys[2]}},
    ]);
    apply(as_scripted(
        example("examples/agent/agent-job.yaml"),
        &Scripted {
            job_name: job,
            command: vec!["/agent".into()],
            args: vec![],
            env: vec![
                (
                    "HANDOFF_MCP_URL",
                    "http://handoff-bridge.handoff-system.svc:8080/mcp".into(),
                ),
                (
                    "HANDOFF_TOKEN_FILE",
                    "/var/run/secrets/handoff/token".into(),
                ),
                ("E2E_SCRIPT", script.to_string()),
            ],
        },
    ));

    let pods: Api<Pod> = Api::namespaced(e2e().env.client().await, SYSTEM);
    let pod = eventually(
        &format!("job/{job}'s pod runs"),
        Duration::from_secs(120),
        || {
            let pods = pods.clone();
            async move {
                let list = pods
                    .list(&ListParams::default().labels(&format!("job-name={job}")))
                    .await
                    .map_err(|e| e.to_string())?;
                list.items
                    .into_iter()
                    .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                    .ok_or_else(|| "no running pod".to_owned())
            }
        },
    )
    .await;
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
    let volume = token_volume(&pod_uid);

    // The kubelet's token: the example's lifetime, bound to this Pod.
    let first = std::fs::read_to_string(volume.join("token"))
        .unwrap_or_else(|e| panic!("the kubelet's token in {}: {e}", volume.display()));
    let claims = jwt_claims(&first).unwrap_or_else(|| panic!("not a JWT: {first}"));
    assert_eq!(claims["sub"], AGENT_USER, "{claims}");
    assert_eq!(
        claims["kubernetes.io"]["pod"]["uid"], pod_uid,
        "bound to the Pod: {claims}"
    );
    let lifetime = claims["exp"].as_i64().unwrap_or(0) - claims["iat"].as_i64().unwrap_or(0);
    assert_eq!(lifetime, 3600, "the example's expirationSeconds: {claims}");

    // Step 0 was written with it; then, while the agent waits, another
    // account's token; step 2 must be stored as that account.
    let other = must(
        kubectl(&[
            "-n",
            SYSTEM,
            "create",
            "token",
            "agent-issue-lifecycle",
            "--duration=10m",
        ]),
        "a token of agent-issue-lifecycle",
    );
    hold_token_until_step(job, &volume, None, 0).await;
    hold_token_until_step(job, &volume, Some(&other), 2).await;

    // Then what the kubelet's refresh writes: a new token of the Pod's own
    // account, bound to the Pod.
    let rotated = must(
        kubectl(&[
            "-n",
            SYSTEM,
            "create",
            "token",
            "agent-implement",
            "--bound-object-kind=Pod",
            &format!("--bound-object-name={pod_name}"),
            &format!("--bound-object-uid={pod_uid}"),
            "--duration=10m",
        ]),
        "a rotated token of agent-implement",
    );
    assert_ne!(rotated.trim(), first.trim(), "a new token");
    hold_token_until_step(job, &volume, Some(&rotated), 4).await;
    completed(job).await;

    let lines = log_lines(&job_log(job));
    for n in [0, 2, 4, 5] {
        assert_eq!(step(&lines, n)["is_error"], false, "{lines:?}");
    }
    let digest = |token: &str| Digest::of(token.trim().as_bytes()).as_str().to_owned();
    for (n, token, which) in [
        (0, &first, "the kubelet's"),
        (2, &other, "agent-issue-lifecycle's"),
        (4, &rotated, "the rotated"),
    ] {
        assert_eq!(
            step(&lines, n)["token"],
            digest(token),
            "step {n} carried {which} token: {lines:?}"
        );
    }
    let created_by = |h: Handoff| h.spec.created_by.unwrap_or_default();
    assert_eq!(created_by(stored(keys[0]).await), AGENT_USER);
    assert_eq!(
        created_by(stored(keys[1]).await),
        "system:serviceaccount:handoff-system:agent-issue-lifecycle",
        "the agent sent the token the file held at that request"
    );
    assert_eq!(
        created_by(stored(keys[2]).await),
        AGENT_USER,
        "the last write, after the rotation, as the Pod's own account"
    );
}

#[test]
fn only_the_agent_container_of_the_example_changes() {
    let objects = vec![
        json!({"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}}),
        json!({"kind": "Job", "metadata": {"name": "shipped", "labels": {"l": "v"}},
               "spec": {"template": {"spec": {
                 "serviceAccountName": "agent-implement",
                 "automountServiceAccountToken": false,
                 "containers": [{"name": "agent", "image": "ghcr.io/x:1",
                   "command": ["sh", "-c"], "args": ["exec claude"],
                   "env": [{"name": "KUBECONFIG", "value": "/k"},
                           {"name": "HANDOFF_GOAL", "value": "g"}],
                   "securityContext": {"readOnlyRootFilesystem": true},
                   "volumeMounts": [{"name": "t", "mountPath": "/t"}]}],
                 "volumes": [{"name": "t", "projected": {}}]}}}}),
    ];
    let out = as_scripted(
        objects.clone(),
        &Scripted {
            job_name: "renamed",
            command: vec!["/agent".into()],
            args: vec!["--namespace".into(), "n".into()],
            env: vec![("HANDOFF_GOAL", "h".into()), ("E2E_SCRIPT", "[]".into())],
        },
    );
    assert_eq!(out[0], objects[0], "the ConfigMap as shipped");
    assert_eq!(out[1]["metadata"]["name"], "renamed");
    assert_eq!(
        out[1]["metadata"]["labels"],
        objects[1]["metadata"]["labels"]
    );
    let container = &out[1]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], AGENT_IMAGE);
    assert_eq!(container["imagePullPolicy"], "Never");
    assert_eq!(container["command"], json!(["/agent"]));
    assert_eq!(container["args"], json!(["--namespace", "n"]));
    assert_eq!(
        container["env"],
        json!([{"name": "KUBECONFIG", "value": "/k"},
               {"name": "HANDOFF_GOAL", "value": "h"},
               {"name": "E2E_SCRIPT", "value": "[]"}])
    );
    // Everything else as shipped.
    let mut rest = out[1].clone();
    let mut shipped = objects[1].clone();
    for object in [&mut rest, &mut shipped] {
        object["metadata"]["name"] = json!(null);
        let c = &mut object["spec"]["template"]["spec"]["containers"][0];
        for field in ["image", "imagePullPolicy", "command", "args", "env"] {
            c[field] = json!(null);
        }
    }
    assert_eq!(rest, shipped);
}

#[test]
fn the_stdio_bridge_is_started_with_the_examples_own_arguments() {
    let claude = example("examples/agent/agent-job.yaml");
    assert_eq!(
        stdio_bridge_args(&claude).ok(),
        Some(vec!["--namespace".to_owned(), "handoff-system".to_owned()])
    );
    let codex = example("examples/agent/codex-agent-job.yaml");
    assert_eq!(
        stdio_bridge_args(&codex).ok(),
        Some(vec!["--profile".to_owned(), "implement".to_owned()])
    );
    let cases = [
        (
            json!({"mcp.json": r#"{"mcpServers": {"handoff": {"args": ["mcp"]}}}"#}),
            None,
        ),
        (
            json!({"config.toml": "[mcp_servers.handoff]\nargs = [\"mcp\", \"--stdio\"]\n"}),
            Some(vec![]),
        ),
        (json!({"other": "x"}), None),
    ];
    for (data, want) in cases {
        let objects = [json!({"kind": "ConfigMap", "data": data})];
        assert_eq!(stdio_bridge_args(&objects).ok(), want, "{data}");
    }
}

#[test]
fn a_tokens_claims_are_its_middle_part() {
    use base64::Engine as _;
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"sub":"s"}"#);
    assert_eq!(
        jwt_claims(&format!("h.{payload}.sig\n")),
        Some(json!({"sub": "s"}))
    );
    assert_eq!(jwt_claims("not a token"), None);
    assert_eq!(jwt_claims("a.!!.c"), None);
    assert_eq!(
        log_lines("{\"step\":0}\nagent: x\n{\"goal\":\"g\"}"),
        vec![json!({"step": 0}), json!({"goal": "g"})]
    );
}
