//! The GitOps install (`config/`), against the real apiserver with the real
//! kubectl: kustomize builds (default, the postgres, bridge-tls and
//! cert-manager overlays, prometheus), a server-side dry run of
//! `config/default` on a plane without cert-manager and then a real apply
//! (its webhook managing its own certificate), the RBAC matrix of every
//! identity (`kubectl auth can-i --as
//! system:serviceaccount:…`), the admission policy (forged and honest
//! `spec.createdBy`, the project label, the bridge's writes), the bridge and
//! the controller's loops running with nothing but their own ServiceAccounts'
//! rights (the namespace's lint budget included), and every file in
//! `examples/`.
//!
//! The suite applies `config/default` once per test binary (into the shared
//! control plane's `handoff-system` namespace); the tests share it. With
//! `USE_EXISTING_CLUSTER=true` that is a real installation into the current
//! cluster (use a throwaway kind cluster).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_testkit::wait::eventually;
use handoff_testkit::{ManagedWebhookProcess, TestEnv};
use kube::api::Api;
use serde_json::{Value, json};

/// The namespace `config/default` installs into.
const NS: &str = "handoff-system";

use crate::common::kubectl::{
    apply, apply_cert_manager_stand_ins, get_json, wait_established, wait_for_cert_manager_crds,
};
pub(crate) use crate::common::kubectl::{kubectl, kubectl_stdin, must, root};

/// `kubectl kustomize <dir>` as a list of objects.
fn build(env: &TestEnv, dir: &str) -> Vec<Value> {
    let yaml = must(
        kubectl(env, &["kustomize", dir]),
        &format!("kustomize {dir}"),
    );
    serde_saphyr::from_str_multiple::<Value, Vec<_>>(&yaml)
        .unwrap_or_else(|e| panic!("kustomize {dir} is not YAML: {e}"))
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind}/{name} missing from the build"))
}

/// The installation's admission webhook: `handoff webhook` as a process on
/// loopback in config/default's mode, managing its own certificate (Secret
/// handoff-webhook-tls in handoff-system, the CA injected into the
/// configuration handoff-webhook), as the Deployment's pods do; only the
/// URL differs, since the plane's apiserver cannot reach a Service. Against
/// an existing cluster (`USE_EXISTING_CLUSTER=true`) config/default is
/// applied as built and its own pods do this.
fn webhook(env: &TestEnv) -> &'static ManagedWebhookProcess {
    static WEBHOOK: OnceLock<ManagedWebhookProcess> = OnceLock::new();
    WEBHOOK.get_or_init(|| {
        ManagedWebhookProcess::start(
            Path::new(env!("CARGO_BIN_EXE_handoff")),
            env.kubeconfig_path(),
            NS,
            "handoff-webhook",
            &[],
        )
        .unwrap_or_else(|e| panic!("the admission webhook could not start: {e:#}"))
    })
}

/// `config/default` as this plane installs it (a `v1` List for `kubectl
/// apply -f -`): the kustomize build with its ValidatingWebhookConfiguration
/// pointed at [`webhook`] (`clientConfig.url`, still with no caBundle: the
/// webhook injects it), the rewrite controller-runtime's envtest makes,
/// since the plane's apiserver cannot reach a Service. Everything else is
/// applied as built.
pub(crate) fn default_as_installed(env: &TestEnv) -> String {
    let mut objects = build(env, "config/default");
    if env.existing_cluster() {
        return json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string();
    }
    let mut pointed = 0;
    for o in objects
        .iter_mut()
        .filter(|o| o["kind"] == "ValidatingWebhookConfiguration")
    {
        handoff_webhook::registration::point_at(o, webhook(env).url(), None)
            .unwrap_or_else(|e| panic!("point the webhook configuration: {e:#}"));
        pointed += 1;
    }
    assert_eq!(pointed, 1, "config/default registers the webhook once");
    json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string()
}

/// Applies `config/default` once: the namespace first (a server-side dry
/// run cannot create it for the objects in it), a dry run of the whole
/// installation with no cert-manager on the plane (it needs none), then
/// stand-ins for cert-manager's CRDs and dry runs of the overlays (postgres;
/// cert-manager, which needs them), then the real apply
/// ([`default_as_installed`]); waits until the admission policy and the
/// webhook enforce. (The policy suite, `policy.rs`, shares it.)
pub(crate) fn installed() -> &'static TestEnv {
    static DONE: OnceLock<()> = OnceLock::new();
    let env = handoff_testkit::installation();
    DONE.get_or_init(|| {
        apply(
            env,
            &["-f", "config/components/namespace.yaml"],
            "apply the namespace",
        );
        if !env.existing_cluster() {
            let crd = kubectl(env, &["get", "crd", "certificates.cert-manager.io"]);
            assert!(
                !crd.status.success(),
                "the plane must have no cert-manager CRD before config/default's dry run"
            );
        }
        apply(
            env,
            &["--dry-run=server", "-k", "config/default"],
            "server-side dry run of config/default (no cert-manager)",
        );
        // Never over a real cluster's cert-manager.
        if env.existing_cluster() {
            wait_for_cert_manager_crds(env);
        } else {
            apply_cert_manager_stand_ins(env);
        }
        for overlay in ["postgres", "cert-manager"] {
            apply(
                env,
                &[
                    "--dry-run=server",
                    "-k",
                    &format!("config/overlays/{overlay}"),
                ],
                &format!("server-side dry run of the {overlay} overlay"),
            );
        }
        let applied = kubectl_stdin(
            env,
            &["apply", "--server-side", "-f", "-"],
            &default_as_installed(env),
        );
        let warnings = String::from_utf8_lossy(&applied.stderr).into_owned();
        must(applied, "apply config/default");
        assert!(
            !warnings.contains("PodSecurity"),
            "the Deployments must meet the restricted Pod Security Standard: {warnings}"
        );
        wait_for_policy(env);
        wait_for_webhook(env);
    });
    env
}

/// The apiserver calls a new webhook once it has loaded its configuration
/// (asynchronously): retry a twin's create until it is refused by name.
fn wait_for_webhook(env: &TestEnv) {
    let twin = "apiVersion: handoff.dev/v1alpha1\nkind: Handoff\nmetadata:\n  name: webhook-probe\n  namespace: handoff-system\n  labels:\n    project: shop\nspec:\n  handoffKey: \"webhook-probe\"\n  project: shop\n  body: \"state: probing\"\n";
    until_refused(
        env,
        "the admission webhook did not start refusing twins",
        ("webhook-probe", &name_for_key("webhook-probe")),
        || kubectl_stdin(env, &["create", "-f", "-"], twin),
        || webhook(env).log(),
    );
}

