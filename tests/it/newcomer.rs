//! The newcomer's path, as the README's quickstart tells it: `make run`
//! (which runs `handoff dev`) in a fresh directory, the MCP client config
//! it writes copied as the README says, an agent's `write_handoff` through
//! exactly that config, then the README's `source .local/dev/env` and
//! `kubectl get ho` showing the handoff.
//!
//! The commands are read from the README (between `<!-- quickstart -->`
//! and `<!-- /quickstart -->`), so editing the quickstart without this test
//! fails it. Two steps are stood in for, and checked instead: `git clone`
//! (the test starts in an empty directory, as a clone has no `.local/`),
//! and the agent (the real MCP Python SDK calls the tool the README's
//! prompt names, with the URL and headers of the copied config, as any
//! MCP client does).

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const README: &str = include_str!("../../README.md");
const MAKEFILE: &str = include_str!("../../Makefile");

/// The shell commands of the README's quickstart: every line of its `sh`
/// blocks, without comments, in order.
fn quickstart(readme: &str) -> Result<Vec<String>, String> {
    let start = readme
        .find("<!-- quickstart -->")
        .ok_or("README.md has no `<!-- quickstart -->` marker")?;
    let end = readme[start..]
        .find("<!-- /quickstart -->")
        .ok_or("README.md's quickstart has no `<!-- /quickstart -->` end marker")?;
    let mut commands = Vec::new();
    let mut in_sh = false;
    for line in readme[start..start + end].lines() {
        match line.trim() {
            "```sh" => in_sh = true,
            "```" => in_sh = false,
            command if in_sh && !command.is_empty() => {
                let command = command.split(" # ").next().unwrap_or(command).trim();
                commands.push(command.to_owned());
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

/// The word after `name` in the agent's prompt (`handoff_key demo#1,` →
/// `demo#1`).
fn word_after<'a>(prompt: &'a str, name: &str) -> Option<&'a str> {
    let mut words = prompt.split_whitespace();
    words.find(|w| *w == name)?;
    Some(words.next()?.trim_end_matches([',', '.', '"']))
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
    assert_eq!(
        word_after(
            "Call write_handoff with handoff_key k#1, project p and",
            "project"
        ),
        Some("p")
    );
    assert_eq!(
        recipe("a:\n\tone\n\ttwo\nb:\n\tthree\n", "a"),
        ["one", "two"]
    );
}

#[test]
fn a_newcomer_follows_the_readme_from_make_run_to_kubectl_get_ho() {
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

    // The MCP client config it prints, copied as the README says.
    let copy = command(&commands, "cp ");
    let source = copy.split_whitespace().nth(1).expect("cp SOURCE DEST");
    let config_path = checkout.join(source);
    assert!(
        printed.iter().any(|l| l
            .trim_start()
            .starts_with(&config_path.display().to_string())),
        "handoff dev must print the config the README copies ({}): {printed:#?}",
        config_path.display()
    );
    bash(&checkout, copy);
    let dest = copy.split_whitespace().nth(2).expect("cp SOURCE DEST");
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(checkout.join(dest)).expect("the copied config"))
            .expect("the copied config is JSON");
    let server = &config["mcpServers"]["handoff"];
    let url = server["url"].as_str().expect("the config's url");
    let headers = server["headers"].as_object().expect("the config's headers");
    let mut names: Vec<&str> = headers.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["Authorization", "X-Handoff-Profile"],
        "the MCP client sends exactly these headers of the config"
    );
    let token = headers["Authorization"]
        .as_str()
        .and_then(|a| a.strip_prefix("Bearer "))
        .expect("a bearer token");
    let profile = headers["X-Handoff-Profile"].as_str().expect("profile");

    // The agent: the tool and arguments the README's prompt names.
    let prompt = commands
        .iter()
        .find(|c| c.contains("write_handoff"))
        .unwrap_or_else(|| panic!("no quickstart command asks for write_handoff: {commands:?}"));
    let key = word_after(prompt, "handoff_key").expect("the prompt names a handoff_key");
    let project = word_after(prompt, "project").expect("the prompt names a project");
    let results = common::drive(
        &["http", url, token, profile],
        serde_json::json!([{"op": "call", "tool": "write_handoff", "args": {
            "handoff_key": key, "project": project,
            "body": "## State\nRead the README.\n## Next\nWire the agents."}}]),
        &[],
    );
    assert_eq!(
        results[0]["structured"]["outcome"], "created",
        "{results:?}"
    );

    // `source .local/dev/env` then `kubectl get ho`, as the README says.
    let env = command(&commands, "source ");
    let get = command(&commands, "kubectl get ho");
    let listed = bash(&checkout, &format!("{env} && {get}"));
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
