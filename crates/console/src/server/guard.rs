//! The rules every request meets before a page is read, as pure functions
//! (the router's middleware only applies them):
//!
//! - **Host** must name this console: loopback with the bound port
//!   (`127.0.0.1:PORT`, `localhost:PORT`, `[::1]:PORT`) or a host given with
//!   `--allowed-host`. A page of another site that rebinds its own name to
//!   127.0.0.1 (DNS rebinding) reaches the socket, but with its own name in
//!   `Host`: it gets 421 and nothing else.
//! - **Origin**: a POST must come from a page of this console (browsers send
//!   `Origin` on every POST); a form on another site is refused.
//! - **CSRF token**: a POST must also carry the token of the person's pages,
//!   a keyed hash (HMAC-SHA-256 with a key drawn at start) of what signed
//!   them in — the session id on a laptop, the bearer token's digest behind
//!   a proxy, whose own session cookie is ambient authority.
//! - **Security headers** on every answer, refusals and assets included: a
//!   Content-Security-Policy that allows nothing but the console's own
//!   script, style and fetches, no framing, no sniffing, no referrer.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The Content-Security-Policy of every answer.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; \
     frame-ancestors 'none'";

/// The headers every answer carries (Cache-Control is set per answer).
pub(crate) const SECURITY_HEADERS: [(&str, &str); 6] = [
    ("content-security-policy", CSP),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
];

/// Host names that are this machine; allowed with the bound port only.
const LOOPBACK: [&str; 3] = ["127.0.0.1", "localhost", "[::1]"];

/// Which `Host` values name this console.
#[derive(Debug, Clone)]
pub(crate) struct Hosts {
    /// The port the console listens on.
    pub(crate) port: u16,
    /// `--allowed-host` values: `name` (any port) or `name:port`.
    pub(crate) extra: Vec<String>,
}

impl Hosts {
    /// Whether `host` (a `Host` header value) names this console.
    pub(crate) fn allows(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        let Some((name, port)) = split_host(&host) else {
            return false;
        };
        if LOOPBACK.contains(&name) && port == Some(self.port) {
            return true;
        }
        self.extra.iter().any(|allowed| {
            let allowed = allowed.trim().to_ascii_lowercase();
            match split_host(&allowed) {
                Some((allowed_name, None)) => allowed_name == name,
                Some(_) => allowed == host,
                None => false,
            }
        })
    }
}

/// `name` and port of a `Host` value (`[v6]` keeps its brackets); `None`
/// when it is not one (empty, a bad port).
fn split_host(host: &str) -> Option<(&str, Option<u16>)> {
    let (name, port) = if host.starts_with('[') {
        let end = host.find(']')?;
        let (name, rest) = host.split_at(end + 1);
        match rest {
            "" => (name, None),
            _ => (name, Some(rest.strip_prefix(':')?)),
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    if name.is_empty() {
        return None;
    }
    let port = match port {
        Some(port) => Some(port.parse::<u16>().ok()?),
        None => None,
    };
    Some((name, port))
}

/// Why a POST was refused (the page names the rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No `Origin` header.
    NoOrigin,
    /// An `Origin` of another site.
    ForeignOrigin,
    /// No `csrf` field in the form.
    NoCsrf,
    /// A `csrf` field that is not this person's.
    WrongCsrf,
}

impl Refusal {
    /// The sentence a person reads: the rule and what broke it.
    pub(crate) fn message(self) -> &'static str {
        match self {
            Self::NoOrigin => {
                "Refused by the Origin rule: an action must come from a page of this console, and this request named no Origin. Open the page again and use its button."
            }
            Self::ForeignOrigin => {
                "Refused by the Origin rule: an action must come from a page of this console, and this one came from another site."
            }
            Self::NoCsrf => {
                "Refused by the CSRF rule: an action must carry the token of your pages (the form's csrf field), and this one carried none. Open the page again and use its button."
            }
            Self::WrongCsrf => {
                "Refused by the CSRF rule: an action must carry the token of your pages (the form's csrf field), and this one carried another. Open the page again and use its button."
            }
        }
    }
}

/// Whether `origin` (the `Origin` header, if any) is this console's own
/// for a request to `host`: `http://HOST` on a laptop; behind a proxy,
/// which ends TLS, `https://HOST` or `http://HOST`.
pub(crate) fn check_origin(
    origin: Option<&str>,
    host: &str,
    behind_proxy: bool,
) -> Result<(), Refusal> {
    let origin = origin.ok_or(Refusal::NoOrigin)?.trim();
    let host = host.trim().to_ascii_lowercase();
    let origin = origin.to_ascii_lowercase();
    let same = origin.strip_prefix("http://") == Some(host.as_str())
        || (behind_proxy && origin.strip_prefix("https://") == Some(host.as_str()));
    if same {
        Ok(())
    } else {
        Err(Refusal::ForeignOrigin)
    }
}

/// The key of every CSRF token of this process, drawn at start.
pub(crate) struct CsrfKey([u8; 32]);

impl CsrfKey {
    /// A key from the OS's random source.
    pub(crate) fn generate() -> anyhow::Result<Self> {
        Ok(Self(super::secret::random_bytes()?))
    }

