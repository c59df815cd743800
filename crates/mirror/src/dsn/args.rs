//! Where `handoff controller`, `handoff mcp` and the SRE commands find the
//! mirror's URL, and the pool flags beside it.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use super::DsnError;
use crate::pool::settings::{DEFAULT_POOL_SIZE, PoolSettings};
use handoff_core::time::positive_duration;

/// Where `handoff controller` and `handoff mcp` find the mirror's URL: a
/// mounted Secret file, else the environment ([`PostgresArgs::resolve`]
/// with the variables each reads); `--postgres-url` (on the command line,
/// visible to anyone who can list processes) is kept for compatibility.
#[derive(Debug, Clone, clap::Args)]
pub struct PostgresArgs {
    /// The mirror's PostgreSQL URL, on the command line (kept for
    /// compatibility: prefer --postgres-url-file or the environment, which
    /// `ps` does not show). Wins over both. Without any of them the URL is
    /// HANDOFF_POSTGRES_URL (the controller also reads DATABASE_URL), and
    /// without that the mirror is off. `sslmode` and `sslrootcert` (or
    /// PGSSLMODE, PGSSLROOTCERT) mean what they mean to libpq.
    #[arg(long, value_name = "URL", value_parser = secret)]
    pub postgres_url: Option<SecretString>,
    /// Read the mirror's PostgreSQL URL from this file (e.g. a mounted
    /// Secret; surrounding whitespace is ignored). Wins over the environment.
    #[arg(long, value_name = "PATH")]
    pub postgres_url_file: Option<PathBuf>,
    /// Most time one PostgreSQL call may take: getting a pooled connection
    /// (connecting if needed) and running the statement. Also the session's
    /// statement_timeout and idle_in_transaction_session_timeout.
    #[arg(long, env = "HANDOFF_POSTGRES_TIMEOUT", value_name = "DURATION", default_value = "5s", value_parser = positive_duration)]
    pub postgres_timeout: Duration,
    /// Most PostgreSQL connections open at once.
    #[arg(long, env = "HANDOFF_POSTGRES_POOL_SIZE", value_name = "N", default_value_t = NonZeroUsize::new(DEFAULT_POOL_SIZE).unwrap_or(NonZeroUsize::MIN))]
    pub postgres_pool_size: NonZeroUsize,
}

impl Default for PostgresArgs {
    fn default() -> Self {
        let pool = PoolSettings::default();
        Self {
            postgres_url: None,
            postgres_url_file: None,
            postgres_timeout: pool.timeout,
            postgres_pool_size: NonZeroUsize::new(pool.size).unwrap_or(NonZeroUsize::MIN),
        }
    }
}

fn secret(value: &str) -> Result<SecretString, std::convert::Infallible> {
    Ok(value.into())
}

impl PostgresArgs {
    /// The pool and timeout these flags ask for.
    pub fn pool(&self) -> PoolSettings {
        PoolSettings {
            timeout: self.postgres_timeout,
            size: self.postgres_pool_size.get(),
        }
    }

