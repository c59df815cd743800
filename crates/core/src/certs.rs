//! The admission webhook's self-managed certificate, its pure part: the
//! lifetimes and their order ([`CertPolicy`]) and what a replica does next
//! with the Secret it read and the caBundle it saw injected ([`plan`]). The
//! shell that reads and writes the Secret and the ValidatingWebhookConfiguration
//! and issues certificates is `handoff_webhook`'s `certs` module; every
//! replica runs it, and the Secret is the one source of truth, so the
//! decision depends on nothing a replica remembers.
//!
//! The rule every step keeps: the apiserver trusts (the injected caBundle)
//! every CA whose leaf any replica may serve. Hence a CA rotation in two
//! phases: a new CA is first only *introduced* (added to the bundle, signing
//! nothing); it is *promoted* (signs the serving certificate) only once the
//! bundle holding it is injected and has had `settle` to reach the
//! apiserver's informer; the old CA stays in the bundle until it expires,
//! because every leaf it signed expires with it (leaves are issued no longer
//! than their CA), so a replica that still serves one stays trusted.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// How long certificates live and when they are replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertPolicy {
    /// Lifetime of a serving certificate (`--cert-validity`).
    pub leaf_validity: Duration,
    /// A serving certificate is renewed this long before it expires
    /// (`--cert-renew-before`).
    pub leaf_renew_before: Duration,
    /// Lifetime of a CA (`--ca-validity`).
    pub ca_validity: Duration,
    /// A CA rotation starts this long before the CA expires
    /// (`--ca-renew-before`).
    pub ca_renew_before: Duration,
    /// How far before its issue a certificate's validity starts (clock skew
    /// between the replica and the apiserver).
    pub backdate: Duration,
    /// How long an injected bundle with a new CA has before that CA signs
    /// (the apiserver loads webhook configurations asynchronously).
    pub settle: Duration,
}

impl CertPolicy {
    /// Checks the order `renew-before < validity` of each certificate,
    /// `cert-validity <= ca-validity`, and `cert-renew-before <
    /// ca-renew-before` (a CA rotation starts before its leaves, clipped
    /// to the CA's expiry, need renewing); the error names the flags.
    pub fn validate(&self) -> Result<(), String> {
        let rules = [
            (
                self.leaf_renew_before < self.leaf_validity,
                "--cert-renew-before",
                "shorter than",
                "--cert-validity",
                self.leaf_renew_before,
                self.leaf_validity,
            ),
            (
                self.ca_renew_before < self.ca_validity,
                "--ca-renew-before",
                "shorter than",
                "--ca-validity",
                self.ca_renew_before,
                self.ca_validity,
            ),
            (
                self.leaf_validity <= self.ca_validity,
                "--cert-validity",
                "at most",
                "--ca-validity",
                self.leaf_validity,
                self.ca_validity,
            ),
            (
                self.leaf_renew_before < self.ca_renew_before,
                "--cert-renew-before",
                "shorter than",
                "--ca-renew-before",
                self.leaf_renew_before,
                self.ca_renew_before,
            ),
        ];
        for (holds, flag, relation, other, value, limit) in rules {
            if !holds {
                return Err(format!(
                    "{flag} ({value:?}) must be {relation} {other} ({limit:?})"
                ));
            }
        }
        Ok(())
    }
}

/// One certificate of the Secret, as the planner needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cert {
    /// SHA-256 of its DER, hex: which CA is which.
    pub fingerprint: String,
    /// Start of validity.
    pub not_before: Timestamp,
    /// End of validity.
    pub not_after: Timestamp,
}

/// The serving certificate (`tls.crt`, `tls.key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    /// Its validity.
    pub cert: Cert,
    /// Signed by the issuing CA, and its key matches it.
    pub from_issuer: bool,
    /// Its names are exactly the ones the replica is configured with.
    pub names_match: bool,
}

