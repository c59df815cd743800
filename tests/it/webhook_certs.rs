//! The admission webhook's self-managed certificate (config/default's mode)
//! against the real apiserver: `handoff webhook` processes on loopback with
//! the admin's kubeconfig, registered through config/webhook's
//! configuration pointed at their URL with an empty caBundle (each test's
//! own configuration, limited to its namespace, so other suites on the
//! shared plane never meet it). No Secret is made and no caBundle written
//! by the test: a fresh install reaches serving on its own, admits an
//! honest write and refuses a twin; a forced rotation (seconds-long
//! lifetimes, a CA rotation included) refuses no write; two replicas racing
//! on a missing Secret end with one Secret both serve.

use std::time::Duration;

use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_testkit::admission::connect;
use handoff_testkit::wait::eventually;
use handoff_testkit::{ManagedWebhookProcess, TestEnv};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::json;

use crate::common::env;

const SECRET: &str = "handoff-webhook-tls";

/// config/webhook's configuration, named `name`, pointed at `url` with no
/// caBundle, for writes in `ns` only.
async fn register(env: &TestEnv, name: &str, ns: &str, url: &str) {
    let mut configuration =
        handoff_webhook::registration::configuration().expect("config/webhook parses");
    handoff_webhook::registration::point_at(&mut configuration, url, None).expect("points");
    configuration["metadata"]["name"] = json!(name);
    configuration["webhooks"][0]["namespaceSelector"] =
        json!({"matchLabels": {"kubernetes.io/metadata.name": ns}});
    let configuration: ValidatingWebhookConfiguration =
        serde_json::from_value(configuration).expect("a configuration");
    let api: Api<ValidatingWebhookConfiguration> = Api::all(env.client().await);
    let _ = api.delete(name, &DeleteParams::default()).await;
    api.create(&PostParams::default(), &configuration)
        .await
        .expect("register the webhook");
}

fn start(env: &TestEnv, ns: &str, configuration: &str, extra: &[&str]) -> ManagedWebhookProcess {
    ManagedWebhookProcess::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_handoff")),
        env.kubeconfig_path(),
        ns,
        configuration,
        extra,
    )
    .unwrap_or_else(|e| panic!("handoff webhook: {e:#}"))
}

fn handoff(ns: &str, name: &str, key: &str, body: &str) -> Handoff {
    serde_json::from_value(json!({
        "apiVersion": "handoff.dev/v1alpha1", "kind": "Handoff",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"handoffKey": key, "project": "shop", "body": body}
    }))
    .expect("a Handoff")
}

/// The Secret's `key`, as text.
async fn secret_text(secrets: &Api<Secret>, key: &str) -> Option<String> {
    let secret = secrets.get_opt(SECRET).await.ok()??;
    let bytes = secret.data?.get(key)?.0.clone();
    String::from_utf8(bytes).ok()
}

/// The caBundle of the configuration's webhook, as text.
async fn injected(env: &TestEnv, name: &str) -> Option<String> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(env.client().await);
    let configuration = api.get(name).await.ok()?;
    let bundle = configuration
        .webhooks?
        .first()?
        .client_config
        .ca_bundle
        .clone()?;
    String::from_utf8(bundle.0).ok()
}

/// The leaf the webhook at `addr` presents to a client trusting `ca_pem`.
async fn presented(addr: &str, ca_pem: &str) -> Result<Vec<u8>, String> {
    let stream = connect(addr, ca_pem).await.map_err(|e| format!("{e:#}"))?;
    let (_, session) = stream.get_ref();
    session
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|c| c.as_ref().to_vec())
        .ok_or_else(|| "no certificate presented".to_owned())
}

fn der_of(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .expect("a PEM certificate")
        .as_ref()
        .to_vec()
}