/// Retries `create` every 300 ms until the apiserver refuses it with an
/// error containing `sign` (admission configuration loads
/// asynchronously), deleting handoff `name` an admitted attempt made;
/// fails after 60 s saying `what`, the last error and `context`.
fn until_refused(
    env: &TestEnv,
    what: &str,
    (name, sign): (&str, &str),
    create: impl Fn() -> Output,
    context: impl Fn() -> String,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = create();
        let err = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() && err.contains(sign) {
            return;
        }
        let _ = kubectl(
            env,
            &["-n", NS, "delete", "handoff", name, "--ignore-not-found"],
        );
        assert!(
            Instant::now() < deadline,
            "{what} within 60 s: {err}\n{}",
            context()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A Handoff of key `key`, under the name derived from it (the admission
/// webhook refuses any other).
fn handoff_yaml(
    key: &str,
    namespace: &str,
    project_label: &str,
    created_by: Option<&str>,
) -> String {
    let created_by = created_by
        .map(|c| format!("  createdBy: \"{c}\"\n"))
        .unwrap_or_default();
    let name = name_for_key(key);
    format!(
        "apiVersion: handoff.dev/v1alpha1\nkind: Handoff\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  labels:\n    project: {project_label}\nspec:\n  handoffKey: \"{key}\"\n  project: shop\n  body: \"state: testing the policy\"\n{created_by}"
    )
}

/// `kubectl patch` (a merge `patch`) of handoff `name` in [`NS`] as `who`.
fn patch_as(env: &TestEnv, who: &str, name: &str, patch: &str) -> Output {
    let args = [
        "-n",
        NS,
        "patch",
        "handoff",
        name,
        "--type=merge",
        "-p",
        patch,
        "--as",
        who,
    ];
    kubectl(env, &args)
}

fn sa(name: &str) -> String {
    format!("system:serviceaccount:{NS}:{name}")
}

/// Creates a Handoff as `user` (impersonated by the admin).
fn create_as(env: &TestEnv, user: &str, yaml: &str) -> Output {
    kubectl_stdin(env, &["create", "-f", "-", "--as", user], yaml)
}

/// ValidatingAdmissionPolicies enforce once the apiserver has loaded them
/// (asynchronously): retry a forged create until it is refused.
fn wait_for_policy(env: &TestEnv) {
    let name = "policy-probe";
    let forged = handoff_yaml(name, NS, "shop", Some(&sa("agent-incident")));
    until_refused(
        env,
        "the admission policy did not start enforcing",
        (&name_for_key(name), "spec.createdBy"),
        || create_as(env, &sa("agent-implement"), &forged),
        String::new,
    );
}

#[test]
fn kustomize_builds_default_the_postgres_overlay_and_prometheus() {
    let env = common::env();
    let default = build(env, "config/default");

    // Everything namespaced lands in handoff-system; the policy stays cluster scoped.
    for o in &default {
        let kind = o["kind"].as_str().unwrap_or_default();
        let cluster_scoped = matches!(
            kind,
            "Namespace"
                | "CustomResourceDefinition"
                | "ClusterRole"
                | "ClusterRoleBinding"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "ValidatingWebhookConfiguration"
        );
        let ns = o["metadata"]["namespace"].as_str();
        if cluster_scoped {
            assert_eq!(ns, None, "{kind} {} has a namespace", o["metadata"]["name"]);
        } else {
            assert_eq!(ns, Some(NS), "{kind} {}", o["metadata"]["name"]);
        }
        assert_ne!(kind, "Secret", "no Secret belongs in git");
    }
    let crds = default
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .count();
    assert_eq!(crds, handoff_core::api::crds().len());
    for crd in default
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
    {
        let annotations = &crd["metadata"]["annotations"];
        assert_eq!(
            annotations["kustomize.toolkit.fluxcd.io/prune"],
            json!("disabled"),
            "GitOps must never prune a CRD (it deletes every object): {}",
            crd["metadata"]["name"]
        );
        assert_eq!(
            annotations["argocd.argoproj.io/sync-options"],
            json!("Prune=false")
        );
    }
    for role in [
        "handoff-writer",
        "handoff-groomer",
        "handoff-view",
        "handoff-controller",
    ] {
        find(&default, "ClusterRole", role);
    }
    // The bridge's rights: a ClusterRole bound per served namespace (here
    // handoff-system; config/tenant binds it in a team's), never cluster-wide.
    find(&default, "ClusterRole", "handoff-bridge");
    let binding = find(&default, "RoleBinding", "handoff-bridge");
    assert_eq!(binding["metadata"]["namespace"], json!(NS));
    assert_eq!(binding["roleRef"]["kind"], json!("ClusterRole"));
    assert!(
        !default
            .iter()
            .any(|o| o["kind"] == "ClusterRoleBinding" && o["roleRef"]["name"] == "handoff-bridge"),
        "no ClusterRoleBinding for the bridge"
    );

    // The controller: 2 replicas, probes, resources, restricted security context.
    let controller = find(&default, "Deployment", "handoff-controller");
    assert_eq!(controller["spec"]["replicas"], json!(2));
    let pod = &controller["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], json!("handoff-controller"));
    assert_eq!(pod["securityContext"]["runAsNonRoot"], json!(true));
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        json!("RuntimeDefault")
    );
    let c = &pod["containers"][0];
    // The `images:` entry of config/default (make set-image) names a tagged image.
    let image = c["image"].as_str().expect("image");
    let (name, tag) = image.rsplit_once(':').expect("a tagged image");
    assert!(
        name.contains('/') && !tag.is_empty() && !tag.contains('/'),
        "config/default's images: entry replaces `handoff`: {image}"
    );
    let args = args_of(c);
    assert_eq!(args[0], "controller");
    assert!(args.contains(&"--metrics-listen=0.0.0.0:8080"), "{args:?}");
    assert!(
        args.iter().any(|a| a.starts_with("--lease-namespace=")),
        "{args:?}"
    );
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], json!("/healthz"));
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], json!("/readyz"));
    assert!(c["resources"]["requests"]["cpu"].is_string());
    assert!(c["resources"]["limits"]["memory"].is_string());
    let sc = &c["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], json!(false));
    assert_eq!(sc["readOnlyRootFilesystem"], json!(true));
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(sc["seccompProfile"]["type"], json!("RuntimeDefault"));

    // The bridge: allow-list = its Service's name.
    let bridge = find(&default, "Deployment", "handoff-bridge");
    let service = find(&default, "Service", "handoff-bridge");
    let c = &bridge["spec"]["template"]["spec"]["containers"][0];
    let args = args_of(c);
    let service_name = service["metadata"]["name"].as_str().expect("name");
    assert!(
        args.contains(&format!("--allowed-host={service_name}.$(POD_NAMESPACE).svc").as_str()),
        "the bridge must allow its Service's host name: {args:?}"
    );
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], json!(true));
    find(&default, "PodDisruptionBudget", "handoff-bridge");
    find(
        &default,
        "ValidatingAdmissionPolicy",
        "handoff.dev-honest-handoffs",
    );
    find(
        &default,
        "ValidatingAdmissionPolicyBinding",
        "handoff.dev-honest-handoffs",
    );
    find(&default, "NetworkPolicy", "default-deny-ingress");

    // The overlay adds DATABASE_URL from a Secret, nothing else to the args.
    let overlay = build(env, "config/overlays/postgres");
    let c = &find(&overlay, "Deployment", "handoff-controller")["spec"]["template"]["spec"]["containers"]
        [0];
    let db = c["env"]
        .as_array()
        .expect("env")
        .iter()
        .find(|e| e["name"] == "DATABASE_URL")
        .expect("DATABASE_URL in the overlay");
    assert_eq!(
        db["valueFrom"]["secretKeyRef"]["name"],
        json!("handoff-postgres")
    );
    assert!(
        db.get("value").is_none(),
        "the DSN comes from the Secret only"
    );
    assert!(overlay.iter().all(|o| o["kind"] != "Secret"));
    // ... and mounts the CA bundle read-only where the documented DSN's
    // sslrootcert (verify-full) points.
    let install = std::fs::read_to_string(root().join("docs/install.md")).expect("docs/install.md");
    let documented = install
        .lines()
        .find_map(|l| Some(l.split_once("dsn='")?.1.split_once('\'')?.0))
        .expect("docs/install.md shows the DSN");
    let dsn = handoff_mirror::dsn::split(documented, |_| None).expect("the documented DSN parses");
    assert_eq!(dsn.tls.mode, handoff_mirror::dsn::SslMode::VerifyFull);
    let root_cert = dsn.tls.root_cert.expect("sslrootcert");
    let mount = c["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .find(|m| root_cert.starts_with(m["mountPath"].as_str().unwrap_or("-")))
        .unwrap_or_else(|| {
            panic!(
                "a mount holding {}: {}",
                root_cert.display(),
                c["volumeMounts"]
            )
        });
    assert_eq!(mount["readOnly"], json!(true));
    let pod = &find(&overlay, "Deployment", "handoff-controller")["spec"]["template"]["spec"];
    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the mounted volume");
    assert_eq!(volume["configMap"]["name"], json!("handoff-postgres-ca"));
    let file = root_cert
        .strip_prefix(mount["mountPath"].as_str().expect("mountPath"))
        .expect("under the mount");
    assert_eq!(
        volume["configMap"]["items"],
        json!([{"key": "ca.crt", "path": file.to_str().expect("path")}])
    );

    // Monitoring: a ServiceMonitor per component, the alerts (unit-tested
    // in tests/gitops.rs) and a dashboard over the metrics.
    let prometheus = build(env, "config/prometheus");
    let mut monitors: Vec<&str> = prometheus
        .iter()
        .filter(|o| o["kind"] == "ServiceMonitor")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    monitors.sort_unstable();
    assert_eq!(
        monitors,
        ["handoff-bridge", "handoff-controller", "handoff-webhook"]
    );
    let rule = find(&prometheus, "PrometheusRule", "handoff");
    assert_eq!(rule["metadata"]["namespace"], json!(NS));
    let dashboard = find(&prometheus, "ConfigMap", "handoff-dashboard");
    assert_eq!(
        dashboard["metadata"]["labels"]["grafana_dashboard"],
        json!("1")
    );
    let json_text = dashboard["data"]["handoff-dashboard.json"]
        .as_str()
        .expect("dashboard");
    let parsed: Value = serde_json::from_str(json_text).expect("the dashboard is JSON");
    assert!(parsed["panels"].as_array().is_some_and(|p| !p.is_empty()));
    for metric in [
        "handoff_mcp_tool_calls_total",
        "handoff_mcp_tool_call_duration_seconds_bucket",
        "handoff_mcp_identity_reviews_total",
        "handoff_mcp_http_refusals_total",
        "handoff_controller_reconcile_errors_total",
        "handoff_controller_invalid_objects_total",
        "handoff_controller_mirror_history_purged_rows_total",
        "handoff_controller_mirror_lag_seconds",
        "handoff_controller_loop_last_progress_seconds",
        "handoff_webhook_requests_total",
        "handoff_webhook_decisions_total",
        "handoff_webhook_request_duration_seconds_bucket",
    ] {
        assert!(json_text.contains(metric), "the dashboard shows {metric}");
    }
    assert!(
        !json_text.contains("TO BE CONFIRMED"),
        "every panel names a metric the code exports"
    );
}

/// The first container's mount of the volume that holds Secret `secret`.
fn secret_mount<'a>(pod: &'a Value, secret: &str) -> &'a Value {
    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["secret"]["secretName"] == secret)
        .expect("the certificate's Secret is a volume");
    pod["containers"][0]["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .find(|m| m["name"] == volume["name"])
        .expect("the volume is mounted")
}

