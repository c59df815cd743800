//! The newcomer's path, as the README's quickstart tells it: `make run`
//! (which runs `handoff dev`) in a fresh directory, then the README's own
//! `claude -p …` line, run verbatim by bash with the real Claude Code CLI
//! against the scripted model, writing through the MCP client config
//! `handoff dev` wrote, then the README's `source .local/dev/env` and
//! `kubectl get ho` showing the handoff and the Revision, Tokens and Lint
//! columns.
//!
//! The commands are read from the README (between `<!-- quickstart -->`
//! and `<!-- /quickstart -->`), so editing the quickstart without this test
//! fails it. Two things are stood in for: `git clone` (the test starts in
//! an empty directory, as a clone has no `.local/`) and the model (the
//! scripted Anthropic API on 127.0.0.1 calls the tool the README's prompt
//! names, with its key and project). What the test adds to the newcomer's
//! environment is only what keeps the CLI on this machine and off the
//! user's config: a home of its own, the pinned `claude` first on `PATH`,
//! the model's address and a fake key, and [`super::SESSION_ENV`].

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use handoff_testkit::model::anthropic::{Anthropic, Logged, Turn};
use serde_json::{Value, json};

use super::{FAKE_API_KEY, SESSION_ENV, asked, claude, played_out};

const README: &str = include_str!("../../README.md");
const MAKEFILE: &str = include_str!("../../Makefile");

/// The shell commands of the README's quickstart: every line of its `sh`
/// blocks, without comments, a line ending in ` \` joined with the next,
/// in order.
fn quickstart(readme: &str) -> Result<Vec<String>, String> {
    let start = readme
        .find("<!-- quickstart -->")
        .ok_or("README.md has no `<!-- quickstart -->` marker")?;
    let end = readme[start..]
        .find("<!-- /quickstart -->")
        .ok_or("README.md's quickstart has no `<!-- /quickstart -->` end marker")?;
    let mut commands = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in readme[start..start + end].lines() {
        match line.trim() {
            "```sh" => in_sh = true,
            "```" => in_sh = false,
            line if in_sh && !line.is_empty() => {
                let line = line.split(" # ").next().unwrap_or(line).trim();
                match line.strip_suffix(" \\") {
                    Some(head) => {
                        pending.push_str(head);
                        pending.push(' ');
                    }
                    None => {
                        pending.push_str(line);
                        commands.push(std::mem::take(&mut pending));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(commands)
}

/// The one quickstart command starting with `prefix`.
fn command<'a>(commands: &'a [String], prefix: &str) -> &'a str {
    let found: Vec<&String> = commands.iter().filter(|c| c.starts_with(prefix)).collect();
    assert_eq!(
        found.len(),
        1,
        "README.md's quickstart must have exactly one command starting with {prefix:?}; it has {commands:?}"
    );
    found[0]
}

/// The recipe lines of `target` in a Makefile.
fn recipe<'a>(makefile: &'a str, target: &str) -> Vec<&'a str> {
    let header = format!("{target}:");
    makefile
        .lines()
        .skip_while(|l| !l.starts_with(&header))
        .skip(1)
        .take_while(|l| l.starts_with('\t'))
        .map(str::trim)
        .collect()
}

/// The word after `name` in a command (`handoff_key demo#1,` → `demo#1`).
fn word_after<'a>(command: &'a str, name: &str) -> Option<&'a str> {
    let mut words = command.split_whitespace();
    words.find(|w| *w == name)?;
    Some(words.next()?.trim_end_matches([',', '.', '"']))
}

/// The `tool_result` blocks of the conversation `turn` sends: whether each
/// is an error, and its text.
fn tool_results(turn: &Logged) -> Vec<(bool, String)> {
    let blocks = turn.body["messages"].as_array().into_iter().flatten();
    let blocks = blocks.flat_map(|m| m["content"].as_array().into_iter().flatten());
    blocks
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
                _ => String::new(),
            };
            (b["is_error"] == json!(true), text)
        })
        .collect()
}