    fn mac(&self, subject: &[u8]) -> Hmac<Sha256> {
        // An HMAC takes a key of any length; 32 bytes cannot be refused.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts a 32-byte key"));
        mac.update(subject);
        mac
    }

    /// The token of the person `subject` names (base64url).
    pub(crate) fn token(&self, subject: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(self.mac(subject).finalize().into_bytes())
    }

    /// Whether `presented` (the form's field, if any) is `subject`'s token;
    /// compared in constant time.
    pub(crate) fn check(&self, subject: &[u8], presented: Option<&str>) -> Result<(), Refusal> {
        let presented = presented.filter(|p| !p.is_empty()).ok_or(Refusal::NoCsrf)?;
        let bytes = URL_SAFE_NO_PAD
            .decode(presented.trim())
            .map_err(|_| Refusal::WrongCsrf)?;
        self.mac(subject)
            .verify_slice(&bytes)
            .map_err(|_| Refusal::WrongCsrf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        let laptop = Hosts {
            port: 8123,
            extra: Vec::new(),
        };
        let proxied = Hosts {
            port: 8080,
            extra: vec!["console.example.com".into(), "svc.ns:8080".into()],
        };
        let cases = [
            (&laptop, "127.0.0.1:8123", true),
            (&laptop, "localhost:8123", true),
            (&laptop, "LOCALHOST:8123", true),
            (&laptop, "[::1]:8123", true),
            (&laptop, "127.0.0.1:8124", false),
            (&laptop, "127.0.0.1", false),
            (&laptop, "rebind.attacker.test:8123", false),
            (&laptop, "localhost.attacker.test:8123", false),
            (&laptop, "", false),
            (&laptop, ":8123", false),
            (&laptop, "[::1", false),
            (&laptop, "127.0.0.1:99999", false),
            (&proxied, "console.example.com", true),
            (&proxied, "console.example.com:443", true),
            (&proxied, "svc.ns:8080", true),
            (&proxied, "svc.ns", false),
            (&proxied, "svc.ns:9090", false),
            (&proxied, "127.0.0.1:8080", true),
            (&proxied, "evil.example.com", false),
        ];
        for (hosts, host, allowed) in cases {
            assert_eq!(hosts.allows(host), allowed, "{host} with {hosts:?}");
        }
    }

    #[test]
    fn origins() {
        let cases = [
            (
                Some("http://127.0.0.1:8123"),
                "127.0.0.1:8123",
                false,
                Ok(()),
            ),
            (
                Some("http://localhost:8123"),
                "localhost:8123",
                false,
                Ok(()),
            ),
            (None, "127.0.0.1:8123", false, Err(Refusal::NoOrigin)),
            (
                Some("null"),
                "127.0.0.1:8123",
                false,
                Err(Refusal::ForeignOrigin),
            ),
            (
                Some("http://evil.test"),
                "127.0.0.1:8123",
                false,
                Err(Refusal::ForeignOrigin),
            ),
            (
                Some("http://localhost:8123"),
                "127.0.0.1:8123",
                false,
                Err(Refusal::ForeignOrigin),
            ),
            (
                Some("https://127.0.0.1:8123"),
                "127.0.0.1:8123",
                false,
                Err(Refusal::ForeignOrigin),
            ),
            (Some("https://c.example"), "c.example", true, Ok(())),
            (Some("http://c.example"), "c.example", true, Ok(())),
            (
                Some("https://c.example.evil"),
                "c.example",
                true,
                Err(Refusal::ForeignOrigin),
            ),
        ];
        for (origin, host, proxy, want) in cases {
            assert_eq!(check_origin(origin, host, proxy), want, "{origin:?} {host}");
        }
    }

    #[test]
    fn csrf_tokens_are_the_subjects_own() {
        let key = CsrfKey([7; 32]);
        let other_key = CsrfKey([8; 32]);
        let token = key.token(b"session-a");
        assert_eq!(key.check(b"session-a", Some(&token)), Ok(()));
        let cases = [
            (
                b"session-b".as_slice(),
                Some(token.clone()),
                Refusal::WrongCsrf,
            ),
            (b"session-a", None, Refusal::NoCsrf),
            (b"session-a", Some(String::new()), Refusal::NoCsrf),
            (b"session-a", Some("not base64!".into()), Refusal::WrongCsrf),
            (
                b"session-a",
                Some(other_key.token(b"session-a")),
                Refusal::WrongCsrf,
            ),
            (
                b"session-a",
                Some(token[..token.len() - 2].to_owned()),
                Refusal::WrongCsrf,
            ),
        ];
        for (subject, presented, want) in cases {
            assert_eq!(key.check(subject, presented.as_deref()), Err(want));
        }
    }

    #[test]
    fn every_refusal_names_its_rule() {
        for (refusal, rule) in [
            (Refusal::NoOrigin, "Origin rule"),
            (Refusal::ForeignOrigin, "Origin rule"),
            (Refusal::NoCsrf, "CSRF rule"),
            (Refusal::WrongCsrf, "CSRF rule"),
        ] {
            assert!(refusal.message().contains(rule), "{refusal:?}");
        }
    }
}