/// The args of the first container of a Deployment.
fn container_args(deployment: &Value) -> Vec<String> {
    args_of(&deployment["spec"]["template"]["spec"]["containers"][0])
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// The args of a container.
fn args_of(container: &Value) -> Vec<&str> {
    container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

#[test]
fn the_bridge_tls_component_changes_only_the_bridge_and_adds_its_certificate() {
    let env = common::env();
    let default = build(env, "config/default");
    let tls = build(env, "config/overlays/bridge-tls");
    let cert_manager = |o: &&Value| {
        o["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("cert-manager.io/"))
    };
    let is_bridge =
        |o: &&Value| o["kind"] == "Deployment" && o["metadata"]["name"] == "handoff-bridge";
    let untouched = |objects: &[Value]| -> Vec<Value> {
        objects
            .iter()
            .filter(|o| !cert_manager(o) && !is_bridge(o))
            .cloned()
            .collect()
    };
    assert_eq!(
        untouched(&tls),
        untouched(&default),
        "the component changes nothing but the bridge Deployment"
    );

    let plain = container_args(find(&default, "Deployment", "handoff-bridge"));
    assert_eq!(plain.first().map(String::as_str), Some("mcp"), "{plain:?}");
    assert!(
        plain.iter().all(|a| !a.starts_with("--tls-")),
        "config/default serves plain HTTP: {plain:?}"
    );
    let bridge = find(&tls, "Deployment", "handoff-bridge");
    let args = container_args(bridge);
    let certificate = find(&tls, "Certificate", "handoff-bridge-tls");
    let secret = certificate["spec"]["secretName"]
        .as_str()
        .expect("secretName");
    let pod = &bridge["spec"]["template"]["spec"];
    let mount = secret_mount(pod, secret);
    assert_eq!(mount["readOnly"], json!(true));
    let dir = mount["mountPath"].as_str().expect("mountPath");
    for flag in [
        format!("--tls-cert={dir}/tls.crt"),
        format!("--tls-key={dir}/tls.key"),
    ] {
        assert!(args.contains(&flag), "{flag} in {args:?}");
    }
    let names: Vec<&str> = certificate["spec"]["dnsNames"]
        .as_array()
        .expect("dnsNames")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for host in args
        .iter()
        .filter_map(|a| a.strip_prefix("--allowed-host="))
    {
        let host = host.replace("$(POD_NAMESPACE)", NS);
        assert!(
            names.contains(&host.as_str()),
            "the certificate names every allowed host: {host} not in {names:?}"
        );
    }
    for o in tls.iter().filter(cert_manager) {
        assert_eq!(
            o["metadata"]["namespace"],
            json!(NS),
            "{}",
            o["metadata"]["name"]
        );
    }
    let issuer = certificate["spec"]["issuerRef"]["name"]
        .as_str()
        .expect("issuer");
    find(&tls, "Issuer", issuer);
}

#[test]
fn config_default_dry_runs_then_applies() {
    let env = installed();
    for (kind, name) in [
        ("deployment", "handoff-controller"),
        ("deployment", "handoff-bridge"),
        ("service", "handoff-bridge"),
        ("serviceaccount", "agent-refine"),
    ] {
        must(
            kubectl(env, &["-n", NS, "get", kind, name]),
            &format!("get {kind}/{name}"),
        );
    }
    for (kind, name) in [
        ("clusterrole", "handoff-view"),
        ("validatingadmissionpolicy", "handoff.dev-honest-handoffs"),
        (
            "validatingadmissionpolicybinding",
            "handoff.dev-honest-handoffs",
        ),
    ] {
        must(
            kubectl(env, &["get", kind, name]),
            &format!("get {kind}/{name}"),
        );
    }
    // Applying again changes nothing and fights no one (GitOps re-syncs;
    // on this plane, config/default as installed: its webhook pointed at
    // the local process): every object keeps its resourceVersion.
    let manifest = default_as_installed(env);
    let before = stored_versions(env, &manifest);
    must(
        kubectl_stdin(env, &["apply", "--server-side", "-f", "-"], &manifest),
        "re-apply config/default",
    );
    assert_eq!(
        stored_versions(env, &manifest),
        before,
        "the re-apply changed what it applied"
    );
}

/// The webhook's metrics move with the apiserver's own admission requests
/// (kubectl through the apiserver to the installed webhook): a twin refused
/// by name, an honest handoff allowed, each timed. Other tests write too,
/// so each series must have grown by at least this test's share.
#[tokio::test(flavor = "multi_thread")]
async fn the_webhook_counts_the_apiservers_admission_requests() {
    use handoff_testkit::http::{metric, scrape};
    let env = installed();
    let addr = webhook(env)
        .metrics_addr()
        .unwrap_or_else(|| panic!("the webhook serves no /metrics:\n{}", webhook(env).log()));
    let before = scrape(&addr).await.expect("scrape the webhook");
    let key = "webhook-metrics";
    let twin = format!(
        "apiVersion: handoff.dev/v1alpha1\nkind: Handoff\nmetadata:\n  name: webhook-metrics-twin\n  namespace: {NS}\n  labels:\n    project: shop\nspec:\n  handoffKey: \"{key}\"\n  project: shop\n  body: \"state: counted\"\n"
    );
    let refused = kubectl_stdin(env, &["create", "-f", "-"], &twin);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && err.contains(&name_for_key(key)),
        "the twin was not refused by name: {err}"
    );
    must(
        kubectl_stdin(
            env,
            &["create", "-f", "-"],
            &handoff_yaml(key, NS, "shop", None),
        ),
        "create the key's handoff",
    );
    let after = scrape(&addr).await.expect("scrape the webhook");
    // (series, how much it grew at least)
    let cases = [
        (
            "handoff_webhook_requests_total{resource=\"handoffs\",outcome=\"denied\"}",
            1.0,
        ),
        (
            "handoff_webhook_decisions_total{decision=\"denied\",reason=\"name_not_derived\"}",
            1.0,
        ),
        (
            "handoff_webhook_requests_total{resource=\"handoffs\",outcome=\"allowed\"}",
            1.0,
        ),
        (
            "handoff_webhook_decisions_total{decision=\"allowed\",reason=\"checked\"}",
            1.0,
        ),
        ("handoff_webhook_request_duration_seconds_count", 2.0),
    ];
    for (series, grew) in cases {
        let moved = metric(&after, series) - metric(&before, series);
        assert!(moved >= grew, "{series} grew {moved}, not {grew}:\n{after}");
    }
    let _ = kubectl(
        env,
        &[
            "-n",
            NS,
            "delete",
            "handoff",
            &name_for_key(key),
            "--ignore-not-found",
        ],
    );
}

/// `kind namespace/name` -> `resourceVersion` of each object of
/// `manifest`, as stored.
fn stored_versions(env: &TestEnv, manifest: &str) -> std::collections::BTreeMap<String, String> {
    let out = must(
        kubectl_stdin(env, &["get", "-f", "-", "-o", "json"], manifest),
        "get config/default",
    );
    let stored: Value = serde_json::from_str(&out).expect("a List as JSON");
    let items = stored["items"].as_array().expect("items");
    assert!(items.len() > 5, "config/default as stored: {out}");
    items
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            let at = |f: &str| m[f].as_str().unwrap_or_default().to_owned();
            (
                format!(
                    "{} {}/{}",
                    o["kind"].as_str().unwrap_or_default(),
                    at("namespace"),
                    at("name")
                ),
                at("resourceVersion"),
            )
        })
        .collect()
}

/// One `kubectl auth can-i` expectation.
struct Can {
    who: String,
    verb: &'static str,
    resource: &'static str,
    subresource: Option<&'static str>,
    namespace: Option<&'static str>,
    allowed: bool,
}

fn can(who: &str, verb: &'static str, resource: &'static str, allowed: bool) -> Can {
    Can {
        who: who.to_owned(),
        verb,
        resource,
        subresource: None,
        namespace: Some(NS),
        allowed,
    }
}

impl Can {
    fn sub(mut self, subresource: &'static str) -> Self {
        self.subresource = Some(subresource);
        self
    }
    fn ns(mut self, namespace: Option<&'static str>) -> Self {
        self.namespace = namespace;
        self
    }
}

const HANDOFFS: &str = "handoffs.handoff.dev";
const OFFERS: &str = "handoffoffers.handoff.dev";
const SCHEDULES: &str = "brainstormschedules.handoff.dev";

