//! The Claude Code Job (`examples/agent/agent-job.yaml`) as shipped, run
//! by the real `claude` CLI (the pinned one, `make agents-claude`) in a Pod
//! of the node, against the test kit's scripted Anthropic Messages API.
//!
//! Changed from the file, and only what a user fills in ([`as_shipped`]):
//! the image (the CLI with `handoff`, [`handoff_testkit::claude_image`]),
//! the API key Secret's value, `ANTHROPIC_BASE_URL` (the scripted server on
//! the pod network's gateway: the Pods reach it, nothing beyond this
//! machine does), and for a second run beside the scripted-agent scenarios
//! the Job's name and the continuation key. Hygiene, as in the agents tier
//! (tests/agents_claude.rs): nonessential traffic off, and a dead proxy
//! with `NO_PROXY` naming only the model and the apiserver, so nothing
//! else leaves the Pod.
//!
//! Asserted: the model was offered the handoff tools (`mcp__handoff__…`,
//! from `--mcp-config`) and the skill (copied from ConfigMap
//! `handoff-skill`); the scripted `write_handoff` is stored with
//! `spec.createdBy` the Job's ServiceAccount; the Job succeeds; and a
//! second run's first request carries the first run's handoff (the
//! SessionStart hook of the Job's settings.json).
//!
//! The image is large (the CLI is ~400 MB): it is written and imported
//! here, once, not with the node's images; the time it takes is printed.

use std::time::Instant;

use serde_json::{Value, json};

use handoff_testkit::claude_image::{CLAUDE_IMAGE, claude_image, pinned_claude};
use handoff_testkit::image::static_handoff_binary;
use handoff_testkit::model::anthropic::{Anthropic, Logged, Turn};

use crate::agent::{AGENT_USER, apply, completed, example, stored};
use crate::harness::{UNDISTURBED, with_cluster};
use crate::install::installed;

const EXAMPLE: &str = "examples/agent/agent-job.yaml";
/// This scenario's continuation key (the scripted-agent runs use the
/// example's own).
const KEY: &str = "acme/api#42-claude";
/// The dead proxy of every request but the model's and the apiserver's.
const DEAD_PROXY: &str = "http://127.0.0.1:9";

/// What a user fills in before applying the example.
pub(crate) struct Shipped<'a> {
    pub(crate) job_name: &'a str,
    pub(crate) image: &'a str,
    pub(crate) api_key: &'a str,
    /// `ANTHROPIC_BASE_URL`.
    pub(crate) base_url: &'a str,
    /// Variables added to (or replacing those of) the container's env.
    pub(crate) env: Vec<(&'a str, String)>,
}

/// Pure: the example's objects with what `shipped` fills in; the command,
/// args, volumes, mounts and everything else as shipped.
pub(crate) fn as_shipped(mut objects: Vec<Value>, shipped: &Shipped<'_>) -> Vec<Value> {
    let mut env = vec![("ANTHROPIC_BASE_URL", shipped.base_url.to_owned())];
    env.extend(shipped.env.iter().cloned());
    for object in &mut objects {
        match object["kind"].as_str() {
            Some("Secret") => object["stringData"]["key"] = json!(shipped.api_key),
            Some("Job") => {
                object["metadata"]["name"] = json!(shipped.job_name);
                let containers = object["spec"]["template"]["spec"]["containers"].as_array_mut();
                for container in containers.into_iter().flatten() {
                    container["image"] = json!(shipped.image);
                    container["imagePullPolicy"] = json!("Never");
                    let mut vars = container["env"].as_array().cloned().unwrap_or_default();
                    vars.retain(|var| !env.iter().any(|(name, _)| var["name"] == *name));
                    vars.extend(
                        env.iter()
                            .map(|(name, value)| json!({"name": name, "value": value})),
                    );
                    container["env"] = json!(vars);
                }
            }
            _ => {}
        }
    }
    objects
}