/// A Secret that parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The CA that signs serving certificates (`issuer.crt`, its key matching).
    pub issuer: Cert,
    /// A CA introduced but not yet signing (`next-issuer.crt`).
    pub next: Option<Cert>,
    /// Every CA the apiserver is to trust (`ca.crt`): the issuer, the next
    /// one, and earlier issuers not yet expired.
    pub bundle: Vec<Cert>,
    /// The serving certificate, when it parsed.
    pub leaf: Option<Leaf>,
}

/// The Secret as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Secret {
    /// Not there.
    Missing,
    /// There, but its issuing CA does not parse or its key does not match:
    /// why.
    Invalid(String),
    /// There and usable.
    Valid(Stored),
}

/// What one replica does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Issue a new CA and a serving certificate from it, replacing the
    /// Secret's content (or creating it): why.
    Issue(String),
    /// Set the configuration's caBundle to the Secret's `ca.crt`.
    Inject,
    /// Drop the expired earlier CAs from `ca.crt`.
    Retire,
    /// Issue a new CA into `next-issuer` and add it to `ca.crt` (phase 1).
    Introduce,
    /// The next CA becomes the issuer and signs a new serving certificate;
    /// the old issuer stays in `ca.crt` until it expires (phase 2).
    Promote,
    /// Issue a new serving certificate from the issuer: why.
    Renew(String),
    /// Nothing to change: serve the Secret's certificate.
    Serve,
}

/// The next step, from the Secret read, whether every webhook of the
/// configuration carries the Secret's `ca.crt` as caBundle, and `now`.
pub fn plan(policy: &CertPolicy, secret: &Secret, injected: bool, now: Timestamp) -> Action {
    let stored = match secret {
        Secret::Missing => return Action::Issue("the Secret does not exist".into()),
        Secret::Invalid(why) => return Action::Issue(why.clone()),
        Secret::Valid(stored) => stored,
    };
    if now >= stored.issuer.not_after {
        return Action::Issue("the issuing CA has expired".into());
    }
    let trusted = |cert: &Cert| {
        stored
            .bundle
            .iter()
            .any(|b| b.fingerprint == cert.fingerprint)
    };
    if !trusted(&stored.issuer) || stored.next.as_ref().is_some_and(|next| !trusted(next)) {
        return Action::Issue("ca.crt does not hold the issuing CAs".into());
    }
    if !injected {
        return Action::Inject;
    }
    let current = |cert: &Cert| {
        cert.fingerprint == stored.issuer.fingerprint
            || stored
                .next
                .as_ref()
                .is_some_and(|next| next.fingerprint == cert.fingerprint)
    };
    if stored
        .bundle
        .iter()
        .any(|ca| !current(ca) && now >= ca.not_after)
    {
        return Action::Retire;
    }
    match &stored.next {
        Some(next) if now >= after(next.not_before, policy.backdate + policy.settle) => {
            return Action::Promote;
        }
        Some(_) => {}
        None if now >= before(stored.issuer.not_after, policy.ca_renew_before) => {
            return Action::Introduce;
        }
        None => {}
    }
    let Some(leaf) = &stored.leaf else {
        return Action::Renew("the serving certificate does not parse".into());
    };
    if !leaf.from_issuer {
        return Action::Renew("the serving certificate is not from the issuing CA".into());
    }
    if !leaf.names_match {
        return Action::Renew("the serving certificate's names changed".into());
    }
    // A leaf already as long as its CA cannot be renewed longer.
    if now >= before(leaf.cert.not_after, policy.leaf_renew_before)
        && leaf.cert.not_after < stored.issuer.not_after
    {
        return Action::Renew("the serving certificate is due for renewal".into());
    }
    Action::Serve
}

fn before(at: Timestamp, by: Duration) -> Timestamp {
    SignedDuration::try_from(by)
        .ok()
        .and_then(|by| at.checked_sub(by).ok())
        .unwrap_or(Timestamp::MIN)
}

