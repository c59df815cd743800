//! The self-managed certificate's cryptography: the Secret's data read into
//! the planner's facts ([`facts`]) and the new data for each planned step
//! ([`next_data`]). Issuing is rcgen's (the crate the test planes already
//! issue with; ECDSA P-256, like cert-manager's config); reading validity,
//! names and signatures is x509-parser's (rcgen's own parser, already in
//! the build), so no certificate field is parsed by hand here.
//!
//! The Secret's keys:
//! - `tls.crt`, `tls.key`: the serving certificate and its key (what
//!   every replica serves; the names a `kubernetes.io/tls` Secret has);
//! - `ca.crt`: every CA the apiserver is to trust, the caBundle injected;
//! - `issuer.crt`, `issuer.key`: the CA that signs serving certificates;
//! - `next-issuer.crt`, `next-issuer.key`: a CA introduced into `ca.crt`
//!   but not yet signing (a CA rotation's first phase).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use anyhow::Context;
use handoff_core::certs::{Action, Cert, CertPolicy, Leaf, Secret, Stored};
use jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use sha2::{Digest, Sha256};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;

/// The serving certificate.
pub(crate) const TLS_CRT: &str = "tls.crt";
/// Its key.
pub(crate) const TLS_KEY: &str = "tls.key";
/// The trust bundle.
pub(crate) const CA_CRT: &str = "ca.crt";
const ISSUER_CRT: &str = "issuer.crt";
const ISSUER_KEY: &str = "issuer.key";
const NEXT_CRT: &str = "next-issuer.crt";
const NEXT_KEY: &str = "next-issuer.key";

/// A Secret's data.
pub(crate) type Data = BTreeMap<String, Vec<u8>>;

/// The planner's view of `data`; `names` are the serving certificate's
/// expected subject alternative names.
pub(crate) fn facts(data: &Data, names: &[String]) -> Secret {
    match stored(data, names) {
        Ok(stored) => Secret::Valid(stored),
        Err(err) => Secret::Invalid(format!("{err:#}")),
    }
}

fn stored(data: &Data, names: &[String]) -> anyhow::Result<Stored> {
    let issuer_der = ca_der(data, ISSUER_CRT, ISSUER_KEY)?;
    let issuer = cert_of(&issuer_der)?;
    let next = match data.get(NEXT_CRT) {
        Some(_) => Some(cert_of(&ca_der(data, NEXT_CRT, NEXT_KEY)?)?),
        None => None,
    };
    let bundle = certs_in(get(data, CA_CRT)?)
        .with_context(|| format!("{CA_CRT} of the Secret"))?
        .iter()
        .map(|der| cert_of(der))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Stored {
        issuer,
        next,
        bundle,
        leaf: leaf(data, &issuer_der, names).ok(),
    })
}

/// The DER of the CA in `crt_key`, checked against its key in `key_key`.
fn ca_der(data: &Data, crt_key: &str, key_key: &str) -> anyhow::Result<Vec<u8>> {
    let der = one_cert(get(data, crt_key)?).with_context(|| format!("{crt_key} of the Secret"))?;
    key_matches(&der, get(data, key_key)?)
        .with_context(|| format!("{key_key} of the Secret does not match {crt_key}"))?;
    Ok(der)
}

fn leaf(data: &Data, issuer_der: &[u8], names: &[String]) -> anyhow::Result<Leaf> {
    let der = one_cert(get(data, TLS_CRT)?)?;
    let cert = cert_of(&der)?;
    let (_, parsed) = x509_parser::parse_x509_certificate(&der)?;
    let (_, issuer) = x509_parser::parse_x509_certificate(issuer_der)?;
    let from_issuer = parsed.verify_signature(Some(issuer.public_key())).is_ok()
        && key_matches(&der, get(data, TLS_KEY)?).is_ok();
    let mut found = subject_names(&parsed)?;
    let mut wanted = names.to_vec();
    found.sort();
    wanted.sort();
    Ok(Leaf {
        cert,
        from_issuer,
        names_match: found == wanted,
    })
}

fn get<'a>(data: &'a Data, key: &str) -> anyhow::Result<&'a [u8]> {
    data.get(key)
        .map(Vec::as_slice)
        .with_context(|| format!("the Secret has no {key}"))
}

/// The DERs of the PEM certificates in `pem`, at least one.
fn certs_in(pem: &[u8]) -> anyhow::Result<Vec<Vec<u8>>> {
    let blocks = pem::parse_many(pem).context("not PEM")?;
    let ders: Vec<Vec<u8>> = blocks
        .into_iter()
        .filter(|b| b.tag() == "CERTIFICATE")
        .map(|b| b.contents().to_vec())
        .collect();
    anyhow::ensure!(!ders.is_empty(), "no PEM certificate");
    Ok(ders)
}

fn one_cert(pem: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut ders = certs_in(pem)?;
    anyhow::ensure!(ders.len() == 1, "{} certificates, not one", ders.len());
    Ok(ders.remove(0))
}

