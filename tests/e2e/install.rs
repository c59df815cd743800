//! Install: `config/default` with the PostgreSQL overlay, applied as built
//! (`kubectl kustomize config/overlays/postgres`) with only what an
//! operator fills in changed ([`as_installed`]): the image (the local one,
//! never pulled), the PostgreSQL Secret and CA ConfigMap, and — so the
//! liveness scenario takes seconds, not minutes — the controller's
//! `--wedged-after` and its liveness probe's period. No cert-manager and
//! no certificate made here: the webhook's pods issue theirs into Secret
//! handoff-webhook-tls and inject its CA into the caBundle. The
//! Deployments must then become available under the namespace's
//! `restricted` Pod Security Standard, with their probes passing, and the
//! webhook refuse a twin through kubectl.

use std::sync::OnceLock;
use std::time::Duration;

use handoff_testkit::ServerTls;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::harness::{SYSTEM, e2e, kubectl, kubectl_stdin, must};
use crate::images::HANDOFF;
use handoff_testkit::wait::eventually;

/// How soon a wedged controller answers 503 in the e2e installation.
pub(crate) const WEDGED_AFTER: &str = "8s";

/// What the e2e installation changes in the built manifests.
pub(crate) struct Rewrites<'a> {
    /// The image every Deployment runs.
    pub(crate) image: &'a str,
    /// The controller's `--wedged-after`.
    pub(crate) wedged_after: &'a str,
}

/// Pure: `objects` (a kustomize build) as the e2e cluster installs them.
pub(crate) fn as_installed(mut objects: Vec<Value>, rewrites: &Rewrites<'_>) -> Vec<Value> {
    for object in objects.iter_mut().filter(|o| o["kind"] == "Deployment") {
        let controller = object["metadata"]["name"] == "handoff-controller";
        let containers = object["spec"]["template"]["spec"]["containers"].as_array_mut();
        for container in containers.into_iter().flatten() {
            container["image"] = json!(rewrites.image);
            container["imagePullPolicy"] = json!("Never");
            if controller {
                shorten_liveness(container, rewrites.wedged_after);
            }
        }
    }
    objects
}

/// `--wedged-after=<after>` and a liveness probe every 2 s, restarting
/// after 2 failures (the shipped: 5m, every 20 s, 3 failures).
fn shorten_liveness(container: &mut Value, after: &str) {
    for arg in container["args"].as_array_mut().into_iter().flatten() {
        if arg
            .as_str()
            .is_some_and(|a| a.starts_with("--wedged-after="))
        {
            *arg = json!(format!("--wedged-after={after}"));
        }
    }
    let probe = &mut container["livenessProbe"];
    probe["periodSeconds"] = json!(2);
    probe["failureThreshold"] = json!(2);
    probe["initialDelaySeconds"] = json!(2);
}

/// The installation, applied once per test binary; later calls wait for
/// nothing. Panics with the failing step's output.
pub(crate) fn installed() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(install);
}

fn install() {
    let e2e = e2e();
    must(
        kubectl(&[
            "apply",
            "--server-side",
            "-f",
            "config/components/namespace.yaml",
        ]),
        "apply the namespace",
    );
    // The overlay mounts a CA bundle; the e2e database speaks plain TCP
    // on the pod network (sslmode=disable), so any CA does.
    let postgres_ca = ServerTls::generate("handoff-e2e-postgres-ca", &["postgres"])
        .unwrap_or_else(|e| panic!("a CA for the PostgreSQL CA ConfigMap: {e:#}"))
        .ca_cert;
    let secrets = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "handoff-postgres", "namespace": SYSTEM},
         "stringData": {"dsn": e2e.postgres_url_for_pods}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "handoff-postgres-ca", "namespace": SYSTEM},
         "data": {"ca.crt": postgres_ca}},
    ]});
    must(
        kubectl_stdin(&["apply", "--server-side", "-f", "-"], &secrets.to_string()),
        "the DSN Secret and the CA ConfigMap",
    );
    apply_as_installed(
        "config/overlays/postgres",
        "config/default with the PostgreSQL overlay",
    );
    for deployment in ["handoff-webhook", "handoff-bridge", "handoff-controller"] {
        let rolled = kubectl(&[
            "-n",
            SYSTEM,
            "rollout",
            "status",
            &format!("deployment/{deployment}"),
            "--timeout=60s",
        ]);
        if !rolled.status.success() {
            panic!(
                "deployment/{deployment} did not roll out: {}\n{}",
                String::from_utf8_lossy(&rolled.stderr),
                diagnose()
            );
        }
    }
    until_the_webhook_refuses_a_twin();
}

