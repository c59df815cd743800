//! The console's front doors and guards, over plain HTTP against the real
//! `handoff console` and a real kube-apiserver: what a browser does is
//! written out request by request, so every header the console answers
//! can be read.

use handoff_testkit::ConsoleProcess;
use handoff_testkit::http::{Answer, addr_of, exchange};

/// `handoff console` in laptop mode, as the shared plane's admin.
fn laptop() -> ConsoleProcess {
    let env = handoff_testkit::shared();
    ConsoleProcess::laptop(
        std::path::Path::new(env!("CARGO_BIN_EXE_handoff")),
        env.kubeconfig_path(),
        &[],
    )
    .unwrap_or_else(|e| panic!("handoff console (laptop) did not start: {e:#}"))
}

/// A GET of `path` with `Host: host` and these extra header lines.
async fn get(console: &ConsoleProcess, host: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let addr = addr_of(console.url()).expect("the console's address");
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    exchange(&addr, request.as_bytes())
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e:#}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_one_time_link_signs_in_once() {
    let console = laptop();
    let host = addr_of(console.url()).expect("address");
    let path = console
        .login_url()
        .split_once(&host)
        .map(|(_, path)| path.to_owned())
        .expect("the link's path");
    let first = get(&console, &host, &path, &[]).await;
    assert_eq!(first.status, 303, "{first:?}");
    assert_eq!(first.header("location"), Some("/"));
    let second = get(&console, &host, &path, &[]).await;
    assert_eq!(second.status, 401, "{second:?}");
}