/// Runs `script` with bash in `dir`; its stdout, or a failure naming it.
fn bash(dir: &Path, script: &str) -> String {
    let out = Command::new("bash")
        .args(["-c", script])
        .current_dir(dir)
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "`{script}` failed in {}: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_readme_quickstart_parses_and_a_changed_command_is_noticed() {
    let commands = quickstart(README).unwrap_or_else(|e| panic!("{e}"));
    assert!(commands.iter().any(|c| c == "make run"), "{commands:?}");
    let edited = README.replace("\nmake run\n", "\nmake start\n");
    let edited = quickstart(&edited).expect("still marked");
    assert!(!edited.iter().any(|c| c == "make run"), "{edited:?}");
    assert_eq!(
        quickstart("no markers").expect_err("no marker"),
        "README.md has no `<!-- quickstart -->` marker"
    );
    let marked = |sh: &str| format!("<!-- quickstart -->\n```sh\n{sh}\n```\n<!-- /quickstart -->");
    for (sh, want) in [
        ("a\nb", vec!["a", "b"]),
        ("a # why\n\nb", vec!["a", "b"]),
        (
            "claude -p \"x\" \\\n  --y z\nnext",
            vec!["claude -p \"x\" --y z", "next"],
        ),
    ] {
        assert_eq!(quickstart(&marked(sh)).expect("marked"), want, "{sh:?}");
    }
    assert_eq!(
        word_after(
            "Call write_handoff with handoff_key k#1, project p and",
            "project"
        ),
        Some("p")
    );
    assert_eq!(
        word_after("a --mcp-config f.json --b", "--mcp-config"),
        Some("f.json")
    );
    assert_eq!(word_after("a --mcp-config", "--mcp-config"), None);
    assert_eq!(
        recipe("a:\n\tone\n\ttwo\nb:\n\tthree\n", "a"),
        ["one", "two"]
    );
    let turn = |content: Value| Logged {
        method: "POST".into(),
        path: "/v1/messages".into(),
        body: json!({"messages": [{"role": "user", "content": content}]}),
    };
    for (content, want) in [
        (
            json!([{"type": "tool_result", "content": "ok"}]),
            vec![(false, "ok")],
        ),
        (
            json!([{"type": "tool_result", "is_error": true,
                    "content": [{"type": "text", "text": "denied"}]}]),
            vec![(true, "denied")],
        ),
        (json!("no blocks"), vec![]),
    ] {
        let got = tool_results(&turn(content.clone()));
        let got: Vec<(bool, &str)> = got.iter().map(|(e, t)| (*e, t.as_str())).collect();
        assert_eq!(got, want, "{content}");
    }
}