#[test]
fn rbac_matrix_of_every_identity() {
    let env = installed();
    // An SRE: bound to handoff-view (what `view` aggregates; envtest runs
    // no aggregation controller, so the role is bound directly and its
    // aggregation label checked below).
    let sre_yaml = format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sre-matrix\n  namespace: {NS}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: sre-matrix-view\n  namespace: {NS}\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: handoff-view\n\
         subjects:\n  - kind: ServiceAccount\n    name: sre-matrix\n    namespace: {NS}\n"
    );
    must(
        kubectl_stdin(env, &["apply", "--server-side", "-f", "-"], &sre_yaml),
        "the SRE account bound to handoff-view",
    );
    let view = get_json(env, &["clusterrole", "handoff-view"]);
    assert_eq!(
        view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"],
        json!("true"),
        "handoff-view aggregates into `view`"
    );

    let writers = [
        "agent-implement",
        "agent-issue-lifecycle",
        "agent-incident",
        "agent-brainstorm",
    ];
    let mut matrix = Vec::new();
    for w in writers {
        let w = sa(w);
        for verb in ["get", "list", "watch", "create", "patch", "update"] {
            matrix.push(can(&w, verb, HANDOFFS, true));
        }
        // Offers: created and read, never changed (the phase is the
        // bridge's and the controller's), no Events.
        for verb in ["get", "list", "watch", "create"] {
            matrix.push(can(&w, verb, OFFERS, true));
        }
        for verb in ["patch", "update"] {
            matrix.push(can(&w, verb, OFFERS, false));
        }
        for verb in ["get", "patch", "update"] {
            matrix.push(can(&w, verb, OFFERS, false).sub("status"));
        }
        for verb in ["create", "patch"] {
            matrix.push(can(&w, verb, "events.events.k8s.io", false));
            matrix.push(can(&w, verb, "events", false));
        }
        matrix.push(can(&w, "delete", HANDOFFS, false));
        matrix.push(can(&w, "deletecollection", HANDOFFS, false));
        matrix.push(can(&w, "delete", OFFERS, false));
        matrix.push(can(&w, "patch", HANDOFFS, false).sub("status"));
        matrix.push(can(&w, "create", SCHEDULES, false));
        matrix.push(can(&w, "create", "jobs.batch", false));
        matrix.push(can(&w, "get", "secrets", false));
        matrix.push(can(&w, "create", HANDOFFS, false).ns(Some("default")));
    }
    let groomer = sa("agent-refine");
    for verb in [
        "get", "list", "watch", "create", "patch", "update", "delete",
    ] {
        matrix.push(can(&groomer, verb, HANDOFFS, true));
    }
    for verb in ["get", "list", "watch", "create"] {
        matrix.push(can(&groomer, verb, OFFERS, true));
    }
    for verb in ["patch", "update", "delete"] {
        matrix.push(can(&groomer, verb, OFFERS, false));
    }
    // Grooming moves an offer's phase; never its spec.
    for verb in ["get", "patch"] {
        matrix.push(can(&groomer, verb, OFFERS, true).sub("status"));
    }
    matrix.push(can(&groomer, "update", OFFERS, false).sub("status"));
    matrix.push(
        can(&groomer, "patch", OFFERS, false)
            .sub("status")
            .ns(Some("default")),
    );
    matrix.push(can(&groomer, "create", "events.events.k8s.io", false));
    matrix.push(can(&groomer, "create", "events", false));
    matrix.push(can(&groomer, "create", SCHEDULES, false));
    matrix.push(can(&groomer, "get", "secrets", false));
    matrix.push(can(&groomer, "delete", HANDOFFS, false).ns(Some("default")));

    let bridge = sa("handoff-bridge");
    for verb in ["get", "list", "create", "patch", "update", "delete"] {
        matrix.push(can(&bridge, verb, HANDOFFS, false));
        matrix.push(can(&bridge, verb, OFFERS, false));
    }
    // Its rights are bound in the namespaces it serves, nothing cluster-wide.
    matrix.push(can(&bridge, "get", "serviceaccounts", false).ns(Some("default")));
    matrix.push(can(&bridge, "get", "serviceaccounts", false).ns(None));
    matrix.push(can(&bridge, "get", "serviceaccounts", true));
    for verb in ["get", "patch"] {
        matrix.push(can(&bridge, verb, OFFERS, true).sub("status"));
        matrix.push(
            can(&bridge, verb, OFFERS, false)
                .sub("status")
                .ns(Some("default")),
        );
    }
    matrix.push(can(&bridge, "update", OFFERS, false).sub("status"));
    matrix.push(can(&bridge, "patch", HANDOFFS, false).sub("status"));
    matrix.push(can(&bridge, "list", "serviceaccounts", false));
    matrix.push(can(&bridge, "update", "serviceaccounts", false));
    matrix.push(can(&bridge, "create", "serviceaccounts/token", false));
    matrix.push(can(&bridge, "list", "jobs.batch", true));
    matrix.push(can(&bridge, "list", "jobs.batch", false).ns(Some("default")));
    matrix.push(can(&bridge, "create", "jobs.batch", false));
    matrix.push(can(&bridge, "get", "secrets", false));
    // The namespace's settings: that one ConfigMap, in its namespaces only.
    matrix.push(can(&bridge, "get", "configmaps/handoff-settings", true));
    matrix.push(can(&bridge, "get", "configmaps/other", false));
    matrix.push(can(&bridge, "list", "configmaps", false));
    matrix.push(can(&bridge, "get", "configmaps/handoff-settings", false).ns(Some("default")));
    matrix.push(
        can(
            &bridge,
            "create",
            "selfsubjectreviews.authentication.k8s.io",
            true,
        )
        .ns(None),
    );
    matrix.push(can(&bridge, "create", "events.events.k8s.io", true));
    matrix.push(can(&bridge, "patch", "events.events.k8s.io", true));
    matrix.push(can(&bridge, "create", "events.events.k8s.io", false).ns(Some("default")));
    matrix.push(can(&bridge, "create", "events", false));

    let controller = sa("handoff-controller");
    for verb in ["get", "list", "watch", "patch", "update", "delete"] {
        matrix.push(can(&controller, verb, HANDOFFS, true).ns(None));
    }
    matrix.push(can(&controller, "create", HANDOFFS, false));
    for r in [HANDOFFS, SCHEDULES, OFFERS] {
        matrix.push(
            can(&controller, "patch", r, true)
                .sub("status")
                .ns(Some("default")),
        );
    }
    matrix.push(can(&controller, "patch", SCHEDULES, false));
    matrix.push(can(&controller, "create", OFFERS, false));
    matrix.push(can(&controller, "patch", OFFERS, false));
    // Retention deletes finished offers.
    matrix.push(can(&controller, "delete", OFFERS, true).ns(None));
    matrix.push(can(&controller, "list", SCHEDULES, true).ns(None));
    matrix.push(can(&controller, "create", "jobs.batch", true).ns(Some("default")));
    matrix.push(can(&controller, "watch", "jobs.batch", true).ns(None));
    matrix.push(can(&controller, "delete", "jobs.batch", false));
    matrix.push(can(&controller, "create", "events.events.k8s.io", true).ns(Some("default")));
    // A series' note is updated through the core/v1 Events API.
    matrix.push(can(&controller, "patch", "events", true).ns(Some("default")));
    matrix.push(can(&controller, "create", "events", false).ns(Some("default")));
    matrix.push(can(
        &controller,
        "create",
        "leases.coordination.k8s.io",
        true,
    ));
    matrix
        .push(can(&controller, "create", "leases.coordination.k8s.io", false).ns(Some("default")));
    matrix.push(can(&controller, "get", "secrets", false));
    matrix.push(can(&controller, "get", "configmaps/handoff-settings", true).ns(Some("default")));
    matrix.push(can(&controller, "get", "configmaps/other", false).ns(Some("default")));
    matrix.push(can(&controller, "list", "configmaps", false).ns(Some("default")));
    matrix.push(can(&controller, "create", "pods", false));

    // The webhook: its one Secret (`create` cannot be limited by name) and
    // its one configuration's caBundle, nothing else.
    let webhook = sa("handoff-webhook");
    const TLS_SECRET: &str = "secrets/handoff-webhook-tls";
    const CONFIGURATION: &str =
        "validatingwebhookconfigurations.admissionregistration.k8s.io/handoff-webhook";
    const OTHER_CONFIGURATION: &str =
        "validatingwebhookconfigurations.admissionregistration.k8s.io/other";
    matrix.push(can(&webhook, "create", "secrets", true));
    matrix.push(can(&webhook, "create", "secrets", false).ns(Some("default")));
    for verb in ["get", "update"] {
        matrix.push(can(&webhook, verb, TLS_SECRET, true));
        matrix.push(can(&webhook, verb, "secrets/other", false));
        matrix.push(can(&webhook, verb, TLS_SECRET, false).ns(Some("default")));
    }
    matrix.push(can(&webhook, "list", "secrets", false));
    matrix.push(can(&webhook, "delete", TLS_SECRET, false));
    for verb in ["get", "patch"] {
        matrix.push(can(&webhook, verb, CONFIGURATION, true).ns(None));
        matrix.push(can(&webhook, verb, OTHER_CONFIGURATION, false).ns(None));
    }
    matrix.push(can(&webhook, "delete", CONFIGURATION, false).ns(None));
    matrix.push(can(&webhook, "get", HANDOFFS, false));
    matrix.push(can(&webhook, "get", "configmaps/handoff-settings", false));

    let sre = sa("sre-matrix");
    for r in [HANDOFFS, OFFERS, SCHEDULES] {
        for verb in ["get", "list", "watch"] {
            matrix.push(can(&sre, verb, r, true));
        }
        for verb in ["create", "patch", "update", "delete"] {
            matrix.push(can(&sre, verb, r, false));
        }
    }
    matrix.push(can(&sre, "get", "secrets", false));

    let mut wrong = Vec::new();
    for c in &matrix {
        let mut args = vec!["auth", "can-i", c.verb, c.resource, "--as", &c.who];
        if let Some(s) = c.subresource {
            args.extend(["--subresource", s]);
        }
        match c.namespace {
            Some(ns) => args.extend(["-n", ns]),
            None => args.push("--all-namespaces"),
        }
        let out = kubectl(env, &args);
        let answer = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let allowed = match answer.as_str() {
            "yes" => true,
            "no" => false,
            _ => panic!(
                "can-i {args:?}: {answer} {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        };
        if allowed != c.allowed {
            wrong.push(format!(
                "{} {} {}{} in {}: expected {}, got {answer}",
                c.who,
                c.verb,
                c.resource,
                c.subresource.map(|s| format!("/{s}")).unwrap_or_default(),
                c.namespace.unwrap_or("all namespaces"),
                if c.allowed { "yes" } else { "no" }
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "RBAC matrix ({} checks):\n{}",
        matrix.len(),
        wrong.join("\n")
    );
    assert!(matrix.len() > 100, "the matrix covers every identity");
}

/// The admission policy that keeps authorship honest, as its refusals name it.
const HONEST: &str = "handoff.dev-honest-handoffs";

#[test]
fn the_policy_refuses_a_forged_writer_and_accepts_an_honest_one() {
    let env = installed();
    let implement = sa("agent-implement");
    // Idempotent against an existing cluster (USE_EXISTING_CLUSTER=true).
    let honest = name_for_key("honest");
    for key in ["honest", "gitops-style"] {
        let _ = kubectl(
            env,
            &[
                "-n",
                NS,
                "delete",
                "handoff",
                &name_for_key(key),
                "--ignore-not-found",
            ],
        );
    }

    // As agent-implement, claiming agent-incident wrote it: refused, naming the field and the rule.
    let forged = create_as(
        env,
        &implement,
        &handoff_yaml("forged", NS, "shop", Some(&sa("agent-incident"))),
    );
    refused_with(
        &forged,
        "a forged createdBy",
        &[
            "spec.createdBy must be the requesting user",
            "agent-incident",
            "agent-implement",
        ],
    );

    // Honest: its own name.
    must(
        create_as(
            env,
            &implement,
            &handoff_yaml("honest", NS, "shop", Some(&implement)),
        ),
        "an honest createdBy",
    );
    // No createdBy (a GitOps object): admitted.
    must(
        create_as(
            env,
            &implement,
            &handoff_yaml("gitops-style", NS, "shop", None),
        ),
        "no createdBy",
    );
    // The project label must mirror spec.project.
    let mislabelled = create_as(
        env,
        &implement,
        &handoff_yaml("mislabelled", NS, "other", Some(&implement)),
    );
    refused_with(
        &mislabelled,
        "a lying project label",
        &["metadata.labels.project must equal spec.project"],
    );

    // An update that claims someone else is refused too, by the policy,
    // naming the claimed and the real writer ...
    let patch = format!(r#"{{"spec":{{"createdBy":"{}"}}}}"#, sa("agent-brainstorm"));
    refused_with(
        &patch_as(env, &implement, &honest, &patch),
        "an UPDATE forging createdBy",
        &[
            HONEST,
            "spec.createdBy must be the requesting user",
            "agent-brainstorm",
            "agent-implement",
        ],
    );
    // So is changing the content while leaving another writer's name on it ...
    let out = patch_as(
        env,
        &sa("agent-incident"),
        &honest,
        r#"{"spec":{"body":"rewritten by someone else"}}"#,
    );
    refused_with(
        &out,
        "a content change under another's name",
        &[
            HONEST,
            "spec.createdBy must be the requesting user",
            "agent-incident",
        ],
    );
    // ... while a metadata-only update claims nothing and passes (another
    // writer adding a label; the garbage collector removing a finalizer).
    must(
        kubectl(
            env,
            &[
                "-n",
                NS,
                "label",
                "handoff",
                &honest,
                "kind=issue",
                "--as",
                &sa("agent-incident"),
            ],
        ),
        "a metadata-only update by another writer",
    );
    // ... and the controller may patch labels and its finalizer on handoffs others wrote.
    must(
        patch_as(
            env,
            &sa("handoff-controller"),
            &honest,
            r#"{"metadata":{"labels":{"repo":"acme-api"},"finalizers":["handoff.dev/mirror"]}}"#,
        ),
        "the controller patches a handoff another identity wrote",
    );
    must(
        patch_as(
            env,
            &sa("handoff-controller"),
            &honest,
            r#"{"metadata":{"finalizers":null}}"#,
        ),
        "the controller removes its finalizer",
    );
    // Even an admin may not forge authorship.
    let out = kubectl_stdin(
        env,
        CREATE,
        &handoff_yaml("admin-forged", NS, "shop", Some(&implement)),
    );
    refused_with(
        &out,
        "an admin's forged createdBy",
        &[
            HONEST,
            "spec.createdBy must be the requesting user",
            "agent-implement",
        ],
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_bridge_writes_pass_the_policy() {
    let env = installed();
    let ns = env.namespace("install-bridge").await;
    let token = common::agents::writer_token(env, &ns, "writer").await;
    // The policy is active in this namespace: a forged kubectl write fails ...
    let forged = create_as(
        env,
        &format!("system:serviceaccount:{ns}:writer"),
        &handoff_yaml(
            "forged",
            &ns,
            "shop",
            Some("system:serviceaccount:elsewhere:someone"),
        ),
    );
    assert!(!forged.status.success(), "the policy is not active in {ns}");

    // ... while the bridge's write, acting with the agent's token, passes.
    let bridge = common::Bridge::start(env, &ns);
    let key = "acme/api#8";
    let results = tokio::task::block_in_place(|| {
        bridge.drive(
            &token,
            "implement",
            json!([
                {"op": "call", "tool": "write_handoff",
                 "args": {"handoff_key": key, "project": "shop", "repo": "acme/api", "kind": "issue",
                          "body": "## State\nwritten through the bridge under the admission policy"}},
                {"op": "call", "tool": "write_handoff",
                 "args": {"handoff_key": key, "project": "shop", "repo": "acme/api", "kind": "issue",
                          "body": "## State\nupdated through the bridge"}}
            ]),
        )
    });
    for (r, expected) in results.iter().zip(["created", "updated"]) {
        assert_eq!(
            r["is_error"],
            json!(false),
            "the bridge's write was refused: {r}"
        );
        assert_eq!(r["structured"]["outcome"], json!(expected), "{r}");
    }
    let stored = Api::<Handoff>::namespaced(env.client().await, &ns)
        .get(&name_for_key(key))
        .await
        .expect("the handoff exists");
    assert_eq!(
        stored.spec.created_by.as_deref(),
        Some(format!("system:serviceaccount:{ns}:writer").as_str())
    );
    assert_eq!(
        stored
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("project"))
            .map(String::as_str),
        Some("shop")
    );
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn every_example_applies_or_parses() {
    let env = installed();
    // Stub CRDs for the Flux and Argo CD objects, and their namespaces.
    apply(
        env,
        &["-f", "tests/fixtures/gitops/"],
        "apply the stub CRDs",
    );
    wait_established(
        env,
        &[
            "kustomizations.kustomize.toolkit.fluxcd.io",
            "gitrepositories.source.toolkit.fluxcd.io",
            "helmrepositories.source.toolkit.fluxcd.io",
            "helmreleases.helm.toolkit.fluxcd.io",
            "applications.argoproj.io",
        ],
        "stub CRDs established",
    );
    for ns in ["flux-system", "argocd"] {
        let yaml = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n");
        must(
            kubectl_stdin(env, &["apply", "--server-side", "-f", "-"], &yaml),
            ns,
        );
    }

    let mut files = Vec::new();
    files_under(&root().join("examples"), &mut files);
    files.sort();
    let (mut yaml, mut mcp) = (0, 0);
    for path in &files {
        let shown = path
            .strip_prefix(root())
            .unwrap_or(path)
            .display()
            .to_string();
        // A kustomization is an example as a whole: its directory is built
        // and dry-run (`-k`); its own file is no object.
        let (flag, target) = match path.file_name().and_then(|n| n.to_str()) {
            Some("kustomization.yaml") => (
                "-k",
                path.parent()
                    .and_then(|dir| dir.strip_prefix(root()).ok())
                    .unwrap_or(path)
                    .display()
                    .to_string(),
            ),
            _ => ("-f", shown.clone()),
        };
        match path.extension().and_then(|e| e.to_str()) {
            Some("yaml" | "yml") => {
                let out = kubectl(
                    env,
                    &["apply", "--server-side", "--dry-run=server", flag, &target],
                );
                let warnings = String::from_utf8_lossy(&out.stderr).into_owned();
                must(out, &format!("dry run of {shown}"));
                assert!(
                    !warnings.contains("PodSecurity"),
                    "{shown} must meet the restricted Pod Security Standard of handoff-system: {warnings}"
                );
                yaml += 1;
            }
            Some("json") => {
                let text = std::fs::read_to_string(path).expect("readable");
                let config: Value = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("{shown} is not JSON: {e}"));
                if config["hooks"].is_object() {
                    // Hook wiring: its events and commands are checked by
                    // examples::the_hook_wiring_names_documented_events_and_our_commands.
                    continue;
                }
                // Claude Code's, Cursor's and Copilot CLI's `mcpServers`, or
                // VS Code's `servers`.
                let server = if config["servers"].is_object() {
                    &config["servers"]["handoff"]
                } else {
                    &config["mcpServers"]["handoff"]
                };
                // Copilot CLI calls stdio `local`; Cursor has no `type`: a
                // `command` is stdio, a `url` HTTP.
                let typed = server["type"].as_str().map(|t| match t {
                    "local" => "stdio",
                    other => other,
                });
                let transport = typed.or_else(|| {
                    if server["command"].is_string() {
                        Some("stdio")
                    } else {
                        server["url"].as_str().map(|_| "http")
                    }
                });
                assert!(
                    matches!(transport, Some("stdio" | "http")),
                    "{shown}: an MCP server named handoff"
                );
                assert!(
                    !text.to_lowercase().contains("bearer ey"),
                    "{shown} holds a real token"
                );
                mcp += 1;
            }
            Some("toml") => {
                let text = std::fs::read_to_string(path).expect("readable");
                let config: toml::Table = text
                    .parse()
                    .unwrap_or_else(|e| panic!("{shown} is not TOML: {e}"));
                // Codex: a stdio server (command) or a streamable HTTP one (url).
                let server = config
                    .get("mcp_servers")
                    .and_then(|s| s.get("handoff"))
                    .unwrap_or_else(|| panic!("{shown}: [mcp_servers.handoff]"));
                let command = server.get("command").and_then(toml::Value::as_str);
                let url = server.get("url").and_then(toml::Value::as_str);
                assert!(
                    command == Some("handoff")
                        || url
                            .is_some_and(|u| u.starts_with("https://") || u.starts_with("http://")),
                    "{shown}: a command or a url (command {command:?}, url {url:?})"
                );
                mcp += 1;
            }
            _ => {}
        }
    }
    assert!(
        yaml >= 7,
        "Handoff, schedule, two agent Jobs, Flux (Kustomization, HelmRelease), Argo CD: {yaml}"
    );
    assert!(mcp >= 2, "stdio and HTTP client configs: {mcp}");
    let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    for expected in [
        "agent/agent-job.yaml",
        "agent/codex-agent-job.yaml",
        "gitops/flux-kustomization.yaml",
        "gitops/flux-helmrelease.yaml",
        "gitops/argocd-application.yaml",
        "mcp/claude-code-stdio.mcp.json",
        "mcp/claude-code-http.mcp.json",
        "mcp/claude-code-headers-helper.mcp-config.json",
        "mcp/codex-config.toml",
        "mcp/vscode-mcp.json",
        "cursor/mcp.json",
        "cursor/mcp-http.json",
        "copilot/mcp-config.json",
        "copilot/hooks.json",
        "gemini/settings.json",
    ] {
        assert!(
            names.iter().any(|n| n.ends_with(expected)),
            "examples/{expected} missing"
        );
    }
}

/// A token for ServiceAccount `name` in the installation's namespace.
async fn install_token(env: &TestEnv, name: &str) -> String {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    Api::<ServiceAccount>::namespaced(env.client().await, NS)
        .create_token_request(name, &Default::default(), &request)
        .await
        .expect("token request")
        .status
        .and_then(|s| s.token)
        .expect("issued token")
}

/// The bridge as deployed: its own identity is ServiceAccount
/// handoff-bridge with only config/rbac's rights. That is enough to read
/// the caller's profile label and to check agent Jobs for offers, while the
/// writes go through with the agent's token (agent-implement of
/// config/agents) and pass the admission policy.
#[tokio::test(flavor = "multi_thread")]
async fn the_bridge_runs_with_its_own_least_privilege_identity() {
    let env = installed();
    let (_dir, path) = bridge_kubeconfig(env).await;
    // The Host allow-list exactly as config/bridge deploys it.
    let built = build(env, "config/default");
    let deployed = &find(&built, "Deployment", "handoff-bridge")["spec"]["template"]["spec"]["containers"]
        [0]["args"];
    let allowed: Vec<String> = deployed
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .filter(|a| a.starts_with("--allowed-host="))
        .map(|a| a.replace("$(POD_NAMESPACE)", NS))
        .collect();
    let allowed: Vec<&str> = allowed.iter().map(String::as_str).collect();
    let bridge = handoff_testkit::BridgeProcess::start(
        Path::new(env!("CARGO_BIN_EXE_handoff")),
        &path,
        NS,
        &allowed,
    )
    .expect("the bridge starts with its own identity");

    let agent = install_token(env, "agent-implement").await;
    let key = "acme/api#8-least-privilege";
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    // The header claims `refine`; the ServiceAccount's label (`implement`),
    // read with the bridge's own identity, wins: no delete_handoff.
    let results = tokio::task::block_in_place(|| {
        common::drive(
            &["http", bridge.url(), &agent, "refine"],
            json!([
                {"op": "list_tools"},
                {"op": "raw_post", "body": list, "headers": {"Host": "handoff-bridge.handoff-system.svc:8080"}},
                {"op": "raw_post", "body": list, "headers": {"Host": "handoff-bridge.handoff-system.svc.cluster.local:8080"}},
                {"op": "raw_post", "body": list, "headers": {"Host": "evil.example:8080"}},
                {"op": "call", "tool": "write_handoff",
                 "args": {"handoff_key": key, "project": "shop", "body": "## State\nwritten as agent-implement"}},
                {"op": "call", "tool": "offer_handoff",
                 "args": {"project": "shop", "to": "reviewer", "handoff_key": key}}
            ]),
            &[],
        )
    });
    common::assert_writes_and_does_not_delete(
        &results[0]["tools"],
        "the profile comes from the ServiceAccount label",
    );
    for (result, expected) in results[1..4].iter().zip([200, 200, 403]) {
        assert_eq!(
            result["status"],
            json!(expected),
            "the Service's names are allowed, others refused: {result}"
        );
    }
    let results = &results[3..];
    assert_eq!(results[1]["is_error"], json!(false), "{}", results[1]);
    assert_eq!(results[1]["structured"]["outcome"], json!("created"));
    assert_eq!(
        results[2]["is_error"],
        json!(false),
        "the offer (agent Job check with the bridge's identity): {}",
        results[2]
    );
    let stored = Api::<Handoff>::namespaced(env.client().await, NS)
        .get(&name_for_key(key))
        .await
        .expect("the handoff exists");
    assert_eq!(
        stored.spec.created_by.as_deref(),
        Some(sa("agent-implement").as_str())
    );
}

/// A client acting as ServiceAccount `name` of the installation.
async fn client_as(env: &TestEnv, name: &str) -> kube::Client {
    common::agents::client_with_token(env, &install_token(env, name).await).await
}

/// A kubeconfig file acting as the installation's handoff-bridge
/// ServiceAccount, in a new temporary directory (kept while it lives).
async fn bridge_kubeconfig(env: &TestEnv) -> (tempfile::TempDir, PathBuf) {
    let token = install_token(env, "handoff-bridge").await;
    let kubeconfig = common::agents::kubeconfig_with_token(env, &token);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bridge-kubeconfig");
    std::fs::write(
        &path,
        serde_json::to_string(&kubeconfig).expect("kubeconfig as JSON (valid YAML)"),
    )
    .expect("write kubeconfig");
    (dir, path)
}

/// The schedule and offer loops, run cluster-wide with the controller's
/// ServiceAccount and nothing but config/rbac's rights: they create and
/// watch Jobs, write status, record Events and supersede offers. (The
/// Handoff loop runs with that identity in the controller suite's
/// `controller::the_committed_rbac_is_all_the_controller_needs` and the
/// can-i matrix here.)
#[tokio::test(flavor = "multi_thread")]
async fn the_controller_loops_run_with_the_controller_identity() {
    use handoff_controller::schedule::reconcile::ScheduleLoop;
    use handoff_core::api::{BrainstormSchedule, HandoffOffer, OfferPhase};
    use handoff_core::schedule::tick::Timing;
    use handoff_core::time::ManualClock;
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::events::v1::Event;
    use kube::api::{ListParams, PostParams};

    let env = installed();
    let ns = env.namespace("install-controller").await;
    let admin = env.client().await;
    let controller = client_as(env, "handoff-controller").await;

    // A schedule (created by the platform owner, i.e. admin).
    let template = |image: &str| {
        json!({"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "agent", "image": image}]}}}})
    };
    let schedules: Api<BrainstormSchedule> = Api::namespaced(admin.clone(), &ns);
    let created = schedules
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "handoff.dev/v1alpha1", "kind": "BrainstormSchedule",
                "metadata": {"name": "daily"},
                "spec": {"project": "shop", "schedule": "0 * * * *",
                         "refine": {"jobTemplate": template("refiner:1")},
                         "brainstorm": {"jobTemplate": template("brainstormer:1")}}
            }))
            .expect("schedule"),
        )
        .await
        .expect("create schedule");
    let created_at = created.metadata.creation_timestamp.expect("created").0;
    let tick = Timing::parse("0 * * * *", None)
        .expect("timing")
        .next_after(created_at)
        .expect("tick");
    let clock = Arc::new(ManualClock::new(tick + jiff::SignedDuration::from_secs(20)));
    let stop = tokio_util::sync::CancellationToken::new();
    let schedule_ctx = Arc::new(ScheduleLoop::new(controller.clone(), clock, "install"));
    let schedule_loop = tokio::spawn({
        let stop = stop.clone();
        async move { handoff_controller::schedule::reconcile::run(schedule_ctx, None, 2, stop).await }
    });
    let offer_ctx = Arc::new(handoff_controller::offer_loops::OfferLoops::new(
        controller.clone(),
        handoff_core::offers::DEFAULT_ACTIVE_SELECTOR,
        kube::runtime::events::Reporter {
            controller: handoff_core::names::CONTROLLER_FIELD_MANAGER.into(),
            instance: Some("install".into()),
        },
        Arc::default(),
    ));
    let offer_loop = tokio::spawn({
        let stop = stop.clone();
        async move { handoff_controller::offer_loops::run(offer_ctx, None, 2, stop).await }
    });

    // The schedule loop creates the refine Job and records status and an Event.
    let jobs: Api<Job> = Api::namespaced(admin.clone(), &ns);
    eventually("the refine Job", Duration::from_secs(30), || {
        let jobs = jobs.clone();
        async move {
            !jobs
                .list(&ListParams::default())
                .await
                .expect("jobs")
                .items
                .is_empty()
        }
    })
    .await;
    eventually("the schedule's status", Duration::from_secs(30), || {
        let schedules = schedules.clone();
        async move {
            schedules
                .get("daily")
                .await
                .expect("get")
                .status
                .is_some_and(|s| s.current_cycle.is_some())
        }
    })
    .await;
    let events: Api<Event> = Api::namespaced(admin.clone(), &ns);
    eventually(
        "an Event from the controller",
        Duration::from_secs(30),
        || {
            let events = events.clone();
            async move {
                events
                    .list(&ListParams::default())
                    .await
                    .expect("events")
                    .items
                    .iter()
                    .any(|e| e.reason.as_deref() == Some("RefineStarted"))
            }
        },
    )
    .await;

    // The offer loop supersedes a pending offer when its agent's Job starts.
    let token = common::agents::writer_token(env, &ns, "offerer").await;
    let bridge = common::Bridge::start(env, &ns);
    let offered = tokio::task::block_in_place(|| {
        bridge.drive(
            &token,
            "",
            json!([{"op": "call", "tool": "offer_handoff",
                    "args": {"project": "shop", "to": "tester", "handoff_key": "arch#1",
                             "session": "s1", "body": "story 1"}}]),
        )
    });
    let offer_name = offered[0]["structured"]["offer"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("offered: {}", offered[0]))
        .to_owned();
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "tester-run", "labels": {"handoff.dev/agent": "tester", "project": "shop"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                     "containers": [{"name": "a", "image": "agent:1"}]}}}
        }))
        .expect("job"),
    )
    .await
    .expect("create the agent Job");
    let offers: Api<HandoffOffer> = Api::namespaced(admin.clone(), &ns);
    eventually(
        "the offer superseded by the controller",
        Duration::from_secs(30),
        || {
            let offers = offers.clone();
            let name = offer_name.clone();
            async move { offers.get(&name).await.expect("offer").phase() == OfferPhase::Superseded }
        },
    )
    .await;

    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(20), schedule_loop).await;
    let _ = tokio::time::timeout(Duration::from_secs(20), offer_loop).await;
}

