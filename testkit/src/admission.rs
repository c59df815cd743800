//! `handoff webhook` as the apiserver meets it: an `AdmissionReview` for a
//! Handoff, POSTed over TLS trusting only the webhook's CA, for the
//! admission suite's assertions and the latency bench alike.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A TLS connection to `addr` (on loopback) trusting only `ca_pem`.
pub async fn connect(addr: &str, ca_pem: &str) -> anyhow::Result<TlsStream<TcpStream>> {
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

/// The AdmissionReview the apiserver sends for a CREATE of a Handoff
/// named `name` holding `key` and `body`, by `mallory` in `team-a`.
pub fn review(uid: &str, name: &str, key: &str, body: &str) -> Value {
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

/// POSTs `review` on `stream` (kept alive) and reads one answer:
/// `(status, body)`.
pub async fn post(
    stream: &mut TlsStream<TcpStream>,
    review: &Value,
) -> anyhow::Result<(u16, Value)> {
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
