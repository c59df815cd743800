//! `handoff webhook`'s flags and the mode they choose: the certificate from
//! files (`--tls-cert-file`/`--tls-key-file`, what cert-manager mounts) or
//! self-managed in a Secret (the default; [`crate::certs`]). Every flag is
//! checked before anything starts, and a bad one is named.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use handoff_core::certs::CertPolicy;
use handoff_core::time::positive_duration;

/// How far back a certificate's validity starts (clocks of the replica and
/// the apiserver may differ this much).
const BACKDATE: Duration = Duration::from_secs(60);

/// How long a new CA sits injected in the caBundle before it signs: the
/// apiserver reloads webhook configurations from an informer, within
/// milliseconds; this is that with a wide margin.
const SETTLE: Duration = Duration::from_secs(3);

/// `handoff webhook`.
#[derive(Debug, clap::Args)]
pub struct WebhookArgs {
    /// Address to serve HTTPS on (the apiserver calls /validate).
    #[arg(long, env = "HANDOFF_WEBHOOK_LISTEN", default_value = "0.0.0.0:9443")]
    pub listen: SocketAddr,
    /// Serve /metrics, /healthz and /readyz over plain HTTP on this address
    /// (off when unset).
    #[arg(long, env = "HANDOFF_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Serve this PEM certificate chain (tls.crt of a mounted cert-manager
    /// Secret) instead of managing a certificate (--tls-secret).
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_key_file",
        conflicts_with = "tls_secret"
    )]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file (tls.key).
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    /// How often the TLS files are checked for a renewed certificate.
    #[arg(long, default_value = "10s", value_parser = positive_duration, value_name = "DURATION")]
    pub tls_reload_interval: Duration,
    /// The self-managed certificate (without --tls-cert-file).
    #[command(flatten)]
    pub managed: ManagedArgs,
}

/// The self-managed certificate's flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ManagedArgs {
    /// The Secret holding the CA and the serving certificate (the source of
    /// truth every replica reads, issues into and serves from).
    #[arg(long, default_value = "handoff-webhook-tls", value_name = "NAME")]
    pub tls_secret: String,
    /// Namespace of the Secret and the Service: the pod's own (downward API).
    #[arg(long, env = "POD_NAMESPACE", value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// The ValidatingWebhookConfiguration whose caBundle gets the CA.
    #[arg(long, default_value = "handoff-webhook", value_name = "NAME")]
    pub webhook_configuration: String,
    /// The Service in front of the webhook: the certificate names
    /// <service>.<namespace>.svc and <service>.<namespace>.svc.cluster.local.
    #[arg(long, default_value = "handoff-webhook", value_name = "NAME")]
    pub service: String,
    /// A further name (DNS name or IP address) for the certificate; repeatable.
    #[arg(long = "extra-san", value_name = "NAME")]
    pub extra_sans: Vec<String>,
    /// Lifetime of the serving certificate.
    #[arg(long, default_value = "8760h", value_parser = positive_duration, value_name = "DURATION")]
    pub cert_validity: Duration,
    /// Renew the serving certificate this long before it expires.
    #[arg(long, default_value = "720h", value_parser = positive_duration, value_name = "DURATION")]
    pub cert_renew_before: Duration,
    /// Lifetime of the CA.
    #[arg(long, default_value = "87600h", value_parser = positive_duration, value_name = "DURATION")]
    pub ca_validity: Duration,
    /// Start a CA rotation this long before the CA expires (longer than
    /// --cert-validity, so the old CA's last leaves expire before it does).
    #[arg(long, default_value = "17520h", value_parser = positive_duration, value_name = "DURATION")]
    pub ca_renew_before: Duration,
    /// How often the Secret and the caBundle are read (and the Secret's
    /// certificate served).
    #[arg(long, default_value = "10s", value_parser = positive_duration, value_name = "DURATION")]
    pub cert_sync_interval: Duration,
}

/// Where the served certificate comes from.
#[derive(Debug)]
pub(crate) enum Mode {
    /// From files, re-read every interval.
    Files {
        cert: PathBuf,
        key: PathBuf,
        every: Duration,
    },
    /// Managed in a Secret.
    Managed(Managed),
}

/// The self-managed certificate's settings, checked.
#[derive(Debug, Clone)]
pub(crate) struct Managed {
    pub(crate) secret: String,
    pub(crate) namespace: String,
    pub(crate) configuration: String,
    /// The serving certificate's names.
    pub(crate) names: Vec<String>,
    pub(crate) policy: CertPolicy,
    pub(crate) every: Duration,
}

