//! TLS to the mirror, against a real PostgreSQL with `ssl=on`, a serving
//! certificate for `localhost` only from a throwaway CA, and TCP clients
//! let in over TLS only (`hostssl`, so every connection that succeeds is
//! encrypted): each `sslmode` connects or is refused as libpq's would, and
//! a refusal names its reason; the controller process mirrors over
//! `verify-full` with its URL read from a file; a wrong `sslmode` stops the
//! controller and the bridge at start with one line. The password in the
//! URLs never shows in an error, a log line or the metrics.

use crate::common;
use handoff_testkit::spec::{Fields, spec};
use handoff_testkit::wait::eventually;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use handoff_kube::store::HandoffStore;
use handoff_local::ServerTls;
use handoff_mirror::Mirror;
use handoff_testkit::{ControllerProcess, Postgres};

/// The password of every URL here (trust authentication ignores it).
const PASSWORD: &str = "pw-never-shown";

async fn start(tls: bool) -> (Postgres, Option<PathBuf>) {
    tokio::task::spawn_blocking(move || {
        if tls {
            Postgres::start_tls(&["localhost"]).map(|(pg, ca)| (pg, Some(ca)))
        } else {
            Postgres::start().map(|pg| (pg, None))
        }
    })
    .await
    .expect("join")
    .unwrap_or_else(|e| panic!("PostgreSQL (TLS: {tls}) could not start: {e:#}"))
}

/// The CA certificate of a CA that signed nothing the server has.
fn unrelated_ca(dir: &Path) -> PathBuf {
    let path = dir.join("unrelated-ca.crt");
    let tls = ServerTls::generate("unrelated-ca", &["localhost"]).expect("a CA");
    std::fs::write(&path, tls.ca_cert).expect("write the CA");
    path
}