/// A bridge process whose own identity is ServiceAccount handoff-bridge of
/// the installation (only config/rbac's rights), serving `NS`.
async fn bridge_as_installed(env: &TestEnv) -> (handoff_testkit::BridgeProcess, tempfile::TempDir) {
    bridge_as_installed_for(env, Some(NS), &[]).await
}

/// [`bridge_as_installed`] serving `namespace`, or (`None`) each caller's,
/// with `extra` flags.
pub(crate) async fn bridge_as_installed_for(
    env: &TestEnv,
    namespace: Option<&str>,
    extra: &[&str],
) -> (handoff_testkit::BridgeProcess, tempfile::TempDir) {
    let (dir, path) = bridge_kubeconfig(env).await;
    let binary = Path::new(env!("CARGO_BIN_EXE_handoff"));
    let bridge = match namespace {
        Some(namespace) => handoff_testkit::BridgeProcess::start(binary, &path, namespace, extra),
        None => handoff_testkit::BridgeProcess::start_for_every_namespace(binary, &path, extra),
    }
    .expect("the bridge starts with its own identity");
    (bridge, dir)
}

/// The offer flow with the installed identities: agent-implement offers
/// (its own token creates the offers), the bridge's namespaced Role writes
/// the phases and the Superseded Event, and only agent-brainstorm — the
/// destination by its `handoff.dev/agent` label of config/agents — may
/// reject the offer addressed to `brainstorm`.
#[tokio::test(flavor = "multi_thread")]
async fn the_installed_bridge_moves_offers_and_only_the_destination_rejects() {
    use handoff_core::api::{HandoffOffer, OfferPhase};
    let env = installed();
    let (bridge, _dir) = bridge_as_installed(env).await;
    let implement = install_token(env, "agent-implement").await;
    let incident = install_token(env, "agent-incident").await;
    let brainstorm = install_token(env, "agent-brainstorm").await;
    let offer = |session: &str| {
        json!({"op": "call", "tool": "offer_handoff",
               "args": {"project": "install-offers", "to": "brainstorm", "handoff_key": "arch#9",
                        "session": session, "body": "an idea to explore"}})
    };
    let offered = tokio::task::block_in_place(|| {
        common::drive(
            &["http", bridge.url(), &implement, ""],
            json!([offer("s1"), offer("s2")]),
            &[],
        )
    });
    let first = common::ok(&offered[0])["offer"]["name"]
        .as_str()
        .expect("name")
        .to_owned();
    let second = common::ok(&offered[1])["offer"]["name"]
        .as_str()
        .expect("name")
        .to_owned();
    assert_eq!(
        common::ok(&offered[1])["outcome"],
        json!("superseded_previous")
    );
    let offers: Api<HandoffOffer> = Api::namespaced(env.client().await, NS);
    let phase = |name: String| {
        let offers = offers.clone();
        async move { offers.get(&name).await.expect("offer").phase() }
    };
    assert_eq!(phase(first.clone()).await, OfferPhase::Superseded);
    assert_eq!(phase(second.clone()).await, OfferPhase::Offered);
    let superseded = common::events_with_reason(env.client().await, NS, "Superseded").await;
    assert!(
        superseded
            .iter()
            .any(
                |e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(first.as_str())
                    && e.reporting_controller.as_deref() == Some("handoff-bridge")
            ),
        "the bridge's identity recorded the Superseded Event: {superseded:?}"
    );

    let reject = json!([{"op": "call", "tool": "reject_offer", "args": {"offer": second}}]);
    let refused = tokio::task::block_in_place(|| {
        common::drive(&["http", bridge.url(), &incident, ""], reject.clone(), &[])
    });
    assert_eq!(
        common::err_text(&refused[0]),
        format!(
            "reject_offer: only the destination agent \"brainstorm\" may reject offer {second}; the caller \
             {} is labelled handoff.dev/agent=incident (nor may it patch handoffoffers/status itself, as a \
             groomer may)",
            sa("agent-incident")
        )
    );
    let rejected = tokio::task::block_in_place(|| {
        common::drive(&["http", bridge.url(), &brainstorm, ""], reject, &[])
    });
    assert_eq!(
        common::ok(&rejected[0])["offer"]["phase"],
        json!("Rejected")
    );
    assert_eq!(phase(second).await, OfferPhase::Rejected);
}

