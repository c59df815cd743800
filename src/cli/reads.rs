//! `handoff history | diff | search`: the revisions, diffs and matches of
//! the PostgreSQL mirror, read one of two ways:
//!
//! - **as the person** (`--bridge URL` or `HANDOFF_BRIDGE_URL`): through
//!   the bridge, with the kubeconfig's bearer token; the bridge reviews the
//!   person's access (RBAC) before it reads the mirror ([`super::person`]);
//! - **as the mirror's administrator** (`--postgres-url`,
//!   `--postgres-url-file` or `HANDOFF_POSTGRES_URL`): the mirror directly,
//!   with the database role's rights and no access review.
//!
//! Both at once, or neither, is an error naming the two ways
//! ([`choose`]). Both print the same tables, from the same functions.

use std::path::PathBuf;

use clap::Args;
use serde::Deserialize;
use serde_json::json;

use super::Namespace;
use super::person::{PORT_FORWARD, Person};
use handoff_bridge::POSTGRES_URL_VARS;
use handoff_bridge::tools::diff::unified;
use handoff_bridge::tools::search::{matched_words, preview_around, terms};
use handoff_core::text::{visible_block, visible_line};
use handoff_mirror::Mirror;
use handoff_mirror::dsn::PostgresArgs;

/// The bridge's page size limit (`list_revisions`, `search_handoffs`).
const BRIDGE_PAGE: u32 = 200;

/// Where the reads come from: the bridge as the person, or the mirror.
#[derive(Debug, Args)]
pub struct ReadFrom {
    /// Read through the bridge (`handoff mcp --listen`) at this URL, as you:
    /// your kubeconfig's bearer token, RBAC decides. E.g.
    /// http://localhost:8080 after `kubectl -n handoff-system port-forward
    /// svc/handoff-bridge 8080:8080`.
    #[arg(long = "bridge", env = "HANDOFF_BRIDGE_URL", value_name = "URL")]
    pub bridge: Option<String>,
    /// With --bridge: send the bearer token in this file instead of the
    /// kubeconfig's (e.g. when the kubeconfig holds a client certificate).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// With an https:// --bridge: the CA certificates (PEM) to verify it
    /// with (default: the system's).
    #[arg(long = "bridge-ca-file", env = "HANDOFF_CA_FILE", value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
    /// For the mirror's administrator: read the mirror directly (no access
    /// review; the database role decides).
    #[command(flatten)]
    pub postgres: PostgresArgs,
}

/// `handoff history`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The handoff key.
    pub key: String,
    /// At most this many revisions, newest first.
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
    #[command(flatten)]
    namespace: Namespace,
    #[command(flatten)]
    read_from: ReadFrom,
}

/// `handoff diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The handoff key.
    pub key: String,
    /// The older revision.
    pub from: i64,
    /// The newer revision.
    pub to: i64,
    #[command(flatten)]
    namespace: Namespace,
    #[command(flatten)]
    read_from: ReadFrom,
}

/// `handoff search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// The project to search.
    pub project: String,
    /// Words, "quoted phrases", `or`, -excluded words.
    pub query: String,
    /// Only this repository.
    #[arg(long)]
    pub repo: Option<String>,
    /// At most this many matches, best first.
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
    #[command(flatten)]
    namespace: Namespace,
    #[command(flatten)]
    read_from: ReadFrom,
}

/// The path a read takes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Path {
    /// Through the bridge at this URL, as the person.
    Bridge(String),
    /// The mirror at this URL, directly.
    Mirror(String),
}

