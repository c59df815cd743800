//! The HTTP bridge under hostile clients, as a separate process against a
//! real apiserver: a flood of invalid tokens while an agent works, one new
//! token on 200 concurrent requests, a 64 MiB body, slowloris and silent
//! connections, an unreachable apiserver, a caller past its fair share
//! and one flooding past `--max-in-flight` beside a quiet one, and TLS with a certificate renewed on disk.
//!
//! Timeouts under test are set small through the bridge's flags; deadlines
//! only bound how long "eventually" may take. Everything stays on 127.0.0.1.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::agents::writer_token;
use common::{apply_agent_roles, env};
use handoff_bridge::fair::OVER_SHARE;
use handoff_bridge::http::{MISSING_TOKEN, REJECTED_TOKEN, UNAVAILABLE};
use handoff_testkit::bench::memory_mib;
use handoff_testkit::http::{
    Answer, addr_of, exchange, exchange_on, flood, mcp_post, metric, scrape, tool_call,
};
use handoff_testkit::rpc::McpHttp;
use handoff_testkit::{BridgeProcess, TestEnv, is_gone};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const REVIEWS_OK: &str = "handoff_mcp_identity_reviews_total{result=\"ok\"}";
const REVIEWS_REJECTED: &str = "handoff_mcp_identity_reviews_total{result=\"rejected\"}";

/// A bridge for `namespace` with its metrics on a free port and `extra` flags.
fn bridge(env: &TestEnv, namespace: &str, extra: &[&str]) -> BridgeProcess {
    bridge_with(env.kubeconfig_path(), namespace, extra)
}

fn bridge_with(kubeconfig: &Path, namespace: &str, extra: &[&str]) -> BridgeProcess {
    let mut args = vec!["--metrics-listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    BridgeProcess::start_with_env(
        Path::new(env!("CARGO_BIN_EXE_handoff")),
        kubeconfig,
        namespace,
        &args,
        &[("RUST_LOG", "warn")],
    )
    .unwrap_or_else(|e| panic!("the bridge did not start: {e:#}"))
}

async fn metrics(bridge: &BridgeProcess) -> String {
    let addr = bridge
        .metrics_addr()
        .expect("the bridge printed its metrics address");
    scrape(&addr)
        .await
        .unwrap_or_else(|e| panic!("metrics: {e:#}"))
}

/// A writer agent (profile `implement`) in `namespace` and its token.
async fn writer(env: &TestEnv, namespace: &str, name: &str) -> String {
    apply_agent_roles(env);
    writer_token(env, namespace, name).await
}