fn key_matches(cert_der: &[u8], key_pem: &[u8]) -> anyhow::Result<()> {
    let key = KeyPair::from_pem(std::str::from_utf8(key_pem)?)?;
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der)?;
    anyhow::ensure!(
        cert.public_key().subject_public_key.data.as_ref() == key.public_key_raw(),
        "another key"
    );
    Ok(())
}

fn cert_of(der: &[u8]) -> anyhow::Result<Cert> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).context("not an X.509 certificate")?;
    let validity = cert.validity();
    Ok(Cert {
        fingerprint: fingerprint(der),
        not_before: Timestamp::from_second(validity.not_before.timestamp())?,
        not_after: Timestamp::from_second(validity.not_after.timestamp())?,
    })
}

/// SHA-256 of a DER certificate, hex.
pub(crate) fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The DNS names and IP addresses a certificate names.
fn subject_names(cert: &X509Certificate<'_>) -> anyhow::Result<Vec<String>> {
    let Some(san) = cert.subject_alternative_name()? else {
        return Ok(Vec::new());
    };
    Ok(san
        .value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => Some((*dns).to_owned()),
            GeneralName::IPAddress(bytes) => match bytes.len() {
                4 => <[u8; 4]>::try_from(*bytes)
                    .ok()
                    .map(|b| IpAddr::from(b).to_string()),
                16 => <[u8; 16]>::try_from(*bytes)
                    .ok()
                    .map(|b| IpAddr::from(b).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect())
}

/// The Secret's data after `action` (`None` for [`Action::Inject`] and
/// [`Action::Serve`], which write no Secret).
pub(crate) fn next_data(
    action: &Action,
    data: &Data,
    policy: &CertPolicy,
    names: &[String],
    now: Timestamp,
) -> anyhow::Result<Option<Data>> {
    let mut data = data.clone();
    match action {
        Action::Inject | Action::Serve => return Ok(None),
        Action::Issue(_) => {
            let (cert, key) = new_ca(policy, now)?;
            data = Data::new();
            data.insert(CA_CRT.into(), cert.clone().into_bytes());
            data.insert(ISSUER_CRT.into(), cert.into_bytes());
            data.insert(ISSUER_KEY.into(), key.into_bytes());
            new_leaf(&mut data, policy, names, now)?;
        }
        Action::Retire => {
            let mut kept = Vec::new();
            for der in certs_in(get(&data, CA_CRT)?)? {
                let cert = cert_of(&der)?;
                if now < cert.not_after || current(&data, &cert.fingerprint) {
                    kept.push(pem::Pem::new("CERTIFICATE", der));
                }
            }
            data.insert(CA_CRT.into(), pem::encode_many(&kept).into_bytes());
        }
        Action::Introduce => {
            let (cert, key) = new_ca(policy, now)?;
            let mut bundle = get(&data, CA_CRT)?.to_vec();
            bundle.extend_from_slice(cert.as_bytes());
            data.insert(CA_CRT.into(), bundle);
            data.insert(NEXT_CRT.into(), cert.into_bytes());
            data.insert(NEXT_KEY.into(), key.into_bytes());
        }
        Action::Promote => {
            let cert = data.remove(NEXT_CRT).context("no next-issuer.crt")?;
            let key = data.remove(NEXT_KEY).context("no next-issuer.key")?;
            data.insert(ISSUER_CRT.into(), cert);
            data.insert(ISSUER_KEY.into(), key);
            new_leaf(&mut data, policy, names, now)?;
        }
        Action::Renew(_) => new_leaf(&mut data, policy, names, now)?,
    }
    Ok(Some(data))
}

/// Whether `fingerprint` is the issuer's or the next issuer's.
fn current(data: &Data, fingerprint: &str) -> bool {
    [ISSUER_CRT, NEXT_CRT].iter().any(|key| {
        data.get(*key)
            .and_then(|pem| one_cert(pem).ok())
            .is_some_and(|der| self::fingerprint(&der) == fingerprint)
    })
}

fn odt(at: Timestamp) -> anyhow::Result<time::OffsetDateTime> {
    Ok(time::OffsetDateTime::from_unix_timestamp(at.as_second())?)
}

fn shifted(now: Timestamp, by: Duration, forward: bool) -> anyhow::Result<Timestamp> {
    let by = jiff::SignedDuration::try_from(by)?;
    Ok(if forward {
        now.checked_add(by)?
    } else {
        now.checked_sub(by)?
    })
}

/// A new CA, PEM certificate and key.
fn new_ca(policy: &CertPolicy, now: Timestamp) -> anyhow::Result<(String, String)> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let mut name = DistinguishedName::new();
    name.push(
        DnType::CommonName,
        format!("handoff-webhook-ca-{}", now.as_second()),
    );
    params.distinguished_name = name;
    params.not_before = odt(shifted(now, policy.backdate, false)?)?;
    params.not_after = odt(shifted(now, policy.ca_validity, true)?)?;
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Issues a serving certificate for `names` from the data's issuer into
/// `tls.crt`/`tls.key`, expiring no later than the issuer.
fn new_leaf(
    data: &mut Data,
    policy: &CertPolicy,
    names: &[String],
    now: Timestamp,
) -> anyhow::Result<()> {
    let issuer_pem = std::str::from_utf8(get(data, ISSUER_CRT)?)?.to_owned();
    let issuer_key = KeyPair::from_pem(std::str::from_utf8(get(data, ISSUER_KEY)?)?)?;
    let issuer_end = cert_of(&one_cert(issuer_pem.as_bytes())?)?.not_after;
    let issuer = Issuer::from_ca_cert_pem(&issuer_pem, issuer_key)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.to_vec())?;
    let mut name = DistinguishedName::new();
    name.push(
        DnType::CommonName,
        names.first().cloned().unwrap_or_default(),
    );
    params.distinguished_name = name;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.not_before = odt(shifted(now, policy.backdate, false)?)?;
    params.not_after = odt(shifted(now, policy.leaf_validity, true)?.min(issuer_end))?;
    let cert = params.signed_by(&key, &issuer)?;
    data.insert(TLS_CRT.into(), cert.pem().into_bytes());
    data.insert(TLS_KEY.into(), key.serialize_pem().into_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> CertPolicy {
        CertPolicy {
            leaf_validity: Duration::from_secs(3600),
            leaf_renew_before: Duration::from_secs(600),
            ca_validity: Duration::from_secs(7200),
            ca_renew_before: Duration::from_secs(1800),
            backdate: Duration::from_secs(60),
            settle: Duration::from_secs(3),
        }
    }

    fn names() -> Vec<String> {
        vec!["handoff-webhook.ns.svc".into(), "127.0.0.1".into()]
    }

    fn step(action: Action, data: &Data, now: Timestamp) -> Data {
        next_data(&action, data, &policy(), &names(), now)
            .expect("issued")
            .expect("a write")
    }

    fn valid(data: &Data) -> Stored {
        match facts(data, &names()) {
            Secret::Valid(stored) => stored,
            other => panic!("not valid: {other:?}"),
        }
    }

    /// Every step's data reads back as the step meant: a fresh issue, an
    /// introduced CA, its promotion, the old CA's retirement.
    #[test]
    fn each_step_reads_back() {
        let t0 = Timestamp::from_second(1_800_000_000).expect("time");
        assert_eq!(
            facts(&Data::new(), &names()),
            Secret::Invalid("the Secret has no issuer.crt".into())
        );
        let fresh = step(Action::Issue("fresh".into()), &Data::new(), t0);
        let stored = valid(&fresh);
        assert_eq!(stored.bundle, vec![stored.issuer.clone()]);
        let leaf = stored.leaf.clone().expect("a leaf");
        assert!(leaf.from_issuer && leaf.names_match, "{leaf:?}");
        assert_eq!(leaf.cert.not_after.as_second(), t0.as_second() + 3600);
        assert_eq!(stored.issuer.not_before.as_second(), t0.as_second() - 60);
        let other_names = facts(&fresh, &["elsewhere.svc".to_owned()]);
        assert!(
            matches!(&other_names, Secret::Valid(s) if s.leaf.as_ref().is_some_and(|l| !l.names_match)),
            "{other_names:?}"
        );

        let t1 = Timestamp::from_second(t0.as_second() + 6000).expect("time");
        let introduced = valid(&step(Action::Introduce, &fresh, t1));
        let next = introduced.next.clone().expect("next");
        assert_eq!(introduced.issuer, stored.issuer);
        assert_eq!(introduced.bundle, vec![stored.issuer.clone(), next.clone()]);

        let introduced_data = step(Action::Introduce, &fresh, t1);
        let promoted_data = step(Action::Promote, &introduced_data, t1);
        let promoted = valid(&promoted_data);
        assert_eq!(
            promoted.issuer.fingerprint,
            valid(&introduced_data).next.expect("next").fingerprint
        );
        assert!(promoted.next.is_none());
        assert_eq!(promoted.bundle.len(), 2, "the old CA stays trusted");
        let leaf = promoted.leaf.expect("leaf");
        assert!(leaf.from_issuer);
        assert_ne!(
            leaf.cert.fingerprint,
            stored.leaf.expect("leaf").cert.fingerprint
        );

        let t2 = Timestamp::from_second(t0.as_second() + 7200).expect("time");
        let retired = valid(&step(Action::Retire, &promoted_data, t2));
        assert_eq!(retired.bundle, vec![promoted.issuer.clone()]);

        // A leaf is never issued longer than its CA.
        let t3 = Timestamp::from_second(t0.as_second() + 7000).expect("time");
        let clipped = valid(&step(Action::Renew("due".into()), &fresh, t3));
        assert_eq!(
            clipped.leaf.expect("leaf").cert.not_after,
            stored.issuer.not_after
        );

        let mut broken = fresh.clone();
        broken.insert(ISSUER_KEY.into(), fresh[TLS_KEY].clone());
        assert!(
            matches!(facts(&broken, &names()), Secret::Invalid(why) if why.contains("issuer.key of the Secret does not match issuer.crt")),
        );
        assert_eq!(
            next_data(&Action::Serve, &fresh, &policy(), &names(), t0).expect("none"),
            None
        );
    }
}
