//! `handoff mirror purge`: an administrator removes a leaked body (say, a
//! secret pasted into a handoff) from the mirror's history by hand.
//!
//! - it names a key, optionally one namespace and one revision; without
//!   `--namespace` it purges the key in every namespace, without
//!   `--revision` every revision of every incarnation;
//! - `--dry-run` counts the rows it would delete and deletes nothing;
//! - the DSN comes from the environment (`HANDOFF_POSTGRES_URL`, else
//!   `DATABASE_URL`), never from the command line, where it would be seen
//!   in process lists and shell history;
//! - it prints one line: how many rows went (or would go).
//!
//! Only history is touched: the current body is in the Handoff itself and
//! its mirror row; rewrite or delete the Handoff for that (its old
//! revisions are then forgotten, see [`super::Retention`]).
//!
//! [`plan`], [`Plan::report`] and [`dsn`] are pure; [`run`] is the I/O.

use std::io::Write;

use clap::{Args, Subcommand};

use super::{Mirror, MirrorError};
use handoff_core::api::validation;

/// Subcommands of `handoff mirror`.
#[derive(Debug, Subcommand)]
pub enum MirrorCommand {
    /// Delete a key's revisions from the mirror's history (a leaked secret).
    /// The PostgreSQL URL is read from HANDOFF_POSTGRES_URL, else DATABASE_URL.
    Purge(PurgeArgs),
}

/// Arguments of `handoff mirror purge`.
#[derive(Debug, Clone, Args)]
pub struct PurgeArgs {
    /// The handoff key whose history goes.
    #[arg(long, value_name = "KEY")]
    pub key: String,
    /// Only the key in this namespace [default: every namespace].
    #[arg(long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Only this revision [default: every revision].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
    pub revision: Option<i64>,
    /// Count the rows that would be deleted; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// The history rows a purge names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The key.
    pub key: String,
    /// One namespace, or every one.
    pub namespace: Option<String>,
    /// One revision, or every one.
    pub revision: Option<i64>,
}

/// A checked purge: what it names, and whether it only counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The rows named.
    pub scope: Scope,
    /// Count only.
    pub dry_run: bool,
}

/// The environment variables the DSN is read from, first found wins.
pub(crate) const DSN_VARIABLES: [&str; 2] = ["HANDOFF_POSTGRES_URL", "DATABASE_URL"];

/// Pure: the purge `args` ask for, or why they are wrong.
pub fn plan(args: PurgeArgs) -> Result<Plan, String> {
    validation::handoff_key(&args.key).map_err(|e| format!("--key: {e}"))?;
    if args.namespace.as_deref().is_some_and(str::is_empty) {
        return Err("--namespace: a namespace name, or leave it out for every namespace".into());
    }
    Ok(Plan {
        scope: Scope {
            key: args.key,
            namespace: args.namespace,
            revision: args.revision,
        },
        dry_run: args.dry_run,
    })
}

impl Plan {
    /// Pure: the one line that reports `rows` deleted (or counted).
    pub fn report(&self, rows: u64) -> String {
        let verb = if self.dry_run {
            "would purge"
        } else {
            "purged"
        };
        let noun = if rows == 1 { "row" } else { "rows" };
        let revision = self
            .scope
            .revision
            .map(|r| format!(" (revision {r})"))
            .unwrap_or_default();
        let place = match &self.scope.namespace {
            Some(namespace) => format!("in namespace {namespace}"),
            None => "in every namespace".to_owned(),
        };
        let dry = if self.dry_run {
            " (dry run: nothing deleted)"
        } else {
            ""
        };
        format!(
            "{verb} {rows} history {noun} of {:?}{revision} {place}{dry}",
            self.scope.key
        )
    }
}

