//! The Claude Code agent image of the e2e tier: the shipped Job
//! (`examples/agent/agent-job.yaml`) run with the real `claude` CLI.
//!
//! Why it differs from the other images ([`crate::image`]): the pinned CLI
//! (`tests/agents/claude`, `make agents-claude`) is a native executable
//! linked against glibc, and the Job's script runs `sh`, `mkdir` and `cp`,
//! as a real agent image would. So the image carries those programs from
//! this host and, beside them, what the dynamic loader needs to start them:
//! the loader the executables name (`PT_INTERP`) at that path, and every
//! shared library they need (`DT_NEEDED`, transitively), found where this
//! host's loader looks for them and put at the same place, which the loader
//! searches without `/etc/ld.so.cache`. The static `handoff` binary, the
//! distroless users, the CA bundle and `/tmp` come as in the other images.
//!
//! The ELF reading is the `object` crate's (maintained, read-only parsing);
//! what to put where is pure ([`layout`]) and unit-tested; reading the host
//! is the thin shell ([`claude_image`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use object::read::elf::FileHeader;

use crate::image::{ImageFile, ImageSpec, distroless_nonroot, elf_interpreter};

/// The reference of the Claude Code agent image on the node.
pub const CLAUDE_IMAGE: &str = "localhost/handoff-claude:e2e";

/// The pinned CLI's native executable under the workspace.
const PINNED_CLAUDE: &str =
    "tests/agents/claude/node_modules/@anthropic-ai/claude-code-linux-x64/claude";

/// Where this host's loader finds libraries without its cache (`ld.so
/// --help`, "system search path"), in its order.
const LIBRARY_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib",
    "/usr/lib",
];

/// The host programs the Job's script runs, and where the image has them
/// (on its `PATH`).
const TOOLS: &[(&str, &str)] = &[
    ("/usr/bin/dash", "/bin/sh"),
    ("/usr/bin/mkdir", "/bin/mkdir"),
    ("/usr/bin/cp", "/bin/cp"),
];

/// The pinned CLI, or a failure that says how to install it.
pub fn pinned_claude(workspace: &Path) -> Result<PathBuf> {
    let path = workspace.join(PINNED_CLAUDE);
    anyhow::ensure!(
        path.is_file(),
        "the pinned Claude Code CLI is missing at {}: run `make agents-claude` \
         (npm ci --prefix tests/agents/claude)",
        path.display()
    );
    Ok(path)
}

/// Pure: the shared libraries an ELF executable or library names
/// (`DT_NEEDED`), in its order; none for a static one.
pub fn needed_libraries(elf: &[u8]) -> Result<Vec<String>> {
    let header = object::elf::FileHeader64::<object::Endianness>::parse(elf)
        .map_err(|e| anyhow::anyhow!("not a 64-bit ELF file: {e}"))?;
    let endian = header
        .endian()
        .map_err(|e| anyhow::anyhow!("ELF byte order: {e}"))?;
    let sections = header
        .sections(endian, elf)
        .map_err(|e| anyhow::anyhow!("ELF sections: {e}"))?;
    let table = sections
        .dynamic_table(endian, elf)
        .map_err(|e| anyhow::anyhow!("ELF dynamic table: {e}"))?;
    let mut out = Vec::new();
    for entry in &table {
        if entry.tag == object::elf::DT_NEEDED {
            let name = table
                .string(entry)
                .map_err(|e| anyhow::anyhow!("DT_NEEDED name: {e}"))?;
            out.push(String::from_utf8_lossy(name).into_owned());
        }
    }
    Ok(out)
}

/// What a host ELF file needs: its loader (`None`: static) and libraries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    pub interpreter: Option<String>,
    pub libraries: Vec<String>,
}

/// Pure: the files of the image beyond the programs themselves, as
/// `(path in the image, host path)`: each loader at the path its programs
/// name, and each library (through `needs` of the programs and of the
/// libraries, transitively) at the first of `found` (`name` → host path,
/// under one of [`LIBRARY_DIRS`]). A library `found` lacks is refused,
/// naming who needs it.
pub fn layout(
    programs: &[Needs],
    needs_of: &BTreeMap<String, Needs>,
    found: &BTreeMap<String, PathBuf>,
) -> Result<BTreeMap<String, PathBuf>> {
    let mut out = BTreeMap::new();
    let mut pending: Vec<(String, String)> = Vec::new();
    for program in programs {
        if let Some(loader) = &program.interpreter {
            out.insert(loader.clone(), PathBuf::from(loader));
        }
        pending.extend(
            program
                .libraries
                .iter()
                .map(|l| (l.clone(), "a program".to_owned())),
        );
    }
    let mut seen = BTreeSet::new();
    while let Some((name, by)) = pending.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let host = found
            .get(&name)
            .with_context(|| format!("{name}, needed by {by}, is not in {LIBRARY_DIRS:?}"))?;
        let in_image = host.to_string_lossy().into_owned();
        out.entry(in_image).or_insert_with(|| host.clone());
        if let Some(needs) = needs_of.get(&name) {
            pending.extend(needs.libraries.iter().map(|l| (l.clone(), name.clone())));
        }
    }
    Ok(out)
}

/// Reads `path`'s loader and libraries.
fn needs_of_file(path: &Path) -> Result<Needs> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Needs {
        interpreter: elf_interpreter(&bytes).with_context(|| path.display().to_string())?,
        libraries: needed_libraries(&bytes).with_context(|| path.display().to_string())?,
    })
}

