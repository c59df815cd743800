//! The webhook's registration where the apiserver cannot reach a Service
//! (`handoff dev`, the test planes): the ValidatingWebhookConfiguration of
//! `config/webhook/configuration.yaml`, read from that file at build time so
//! its rules, match conditions, timeout and failure policy cannot drift,
//! with `clientConfig` pointed at a URL (the rewrite controller-runtime's
//! envtest makes) and, when given, the CA that signed the serving
//! certificate as `caBundle` (without it, the self-managed webhook injects
//! its own), and without cert-manager's cainjector annotation.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

/// config/webhook/configuration.yaml.
const CONFIGURATION: &str = include_str!("../../../config/webhook/configuration.yaml");

/// The configuration as committed.
pub fn configuration() -> anyhow::Result<Value> {
    Ok(serde_saphyr::from_str(CONFIGURATION)?)
}

/// Points every webhook of `configuration` at `url` (`https://…/validate`),
/// trusting `ca_pem` when given.
pub fn point_at(configuration: &mut Value, url: &str, ca_pem: Option<&str>) -> anyhow::Result<()> {
    if let Some(annotations) = configuration["metadata"]["annotations"].as_object_mut() {
        annotations.remove("cert-manager.io/inject-ca-from");
    }
    let webhooks = configuration["webhooks"]
        .as_array_mut()
        .ok_or_else(|| anyhow::anyhow!("the webhook configuration has no webhooks"))?;
    for webhook in webhooks {
        webhook["clientConfig"] = match ca_pem {
            Some(ca_pem) => json!({"url": url, "caBundle": B64.encode(ca_pem)}),
            None => json!({"url": url}),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_configuration_is_pointed_at_a_url() {
        let mut config = configuration().expect("parses");
        let hook = &config["webhooks"][0];
        assert_eq!(hook["failurePolicy"], json!("Fail"));
        assert!(hook["timeoutSeconds"].as_u64().is_some_and(|t| t <= 5));
        assert_eq!(hook["clientConfig"]["service"]["path"], json!("/validate"));
        point_at(&mut config, "https://127.0.0.1:9443/validate", Some("PEM")).expect("points");
        let hook = &config["webhooks"][0];
        assert_eq!(
            hook["clientConfig"],
            json!({"url": "https://127.0.0.1:9443/validate", "caBundle": B64.encode("PEM")})
        );
        assert!(
            config["metadata"]["annotations"]
                .get("cert-manager.io/inject-ca-from")
                .is_none()
        );
        assert_eq!(hook["rules"][0]["apiGroups"], json!(["handoff.dev"]));
        point_at(&mut config, "https://127.0.0.1:1/validate", None).expect("points");
        assert_eq!(
            config["webhooks"][0]["clientConfig"],
            json!({"url": "https://127.0.0.1:1/validate"}),
            "the self-managed webhook injects its own caBundle"
        );
    }
}