/// The lint budget read with the installed identities' own rights: the
/// bridge (bound in a team's namespace as `config/tenant` binds it) and the
/// controller read the ConfigMap `handoff-settings`; a second read within
/// the TTL is served from the cache; no ConfigMap and a refused read (a
/// namespace where the bridge is not bound) give the default, never an
/// error.
#[tokio::test(flavor = "multi_thread")]
async fn the_installed_identities_read_the_namespace_budget() {
    use handoff_core::names::SETTINGS_CONFIGMAP;
    use handoff_core::settings::{BUDGET_KEY, Budget};
    use handoff_kube::settings::{Budgets, READ_TIMEOUT};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Patch, PatchParams, PostParams};

    let env = installed();
    let team = env.namespace("install-budget").await;
    let binding = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: handoff-bridge\n  namespace: {team}\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: handoff-bridge\n\
         subjects:\n  - kind: ServiceAccount\n    name: handoff-bridge\n    namespace: {NS}\n"
    );
    tokio::task::block_in_place(|| {
        must(
            kubectl_stdin(env, &["apply", "--server-side", "-f", "-"], &binding),
            "the bridge bound in the team's namespace",
        )
    });
    let maps: Api<ConfigMap> = Api::namespaced(env.client().await, &team);
    let map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": SETTINGS_CONFIGMAP},
        "data": {BUDGET_KEY: "100"},
    }))
    .expect("configmap");
    maps.create(&PostParams::default(), &map)
        .await
        .expect("create the settings");
    let set = |tokens| Budget {
        tokens,
        problem: None,
    };

    let bridge = Budgets::new(client_as(env, "handoff-bridge").await, READ_TIMEOUT);
    let controller = Budgets::new(client_as(env, "handoff-controller").await, READ_TIMEOUT);
    // RBAC propagation to the bridge's new binding is not instant: a fresh
    // cache per attempt until the read is allowed.
    eventually(
        "the bridge reads the team's budget",
        Duration::from_secs(30),
        || async {
            Budgets::new(client_as(env, "handoff-bridge").await, READ_TIMEOUT)
                .budget(&team)
                .await
                .tokens
                == 100
        },
    )
    .await;
    assert_eq!(bridge.budget(&team).await, set(100));
    assert_eq!(controller.budget(&team).await, set(100));

    maps.patch(
        SETTINGS_CONFIGMAP,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {BUDGET_KEY: "7"}})),
    )
    .await
    .expect("change the budget");
    assert_eq!(bridge.budget(&team).await, set(100), "cached for the TTL");
    let fresh = Budgets::new(client_as(env, "handoff-bridge").await, READ_TIMEOUT);
    assert_eq!(
        fresh.budget(&team).await,
        set(7),
        "a new cache reads the change"
    );

    // No ConfigMap in the bridge's own namespace; a namespace where the
    // bridge is not bound refuses the read: the default, no problem.
    assert_eq!(bridge.budget(NS).await, Budget::default_budget());
    assert_eq!(bridge.budget("default").await, Budget::default_budget());
}

