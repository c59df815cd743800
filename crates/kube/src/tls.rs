//! TLS for what handoff serves (the HTTP bridge's `--tls-cert`/`--tls-key`,
//! the admission webhook's `--tls-cert-file`/`--tls-key-file`): a certificate
//! chain and its key in PEM files, such as the `tls.crt` and `tls.key` of a
//! cert-manager Secret mounted as a volume. The files are re-read every
//! reload interval; a changed pair that loads (and whose key matches
//! the certificate) serves every new handshake, so a rotated certificate
//! needs no restart. A pair that does not load is reported once and the
//! previous certificate keeps serving (a rotation caught half-written is
//! picked up at the next look).
//!
//! [`ServedCert`] is the certificate a server presents, swapped in place:
//! [`ReloadingCert`] feeds it from files, the webhook's self-managed mode
//! from the Secret it reads through the API. Until a pair is set, it has
//! none: handshakes fail and the server says it is not ready.
//!
//! rustls with the `ring` provider, the one kube's client already uses.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use anyhow::Context;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// The certificate served now; none until a pair is [`ServedCert::set`].
#[derive(Default)]
pub struct ServedCert {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    /// The pair last tried, loaded or not: each change is tried (and a
    /// bad one reported) once.
    seen: Mutex<(Vec<u8>, Vec<u8>)>,
}

impl fmt::Debug for ServedCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServedCert")
            .field("loaded", &self.loaded())
            .finish_non_exhaustive()
    }
}

impl ResolvesServerCert for ServedCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().and_then(|current| current.clone())
    }
}

impl ServedCert {
    /// None served yet.
    pub fn empty() -> Arc<Self> {
        Arc::default()
    }

    /// Serves the PEM pair from the next handshake on, when it differs from
    /// the pair last tried and loads (its key matching the certificate);
    /// whether it changed what is served. A pair that does not load leaves
    /// the previous one serving and is reported once.
    pub fn set(&self, cert_pem: &[u8], key_pem: &[u8]) -> anyhow::Result<bool> {
        {
            let mut seen = self
                .seen
                .lock()
                .map_err(|_| anyhow::anyhow!("the TLS state lock is poisoned"))?;
            if seen.0 == cert_pem && seen.1 == key_pem {
                return Ok(false);
            }
            *seen = (cert_pem.to_vec(), key_pem.to_vec());
        }
        let certified = certified_key(cert_pem, key_pem)?;
        let mut current = self
            .current
            .write()
            .map_err(|_| anyhow::anyhow!("the TLS state lock is poisoned"))?;
        *current = Some(Arc::new(certified));
        Ok(true)
    }

    /// Whether a certificate is served (readiness).
    pub fn loaded(&self) -> bool {
        self.current.read().is_ok_and(|current| current.is_some())
    }

    /// The DER of the leaf served now.
    pub fn leaf_der(&self) -> Option<Vec<u8>> {
        let current = self.current.read().ok()?;
        current
            .as_ref()
            .and_then(|c| c.cert.first())
            .map(|c| c.as_ref().to_vec())
    }
}

/// A certificate that follows its files.
pub struct ReloadingCert {
    cert_path: PathBuf,
    key_path: PathBuf,
    served: Arc<ServedCert>,
}

impl fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

impl ReloadingCert {
    /// Loads the pair; an error when it does not load (the server does not start).
    pub fn load(cert_path: &Path, key_path: &Path) -> anyhow::Result<Arc<Self>> {
        let (cert, key) = read_pair(cert_path, key_path)?;
        let served = ServedCert::empty();
        served.set(&cert, &key)?;
        Ok(Arc::new(Self {
            cert_path: cert_path.to_owned(),
            key_path: key_path.to_owned(),
            served,
        }))
    }

    /// What it serves.
    pub fn served(&self) -> Arc<ServedCert> {
        self.served.clone()
    }

    /// Re-reads the files and serves a changed pair that loads; whether it
    /// changed what is served.
    pub fn reload(&self) -> anyhow::Result<bool> {
        let (cert, key) = read_pair(&self.cert_path, &self.key_path)?;
        self.served.set(&cert, &key)
    }

    /// Looks at the files every `every` until `shutdown`.
    async fn watch(self: Arc<Self>, every: Duration, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = shutdown.cancelled() => return,
            }
            match self.reload() {
                Ok(true) => {
                    tracing::info!(cert = %self.cert_path.display(), "serving the renewed TLS certificate");
                }
                Ok(false) => {}
                Err(err) => tracing::warn!(
                    cert = %self.cert_path.display(),
                    error = format!("{err:#}"),
                    "the changed TLS files do not load; the previous certificate keeps serving"
                ),
            }
        }
    }
}

