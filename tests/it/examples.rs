//! `examples/` apply cleanly against the real apiserver (server-side dry
//! run), and the `/handoff` skill's frontmatter names the contract's profiles.

use std::path::Path;

use handoff::mcp::profiles::WRITER_PROFILES;
use handoff_testkit as testing;

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

#[test]
fn the_skill_is_for_exactly_the_handoff_profiles() {
    let skill = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("skills/handoff/SKILL.md"),
    )
    .expect("skills/handoff/SKILL.md");
    let frontmatter = skill.split("---").nth(1).expect("frontmatter");
    let profiles: Vec<&str> = frontmatter
        .lines()
        .skip_while(|l| !l.starts_with("profiles:"))
        .skip(1)
        .take_while(|l| l.trim_start().starts_with("- "))
        .map(|l| l.trim_start().trim_start_matches("- ").trim())
        .collect();
    assert_eq!(profiles, WRITER_PROFILES);
    for section in [
        "## At start",
        "## At the end",
        "get_handoff",
        "write_handoff",
        "## Refine",
        "## Brainstorm",
    ] {
        assert!(skill.contains(section), "{section} missing from the skill");
    }
}
