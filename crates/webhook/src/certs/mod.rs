//! The self-managed certificate (`handoff webhook` without
//! `--tls-cert-file`): every replica, every `--cert-sync-interval`, reads
//! the Secret and the ValidatingWebhookConfiguration, asks the planner
//! ([`handoff_core::certs::plan`]) for the next step, takes it, and serves
//! the serving certificate the Secret then holds (read through the API, so
//! a renewal reaches every replica within one interval, not after the
//! kubelet's volume refresh).
//!
//! The Secret is the one source of truth and is written with optimistic
//! concurrency: a create fails when another replica created it first, an
//! update when the resourceVersion read has changed; either way this
//! replica re-reads and plans again (the other one won). The caBundle is
//! patched alone (a strategic merge by webhook name), so nothing else of
//! the configuration is fought over.

pub(crate) mod pki;

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use handoff_core::certs::{Action, Secret as Facts, plan};
use handoff_core::names::WEBHOOK_FIELD_MANAGER;
use handoff_kube::tls::ServedCert;
use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

use crate::options::Managed;
use pki::Data;

/// Steps taken in one sync at most (a fresh install is Issue, Inject; a
/// rotation one step a sync while it settles).
const MAX_STEPS: usize = 4;

/// One replica's certificate manager.
pub(crate) struct Manager {
    secrets: Api<Secret>,
    configurations: Api<ValidatingWebhookConfiguration>,
    settings: Managed,
    served: Arc<ServedCert>,
}

impl Manager {
    pub(crate) fn new(client: kube::Client, settings: Managed, served: Arc<ServedCert>) -> Self {
        Self {
            secrets: Api::namespaced(client.clone(), &settings.namespace),
            configurations: Api::all(client),
            settings,
            served,
        }
    }

    /// Syncs now and then every interval until `shutdown`.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        loop {
            if let Err(err) = self.sync().await {
                tracing::warn!(
                    secret = %self.settings.secret,
                    error = format!("{err:#}"),
                    "the webhook certificate could not be synced; retrying"
                );
            }
            tokio::select! {
                () = tokio::time::sleep(self.settings.every) => {}
                () = shutdown.cancelled() => return,
            }
        }
    }

    /// Brings the Secret and the caBundle up to date, then serves what the
    /// Secret holds (also when a step failed: a Secret that cannot be
    /// written may still hold a certificate the apiserver trusts).
    async fn sync(&self) -> anyhow::Result<()> {
        let mut stored = self.secrets.get_opt(&self.settings.secret).await?;
        let converged = self.converge(&mut stored).await;
        let served = self.serve(&data_of(stored.as_ref()));
        converged.and(served)
    }

    /// Plans and takes steps until there is nothing to change (or
    /// [`MAX_STEPS`]); `stored` follows what was written or re-read.
    async fn converge(&self, stored: &mut Option<Secret>) -> anyhow::Result<()> {
        for _ in 0..MAX_STEPS {
            let data = data_of(stored.as_ref());
            let facts = match stored {
                None => Facts::Missing,
                Some(_) => pki::facts(&data, &self.settings.names),
            };
            let bundle = data.get(pki::CA_CRT).cloned().unwrap_or_default();
            let injected = self.injected(&bundle).await?;
            let now = Timestamp::now();
            let action = plan(&self.settings.policy, &facts, injected, now);
            if action == Action::Serve {
                return Ok(());
            }
            tracing::info!(secret = %self.settings.secret, ?action, "webhook certificate");
            if action == Action::Inject {
                self.inject(&bundle).await?;
                continue;
            }
            let Some(next) = pki::next_data(
                &action,
                &data,
                &self.settings.policy,
                &self.settings.names,
                now,
            )?
            else {
                return Ok(());
            };
            *stored = match self.write(stored.clone(), next).await {
                Ok(written) => Some(written),
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    tracing::info!(
                        secret = %self.settings.secret,
                        "another replica wrote the Secret first; reading it again"
                    );
                    self.secrets.get_opt(&self.settings.secret).await?
                }
                Err(err) => return Err(err.into()),
            };
        }
        Ok(())
    }

    /// Serves the Secret's pair when it changed.
    fn serve(&self, data: &Data) -> anyhow::Result<()> {
        let (Some(cert), Some(key)) = (data.get(pki::TLS_CRT), data.get(pki::TLS_KEY)) else {
            anyhow::bail!("the Secret holds no serving certificate yet");
        };
        if self.served.set(cert, key)? {
            let serial = self
                .served
                .leaf_der()
                .map(|der| pki::fingerprint(&der))
                .unwrap_or_default();
            tracing::info!(
                secret = %self.settings.secret,
                sha256 = %serial,
                "serving the webhook certificate from the Secret"
            );
        }
        Ok(())
    }

    /// Creates the Secret (none read) or replaces the one read, at its
    /// resourceVersion.
    async fn write(&self, read: Option<Secret>, data: Data) -> Result<Secret, kube::Error> {
        let data = data.into_iter().map(|(k, v)| (k, ByteString(v))).collect();
        match read {
            None => {
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(self.settings.secret.clone()),
                        namespace: Some(self.settings.namespace.clone()),
                        labels: Some(
                            [
                                ("app.kubernetes.io/part-of", "handoff"),
                                ("app.kubernetes.io/managed-by", "handoff-webhook"),
                            ]
                            .into_iter()
                            .map(|(k, v)| (k.to_owned(), v.to_owned()))
                            .collect(),
                        ),
                        ..ObjectMeta::default()
                    },
                    type_: Some("kubernetes.io/tls".into()),
                    data: Some(data),
                    ..Secret::default()
                };
                self.secrets.create(&PostParams::default(), &secret).await
            }
            Some(mut secret) => {
                secret.data = Some(data);
                secret.string_data = None;
                self.secrets
                    .replace(&self.settings.secret, &PostParams::default(), &secret)
                    .await
            }
        }
    }

    /// Whether every webhook of the configuration trusts exactly `bundle`.
    async fn injected(&self, bundle: &[u8]) -> anyhow::Result<bool> {
        let Some(configuration) = self
            .configurations
            .get_opt(&self.settings.configuration)
            .await?
        else {
            return Ok(false);
        };
        Ok(configuration
            .webhooks
            .unwrap_or_default()
            .iter()
            .all(|hook| {
                hook.client_config
                    .ca_bundle
                    .as_ref()
                    .is_some_and(|b| b.0 == bundle)
            }))
    }

    /// Sets every webhook's caBundle to `bundle`, nothing else.
    async fn inject(&self, bundle: &[u8]) -> anyhow::Result<()> {
        let configuration = self
            .configurations
            .get_opt(&self.settings.configuration)
            .await?
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "ValidatingWebhookConfiguration {} does not exist (--webhook-configuration)",
                    self.settings.configuration
                )
            })?;
        let encoded = B64.encode(bundle);
        let webhooks: Vec<serde_json::Value> = configuration
            .webhooks
            .unwrap_or_default()
            .iter()
            .map(|hook| serde_json::json!({"name": hook.name, "clientConfig": {"caBundle": encoded}}))
            .collect();
        self.configurations
            .patch(
                &self.settings.configuration,
                &PatchParams {
                    field_manager: Some(WEBHOOK_FIELD_MANAGER.into()),
                    ..PatchParams::default()
                },
                &Patch::Strategic(serde_json::json!({"webhooks": webhooks})),
            )
            .await?;
        tracing::info!(
            configuration = %self.settings.configuration,
            "injected the webhook CA bundle"
        );
        Ok(())
    }
}

fn data_of(secret: Option<&Secret>) -> Data {
    secret
        .and_then(|s| s.data.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect()
}