/// Creates honest handoffs until one is admitted (the webhook issues its
/// certificate and injects its CA first).
async fn until_admitted(handoffs: &Api<Handoff>, ns: &str, log: impl Fn() -> String) {
    let log = &log;
    let mut attempt = 0;
    eventually(
        "an honest write admitted by the self-managed webhook",
        Duration::from_secs(60),
        || {
            attempt += 1;
            let key = format!("acme/first#{attempt}");
            let object = handoff(ns, &name_for_key(&key), &key, "state: first");
            async move {
                handoffs
                    .create(&PostParams::default(), &object)
                    .await
                    .map(drop)
                    .map_err(|e| format!("{e}\n{}", log()))
            }
        },
    )
    .await;
}

/// A twin (a name not derived from its key) is refused by the webhook, by
/// reason: 422 naming the key's own name.
async fn assert_twin_refused(handoffs: &Api<Handoff>, ns: &str) {
    let key = "acme/api#42";
    let twin = handoff(ns, "my-twin", key, "state: twin");
    match handoffs.create(&PostParams::default(), &twin).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(
                status.message.contains("validate.handoff.dev")
                    && status.message.contains(&name_for_key(key)),
                "refused by the webhook, naming the key's name: {}",
                status.message
            );
        }
        other => panic!("the twin was not refused by the webhook: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_self_managed_install_serves_admits_honest_writes_and_refuses_a_twin() {
    let env = env();
    let ns = env.namespace("certs-fresh").await;
    let configuration = format!("handoff-webhook-{ns}");
    let webhook = start(env, &ns, &configuration, &[]);
    register(env, &configuration, &ns, webhook.url()).await;
    let client = env.client().await;
    let handoffs: Api<Handoff> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client, &ns);

    until_admitted(&handoffs, &ns, || webhook.log()).await;
    assert_twin_refused(&handoffs, &ns).await;

    let secret = secrets
        .get(SECRET)
        .await
        .expect("the webhook made its Secret");
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let bundle = secret_text(&secrets, "ca.crt").await.expect("ca.crt");
    assert_eq!(bundle.matches("BEGIN CERTIFICATE").count(), 1, "{bundle}");
    assert_eq!(
        injected(env, &configuration).await.as_deref(),
        Some(bundle.as_str()),
        "the Secret's CA is the caBundle"
    );
    let leaf = secret_text(&secrets, "tls.crt").await.expect("tls.crt");
    assert_eq!(
        presented(&webhook.addr(), &bundle).await.expect("TLS"),
        der_of(&leaf),
        "the webhook serves the Secret's certificate"
    );
    let api: Api<ValidatingWebhookConfiguration> = Api::all(env.client().await);
    let _ = api.delete(&configuration, &DeleteParams::default()).await;
}

