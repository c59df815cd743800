//! The GitOps examples (examples/gitops/) and the docs' install lines pin
//! the release being made: every Argo CD `targetRevision`, Flux
//! GitRepository tag, HelmRelease chart version, `?ref=` and release URL
//! names `v` + the workspace version, so a version bump that forgets one
//! fails here. What can be rendered without a cluster is rendered with
//! kustomize (the paths the examples point at, with their namespace), and
//! the Argo CD sync waves are checked to order what depends on what.
//! config/console (opt-in) is held to the same image pin, its account to
//! no read of its own, and examples/console's oauth2-proxy to forwarding
//! the person's token to it.
//! (tests/it/install.rs dry-runs the same files against an apiserver.)
//! config/prometheus's alerts are tested with promtool ([`alerts`]).
//!
//! Needs kustomize and promtool: built by `hack/tools/build.sh kustomize`
//! and `hack/tools/build.sh promtool` (`make tools`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

#[path = "common/yaml.rs"]
mod yaml;

#[path = "gitops/alerts.rs"]
mod alerts;
use yaml::{documents, read};

const NUMBER: &str = env!("CARGO_PKG_VERSION");
const VERSION: &str = concat!("v", env!("CARGO_PKG_VERSION"));
const REPO: &str = "https://github.com/handoff-dev/handoff";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every document of examples/gitops/*.yaml, with its file's name.
fn examples() -> Vec<(String, Value)> {
    let dir = root().join("examples/gitops");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/gitops")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let name = file
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        for doc in documents(&read(&file), &name) {
            out.push((name.clone(), doc));
        }
    }
    out
}

fn kustomize() -> PathBuf {
    let out = Command::new(root().join("hack/tools/build.sh"))
        .arg("kustomize")
        .output()
        .expect("running hack/tools/build.sh kustomize");
    assert!(
        out.status.success(),
        "kustomize is needed (make tools): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(stdout.lines().last().expect("the binary's path").trim())
}

/// `kustomize build` of `path` (relative to the repository), in
/// `namespace` when given (as Argo CD's `kustomize.namespace` and Flux's
/// `targetNamespace` do), as documents.
fn render(kustomize: &Path, path: &str, namespace: Option<&str>) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = root().join(path.trim_start_matches("./"));
    assert!(
        source.is_dir(),
        "{path} is not a directory of the repository"
    );
    let target = match namespace {
        None => source,
        Some(ns) => {
            let overlay = dir.path().join("overlay");
            std::fs::create_dir(&overlay).expect("overlay");
            std::fs::write(
                overlay.join("kustomization.yaml"),
                format!("namespace: {ns}\nresources:\n  - base\n"),
            )
            .expect("overlay kustomization");
            std::os::unix::fs::symlink(&source, overlay.join("base")).expect("symlink");
            overlay
        }
    };
    let out = Command::new(kustomize)
        .args(["build", "--load-restrictor", "LoadRestrictionsNone"])
        .arg(&target)
        .output()
        .expect("kustomize");
    assert!(
        out.status.success(),
        "kustomize build {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    documents(&String::from_utf8_lossy(&out.stdout), path)
}

fn wave(doc: &Value) -> i64 {
    doc["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]
        .as_str()
        .map_or(0, |w| w.parse().expect("a sync wave is an integer"))
}

/// What a pin of one example must say, or why it is wrong.
fn check_pin(file: &str, doc: &Value) -> Result<(), String> {
    let name = doc["metadata"]["name"].as_str().unwrap_or("?");
    let at = format!("{file}: {} {name}", doc["kind"].as_str().unwrap_or("?"));
    let want = |field: &str, got: &Value, want: &str| {
        if got.as_str() == Some(want) {
            Ok(())
        } else {
            Err(format!("{at}: {field} is {got}, want {want:?}"))
        }
    };
    match doc["kind"].as_str() {
        Some("Application") => {
            want(
                "spec.source.repoURL",
                &doc["spec"]["source"]["repoURL"],
                REPO,
            )?;
            want(
                "spec.source.targetRevision",
                &doc["spec"]["source"]["targetRevision"],
                VERSION,
            )
        }
        Some("GitRepository") => {
            want("spec.url", &doc["spec"]["url"], REPO)?;
            if doc["spec"]["ref"].as_object().map(|r| r.len()) != Some(1) {
                return Err(format!("{at}: spec.ref must name the tag only"));
            }
            want("spec.ref.tag", &doc["spec"]["ref"]["tag"], VERSION)
        }
        Some("HelmRelease") => {
            let chart = &doc["spec"]["chart"]["spec"];
            want("spec.chart.spec.chart", &chart["chart"], "handoff")?;
            want("spec.chart.spec.version", &chart["version"], NUMBER)
        }
        Some("HelmRepository") => {
            want("spec.type", &doc["spec"]["type"], "oci")?;
            want(
                "spec.url",
                &doc["spec"]["url"],
                "oci://ghcr.io/handoff-dev/charts",
            )
        }
        Some("Kustomization") => want(
            "spec.sourceRef.kind",
            &doc["spec"]["sourceRef"]["kind"],
            "GitRepository",
        ),
        other => Err(format!("{at}: no check for kind {other:?}: add one here")),
    }
}

#[test]
fn every_example_pins_the_workspace_version() {
    let examples = examples();
    let kinds: Vec<&str> = examples
        .iter()
        .filter_map(|(_, d)| d["kind"].as_str())
        .collect();
    for kind in [
        "Application",
        "GitRepository",
        "Kustomization",
        "HelmRepository",
        "HelmRelease",
    ] {
        assert!(
            kinds.contains(&kind),
            "examples/gitops has no {kind}: {kinds:?}"
        );
    }
    let wrong: Vec<String> = examples
        .iter()
        .filter_map(|(file, doc)| check_pin(file, doc).err())
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn a_pin_of_another_version_is_caught() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "kind: Application\nmetadata: {name: a}\nspec: {source: {repoURL: https://github.com/handoff-dev/handoff, targetRevision: main}}\n",
            "targetRevision",
            "main",
        ),
        (
            "kind: GitRepository\nmetadata: {name: g}\nspec: {url: https://github.com/handoff-dev/handoff, ref: {branch: main}}\n",
            "spec.ref.tag",
            "null",
        ),
        (
            "kind: GitRepository\nmetadata: {name: g}\nspec: {url: https://github.com/handoff-dev/handoff, ref: {tag: v0.2.0, branch: main}}\n",
            "spec.ref",
            "tag only",
        ),
        (
            "kind: GitRepository\nmetadata: {name: g}\nspec: {url: https://github.com/handoff-dev/handoff, ref: {tag: v0.0.1}}\n",
            "spec.ref.tag",
            "v0.0.1",
        ),
        (
            "kind: HelmRelease\nmetadata: {name: h}\nspec: {chart: {spec: {chart: handoff, version: 0.0.1}}}\n",
            "spec.chart.spec.version",
            "0.0.1",
        ),
        (
            "kind: ConfigMap\nmetadata: {name: c}\n",
            "no check",
            "ConfigMap",
        ),
    ];
    for (yaml, field, got) in cases {
        let doc = &documents(yaml, "case")[0];
        let err = check_pin("case.yaml", doc).expect_err("a wrong pin");
        assert!(err.contains(field) && err.contains(got), "{yaml}: {err}");
    }
}

#[test]
fn what_the_examples_point_at_renders() {
    let kustomize = kustomize();
    for (file, doc) in examples() {
        let spec = &doc["spec"];
        let (path, namespace) = match doc["kind"].as_str() {
            Some("Application") => (
                spec["source"]["path"].as_str(),
                spec["source"]["kustomize"]["namespace"].as_str(),
            ),
            Some("Kustomization") => (spec["path"].as_str(), spec["targetNamespace"].as_str()),
            _ => continue,
        };
        let path = path.unwrap_or_else(|| panic!("{file}: a path"));
        let rendered = render(&kustomize, path, namespace);
        assert!(!rendered.is_empty(), "{file}: {path} renders nothing");
        if let Some(ns) = namespace {
            let elsewhere: Vec<&Value> = rendered
                .iter()
                .filter(|d| d["metadata"]["namespace"].as_str().is_some_and(|n| n != ns))
                .collect();
            assert!(
                elsewhere.is_empty(),
                "{file}: {path} in {ns}: {elsewhere:?}"
            );
        }
    }
}

/// Argo CD applies lower waves first and waits for them to be healthy: the
/// CRDs (wave -1) before the installation (0), the installation before a
/// tenant, whose RoleBinding names the installation's ClusterRole.
#[test]
fn argo_cd_waves_order_crds_then_installation_then_tenants() {
    let installation = render(&kustomize(), "config/default", None);
    for doc in &installation {
        let crd = doc["kind"] == "CustomResourceDefinition";
        let want = if crd { -1 } else { 0 };
        assert_eq!(
            wave(doc),
            want,
            "{} {}",
            doc["kind"],
            doc["metadata"]["name"]
        );
    }
    let apps: Vec<Value> = examples()
        .into_iter()
        .map(|(_, d)| d)
        .filter(|d| d["kind"] == "Application")
        .collect();
    let wave_of = |path: &str| {
        apps.iter()
            .find(|a| a["spec"]["source"]["path"] == path)
            .map(wave)
            .unwrap_or_else(|| panic!("an Application of {path}"))
    };
    assert!(wave_of("config/default") < wave_of("config/tenant"));
}

/// The docs' install lines: every `?ref=`, release download, image tag and
/// `--version` that names a version names this one.
#[test]
fn the_docs_pin_the_workspace_version() {
    let mut wrong = Vec::new();
    for doc in ["README.md", "docs/install.md", "docs/upgrade.md"] {
        let text = read(&root().join(doc));
        for marker in [
            "?ref=",
            "releases/download/",
            "handoff:v",
            "--version ",
            "--tag ",
            "V=",
        ] {
            for (at, _) in text.match_indices(marker) {
                let rest = &text[at + marker.len()..];
                let pinned: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
                    .collect();
                let pinned = pinned.trim_end_matches('.');
                let a_version = pinned
                    .trim_start_matches('v')
                    .starts_with(|c: char| c.is_ascii_digit());
                if a_version && pinned != VERSION && pinned != NUMBER {
                    wrong.push(format!("{doc}: {marker}{pinned}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "pins of another version: {wrong:?}");
}

/// The images of every container of `docs`.
fn images(docs: &[Value]) -> Vec<&str> {
    docs.iter()
        .flat_map(|d| {
            d["spec"]["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .filter_map(|c| c["image"].as_str())
        .collect()
}

/// `config/default` and `config/console` (and so a `?ref=` overlay of
/// them) and `make image` name the release's image tag.
#[test]
fn config_default_config_console_and_the_makefile_name_the_release_image() {
    let want = format!("ghcr.io/handoff-dev/handoff:{VERSION}");
    for path in ["config/default", "config/console"] {
        let installation = render(&kustomize(), path, None);
        let images = images(&installation);
        assert!(!images.is_empty(), "{path} has Deployments");
        assert!(
            images.iter().all(|i| *i == want),
            "{path}: {images:?}, want {want}"
        );
    }
    let makefile = read(&root().join("Makefile"));
    let img = makefile
        .lines()
        .find_map(|l| l.strip_prefix("IMG ?= "))
        .expect("the Makefile's IMG ?= line");
    assert_eq!(img, want, "the Makefile's IMG");
}

/// The console reads only as the person: its ServiceAccount's one binding
/// is the bridge's own ClusterRole in config/default's namespace, which
/// reads no handoff, schedule or offer; it lands in that namespace with
/// the bridge's hardening.
#[test]
fn config_console_reads_nothing_as_itself_and_runs_hardened() {
    let kustomize = kustomize();
    let console = render(&kustomize, "config/console", None);
    let mut everything = render(&kustomize, "config/default", None);
    everything.extend(console.iter().cloned());
    let bindings: Vec<String> = everything
        .iter()
        .filter(|d| d["kind"] == "RoleBinding" || d["kind"] == "ClusterRoleBinding")
        .filter(|d| {
            d["subjects"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|s| s["name"] == "handoff-console")
        })
        .map(|d| {
            format!(
                "{} {} -> {}",
                d["kind"], d["metadata"]["namespace"], d["roleRef"]["name"]
            )
        })
        .collect();
    assert_eq!(
        bindings,
        ["\"RoleBinding\" \"handoff-system\" -> \"handoff-bridge\""],
        "the console's account's bindings"
    );
    let role = everything
        .iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == "handoff-bridge")
        .expect("config/default's ClusterRole handoff-bridge");
    for rule in role["rules"].as_array().expect("rules") {
        let reads = rule["verbs"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v == "list" || v == "watch" || v == "get");
        let data = rule["resources"].as_array().into_iter().flatten().any(|r| {
            ["handoffs", "brainstormschedules", "handoffoffers"].contains(&r.as_str().unwrap_or(""))
        });
        assert!(
            !(reads && data),
            "the console's own identity reads data: {rule}"
        );
    }
    for doc in &console {
        assert_eq!(
            doc["metadata"]["namespace"], "handoff-system",
            "{} {}",
            doc["kind"], doc["metadata"]["name"]
        );
    }
    let deployment = console
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("config/console has a Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "handoff-console");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        args[..3],
        ["console", "--behind-proxy", "--listen=0.0.0.0:8080"]
    );
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(container[probe]["httpGet"]["path"], "/healthz", "{probe}");
    }
    assert!(
        container["resources"]["limits"]["memory"].is_string(),
        "resources"
    );
}

/// The value of flag `--name=` among `args`.
fn flag<'a>(args: &[&'a str], name: &str) -> Option<&'a str> {
    let prefix = format!("--{name}=");
    args.iter().find_map(|a| a.strip_prefix(prefix.as_str()))
}

/// The args of the first container of Deployment `name` in `docs`.
fn deployment_args<'a>(docs: &'a [Value], name: &str) -> Vec<&'a str> {
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("Deployment {name}"));
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

/// examples/console wires oauth2-proxy to config/console: its upstream is
/// the console's Service, it forwards the ID token as the bearer token, and
/// the public host of its redirect URL is the Ingress's and one the console
/// allows (else every page would be refused by the Host rule).
#[test]
fn the_oauth2_proxy_example_forwards_the_token_to_the_console_service() {
    let docs = render(&kustomize(), "examples/console", None);
    let proxy = deployment_args(&docs, "handoff-console-oauth2-proxy");
    let console = deployment_args(&docs, "handoff-console");
    let service = docs
        .iter()
        .find(|d| d["kind"] == "Service" && d["metadata"]["name"] == "handoff-console")
        .expect("the console's Service");
    let upstream = format!(
        "http://{}.{}.svc:{}/",
        service["metadata"]["name"].as_str().expect("name"),
        service["metadata"]["namespace"]
            .as_str()
            .expect("namespace"),
        service["spec"]["ports"][0]["port"]
    );
    assert_eq!(flag(&proxy, "upstream"), Some(upstream.as_str()));
    assert_eq!(flag(&proxy, "pass-authorization-header"), Some("true"));
    let redirect = flag(&proxy, "redirect-url").expect("--redirect-url");
    let host = redirect
        .strip_prefix("https://")
        .and_then(|r| r.split('/').next())
        .expect("an https redirect URL");
    let allowed: Vec<&str> = console
        .iter()
        .filter_map(|a| a.strip_prefix("--allowed-host="))
        .collect();
    assert!(allowed.contains(&host), "{host} not in {allowed:?}");
    let ingress = docs
        .iter()
        .find(|d| d["kind"] == "Ingress")
        .expect("an Ingress");
    assert_eq!(ingress["spec"]["rules"][0]["host"], host);
}
