//! Object-by-object comparison of two renderings (the chart's and a
//! kustomize build's): objects keyed by kind, namespace and name, the
//! labels Helm conventionally adds dropped, and every remaining difference
//! named by its object and JSON path, so a failing test says what to fix
//! and where.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

/// Labels Helm's conventions add to every object (the chart's `handoff.labels`)
/// and config/ does not set: ignored by the comparison. The chart's
/// `app.kubernetes.io/instance` is compared (config/default sets it too).
pub(crate) const HELM_LABELS: [&str; 3] = [
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
];

/// Objects by `Kind namespace/name` (`Kind name` when cluster scoped).
pub(crate) type Objects = BTreeMap<String, Value>;

/// The key of an object: `Kind namespace/name`, or `Kind name`.
pub(crate) fn key(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or("<no kind>");
    let name = object["metadata"]["name"].as_str().unwrap_or("<no name>");
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// `objects` keyed by [`key`], without [`HELM_LABELS`] (and without a
/// labels map they leave empty). Null documents (a template that rendered
/// nothing, a comment-only document) are skipped; a key seen twice is an
/// error naming it.
pub(crate) fn normalize(objects: Vec<Value>) -> Result<Objects, String> {
    let mut out = Objects::new();
    for mut object in objects.into_iter().filter(|o| !o.is_null()) {
        if let Some(labels) = object["metadata"]
            .get_mut("labels")
            .and_then(Value::as_object_mut)
        {
            for label in HELM_LABELS {
                labels.remove(label);
            }
            if labels.is_empty()
                && let Some(metadata) = object["metadata"].as_object_mut()
            {
                metadata.remove("labels");
            }
        }
        let key = key(&object);
        if out.insert(key.clone(), object).is_some() {
            return Err(format!("{key} is rendered twice"));
        }
    }
    Ok(out)
}

/// A name that identifies each element of `items`, when every element is
/// an object with a distinct string `name` (containers, env, ports,
/// volumes): then lists are matched by name, not position.
fn names(items: &[Value]) -> Option<Vec<&str>> {
    let names: Vec<&str> = items
        .iter()
        .map(|i| i.get("name").and_then(Value::as_str))
        .collect::<Option<_>>()?;
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    (sorted.len() == names.len()).then_some(names)
}

/// The element of `items` called `name` (`names` are their [`names`]).
fn named<'a>(items: &'a [Value], names: &[&str], name: &str) -> Option<&'a Value> {
    names.iter().position(|n| *n == name).map(|i| &items[i])
}

/// A value as one line of the report.
fn show(value: Option<&Value>) -> String {
    value.map_or_else(|| "(absent)".to_owned(), Value::to_string)
}

/// Every difference between `left` and `right` under `path`, as
/// `path: left-label <left>, right-label <right>` lines.
fn diff_at(path: &str, left: Option<&Value>, right: Option<&Value>, out: &mut Vec<String>) {
    match (left, right) {
        (Some(Value::Object(l)), Some(Value::Object(r))) => {
            let mut keys: Vec<&String> = l.keys().chain(r.keys()).collect();
            keys.sort_unstable();
            keys.dedup();
            for k in keys {
                diff_at(&format!("{path}.{k}"), l.get(k), r.get(k), out);
            }
        }
        (Some(Value::Array(l)), Some(Value::Array(r))) => match (names(l), names(r)) {
            (Some(ln), Some(rn)) => {
                let mut all: Vec<&str> = ln.iter().chain(&rn).copied().collect();
                all.sort_unstable();
                all.dedup();
                for name in all {
                    diff_at(
                        &format!("{path}[name={name}]"),
                        named(l, &ln, name),
                        named(r, &rn, name),
                        out,
                    );
                }
                let common = |a: &[&str], b: &[&str]| -> Vec<String> {
                    a.iter()
                        .filter(|n| b.contains(n))
                        .map(|n| (*n).to_owned())
                        .collect()
                };
                let (lo, ro) = (common(&ln, &rn), common(&rn, &ln));
                if lo != ro {
                    out.push(format!("{path}: order {lo:?} vs {ro:?}"));
                }
            }
            _ => {
                for i in 0..l.len().max(r.len()) {
                    diff_at(&format!("{path}[{i}]"), l.get(i), r.get(i), out);
                }
            }
        },
        (l, r) if l == r => {}
        (l, r) => out.push(format!("{path}: {} vs {}", show(l), show(r))),
    }
}

