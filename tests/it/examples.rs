//! `examples/` apply cleanly against the real apiserver (server-side dry
//! run), every example Handoff is named by its key, and the hook wiring
//! names documented events and our commands. The skill, the plugin's copy
//! of it, the marketplace and Cursor's examples are checked without a
//! cluster in `tests/integrations.rs`.

use std::path::Path;

use handoff_testkit as testing;

use crate::common::parses;

#[test]
fn every_example_applies_with_a_server_side_dry_run() {
    let env = testing::shared();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    // The examples live in the namespace of config/default.
    let namespace = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/components/namespace.yaml");
    let out = env
        .kubectl()
        .args(["apply", "--server-side", "-f"])
        .arg(&namespace)
        .output()
        .expect("kubectl");
    assert!(
        out.status.success(),
        "namespace handoff-system: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut applied = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let out = env
            .kubectl()
            .args(["apply", "--server-side", "--dry-run=server", "-f"])
            .arg(&path)
            .output()
            .expect("kubectl");
        assert!(
            out.status.success(),
            "{} does not apply: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        applied += 1;
    }
    assert!(
        applied >= 2,
        "examples/ holds the Handoff and the schedule at least"
    );
}

/// Every Handoff in `examples/` (any YAML file, any document) has the name
/// derived from its key: the admission webhook refuses any other, so a
/// user copying an example must not create a twin.
#[test]
fn every_example_handoff_is_named_by_its_key() {
    let mut files = Vec::new();
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("examples/") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml")
            ) {
                files.push(path);
            }
        }
    }
    let mut handoffs = 0;
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable");
        let documents: Vec<serde_json::Value> = serde_saphyr::from_str_multiple(&text)
            .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
        for doc in documents.iter().filter(|d| d["kind"] == "Handoff") {
            let key = doc["spec"]["handoffKey"].as_str().expect("handoffKey");
            assert_eq!(
                doc["metadata"]["name"].as_str(),
                Some(handoff_core::api::naming::name_for_key(key).as_str()),
                "{}: the Handoff of key {key:?} must be named by it",
                path.display()
            );
            handoffs += 1;
        }
    }
    assert!(handoffs >= 1, "examples/handoff.yaml at least");
}

/// The events each agent's hook reference defines (docs/agents.md cites
/// them), and the keys of a matcher group and of a command handler.
const CLAUDE_CODE_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "SubagentStart",
    "SubagentStop",
    "Stop",
    "PreCompact",
    "SessionEnd",
];
const CODEX_EVENTS: &[&str] = &[
    "SessionStart",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "UserPromptSubmit",
    "Stop",
    "PreCompact",
    "PostCompact",
    "SubagentStart",
    "SubagentStop",
    "SessionEnd",
];
const GEMINI_EVENTS: &[&str] = &[
    "BeforeTool",
    "AfterTool",
    "BeforeAgent",
    "AfterAgent",
    "Notification",
    "SessionStart",
    "SessionEnd",
    "PreCompress",
    "BeforeModel",
    "AfterModel",
    "BeforeToolSelection",
];
const GROUP_KEYS: &[&str] = &["matcher", "hooks"];
const HANDLER_KEYS: &[&str] = &["type", "command", "timeout", "statusMessage"];

fn read_json(path: &str) -> serde_json::Value {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"))
}

/// Checks a hooks object: documented events and keys only, each command a
/// `handoff hook <event>` for that very event; returns the events wired.
fn check_hooks(what: &str, hooks: &serde_json::Value, events: &[&str], agent: &str) -> Vec<String> {
    use clap::ValueEnum;
    use handoff::hook::Event;
    let hooks = hooks
        .as_object()
        .unwrap_or_else(|| panic!("{what}: `hooks` is not an object"));
    for (event, groups) in hooks {
        assert!(
            events.contains(&event.as_str()),
            "{what}: {event} is not a documented event"
        );
        for group in groups
            .as_array()
            .unwrap_or_else(|| panic!("{what}: {event} is not a list"))
        {
            let group = group.as_object().expect("a matcher group");
            for key in group.keys() {
                assert!(
                    GROUP_KEYS.contains(&key.as_str()),
                    "{what}: {event}: unknown key {key}"
                );
            }
            for handler in group["hooks"].as_array().expect("hooks") {
                let handler = handler.as_object().expect("a handler");
                for key in handler.keys() {
                    assert!(
                        HANDLER_KEYS.contains(&key.as_str()),
                        "{what}: {event}: unknown key {key}"
                    );
                }
                assert_eq!(handler["type"], "command", "{what}: {event}");
                let command = handler["command"].as_str().expect("command");
                let words: Vec<&str> = command.split_whitespace().collect();
                assert_eq!(&words[..2], ["handoff", "hook"], "{what}: {command}");
                let ours =
                    Event::from_str(words[2], false).unwrap_or_else(|e| panic!("{what}: {e}"));
                let kind: handoff_transcript::AgentKind =
                    agent.parse().unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(
                    ours.agent_event_name(kind),
                    event,
                    "{what}: {command} under {event}"
                );
                assert_eq!(&words[3..5], ["--agent", agent], "{what}: {command}");
                parses(what, &words[1..]);
            }
        }
    }
    hooks.keys().cloned().collect()
}

