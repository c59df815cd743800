//! config/prometheus as Prometheus reads it: the PrometheusRule's `spec`
//! passes `promtool check rules` and the cases of
//! config/prometheus/tests/ (`promtool test rules`); every alert has a case
//! where it fires and one where it stays quiet, a severity, a summary, a
//! description and a runbook link to a section of docs/operate.md that
//! exists; and every metric the alerts and the Grafana dashboard query is
//! one the code registers (the controller's, the bridge's and the
//! webhook's expositions, as `handoff tables` reads them) or one of the few that
//! kube-prometheus-stack brings ([`EXTERNAL`]).
//!
//! Needs promtool: built by `hack/tools/build.sh promtool` (`make promtool`
//! or `make tools`); the tests fail naming that command when it is not.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::root;
use super::yaml::{documents, read};

/// Metrics the alerts may use that no handoff component registers, with
/// who exports them (all are part of kube-prometheus-stack).
const EXTERNAL: [(&str, &str); 3] = [
    ("up", "Prometheus, per scraped target"),
    (
        "kube_pod_container_status_restarts_total",
        "kube-state-metrics",
    ),
    (
        "apiserver_admission_webhook_rejection_count",
        "the kube-apiserver",
    ),
];

/// The promtool `hack/tools/build.sh --cached promtool` names, else a
/// failure saying how to build it.
fn promtool() -> PathBuf {
    let out = Command::new(root().join("hack/tools/build.sh"))
        .args(["--cached", "promtool"])
        .output()
        .expect("running hack/tools/build.sh --cached promtool");
    assert!(
        out.status.success(),
        "promtool is needed to test config/prometheus/rules.yaml: run `make promtool` (or `make tools`) \
         once (a cold build takes minutes); {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(stdout.lines().last().expect("the binary's path").trim())
}

/// The PrometheusRule of config/prometheus/rules.yaml.
fn rule() -> Value {
    let path = root().join("config/prometheus/rules.yaml");
    documents(&read(&path), "config/prometheus/rules.yaml")
        .into_iter()
        .find(|d| d["kind"] == "PrometheusRule")
        .expect("config/prometheus/rules.yaml holds a PrometheusRule")
}

/// Every alerting rule of a PrometheusRule.
fn alerts(rule: &Value) -> Vec<&Value> {
    rule["spec"]["groups"]
        .as_array()
        .expect("spec.groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("a group's rules"))
        .filter(|r| r.get("alert").is_some())
        .collect()
}

/// The test files of config/prometheus/tests, by file name.
fn test_files() -> BTreeMap<String, Value> {
    let dir = root().join("config/prometheus/tests");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("config/prometheus/tests") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            let doc = documents(&read(&path), &name).into_iter().next();
            out.insert(name, doc.expect("a test file has a document"));
        }
    }
    assert!(!out.is_empty(), "config/prometheus/tests has no test file");
    out
}

/// `spec` without its rules' annotations: promtool compares a firing
/// alert's annotations whole, so the cases would repeat every text;
/// `promtool check rules` checks the templates, [`every_alert_says_what_to_do`]
/// the rest.
fn without_annotations(spec: &Value) -> Value {
    let mut spec = spec.clone();
    for group in spec["groups"].as_array_mut().expect("groups") {
        for rule in group["rules"].as_array_mut().expect("rules") {
            if let Some(rule) = rule.as_object_mut() {
                rule.remove("annotations");
            }
        }
    }
    spec
}

/// Runs `promtool ARGS` in `dir`; its output, or a failure showing it.
fn run_promtool(promtool: &Path, dir: &Path, args: &[&str]) -> String {
    let out = Command::new(promtool)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {}:\n{text}", args.join(" "));
    text
}