/// Builds the kustomization `dir` (`what` names it in failures), rewrites
/// it as the e2e installs it ([`as_installed`]) and applies it
/// server-side; the Deployments must meet the restricted Pod Security
/// Standard (the namespace warns otherwise).
pub(crate) fn apply_as_installed(dir: &str, what: &str) {
    let built = must(kubectl(&["kustomize", dir]), &format!("kustomize {dir}"));
    let objects: Vec<Value> = serde_saphyr::from_str_multiple(&built)
        .unwrap_or_else(|e| panic!("the build of {dir} is not YAML: {e}"));
    let objects = as_installed(
        objects,
        &Rewrites {
            image: HANDOFF,
            wedged_after: WEDGED_AFTER,
        },
    );
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    let applied = kubectl_stdin(&["apply", "--server-side", "-f", "-"], &list.to_string());
    let warnings = String::from_utf8_lossy(&applied.stderr).into_owned();
    must(applied, &format!("apply {what}"));
    assert!(
        !warnings.contains("PodSecurity"),
        "{what} must meet the restricted Pod Security Standard: {warnings}"
    );
}

/// The webhook's pods issue their certificate and inject its CA as they
/// start, and the apiserver loads the configuration asynchronously: retry a
/// twin's create through kubectl until the webhook refuses it by name (an
/// admitted one is deleted), so no scenario's first write races that.
fn until_the_webhook_refuses_a_twin() {
    let key = "e2e/webhook-probe";
    let derived = handoff_core::api::naming::name_for_key(key);
    let twin = json!({"apiVersion": "handoff.dev/v1alpha1", "kind": "Handoff",
        "metadata": {"name": "webhook-probe", "namespace": SYSTEM, "labels": {"project": "shop"}},
        "spec": {"handoffKey": key, "project": "shop", "body": "state: probing"}});
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let out = kubectl_stdin(&["create", "-f", "-"], &twin.to_string());
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() && err.contains(&derived) {
            return;
        }
        let _ = kubectl(&[
            "-n",
            SYSTEM,
            "delete",
            "handoff",
            "webhook-probe",
            "--ignore-not-found",
        ]);
        assert!(
            std::time::Instant::now() < deadline,
            "the webhook did not refuse a twin within 60 s: {err}\n{}",
            diagnose()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The Pods, Events and the node's logs, for a failure's message.
pub(crate) fn diagnose() -> String {
    let pods = kubectl(&["get", "pods", "-A", "-o", "wide"]);
    let events = kubectl(&["get", "events", "-A", "--sort-by=.lastTimestamp"]);
    let kubelet = crate::harness::with_cluster(|c| {
        std::fs::read_to_string(c.dir().join("kubelet.log")).unwrap_or_default()
    });
    let tail: Vec<&str> = kubelet.lines().rev().take(30).collect();
    let logs = kubectl(&[
        "-n",
        SYSTEM,
        "logs",
        "--all-containers",
        "--prefix",
        "--tail=15",
        "-l",
        "app.kubernetes.io/part-of=handoff",
    ]);
    format!(
        "pods:\n{}\nevents:\n{}\nlogs:\n{}{}\nkubelet:\n{}",
        String::from_utf8_lossy(&pods.stdout),
        String::from_utf8_lossy(&events.stdout),
        String::from_utf8_lossy(&logs.stdout),
        String::from_utf8_lossy(&logs.stderr),
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    )
}

/// The installation's Pods of one component, by `app.kubernetes.io/name`.
pub(crate) async fn pods_of(name: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(e2e().env.client().await, SYSTEM);
    pods.list(&ListParams::default().labels(&format!("app.kubernetes.io/name={name}")))
        .await
        .unwrap_or_else(|e| panic!("list the {name} pods: {e}"))
        .items
}

#[tokio::test]
async fn config_default_runs_as_pods_under_the_restricted_standard_with_its_probes_passing() {
    // Probes pass only while PostgreSQL answers (the liveness scenario stalls it).
    let _undisturbed = crate::harness::UNDISTURBED.read().await;
    installed();
    let deployments: Api<Deployment> = Api::namespaced(e2e().env.client().await, SYSTEM);
    for name in ["handoff-controller", "handoff-bridge", "handoff-webhook"] {
        let ready = eventually(
            &format!("deployment/{name} has every replica ready"),
            Duration::from_secs(120),
            || {
                let deployments = deployments.clone();
                async move {
                    let d = deployments.get(name).await.map_err(|e| e.to_string())?;
                    let want = d.spec.replicas.unwrap_or(1);
                    let status = d.status.unwrap_or_default();
                    let ready = status.ready_replicas.unwrap_or(0);
                    (ready == want && want > 0)
                        .then_some(ready)
                        .ok_or(format!("{ready} of {want} ready"))
                }
            },
        )
        .await;
        assert!(ready >= 1, "{name}");
        for pod in pods_of(name).await {
            let spec = pod.spec.unwrap_or_default();
            let container = &spec.containers[0];
            assert_eq!(container.image.as_deref(), Some(HANDOFF), "{name}");
            let security = container.security_context.clone().unwrap_or_default();
            assert_eq!(security.read_only_root_filesystem, Some(true), "{name}");
            let statuses = pod
                .status
                .and_then(|s| s.container_statuses)
                .unwrap_or_default();
            assert!(
                statuses.iter().all(|s| s.ready),
                "{name}'s containers are ready (readiness probe): {statuses:?}"
            );
            // Their liveness probes pass: never restarted. (The controller's
            // may be, by the liveness scenario.)
            if name != "handoff-controller" {
                assert!(
                    statuses.iter().all(|s| s.restart_count == 0),
                    "{name}'s liveness probe restarted it: {statuses:?}"
                );
            }
        }
    }
    // The webhook's pods made their certificate and injected its CA, with no
    // cert-manager and nothing made by this suite.
    let secret = must(
        kubectl(&[
            "-n",
            SYSTEM,
            "get",
            "secret",
            "handoff-webhook-tls",
            "-o",
            "json",
        ]),
        "the webhook's self-managed Secret",
    );
    let secret: Value = serde_json::from_str(&secret).expect("a Secret as JSON");
    let configuration = must(
        kubectl(&[
            "get",
            "validatingwebhookconfiguration",
            "handoff-webhook",
            "-o",
            "json",
        ]),
        "the webhook's configuration",
    );
    let configuration: Value = serde_json::from_str(&configuration).expect("JSON");
    assert_eq!(
        configuration["webhooks"][0]["clientConfig"]["caBundle"], secret["data"]["ca.crt"],
        "the Secret's CA is the caBundle"
    );
    // The image's user, as the kubelet ran it (the restricted standard
    // needs non-root; the Dockerfile says 65532).
    let pod = pods_of("handoff-bridge")
        .await
        .remove(0)
        .metadata
        .name
        .unwrap_or_default();
    let id = must(
        kubectl(&["-n", SYSTEM, "exec", &pod, "--", "/handoff", "--version"]),
        "exec into the bridge",
    );
    assert!(id.contains("handoff"), "{id}");
}

#[test]
fn the_installation_changes_only_what_an_operator_fills_in() {
    let objects = vec![
        json!({"kind": "Deployment", "metadata": {"name": "handoff-controller"},
               "spec": {"template": {"spec": {"containers": [{"image": "ghcr.io/x:1",
                 "args": ["controller", "--wedged-after=5m", "--lease-namespace=x"],
                 "livenessProbe": {"periodSeconds": 20, "failureThreshold": 3}}]}}}}),
        json!({"kind": "Deployment", "metadata": {"name": "handoff-bridge"},
               "spec": {"template": {"spec": {"containers": [{"image": "ghcr.io/x:1",
                 "args": ["mcp"], "livenessProbe": {"periodSeconds": 20}}]}}}}),
        json!({"kind": "ValidatingWebhookConfiguration", "webhooks": [{"clientConfig": {"service": {}}}]}),
        json!({"kind": "ConfigMap", "data": {"a": "b"}}),
    ];
    let out = as_installed(
        objects.clone(),
        &Rewrites {
            image: "localhost/h:e2e",
            wedged_after: "8s",
        },
    );
    let controller = &out[0]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(controller["image"], "localhost/h:e2e");
    assert_eq!(controller["imagePullPolicy"], "Never");
    assert_eq!(
        controller["args"],
        json!(["controller", "--wedged-after=8s", "--lease-namespace=x"])
    );
    assert_eq!(controller["livenessProbe"]["periodSeconds"], 2);
    let bridge = &out[1]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(bridge["image"], "localhost/h:e2e");
    assert_eq!(bridge["args"], json!(["mcp"]));
    assert_eq!(
        bridge["livenessProbe"]["periodSeconds"], 20,
        "only the controller's is shortened"
    );
    assert_eq!(out[2], objects[2], "the webhook injects its own caBundle");
    assert_eq!(out[3], objects[3]);
}