#[test]
fn a_newcomer_follows_the_readme_from_make_run_to_kubectl_get_ho() {
    let claude = claude();
    let commands = quickstart(README).unwrap_or_else(|e| panic!("{e}"));

    // `git clone …` of the project, then `cd` into it: a fresh directory.
    let clone = command(&commands, "git clone ");
    let dir_name = clone
        .rsplit_once("&& cd ")
        .map(|(_, d)| d.trim())
        .unwrap_or_else(|| panic!("the clone line ends with `&& cd DIR`: {clone:?}"));
    let parent = tempfile::tempdir().expect("tempdir");
    let checkout = parent.path().join(dir_name);
    std::fs::create_dir(&checkout).expect("the clone's directory");
    {
        // PostgreSQL runs as the `postgres` user when the tests run as root:
        // it must reach the data directory under the clone.
        use std::os::unix::fs::PermissionsExt;
        for dir in [parent.path(), &checkout] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
    }

    // `make run` is `cargo run -- dev`: `handoff dev` with no other argument,
    // in the clone (its data directory `.local/dev` is relative to it).
    command(&commands, "make run");
    let run = recipe(MAKEFILE, "run");
    assert_eq!(
        run,
        ["$(CARGO) run --locked -- dev"],
        "the Makefile's `run` target must run `handoff dev` and nothing else; this test runs it so"
    );
    let mut dev = Running(
        Command::new(env!("CARGO_BIN_EXE_handoff"))
            .arg("dev")
            .current_dir(&checkout)
            .env_remove("HANDOFF_DEV_DATA_DIR")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("handoff dev starts"),
    );
    let stdout = dev.0.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.starts_with(handoff::dev::READY_LINE));
    assert!(
        ready,
        "handoff dev exited before it was ready (its stderr above says why: the control plane \
         binaries come from `make envtest-assets`)"
    );
    let printed: Vec<String> = lines
        .by_ref()
        .map_while(Result::ok)
        .take_while(|l| !l.starts_with("Your handoffs"))
        .collect();
    std::thread::spawn(move || lines.for_each(drop));

    // The README's agent line: the MCP client config `handoff dev` printed,
    // the tool and arguments its prompt names.
    let agent = command(&commands, "claude ");
    let config = word_after(agent, "--mcp-config").expect("the claude line names --mcp-config");
    let config_path = checkout.join(config);
    assert!(
        printed.iter().any(|l| l
            .trim_start()
            .starts_with(&config_path.display().to_string())),
        "handoff dev must print the config the README gives claude ({}): {printed:#?}",
        config_path.display()
    );
    let key = word_after(agent, "handoff_key").expect("the prompt names a handoff_key");
    let project = word_after(agent, "project").expect("the prompt names a project");
    let written = "## State\nRead the README.\n## Next\nWire the agents.";
    let said = format!("Wrote {key}.");
    let model = Anthropic::start(vec![
        Turn::tool(
            "write_handoff",
            json!({"handoff_key": key, "project": project, "body": written}),
        ),
        Turn::text(&said),
    ])
    .expect("the scripted model");

    // Run verbatim by bash in the clone, the pinned CLI first on `PATH`.
    let home = parent.path().join("home");
    let tmp = parent.path().join("tmp");
    for dir in [&home, &tmp] {
        std::fs::create_dir(dir).expect("mkdir");
    }
    let bin = claude.parent().expect("the CLI's directory");
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    let out = Command::new("bash")
        .args(["-c", agent])
        .current_dir(&checkout)
        .env_clear()
        .envs(SESSION_ENV.iter().copied())
        .envs([
            ("PATH", path.as_str()),
            ("HOME", &*home.to_string_lossy()),
            ("TMPDIR", &*tmp.to_string_lossy()),
            ("ANTHROPIC_BASE_URL", model.url()),
            ("ANTHROPIC_API_KEY", FAKE_API_KEY),
        ])
        .stdin(Stdio::null())
        .output()
        .expect("bash runs");
    let turns = model.turns();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(&said),
        "`{agent}` failed ({}):\nstdout: {stdout}\nstderr: {}\nmodel: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        asked(&turns)
    );
    played_out(&model, &turns);
    let called: Vec<String> = turns[1].tool_uses().into_iter().map(|(n, _)| n).collect();
    assert_eq!(called, ["mcp__handoff__write_handoff"], "{}", asked(&turns));
    let results = tool_results(&turns[1]);
    assert!(
        matches!(results.as_slice(), [(false, _)]),
        "the write_handoff call failed or was refused (the README's --allowedTools must \
         name the server of its --mcp-config): {results:?}"
    );

    // `source .local/dev/env` then `kubectl get ho`, as the README says.
    let env = command(&commands, "source ");
    let get = command(&commands, "kubectl get ho");
    let listed = bash(&checkout, &format!("{env} && {get}"));
    let header: Vec<&str> = listed
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    for column in ["KEY", "PROJECT", "REVISION", "TOKENS", "LINT"] {
        assert!(
            header.contains(&column),
            "`{get}` has no {column} column:\n{listed}"
        );
    }
    assert!(
        listed
            .lines()
            .any(|l| l.split_whitespace().any(|w| w == key)),
        "`{get}` does not show the key {key}:\n{listed}"
    );
    drop(dev);
}

/// A running `handoff dev`, killed when the test ends or fails (its
/// processes die with it).
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