#[test]
fn promtool_checks_the_rules_and_runs_their_cases() {
    let promtool = promtool();
    let spec = &rule()["spec"];
    let dir = tempfile::tempdir().expect("tempdir");
    // JSON is YAML: promtool reads the spec as a rules file.
    let write = |name: &str, value: &Value| {
        std::fs::write(
            dir.path().join(name),
            serde_json::to_string_pretty(value).expect("json"),
        )
        .expect("write a rules file");
    };
    write("checked.yaml", spec);
    run_promtool(&promtool, dir.path(), &["check", "rules", "checked.yaml"]);
    write("rules.yaml", &without_annotations(spec));
    let mut args = vec!["test".to_owned(), "rules".to_owned()];
    for name in test_files().keys() {
        std::fs::copy(
            root().join("config/prometheus/tests").join(name),
            dir.path().join(name),
        )
        .expect("copy a test file");
        args.push(name.clone());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_promtool(&promtool, dir.path(), &args);
    assert!(out.contains("SUCCESS"), "{out}");
}

/// Alerts that miss a case where they fire or one where they stay quiet.
fn untested(alerts: &[&str], tests: &[Value]) -> Vec<String> {
    let (mut fires, mut quiet) = (BTreeSet::new(), BTreeSet::new());
    for file in tests {
        for group in file["tests"].as_array().into_iter().flatten() {
            for case in group["alert_rule_test"].as_array().into_iter().flatten() {
                let name = case["alertname"].as_str().unwrap_or_default();
                let expected = case["exp_alerts"].as_array().map_or(0, Vec::len);
                if expected > 0 { &mut fires } else { &mut quiet }.insert(name);
            }
        }
    }
    let mut missing = Vec::new();
    for alert in alerts {
        if !fires.contains(alert) {
            missing.push(format!("{alert}: no case where it fires"));
        }
        if !quiet.contains(alert) {
            missing.push(format!("{alert}: no case where it stays quiet"));
        }
    }
    missing
}

#[test]
fn every_alert_has_a_case_that_fires_and_one_that_does_not() {
    let rule = rule();
    let names: Vec<&str> = alerts(&rule)
        .iter()
        .map(|a| a["alert"].as_str().expect("alert name"))
        .collect();
    assert!(names.len() >= 10, "{names:?}");
    let tests: Vec<Value> = test_files().into_values().collect();
    let missing = untested(&names, &tests);
    assert!(
        missing.is_empty(),
        "add cases to config/prometheus/tests: {missing:#?}"
    );

    let case = |name: &str, fires: bool| {
        let expected = if fires { "[{exp_labels: {}}]" } else { "[]" };
        documents(
            &format!(
                "tests: [{{alert_rule_test: [{{alertname: {name}, exp_alerts: {expected}}}]}}]"
            ),
            "a case",
        )
    };
    let only_fires = case("A", true);
    assert_eq!(
        untested(&["A"], &only_fires),
        ["A: no case where it stays quiet"]
    );
    assert_eq!(
        untested(&["A", "B"], &case("B", false)),
        [
            "A: no case where it fires",
            "A: no case where it stays quiet",
            "B: no case where it fires"
        ]
    );
}

/// The GitHub anchor of a Markdown heading's text.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_alert_says_what_to_do_and_links_a_section_that_exists() {
    let docs = read(&root().join("docs/operate.md"));
    let anchors: BTreeSet<String> = docs
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect();
    let link = "https://github.com/handoff-dev/handoff/blob/main/docs/operate.md#";
    let rule = rule();
    for alert in alerts(&rule) {
        let name = alert["alert"].as_str().expect("alert name");
        let severity = alert["labels"]["severity"].as_str();
        assert!(
            matches!(severity, Some("critical" | "warning" | "info")),
            "{name}: severity {severity:?}"
        );
        for field in ["summary", "description"] {
            assert!(
                alert["annotations"][field]
                    .as_str()
                    .is_some_and(|t| !t.trim().is_empty()),
                "{name}: no {field}"
            );
        }
        let url = alert["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_default();
        let section = url
            .strip_prefix(link)
            .unwrap_or_else(|| panic!("{name}: runbook_url {url:?} is not {link}…"));
        assert_eq!(section, anchor(name), "{name}: link its own section");
        assert!(
            anchors.contains(section),
            "{name}: docs/operate.md has no heading for #{section} (add `### {name}` under `## Alerts`)"
        );
    }
    for (heading, id) in [
        (" HandoffControllerNoLeader", "handoffcontrollernoleader"),
        (
            "How Prometheus finds the monitors, and the rules",
            "how-prometheus-finds-the-monitors-and-the-rules",
        ),
    ] {
        assert_eq!(anchor(heading), id, "{heading}");
    }
}

/// The series names the code's registries expose: every process's
/// exposition as a fresh process serves it (each family listed before its
/// first series: `handoff_kube::telemetry::Listed`), read as
/// `handoff tables` reads it; a histogram's series are its `_bucket`,
/// `_sum` and `_count`.
fn registered() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for exposition in handoff::tables::expositions() {
        for metric in handoff::tables::parse_exposition(&exposition.text) {
            if metric.kind == "histogram" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{}{suffix}", metric.name));
                }
            } else {
                names.insert(metric.name);
            }
        }
    }
    names
}

/// Removes every match of `pattern` from `text`.
fn strip(text: &str, pattern: &str) -> String {
    regex::Regex::new(pattern)
        .expect("a regex")
        .replace_all(text, " ")
        .into_owned()
}