impl WebhookArgs {
    /// The mode the flags choose; an error naming the flag that is wrong.
    pub(crate) fn mode(&self) -> Result<Mode, String> {
        if let (Some(cert), Some(key)) = (&self.tls_cert_file, &self.tls_key_file) {
            return Ok(Mode::Files {
                cert: cert.clone(),
                key: key.clone(),
                every: self.tls_reload_interval,
            });
        }
        self.managed.checked().map(Mode::Managed)
    }
}

impl ManagedArgs {
    fn checked(&self) -> Result<Managed, String> {
        let namespace = self.namespace.clone().ok_or(
            "--namespace (or POD_NAMESPACE) is required for the self-managed certificate: the namespace of --tls-secret and --service",
        )?;
        for (flag, value) in [
            ("--tls-secret", &self.tls_secret),
            ("--namespace", &namespace),
            ("--webhook-configuration", &self.webhook_configuration),
            ("--service", &self.service),
        ] {
            dns_name(value).map_err(|why| format!("{flag} {value:?}: {why}"))?;
        }
        let mut names = vec![
            format!("{}.{namespace}.svc", self.service),
            format!("{}.{namespace}.svc.cluster.local", self.service),
        ];
        for san in &self.extra_sans {
            if san.parse::<IpAddr>().is_err() {
                dns_name(san).map_err(|why| {
                    format!("--extra-san {san:?}: neither an IP address nor a DNS name: {why}")
                })?;
            }
            if !names.contains(san) {
                names.push(san.clone());
            }
        }
        let policy = CertPolicy {
            leaf_validity: self.cert_validity,
            leaf_renew_before: self.cert_renew_before,
            ca_validity: self.ca_validity,
            ca_renew_before: self.ca_renew_before,
            backdate: BACKDATE,
            settle: SETTLE,
        };
        policy.validate()?;
        Ok(Managed {
            secret: self.tls_secret.clone(),
            namespace,
            configuration: self.webhook_configuration.clone(),
            names,
            policy,
            every: self.cert_sync_interval,
        })
    }
}

/// A DNS subdomain name (RFC 1123): what Kubernetes object names and a
/// certificate's DNS names are.
fn dns_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 253 {
        return Err("must be 1 to 253 characters");
    }
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if !name.split('.').all(label_ok) {
        return Err(
            "must be lowercase letters, digits, '-' and '.', each dot-separated part 1 to 63 characters, starting and ending alphanumeric",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: WebhookArgs,
    }

    fn mode(flags: &[&str]) -> Result<Mode, String> {
        let cli = Cli::try_parse_from(std::iter::once("webhook").chain(flags.iter().copied()))
            .map_err(|e| e.to_string())?;
        cli.args.mode()
    }

    #[test]
    fn flags_choose_a_mode_and_bad_ones_are_named() {
        let ok = mode(&["--namespace", "ns", "--extra-san", "127.0.0.1"]).expect("managed");
        let Mode::Managed(managed) = ok else {
            panic!("{ok:?}")
        };
        assert_eq!(
            managed.names,
            [
                "handoff-webhook.ns.svc",
                "handoff-webhook.ns.svc.cluster.local",
                "127.0.0.1"
            ]
        );
        assert_eq!(managed.secret, "handoff-webhook-tls");
        assert_eq!(
            managed.policy.leaf_validity,
            Duration::from_secs(365 * 86_400)
        );
        assert!(matches!(
            mode(&["--tls-cert-file", "c", "--tls-key-file", "k"]),
            Ok(Mode::Files { .. })
        ));
        // (flags, a part of the error)
        let cases: [(&[&str], &str); 7] = [
            (&[], "--namespace (or POD_NAMESPACE) is required"),
            (
                &["--namespace", "Not_A_Name"],
                "--namespace \"Not_A_Name\": must be lowercase",
            ),
            (
                &["--namespace", "ns", "--extra-san", "bad name"],
                "--extra-san \"bad name\": neither an IP address nor a DNS name",
            ),
            (
                &["--namespace", "ns", "--cert-renew-before", "9000h"],
                "--cert-renew-before (32400000s) must be shorter than --cert-validity",
            ),
            (
                &["--namespace", "ns", "--cert-sync-interval", "0s"],
                "must be longer than zero",
            ),
            (&["--tls-cert-file", "c"], "--tls-key-file"),
            (
                &[
                    "--tls-cert-file",
                    "c",
                    "--tls-key-file",
                    "k",
                    "--tls-secret",
                    "s",
                ],
                "cannot be used with",
            ),
        ];
        for (flags, part) in cases {
            let err = mode(flags).expect_err(part);
            assert!(err.contains(part), "{flags:?}: {err}");
        }
    }
}
