//! The Helm chart (charts/handoff) and config/ are one installation
//! described twice: these tests render both and fail on any difference
//! beyond what a value names, object by object and JSON path by JSON path
//! (RBAC rules, args, env, probes, security contexts, everything). The
//! defaults are config/default; `postgres.enabled` is
//! config/overlays/postgres; `webhook.certificates.mode=certManager` is
//! config/overlays/cert-manager; `console.enabled` is config/default with
//! config/console beside it; ci/all-values.yaml (every option on) is
//! the kustomize build that turns on the same options; `tenantQuota` is
//! config/tenant's quota as an overlay resizes or drops it. Also: the chart's
//! generated crds/, dashboard and alerts are config/'s (tests/gitops.rs
//! unit-tests the alerts with promtool), `helm lint --strict` is
//! clean, bad values are refused naming the field, the README documents every value, the rendered
//! chart passes a server-side dry run on the test kit's control plane, and
//! Helm installs, upgrades (to the other certificate mode) and uninstalls
//! it there, keeping the CRDs.
//!
//! Needs Helm (`make helm`) and the control plane's binaries, kubectl
//! among them (`make envtest-assets`).

mod compare;
mod dry_run;
mod install;
#[allow(
    dead_code,
    reason = "shared with the other suites; this one uses a subset"
)]
#[path = "../common/kubectl.rs"]
mod kubectl;
mod quota;
mod render;

use serde_json::Value;

use compare::{Objects, compare, report};
use render::{
    NAMESPACE, chart, chart_objects, helm_run, kustomize, kustomize_objects, overlay, root,
    template,
};

/// The sides' names in reports.
const SIDES: (&str, &str) = ("the chart", "kustomize");

/// The label config/default adds to every object (its kustomization's
/// `labels`), which the chart's crds/ cannot carry: Helm does not template
/// crds/.
const INSTANCE: &str = "app.kubernetes.io/instance";

/// What differs by design between the chart and any kustomize build:
/// the CRDs in the chart's crds/ are config/crd as rendered, without
/// config/default's instance label (crds/ is not templated).
fn untemplated_crds(kustomize: &mut Objects) {
    for (key, object) in kustomize.iter_mut() {
        if key.starts_with("CustomResourceDefinition ")
            && let Some(labels) = object["metadata"]["labels"].as_object_mut()
        {
            labels.remove(INSTANCE);
            if labels.is_empty()
                && let Some(metadata) = object["metadata"].as_object_mut()
            {
                metadata.remove("labels");
            }
        }
    }
}

/// Removes `key` from `objects`, which must hold it (`why` says why the
/// other side has no counterpart).
fn without(objects: &mut Objects, key: &str, why: &str) -> Value {
    objects
        .remove(key)
        .unwrap_or_else(|| panic!("{key} is not rendered ({why})"))
}

/// Fails with the report when `chart` and `kustomize` differ.
fn assert_same(chart: &Objects, kustomize: &Objects, what: &str) {
    let lines = compare(chart, kustomize, SIDES);
    assert!(lines.is_empty(), "{what}: {}", report(&lines, SIDES));
}

#[test]
fn the_defaults_render_config_default() {
    let chart = chart_objects(&[], &[]);
    let mut kustomize = kustomize_objects(&root().join("config/default"));
    untemplated_crds(&mut kustomize);
    without(
        &mut kustomize,
        &format!("Namespace {NAMESPACE}"),
        "values namespace.create is false: Helm keeps the release namespace out of the release",
    );
    assert_same(&chart, &kustomize, "chart defaults vs config/default");
}

#[test]
fn postgres_enabled_renders_the_postgres_overlay() {
    renders_the_overlay("postgres.enabled=true", "config/overlays/postgres");
}

#[test]
fn cert_manager_mode_renders_the_cert_manager_overlay() {
    renders_the_overlay(
        "webhook.certificates.mode=certManager",
        "config/overlays/cert-manager",
    );
}

#[test]
fn console_enabled_renders_config_console_beside_config_default() {
    let dir = overlay(&[(
        "kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - config/default
  - config/console
",
    )]);
    let chart = chart_objects(&[], &["console.enabled=true"]);
    let mut kustomize = kustomize_objects(dir.path());
    untemplated_crds(&mut kustomize);
    without(
        &mut kustomize,
        &format!("Namespace {NAMESPACE}"),
        "values namespace.create is false",
    );
    for kind in [
        "ServiceAccount",
        "RoleBinding",
        "Deployment",
        "Service",
        "NetworkPolicy",
    ] {
        assert!(
            kustomize.contains_key(&format!("{kind} {NAMESPACE}/handoff-console")),
            "config/console renders {kind} handoff-console"
        );
    }
    assert_same(
        &chart,
        &kustomize,
        "console.enabled=true vs config/default + config/console",
    );
}

