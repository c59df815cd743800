//! `handoff webhook` as the apiserver meets it, over HTTPS on loopback: an
//! `AdmissionReview` for a twin is answered `allowed: false` with code 422
//! and the message naming the key's name; an honest one is allowed, with
//! the request's uid; a certificate rotated in place (as cert-manager
//! renews the mounted Secret) is served without a restart; reviews on a
//! kept-alive connection and on new ones are each answered (their latency
//! is `benches/admission.rs`). The kubectl paths are in `install.rs` (config/default)
//! and `harness.rs` (`handoff dev`).

use std::path::Path;
use std::time::Duration;

use handoff_core::api::naming::name_for_key;
use handoff_testkit::WebhookProcess;
use handoff_testkit::admission::{connect, post, review};
use handoff_testkit::wait::eventually;
use serde_json::json;

fn start() -> WebhookProcess {
    WebhookProcess::start(Path::new(env!("CARGO_BIN_EXE_handoff")))
        .unwrap_or_else(|e| panic!("handoff webhook: {e:#}"))
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
    eventually(
        "the renewed certificate served",
        Duration::from_secs(30),
        || async {
            connect(&webhook.addr(), webhook.ca_pem())
                .await
                .map(drop)
                .map_err(|err| format!("{err:#}\n{}", webhook.log()))
        },
    )
    .await;
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

/// Reviews on one kept-alive connection, and on a new connection each,
/// are each answered with their own uid (the latency of both is
/// `benches/admission.rs`).
#[tokio::test]
async fn reviews_on_a_kept_alive_connection_and_on_new_ones_are_each_answered() {
    let webhook = start();
    let key = "acme/api#42";
    let honest = |uid: &str| review(uid, &name_for_key(key), key, &"state: fine\n".repeat(200));
    let mut stream = connect(&webhook.addr(), webhook.ca_pem())
        .await
        .expect("TLS");
    for i in 0..50 {
        let uid = format!("kept-{i}");
        let (status, answer) = post(&mut stream, &honest(&uid)).await.expect("answered");
        assert_eq!(status, 200);
        assert_eq!(answer["response"]["uid"], json!(uid));
        assert_eq!(answer["response"]["allowed"], json!(true), "{answer}");
    }
    for i in 0..10 {
        let uid = format!("new-{i}");
        let mut stream = connect(&webhook.addr(), webhook.ca_pem())
            .await
            .expect("TLS");
        let (_, answer) = post(&mut stream, &honest(&uid)).await.expect("answered");
        assert_eq!(answer["response"]["uid"], json!(uid));
        assert_eq!(answer["response"]["allowed"], json!(true), "{answer}");
    }
}