/// A Handoff manifest (JSON) named `name` with key `key`, no createdBy.
fn named_handoff(name: &str, namespace: &str, key: &str, body: &str) -> String {
    json!({"apiVersion": "handoff.dev/v1alpha1", "kind": "Handoff",
           "metadata": {"name": name, "namespace": namespace, "labels": {"project": "shop"}},
           "spec": {"handoffKey": key, "project": "shop", "body": body}})
    .to_string()
}

/// `kubectl create -f -`.
const CREATE: &[&str] = &["create", "-f", "-"];
/// Server-side apply under a field manager that is not the bridge's.
const APPLY_AS_OTHER: &[&str] = &[
    "apply",
    "--server-side",
    "--field-manager=someone-else",
    "-f",
    "-",
];
/// The same, taking over the fields the bridge manages.
const APPLY_AS_OTHER_FORCED: &[&str] = &[
    "apply",
    "--server-side",
    "--field-manager=someone-else",
    "--force-conflicts",
    "-f",
    "-",
];

/// `kubectl args` with `manifest` on stdin, from a multi-threaded tokio
/// test (the call blocks).
fn piped(env: &TestEnv, args: &[&str], manifest: &str) -> Output {
    tokio::task::block_in_place(|| kubectl_stdin(env, args, manifest))
}

/// Asserts that `out` failed and its message holds every one of `parts`.
fn refused_with(out: &Output, what: &str, parts: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "{what} was admitted: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    for part in parts {
        assert!(err.contains(part), "{what}: {part:?} not in {err}");
    }
}

/// One key, one Handoff, on every path of an installation from
/// config/default: a twin (a name of its own, another object's key) and a
/// squat (a key's derived name, another key; a schedule's reserved key's
/// name included) are refused through kubectl create, server-side apply
/// under another field manager, client-side apply and replace --force,
/// each with the name the key must have; the bridge's write of the key
/// and an honest kubectl write pass; control characters in spec.body are
/// refused with their position.
#[tokio::test(flavor = "multi_thread")]
async fn the_webhook_refuses_twins_and_squats_on_every_kubectl_path() {
    let env = installed();
    let ns = env.namespace("install-twin").await;
    let token = common::agents::writer_token(env, &ns, "writer").await;
    let key = "acme/shop#7";
    let derived = name_for_key(key);

    // The victim: written through the bridge, which derives the name.
    let bridge = common::Bridge::start(env, &ns);
    let results = tokio::task::block_in_place(|| {
        bridge.drive(
            &token,
            "implement",
            json!([{"op": "call", "tool": "write_handoff",
                    "args": {"handoff_key": key, "project": "shop", "body": "## State\ngenuine"}}]),
        )
    });
    assert_eq!(
        results[0]["structured"]["outcome"],
        json!("created"),
        "{results:?}"
    );

    let twin = named_handoff("acme-shop-7-mine", &ns, key, "## State\nforged");
    let expected = [
        "\"acme-shop-7-mine\"",
        "\"acme/shop#7\"",
        derived.as_str(),
        "handoff name 'acme/shop#7'",
    ];
    let paths: [(&str, &[&str]); 4] = [
        ("kubectl create", CREATE),
        (
            "kubectl apply --server-side --field-manager=someone-else",
            APPLY_AS_OTHER,
        ),
        ("kubectl apply (client-side)", &["apply", "-f", "-"]),
        // replace of a missing object is a NotFound, never a create;
        // --force deletes and creates, the create is checked.
        (
            "kubectl replace --force",
            &["replace", "--force", "-f", "-"],
        ),
    ];
    for (what, args) in paths {
        refused_with(&piped(env, args, &twin), what, &expected);
    }

    // A squat: the derived name of another key.
    let squat = named_handoff(
        &name_for_key("acme/shop#8"),
        &ns,
        "acme/other#9",
        "## State\nsquatting",
    );
    let squat_expected = name_for_key("acme/other#9");
    for (what, args) in [
        ("squat by kubectl create", CREATE),
        ("squat by kubectl apply --server-side", APPLY_AS_OTHER),
    ] {
        let out = piped(env, args, &squat);
        refused_with(&out, what, &["\"acme/other#9\"", &squat_expected]);
    }

    // A squat at a BrainstormSchedule's reserved key's name, with a key
    // the reserved-key policy does not reserve: the name is refused.
    let schedule = json!({"apiVersion": "handoff.dev/v1alpha1", "kind": "BrainstormSchedule",
        "metadata": {"name": "nightly", "namespace": &ns},
        "spec": {"project": "shop", "schedule": "0 6 * * *", "suspend": true,
                 "refine": {"jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
                     "containers": [{"name": "agent", "image": "agent:1"}]}}}}},
                 "brainstorm": {"jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
                     "containers": [{"name": "agent", "image": "agent:1"}]}}}}}}});
    tokio::task::block_in_place(|| {
        must(
            kubectl_stdin(
                env,
                &["apply", "--server-side", "-f", "-"],
                &schedule.to_string(),
            ),
            "schedule nightly",
        )
    });
    let reserved_name = name_for_key(&format!("{ns}/nightly/refine"));
    let at_reserved = named_handoff(&reserved_name, &ns, "someone/else", "## State\nsteer");
    let out = piped(env, CREATE, &at_reserved);
    refused_with(
        &out,
        "a squat at the schedule's refine key's name",
        &[
            &format!("\"{reserved_name}\""),
            "\"someone/else\"",
            &name_for_key("someone/else"),
        ],
    );

    // Honest kubectl writes under the derived name pass, create and update.
    let honest_key = "acme/shop#10";
    let honest_name = name_for_key(honest_key);
    must(
        piped(
            env,
            CREATE,
            &named_handoff(&honest_name, &ns, honest_key, "## State\nby hand"),
        ),
        "an honest create under the derived name",
    );
    must(
        piped(
            env,
            APPLY_AS_OTHER_FORCED,
            &named_handoff(&honest_name, &ns, honest_key, "## State\nby hand, edited"),
        ),
        "an honest update under the derived name",
    );

    // Control characters in spec.body: refused with the field and position.
    let escaped = named_handoff(
        &honest_name,
        &ns,
        honest_key,
        "ok\u{1b}[1A\u{1b}[2Kwriter: root",
    );
    let out = piped(env, APPLY_AS_OTHER_FORCED, &escaped);
    refused_with(
        &out,
        "an ESC sequence in spec.body",
        &["spec.body", "U+001B (ESC)", "line 1, column 3"],
    );
    let bidi = named_handoff(
        &name_for_key("acme/shop#11"),
        &ns,
        "acme/shop#11",
        "a\u{202e}b",
    );
    let out = piped(env, CREATE, &bidi);
    refused_with(
        &out,
        "a bidi override in spec.body",
        &["spec.body", "U+202E"],
    );
    let offer = json!({"apiVersion": "handoff.dev/v1alpha1", "kind": "HandoffOffer",
        "metadata": {"name": "escaped-offer", "namespace": &ns},
        "spec": {"project": "shop", "to": "dev-lead", "fromKey": key,
                 "body": "take it\u{1b}]0;owned\u{7}"}});
    let out = piped(env, CREATE, &offer.to_string());
    refused_with(
        &out,
        "an OSC sequence in an offer's spec.body",
        &["spec.body", "U+001B (ESC) at line 1, column 8"],
    );

    // The genuine object is untouched and alone under its key.
    let listed = Api::<Handoff>::namespaced(env.client().await, &ns)
        .list(&Default::default())
        .await
        .expect("list");
    let of_key: Vec<String> = listed
        .items
        .iter()
        .filter(|h| h.spec.handoff_key == key)
        .map(|h| h.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(of_key, [derived]);
}