/// The metric names a PromQL expression (or a Grafana target's) selects:
/// its identifiers once strings, label matchers, ranges and grouping
/// clauses are gone, less function and aggregation names (followed by
/// `(`), keywords and numbers.
fn metric_names(expr: &str) -> BTreeSet<String> {
    const KEYWORDS: [&str; 13] = [
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "inf",
        "nan",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    let mut text = strip(expr, r#""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'"#);
    text = strip(&text, r"\{[^}]*\}|\[[^\]]*\]");
    text = strip(
        &text,
        r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)",
    );
    let ident = regex::Regex::new(r"[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?").expect("a regex");
    let mut names = BTreeSet::new();
    for found in ident.captures_iter(&text) {
        let whole = found.get(0).expect("a match");
        let before = text[..whole.start()].chars().next_back();
        let in_a_word = before.is_some_and(|c| c.is_ascii_alphanumeric() || "_:.$".contains(c));
        let name = whole.as_str().trim_end_matches('(').trim_end();
        if found.get(1).is_none() && !in_a_word && !KEYWORDS.contains(&name.to_lowercase().as_str())
        {
            names.insert(name.to_owned());
        }
    }
    names
}

#[test]
fn metric_names_are_read_from_expressions() {
    // (expression, the metric names in it)
    let cases: [(&str, &[&str]); 6] = [
        (
            r#"max by (namespace) (handoff_controller_leader) < 1 or absent(handoff_controller_leader)"#,
            &["handoff_controller_leader"],
        ),
        (
            r#"histogram_quantile(0.99, sum by (le) (rate(a_bucket{job="x", le=~"1|2"}[$__rate_interval])))"#,
            &["a_bucket"],
        ),
        (
            "sum(rate(a_total[5m])) / on (namespace) group_left sum(b) > 1e3",
            &["a_total", "b"],
        ),
        ("absent(up{job=\"handoff-webhook\"} == 1)", &["up"]),
        ("sum without (pod) (c offset 5m) unless d", &["c", "d"]),
        ("vector(0) + time()", &[]),
    ];
    for (expr, want) in cases {
        let want: BTreeSet<String> = want.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(metric_names(expr), want, "{expr}");
    }
}

/// Every `expr` string in a JSON document (a dashboard's targets).
fn exprs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("expr", Value::String(expr)) => out.push(expr.clone()),
                    _ => exprs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| exprs(v, out)),
        _ => {}
    }
}

/// The metrics each of `queries` (what, expression) uses that `known`
/// lacks.
fn unknown(queries: &[(String, String)], known: &BTreeSet<String>) -> Vec<String> {
    let mut wrong = Vec::new();
    for (what, expr) in queries {
        let names = metric_names(expr);
        if names.is_empty() {
            wrong.push(format!("{what}: queries no metric: {expr}"));
        }
        for name in names.difference(known) {
            wrong.push(format!("{what}: {name} is registered by no component"));
        }
    }
    wrong
}

#[test]
fn alerts_and_the_dashboard_query_metrics_that_exist() {
    let mut known = registered();
    for name in [
        "handoff_controller_leader",
        "handoff_mcp_tool_calls_total",
        "handoff_webhook_request_duration_seconds_bucket",
        "handoff_controller_reconcile_errors_total",
    ] {
        assert!(known.contains(name), "{name} not in {known:#?}");
    }
    known.extend(EXTERNAL.iter().map(|(name, _)| (*name).to_owned()));

    let rule = rule();
    let mut queries: Vec<(String, String)> = alerts(&rule)
        .iter()
        .map(|a| {
            (
                format!("alert {}", a["alert"].as_str().unwrap_or("?")),
                a["expr"].as_str().expect("expr").to_owned(),
            )
        })
        .collect();
    let dashboard: Value = serde_json::from_str(&read(
        &root().join("config/prometheus/handoff-dashboard.json"),
    ))
    .expect("the dashboard is JSON");
    let mut targets = Vec::new();
    exprs(&dashboard, &mut targets);
    assert!(targets.len() >= 10, "{targets:?}");
    queries.extend(targets.into_iter().map(|e| ("the dashboard".to_owned(), e)));
    let wrong = unknown(&queries, &known);
    assert!(wrong.is_empty(), "{wrong:#?}");

    let typo = [(
        "alert X".to_owned(),
        "rate(handoff_controller_mirror_error_total[5m]) > 0".to_owned(),
    )];
    assert_eq!(
        unknown(&typo, &known),
        ["alert X: handoff_controller_mirror_error_total is registered by no component"]
    );
}