/// Lifetimes short enough to see, within seconds, leaf renewals and a CA
/// rotation: the CA lives 20 s and starts rotating 8 s before it expires
/// (so the old CA, kept until it expires, is retired before the next
/// rotation starts), the leaf lives 6 s and is renewed 3 s before.
const SHORT: [&str; 8] = [
    "--cert-validity",
    "6s",
    "--cert-renew-before",
    "3s",
    "--ca-validity",
    "20s",
    "--ca-renew-before",
    "8s",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_rotation_of_the_leaf_and_the_ca_refuses_no_write() {
    let env = env();
    let ns = env.namespace("certs-rotate").await;
    let configuration = format!("handoff-webhook-{ns}");
    let webhook = start(env, &ns, &configuration, &SHORT);
    register(env, &configuration, &ns, webhook.url()).await;
    let client = env.client().await;
    let handoffs: Api<Handoff> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client, &ns);
    until_admitted(&handoffs, &ns, || webhook.log()).await;

    let first_leaf = secret_text(&secrets, "tls.crt").await.expect("tls.crt");
    let first_ca = secret_text(&secrets, "issuer.crt")
        .await
        .expect("issuer.crt");
    let (mut leaves, mut bundles_of_two, mut writes, mut refused) = (1, 0, 0, Vec::new());
    let mut last_leaf = first_leaf.clone();
    // Writes go on, one after another, until the CA has been replaced and
    // the old one retired (the bundle back to one CA), and the leaf renewed
    // from the new CA at least once more.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let key = format!("acme/rotate#{writes}");
        writes += 1;
        let object = handoff(&ns, &name_for_key(&key), &key, "state: rotating");
        if let Err(err) = handoffs.create(&PostParams::default(), &object).await {
            refused.push(format!("write {writes}: {err}"));
        }
        let leaf = secret_text(&secrets, "tls.crt").await.expect("tls.crt");
        if leaf != last_leaf {
            leaves += 1;
            last_leaf = leaf;
        }
        let bundle = secret_text(&secrets, "ca.crt").await.expect("ca.crt");
        if bundle.matches("BEGIN CERTIFICATE").count() >= 2 {
            bundles_of_two += 1;
        }
        let ca = secret_text(&secrets, "issuer.crt")
            .await
            .expect("issuer.crt");
        if ca != first_ca && bundles_of_two > 0 && bundle.matches("BEGIN CERTIFICATE").count() == 1
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no CA rotation within 90 s: {leaves} leaves, {bundles_of_two} two-CA bundles seen, {} of {writes} writes refused\n{}",
            refused.len(),
            webhook.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        refused.is_empty(),
        "{} of {writes} writes refused during the rotation: {refused:#?}\n{}",
        refused.len(),
        webhook.log()
    );
    assert!(writes > 20, "writes went on through the rotation: {writes}");
    assert!(leaves >= 3, "the leaf was renewed: {leaves} leaves seen");
    assert_ne!(last_leaf, first_leaf, "the serving certificate changed");
    let bundle = secret_text(&secrets, "ca.crt").await.expect("ca.crt");
    assert!(!bundle.contains(first_ca.trim()), "the old CA was retired");
    eventually(
        "the new bundle injected",
        Duration::from_secs(30),
        || async { injected(env, &configuration).await == Some(bundle.clone()) },
    )
    .await;
    let log = webhook.log();
    for step in ["Introduce", "Promote", "Retire", "Renew"] {
        assert!(log.contains(step), "the webhook took step {step}:\n{log}");
    }
    assert_twin_refused(&handoffs, &ns).await;
    let api: Api<ValidatingWebhookConfiguration> = Api::all(env.client().await);
    let _ = api.delete(&configuration, &DeleteParams::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_racing_on_a_missing_secret_end_with_one_both_serve() {
    let env = env();
    let ns = env.namespace("certs-race").await;
    let configuration = format!("handoff-webhook-{ns}");
    // Registered first, so both replicas find it when they start.
    register(env, &configuration, &ns, "https://127.0.0.1:1/validate").await;
    let (one, two) = (
        start(env, &ns, &configuration, &[]),
        start(env, &ns, &configuration, &[]),
    );
    let secrets: Api<Secret> = Api::namespaced(env.client().await, &ns);
    let (leaf, bundle) = eventually("the Secret issued", Duration::from_secs(60), || async {
        match (
            secret_text(&secrets, "tls.crt").await,
            secret_text(&secrets, "ca.crt").await,
        ) {
            (Some(leaf), Some(bundle)) => Ok((leaf, bundle)),
            _ => Err(format!("no Secret yet\n{}\n{}", one.log(), two.log())),
        }
    })
    .await;
    for replica in [&one, &two] {
        eventually(
            "each replica serving the Secret's certificate",
            Duration::from_secs(30),
            || async {
                match presented(&replica.addr(), &bundle).await {
                    Ok(der) if der == der_of(&leaf) => Ok(()),
                    other => Err(format!("{other:?}\n{}", replica.log())),
                }
            },
        )
        .await;
    }
    let listed = secrets.list(&Default::default()).await.expect("list");
    let managed: Vec<_> = listed
        .items
        .iter()
        .filter(|s| {
            s.data
                .as_ref()
                .is_some_and(|d| d.contains_key("issuer.crt"))
        })
        .collect();
    assert_eq!(managed.len(), 1, "one Secret");
    assert_eq!(
        secret_text(&secrets, "tls.crt").await.as_deref(),
        Some(leaf.as_str()),
        "the Secret settled: no replica replaced the other's certificate"
    );
    let api: Api<ValidatingWebhookConfiguration> = Api::all(env.client().await);
    let _ = api.delete(&configuration, &DeleteParams::default()).await;
}
