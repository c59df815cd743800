//! The mirror's PostgreSQL URL: where it comes from ([`PostgresArgs`]),
//! libpq's `sslmode` and `sslrootcert` ([`split`]: tokio-postgres knows
//! neither `verify-ca` / `verify-full` nor `sslrootcert`, so both are taken
//! out of the URL here and applied by [`super::tls`]), and the password kept
//! out of every display ([`redact`]).
//!
//! libpq's rules, as this module applies them:
//!
//! | `sslmode` | TLS | the server's certificate |
//! |---|---|---|
//! | `disable` | never | — |
//! | `prefer` (default) | when the server offers it, else plaintext | not verified |
//! | `require` | always | not verified; with `sslrootcert`, as `verify-ca` |
//! | `verify-ca` | always | chain verified against `sslrootcert`, not the host name |
//! | `verify-full` | always | chain and host name verified |
//!
//! `sslmode` / `sslrootcert` in the URL win over `PGSSLMODE` /
//! `PGSSLROOTCERT` in the environment (an empty variable counts as unset).
//! Two differences from libpq: there is no default root certificate file
//! (`~/.postgresql/root.crt`), so `verify-ca` / `verify-full` need
//! `sslrootcert`; and `prefer` never verifies (libpq verifies when a root
//! certificate is given, then falls back to plaintext when that fails).
//!
//! Where the URL comes from is [`PostgresArgs`] (`args`), and how it is
//! shown is [`redact`] (`redact`); this file reads the TLS settings out of it.

mod args;
mod redact;

use std::fmt;
use std::path::PathBuf;

use percent_encoding::percent_decode_str;

pub use self::args::PostgresArgs;
pub use self::redact::redact;

/// The environment variable libpq reads `sslmode` from.
pub const PGSSLMODE: &str = "PGSSLMODE";
/// The environment variable libpq reads `sslrootcert` from.
pub const PGSSLROOTCERT: &str = "PGSSLROOTCERT";

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plaintext only.
    Disable,
    /// TLS when the server offers it, not verified; else plaintext.
    Prefer,
    /// TLS; verified only when a root certificate is given (then as `VerifyCa`).
    Require,
    /// TLS; the chain verified against the root certificate, not the host name.
    VerifyCa,
    /// TLS; the chain and the host name verified.
    VerifyFull,
}

impl SslMode {
    /// Every mode, in libpq's order (weakest first).
    pub const ALL: [SslMode; 5] = [
        SslMode::Disable,
        SslMode::Prefer,
        SslMode::Require,
        SslMode::VerifyCa,
        SslMode::VerifyFull,
    ];

    /// The mode spelled as in a URL.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// The mode named `value` (exactly, as libpq).
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == value)
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What is checked of the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verification {
    /// Nothing (plaintext, or TLS that only encrypts).
    Nothing,
    /// The chain, against the root certificate.
    Chain,
    /// The chain and the host name.
    ChainAndHostName,
}

/// The connection's TLS settings: libpq's `sslmode` and `sslrootcert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// `sslmode`.
    pub mode: SslMode,
    /// `sslrootcert`: a PEM file of CA certificates.
    pub root_cert: Option<PathBuf>,
}

impl TlsSettings {
    /// What the mode and root certificate verify (libpq's table, module docs).
    pub(crate) fn verification(&self) -> Verification {
        match (self.mode, &self.root_cert) {
            (SslMode::Disable | SslMode::Prefer, _) | (SslMode::Require, None) => {
                Verification::Nothing
            }
            (SslMode::Require, Some(_)) | (SslMode::VerifyCa, _) => Verification::Chain,
            (SslMode::VerifyFull, _) => Verification::ChainAndHostName,
        }
    }

    /// The negotiation tokio-postgres does: plaintext, TLS when offered, or
    /// TLS or nothing.
    pub(crate) fn negotiation(&self) -> tokio_postgres::config::SslMode {
        match self.mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                tokio_postgres::config::SslMode::Require
            }
        }
    }
}

impl fmt::Display for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sslmode={}", self.mode)?;
        if let Some(path) = &self.root_cert {
            write!(f, ", sslrootcert={}", path.display())?;
        }
        Ok(())
    }
}

/// A connection string split in two: what tokio-postgres parses, and the
/// TLS settings it does not know.
#[derive(Clone, PartialEq, Eq)]
pub struct Dsn {
    /// The URL (or `key=value` string) without `sslmode` and `sslrootcert`.
    pub rest: String,
    /// `sslmode` / `sslrootcert` from the URL, else from the environment.
    pub tls: TlsSettings,
}