fn get_handoff() -> String {
    tool_call("get_handoff", json!({"handoff_key": "steady"}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_invalid_tokens_is_refused_while_a_valid_agent_keeps_working() {
    const FLOOD: usize = 5_000;
    let env = env();
    let ns = env.namespace("flood").await;
    let token = writer(env, &ns, "agent").await;
    let bridge = bridge(env, &ns, &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let agent = {
        let (url, stop) = (bridge.url().to_owned(), stop.clone());
        tokio::task::spawn_blocking(move || -> anyhow::Result<usize> {
            let mut http = McpHttp::connect(&url, &token, "implement")?;
            let write = json!({"handoff_key": "steady", "project": "flood", "body": "steady body"});
            http.call("write_handoff", write)?;
            let mut calls = 0;
            while !stop.load(Ordering::SeqCst) {
                let got = http.call("get_handoff", json!({"handoff_key": "steady"}))?;
                anyhow::ensure!(got["found"] == json!(true), "get_handoff: {got}");
                calls += 1;
            }
            Ok(calls)
        })
    };
    let addr = addr_of(bridge.url()).expect("address");
    let tally = flood(&addr, FLOOD, 64, |i| {
        format!("junk-token-{i:05}-never-issued")
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    let calls = agent
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("the valid agent got an error during the flood: {e:#}"));

    assert_eq!(tally.failures, 0, "{tally:?}");
    assert_eq!(
        tally.statuses,
        BTreeMap::from([(401, FLOOD)]),
        "every invalid token gets 401"
    );
    assert!(calls > 0, "the valid agent called during the flood");
    assert!(!is_gone(bridge.pid()), "the bridge stays up");
    let text = metrics(&bridge).await;
    let rejected = metric(&text, REVIEWS_REJECTED);
    assert!(
        rejected <= FLOOD as f64,
        "{rejected} reviews for {FLOOD} distinct tokens"
    );
    let peak = memory_mib(bridge.pid(), "VmHWM").expect("the bridge's /proc status");
    eprintln!(
        "flood: {FLOOD} invalid tokens → 401, {rejected} reviews; valid agent: {calls} calls, no error; bridge peak RSS {peak:.0} MiB"
    );
}

/// `n` connections that each send `request` at the same moment.
async fn at_once(addr: &str, n: usize, request: &[u8]) -> Vec<anyhow::Result<Answer>> {
    let start = Arc::new(tokio::sync::Barrier::new(n));
    let requests = (0..n).map(|_| {
        let (start, addr, request) = (start.clone(), addr.to_owned(), request.to_vec());
        tokio::spawn(async move {
            let connected = TcpStream::connect(&addr).await;
            start.wait().await;
            exchange_on(&mut connected?, &request).await
        })
    });
    futures::future::join_all(requests)
        .await
        .into_iter()
        .map(|joined| joined.map_err(anyhow::Error::from).and_then(|a| a))
        .collect()
}

fn statuses(answers: &[anyhow::Result<Answer>]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for answer in answers {
        let key = match answer {
            Ok(a) => a.status.to_string(),
            Err(e) => format!("{e:#}"),
        };
        *counts.entry(key).or_default() += 1;
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_requests_with_one_new_token_make_one_review() {
    const N: usize = 200;
    let env = env();
    let ns = env.namespace("single-flight").await;
    let token = writer(env, &ns, "agent").await;
    // One token on all N requests: one caller, whose share is all of them.
    let bridge = bridge(
        env,
        &ns,
        &[
            "--max-in-flight",
            "1024",
            "--max-in-flight-per-caller",
            "1024",
        ],
    );
    let addr = addr_of(bridge.url()).expect("address");

    let answers = at_once(&addr, N, &mcp_post(&addr, Some(&token), &get_handoff())).await;
    assert_eq!(statuses(&answers), BTreeMap::from([("200".to_owned(), N)]));
    let answers = at_once(
        &addr,
        N,
        &mcp_post(&addr, Some("one-new-junk-token"), &get_handoff()),
    )
    .await;
    assert_eq!(statuses(&answers), BTreeMap::from([("401".to_owned(), N)]));
    assert!(
        answers.iter().flatten().all(|a| a.body == REJECTED_TOKEN),
        "a rejected token gets the fixed text"
    );
    let text = metrics(&bridge).await;
    let (ok, rejected) = (metric(&text, REVIEWS_OK), metric(&text, REVIEWS_REJECTED));
    eprintln!(
        "single flight: {N} requests with a new valid token → {ok} review(s); with a new invalid token → {rejected}"
    );
    assert_eq!(
        ok, 1.0,
        "one review for {N} concurrent requests with one new valid token"
    );
    assert_eq!(
        rejected, 1.0,
        "one review for {N} concurrent requests with one invalid token"
    );
}

/// Sends `head` then `body` in 1 MiB chunks while reading the answer;
/// returns it once complete (the server may close before the body is sent).
async fn answer_while_sending(addr: &str, head: String, chunks: usize, chunked: bool) -> Answer {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut read, mut write) = stream.into_split();
    let sender = tokio::spawn(async move {
        let chunk = vec![b'x'; 1 << 20];
        write.write_all(head.as_bytes()).await?;
        for _ in 0..chunks {
            if chunked {
                write
                    .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                    .await?;
            }
            write.write_all(&chunk).await?;
            if chunked {
                write.write_all(b"\r\n").await?;
            }
        }
        if chunked {
            write.write_all(b"0\r\n\r\n").await?;
        }
        std::io::Result::Ok(())
    });
    let mut received = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        if let Ok(answer) = Answer::parse(&received)
            && answer
                .header("content-length")
                .and_then(|l| l.parse::<usize>().ok())
                .is_some_and(|l| answer.body.len() >= l)
        {
            break answer;
        }
        assert!(
            Instant::now() < deadline,
            "no answer within 60 s: {received:?}"
        );
        let mut buf = [0u8; 4096];
        match tokio::time::timeout(Duration::from_secs(1), read.read(&mut buf)).await {
            Ok(Ok(0)) => break Answer::parse(&received).expect("an answer before the close"),
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
            Ok(Err(e)) => panic!("reading the answer: {e} (got {received:?})"),
            Err(_) => {}
        }
    };
    sender.abort();
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_mib_body_gets_413_without_being_buffered_and_huge_headers_431() {
    const MIB_64: usize = 64;
    const RSS_CEILING_MIB: f64 = 128.0;
    let env = env();
    let ns = env.namespace("big-body").await;
    let token = writer(env, &ns, "agent").await;
    let bridge = bridge(env, &ns, &[]);
    let addr = addr_of(bridge.url()).expect("address");
    let common = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nAuthorization: Bearer {token}\r\n"
    );

    let declared = format!("{common}Content-Length: {}\r\n\r\n", MIB_64 << 20);
    let answer = answer_while_sending(&addr, declared, MIB_64, false).await;
    assert_eq!(answer.status, 413, "declared 64 MiB: {answer:?}");

    let streamed = format!("{common}Transfer-Encoding: chunked\r\n\r\n");
    let answer = answer_while_sending(&addr, streamed, MIB_64, true).await;
    assert_eq!(answer.status, 413, "streamed 64 MiB: {answer:?}");

    let padding = "a".repeat(40 << 10);
    let big_headers = format!("{common}X-Padding: {padding}\r\nContent-Length: 2\r\n\r\n{{}}");
    let answer = answer_while_sending(&addr, big_headers, 0, false).await;
    assert_eq!(answer.status, 431, "40 KiB of headers: {answer:?}");

    let peak = memory_mib(bridge.pid(), "VmHWM").expect("the bridge's /proc status");
    eprintln!("64 MiB bodies (declared, streamed) → 413; bridge peak RSS {peak:.0} MiB");
    assert!(peak < RSS_CEILING_MIB, "bridge peak RSS {peak:.0} MiB");
    let after = exchange(&addr, &mcp_post(&addr, Some(&token), &get_handoff()))
        .await
        .expect("a normal request after");
    assert_eq!(after.status, 200);
}

/// How long until the bridge closes `stream`, dribbling a header byte
/// every 200 ms when `dribble`; `None` if still open at `deadline`.
async fn closed_after(
    mut stream: TcpStream,
    dribble: bool,
    deadline: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    let line = b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
    if dribble
        && stream
            .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .is_err()
    {
        return Some(started.elapsed());
    }
    let mut sent = 0;
    let mut buf = [0u8; 1024];
    while started.elapsed() < deadline {
        if dribble {
            if stream
                .write_all(&line[sent % line.len()..][..1])
                .await
                .is_err()
            {
                return Some(started.elapsed());
            }
            sent += 1;
        }
        let read = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf)).await;
        if let Ok(Ok(0) | Err(_)) = read {
            return Some(started.elapsed());
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_and_silent_connections_are_closed_at_the_header_timeout() {
    let env = env();
    let ns = env.namespace("slowloris").await;
    let bridge = bridge(env, &ns, &["--header-read-timeout", "2s"]);
    let addr = addr_of(bridge.url()).expect("address");
    let deadline = Duration::from_secs(20);
    let dribbling = TcpStream::connect(&addr).await.expect("connect");
    let silent = TcpStream::connect(&addr).await.expect("connect");
    let (dribbling, silent) = tokio::join!(
        closed_after(dribbling, true, deadline),
        closed_after(silent, false, deadline)
    );
    eprintln!(
        "header timeout 2 s: a dribbling client closed after {dribbling:?}, a silent one after {silent:?}"
    );
    assert!(
        dribbling.is_some(),
        "a slowloris connection was still open after {deadline:?}"
    );
    assert!(
        silent.is_some(),
        "a silent connection was still open after {deadline:?}"
    );
}

#[tokio::test]
async fn an_unauthenticated_caller_sees_only_the_fixed_texts() {
    let env = env();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kubeconfig = env.kubeconfig().clone();
    let port = handoff_testkit::process::free_port().expect("port");
    for cluster in &mut kubeconfig.clusters {
        if let Some(c) = cluster.cluster.as_mut() {
            c.server = Some(format!("https://127.0.0.1:{port}"));
        }
    }
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, serde_saphyr::to_string(&kubeconfig).expect("yaml")).expect("write");
    let bridge = bridge_with(&path, "default", &[]);
    let addr = addr_of(bridge.url()).expect("address");

    let unavailable = exchange(&addr, &mcp_post(&addr, Some("some-token"), &get_handoff()))
        .await
        .expect("an answer");
    assert_eq!(unavailable.status, 503);
    assert_eq!(unavailable.header("retry-after"), Some("1"));
    assert_eq!(
        unavailable.body, UNAVAILABLE,
        "only the fixed text, no apiserver wording"
    );
    let missing = exchange(&addr, &mcp_post(&addr, None, &get_handoff()))
        .await
        .expect("an answer");
    assert_eq!(
        (missing.status, missing.body.as_str()),
        (401, MISSING_TOKEN)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_past_a_callers_share_get_429_with_retry_after_while_another_caller_is_served() {
    let env = env();
    let ns = env.namespace("shed").await;
    let token = writer(env, &ns, "agent").await;
    let other = writer(env, &ns, "other").await;
    let bridge = bridge(
        env,
        &ns,
        &[
            "--max-in-flight",
            "2",
            "--max-in-flight-per-caller",
            "1",
            "--max-queued-per-caller",
            "0",
        ],
    );
    let addr = addr_of(bridge.url()).expect("address");
    let request = mcp_post(&addr, Some(&token), &get_handoff());
    let (most, last) = request.split_at(request.len() - 1);

    // One request held in flight: its last body byte is not sent yet.
    let mut held = TcpStream::connect(&addr).await.expect("connect");
    held.write_all(most).await.expect("write");
    let started = Instant::now();
    while metric(
        &metrics(&bridge).await,
        "handoff_mcp_http_requests_in_flight",
    ) < 1.0
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the held request was never in flight"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let shed = exchange(&addr, &request).await.expect("an answer");
    assert_eq!(shed.status, 429, "{shed:?}");
    assert_eq!(shed.header("retry-after"), Some("1"));
    let error: serde_json::Value = serde_json::from_str(&shed.body).expect("a JSON-RPC body");
    assert_eq!(error["id"], 1, "under the request's id: {error}");
    assert_eq!(error["error"]["message"], OVER_SHARE, "{error}");

    let beside = exchange(&addr, &mcp_post(&addr, Some(&other), &get_handoff()))
        .await
        .expect("an answer");
    assert_eq!(beside.status, 200, "another caller is served: {beside:?}");

    let answer = exchange_on(&mut held, last)
        .await
        .expect("the held request's answer");
    assert_eq!(answer.status, 200, "the held request is served: {answer:?}");
    let after = exchange(&addr, &request).await.expect("an answer");
    assert_eq!(after.status, 200, "the share comes back");
    let text = metrics(&bridge).await;
    assert_eq!(
        metric(
            &text,
            "handoff_mcp_http_refusals_total{reason=\"over_share\"}"
        ),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_flooding_past_max_in_flight_never_gets_another_caller_refused() {
    const GREEDY: usize = 64;
    const FLOOD: Duration = Duration::from_secs(4);
    let env = env();
    let ns = env.namespace("fair").await;
    let greedy = writer(env, &ns, "greedy").await;
    let quiet = writer(env, &ns, "quiet").await;
    let bridge = bridge(
        env,
        &ns,
        &[
            "--max-in-flight",
            "16",
            "--max-in-flight-per-caller",
            "4",
            "--max-queued-per-caller",
            "8",
        ],
    );
    let addr = addr_of(bridge.url()).expect("address");

    let stop = Arc::new(AtomicBool::new(false));
    let flooders: Vec<_> = (0..GREEDY)
        .map(|i| {
            let (addr, stop) = (addr.clone(), stop.clone());
            let write = tool_call(
                "write_handoff",
                json!({"handoff_key": format!("greedy-{i}"), "project": "fair", "body": "flood"}),
            );
            let request = mcp_post(&addr, Some(&greedy), &write);
            tokio::spawn(async move {
                let mut answers = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    answers.push(exchange(&addr, &request).await);
                }
                answers
            })
        })
        .collect();

    let started = Instant::now();
    let request = mcp_post(&addr, Some(&quiet), &get_handoff());
    let mut quiet_calls = 0;
    while started.elapsed() < FLOOD {
        let answer = exchange(&addr, &request).await.expect("an answer");
        assert_eq!(
            answer.status, 200,
            "the quiet caller was refused during the flood: {answer:?}"
        );
        let body: serde_json::Value = serde_json::from_str(&answer.body).expect("JSON-RPC");
        assert!(
            body.get("result").is_some(),
            "the quiet caller's call failed: {body}"
        );
        quiet_calls += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let mut greedy_statuses = BTreeMap::new();
    let (mut over_share, mut stored) = (0, 0);
    for flooder in flooders {
        for answer in flooder.await.expect("join") {
            let answer = answer.expect("an answer to the greedy caller");
            *greedy_statuses.entry(answer.status).or_insert(0usize) += 1;
            if answer.status == 200 {
                let body: serde_json::Value =
                    serde_json::from_str(&answer.body).expect("a JSON-RPC body");
                stored += usize::from(body["result"]["isError"] != json!(true));
            }
            if answer.status == 429 {
                assert_eq!(answer.header("retry-after"), Some("1"), "{answer:?}");
                let error: serde_json::Value =
                    serde_json::from_str(&answer.body).expect("a JSON-RPC body");
                assert_eq!(error["error"]["message"], OVER_SHARE, "{error}");
                assert_eq!(error["id"], 1, "{error}");
                over_share += 1;
            }
        }
    }
    eprintln!(
        "fair share: the quiet caller made {quiet_calls} calls, all served; the greedy one's answers by status: {greedy_statuses:?}, {stored} writes stored"
    );
    assert!(quiet_calls > 0, "the quiet caller made no call");
    assert!(
        over_share > 0,
        "the greedy caller was never told it is over its share: {greedy_statuses:?}"
    );
    assert!(
        stored > 0,
        "the greedy caller's writes within its share are stored: {greedy_statuses:?}, {stored} stored"
    );
}

/// A throwaway CA and serving certificates it signs for localhost.
struct Pki {
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    fn new() -> Self {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name = named("handoff test CA");
        let ca_pem = params.self_signed(&key).expect("CA").pem();
        Self {
            ca_pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A serving certificate and key (PEM) and the certificate's DER.
    fn serving(&self) -> (String, String, Vec<u8>) {
        let key = KeyPair::generate().expect("key");
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                .expect("params");
        params.distinguished_name = named("handoff-bridge");
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        (cert.pem(), key.serialize_pem(), cert.der().to_vec())
    }
}

fn named(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

/// A TLS client trusting only `ca_pem`; without session resumption, so
/// every connection is a full handshake that shows the served certificate.
fn trusting(ca_pem: &str) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("CA");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocols")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// One request over a new TLS connection; the answer and the server's certificate.
async fn https(
    connector: &tokio_rustls::TlsConnector,
    addr: &str,
    request: &[u8],
) -> anyhow::Result<(Answer, Vec<u8>)> {
    let tcp = TcpStream::connect(addr).await?;
    let mut tls = connector
        .connect(ServerName::try_from("localhost")?, tcp)
        .await?;
    let served = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|cert| cert.as_ref().to_vec())
        .unwrap_or_default();
    Ok((exchange_on(&mut tls, request).await?, served))
}

/// Replaces a file at once, as the kubelet swaps a Secret volume.
fn replace(path: &Path, text: &str) {
    let staged = path.with_extension("staged");
    std::fs::write(&staged, text).expect("write");
    std::fs::rename(&staged, path).expect("rename");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_serves_mcp_and_new_connections_see_a_renewed_certificate() {
    let env = env();
    let ns = env.namespace("tls").await;
    let token = writer(env, &ns, "agent").await;
    let pki = Pki::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let (cert, key, first) = pki.serving();
    replace(&cert_path, &cert);
    replace(&key_path, &key);
    let (cert_arg, key_arg) = (
        cert_path.display().to_string(),
        key_path.display().to_string(),
    );
    let bridge = bridge(
        env,
        &ns,
        &[
            "--tls-cert",
            &cert_arg,
            "--tls-key",
            &key_arg,
            "--tls-reload-interval",
            "200ms",
        ],
    );
    assert!(bridge.url().starts_with("https://"), "{}", bridge.url());
    let addr = addr_of(bridge.url()).expect("address");
    let connector = trusting(&pki.ca_pem);
    let write = tool_call(
        "write_handoff",
        json!({"handoff_key": "steady", "project": "tls", "body": "over https"}),
    );
    let (answer, served) = https(&connector, &addr, &mcp_post(&addr, Some(&token), &write))
        .await
        .unwrap_or_else(|e| panic!("https: {e:#}"));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.body.contains("\"isError\":false"), "{}", answer.body);
    assert_eq!(served, first, "the first certificate serves");
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, &pki.ca_pem).expect("write the CA");
    let example = std::process::Command::new(common::python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mcp/https_client.py"))
        .arg(bridge.url())
        .env("HANDOFF_TOKEN", &token)
        .env("HANDOFF_CA_FILE", &ca_file)
        .output()
        .expect("python runs");
    let listed = String::from_utf8_lossy(&example.stdout);
    assert!(
        example.status.success() && listed.contains("get_handoff"),
        "examples/mcp/https_client.py: {listed}\n{}",
        String::from_utf8_lossy(&example.stderr)
    );
    let untrusted = https(
        &trusting(&Pki::new().ca_pem),
        &addr,
        &mcp_post(&addr, Some(&token), &get_handoff()),
    )
    .await;
    let Err(untrusted) = untrusted else {
        panic!("a client that does not trust the CA is refused");
    };
    let reason = format!("{untrusted:#}");
    assert!(
        reason.contains("invalid peer certificate"),
        "refused for its trust, not for another reason: {reason}"
    );

    let (cert, key, renewed) = pki.serving();
    replace(&key_path, &key);
    replace(&cert_path, &cert);
    let started = Instant::now();
    loop {
        let (answer, served) = https(
            &connector,
            &addr,
            &mcp_post(&addr, Some(&token), &get_handoff()),
        )
        .await
        .unwrap_or_else(|e| panic!("https during the renewal: {e:#}"));
        assert_eq!(answer.status, 200, "{answer:?}");
        if served == renewed {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "new connections still see the old certificate after 30 s; bridge log:\n{}",
            bridge.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "https: renewed certificate served to new connections after {:?}",
        started.elapsed()
    );
}
