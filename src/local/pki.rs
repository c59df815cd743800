//! Certificates and keys for a local control plane, generated fresh per
//! start (ECDSA P-256, like envtest): a CA, the apiserver's serving
//! certificate, an admin client certificate in `system:masters`, and the
//! service-account signing key.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// PEM material for one control plane.
pub struct Pki {
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
    /// Generates everything.
    pub fn generate() -> anyhow::Result<Self> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::new())?;
        ca_params.distinguished_name = name("handoff-envtest-ca", None);
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let serving_key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "10.0.0.1".to_owned(),
            "kubernetes.default.svc".to_owned(),
        ])?;
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

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(org) = organization {
        dn.push(DnType::OrganizationName, org);
    }
    dn
}