impl fmt::Debug for Dsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dsn")
            .field("rest", &redact(&self.rest))
            .field("tls", &self.tls)
            .finish()
    }
}

/// Why a connection string or its source is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DsnError {
    /// `sslmode` is none of libpq's.
    #[error(
        "invalid sslmode {value:?} in {origin}: expected one of disable, prefer, require, verify-ca, verify-full"
    )]
    InvalidSslMode {
        /// The value given.
        value: String,
        /// `the PostgreSQL URL` or `PGSSLMODE`.
        origin: &'static str,
    },
    /// `verify-ca` / `verify-full` without a root certificate.
    #[error(
        "sslmode={mode} verifies the server's certificate and needs sslrootcert (a PEM file of CA certificates): add sslrootcert=/path/to/ca.crt to the PostgreSQL URL or set PGSSLROOTCERT"
    )]
    MissingRootCert {
        /// The mode that needs one.
        mode: SslMode,
    },
    /// `--postgres-url-file` cannot be read, or is empty.
    #[error("--postgres-url-file {path}: {problem}")]
    File {
        /// The file.
        path: String,
        /// What is wrong (never its contents).
        problem: String,
    },
}

/// Splits `dsn` (a `postgres://` / `postgresql://` URL or a libpq
/// `key=value` string) into what tokio-postgres parses and the TLS
/// settings, which come from the URL, else from `env` (`PGSSLMODE`,
/// `PGSSLROOTCERT`), else default to `prefer` and none.
///
/// A string that does not parse is returned whole as `rest`, for
/// tokio-postgres to name what is wrong with it.
pub fn split(dsn: &str, env: impl Fn(&str) -> Option<String>) -> Result<Dsn, DsnError> {
    let (rest, params) = take_tls_params(dsn);
    let env = |name: &str| env(name).filter(|v| !v.is_empty());
    let mode = match (params.sslmode, env(PGSSLMODE)) {
        (Some(value), _) => parse_mode(&value, "the PostgreSQL URL")?,
        (None, Some(value)) => parse_mode(&value, PGSSLMODE)?,
        (None, None) => SslMode::Prefer,
    };
    let root_cert = params
        .sslrootcert
        .filter(|v| !v.is_empty())
        .or_else(|| env(PGSSLROOTCERT))
        .map(PathBuf::from);
    if matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull) && root_cert.is_none() {
        return Err(DsnError::MissingRootCert { mode });
    }
    Ok(Dsn {
        rest,
        tls: TlsSettings { mode, root_cert },
    })
}

fn parse_mode(value: &str, origin: &'static str) -> Result<SslMode, DsnError> {
    SslMode::parse(value).ok_or_else(|| DsnError::InvalidSslMode {
        value: value.to_owned(),
        origin,
    })
}

/// `sslmode` / `sslrootcert` as found in a connection string (the last
/// occurrence wins, as in libpq).
#[derive(Debug, Default)]
struct TlsParams {
    sslmode: Option<String>,
    sslrootcert: Option<String>,
}

impl TlsParams {
    /// Keeps `value` when `key` is one of ours; `true` when it was.
    fn take(&mut self, key: &str, value: String) -> bool {
        match key {
            "sslmode" => self.sslmode = Some(value),
            "sslrootcert" => self.sslrootcert = Some(value),
            _ => return false,
        }
        true
    }
}

/// The URL prefixes tokio-postgres (and libpq) accept.
const URL_PREFIXES: [&str; 2] = ["postgres://", "postgresql://"];

fn url_prefix_len(dsn: &str) -> Option<usize> {
    URL_PREFIXES
        .iter()
        .find(|p| dsn.starts_with(**p))
        .map(|p| p.len())
}

/// `dsn` without its `sslmode` / `sslrootcert`, and their values.
fn take_tls_params(dsn: &str) -> (String, TlsParams) {
    let mut params = TlsParams::default();
    if let Some(prefix) = url_prefix_len(dsn) {
        // The query starts at the first `?` after the user info (which ends at
        // the first `@`, as tokio-postgres reads it: a password may hold `?`).
        let after_user = dsn[prefix..].find('@').map_or(prefix, |at| prefix + at + 1);
        let Some(q) = dsn[after_user..].find('?').map(|q| after_user + q) else {
            return (dsn.to_owned(), params);
        };
        let kept: Vec<&str> = dsn[q + 1..]
            .split('&')
            .filter(|pair| !pair.is_empty())
            .filter(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                !params.take(&decode(key), decode(value))
            })
            .collect();
        let mut rest = dsn[..q].to_owned();
        if !kept.is_empty() {
            rest.push('?');
            rest.push_str(&kept.join("&"));
        }
        return (rest, params);
    }
    let Some(pairs) = keyword_pairs(dsn) else {
        return (dsn.to_owned(), params);
    };
    let kept: Vec<&str> = pairs
        .into_iter()
        .filter(|p| !params.take(&dsn[p.key.clone()], p.value.clone()))
        .map(|p| &dsn[p.whole])
        .collect();
    (kept.join(" "), params)
}