/// config/default registers the admission webhook fail-closed and keeps it
/// answering: `failurePolicy: Fail` within 5 s, only handoff.dev content
/// writes (matchConditions), two replicas spread over nodes with a
/// PodDisruptionBudget and a readiness probe, the apiserver let through the
/// NetworkPolicy to its port, and its certificate self-managed: no
/// cert-manager, no caBundle, a ServiceAccount with exactly the rights for
/// its one Secret and its one configuration.
#[test]
fn config_default_registers_the_webhook_fail_closed_and_highly_available() {
    let env = common::env();
    let default = build(env, "config/default");
    let configuration = find(
        &default,
        "ValidatingWebhookConfiguration",
        "handoff-webhook",
    );
    let hooks = configuration["webhooks"].as_array().expect("webhooks");
    assert_eq!(hooks.len(), 1);
    let hook = &hooks[0];
    assert_eq!(hook["failurePolicy"], json!("Fail"));
    assert_eq!(hook["sideEffects"], json!("None"));
    assert_eq!(hook["admissionReviewVersions"], json!(["v1"]));
    assert!(
        hook["timeoutSeconds"].as_u64().is_some_and(|t| t <= 5),
        "{hook}"
    );
    let rule = &hook["rules"][0];
    assert_eq!(rule["apiGroups"], json!(["handoff.dev"]));
    assert_eq!(rule["operations"], json!(["CREATE", "UPDATE"]));
    assert_eq!(rule["resources"], json!(["handoffs", "handoffoffers"]));
    let conditions: Vec<&str> = hook["matchConditions"]
        .as_array()
        .expect("matchConditions")
        .iter()
        .filter_map(|c| c["expression"].as_str())
        .collect();
    assert!(
        conditions
            .iter()
            .any(|c| c.contains("request.kind.group == 'handoff.dev'")),
        "{conditions:?}"
    );
    assert!(
        conditions
            .iter()
            .any(|c| c.contains("object.spec != oldObject.spec")),
        "{conditions:?}"
    );
    let service_ref = &hook["clientConfig"]["service"];
    assert_eq!(service_ref["namespace"], json!(NS));
    let service = find(
        &default,
        "Service",
        service_ref["name"].as_str().expect("name"),
    );
    let deployment = find(&default, "Deployment", "handoff-webhook");
    assert_eq!(deployment["spec"]["replicas"], json!(2));
    let pod = &deployment["spec"]["template"]["spec"];
    assert!(
        pod["affinity"]["podAntiAffinity"].is_object(),
        "the replicas are spread: {pod}"
    );
    assert_eq!(
        service["spec"]["selector"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    let pdb = find(&default, "PodDisruptionBudget", "handoff-webhook");
    assert_eq!(pdb["spec"]["minAvailable"], json!(1));
    let c = &pod["containers"][0];
    assert_eq!(container_args(deployment)[0], "webhook");
    assert_eq!(c["readinessProbe"]["httpGet"]["scheme"], json!("HTTPS"));
    assert_eq!(
        c["securityContext"]["allowPrivilegeEscalation"],
        json!(false)
    );
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], json!(true));
    assert_eq!(pod["securityContext"]["runAsNonRoot"], json!(true));
    let account = pod["serviceAccountName"]
        .as_str()
        .expect("serviceAccountName");
    find(&default, "ServiceAccount", account);
    let bound: Vec<(&str, &str)> = default
        .iter()
        .filter(|o| {
            matches!(
                o["kind"].as_str(),
                Some("RoleBinding" | "ClusterRoleBinding")
            ) && o["subjects"]
                .as_array()
                .is_some_and(|s| s.iter().any(|s| s["name"] == account))
        })
        .filter_map(|o| {
            Some((
                o["roleRef"]["kind"].as_str()?,
                o["roleRef"]["name"].as_str()?,
            ))
        })
        .collect();
    assert_eq!(
        bound,
        [
            ("Role", "handoff-webhook"),
            ("ClusterRole", "handoff-webhook")
        ],
        "the webhook's ServiceAccount is bound to its own two roles only"
    );
    let policy = find(&default, "NetworkPolicy", "handoff-webhook");
    assert_eq!(
        policy["spec"]["ingress"][0]["ports"][0]["port"],
        json!(9443)
    );
    assert!(
        policy["spec"]["ingress"][0].get("from").is_none(),
        "the apiserver is not pod-selectable: every source reaches the port"
    );

    // Self-managed: no cert-manager object, no injection annotation, no
    // caBundle (the webhook injects it), the Secret's name and the pod's
    // namespace passed, its token mounted for that.
    assert!(
        !default.iter().any(|o| o["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("cert-manager.io/"))),
        "config/default needs no cert-manager"
    );
    assert!(
        configuration["metadata"]["annotations"]
            .get("cert-manager.io/inject-ca-from")
            .is_none()
    );
    assert!(hook["clientConfig"].get("caBundle").is_none(), "{hook}");
    let args = container_args(deployment);
    for flag in [
        "--tls-secret=handoff-webhook-tls",
        "--webhook-configuration=handoff-webhook",
        &format!(
            "--service={}",
            service_ref["name"].as_str().unwrap_or_default()
        ),
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag} in {args:?}");
    }
    assert!(
        args.iter().all(|a| !a.starts_with("--tls-cert-file")),
        "{args:?}"
    );
    assert_eq!(
        c["env"][0],
        json!({"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}})
    );
    assert_eq!(pod["automountServiceAccountToken"], json!(true));
    let role = find(&default, "Role", "handoff-webhook");
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["secrets"],
             "resourceNames": ["handoff-webhook-tls"], "verbs": ["get", "update"]}
        ])
    );
    let cluster_role = find(&default, "ClusterRole", "handoff-webhook");
    assert_eq!(
        cluster_role["rules"],
        json!([{"apiGroups": ["admissionregistration.k8s.io"],
                "resources": ["validatingwebhookconfigurations"],
                "resourceNames": [configuration["metadata"]["name"]],
                "verbs": ["get", "patch"]}])
    );
}

/// config/overlays/cert-manager: cert-manager issues the webhook's
/// certificate instead (today's mode before self-management): a private CA
/// and a Certificate for the Service whose CA cainjector injects, the
/// Secret mounted and served from files, no token and no rights; nothing
/// else of config/default changes.
#[test]
fn the_cert_manager_overlay_serves_cert_managers_certificate_from_files() {
    let env = common::env();
    let default = build(env, "config/default");
    let overlay = build(env, "config/overlays/cert-manager");
    let is_cert_manager = |o: &&Value| {
        o["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("cert-manager.io/"))
    };
    let webhook_parts = |o: &&Value| {
        o["metadata"]["name"] == "handoff-webhook"
            && matches!(
                o["kind"].as_str(),
                Some(
                    "Deployment"
                        | "ServiceAccount"
                        | "ValidatingWebhookConfiguration"
                        | "Role"
                        | "RoleBinding"
                        | "ClusterRole"
                        | "ClusterRoleBinding"
                )
            )
    };
    let rest = |objects: &[Value]| -> Vec<Value> {
        objects
            .iter()
            .filter(|o| !is_cert_manager(o) && !webhook_parts(o))
            .cloned()
            .collect()
    };
    assert_eq!(
        rest(&overlay),
        rest(&default),
        "only the webhook's parts change"
    );
    for kind in ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"] {
        assert!(
            !overlay
                .iter()
                .any(|o| o["kind"] == kind && o["metadata"]["name"] == "handoff-webhook"),
            "no {kind} for the webhook: it calls no API in this mode"
        );
    }
    let account = find(&overlay, "ServiceAccount", "handoff-webhook");
    assert_eq!(account["automountServiceAccountToken"], json!(false));

    let configuration = find(
        &overlay,
        "ValidatingWebhookConfiguration",
        "handoff-webhook",
    );
    let service_ref = &configuration["webhooks"][0]["clientConfig"]["service"];
    let annotation = configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        .as_str()
        .expect("inject-ca-from");
    let (namespace, certificate) = annotation.split_once('/').expect("ns/name");
    assert_eq!(namespace, NS);
    let certificate = find(&overlay, "Certificate", certificate);
    let dns: Vec<&str> = certificate["spec"]["dnsNames"]
        .as_array()
        .expect("dnsNames")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        dns.contains(
            &format!(
                "{}.{NS}.svc",
                service_ref["name"].as_str().unwrap_or_default()
            )
            .as_str()
        ),
        "{dns:?}"
    );
    let secret = certificate["spec"]["secretName"]
        .as_str()
        .expect("secretName");
    let deployment = find(&overlay, "Deployment", "handoff-webhook");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], json!(false));
    let mount = secret_mount(pod, secret);
    let dir = mount["mountPath"].as_str().expect("mountPath");
    let args = container_args(deployment);
    assert_eq!(args[0], "webhook");
    for flag in [
        format!("--tls-cert-file={dir}/tls.crt"),
        format!("--tls-key-file={dir}/tls.key"),
    ] {
        assert!(args.contains(&flag), "{flag} in {args:?}");
    }
    assert!(
        args.iter().all(|a| !a.starts_with("--tls-secret")),
        "{args:?}"
    );
    let issuer = find(
        &overlay,
        "Issuer",
        certificate["spec"]["issuerRef"]["name"]
            .as_str()
            .expect("issuer"),
    );
    for o in overlay.iter().filter(is_cert_manager) {
        assert_eq!(o["metadata"]["namespace"], json!(NS), "{o}");
    }
    assert_eq!(
        issuer["spec"]["ca"]["secretName"],
        json!("handoff-webhook-ca")
    );
}
