//! `helm install`, `helm upgrade` and `helm uninstall` of the chart on the
//! test kit's control plane (an apiserver without nodes: the objects are
//! created and admitted, no pod runs; the e2e tier runs them): what Helm
//! itself does with the chart (its ordering, the crds/ directory, the
//! objects one mode drops on upgrade, what uninstall keeps).

use handoff_testkit::TestEnv;

use crate::render::{chart, helm_run, root};

/// The release namespace of this test (the dry run uses handoff-system).
const NS: &str = "handoff-helm";

/// `kubectl <args>` against `env`: stdout, or stderr as the error.
fn kubectl(env: &TestEnv, args: &[&str]) -> Result<String, String> {
    let out = env
        .kubectl()
        .current_dir(root())
        .args(args)
        .output()
        .expect("kubectl runs");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// `helm <args>` against `env` in namespace [`NS`], which must succeed.
fn helm(env: &TestEnv, args: &[&str]) -> String {
    let kubeconfig = env.kubeconfig_path().to_str().expect("a UTF-8 path");
    let mut all = args.to_vec();
    all.extend(["--namespace", NS, "--kubeconfig", kubeconfig]);
    helm_run(&all).unwrap_or_else(|e| panic!("helm {}: {e}", args.join(" ")))
}

/// Whether `kubectl get <what>` finds it.
fn exists(env: &TestEnv, what: &[&str]) -> bool {
    let mut args = vec!["get"];
    args.extend(what);
    kubectl(env, &args).is_ok()
}

#[test]
fn helm_installs_upgrades_and_uninstalls_keeping_the_crds() {
    let env = handoff_testkit::shared();
    // `helm install` stores the release in its namespace first: create it
    // with the labels the chart's namespace.create would set.
    for args in [
        vec!["create", "namespace", NS],
        vec![
            "label",
            "namespace",
            NS,
            "pod-security.kubernetes.io/enforce=restricted",
            "pod-security.kubernetes.io/enforce-version=latest",
        ],
    ] {
        kubectl(env, &args).unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"));
    }
    crate::kubectl::apply_cert_manager_stand_ins(env);
    let chart = chart();
    let chart = chart.to_str().expect("a UTF-8 path");

    helm(env, &["install", "handoff", chart]);
    for what in [
        ["deployment", "handoff-controller"],
        ["deployment", "handoff-bridge"],
        ["deployment", "handoff-webhook"],
        ["role", "handoff-webhook"],
    ] {
        assert!(
            exists(env, &["-n", NS, what[0], what[1]]),
            "helm install: no {what:?}"
        );
    }
    assert!(exists(env, &["clusterrole", "handoff-webhook"]));
    assert!(exists(
        env,
        &["validatingwebhookconfiguration", "handoff-webhook"]
    ));

    helm(
        env,
        &[
            "upgrade",
            "handoff",
            chart,
            "--set",
            "webhook.certificates.mode=certManager,postgres.enabled=true,tenants={team-helm}",
        ],
    );
    assert!(
        !exists(env, &["clusterrole", "handoff-webhook"]),
        "certManager mode drops the self-managed mode's ClusterRole"
    );
    assert!(exists(
        env,
        &["-n", NS, "certificate", "handoff-webhook-tls"]
    ));
    assert!(exists(
        env,
        &["-n", "team-helm", "rolebinding", "handoff-bridge"]
    ));

    helm(env, &["uninstall", "handoff"]);
    assert!(!exists(
        env,
        &["-n", NS, "deployment", "handoff-controller"]
    ));
    assert!(!exists(env, &["clusterrole", "handoff-writer"]));
    for crd in [
        "handoffs.handoff.dev",
        "handoffoffers.handoff.dev",
        "brainstormschedules.handoff.dev",
    ] {
        assert!(
            exists(env, &["crd", crd]),
            "helm uninstall keeps the CRD {crd}"
        );
    }
}