fn decode(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// One `key=value` of a libpq keyword/value string, as byte ranges of it.
struct Pair {
    key: std::ops::Range<usize>,
    value_span: std::ops::Range<usize>,
    whole: std::ops::Range<usize>,
    /// The value with quotes and escapes resolved.
    value: String,
}

/// The pairs of a keyword/value string, following tokio-postgres's parser
/// (keywords of letters, digits and `_`; values bare or `'quoted'`, `\`
/// escaping); `None` when it does not parse.
fn keyword_pairs(dsn: &str) -> Option<Vec<Pair>> {
    let bytes = dsn.as_bytes();
    let skip_ws = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    let mut pairs = Vec::new();
    let mut i = skip_ws(0);
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        let key = start..i;
        if key.is_empty() {
            return None;
        }
        i = skip_ws(i);
        if bytes.get(i) != Some(&b'=') {
            return None;
        }
        i = skip_ws(i + 1);
        let value_start = i;
        let mut value = String::new();
        let quoted = bytes.get(i) == Some(&b'\'');
        if quoted {
            i += 1;
        }
        let mut chars = dsn[i..].char_indices();
        let mut closed = !quoted;
        let mut end = dsn.len();
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' => value.push(chars.next()?.1),
                '\'' if quoted => {
                    end = i + at + 1;
                    closed = true;
                    break;
                }
                c if !quoted && c.is_whitespace() => {
                    end = i + at;
                    break;
                }
                c => value.push(c),
            }
        }
        if !closed || (!quoted && end == value_start) {
            return None;
        }
        pairs.push(Pair {
            key,
            value_span: value_start..end,
            whole: start..end,
            value,
        });
        i = skip_ws(end);
    }
    Some(pairs)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// An environment: `(name, value)`.
    type Env = &'static [(&'static str, &'static str)];

    fn env_of<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_the_url() {
        use SslMode::*;
        // (DSN, environment, what tokio-postgres gets, mode, root certificate)
        let cases: &[(&str, Env, &str, SslMode, Option<&str>)] = &[
            (
                "postgres://u:p@h:5432/db",
                &[],
                "postgres://u:p@h:5432/db",
                Prefer,
                None,
            ),
            (
                "postgres://u:p@h/db?sslmode=verify-full&sslrootcert=/ca.crt",
                &[],
                "postgres://u:p@h/db",
                VerifyFull,
                Some("/ca.crt"),
            ),
            (
                "postgres://h/db?application_name=x&sslmode=require",
                &[],
                "postgres://h/db?application_name=x",
                Require,
                None,
            ),
            (
                "postgresql://h/db?sslrootcert=%2Fetc%2Fca%20b.crt&sslmode=verify-ca&connect_timeout=5",
                &[],
                "postgresql://h/db?connect_timeout=5",
                VerifyCa,
                Some("/etc/ca b.crt"),
            ),
            // A password may hold `?`: the query starts after the user info.
            (
                "postgres://u:p?x@h/db?sslmode=disable",
                &[],
                "postgres://u:p?x@h/db",
                Disable,
                None,
            ),
            // The last occurrence wins, as in libpq.
            (
                "postgres://h/db?sslmode=disable&sslmode=require",
                &[],
                "postgres://h/db",
                Require,
                None,
            ),
            // The environment when the URL says nothing ...
            (
                "postgres://h/db",
                &[("PGSSLMODE", "verify-full"), ("PGSSLROOTCERT", "/env.crt")],
                "postgres://h/db",
                VerifyFull,
                Some("/env.crt"),
            ),
            // ... the URL wins over it ...
            (
                "postgres://h/db?sslmode=require&sslrootcert=/url.crt",
                &[("PGSSLMODE", "disable"), ("PGSSLROOTCERT", "/env.crt")],
                "postgres://h/db",
                Require,
                Some("/url.crt"),
            ),
            // ... and an empty variable is unset.
            (
                "postgres://h/db",
                &[("PGSSLMODE", ""), ("PGSSLROOTCERT", "")],
                "postgres://h/db",
                Prefer,
                None,
            ),
            // libpq's keyword/value form.
            (
                "host=h user=u sslmode=verify-full sslrootcert='/a b/c\\'s.crt' dbname=d",
                &[],
                "host=h user=u dbname=d",
                VerifyFull,
                Some("/a b/c's.crt"),
            ),
            ("host=h sslmode = require", &[], "host=h", Require, None),
            // What does not parse goes to tokio-postgres whole, for its error.
            ("host='h", &[], "host='h", Prefer, None),
        ];
        for (dsn, env, rest, mode, root) in cases {
            let split = split(dsn, env_of(env)).unwrap_or_else(|e| panic!("{dsn}: {e}"));
            assert_eq!(split.rest, *rest, "{dsn}");
            assert_eq!(split.tls.mode, *mode, "{dsn}");
            assert_eq!(split.tls.root_cert.as_deref(), root.map(Path::new), "{dsn}");
        }
    }

    #[test]
    fn a_wrong_sslmode_or_a_missing_root_certificate_is_refused() {
        let cases: &[(&str, Env, &str)] = &[
            (
                "postgres://u:secret@h/db?sslmode=bogus",
                &[],
                "invalid sslmode \"bogus\" in the PostgreSQL URL: expected one of disable, prefer, require, verify-ca, verify-full",
            ),
            (
                "postgres://h/db",
                &[("PGSSLMODE", "verify_full")],
                "invalid sslmode \"verify_full\" in PGSSLMODE: expected one of disable, prefer, require, verify-ca, verify-full",
            ),
            // libpq spells modes in lower case only.
            (
                "host=h sslmode=REQUIRE",
                &[],
                "invalid sslmode \"REQUIRE\" in the PostgreSQL URL",
            ),
            (
                "postgres://h/db?sslmode=verify-full",
                &[],
                "sslmode=verify-full verifies the server's certificate and needs sslrootcert",
            ),
            (
                "postgres://h/db?sslrootcert=",
                &[("PGSSLMODE", "verify-ca")],
                "sslmode=verify-ca verifies the server's certificate and needs sslrootcert",
            ),
        ];
        for (dsn, env, message) in cases {
            let err = split(dsn, env_of(env)).expect_err(dsn).to_string();
            assert!(err.starts_with(message), "{dsn}: {err}");
            assert!(!err.contains('\n'), "one line: {err}");
            assert!(!err.contains("secret"), "{err}");
        }
    }

    #[test]
    fn what_each_mode_verifies_and_negotiates() {
        use Verification::*;
        use tokio_postgres::config::SslMode as Negotiation;
        let cases = [
            (SslMode::Disable, false, Nothing, Negotiation::Disable),
            (SslMode::Disable, true, Nothing, Negotiation::Disable),
            (SslMode::Prefer, false, Nothing, Negotiation::Prefer),
            (SslMode::Prefer, true, Nothing, Negotiation::Prefer),
            (SslMode::Require, false, Nothing, Negotiation::Require),
            (SslMode::Require, true, Chain, Negotiation::Require),
            (SslMode::VerifyCa, true, Chain, Negotiation::Require),
            (
                SslMode::VerifyFull,
                true,
                ChainAndHostName,
                Negotiation::Require,
            ),
        ];
        for (mode, with_root, verification, negotiation) in cases {
            let tls = TlsSettings {
                mode,
                root_cert: with_root.then(|| PathBuf::from("/ca.crt")),
            };
            assert_eq!(tls.verification(), verification, "{tls}");
            assert_eq!(tls.negotiation(), negotiation, "{tls}");
        }
    }

    #[test]
    fn the_documented_dsn_is_verify_full_with_the_mounted_ca() {
        let install = include_str!("../../../../docs/install.md");
        let documented: Vec<&str> = install
            .lines()
            .filter_map(|l| Some(l.split_once("dsn='")?.1.split_once('\'')?.0))
            .collect();
        assert_eq!(
            documented.len(),
            1,
            "one DSN in docs/install.md: {documented:?}"
        );
        let overlay = include_str!("../../../../config/overlays/postgres/kustomization.yaml");
        assert!(
            overlay.contains(documented[0]),
            "the overlay's comment shows the DSN of docs/install.md"
        );
        let dsn = split(documented[0], |_| None).expect("the documented DSN parses");
        assert_eq!(dsn.tls.mode, SslMode::VerifyFull);
        assert_eq!(
            dsn.tls.root_cert.as_deref(),
            Some(Path::new("/etc/handoff/postgres/ca.crt"))
        );
        let config: tokio_postgres::Config =
            dsn.rest.parse().expect("tokio-postgres parses the rest");
        assert_eq!(config.get_dbname(), Some("handoff"));
        assert!(!redact(documented[0]).contains("PASSWORD"));
    }
}