/// Pure: the path, from the bridge's URL and the mirror's (each `None`
/// when not given): exactly one of them.
pub(super) fn choose(
    command: &str,
    bridge: Option<&str>,
    mirror: Option<String>,
) -> anyhow::Result<Path> {
    let bridge = bridge.map(str::trim).filter(|b| !b.is_empty());
    match (bridge, mirror) {
        (Some(bridge), None) => Ok(Path::Bridge(bridge.to_owned())),
        (None, Some(mirror)) => Ok(Path::Mirror(mirror)),
        (Some(_), Some(_)) => anyhow::bail!(
            "`handoff {command}`: both a bridge (--bridge / HANDOFF_BRIDGE_URL) and a mirror URL \
             (--postgres-url / --postgres-url-file / HANDOFF_POSTGRES_URL) are given: choose one \
             (the bridge reads as you, under RBAC; the mirror URL is for the mirror's administrator)"
        ),
        (None, None) => anyhow::bail!(
            "`handoff {command}` reads the mirror's history, and neither way to it is given: \
             --bridge URL (or HANDOFF_BRIDGE_URL) reads through the bridge as you, under RBAC \
             (e.g. `{PORT_FORWARD}`, then --bridge http://localhost:8080); the mirror's \
             administrator may instead pass --postgres-url URL (or --postgres-url-file PATH, or \
             set HANDOFF_POSTGRES_URL)"
        ),
    }
}

/// A read's source: the bridge as the person, or the mirror.
enum Source {
    Bridge(Person),
    Mirror(Box<Mirror>),
}

impl ReadFrom {
    /// The source of `command`'s reads in `namespace`.
    async fn open(&self, command: &'static str, namespace: &str) -> anyhow::Result<Source> {
        let mirror = self
            .postgres
            .resolve(&POSTGRES_URL_VARS, |name| std::env::var(name).ok())?;
        Ok(match choose(command, self.bridge.as_deref(), mirror)? {
            Path::Bridge(url) => Source::Bridge(
                Person::connect(
                    command,
                    &url,
                    namespace,
                    self.token_file.as_deref(),
                    self.ca_file.as_deref(),
                )
                .await?,
            ),
            Path::Mirror(url) => Source::Mirror(Box::new(Mirror::new(&url, false)?)),
        })
    }
}

/// One line of `handoff history`.
#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct Revision {
    revision: i64,
    updated_at: String,
    #[serde(default)]
    created_by: Option<String>,
    body_bytes: i64,
}

/// A page of `list_revisions`.
#[derive(Deserialize)]
struct RevisionsPage {
    revisions: Vec<Revision>,
    next_cursor: Option<String>,
}

/// One page of a paged tool's answer: its rows and the cursor of the next.
trait Page: serde::de::DeserializeOwned {
    type Row;
    fn into_parts(self) -> (Vec<Self::Row>, Option<String>);
}

impl Page for RevisionsPage {
    type Row = Revision;
    fn into_parts(self) -> (Vec<Revision>, Option<String>) {
        (self.revisions, self.next_cursor)
    }
}

/// At most `limit` rows of the paged tool `tool` called as `person` with
/// `call`, page by page (at most [`BRIDGE_PAGE`] a page) while the bridge
/// gives a cursor.
async fn paged<P: Page>(
    person: &Person,
    tool: &str,
    mut call: serde_json::Value,
    limit: u32,
) -> anyhow::Result<Vec<P::Row>> {
    let mut rows = Vec::new();
    while let Some(left) = limit.checked_sub(rows.len().try_into()?)
        && left > 0
    {
        call["limit"] = json!(left.min(BRIDGE_PAGE));
        let page: P = serde_json::from_value(person.call(tool, call.clone()).await?)?;
        let (found, next) = page.into_parts();
        rows.extend(found);
        match next {
            Some(cursor) => call["cursor"] = json!(cursor),
            None => break,
        }
    }
    Ok(rows)
}

/// Pure: the table of `handoff history`.
pub(super) fn history_table(rows: &[Revision]) -> String {
    let mut out = String::from("REVISION\tUPDATED\tWRITER\tBYTES\n");
    for r in rows {
        let writer = r.created_by.as_deref().filter(|w| !w.is_empty());
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\n",
            r.revision,
            r.updated_at,
            visible_line(writer.unwrap_or("unknown")),
            r.body_bytes
        ));
    }
    out
}

