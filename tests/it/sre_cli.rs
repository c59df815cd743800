//! The SRE's subcommands (`handoff get | history | diff | search`) as a
//! user runs them: the built binary with the test control plane's
//! kubeconfig and the shared PostgreSQL mirror, and as the kubectl plugin
//! `kubectl handoff` (a symlink named `kubectl-handoff` on the PATH); and
//! `history | diff | search` as a person (a ServiceAccount token in a
//! kubeconfig, no database URL) through the real bridge, where RBAC
//! decides.

use crate::common;
use handoff_testkit::controller::{Scene, postgres};

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::env;
use handoff_testkit::spec::{Fields, counted, spec};
use handoff_testkit::wait::eventually;

fn handoff(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_handoff"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("HANDOFF_POSTGRES_URL")
        .env_remove("HANDOFF_BRIDGE_URL")
        .env_remove("HANDOFF_CA_FILE")
        .output()
        .expect("run handoff")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    assert!(!out.status.success(), "expected a failure");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `handoff <args> -n <ns> --postgres-url <url>`.
fn with_mirror(kubeconfig: &Path, ns: &str, url: &str, args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend(["-n", ns, "--postgres-url", url]);
    handoff(kubeconfig, &all)
}

/// `handoff history KEY` once it lists `revisions` revisions (and its header).
async fn history_of(kubeconfig: &Path, ns: &str, url: &str, key: &str, revisions: usize) -> String {
    eventually(
        &format!("{revisions} revisions of {key} in the history"),
        Duration::from_secs(60),
        || {
            let out = with_mirror(kubeconfig, ns, url, &["history", key]);
            async move {
                out.status
                    .success()
                    .then(|| stdout(&out))
                    .filter(|s| s.lines().count() == revisions + 1)
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_history_diff_and_search_from_the_command_line_and_kubectl() {
    let env = env();
    let s = Scene::new("sre-cli").await;
    let (url, _) = postgres().await;
    let counter = s.controller("a").mirror(&url).start(s.client.clone());
    let bodies = [
        "## State\nrefund job down\n",
        "## State\nrefund job down\n## Next\nrestart\n",
        "## State\nrefund job up\n## Next\nwatch payments_test.go\n",
    ];
    for (i, body) in bodies.iter().enumerate() {
        s.store
            .write(
                &spec("ops/42")
                    .repo("org/a")
                    .kind("incident")
                    .body(*body)
                    .by("sre@example.com"),
            )
            .await
            .expect("write");
        counted(&s.api, "ops/42", i64::try_from(i + 1).expect("small")).await;
    }
    let current = s
        .api
        .get(&handoff_core::api::naming::name_for_key("ops/42"))
        .await
        .expect("get");
    let at = current
        .status
        .as_ref()
        .and_then(|s| s.updated_at.as_ref())
        .expect("updatedAt")
        .0
        .to_string();
    let kubeconfig = env.kubeconfig_path();

    let expected_get = format!(
        "# Handoff `ops/42`\n\n- project: shop\n- repo: org/a\n- kind: incident\n- revision: 3\n\
         - writer: sre@example.com\n- updated: {at}\n\n---\n\n## State\nrefund job up\n## Next\n\
         watch payments_test.go\n"
    );
    assert_eq!(
        stdout(&handoff(kubeconfig, &["get", "ops/42", "-n", &s.ns])),
        expected_get
    );
    let missing = stderr(&handoff(kubeconfig, &["get", "nope", "-n", &s.ns]));
    assert!(
        missing.contains(&format!(
            "no handoff exists for key `nope` in namespace {}",
            s.ns
        )),
        "{missing}"
    );

    // The mirror commands name both ways to the history when neither is given.
    for command in [
        vec!["history", "ops/42"],
        vec!["diff", "ops/42", "1", "2"],
        vec!["search", "shop", "refund"],
    ] {
        let mut args = command.clone();
        args.extend(["-n", &s.ns]);
        let refused = stderr(&handoff(kubeconfig, &args));
        for words in [
            format!("`handoff {}` reads the mirror's history", command[0]),
            "--bridge URL".into(),
            "HANDOFF_BRIDGE_URL".into(),
            "--postgres-url URL".into(),
            "HANDOFF_POSTGRES_URL".into(),
        ] {
            assert!(refused.contains(&words), "{words:?} in {refused}");
        }
    }

    let mirrored = |args: &[&str]| with_mirror(kubeconfig, &s.ns, &url, args);
    let history = history_of(kubeconfig, &s.ns, &url, "ops/42", 3).await;
    let lines: Vec<Vec<&str>> = history.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(lines[0], ["REVISION", "UPDATED", "WRITER", "BYTES"]);
    for (line, revision) in lines[1..].iter().zip([3usize, 2, 1]) {
        assert_eq!(line[0], revision.to_string());
        assert_eq!(line[2], "sre@example.com");
        assert_eq!(line[3], bodies[revision - 1].len().to_string());
    }
    assert_eq!(lines[1][1], at);

    assert_eq!(
        stdout(&mirrored(&["diff", "ops/42", "2", "3"])),
        "--- revision 2\n+++ revision 3\n@@ -1,4 +1,4 @@\n ## State\n-refund job down\n\
         +refund job up\n ## Next\n-restart\n+watch payments_test.go\n"
    );
    let unknown = stderr(&mirrored(&["diff", "ops/42", "1", "7"]));
    assert!(
        unknown.contains("`ops/42` has no revision 7 in the history"),
        "{unknown}"
    );

    let found = stdout(&mirrored(&["search", "shop", "payments_test.go"]));
    let rows: Vec<Vec<&str>> = found.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 2, "{found}");
    assert_eq!(rows[0], ["KEY", "RANK", "MATCHED", "PREVIEW"]);
    assert_eq!((rows[1][0], rows[1][2]), ("ops/42", "payments_test.go"));

    // As a kubectl plugin: `kubectl handoff get` runs the same command.
    let bin = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_handoff"),
        bin.path().join("kubectl-handoff"),
    )
    .expect("symlink");
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let via_kubectl = Command::new(env.kubectl().get_program())
        .args(["handoff", "get", "ops/42", "-n", &s.ns])
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", path)
        .output()
        .expect("kubectl");
    assert_eq!(stdout(&via_kubectl), expected_get);
    counter.stop().await;
}

/// A body holding terminal escapes and a bidi override (a kubectl writer
/// could store one before the webhook refused them; an older object may
/// still) prints escaped from every SRE command: no ESC, C1 or bidi
/// character reaches the terminal, so no forged `writer:` line shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cannot_forge_lines_on_the_sre_terminal() {
    let env = env();
    let s = Scene::new("sre-cli-escapes").await;
    let (url, _) = postgres().await;
    let counter = s.controller("a").mirror(&url).start(s.client.clone());
    let forged = "## State\nrefund ok\n\u{1b}[2A\u{1b}[2K- writer: root\u{9b}1m \u{202e}txt.exe\n";
    s.store
        .write(&spec("ops/esc").body("## State\nrefund ok\n").by("mallory"))
        .await
        .expect("write");
    counted(&s.api, "ops/esc", 1).await;
    // As `kubectl replace` sends it: JSON (an apply patch is YAML, which
    // refuses control characters on its own).
    let name = handoff_core::api::naming::name_for_key("ops/esc");
    let mut object = s.api.get(&name).await.expect("get");
    object.spec.body = forged.into();
    s.api
        .replace(&name, &kube::api::PostParams::default(), &object)
        .await
        .expect("replace");
    counted(&s.api, "ops/esc", 2).await;
    // Tab and newline are text here (the tables are tab-separated).
    let hidden = |text: &str| {
        text.chars()
            .filter(|c| handoff_core::text::is_hidden(*c, None, true))
            .count()
    };
    let kubeconfig = env.kubeconfig_path();
    let got = stdout(&handoff(kubeconfig, &["get", "ops/esc", "-n", &s.ns]));
    assert_eq!(hidden(&got), 0, "{got:?}");
    assert!(
        got.ends_with("refund ok\n\\u{1b}[2A\\u{1b}[2K- writer: root\\u{9b}1m \\u{202e}txt.exe\n"),
        "{got:?}"
    );
    assert_eq!(got.matches("- writer: ").count(), 2, "{got:?}");
    let mirrored = |args: &[&str]| with_mirror(kubeconfig, &s.ns, &url, args);
    let history = history_of(kubeconfig, &s.ns, &url, "ops/esc", 2).await;
    assert_eq!(hidden(&history), 0, "{history:?}");
    let diff = stdout(&mirrored(&["diff", "ops/esc", "1", "2"]));
    assert_eq!(hidden(&diff), 0, "{diff:?}");
    assert!(
        diff.contains("+\\u{1b}[2A\\u{1b}[2K- writer: root"),
        "{diff:?}"
    );
    let found = stdout(&mirrored(&["search", "shop", "refund"]));
    assert_eq!(hidden(&found), 0, "{found:?}");
    assert_eq!(found.lines().count(), 2, "{found:?}");
    counter.stop().await;
}

/// A kubeconfig like `admin`'s (the same cluster) whose user is the bearer
/// `token`, written in `dir` as `name`.
fn kubeconfig_of(dir: &Path, admin: &Path, name: &str, token: &str) -> std::path::PathBuf {
    let mut kubeconfig = kube::config::Kubeconfig::read_from(admin).expect("kubeconfig");
    for user in &mut kubeconfig.auth_infos {
        user.auth_info = Some(kube::config::AuthInfo {
            token: Some(token.to_owned().into()),
            ..kube::config::AuthInfo::default()
        });
    }
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string(&kubeconfig).expect("json")).expect("write");
    path
}

/// Lets ServiceAccount `account` get and list handoffs in `ns` (a Role of
/// its own, bound to it).
async fn may_read_handoffs(client: &kube::Client, ns: &str, account: &str) {
    use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
    use kube::api::{Api, ObjectMeta, PostParams};
    let meta = || ObjectMeta {
        name: Some(format!("{account}-reads-handoffs")),
        ..ObjectMeta::default()
    };
    let role = Role {
        metadata: meta(),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["handoff.dev".into()]),
            resources: Some(vec!["handoffs".into()]),
            verbs: vec!["get".into(), "list".into()],
            ..PolicyRule::default()
        }]),
    };
    Api::<Role>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &role)
        .await
        .expect("create Role");
    let binding = RoleBinding {
        metadata: meta(),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: format!("{account}-reads-handoffs"),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(ns.into()),
            ..Subject::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .expect("create RoleBinding");
}

