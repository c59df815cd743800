//! `handoff webhook` as the apiserver meets it, over HTTPS on loopback: an
//! `AdmissionReview` for a twin is answered `allowed: false` with code 422
//! and the message naming the key's name; an honest one is allowed, with
//! the request's uid; a certificate rotated in place (as cert-manager
//! renews the mounted Secret) is served without a restart; and the
//! latency of a review (printed: p50/p99, a kept-alive connection and a
//! new one per review). The kubectl paths are in `install.rs` (config/default)
//! and `harness.rs` (`handoff dev`).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use handoff_core::api::naming::name_for_key;
use handoff_testkit::WebhookProcess;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

fn start() -> WebhookProcess {
    WebhookProcess::start(Path::new(env!("CARGO_BIN_EXE_handoff")))
        .unwrap_or_else(|e| panic!("handoff webhook: {e:#}"))
}

/// A TLS connection to `addr` trusting only `ca_pem`.
async fn connect(addr: &str, ca_pem: &str) -> anyhow::Result<TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("127.0.0.1")?;
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await?)
}

/// The AdmissionReview the apiserver sends for a CREATE of a Handoff.
fn review(uid: &str, name: &str, key: &str, body: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "handoff.dev", "version": "v1alpha1", "kind": "Handoff"},
            "resource": {"group": "handoff.dev", "version": "v1alpha1", "resource": "handoffs"},
            "name": name,
            "namespace": "team-a",
            "operation": "CREATE",
            "userInfo": {"username": "mallory"},
            "object": {
                "apiVersion": "handoff.dev/v1alpha1", "kind": "Handoff",
                "metadata": {"name": name, "namespace": "team-a"},
                "spec": {"handoffKey": key, "project": "shop", "body": body}
            },
            "oldObject": null,
            "dryRun": false
        }
    })
}

/// POSTs `review` on `stream` (kept alive) and reads one answer.
async fn post(stream: &mut TlsStream<TcpStream>, review: &Value) -> anyhow::Result<(u16, Value)> {
    let body = review.to_string();
    let request = format!(
        "POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = stream.read(&mut chunk).await?;
        anyhow::ensure!(n > 0, "closed before an answer");
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| anyhow::anyhow!("no content-length: {head}"))?;
        if buf.len() < end + 4 + length {
            continue;
        }
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_default();
        let answer = serde_json::from_slice(&buf[end + 4..end + 4 + length])?;
        return Ok((status, answer));
    }
}

#[tokio::test]
async fn a_twin_is_refused_by_reason_and_an_honest_write_allowed() {
    let webhook = start();
    let mut stream = connect(&webhook.addr(), webhook.ca_pem())
        .await
        .expect("TLS with the webhook's CA");
    let key = "acme/api#42";
    let derived = name_for_key(key);

    let (status, twin) = post(&mut stream, &review("uid-1", "my-twin", key, "x"))
        .await
        .expect("answered");
    assert_eq!(status, 200);
    let response = &twin["response"];
    assert_eq!(twin["kind"], json!("AdmissionReview"), "{twin}");
    assert_eq!(response["uid"], json!("uid-1"));
    assert_eq!(response["allowed"], json!(false), "{twin}");
    assert_eq!(response["status"]["code"], json!(422), "{twin}");
    let message = response["status"]["message"].as_str().expect("message");
    for part in [
        "\"my-twin\"",
        "\"acme/api#42\"",
        &derived,
        "handoff name 'acme/api#42'",
    ] {
        assert!(message.contains(part), "{part} not in {message}");
    }

    let (_, escaped) = post(&mut stream, &review("uid-2", &derived, key, "a\u{1b}[2Kb"))
        .await
        .expect("answered");
    let message = escaped["response"]["status"]["message"]
        .as_str()
        .expect("message");
    assert!(
        message.contains("spec.body") && message.contains("U+001B (ESC) at line 1, column 2"),
        "{message}"
    );

    let (_, honest) = post(&mut stream, &review("uid-3", &derived, key, "state: ok"))
        .await
        .expect("answered on the same connection");
    assert_eq!(honest["response"]["uid"], json!("uid-3"));
    assert_eq!(honest["response"]["allowed"], json!(true), "{honest}");
}

#[tokio::test]
async fn a_certificate_rotated_in_place_is_served_without_a_restart() {
    let mut webhook = start();
    let old_ca = webhook.ca_pem().to_owned();
    connect(&webhook.addr(), &old_ca)
        .await
        .expect("the first certificate");
    webhook.rotate().expect("rotate");
    // The webhook looks at its files every 100 ms: wait (bounded) for the
    // handshake to present the renewed certificate.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match connect(&webhook.addr(), webhook.ca_pem()).await {
            Ok(_) => break,
            Err(err) => assert!(
                Instant::now() < deadline,
                "the renewed certificate was not served: {err:#}\n{}",
                webhook.log()
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        connect(&webhook.addr(), &old_ca).await.is_err(),
        "the old certificate is no longer served"
    );
    assert!(
        webhook
            .log()
            .contains("serving the renewed TLS certificate"),
        "{}",
        webhook.log()
    );
}

/// Prints the latency of one review over loopback (no bound: a figure for
/// the report, not a test of speed).
#[tokio::test]
async fn the_latency_of_a_review_over_loopback() {
    const N: usize = 500;
    let webhook = start();
    let key = "acme/api#42";
    let honest = review("uid", &name_for_key(key), key, &"state: fine\n".repeat(200));
    let mut stream = connect(&webhook.addr(), webhook.ca_pem())
        .await
        .expect("TLS");
    let mut kept = Vec::with_capacity(N);
    for _ in 0..N {
        let started = Instant::now();
        let (_, answer) = post(&mut stream, &honest).await.expect("answered");
        kept.push(started.elapsed());
        assert_eq!(answer["response"]["allowed"], json!(true));
    }
    let mut fresh = Vec::with_capacity(N / 5);
    for _ in 0..N / 5 {
        let started = Instant::now();
        let mut stream = connect(&webhook.addr(), webhook.ca_pem())
            .await
            .expect("TLS");
        post(&mut stream, &honest).await.expect("answered");
        fresh.push(started.elapsed());
    }
    let (p50, p99) = handoff_testkit::bench::median_p99(&mut kept);
    let (h50, h99) = handoff_testkit::bench::median_p99(&mut fresh);
    println!(
        "admission review over loopback: kept-alive p50 {p50:.0} µs p99 {p99:.0} µs; \
         new TLS connection per review p50 {h50:.0} µs p99 {h99:.0} µs"
    );
}