    /// The URL: `--postgres-url`, else the contents of
    /// `--postgres-url-file`, else the first of `env_names` that `env` has
    /// (non-empty); `None` when there is none (the mirror is off).
    pub fn resolve(
        &self,
        env_names: &[&str],
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<String>, DsnError> {
        if let Some(url) = &self.postgres_url {
            let url = url.expose_secret().trim();
            return Ok((!url.is_empty()).then(|| url.to_owned()));
        }
        if let Some(path) = &self.postgres_url_file {
            return read_url_file(path).map(Some);
        }
        Ok(env_names
            .iter()
            .filter_map(|name| env(name))
            .map(|url| url.trim().to_owned())
            .find(|url| !url.is_empty()))
    }
}

fn read_url_file(path: &Path) -> Result<String, DsnError> {
    let problem = |problem: String| DsnError::File {
        path: path.display().to_string(),
        problem,
    };
    let text = std::fs::read_to_string(path).map_err(|e| problem(e.to_string()))?;
    let url = text.trim();
    if url.is_empty() {
        return Err(problem("the file is empty".into()));
    }
    Ok(url.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An environment: `(name, value)`.
    type Env = &'static [(&'static str, &'static str)];

    #[test]
    fn the_url_comes_from_the_flag_the_file_then_the_environment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("dsn");
        std::fs::write(&file, "postgres://from-file/db\n").expect("write");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").expect("write");
        let args = |flag: Option<&str>, path: Option<&Path>| PostgresArgs {
            postgres_url: flag.map(SecretString::from),
            postgres_url_file: path.map(Path::to_owned),
            ..PostgresArgs::default()
        };
        let both: Env = &[
            ("HANDOFF_POSTGRES_URL", "postgres://handoff-env/db"),
            ("DATABASE_URL", "postgres://database-env/db"),
        ];
        let names = ["HANDOFF_POSTGRES_URL", "DATABASE_URL"];
        let cases: &[(PostgresArgs, Env, Option<&str>)] = &[
            (
                args(Some("postgres://flag/db"), Some(&file)),
                both,
                Some("postgres://flag/db"),
            ),
            (
                args(None, Some(&file)),
                both,
                Some("postgres://from-file/db"),
            ),
            (args(None, None), both, Some("postgres://handoff-env/db")),
            (
                args(None, None),
                &[
                    ("HANDOFF_POSTGRES_URL", " "),
                    ("DATABASE_URL", "postgres://database-env/db"),
                ],
                Some("postgres://database-env/db"),
            ),
            (args(None, None), &[], None),
            (args(Some(""), None), both, None),
        ];
        for (args, env, expected) in cases {
            let vars: Vec<(String, String)> = env
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect();
            let got = args
                .resolve(&names, |name| {
                    vars.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
                })
                .expect("resolves");
            assert_eq!(got.as_deref(), *expected, "{args:?} {env:?}");
        }
        // The bridge reads only its own variable.
        let bridge = args(None, None)
            .resolve(&["HANDOFF_POSTGRES_URL"], |name| {
                (name == "DATABASE_URL").then(|| "postgres://app/db".to_owned())
            })
            .expect("resolves");
        assert_eq!(bridge, None);
        for path in [empty, dir.path().join("missing")] {
            let err = args(None, Some(&path))
                .resolve(&names, |_| None)
                .expect_err("refused")
                .to_string();
            assert!(
                err.starts_with(&format!("--postgres-url-file {}: ", path.display())),
                "{err}"
            );
        }
        let shown = format!("{:?}", args(Some("postgres://u:secret@h/db"), None));
        assert!(!shown.contains("secret"), "{shown}");
    }

    #[test]
    fn timeout_and_pool_flags() {
        use clap::Parser;
        #[derive(Debug, Parser)]
        struct Cli {
            #[command(flatten)]
            postgres: PostgresArgs,
        }
        let parse = |line: &[&str]| {
            Cli::try_parse_from(std::iter::once("handoff").chain(line.iter().copied()))
                .map(|cli| cli.postgres.pool())
        };
        assert_eq!(
            parse(&[]).expect("defaults"),
            PoolSettings {
                timeout: Duration::from_secs(5),
                size: 4
            }
        );
        assert_eq!(PostgresArgs::default().pool(), PoolSettings::default());
        assert_eq!(
            parse(&["--postgres-timeout", "1500ms", "--postgres-pool-size", "2"]).expect("flags"),
            PoolSettings {
                timeout: Duration::from_millis(1500),
                size: 2
            }
        );
        for wrong in [
            &["--postgres-timeout", "0s"][..],
            &["--postgres-timeout", "soon"],
            &["--postgres-pool-size", "0"],
        ] {
            assert!(parse(wrong).is_err(), "{wrong:?}");
        }
    }
}
