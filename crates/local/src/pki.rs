//! Certificates and keys for a local control plane, generated fresh per
//! start (ECDSA P-256, like envtest; a kept `handoff dev` saves and reuses them): a CA, the apiserver's serving
//! certificate, an admin client certificate in `system:masters`, and the
//! service-account signing key; and a CA with a serving certificate for
//! any other local server ([`ServerTls`]: PostgreSQL with TLS).

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// PEM material for one control plane.
pub(crate) struct Pki {
    /// CA certificate (trusted for serving and client certificates).
    pub ca_cert: String,
    /// The apiserver's serving certificate and key.
    pub serving_cert: String,
    /// See [`Pki::serving_cert`].
    pub serving_key: String,
    /// Admin client certificate (`CN=admin, O=system:masters`) and key.
    pub admin_cert: String,
    /// See [`Pki::admin_cert`].
    pub admin_key: String,
    /// Service-account token signing key (PKCS#8) and its public key.
    pub sa_key: String,
    /// See [`Pki::sa_key`].
    pub sa_pub: String,
}

impl Pki {
    /// Generates everything; the apiserver's certificate also names
    /// `extra_address` (where a node's Pods reach it) when given.
    pub(crate) fn generate(extra_address: Option<std::net::Ipv4Addr>) -> anyhow::Result<Self> {
        let (ca_cert, issuer) = certificate_authority("handoff-envtest-ca")?;

        let serving_key = KeyPair::generate()?;
        let mut names = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "10.0.0.1".to_owned(),
            "kubernetes.default.svc".to_owned(),
            "kubernetes.default.svc.cluster.local".to_owned(),
        ];
        names.extend(extra_address.map(|a| a.to_string()));
        let mut serving = CertificateParams::new(names)?;
        serving.distinguished_name = name("kube-apiserver", None);
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving.signed_by(&serving_key, &issuer)?;

        let admin_key = KeyPair::generate()?;
        let mut admin = CertificateParams::new(Vec::new())?;
        admin.distinguished_name = name("admin", Some("system:masters"));
        admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let admin_cert = admin.signed_by(&admin_key, &issuer)?;

        let sa = KeyPair::generate()?;
        Ok(Self {
            ca_cert: ca_cert.pem(),
            serving_cert: serving_cert.pem(),
            serving_key: serving_key.serialize_pem(),
            admin_cert: admin_cert.pem(),
            admin_key: admin_key.serialize_pem(),
            sa_key: sa.serialize_pem(),
            sa_pub: sa.public_key_pem(),
        })
    }
}

/// The files of a [`Pki`] in a certificate directory (the apiserver reads
/// the first five).
const PKI_FILES: [&str; 7] = [
    "ca.crt",
    "apiserver.crt",
    "apiserver.key",
    "sa.key",
    "sa.pub",
    "admin.crt",
    "admin.key",
];

impl Pki {
    /// Writes every file into `dir` (keys private).
    pub(crate) fn save(&self, dir: &std::path::Path) -> anyhow::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::create_dir_all(dir)?;
        for (file, pem) in PKI_FILES.iter().zip(self.pems()) {
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(dir.join(file))?;
            std::io::Write::write_all(&mut out, pem.as_bytes())?;
        }
        Ok(())
    }

    /// Reads what [`Pki::save`] wrote; `None` when `dir` holds none of it.
    pub(crate) fn load(dir: &std::path::Path) -> anyhow::Result<Option<Self>> {
        if !dir.join(PKI_FILES[0]).exists() {
            return Ok(None);
        }
        let read = |file: &str| {
            std::fs::read_to_string(dir.join(file)).map_err(|e| {
                anyhow::anyhow!(
                    "{} is incomplete ({file}: {e}); remove the directory or start over with --fresh",
                    dir.display()
                )
            })
        };
        Ok(Some(Self {
            ca_cert: read(PKI_FILES[0])?,
            serving_cert: read(PKI_FILES[1])?,
            serving_key: read(PKI_FILES[2])?,
            sa_key: read(PKI_FILES[3])?,
            sa_pub: read(PKI_FILES[4])?,
            admin_cert: read(PKI_FILES[5])?,
            admin_key: read(PKI_FILES[6])?,
        }))
    }

    fn pems(&self) -> [&String; 7] {
        [
            &self.ca_cert,
            &self.serving_cert,
            &self.serving_key,
            &self.sa_key,
            &self.sa_pub,
            &self.admin_cert,
            &self.admin_key,
        ]
    }
}

/// A throwaway CA and a serving certificate it signed, in PEM: a local
/// server's TLS (PostgreSQL with `ssl=on` in the test kit).
pub struct ServerTls {
    /// The CA certificate (what a client trusts).
    pub ca_cert: String,
    /// The serving certificate, valid for the host names it was made for.
    pub cert: String,
    /// The serving certificate's key (PKCS#8).
    pub key: String,
}

impl ServerTls {
    /// A new CA named `ca_name` and a serving certificate for `host_names`
    /// (DNS names or IP addresses; nothing else is valid for it).
    pub fn generate(ca_name: &str, host_names: &[&str]) -> anyhow::Result<Self> {
        let (ca_cert, issuer) = certificate_authority(ca_name)?;
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(
            host_names
                .iter()
                .map(|h| (*h).to_owned())
                .collect::<Vec<_>>(),
        )?;
        params.distinguished_name = name(host_names.first().copied().unwrap_or("server"), None);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &issuer)?;
        Ok(Self {
            ca_cert: ca_cert.pem(),
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

/// A self-signed CA certificate and its issuer.
fn certificate_authority(
    common_name: &str,
) -> anyhow::Result<(rcgen::Certificate, Issuer<'static, KeyPair>)> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::new())?;
    params.distinguished_name = name(common_name, None);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key)?;
    Ok((cert, Issuer::new(params, key)))
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(org) = organization {
        dn.push(DnType::OrganizationName, org);
    }
    dn
}