/// A TLS acceptor for HTTP/1.1 serving the pair `cert_path`/`key_path`
/// as it changes: the files are looked at every `every` until `shutdown`,
/// by a task on the current tokio runtime. An error when the pair does not
/// load (the server does not start).
pub fn reloading_acceptor(
    cert_path: &Path,
    key_path: &Path,
    every: Duration,
    shutdown: &CancellationToken,
) -> anyhow::Result<TlsAcceptor> {
    acceptor(reloading(cert_path, key_path, every, shutdown)?)
}

/// The certificate of the pair `cert_path`/`key_path` as it changes: the
/// files are looked at every `every` until `shutdown`, by a task on the
/// current tokio runtime. An error when the pair does not load.
pub fn reloading(
    cert_path: &Path,
    key_path: &Path,
    every: Duration,
    shutdown: &CancellationToken,
) -> anyhow::Result<Arc<ServedCert>> {
    let cert = ReloadingCert::load(cert_path, key_path)?;
    tokio::spawn(cert.clone().watch(every, shutdown.clone()));
    Ok(cert.served())
}

/// A TLS acceptor for HTTP/1.1 serving `cert` as it changes.
pub fn acceptor(cert: Arc<ServedCert>) -> anyhow::Result<TlsAcceptor> {
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn read_pair(cert: &Path, key: &Path) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
    let read =
        |path: &Path| std::fs::read(path).with_context(|| format!("read {}", path.display()));
    Ok((read(cert)?, read(key)?))
}

fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> anyhow::Result<CertifiedKey> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .context("the certificate file is not PEM certificates")?;
    anyhow::ensure!(
        !chain.is_empty(),
        "the certificate file holds no certificate"
    );
    let key =
        PrivateKeyDer::from_pem_slice(key_pem).context("the key file is not a PEM private key")?;
    CertifiedKey::from_der(chain, key, &rustls::crypto::ring::default_provider())
        .context("the key does not belong to the certificate")
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, KeyPair};

    use super::*;

    fn pair(name: &str) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let cert = CertificateParams::new(vec![name.to_owned()])
            .expect("params")
            .self_signed(&key)
            .expect("self-signed");
        (cert.pem(), key.serialize_pem())
    }

    fn served(cert: &ReloadingCert) -> Vec<u8> {
        cert.served().leaf_der().expect("a certificate is served")
    }

    #[test]
    fn a_changed_pair_is_served_and_a_bad_one_is_refused_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let (cert1, key1) = pair("one.test");
        std::fs::write(&cert_path, &cert1).expect("write");
        std::fs::write(&key_path, &key1).expect("write");
        let reloading = ReloadingCert::load(&cert_path, &key_path).expect("loads");
        let first = served(&reloading);
        assert!(!reloading.reload().expect("unchanged"), "nothing changed");

        let (cert2, key2) = pair("two.test");
        std::fs::write(&cert_path, &cert2).expect("write");
        assert!(
            reloading.reload().is_err(),
            "a new certificate with the old key"
        );
        assert!(
            !reloading.reload().expect("seen"),
            "the same bad pair is tried once"
        );
        assert_eq!(served(&reloading), first, "the previous pair keeps serving");

        std::fs::write(&key_path, &key2).expect("write");
        assert!(
            reloading.reload().expect("loads"),
            "the complete rotation is served"
        );
        assert_ne!(served(&reloading), first);

        std::fs::write(&key_path, "not a key").expect("write");
        assert!(reloading.reload().is_err());
        std::fs::remove_file(&cert_path).expect("remove");
        assert!(ReloadingCert::load(&cert_path, &key_path).is_err());
    }

    #[test]
    fn nothing_is_served_until_a_pair_is_set() {
        let served = ServedCert::empty();
        assert!(!served.loaded());
        assert!(served.leaf_der().is_none());
        let (cert, key) = pair("one.test");
        assert!(served.set(cert.as_bytes(), b"not a key").is_err());
        assert!(!served.loaded(), "a bad pair serves nothing");
        assert!(served.set(cert.as_bytes(), key.as_bytes()).expect("loads"));
        assert!(served.loaded());
        assert!(!served.set(cert.as_bytes(), key.as_bytes()).expect("same"));
    }
}