/// Pure: the DSN and the variable it came from, from `var` (the
/// environment); empty values count as unset.
pub fn dsn(var: impl Fn(&str) -> Option<String>) -> Result<(&'static str, String), String> {
    DSN_VARIABLES
        .iter()
        .find_map(|name| var(name).filter(|v| !v.is_empty()).map(|v| (*name, v)))
        .ok_or_else(|| {
            format!(
                "set {} (or {}) to the mirror's PostgreSQL URL; it is never taken on the command line",
                DSN_VARIABLES[0], DSN_VARIABLES[1]
            )
        })
}

/// The rows of a [`Scope`], with the statement's head before it.
macro_rules! in_scope {
    ($head:literal) => {
        concat!(
            $head,
            " FROM handoff_revisions WHERE handoff_key = $1",
            " AND ($2::text IS NULL OR namespace = $2)",
            " AND ($3::bigint IS NULL OR revision = $3)"
        )
    };
}

const COUNT: &str = in_scope!("SELECT count(*)");
const DELETE: &str = in_scope!("DELETE");

impl Mirror {
    /// How many history rows `scope` names.
    pub(crate) async fn count_history(&self, scope: &Scope) -> Result<u64, MirrorError> {
        let (key, namespace, revision) = (&scope.key, &scope.namespace, &scope.revision);
        self.with(|c| async move {
            let n: i64 = c
                .query_one(COUNT, &[key, namespace, revision])
                .await?
                .get(0);
            Ok(u64::try_from(n).unwrap_or_default())
        })
        .await
    }

    /// Deletes the history rows `scope` names; returns how many.
    pub(crate) async fn purge_history(&self, scope: &Scope) -> Result<u64, MirrorError> {
        let (key, namespace, revision) = (&scope.key, &scope.namespace, &scope.revision);
        self.with(|c| async move { c.execute(DELETE, &[key, namespace, revision]).await })
            .await
    }
}

/// Runs `handoff mirror …`.
pub async fn run(command: MirrorCommand) -> anyhow::Result<()> {
    match command {
        MirrorCommand::Purge(args) => purge(args).await,
    }
}