/// One connection through the mirror, and a statement on it.
async fn connect(url: &str) -> Result<(), String> {
    let mirror = Mirror::new(url, true).map_err(|e| e.to_string())?;
    mirror
        .versions(Some("mirror-tls"))
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_sslmode_connects_or_is_refused_naming_the_reason() {
    let ((tls, ca), (plain, _)) = tokio::join!(start(true), start(false));
    let ca = ca.expect("the CA of the TLS server");
    let dir = tempfile::tempdir().expect("tempdir");
    let other = unrelated_ca(dir.path());
    let url = |pg: &Postgres, host: &str, query: String| {
        format!(
            "postgres://postgres:{PASSWORD}@{host}:{}/postgres?{query}",
            pg.port()
        )
    };
    let root = |mode: &str, ca: &Path| format!("sslmode={mode}&sslrootcert={}", ca.display());
    // (server, host, query, None = connects / Some(what the error names))
    let cases: Vec<(&Postgres, &str, String, Option<&[&str]>)> = vec![
        (&tls, "localhost", root("verify-full", &ca), None),
        (
            &tls,
            "127.0.0.1",
            root("verify-full", &ca),
            Some(&[
                "sslmode=verify-full",
                "certificate not valid for name \"127.0.0.1\"",
            ]),
        ),
        // verify-ca checks the chain, not the name.
        (&tls, "127.0.0.1", root("verify-ca", &ca), None),
        (
            &tls,
            "localhost",
            root("verify-full", &other),
            Some(&[
                "sslmode=verify-full",
                "invalid peer certificate: UnknownIssuer",
            ]),
        ),
        (
            &tls,
            "localhost",
            root("verify-ca", &other),
            Some(&[
                "sslmode=verify-ca",
                "invalid peer certificate: UnknownIssuer",
            ]),
        ),
        // require encrypts without verifying ...
        (&tls, "127.0.0.1", "sslmode=require".into(), None),
        // ... unless given a root certificate: then it is verify-ca (libpq).
        (
            &tls,
            "127.0.0.1",
            root("require", &other),
            Some(&["sslmode=require", "UnknownIssuer"]),
        ),
        (&tls, "127.0.0.1", "sslmode=prefer".into(), None),
        // The TLS server refuses plaintext: the connections above were TLS.
        (
            &tls,
            "127.0.0.1",
            "sslmode=disable".into(),
            Some(&["sslmode=disable", "no pg_hba.conf entry", "no encryption"]),
        ),
        (
            &plain,
            "127.0.0.1",
            "sslmode=require".into(),
            Some(&["sslmode=require", "server does not support TLS"]),
        ),
        (
            &plain,
            "localhost",
            root("verify-full", &ca),
            Some(&["sslmode=verify-full", "server does not support TLS"]),
        ),
        // prefer falls back to plaintext when the server has no TLS.
        (&plain, "127.0.0.1", "sslmode=prefer".into(), None),
    ];
    for (pg, host, query, refused) in cases {
        let url = url(pg, host, query);
        let got = connect(&url).await;
        match (refused, got) {
            (None, Ok(())) => {}
            (None, Err(err)) => panic!("{url}: refused: {err}"),
            (Some(_), Ok(())) => panic!("{url}: connected"),
            (Some(reasons), Err(err)) => {
                for reason in reasons {
                    assert!(err.contains(reason), "{url}: `{reason}` not in: {err}");
                }
                assert!(!err.contains(PASSWORD), "{err}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_process_mirrors_over_verify_full_with_its_url_from_a_file() {
    let env = common::env();
    let ns = env.namespace("mirror-tls").await;
    let (pg, ca) = start(true).await;
    let ca = ca.expect("the CA of the TLS server");
    let url = format!(
        "postgres://postgres:{PASSWORD}@localhost:{}/postgres?sslmode=verify-full&sslrootcert={}",
        pg.port(),
        ca.display()
    );
    // As a mounted Secret: the URL in a file, with a trailing newline.
    let dir = tempfile::tempdir().expect("tempdir");
    let dsn = dir.path().join("dsn");
    std::fs::write(&dsn, format!("{url}\n")).expect("write the DSN");
    let kubeconfig = env.kubeconfig_path().to_owned();
    let namespace = ns.clone();
    let controller = tokio::task::spawn_blocking(move || {
        ControllerProcess::start_with_env(
            Path::new(env!("CARGO_BIN_EXE_handoff")),
            &kubeconfig,
            &namespace,
            "tls",
            &["--postgres-url-file", &dsn.display().to_string()],
            &[("RUST_LOG", "info")],
        )
    })
    .await
    .expect("join")
    .unwrap_or_else(|e| panic!("the controller starts: {e:#}"));

    HandoffStore::new(env.client().await, &ns)
        .write(&spec("tls#1").body("mirrored over verify-full").by("writer"))
        .await
        .expect("write");
    let mirror = Mirror::new(&url, false).expect("mirror");
    eventually("the row, over TLS", Duration::from_secs(60), || async {
        let rows = mirror.versions(Some(&ns)).await.ok()?;
        rows.iter().any(|r| r.handoff_key == "tls#1").then_some(())
    })
    .await;

    let log = controller.log();
    assert!(
        log.contains(&format!(
            "postgres://postgres:***@localhost:{}/postgres?sslmode=verify-full",
            pg.port()
        )),
        "the controller logs the URL it mirrors into, redacted: {log}"
    );
    let addr = controller.metrics_addr().to_owned();
    let metrics = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
        write!(
            stream,
            "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read");
        answer
    })
    .await
    .expect("join");
    assert!(metrics.contains("handoff_controller_"), "{metrics}");
    for (what, text) in [("log", &log), ("metrics", &metrics)] {
        assert!(!text.contains(PASSWORD), "the password is in the {what}");
    }
}

#[test]
fn a_wrong_sslmode_stops_the_controller_and_the_bridge_at_start_with_one_line() {
    let expected = |origin: &str| {
        format!(
            "handoff: invalid sslmode \"bogus\" in {origin}: expected one of disable, prefer, require, verify-ca, verify-full\n"
        )
    };
    let in_url = format!("postgres://handoff:{PASSWORD}@localhost:5432/handoff?sslmode=bogus");
    let plain_url = format!("postgres://handoff:{PASSWORD}@localhost:5432/handoff");
    type Vars<'a> = Vec<(&'static str, &'a str)>;
    // (arguments, environment, what it says)
    let cases: [(&[&str], Vars, String); 4] = [
        (
            &["controller"],
            vec![("DATABASE_URL", &in_url)],
            expected("the PostgreSQL URL"),
        ),
        (
            &["controller"],
            vec![("HANDOFF_POSTGRES_URL", &plain_url), ("PGSSLMODE", "bogus")],
            expected("PGSSLMODE"),
        ),
        (
            &["mcp", "--stdio"],
            vec![("HANDOFF_POSTGRES_URL", &in_url)],
            expected("the PostgreSQL URL"),
        ),
        (
            &["mcp", "--listen", "127.0.0.1:0"],
            vec![("HANDOFF_POSTGRES_URL", &in_url)],
            expected("the PostgreSQL URL"),
        ),
    ];
    for (args, vars, says) in cases {
        // No cluster: the URL is checked before anything else.
        let out = Command::new(env!("CARGO_BIN_EXE_handoff"))
            .args(args)
            .env_remove("DATABASE_URL")
            .env_remove("HANDOFF_POSTGRES_URL")
            .env_remove("PGSSLMODE")
            .env_remove("PGSSLROOTCERT")
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .envs(vars.iter().copied())
            .stdin(Stdio::null())
            .output()
            .expect("handoff runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} {vars:?}: {stderr}");
        assert_eq!(stderr, says, "{args:?} {vars:?}");
        assert!(!stderr.contains(PASSWORD), "{stderr}");
    }
}
