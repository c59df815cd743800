//! Laptop mode's front door: a one-time secret, printed in a link, swapped
//! once for a session cookie. Any local user can connect to 127.0.0.1, and
//! any web page can make the browser send requests there; only the person
//! who started `handoff console` saw the link.
//!
//! Only digests are kept (SHA-256), compared in constant time; the secret
//! works once, so a link read later from the terminal's scrollback, a
//! browser's history or a shell's process list signs no one in.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The cookie that carries the session (the `__Host-` prefix makes the
/// browser refuse it unless Secure, Path=/ and without a Domain).
pub(crate) const COOKIE: &str = "__Host-handoff-console";

/// 32 bytes from the operating system's random source.
pub(crate) fn random_bytes() -> anyhow::Result<[u8; 32]> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("the operating system gave no random bytes: {e}"))?;
    Ok(bytes)
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// What a presented link secret turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Redeemed {
    /// The secret, used now for the first time.
    First,
    /// The secret, already used.
    Used,
    /// Not the secret.
    Wrong,
}

/// The one-time secret of the sign-in link (its digest) and whether it
/// was used.
pub(crate) struct OneTimeLink {
    digest: [u8; 32],
    used: AtomicBool,
}

impl OneTimeLink {
    /// A new link secret: the secret itself (base64url, for the link) and
    /// what the console keeps of it.
    pub(crate) fn generate() -> anyhow::Result<(String, Self)> {
        let secret = URL_SAFE_NO_PAD.encode(random_bytes()?);
        let link = Self {
            digest: digest(&secret),
            used: AtomicBool::new(false),
        };
        Ok((secret, link))
    }

    /// Checks `presented` and uses the secret up when it is the one.
    pub(crate) fn redeem(&self, presented: &str) -> Redeemed {
        if !bool::from(digest(presented).ct_eq(&self.digest)) {
            return Redeemed::Wrong;
        }
        match self
            .used
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Redeemed::First,
            Err(_) => Redeemed::Used,
        }
    }
}

/// The one session of a laptop console (the link signs in once): the
/// digest of its id, once signed in.
#[derive(Default)]
pub(crate) struct Session(Mutex<Option<[u8; 32]>>);

impl Session {
    /// Starts the session; returns its id, for the cookie.
    pub(crate) fn start(&self) -> anyhow::Result<String> {
        let id = URL_SAFE_NO_PAD.encode(random_bytes()?);
        let mut slot = self
            .0
            .lock()
            .map_err(|_| anyhow::anyhow!("the session lock is poisoned"))?;
        *slot = Some(digest(&id));
        Ok(id)
    }

    /// Whether `id` (a cookie's value) is the session's; constant time.
    pub(crate) fn is(&self, id: &str) -> bool {
        self.0
            .lock()
            .ok()
            .and_then(|slot| *slot)
            .is_some_and(|kept| bool::from(digest(id).ct_eq(&kept)))
    }
}

/// The `Set-Cookie` value of session `id`.
pub(crate) fn set_cookie(id: &str) -> String {
    format!("{COOKIE}={id}; Secure; HttpOnly; SameSite=Strict; Path=/")
}

/// The value of cookie [`COOKIE`] in a `Cookie` header, if there.
pub(crate) fn cookie_of(header: &str) -> Option<&str> {
    header.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        (name == COOKIE && !value.is_empty()).then_some(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_works_once() {
        let (secret, link) = OneTimeLink::generate().expect("random");
        assert_eq!(secret.len(), 43, "32 bytes in base64url");
        assert_eq!(link.redeem("wrong"), Redeemed::Wrong);
        assert_eq!(link.redeem(""), Redeemed::Wrong);
        assert_eq!(link.redeem(&secret), Redeemed::First);
        assert_eq!(link.redeem(&secret), Redeemed::Used);
        assert_eq!(link.redeem("wrong"), Redeemed::Wrong);
    }

    #[test]
    fn secrets_differ() {
        let (a, _) = OneTimeLink::generate().expect("random");
        let (b, _) = OneTimeLink::generate().expect("random");
        assert_ne!(a, b);
    }

    #[test]
    fn only_the_sessions_id_is_it() {
        let session = Session::default();
        assert!(!session.is("anything"));
        let id = session.start().expect("random");
        assert!(session.is(&id));
        assert!(!session.is("anything"));
        assert!(!session.is(""));
    }

    #[test]
    fn cookies() {
        let cases = [
            ("__Host-handoff-console=abc", Some("abc")),
            ("a=1; __Host-handoff-console=abc; b=2", Some("abc")),
            ("__Host-handoff-console=", None),
            ("handoff-console=abc", None),
            ("", None),
        ];
        for (header, want) in cases {
            assert_eq!(cookie_of(header), want, "{header}");
        }
        assert_eq!(
            set_cookie("x"),
            "__Host-handoff-console=x; Secure; HttpOnly; SameSite=Strict; Path=/"
        );
    }
}