/// The first of [`LIBRARY_DIRS`] holding `name`.
fn find_library(name: &str) -> Option<PathBuf> {
    LIBRARY_DIRS
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.exists())
}

/// The image: `claude` and the static `handoff` in `/usr/local/bin`, the
/// script's tools in `/bin`, their loader and libraries from this host,
/// on distroless's users, CA bundle and `/tmp`. Reads the host's ELF
/// files; fails naming a library it cannot find.
pub fn claude_image(claude: &Path, static_handoff: &Path) -> Result<ImageSpec> {
    let mut programs = vec![
        (claude.to_path_buf(), "/usr/local/bin/claude".to_owned()),
        (
            static_handoff.to_path_buf(),
            "/usr/local/bin/handoff".to_owned(),
        ),
    ];
    programs.extend(
        TOOLS
            .iter()
            .map(|(host, image)| (PathBuf::from(host), (*image).to_owned())),
    );
    let mut program_needs = Vec::new();
    for (host, _) in &programs {
        program_needs.push(needs_of_file(host)?);
    }
    let mut needs_of = BTreeMap::new();
    let mut found = BTreeMap::new();
    let mut pending: Vec<String> = program_needs
        .iter()
        .flat_map(|n| n.libraries.clone())
        .collect();
    while let Some(name) = pending.pop() {
        if found.contains_key(&name) {
            continue;
        }
        let Some(host) = find_library(&name) else {
            continue;
        };
        let needs = needs_of_file(&host)?;
        pending.extend(needs.libraries.clone());
        needs_of.insert(name.clone(), needs);
        found.insert(name, host);
    }
    let libraries = layout(&program_needs, &needs_of, &found)?;
    let mut files: Vec<ImageFile> = programs
        .iter()
        .map(|(host, image)| ImageFile::host(image, host, 0o755))
        .collect();
    files.extend(
        libraries
            .iter()
            .map(|(image, host)| ImageFile::host(image, host, 0o755)),
    );
    Ok(distroless_nonroot(
        CLAUDE_IMAGE,
        files,
        &["/usr/local/bin/claude"],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(interpreter: Option<&str>, libraries: &[&str]) -> Needs {
        Needs {
            interpreter: interpreter.map(str::to_owned),
            libraries: libraries.iter().map(|l| (*l).to_owned()).collect(),
        }
    }

    fn found(names: &[&str]) -> BTreeMap<String, PathBuf> {
        names
            .iter()
            .map(|n| ((*n).to_owned(), Path::new("/lib/x86_64-linux-gnu").join(n)))
            .collect()
    }

    #[test]
    fn the_layout_holds_the_loader_and_every_library_transitively() {
        let programs = [
            needs(Some("/lib64/ld-linux-x86-64.so.2"), &["libc.so.6"]),
            needs(Some("/lib64/ld-linux-x86-64.so.2"), &["libselinux.so.1"]),
            needs(None, &[]),
        ];
        let needs_of: BTreeMap<String, Needs> = [
            (
                "libselinux.so.1",
                needs(None, &["libpcre2-8.so.0", "libc.so.6"]),
            ),
            ("libpcre2-8.so.0", needs(None, &["libc.so.6"])),
            ("libc.so.6", needs(None, &["ld-linux-x86-64.so.2"])),
            ("ld-linux-x86-64.so.2", needs(None, &[])),
        ]
        .into_iter()
        .map(|(n, x)| (n.to_owned(), x))
        .collect();
        let all = [
            "libc.so.6",
            "libselinux.so.1",
            "libpcre2-8.so.0",
            "ld-linux-x86-64.so.2",
        ];
        let got = layout(&programs, &needs_of, &found(&all)).expect("layout");
        let paths: Vec<&str> = got.keys().map(String::as_str).collect();
        assert_eq!(
            paths,
            [
                "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib/x86_64-linux-gnu/libpcre2-8.so.0",
                "/lib/x86_64-linux-gnu/libselinux.so.1",
                "/lib64/ld-linux-x86-64.so.2",
            ]
        );

        let without_pcre = ["libc.so.6", "libselinux.so.1", "ld-linux-x86-64.so.2"];
        let err = layout(&programs, &needs_of, &found(&without_pcre))
            .expect_err("libpcre2 missing")
            .to_string();
        assert!(
            err.contains("libpcre2-8.so.0, needed by libselinux.so.1"),
            "{err}"
        );
        assert!(
            layout(&[needs(None, &[])], &BTreeMap::new(), &BTreeMap::new())
                .expect("static")
                .is_empty(),
            "a static program needs nothing"
        );
    }

    #[test]
    fn needed_libraries_reads_real_binaries() {
        let this = std::fs::read("/proc/self/exe").expect("this test binary");
        let libraries = needed_libraries(&this).expect("elf");
        assert!(
            libraries.iter().any(|l| l == "libc.so.6"),
            "the test binary links libc: {libraries:?}"
        );
        let err = needed_libraries(b"#!/bin/sh\n").expect_err("not ELF");
        assert!(err.to_string().contains("not a 64-bit ELF"), "{err}");
    }

    #[test]
    fn a_missing_cli_says_how_to_install_it() {
        let err = pinned_claude(Path::new("/nonexistent")).expect_err("missing");
        assert!(err.to_string().contains("make agents-claude"), "{err}");
    }
}