/// The chart with one value `set` against the kustomize `overlay` of
/// config/default that the value stands for.
fn renders_the_overlay(set: &str, overlay: &str) {
    let chart = chart_objects(&[], &[set]);
    let mut kustomize = kustomize_objects(&root().join(overlay));
    untemplated_crds(&mut kustomize);
    without(
        &mut kustomize,
        &format!("Namespace {NAMESPACE}"),
        "values namespace.create is false",
    );
    assert_same(&chart, &kustomize, &format!("{set} vs {overlay}"));
}

/// The digest of ci/all-values.yaml.
const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The kustomize build that turns on what ci/all-values.yaml turns on.
fn all_options_overlay() -> tempfile::TempDir {
    let top = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - config/overlays/cert-manager
  - config/console
  - config/prometheus
  - team-a
  - team-b
components:
  - config/components/bridge-tls
patches:
  - path: config/overlays/postgres/controller-database.yaml
    target:
      kind: Deployment
      name: handoff-controller
  - target:
      kind: Deployment
      name: handoff-console
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --allowed-host=handoff.example.com
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --namespace=team-a
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --namespace=team-b
  # monitoring.*.labels: the label a kube-prometheus-stack Prometheus
  # selects (docs/operate.md), as a kustomize overlay sets it.
  - target:
      group: monitoring.coreos.com
    patch: |-
      - op: add
        path: /metadata/labels/release
        value: kube-prometheus-stack
labels:
  - pairs:
      {INSTANCE}: handoff
    includeSelectors: false
images:
  - name: ghcr.io/handoff-dev/handoff
    digest: {DIGEST}
replicas:
  - name: handoff-controller
    count: 3
"
    );
    let team = |ns: &str| {
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {ns}
resources:
  - ../config/tenant
"
        )
    };
    let (a, b) = (team("team-a"), team("team-b"));
    overlay(&[
        ("kustomization.yaml", top.as_str()),
        ("team-a/kustomization.yaml", a.as_str()),
        ("team-b/kustomization.yaml", b.as_str()),
    ])
}

#[test]
fn every_option_renders_its_kustomize_counterpart() {
    let chart = chart_objects(&["charts/handoff/ci/all-values.yaml"], &[]);
    let dir = all_options_overlay();
    let mut kustomize = kustomize_objects(dir.path());
    untemplated_crds(&mut kustomize);
    assert_same(&chart, &kustomize, "ci/all-values.yaml vs its overlay");
}

#[test]
fn the_chart_crds_are_config_crd() {
    let want = format!(
        "# Generated by `make chart-crds` from config/crd (kubectl kustomize); do not edit.\n{}",
        kustomize(&root().join("config/crd"))
    );
    let path = chart().join("crds/handoff.yaml");
    let got = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run `make chart-crds`", path.display()));
    assert!(
        got == want,
        "{} differs from `kubectl kustomize config/crd` (crds/ changed?): run `make chart-crds`",
        path.display()
    );
    let files: Vec<_> = std::fs::read_dir(chart().join("crds"))
        .expect("crds/")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(files, ["handoff.yaml"], "Helm installs every file of crds/");
}

#[test]
fn helm_lint_is_clean() {
    let chart = chart();
    let chart = chart.to_str().expect("a UTF-8 path");
    for values in [None, Some("charts/handoff/ci/all-values.yaml")] {
        let mut args = vec!["lint", "--strict", chart];
        args.extend(values.iter().flat_map(|v| ["--values", v]));
        if let Err(e) = helm_run(&args) {
            panic!("helm {}: {e}", args.join(" "));
        }
    }
}

#[test]
fn bad_values_are_refused_naming_the_field() {
    let cases = [
        (
            "controller.replicas=0",
            "at '/controller/replicas': minimum",
        ),
        ("webhook.replicas=two", "at '/webhook/replicas'"),
        ("image.pullPolicy=Sometimes", "at '/image/pullPolicy'"),
        ("image.digest=latest", "at '/image/digest'"),
        ("image.repository=Ghcr.io/X", "at '/image/repository'"),
        ("tenants[0]=Team_A", "at '/tenants/0'"),
        (
            "webhook.certificates.mode=none",
            "at '/webhook/certificates/mode'",
        ),
        (
            "postgres.dsnSecret.dsn=postgres://x",
            "at '/postgres/dsnSecret': additional properties 'dsn'",
        ),
        (
            "controller.resources.limits.memory=lots",
            "at '/controller/resources/limits/memory'",
        ),
        (
            "monitoring.serviceMonitor.interval=soon",
            "at '/monitoring/serviceMonitor/interval'",
        ),
        (
            "console.allowedHosts[0]=Evil_Host",
            "at '/console/allowedHosts/0'",
        ),
        ("replicas=3", "at '': additional properties 'replicas'"),
    ];
    for (set, want) in cases {
        match template(&[], &[set]) {
            Ok(_) => panic!("--set {set} rendered"),
            Err(e) => assert!(e.contains(want), "--set {set}: want {want:?} in: {e}"),
        }
    }
}