fn after(at: Timestamp, by: Duration) -> Timestamp {
    SignedDuration::try_from(by)
        .ok()
        .and_then(|by| at.checked_add(by).ok())
        .unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400;

    fn policy() -> CertPolicy {
        CertPolicy {
            leaf_validity: Duration::from_secs(365 * DAY),
            leaf_renew_before: Duration::from_secs(30 * DAY),
            ca_validity: Duration::from_secs(3650 * DAY),
            ca_renew_before: Duration::from_secs(730 * DAY),
            backdate: Duration::from_secs(60),
            settle: Duration::from_secs(3),
        }
    }

    /// Seconds since the epoch.
    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).expect("in range")
    }

    fn cert(name: &str, not_before: i64, not_after: i64) -> Cert {
        Cert {
            fingerprint: name.into(),
            not_before: at(not_before),
            not_after: at(not_after),
        }
    }

    fn days(n: i64) -> i64 {
        n * DAY as i64
    }

    /// CA "a" valid days 0..3650, its leaf days 0..365, injected.
    fn steady() -> Stored {
        let a = cert("a", 0, days(3650));
        Stored {
            issuer: a.clone(),
            next: None,
            bundle: vec![a],
            leaf: Some(Leaf {
                cert: cert("leaf", 0, days(365)),
                from_issuer: true,
                names_match: true,
            }),
        }
    }

    #[test]
    fn plans() {
        let renew = |why: &str| Action::Renew(why.into());
        let issue = |why: &str| Action::Issue(why.into());
        let with = |change: fn(&mut Stored)| {
            let mut stored = steady();
            change(&mut stored);
            Secret::Valid(stored)
        };
        // Phase 1 done: "b" introduced at day 3000 (its not_before backdated 60 s).
        // The leaf renewed at day 2900.
        fn renewed_late(stored: &mut Stored) {
            if let Some(leaf) = &mut stored.leaf {
                leaf.cert = cert("leaf", days(2900), days(3265));
            }
        }
        fn introduced(stored: &mut Stored) {
            renewed_late(stored);
            let b = cert("b", days(3000) - 60, days(6650));
            stored.next = Some(b.clone());
            stored.bundle.push(b);
        }
        // Phase 2 done: "b" issues, "a" still trusted, a leaf from "b"
        // (renewed at day 3600).
        let promoted = |stored: &mut Stored| {
            let b = cert("b", days(3000) - 60, days(6650));
            stored.issuer = b.clone();
            stored.bundle = vec![cert("a", 0, days(3650)), b];
            stored.leaf = Some(Leaf {
                cert: cert("leaf2", days(3600), days(3965)),
                from_issuer: true,
                names_match: true,
            });
        };
        let s = days(2920);
        // (Secret, injected, now in seconds, the action, why)
        let cases: Vec<(Secret, bool, i64, Action, &str)> = vec![
            (
                Secret::Missing,
                false,
                0,
                issue("the Secret does not exist"),
                "a fresh install",
            ),
            (
                Secret::Invalid("issuer.key does not match issuer.crt".into()),
                true,
                0,
                issue("issuer.key does not match issuer.crt"),
                "a broken Secret is replaced",
            ),
            (
                Secret::Valid(steady()),
                true,
                days(3650),
                issue("the issuing CA has expired"),
                "nothing to rotate from",
            ),
            (
                with(|s| s.bundle.clear()),
                true,
                days(1),
                issue("ca.crt does not hold the issuing CAs"),
                "the bundle lost its issuer",
            ),
            (
                with(|s| s.next = Some(cert("b", 0, days(3650)))),
                true,
                days(1),
                issue("ca.crt does not hold the issuing CAs"),
                "a next CA the bundle does not hold",
            ),
            (
                Secret::Valid(steady()),
                false,
                days(1),
                Action::Inject,
                "an empty or stale caBundle",
            ),
            (
                Secret::Valid(steady()),
                true,
                days(1),
                Action::Serve,
                "steady",
            ),
            (
                Secret::Valid(steady()),
                true,
                days(335) - 1,
                Action::Serve,
                "the leaf just before its renewal",
            ),
            (
                Secret::Valid(steady()),
                true,
                days(335),
                renew("the serving certificate is due for renewal"),
                "the leaf 30 days before expiry",
            ),
            (
                with(|s| s.leaf = None),
                true,
                days(1),
                renew("the serving certificate does not parse"),
                "no leaf",
            ),
            (
                with(|s| {
                    if let Some(leaf) = &mut s.leaf {
                        leaf.from_issuer = false;
                    }
                }),
                true,
                days(1),
                renew("the serving certificate is not from the issuing CA"),
                "a leaf of another CA",
            ),
            (
                with(|s| {
                    if let Some(leaf) = &mut s.leaf {
                        leaf.names_match = false;
                    }
                }),
                true,
                days(1),
                renew("the serving certificate's names changed"),
                "a new --extra-san",
            ),
            (
                with(|s| {
                    let b = cert("b", days(3630) - 60, days(7280));
                    s.next = Some(b.clone());
                    s.bundle.push(b);
                    if let Some(leaf) = &mut s.leaf {
                        leaf.cert = cert("leaf", days(3400), days(3650));
                    }
                }),
                true,
                days(3630) + 1,
                Action::Serve,
                "a leaf clipped to its CA's expiry is not renewed in a loop",
            ),
            (
                with(renewed_late),
                true,
                s - 1,
                Action::Serve,
                "the CA just before its rotation",
            ),
            (
                with(renewed_late),
                true,
                s,
                Action::Introduce,
                "phase 1: the CA 730 days before expiry",
            ),
            (
                with(introduced),
                false,
                days(3000) + 10,
                Action::Inject,
                "the bundle with the new CA goes to the apiserver first",
            ),
            (
                with(introduced),
                true,
                days(3000) + 2,
                Action::Serve,
                "injected, not yet settled: the old CA keeps signing",
            ),
            (
                with(introduced),
                true,
                days(3000) + 3,
                Action::Promote,
                "phase 2: injected and settled",
            ),
            (
                with(|s| {
                    introduced(s);
                    s.leaf = None;
                }),
                true,
                days(3000) + 1,
                renew("the serving certificate does not parse"),
                "while settling, the leaf still comes from the old CA",
            ),
            (
                with(promoted),
                true,
                days(3001),
                Action::Serve,
                "the old CA stays trusted while its leaves may be served",
            ),
            (
                with(promoted),
                true,
                days(3650) - 1,
                Action::Serve,
                "until the old CA expires",
            ),
            (
                with(promoted),
                true,
                days(3650),
                Action::Retire,
                "then it leaves the bundle",
            ),
            (
                with(promoted),
                false,
                days(3650),
                Action::Inject,
                "retiring waits for the bundle to be injected",
            ),
        ];
        for (secret, injected, now, want, why) in cases {
            assert_eq!(plan(&policy(), &secret, injected, at(now)), want, "{why}");
        }
    }

    #[test]
    fn policies_are_ordered() {
        let d = |days: u64| Duration::from_secs(days * DAY);
        let cases = [
            (policy(), None),
            (
                CertPolicy {
                    leaf_renew_before: d(365),
                    ..policy()
                },
                Some(
                    "--cert-renew-before (31536000s) must be shorter than --cert-validity (31536000s)",
                ),
            ),
            (
                CertPolicy {
                    ca_renew_before: d(3650),
                    ..policy()
                },
                Some(
                    "--ca-renew-before (315360000s) must be shorter than --ca-validity (315360000s)",
                ),
            ),
            (
                CertPolicy {
                    leaf_validity: d(4000),
                    ..policy()
                },
                Some("--cert-validity (345600000s) must be at most --ca-validity (315360000s)"),
            ),
            (
                CertPolicy {
                    ca_renew_before: d(30),
                    ..policy()
                },
                Some(
                    "--cert-renew-before (2592000s) must be shorter than --ca-renew-before (2592000s)",
                ),
            ),
        ];
        for (policy, broken) in cases {
            assert_eq!(policy.validate(), broken.map_or(Ok(()), |e| Err(e.into())));
        }
    }
}