/// `handoff history KEY`: the revisions the mirror keeps, newest first.
pub async fn history(args: HistoryArgs) -> anyhow::Result<()> {
    let ns = super::namespace_only(&args.namespace).await?;
    let rows = match args.read_from.open("history", &ns).await? {
        Source::Mirror(mirror) => mirror
            .revisions(&ns, &args.key, None, i64::from(args.limit))
            .await?
            .into_iter()
            .map(|r| Revision {
                revision: r.revision,
                updated_at: r.written_at.to_string(),
                created_by: Some(r.created_by),
                body_bytes: r.bytes,
            })
            .collect(),
        Source::Bridge(person) => {
            let call = json!({"handoff_key": args.key});
            paged::<RevisionsPage>(&person, "list_revisions", call, args.limit).await?
        }
    };
    if rows.is_empty() {
        anyhow::bail!(
            "the history holds no revisions of `{}` in namespace {ns} (never written, deleted, or not mirrored yet)",
            args.key
        );
    }
    print!("{}", history_table(&rows));
    Ok(())
}

/// The fields of a `diff_handoff` answer `handoff diff` prints.
#[derive(Deserialize)]
struct DiffAnswer {
    diff: String,
    truncated: bool,
    #[serde(default)]
    approximate: bool,
}

/// `handoff diff KEY A B`: the unified diff of two revisions' bodies.
pub async fn diff(args: DiffArgs) -> anyhow::Result<()> {
    let ns = super::namespace_only(&args.namespace).await?;
    match args.read_from.open("diff", &ns).await? {
        Source::Mirror(mirror) => {
            let mut bodies = Vec::new();
            for revision in [args.from, args.to] {
                let row = mirror.revision(&ns, &args.key, revision).await?;
                let row = row.ok_or_else(|| {
                    anyhow::anyhow!(
                        "`{}` has no revision {revision} in the history of namespace {ns} (see `handoff history {}`)",
                        args.key,
                        args.key
                    )
                })?;
                bodies.push(row.body);
            }
            let (diff, _) = unified(&bodies[0], &bodies[1], args.from, args.to, usize::MAX);
            print!("{}", visible_block(&diff));
        }
        Source::Bridge(person) => {
            let call = json!({"handoff_key": args.key, "from": args.from, "to": args.to});
            let answer: DiffAnswer =
                serde_json::from_value(person.call("diff_handoff", call).await?)?;
            print!("{}", visible_block(&answer.diff));
            if answer.truncated {
                eprintln!(
                    "handoff diff: the bridge cut this diff at 16 KiB; the mirror's administrator \
                     can print it whole with --postgres-url"
                );
            }
            if answer.approximate {
                eprintln!("handoff diff: approximate (correct, maybe longer than the smallest)");
            }
        }
    }
    Ok(())
}

/// One line of `handoff search`.
#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct Match {
    handoff_key: String,
    rank: f64,
    matched_words: Vec<String>,
    preview: String,
}

/// A page of `search_handoffs`.
#[derive(Deserialize)]
struct MatchesPage {
    matches: Vec<Match>,
    next_cursor: Option<String>,
}

impl Page for MatchesPage {
    type Row = Match;
    fn into_parts(self) -> (Vec<Match>, Option<String>) {
        (self.matches, self.next_cursor)
    }
}

/// Pure: the table of `handoff search`.
pub(super) fn search_table(rows: &[Match]) -> String {
    let mut out = String::from("KEY\tRANK\tMATCHED\tPREVIEW\n");
    for m in rows {
        out.push_str(&format!(
            "{}\t{:.4}\t{}\t{}\n",
            visible_line(&m.handoff_key),
            m.rank,
            visible_line(&m.matched_words.join(",")),
            visible_line(&m.preview)
        ));
    }
    out
}