/// The person's path: `handoff history | diff | search --bridge URL` with
/// a kubeconfig holding a ServiceAccount's token and no database URL, the
/// real bridge (`handoff mcp --listen`, with the mirror) in between. A
/// reader gets what the mirror's administrator gets; a person without the
/// binding is refused by reason (who, the verb, the namespace); a
/// certificate-only kubeconfig, an unreachable bridge and two paths at once
/// get errors saying what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_diff_and_search_as_the_person_through_the_bridge() {
    let env = env();
    let s = Scene::new("sre-person").await;
    let (url, _) = postgres().await;
    let counter = s.controller("a").mirror(&url).start(s.client.clone());
    let bodies = [
        "## State\nrefund job down\n",
        "## State\nrefund job up\n## Next\nwatch payments_test.go\n",
    ];
    for (i, body) in bodies.iter().enumerate() {
        s.store
            .write(
                &spec("ops/7")
                    .repo("org/a")
                    .body(*body)
                    .by("sre@example.com"),
            )
            .await
            .expect("write");
        counted(&s.api, "ops/7", i64::try_from(i + 1).expect("small")).await;
    }
    let admin = env.kubeconfig_path();
    // The mirror's administrator's view, once both revisions are mirrored.
    let direct = history_of(admin, &s.ns, &url, "ops/7", 2).await;

    let reader_token = common::agent_token(env, &s.ns, "sre-reader", None, None).await;
    may_read_handoffs(&s.client, &s.ns, "sre-reader").await;
    let stranger_token = common::agent_token(env, &s.ns, "sre-stranger", None, None).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let reader = kubeconfig_of(dir.path(), admin, "reader", &reader_token);
    let stranger = kubeconfig_of(dir.path(), admin, "stranger", &stranger_token);
    let bridge = common::Bridge::start_with(env, &s.ns, &["--postgres-url", &url]);
    let as_person = |kubeconfig: &Path, args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["-n", &s.ns, "--bridge", &bridge.url]);
        handoff(kubeconfig, &all)
    };

    // The reader: the same rows as the mirror read directly.
    let history = stdout(&as_person(&reader, &["history", "ops/7"]));
    assert_eq!(history, direct);
    let rows: Vec<Vec<&str>> = history.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 3, "{history}");
    assert_eq!(rows[0], ["REVISION", "UPDATED", "WRITER", "BYTES"]);
    for (row, revision) in rows[1..].iter().zip([2usize, 1]) {
        let bytes = bodies[revision - 1].len().to_string();
        assert_eq!(
            (row[0], row[2], row[3]),
            (
                revision.to_string().as_str(),
                "sre@example.com",
                bytes.as_str()
            )
        );
    }
    assert_eq!(
        stdout(&as_person(&reader, &["diff", "ops/7", "1", "2"])),
        "--- revision 1\n+++ revision 2\n@@ -1,2 +1,4 @@\n ## State\n-refund job down\n\
         +refund job up\n+## Next\n+watch payments_test.go\n"
    );
    let found = stdout(&as_person(&reader, &["search", "shop", "payments_test.go"]));
    let direct_found = stdout(&with_mirror(
        admin,
        &s.ns,
        &url,
        &["search", "shop", "payments_test.go"],
    ));
    assert_eq!(found, direct_found);
    let matches: Vec<Vec<&str>> = found.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(matches.len(), 2, "{found}");
    assert_eq!(
        (matches[1][0], matches[1][2]),
        ("ops/7", "payments_test.go")
    );

    // Without the binding: refused by reason, nothing printed.
    let who = format!("system:serviceaccount:{}:sre-stranger", s.ns);
    for (command, verb) in [
        (vec!["history", "ops/7"], "get"),
        (vec!["diff", "ops/7", "1", "2"], "get"),
        (vec!["search", "shop", "refund"], "list"),
    ] {
        let out = as_person(&stranger, &command);
        let refused = stderr(&out);
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        for words in [
            format!("`handoff {}` refused you", command[0]),
            who.clone(),
            format!("may not {verb} handoffs"),
            format!("cannot {verb} resource \"handoffs\""),
            format!("in the namespace \"{}\"", s.ns),
        ] {
            assert!(refused.contains(&words), "{words:?} in {refused}");
        }
    }

    // A client certificate cannot be forwarded; --token-file can stand in.
    let cert_only = stderr(&as_person(admin, &["history", "ops/7"]));
    assert!(
        cert_only.contains("client certificate only") && cert_only.contains("--token-file PATH"),
        "{cert_only}"
    );
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &reader_token).expect("write");
    let token_path = token_file.to_str().expect("utf-8");
    assert_eq!(
        stdout(&as_person(
            admin,
            &["history", "ops/7", "--token-file", token_path]
        )),
        direct
    );

    // An unreachable bridge names its URL and the port-forward.
    let gone = stderr(&handoff(
        &reader,
        &[
            "history",
            "ops/7",
            "-n",
            &s.ns,
            "--bridge",
            "http://127.0.0.1:1",
        ],
    ));
    assert!(
        gone.contains(&format!(
            "http://127.0.0.1:1/mcp/ns/{} is unreachable",
            s.ns
        )) && gone.contains("port-forward svc/handoff-bridge"),
        "{gone}"
    );
    // A bridge served over TLS is verified against --bridge-ca-file.
    let certified =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).expect("certificate");
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, certified.cert.pem()).expect("cert");
    std::fs::write(&key, certified.signing_key.serialize_pem()).expect("key");
    let (cert_arg, key_arg) = (cert.display().to_string(), key.display().to_string());
    let tls = common::Bridge::start_with(
        env,
        &s.ns,
        &[
            "--postgres-url",
            &url,
            "--tls-cert",
            &cert_arg,
            "--tls-key",
            &key_arg,
        ],
    );
    assert!(tls.url.starts_with("https://"), "{}", tls.url);
    let over_tls = |extra: &[&str]| {
        let mut all = vec!["history", "ops/7", "-n", &s.ns, "--bridge", &tls.url];
        all.extend(extra);
        handoff(&reader, &all)
    };
    assert_eq!(stdout(&over_tls(&["--bridge-ca-file", &cert_arg])), direct);
    let untrusted = stderr(&over_tls(&[]));
    assert!(untrusted.contains("certificate"), "{untrusted}");

    // Both paths at once: choose one.
    let both = stderr(&handoff(
        &reader,
        &[
            "history",
            "ops/7",
            "-n",
            &s.ns,
            "--bridge",
            &bridge.url,
            "--postgres-url",
            &url,
        ],
    ));
    assert!(both.contains("choose one"), "{both}");
    counter.stop().await;
}
