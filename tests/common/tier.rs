//! What every agents-tier suite (`tests/agents_*.rs`) sets up around an
//! agent's real CLI: a directory per test with `handoff` on `PATH` and a
//! kubeconfig whose contexts name the test's namespace, the handoff the
//! cluster stored for a key, as `kubectl` shows it, and a wait for the next
//! whole second.

use handoff_testkit::TestEnv;
use serde_json::Value;

/// A temp dir holding `subdirs`, `bin/handoff` (this build's binary) and
/// `kubeconfig` (the control plane's, every context in `namespace`).
pub(crate) fn workdir(env: &TestEnv, namespace: &str, subdirs: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for sub in subdirs.iter().chain(&["bin"]) {
        std::fs::create_dir_all(dir.path().join(sub)).expect("dir");
    }
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_handoff"),
        dir.path().join("bin/handoff"),
    )
    .expect("handoff on PATH");
    let mut kubeconfig = env.kubeconfig().clone();
    for context in &mut kubeconfig.contexts {
        if let Some(c) = context.context.as_mut() {
            c.namespace = Some(namespace.to_owned());
        }
    }
    std::fs::write(
        dir.path().join("kubeconfig"),
        serde_json::to_string(&kubeconfig).expect("kubeconfig"),
    )
    .expect("kubeconfig written");
    dir
}

/// The Handoff of `key` in `namespace`, as `kubectl get -o json` lists it.
pub(crate) fn stored(env: &TestEnv, namespace: &str, key: &str) -> Option<Value> {
    let out = env
        .kubectl()
        .args(["get", "handoffs", "-n", namespace, "-o", "json"])
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout).expect("kubectl JSON");
    list["items"]
        .as_array()?
        .iter()
        .find(|h| h["spec"]["handoffKey"] == key)
        .cloned()
}

/// Waits until the clock is in a later whole second than now, so a session
/// begun after it starts later than any `updated_at` (whole seconds)
/// stamped before: then the time alone says "stale", and only the session's
/// own transcript can say it wrote.
pub(crate) fn next_second() {
    let now = jiff::Timestamp::now().as_second();
    while jiff::Timestamp::now().as_second() <= now {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
