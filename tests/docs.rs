//! The docs agree with the code (needs no cluster; part of `make
//! test-unit`):
//!
//! - docs/flags-metrics-columns.md is what `handoff tables` prints now (every flag
//!   with its environment variable and default, every metric, every
//!   printer column): `make docs-tables` writes it;
//! - every table of flags in the docs (a header starting `| flag | env |`)
//!   names flags the processes have, with the environment variables the
//!   code reads for them;
//! - every metric name the docs, the dashboard and the alert rules mention
//!   is one a process registers, and docs/operate.md's Metrics table lists
//!   each of them once, with its type;
//! - docs/operate.md's table of `kubectl get` columns lists each CRD's
//!   printer columns, and which need `-o wide`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The markdown files an operator reads.
fn doc_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    for dir in ["docs", "examples"] {
        files.extend(walk(&root().join(dir), "md"));
    }
    files
}

fn walk(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path, ext));
        } else if path.extension().is_some_and(|e| e == ext) {
            found.push(path);
        }
    }
    found.sort();
    found
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The rows of every markdown table in `text` whose header starts with
/// `header`: each row's cells, trimmed.
fn tables(text: &str, header: &[&str]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if !line.starts_with('|') {
            inside = false;
            continue;
        }
        let cells = split_row(line);
        if cells.len() >= header.len()
            && cells
                .iter()
                .zip(header)
                .all(|(c, h)| c.eq_ignore_ascii_case(h))
        {
            inside = true;
            continue;
        }
        if inside
            && !cells
                .iter()
                .all(|c| c.chars().all(|ch| matches!(ch, '-' | ':')))
        {
            rows.push(cells);
        }
    }
    rows
}

/// The cells of one table row (`\|` is a pipe inside a cell).
fn split_row(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    let (mut cells, mut cell) = (Vec::new(), String::new());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                cell.push('|');
            }
            '|' => cells.push(std::mem::take(&mut cell)),
            _ => cell.push(c),
        }
    }
    cells.push(cell);
    cells.into_iter().map(|c| c.trim().to_owned()).collect()
}

/// The `code` spans of a cell that match `pred`.
fn spans(cell: &str, pred: impl Fn(&str) -> bool) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| pred(s))
        .map(str::to_owned)
        .collect()
}

/// Each long-running process's long flags and the environment variable
/// each reads (None when it reads none), read back from
/// docs/flags-metrics-columns.md, which the first test holds equal to the code.
fn code_flags() -> BTreeMap<String, BTreeMap<String, Option<String>>> {
    let tables_doc = read("docs/flags-metrics-columns.md");
    let mut processes = BTreeMap::new();
    for section in tables_doc.split("\n### `handoff ").skip(1) {
        let Some((process, _)) = section.split_once('`') else {
            continue;
        };
        let mut flags = BTreeMap::new();
        for row in tables(section, &["flag", "env", "default"]) {
            let env = spans(&row[1], |s| !s.is_empty()).into_iter().next();
            for flag in spans(&row[0], |s| s.starts_with("--")) {
                flags.insert(flag, env.clone());
            }
        }
        processes.insert(process.to_owned(), flags);
    }
    processes
}

/// Every metric name the processes register.
fn code_metrics() -> BTreeMap<String, String> {
    handoff::tables::expositions()
        .iter()
        .flat_map(|e| handoff::tables::parse_exposition(&e.text))
        .map(|m| (m.name, m.kind))
        .collect()
}

