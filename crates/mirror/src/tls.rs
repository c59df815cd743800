//! TLS to PostgreSQL with libpq's `sslmode` semantics ([`super::dsn`]), on
//! rustls with the `ring` provider that kube already brings (no aws-lc, no
//! OpenSSL).
//!
//! The tokio-postgres side is `tokio-postgres-rustls` (jbg's, the connector
//! the tokio-postgres README points to): it turns a rustls `ClientConfig`
//! into tokio-postgres's `MakeTlsConnect`, and computes the
//! `tls-server-end-point` channel binding from the server certificate's
//! signature algorithm, so SCRAM-SHA-256-PLUS works — the part a
//! hand-written `MakeTlsConnect` on tokio-rustls would most likely get
//! wrong or leave out. It has no default features (no provider of its own,
//! no root store) and takes whatever `ClientConfig` we build; its only new
//! dependency is `x509-cert` for that signature algorithm. What it does not
//! decide, this module does: which certificate checks each `sslmode`
//! makes, with the root certificates of `sslrootcert`:
//!
//! - nothing verified (`prefer`, `require` without `sslrootcert`): a
//!   verifier that accepts any certificate but still checks the
//!   handshake's signatures — encryption against passive eavesdropping
//!   only, as in libpq;
//! - the chain only (`verify-ca`, `require` with `sslrootcert`): rustls'
//!   webpki chain check against the root certificates, without the name;
//! - chain and host name (`verify-full`): rustls' standard webpki verifier.
//!
//! The root certificates are read on every new connection (as libpq does),
//! so a rotated CA bundle (a ConfigMap or Secret update) is picked up at
//! the next reconnect without a restart.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_cert_signed_by_trust_anchor};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::MirrorError;
use super::dsn::{TlsSettings, Verification};

/// The ALPN protocol PostgreSQL 17 requires for direct TLS negotiation
/// (`sslnegotiation=direct`); older servers ignore it.
const ALPN: &[u8] = b"postgresql";

/// The connector for `settings`, reading the root certificates when it
/// verifies anything.
pub(crate) fn connector(settings: &TlsSettings) -> Result<MakeRustlsConnect, MirrorError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| MirrorError::Tls(e.to_string()))?;
    let verifier: Arc<dyn ServerCertVerifier> = match settings.verification() {
        Verification::Nothing => Arc::new(ChainOnly {
            roots: None,
            provider,
        }),
        verification => {
            let path = settings.root_cert.as_deref().ok_or_else(|| {
                MirrorError::Tls(format!("sslmode={} needs sslrootcert", settings.mode))
            })?;
            let roots = root_certificates(path)?;
            if verification == Verification::Chain {
                Arc::new(ChainOnly {
                    roots: Some(roots),
                    provider,
                })
            } else {
                WebPkiServerVerifier::builder_with_provider(roots, provider)
                    .build()
                    .map_err(|e| MirrorError::Tls(e.to_string()))?
            }
        }
    };
    let mut config = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(MakeRustlsConnect::new(config))
}

/// The CA certificates of the PEM file at `path`.
fn root_certificates(path: &Path) -> Result<Arc<RootCertStore>, MirrorError> {
    let problem =
        |problem: String| MirrorError::Tls(format!("sslrootcert {}: {problem}", path.display()));
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|e| problem(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| problem(e.to_string()))?;
    if certificates.is_empty() {
        return Err(problem("holds no PEM certificate".into()));
    }
    let mut roots = RootCertStore::empty();
    for certificate in certificates {
        roots
            .add(certificate)
            .map_err(|e| problem(format!("not a usable CA certificate: {e}")))?;
    }
    Ok(Arc::new(roots))
}

/// Verifies the chain against `roots` (none: nothing), never the name; the
/// handshake's signatures always.
#[derive(Debug)]
struct ChainOnly {
    roots: Option<Arc<RootCertStore>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let certificate = ParsedCertificate::try_from(end_entity)?;
            verify_server_cert_signed_by_trust_anchor(
                &certificate,
                roots,
                intermediates,
                now,
                self.provider.signature_verification_algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::dsn::SslMode;

    fn settings(mode: SslMode, root_cert: Option<PathBuf>) -> TlsSettings {
        TlsSettings { mode, root_cert }
    }

    #[test]
    fn root_certificates_are_read_only_when_something_is_verified() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("missing.crt");
        let not_pem = dir.path().join("not-pem.crt");
        std::fs::write(&not_pem, "not a certificate\n").expect("write");
        // Nothing verified: the file is never opened.
        assert!(connector(&settings(SslMode::Prefer, Some(missing.clone()))).is_ok());
        assert!(connector(&settings(SslMode::Disable, Some(missing.clone()))).is_ok());
        assert!(connector(&settings(SslMode::Require, None)).is_ok());
        // Verifying without root certificates fails closed (split refuses
        // such settings first; this is the second line).
        let err = connector(&settings(SslMode::VerifyFull, None))
            .err()
            .expect("refused")
            .to_string();
        assert!(
            err.contains("sslmode=verify-full needs sslrootcert"),
            "{err}"
        );
        for (mode, path, problem) in [
            (SslMode::VerifyFull, &missing, "No such file"),
            (SslMode::VerifyCa, &not_pem, "holds no PEM certificate"),
            (SslMode::Require, &not_pem, "holds no PEM certificate"),
        ] {
            let err = connector(&settings(mode, Some(path.clone())))
                .err()
                .expect("refused")
                .to_string();
            assert!(
                err.contains(&format!("sslrootcert {}", path.display())) && err.contains(problem),
                "{mode}: {err}"
            );
        }
    }
}