/// Pure: the `description` of a SKILL.md's frontmatter.
pub(crate) fn skill_description(skill: &str) -> anyhow::Result<String> {
    let front = skill
        .strip_prefix("---\n")
        .and_then(|rest| rest.split_once("\n---\n"))
        .map(|(front, _)| front)
        .ok_or_else(|| anyhow::anyhow!("SKILL.md has no frontmatter between --- lines"))?;
    let fields: Value = serde_saphyr::from_str(front)?;
    fields["description"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("SKILL.md's frontmatter has no description"))
}

/// Every string of a JSON value (the request's system prompt, messages and
/// tool descriptions alike).
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
        Value::Object(map) => map.values().for_each(|i| strings(i, out)),
        _ => {}
    }
}

/// Writes the Claude image and imports it into the node, once; prints how
/// long that took.
fn claude_image_imported() {
    static DONE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let started = Instant::now();
        let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let spec = pinned_claude(workspace)
            .and_then(|claude| claude_image(&claude, &static_handoff_binary(workspace)?))
            .unwrap_or_else(|e| panic!("the Claude image: {e:#}"));
        let dir = tempfile::Builder::new()
            .prefix("handoff-claude-image-")
            .tempdir()
            .unwrap_or_else(|e| panic!("a temporary directory: {e}"));
        let archive = dir.path().join("claude.tar");
        spec.write_archive(&archive)
            .unwrap_or_else(|e| panic!("write {CLAUDE_IMAGE}: {e:#}"));
        let written = started.elapsed();
        with_cluster(|c| c.import(&archive)).unwrap_or_else(|e| panic!("{e:#}"));
        eprintln!(
            "{CLAUDE_IMAGE}: written in {written:?}, imported in {:?}",
            started.elapsed() - written
        );
    });
}

