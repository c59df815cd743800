//! The release's image as an OCI layout archive (`make release`,
//! hack/release/release.sh):
//!
//! ```text
//! release-image BINARY REFERENCE OUTPUT
//! ```
//!
//! Why here: the test kit already writes the e2e node's image
//! deterministically ([`handoff_image`]), and a unit test keeps that image
//! in agreement with the Dockerfile's final stage. The release ships the
//! same image under its published reference, so two runs give the same
//! digest and `install.yaml` can pin it before any registry has seen it.
//! Refuses a dynamically linked binary (the image has no loader) and a
//! Dockerfile whose final stage no longer matches. Prints the manifest's
//! digest (`sha256:…`), the one a registry serves the image by.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use handoff_testkit::image::{Digest, disagreements, elf_interpreter, final_stage, handoff_image};

const DOCKERFILE: &str = include_str!("../../../Dockerfile");
const USAGE: &str = "usage: release-image BINARY REFERENCE OUTPUT";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(digest) => {
            println!("{digest}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("release-image: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<Digest> {
    let [binary, reference, output] = args else {
        bail!("{USAGE} (got {} arguments)", args.len());
    };
    check_reference(reference)?;
    let binary = PathBuf::from(binary);
    let elf = std::fs::read(&binary).with_context(|| format!("reading {}", binary.display()))?;
    if let Some(interpreter) = elf_interpreter(&elf)? {
        bail!(
            "BINARY {} is linked dynamically (interpreter {interpreter}); the image has no loader",
            binary.display()
        );
    }
    let mut spec = handoff_image(&binary);
    spec.reference = reference.clone();
    let found = disagreements(&final_stage(DOCKERFILE)?, &spec);
    if !found.is_empty() {
        bail!(
            "the image no longer matches the Dockerfile: {}",
            found.join("; ")
        );
    }
    spec.write_archive(Path::new(output))
}

/// A full reference with a tag (`registry/name:tag`): the index's
/// `org.opencontainers.image.ref.name`, which importers name the image by.
fn check_reference(reference: &str) -> Result<()> {
    let Some((name, tag)) = reference.rsplit_once(':') else {
        bail!("REFERENCE {reference:?} has no tag (registry/name:tag)");
    };
    if tag.is_empty() || tag.contains('/') || !name.contains('/') {
        bail!("REFERENCE {reference:?} is not registry/name:tag");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_need_a_registry_name_and_tag() {
        let cases: &[(&str, bool)] = &[
            ("ghcr.io/handoff-dev/handoff:v0.2.0", true),
            ("localhost:5000/handoff:v1", true),
            ("ghcr.io/handoff-dev/handoff", false),
            ("localhost:5000/handoff", false),
            ("handoff:v1", false),
            ("ghcr.io/handoff:", false),
        ];
        for (reference, ok) in cases {
            assert_eq!(check_reference(reference).is_ok(), *ok, "{reference}");
        }
    }

    #[test]
    fn bad_arguments_are_named() {
        let cases: &[(&[&str], &str)] = &[
            (&["a", "b"], "usage"),
            (&["/bin/true", "handoff", "/tmp/x"], "REFERENCE"),
            (
                &["/nonexistent/handoff", "r.io/h:v1", "/tmp/x"],
                "/nonexistent/handoff",
            ),
        ];
        for (args, want) in cases {
            let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
            let err = format!("{:#}", run(&args).expect_err("refused"));
            assert!(err.contains(want), "{args:?}: {err}");
        }
    }

    #[test]
    fn a_dynamic_binary_is_refused() {
        let this = std::env::current_exe().expect("the test binary");
        let args = [
            this.to_string_lossy().into_owned(),
            "r.io/h:v1".to_owned(),
            "/nonexistent/out.tar".to_owned(),
        ];
        let err = format!("{:#}", run(&args).expect_err("dynamic"));
        assert!(err.contains("linked dynamically"), "{err}");
    }
}
