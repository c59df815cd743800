//! `kubectl` as the suites run it: from the repository root, as admin of
//! a [`TestEnv`], with a panic naming the step that failed.

use std::path::PathBuf;
use std::process::Output;

use handoff_testkit::TestEnv;

/// The repository root (relative paths in `kubectl -f` are from there).
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `kubectl <args>` against `env`.
pub(crate) fn kubectl(env: &TestEnv, args: &[&str]) -> Output {
    env.kubectl()
        .current_dir(root())
        .args(args)
        .output()
        .expect("kubectl runs")
}

/// `kubectl <args>` against `env`, with `stdin`.
pub(crate) fn kubectl_stdin(env: &TestEnv, args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = env
        .kubectl()
        .current_dir(root())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("kubectl output")
}

/// The output of a successful command, else a panic naming `what`.
pub(crate) fn must(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `kubectl apply --server-side <args>` against `env`, which must
/// succeed (`what` names it if not).
pub(crate) fn apply(env: &TestEnv, args: &[&str], what: &str) -> String {
    let args: Vec<&str> = ["apply", "--server-side"]
        .iter()
        .chain(args)
        .copied()
        .collect();
    must(kubectl(env, &args), what)
}

/// `kubectl get <args> -o json` against `env`, which must succeed, as
/// JSON.
pub(crate) fn get_json(env: &TestEnv, args: &[&str]) -> serde_json::Value {
    let args: Vec<&str> = ["get"]
        .iter()
        .chain(args)
        .chain(&["-o", "json"])
        .copied()
        .collect();
    let out = must(kubectl(env, &args), &args.join(" "));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl {}: {e}: {out}", args.join(" ")))
}

/// Stand-ins for cert-manager's CRDs (`tests/fixtures/cert-manager/`), so
/// `config/overlays/cert-manager`'s Issuers and Certificates apply (a
/// server-side dry run) where no cert-manager runs (nothing acts on them),
/// waited for until established.
pub(crate) fn apply_cert_manager_stand_ins(env: &TestEnv) {
    apply(
        env,
        &["-f", "tests/fixtures/cert-manager/"],
        "apply the cert-manager stand-in CRDs",
    );
    wait_for_cert_manager_crds(env);
}

/// Waits until cert-manager's (or the stand-ins') Issuer and Certificate
/// CRDs are established.
pub(crate) fn wait_for_cert_manager_crds(env: &TestEnv) {
    wait_established(
        env,
        &["issuers.cert-manager.io", "certificates.cert-manager.io"],
        "cert-manager stand-in CRDs established",
    );
}

/// Waits (up to a minute) until the CRDs named `crds` are established.
pub(crate) fn wait_established(env: &TestEnv, crds: &[&str], what: &str) {
    let crds: Vec<String> = crds.iter().map(|c| format!("crd/{c}")).collect();
    let mut args = vec!["wait", "--for=condition=Established", "--timeout=60s"];
    args.extend(crds.iter().map(String::as_str));
    must(kubectl(env, &args), what);
}