/// The request log, for failure messages.
fn asked(log: &[Logged]) -> String {
    log.iter()
        .enumerate()
        .map(|(i, r)| format!("--- {i} {} {}:\n{}", r.method, r.path, r.text()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Applies the example for one run and waits for its Job to succeed.
async fn run(model: &Anthropic, job_name: &str) {
    let gateway = with_cluster(|c| c.network().gateway);
    apply(as_shipped(
        example(EXAMPLE),
        &Shipped {
            job_name,
            image: CLAUDE_IMAGE,
            api_key: "scripted-model-no-key",
            base_url: model.url(),
            env: vec![
                ("CONVERSATION_OBJECT_KEY", KEY.to_owned()),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
                ("HTTPS_PROXY", DEAD_PROXY.to_owned()),
                ("HTTP_PROXY", DEAD_PROXY.to_owned()),
                ("NO_PROXY", format!("{gateway},kubernetes.default.svc")),
            ],
        },
    ));
    completed(job_name).await;
}

fn write(body: &str) -> Turn {
    Turn::tool(
        "write_handoff",
        json!({"handoff_key": KEY, "project": "shop", "kind": "issue", "body": body}),
    )
}

#[tokio::test]
async fn the_shipped_claude_job_runs_the_real_cli_and_writes_as_its_service_account() {
    let _undisturbed = UNDISTURBED.read().await;
    installed();
    claude_image_imported();
    let gateway = with_cluster(|c| c.network().gateway);
    let body = "## State\nWritten by the real Claude Code in the shipped Job.\n";
    let model = Anthropic::start_on(gateway.into(), vec![write(body), Turn::text("Written.")])
        .unwrap_or_else(|e| panic!("the scripted model on {gateway}: {e:#}"));

    let started = Instant::now();
    run(&model, "implement-claude-acme-api-42").await;
    eprintln!("the first run: {:?}", started.elapsed());
    let log = model.log();
    let turns = model.turns();
    let first = turns
        .first()
        .unwrap_or_else(|| panic!("no agent turn reached the model:\n{}", asked(&log)));
    let tools = first.tools();
    for tool in ["mcp__handoff__write_handoff", "mcp__handoff__get_handoff"] {
        assert!(
            tools.iter().any(|t| t == tool),
            "the model was not offered {tool} (--mcp-config): {tools:?}"
        );
    }
    let objects = example(EXAMPLE);
    let skill = objects
        .iter()
        .find(|o| o["metadata"]["name"] == "handoff-skill")
        .and_then(|o| o["data"]["SKILL.md"].as_str())
        .unwrap_or_else(|| panic!("{EXAMPLE} has no ConfigMap handoff-skill with SKILL.md"));
    let description = skill_description(skill).unwrap_or_else(|e| panic!("{e:#}"));
    let mut seen = Vec::new();
    strings(&first.body, &mut seen);
    let prefix: String = description.chars().take(60).collect();
    assert!(
        seen.iter().any(|s| s.contains(&prefix)),
        "the model was not shown the skill ({prefix:?}):\n{}",
        asked(&turns)
    );
    let handoff = stored(KEY).await;
    assert_eq!(handoff.spec.body, body);
    assert_eq!(
        handoff.spec.created_by.as_deref(),
        Some(AGENT_USER),
        "written as the Job's ServiceAccount"
    );
    assert_eq!(model.left(), 0, "the script played out:\n{}", asked(&turns));
    assert_eq!(model.faults(), Vec::<String>::new());

    // A second run of the same key starts with the first one's handoff.
    let next = "## State\nResumed by the second run.\n";
    model.play(vec![write(next), Turn::text("Resumed.")]);
    run(&model, "implement-claude-acme-api-42-resume").await;
    let turns = model.turns();
    let first = turns
        .first()
        .unwrap_or_else(|| panic!("no agent turn in the second run:\n{}", asked(&model.log())));
    assert!(
        first
            .text()
            .contains("Written by the real Claude Code in the shipped Job."),
        "the SessionStart hook did not give the second run the handoff:\n{}",
        asked(&turns)
    );
    assert_eq!(stored(KEY).await.spec.body, next);
    eprintln!("both runs: {:?}", started.elapsed());
}

#[test]
fn only_what_a_user_fills_in_changes() {
    let objects = vec![
        json!({"kind": "Secret", "metadata": {"name": "k"}, "stringData": {"key": "replace-me"}}),
        json!({"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}}),
        json!({"kind": "Job", "metadata": {"name": "shipped"},
               "spec": {"template": {"spec": {"containers": [{
                   "name": "agent", "image": "ghcr.io/x:1",
                   "command": ["sh", "-c"], "args": ["exec claude"],
                   "env": [{"name": "KUBECONFIG", "value": "/k"},
                           {"name": "CONVERSATION_OBJECT_KEY", "value": "a#1"}]}]}}}}),
    ];
    let out = as_shipped(
        objects.clone(),
        &Shipped {
            job_name: "renamed",
            image: "localhost/c:e2e",
            api_key: "filled",
            base_url: "http://10.0.0.1:1",
            env: vec![("CONVERSATION_OBJECT_KEY", "b#2".into())],
        },
    );
    assert_eq!(out[0]["stringData"]["key"], "filled");
    assert_eq!(out[1], objects[1], "the ConfigMap as shipped");
    let container = &out[2]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(out[2]["metadata"]["name"], "renamed");
    assert_eq!(container["image"], "localhost/c:e2e");
    assert_eq!(container["imagePullPolicy"], "Never");
    assert_eq!(container["command"], json!(["sh", "-c"]));
    assert_eq!(container["args"], json!(["exec claude"]));
    assert_eq!(
        container["env"],
        json!([{"name": "KUBECONFIG", "value": "/k"},
               {"name": "ANTHROPIC_BASE_URL", "value": "http://10.0.0.1:1"},
               {"name": "CONVERSATION_OBJECT_KEY", "value": "b#2"}])
    );
}

#[test]
fn a_skills_description_is_read_from_its_frontmatter() {
    let cases: &[(&str, Option<&str>)] = &[
        (
            "---\nname: h\ndescription: Does x.\n---\n# h\n",
            Some("Does x."),
        ),
        (
            "---\nname: h\ndescription: >-\n  Folded\n  text.\n---\nbody\n",
            Some("Folded text."),
        ),
        ("---\nname: h\n---\nbody\n", None),
        ("# no frontmatter\n", None),
    ];
    for (skill, want) in cases {
        assert_eq!(skill_description(skill).ok().as_deref(), *want, "{skill}");
    }
}
