//! The rendered chart against a real kube-apiserver (the test kit's
//! control plane): a server-side dry run validates every object against
//! the apiserver's schemas and admission, which rendering alone does not.

use std::process::Output;

use crate::kubectl::{apply_cert_manager_stand_ins, kubectl_stdin};
use crate::render::{NAMESPACE, chart_objects};

/// stderr of a successful `kubectl`, else a panic naming `what`.
fn must(out: Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{what} failed: {stderr}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

/// The chart with `sets` as one YAML stream (each object a document).
fn manifest(sets: &[&str]) -> String {
    chart_objects(&[], sets)
        .values()
        .map(|o| format!("---\n{o}\n"))
        .collect()
}

#[test]
fn the_chart_dry_runs_on_a_real_apiserver() {
    let env = handoff_testkit::shared();
    // The namespaces for real (a dry run cannot create the namespace of
    // the objects in it): the release's, as the chart renders it (the
    // restricted Pod Security labels), and the tenants'.
    let namespaces = ["namespace.create=true", "tenants={team-a,team-b}"];
    let namespace_objects: String = chart_objects(&[], &namespaces)
        .iter()
        .filter(|(key, _)| key.starts_with("Namespace "))
        .map(|(_, o)| format!("---\n{o}\n"))
        .collect();
    must(
        kubectl_stdin(
            env,
            &["apply", "--server-side", "-f", "-"],
            &namespace_objects,
        ),
        "apply the chart's namespaces",
    );
    // cert-manager's CRDs (stand-ins: nothing acts on them) for the
    // certManager mode and bridge TLS.
    apply_cert_manager_stand_ins(env);
    let renderings: [&[&str]; 2] = [
        &[],
        &[
            "webhook.certificates.mode=certManager",
            "postgres.enabled=true",
            "bridge.tls.enabled=true",
            "tenants={team-a,team-b}",
            "controller.replicas=3",
            "console.enabled=true",
        ],
    ];
    for sets in renderings {
        // --force-conflicts: the CRDs are already applied by the test kit
        // under another field manager.
        let warnings = must(
            kubectl_stdin(
                env,
                &[
                    "apply",
                    "--server-side",
                    "--dry-run=server",
                    "--force-conflicts",
                    "-f",
                    "-",
                ],
                &manifest(sets),
            ),
            &format!("server-side dry run of the chart with {sets:?}"),
        );
        assert!(
            !warnings.contains("PodSecurity"),
            "the chart's Deployments ({sets:?}) must meet {NAMESPACE}'s restricted Pod Security Standard: {warnings}"
        );
    }
}