/// The differences of two renderings, one line each, empty when they
/// agree: objects only one side renders, then each shared object's
/// differing JSON paths (`left` and `right` name the sides).
pub(crate) fn compare(left: &Objects, right: &Objects, names: (&str, &str)) -> Vec<String> {
    let mut out = Vec::new();
    for key in left.keys().filter(|k| !right.contains_key(*k)) {
        out.push(format!("{key}: only in {}", names.0));
    }
    for key in right.keys().filter(|k| !left.contains_key(*k)) {
        out.push(format!("{key}: only in {}", names.1));
    }
    for (key, l) in left {
        if let Some(r) = right.get(key) {
            let mut paths = Vec::new();
            diff_at("", Some(l), Some(r), &mut paths);
            out.extend(paths.into_iter().map(|p| format!("{key} at {p}")));
        }
    }
    out
}

/// The report of [`compare`]'s lines, for a panic message.
pub(crate) fn report(lines: &[String], names: (&str, &str)) -> String {
    let mut text = format!(
        "{} difference(s) ({} vs {}; `a vs b` is {} then {}):\n",
        lines.len(),
        names.0,
        names.1,
        names.0,
        names.1
    );
    for line in lines {
        let _ = writeln!(text, "  {line}");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What, the left and right objects, the report's lines.
    type Case = (&'static str, Vec<Value>, Vec<Value>, Vec<&'static str>);

    fn objects(values: Vec<Value>) -> Objects {
        normalize(values).expect("distinct keys")
    }

    #[test]
    fn normalize_drops_helm_labels_and_nulls_and_refuses_twins() {
        let chart = json!({"kind": "ServiceAccount", "metadata": {"name": "a", "namespace": "ns",
            "labels": {"helm.sh/chart": "handoff-0.1.0", "app.kubernetes.io/managed-by": "Helm",
                       "app.kubernetes.io/version": "0.1.0", "app.kubernetes.io/instance": "handoff"}}});
        let got = objects(vec![Value::Null, chart]);
        assert_eq!(
            got["ServiceAccount ns/a"]["metadata"]["labels"],
            json!({"app.kubernetes.io/instance": "handoff"})
        );
        let only_helm = json!({"kind": "ClusterRole", "metadata": {"name": "r",
            "labels": {"helm.sh/chart": "x"}}});
        let got = objects(vec![only_helm]);
        assert_eq!(
            got["ClusterRole r"]["metadata"],
            json!({"name": "r"}),
            "an emptied labels map goes"
        );
        let twin = json!({"kind": "Role", "metadata": {"name": "r", "namespace": "n"}});
        assert_eq!(
            normalize(vec![twin.clone(), twin]),
            Err("Role n/r is rendered twice".to_owned())
        );
    }

    #[test]
    fn compare_names_objects_and_paths() {
        let deployment = |args: Value, env: Value, replicas: u32| {
            json!({"kind": "Deployment", "metadata": {"name": "d", "namespace": "ns"},
                "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                    {"name": "c", "args": args, "env": env}]}}}})
        };
        let env = |names: &[&str]| Value::Array(names.iter().map(|n| json!({"name": n})).collect());
        let base = deployment(json!(["run", "--a=1"]), env(&["A", "B"]), 2);
        let cases: Vec<Case> = vec![
            ("equal", vec![base.clone()], vec![base.clone()], vec![]),
            (
                "an arg",
                vec![deployment(json!(["run", "--a=2"]), env(&["A", "B"]), 2)],
                vec![base.clone()],
                vec![
                    "Deployment ns/d at .spec.template.spec.containers[name=c].args[1]: \"--a=2\" vs \"--a=1\"",
                ],
            ),
            (
                "an extra arg and replicas",
                vec![deployment(
                    json!(["run", "--a=1", "--b"]),
                    env(&["A", "B"]),
                    3,
                )],
                vec![base.clone()],
                vec![
                    "Deployment ns/d at .spec.replicas: 3 vs 2",
                    "Deployment ns/d at .spec.template.spec.containers[name=c].args[2]: \"--b\" vs (absent)",
                ],
            ),
            (
                "env by name, and its order",
                vec![deployment(
                    json!(["run", "--a=1"]),
                    env(&["B", "A", "C"]),
                    2,
                )],
                vec![base.clone()],
                vec![
                    "Deployment ns/d at .spec.template.spec.containers[name=c].env[name=C]: {\"name\":\"C\"} vs (absent)",
                    "Deployment ns/d at .spec.template.spec.containers[name=c].env: order [\"B\", \"A\"] vs [\"A\", \"B\"]",
                ],
            ),
            (
                "objects on one side",
                vec![json!({"kind": "Namespace", "metadata": {"name": "x"}})],
                vec![base.clone()],
                vec![
                    "Namespace x: only in left",
                    "Deployment ns/d: only in right",
                ],
            ),
        ];
        for (what, left, right, want) in cases {
            let got = compare(&objects(left), &objects(right), ("left", "right"));
            assert_eq!(got, want, "{what}");
        }
    }
}