/// `handoff search PROJECT QUERY`: the best matches, one per line.
pub async fn search(args: SearchArgs) -> anyhow::Result<()> {
    let (wanted, _) = terms(&args.query);
    if wanted.is_empty() {
        anyhow::bail!(
            "invalid QUERY: at least one word to look for (not only `or` or -excluded words); got {:?}",
            args.query
        );
    }
    let ns = super::namespace_only(&args.namespace).await?;
    let rows = match args.read_from.open("search", &ns).await? {
        Source::Mirror(mirror) => mirror
            .search(
                &ns,
                &args.project,
                args.repo.as_deref(),
                &args.query,
                0,
                i64::from(args.limit),
            )
            .await?
            .into_iter()
            .map(|found| {
                let r = found.row;
                let matched = matched_words(&wanted, &r.handoff_key, &r.body);
                Match {
                    preview: preview_around(&r.body, &matched),
                    handoff_key: r.handoff_key,
                    rank: f64::from(found.rank),
                    matched_words: matched,
                }
            })
            .collect(),
        Source::Bridge(person) => {
            let mut call = json!({"project": args.project, "query": args.query});
            if let Some(repo) = &args.repo {
                call["repo"] = json!(repo);
            }
            paged::<MatchesPage>(&person, "search_handoffs", call, args.limit).await?
        }
    };
    print!("{}", search_table(&rows));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_way_to_the_history() {
        let url = || Some("postgres://m".to_owned());
        type Want = Result<Path, &'static [&'static str]>;
        let cases: [(Option<&str>, Option<String>, Want); 5] = [
            (
                Some("http://localhost:8080"),
                None,
                Ok(Path::Bridge("http://localhost:8080".into())),
            ),
            (None, url(), Ok(Path::Mirror("postgres://m".into()))),
            (
                Some("http://b"),
                url(),
                Err(&["both a bridge", "choose one", "mirror's administrator"]),
            ),
            (
                None,
                None,
                Err(&[
                    "neither way",
                    "--bridge URL",
                    "HANDOFF_BRIDGE_URL",
                    "--postgres-url URL",
                ]),
            ),
            (Some("  "), None, Err(&["neither way", "port-forward"])),
        ];
        for (bridge, mirror, want) in cases {
            match (choose("history", bridge, mirror), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want),
                (Err(e), Err(words)) => {
                    let e = e.to_string();
                    assert!(e.contains("`handoff history`"), "{e}");
                    for w in words {
                        assert!(e.contains(w), "{w:?} in {e}");
                    }
                }
                (got, want) => panic!("{bridge:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn tables_print_escaped_rows_under_their_header() {
        let rows = [
            Revision {
                revision: 2,
                updated_at: "2026-01-02T00:00:00Z".into(),
                created_by: Some("sre@example.com".into()),
                body_bytes: 12,
            },
            Revision {
                revision: 1,
                updated_at: "2026-01-01T00:00:00Z".into(),
                created_by: Some(String::new()),
                body_bytes: 3,
            },
        ];
        assert_eq!(
            history_table(&rows),
            "REVISION\tUPDATED\tWRITER\tBYTES\n2\t2026-01-02T00:00:00Z\tsre@example.com\t12\n\
             1\t2026-01-01T00:00:00Z\tunknown\t3\n"
        );
        let found = [Match {
            handoff_key: "ops/42".into(),
            rank: 0.25,
            matched_words: vec!["refund".into(), "job".into()],
            preview: "refund \u{1b}[2Kjob".into(),
        }];
        assert_eq!(
            search_table(&found),
            "KEY\tRANK\tMATCHED\tPREVIEW\nops/42\t0.2500\trefund,job\trefund \\u{1b}[2Kjob\n"
        );
    }

    #[test]
    fn the_bridge_answers_parse_into_the_rows() {
        let page: RevisionsPage = serde_json::from_value(json!({"revisions": [
            {"revision": 3, "updated_at": "t", "created_by": "w", "body_bytes": 9},
            {"revision": 2, "updated_at": "s", "body_bytes": 8}]}))
        .unwrap();
        assert_eq!(page.next_cursor, None);
        assert_eq!(page.revisions[1].created_by, None);
        let page: MatchesPage = serde_json::from_value(json!({"matches": [
            {"handoff_key": "k", "project": "p", "rank": 1.5, "matched_words": ["a"],
             "preview": "a b"}], "source": "mirror", "scan_capped": false, "next_cursor": "c"}))
        .unwrap();
        assert_eq!(page.next_cursor.as_deref(), Some("c"));
        assert_eq!(page.matches[0].rank, 1.5);
    }
}