#[test]
fn values_reach_their_fields() {
    let controller = format!("Deployment {NAMESPACE}/handoff-controller");
    let bridge = format!("Deployment {NAMESPACE}/handoff-bridge");
    let webhook = format!("Deployment {NAMESPACE}/handoff-webhook");
    let monitor = format!("ServiceMonitor {NAMESPACE}/handoff-bridge");
    let webhook_monitor = format!("ServiceMonitor {NAMESPACE}/handoff-webhook");
    let rule = format!("PrometheusRule {NAMESPACE}/handoff");
    let console = format!("Deployment {NAMESPACE}/handoff-console");
    let container = "/spec/template/spec/containers/0";
    // (--set, object, JSON pointer, the value there; None: absent)
    let cases: [(&str, &str, String, Option<Value>); 13] = [
        (
            "image.tag=v9",
            &bridge,
            format!("{container}/image"),
            Some("ghcr.io/handoff-dev/handoff:v9".into()),
        ),
        (
            "image.pullPolicy=Always",
            &webhook,
            format!("{container}/imagePullPolicy"),
            Some("Always".into()),
        ),
        (
            "webhook.replicas=3",
            &webhook,
            "/spec/replicas".into(),
            Some(3.into()),
        ),
        (
            "bridge.replicas=5",
            &bridge,
            "/spec/replicas".into(),
            Some(5.into()),
        ),
        (
            "bridge.resources.limits.memory=1Gi",
            &bridge,
            format!("{container}/resources/limits/memory"),
            Some("1Gi".into()),
        ),
        (
            "controller.resources.requests.cpu=200m",
            &controller,
            format!("{container}/resources/requests/cpu"),
            Some("200m".into()),
        ),
        (
            "postgres.enabled=true,postgres.ca.enabled=false",
            &controller,
            "/spec/template/spec/volumes".into(),
            None,
        ),
        (
            "postgres.enabled=true,postgres.dsnSecret.name=pg",
            &controller,
            format!("{container}/env/0/valueFrom/secretKeyRef/name"),
            Some("pg".into()),
        ),
        (
            "console.enabled=true,console.allowedHosts={handoff.example.com}",
            &console,
            format!("{container}/args/7"),
            Some("--allowed-host=handoff.example.com".into()),
        ),
        (
            "console.enabled=true,console.postgresSecret.name=pg-reader",
            &console,
            format!("{container}/env/1/valueFrom/secretKeyRef/name"),
            Some("pg-reader".into()),
        ),
        (
            "monitoring.serviceMonitor.enabled=true,monitoring.serviceMonitor.interval=1m",
            &monitor,
            "/spec/endpoints/0/interval".into(),
            Some("1m".into()),
        ),
        (
            "monitoring.serviceMonitor.enabled=true,monitoring.serviceMonitor.labels.release=kps",
            &webhook_monitor,
            "/metadata/labels/release".into(),
            Some("kps".into()),
        ),
        (
            "monitoring.prometheusRule.enabled=true,monitoring.prometheusRule.labels.release=kps",
            &rule,
            "/metadata/labels/release".into(),
            Some("kps".into()),
        ),
    ];
    for (set, key, pointer, want) in cases {
        let objects = chart_objects(&[], &[set]);
        let object = objects
            .get(key)
            .unwrap_or_else(|| panic!("--set {set}: {key} is not rendered"));
        assert_eq!(
            object.pointer(&pointer),
            want.as_ref(),
            "--set {set}: {key} at {pointer}"
        );
    }
}

#[test]
fn the_console_is_opt_in_and_its_network_policy_follows_network_policy_enabled() {
    let console = |sets: &[&str]| -> Vec<String> {
        chart_objects(&[], sets)
            .into_keys()
            .filter(|k| k.ends_with("/handoff-console"))
            .collect()
    };
    assert_eq!(console(&[]), Vec::<String>::new(), "off by default");
    let policy = format!("NetworkPolicy {NAMESPACE}/handoff-console");
    assert!(console(&["console.enabled=true"]).contains(&policy));
    let without_policies = console(&["console.enabled=true", "networkPolicy.enabled=false"]);
    assert!(
        !without_policies.contains(&policy) && without_policies.len() == 4,
        "{without_policies:?}"
    );
}

/// The dotted paths of `values`' leaves (a list or an empty map is a leaf).
fn leaves(prefix: &str, values: &Value, out: &mut Vec<String>) {
    match values {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                if k == "resources" {
                    out.push(path);
                } else {
                    leaves(&path, v, out);
                }
            }
        }
        _ => out.push(prefix.to_owned()),
    }
}

#[test]
fn the_readme_documents_every_value() {
    let values = std::fs::read_to_string(chart().join("values.yaml")).expect("values.yaml");
    let values: Value = serde_saphyr::from_str(&values).expect("values.yaml is YAML");
    let readme = std::fs::read_to_string(chart().join("README.md")).expect("README.md");
    let mut paths = Vec::new();
    leaves("", &values, &mut paths);
    let missing: Vec<_> = paths
        .iter()
        .filter(|p| !readme.contains(&format!("| `{p}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "charts/handoff/README.md has no values-table row for {missing:?}"
    );
}