#[test]
fn the_tables_are_what_the_code_says() {
    let out = Command::new(env!("CARGO_BIN_EXE_handoff"))
        .arg("tables")
        .output()
        .expect("run handoff tables");
    assert!(
        out.status.success(),
        "handoff tables failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = String::from_utf8(out.stdout).expect("utf-8");
    let committed = read("docs/flags-metrics-columns.md");
    assert!(
        generated == committed,
        "docs/flags-metrics-columns.md differs from `handoff tables`: run `make docs-tables` and commit \
         the result"
    );
}

#[test]
fn flag_tables_name_real_flags_and_their_env() {
    let code = code_flags();
    let mut problems = Vec::new();
    let mut rows_seen = 0;
    for file in doc_files() {
        if file.ends_with("docs/flags-metrics-columns.md") {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read doc");
        for row in tables(&text, &["flag", "env"]) {
            rows_seen += 1;
            let flags = spans(&row[0], |s| s.starts_with("--"));
            let flags: Vec<String> = flags
                .iter()
                .map(|f| f.split([' ', '=']).next().unwrap_or(f).to_owned())
                .collect();
            let documented: BTreeSet<String> =
                spans(&row[1], |s| !s.is_empty()).into_iter().collect();
            if flags.is_empty() {
                problems.push(format!(
                    "{}: a flag row names no `--flag`: {row:?}",
                    relative(&file)
                ));
                continue;
            }
            // The processes that have every flag of the row, and the
            // environment those flags read there.
            let readings: Vec<BTreeSet<String>> = code
                .values()
                .filter(|process| flags.iter().all(|f| process.contains_key(f)))
                .map(|process| flags.iter().filter_map(|f| process[f].clone()).collect())
                .collect();
            if readings.is_empty() {
                problems.push(format!(
                    "{}: no one of `handoff {}` has all of {flags:?}",
                    relative(&file),
                    handoff::tables::SERVER_COMMANDS.join("|")
                ));
                continue;
            }
            if !readings.contains(&documented) {
                problems.push(format!(
                    "{}: {flags:?} read the environment {readings:?}, the docs say {documented:?}",
                    relative(&file)
                ));
            }
        }
    }
    assert!(
        rows_seen >= 20,
        "only {rows_seen} flag rows found: did the tables' header change?"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every `handoff_…` metric name in `text`, as a query names it (a
/// histogram's `_bucket`, `_sum` and `_count` read as the histogram).
fn mentioned_metrics(text: &str, known: &BTreeMap<String, String>) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\bhandoff_(?:controller|mcp|webhook|console)_[a-z0-9_]+")
        .expect("regex");
    re.find_iter(text)
        .map(|m| {
            let name = m.as_str();
            for suffix in ["_bucket", "_sum", "_count"] {
                if let Some(base) = name.strip_suffix(suffix)
                    && known.get(base).is_some_and(|k| k == "histogram")
                {
                    return base.to_owned();
                }
            }
            name.to_owned()
        })
        .collect()
}

#[test]
fn every_metric_the_docs_dashboard_and_rules_name_exists() {
    let known = code_metrics();
    assert!(known.len() > 20, "only {} metrics registered", known.len());
    let mut files = doc_files();
    files.extend(walk(&root().join("config/prometheus"), "json"));
    files.extend(walk(&root().join("config/prometheus"), "yaml"));
    files.extend(walk(&root().join("charts/handoff"), "yaml"));
    files.extend(walk(&root().join("charts/handoff"), "json"));
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        for name in mentioned_metrics(&text, &known) {
            if !known.contains_key(&name) {
                problems.push(format!(
                    "{}: `{name}` is no metric any process registers",
                    relative(file)
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_metrics_table_lists_every_metric_once_with_its_type() {
    let known = code_metrics();
    let operate = read("docs/operate.md");
    let mut listed = BTreeMap::new();
    let mut problems = Vec::new();
    for row in tables(&operate, &["metric", "type"]) {
        let names = spans(&row[0], |s| s.starts_with("handoff_"));
        for name in names {
            if listed.insert(name.clone(), row[1].clone()).is_some() {
                problems.push(format!("{name} is listed twice"));
            }
        }
    }
    for (name, kind) in &known {
        match listed.get(name) {
            None => problems.push(format!(
                "{name} ({kind}) is missing from docs/operate.md's Metrics table"
            )),
            Some(documented) if documented != kind => problems.push(format!(
                "{name} is a {kind}; docs/operate.md says {documented}"
            )),
            Some(_) => {}
        }
    }
    for name in listed.keys() {
        if !known.contains_key(name) {
            problems.push(format!(
                "docs/operate.md lists {name}, which no process registers"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_columns_table_matches_the_crds() {
    let mut code = BTreeSet::new();
    for crd in handoff_core::api::crds() {
        for version in crd.spec.versions.iter().filter(|v| v.served) {
            for column in version.additional_printer_columns.iter().flatten() {
                if column.name != "Age" {
                    let wide = column.priority.unwrap_or(0) > 0;
                    code.insert((crd.spec.names.kind.clone(), column.name.clone(), wide));
                }
            }
        }
    }
    let operate = read("docs/operate.md");
    let mut documented = BTreeSet::new();
    let mut resource = String::new();
    for row in tables(&operate, &["resource", "column", "shown"]) {
        if !row[0].is_empty() {
            resource = row[0].clone();
        }
        documented.insert((resource.clone(), row[1].clone(), row[2] == "`-o wide`"));
    }
    let missing: Vec<_> = code.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&code).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/operate.md's `kubectl get` table differs from the CRDs' printer columns \
         (resource, column, -o wide only):\n  missing: {missing:?}\n  not in the CRDs: {stale:?}"
    );
}

#[test]
fn tables_are_read_as_written() {
    let text = "| flag | env | default |\n|---|---|---|\n| `--a N`, `--b` | `X`, `Y` | 1 |\n\
                | `--c` | | a \\| b |\n\ntext\n| other | table |\n|---|---|\n| x | y |\n";
    let rows = tables(text, &["flag", "env"]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(
        spans(&rows[0][0], |s| s.starts_with("--")),
        ["--a N", "--b"]
    );
    assert_eq!(rows[1][2], "a | b");
    let known = BTreeMap::from([("handoff_mcp_wait".to_owned(), "histogram".to_owned())]);
    assert_eq!(
        mentioned_metrics(
            "rate(handoff_mcp_wait_bucket[5m]) handoff_mcp_x_total",
            &known
        ),
        BTreeSet::from([
            "handoff_mcp_wait".to_owned(),
            "handoff_mcp_x_total".to_owned()
        ])
    );
}
