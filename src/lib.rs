//! `handoff`: Kubernetes-native continuation for AI agents.
//!
//! A fresh agent carries a compact *handoff* ("where I left off, next steps")
//! instead of replaying its predecessor's transcript.
//!
//! # Layers
//!
//! Modules form layers that point one way: a module uses only modules of
//! lower layers (a test, `layering::lower_layers_never_import_upper_ones`,
//! fails otherwise). `controller` is the only module that assembles loops;
//! `dev` assembles everything for a laptop.
//!
//! ```text
//!  8  dev, cli, hook handoff dev: control plane + controller + bridge;
//!                   the SRE's get / history / diff / search (kubectl plugin);
//!                   the agents' hooks and `handoff rescue`
//!  7  controller     run, lead, args, context; the Handoff, grooming and resync loops
//!  6  mcp            the MCP bridge: one module per tool, profiles, auth, transports
//!  5  offers         handoffs offered to a destination agent (decide, store, activation)
//!  4  schedule       the refine → brainstorm barrier (gather → plan → apply), TTLs
//!  3  mirror         the PostgreSQL mirror (rows, history, the resync plan,
//!                   TLS with libpq's sslmode)
//!  2  store, local, loops   Handoff I/O with one identity; the local control
//!                   plane; what every loop shares (guarded objects, error
//!                   categories, one backoff)
//!  1  api, cluster, settings, transcript   CRD types, key → name,
//!                   validation; one namespace scope and one paged list; a
//!                   namespace's settings (the lint budget, cached);
//!                   transcript linearizer
//!  0  time, names, goals, telemetry, liveness, secrets, lint   leaves: clock and
//!                   durations, every label/field-manager name, goal texts,
//!                   logging and metrics, each loop's progress and the wedged
//!                   decision, the credential rule table and the handoff lint
//! ```
//!
//! The test kit (a shared control plane per test binary, served processes,
//! benchmark helpers) is the `handoff-testkit` workspace crate, a
//! dev-dependency: it is never in the shipped binary.

pub mod api;
pub mod cli;
pub mod cluster;
pub mod controller;
pub mod dev;
pub mod goals;
pub mod hook;
pub mod lint;
pub mod liveness;
pub mod local;
pub mod loops;
pub mod mcp;
pub mod mirror;
pub mod names;
pub mod offers;
pub mod schedule;
pub mod secrets;
pub mod settings;
pub mod store;
pub mod telemetry;
pub mod time;
pub mod transcript;

#[cfg(test)]
mod layering {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    /// The layers of the module docs, lowest first.
    const LAYERS: &[&[&str]] = &[
        &[
            "time",
            "names",
            "goals",
            "telemetry",
            "liveness",
            "secrets",
            "lint",
        ],
        &["api", "cluster", "settings", "transcript"],
        &["store", "local", "loops"],
        &["mirror"],
        &["schedule"],
        &["offers"],
        &["mcp"],
        &["controller"],
        &["dev", "cli", "hook"],
    ];

    fn layer_of(module: &str) -> Option<usize> {
        LAYERS.iter().position(|layer| layer.contains(&module))
    }

    fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
        if path.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
                .expect("read src")
                .map(|e| e.expect("dir entry").path())
                .collect();
            entries.sort();
            for entry in entries {
                rust_files(&entry, out);
            }
        } else if path.is_file() && path.extension().is_some_and(|e| e == "rs") {
            out.push(path.to_owned());
        }
    }

    /// `crate::<module>` paths in code (comments are not uses).
    fn crate_modules_used(source: &str) -> BTreeSet<String> {
        let mut used = BTreeSet::new();
        for line in source.lines() {
            let code = line.split("//").next().unwrap_or_default();
            for (i, _) in code.match_indices("crate::") {
                let rest = &code[i + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                let preceded_by_ident = code[..i]
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_');
                if !name.is_empty() && !preceded_by_ident {
                    used.insert(name);
                }
            }
        }
        used
    }

    #[test]
    fn the_scanner_reads_code_not_comments() {
        let used = crate_modules_used(
            "use crate::api::Handoff;\n// crate::controller in a comment\nlet x = crate::time::now(); /// crate::dev\nkube_crate::x();",
        );
        assert_eq!(used, BTreeSet::from(["api".into(), "time".into()]));
    }

    #[test]
    fn every_module_has_a_layer() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        for entry in std::fs::read_dir(&src).expect("read src") {
            let path = entry.expect("dir entry").path();
            let name = path
                .file_stem()
                .and_then(|n| n.to_str())
                .expect("file name")
                .to_owned();
            if name == "lib" || name == "main" {
                continue;
            }
            assert!(
                layer_of(&name).is_some(),
                "module `{name}` has no layer in src/lib.rs"
            );
        }
    }

    #[test]
    fn lower_layers_never_import_upper_ones() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut violations = Vec::new();
        for module in LAYERS.iter().flat_map(|layer| layer.iter()) {
            let own = layer_of(module).expect("listed");
            let dir = src.join(module);
            let mut files = Vec::new();
            rust_files(&dir, &mut files);
            rust_files(&src.join(format!("{module}.rs")), &mut files);
            assert!(!files.is_empty(), "no source for module `{module}`");
            for file in files {
                let source = std::fs::read_to_string(&file).expect("read source");
                for used in crate_modules_used(&source) {
                    match layer_of(&used) {
                        Some(layer) if used != *module && layer >= own => violations.push(format!(
                            "{} (layer {own}) uses crate::{used} (layer {layer})",
                            file.display()
                        )),
                        _ => {}
                    }
                }
            }
        }
        assert!(
            violations.is_empty(),
            "layering violations:\n{}",
            violations.join("\n")
        );
    }
}