#[test]
fn the_hook_wiring_names_documented_events_and_our_commands() {
    let claude = read_json("examples/claude-code/settings.json");
    let wired = check_hooks(
        "examples/claude-code/settings.json",
        &claude["hooks"],
        CLAUDE_CODE_EVENTS,
        "claude",
    );
    assert_eq!(wired, ["PreCompact", "SessionEnd", "SessionStart", "Stop"]);
    let codex = read_json("examples/codex/hooks.json");
    let wired = check_hooks(
        "examples/codex/hooks.json",
        &codex["hooks"],
        CODEX_EVENTS,
        "codex",
    );
    assert_eq!(wired, ["PreCompact", "SessionEnd", "SessionStart", "Stop"]);

    let config: toml::Table = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/codex/config.toml"),
    )
    .expect("config.toml")
    .parse()
    .expect("config.toml is TOML");
    // Hooks are on by default; `codex_hooks` is deprecated (agents_codex.rs runs it).
    assert!(
        config.get("features").is_none(),
        "no feature flag is needed"
    );
    assert_eq!(
        config["mcp_servers"]["handoff"]["env_vars"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "the stdio server gets KUBECONFIG"
    );
    let args: Vec<&str> = config["mcp_servers"]["handoff"]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    parses("examples/codex/config.toml", &args);

    // Gemini CLI: its own event names; no PreCompress (agents_gemini.rs
    // shows it runs before every model request); the stdio server trusted,
    // or a headless session is offered none of its tools.
    let gemini = read_json("examples/gemini/settings.json");
    let wired = check_hooks(
        "examples/gemini/settings.json",
        &gemini["hooks"],
        GEMINI_EVENTS,
        "gemini",
    );
    assert_eq!(wired, ["AfterAgent", "SessionEnd", "SessionStart"]);
    let server = &gemini["mcpServers"]["handoff"];
    assert_eq!(server["trust"], true, "examples/gemini/settings.json");
    for (path, off) in [
        ("/privacy/usageStatisticsEnabled", false),
        ("/telemetry/enabled", false),
        ("/general/enableAutoUpdate", false),
        ("/general/enableAutoUpdateNotification", false),
    ] {
        assert_eq!(gemini.pointer(path), Some(&off.into()), "{path}");
    }
    let args: Vec<&str> = server["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    parses("examples/gemini/settings.json", &args);

    // The plugin: one install wires the hooks, the skill and the tools.
    let plugin = read_json("plugins/handoff/.claude-plugin/plugin.json");
    assert_eq!(plugin["name"], "handoff");
    let plugin_hooks = read_json("plugins/handoff/hooks/hooks.json");
    assert_eq!(
        plugin_hooks["hooks"], claude["hooks"],
        "the plugin wires what the example does"
    );
    let mcp = read_json("plugins/handoff/.mcp.json");
    let server = &mcp["mcpServers"]["handoff"];
    assert_eq!(server["command"], "handoff");
    let args: Vec<&str> = server["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    parses("plugins/handoff/.mcp.json", &args);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));

    // The agent Job carries the same settings.json.
    let job = std::fs::read_to_string(root.join("examples/agent/agent-job.yaml")).expect("job");
    let block: Vec<&str> = job
        .lines()
        .skip_while(|l| *l != "  settings.json: |")
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with("    "))
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect();
    let in_job: serde_json::Value =
        serde_json::from_str(&block.join("\n")).expect("the Job's settings.json");
    assert_eq!(
        in_job, claude,
        "examples/agent/agent-job.yaml carries examples/claude-code/settings.json"
    );
    assert!(job.contains(r#"cp /etc/handoff/settings.json "$HOME/.claude/settings.json""#));
}

/// The Claude Code Job installs the skill from its ConfigMap `handoff-skill`:
/// that copy must be skills/handoff/SKILL.md, byte for byte.
#[test]
fn the_claude_jobs_skill_is_the_shipped_skill() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let job = "examples/agent/agent-job.yaml";
    let text = std::fs::read_to_string(root.join(job)).expect("the Job");
    let objects: Vec<serde_json::Value> =
        serde_saphyr::from_str_multiple(&text).expect("the Job is YAML");
    let in_job = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "handoff-skill")
        .and_then(|o| o["data"]["SKILL.md"].as_str())
        .unwrap_or_else(|| panic!("{job} has no ConfigMap handoff-skill with key SKILL.md"));
    let skill = std::fs::read_to_string(root.join("skills/handoff/SKILL.md")).expect("skill");
    assert!(
        in_job == skill,
        "{job}: ConfigMap handoff-skill's SKILL.md differs from skills/handoff/SKILL.md. \
         Copy skills/handoff/SKILL.md into that key again, each non-empty line indented by \
         four spaces under `SKILL.md: |` (e.g. `sed 's/^./    &/' skills/handoff/SKILL.md`)"
    );
}