async fn purge(args: PurgeArgs) -> anyhow::Result<()> {
    let plan = plan(args).map_err(anyhow::Error::msg)?;
    let (variable, url) = dsn(|name| std::env::var(name).ok()).map_err(anyhow::Error::msg)?;
    let mirror =
        Mirror::new(&url, false).map_err(|e| anyhow::anyhow!("the URL in {variable}: {e}"))?;
    let rows = if plan.dry_run {
        mirror.count_history(&plan.scope).await?
    } else {
        mirror.purge_history(&plan.scope).await?
    };
    writeln!(std::io::stdout().lock(), "{}", plan.report(rows))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(key: &str) -> PurgeArgs {
        PurgeArgs {
            key: key.into(),
            namespace: None,
            revision: None,
            dry_run: false,
        }
    }

    #[test]
    fn plans_name_a_key_and_optionally_a_namespace_and_a_revision() {
        let plan = plan(PurgeArgs {
            namespace: Some("team-a".into()),
            revision: Some(3),
            dry_run: true,
            ..args("acme/api#42")
        })
        .expect("valid");
        assert_eq!(
            plan,
            Plan {
                scope: Scope {
                    key: "acme/api#42".into(),
                    namespace: Some("team-a".into()),
                    revision: Some(3),
                },
                dry_run: true,
            }
        );
        let every = super::plan(args("k")).expect("valid");
        assert_eq!((every.scope.namespace, every.scope.revision), (None, None));
    }

    #[test]
    fn the_command_line() {
        #[derive(Debug, clap::Parser)]
        struct Cli {
            #[command(subcommand)]
            command: MirrorCommand,
        }
        let parse = |line: &[&str]| {
            clap::Parser::try_parse_from(["mirror", "purge"].iter().chain(line)).map(|cli: Cli| {
                match cli.command {
                    MirrorCommand::Purge(args) => args,
                }
            })
        };
        let all = parse(&[
            "--key",
            "K",
            "--namespace",
            "N",
            "--revision",
            "2",
            "--dry-run",
        ])
        .expect("every flag");
        assert_eq!(
            (
                all.key.as_str(),
                all.namespace.as_deref(),
                all.revision,
                all.dry_run
            ),
            ("K", Some("N"), Some(2), true)
        );
        let least = parse(&["--key", "K"]).expect("only the key");
        assert_eq!(
            (least.namespace, least.revision, least.dry_run),
            (None, None, false)
        );
        assert!(parse(&[]).is_err(), "the key is required");
        assert!(
            parse(&["--key", "K", "--revision", "0"]).is_err(),
            "revisions start at 1"
        );
        assert!(
            parse(&["--key", "K", "--postgres-url", "postgres://x"]).is_err(),
            "no DSN on the command line"
        );
    }

    #[test]
    fn bad_plans_say_which_flag() {
        let cases = [
            (args(""), "--key"),
            (args("a\nb"), "--key"),
            (
                PurgeArgs {
                    namespace: Some(String::new()),
                    ..args("k")
                },
                "--namespace",
            ),
        ];
        for (args, flag) in cases {
            let err = plan(args.clone()).expect_err(&format!("{args:?}"));
            assert!(err.starts_with(flag), "{err}");
        }
    }

    #[test]
    fn one_line_reports() {
        let plan = |namespace: Option<&str>, revision, dry_run| Plan {
            scope: Scope {
                key: "K".into(),
                namespace: namespace.map(str::to_owned),
                revision,
            },
            dry_run,
        };
        let cases = [
            (
                plan(Some("N"), None, false),
                3,
                r#"purged 3 history rows of "K" in namespace N"#,
            ),
            (
                plan(Some("N"), Some(2), false),
                1,
                r#"purged 1 history row of "K" (revision 2) in namespace N"#,
            ),
            (
                plan(None, None, false),
                0,
                r#"purged 0 history rows of "K" in every namespace"#,
            ),
            (
                plan(Some("N"), None, true),
                3,
                r#"would purge 3 history rows of "K" in namespace N (dry run: nothing deleted)"#,
            ),
        ];
        for (plan, rows, line) in cases {
            assert_eq!(plan.report(rows), line);
        }
    }

    #[test]
    fn keys_are_quoted_so_the_line_stays_one_line() {
        let plan = Plan {
            scope: Scope {
                key: "a \"quoted\" key".into(),
                namespace: None,
                revision: None,
            },
            dry_run: false,
        };
        assert_eq!(
            plan.report(2),
            r#"purged 2 history rows of "a \"quoted\" key" in every namespace"#
        );
    }

    #[test]
    fn the_dsn_comes_from_the_environment_handoff_variable_first() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            dsn(env(&[
                ("DATABASE_URL", "postgres://db"),
                ("HANDOFF_POSTGRES_URL", "postgres://handoff")
            ])),
            Ok(("HANDOFF_POSTGRES_URL", "postgres://handoff".to_owned()))
        );
        assert_eq!(
            dsn(env(&[
                ("DATABASE_URL", "postgres://db"),
                ("HANDOFF_POSTGRES_URL", "")
            ])),
            Ok(("DATABASE_URL", "postgres://db".to_owned())),
            "an empty variable is unset"
        );
        let err = dsn(env(&[])).expect_err("no DSN");
        assert!(
            err.contains("HANDOFF_POSTGRES_URL") && err.contains("DATABASE_URL"),
            "{err}"
        );
    }

    #[test]
    fn count_and_delete_name_the_same_rows() {
        let scope = |sql: &'static str| sql.split_once(" FROM ").map(|(_, rest)| rest);
        assert_eq!(scope(COUNT), scope(DELETE));
        assert!(COUNT.starts_with("SELECT count(*) FROM handoff_revisions WHERE"));
        assert!(DELETE.starts_with("DELETE FROM handoff_revisions WHERE"));
    }
}
