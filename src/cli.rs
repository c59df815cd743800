//! The SRE's subcommands, with the kubeconfig `kubectl` uses (`KUBECONFIG`,
//! else `~/.kube/config`, else in-cluster; the namespace from `-n`, else
//! the context's):
//!
//! - `handoff get KEY` — the current handoff, from the apiserver, as
//!   markdown under a header (key, project, repo, kind, revision, writer,
//!   time);
//! - `handoff history KEY`, `handoff diff KEY A B`, `handoff search PROJECT
//!   QUERY` — from the PostgreSQL mirror (`--postgres-url`,
//!   `--postgres-url-file` or `HANDOFF_POSTGRES_URL`; without one, an error
//!   saying so). The mirror's URL is the credential for these: they read
//!   the namespace given, as the database role allows.
//!
//! `handoff name KEY` prints the name a Handoff of `KEY` must have (the
//! admission webhook refuses any other), for writing one by hand.
//!
//! Installed as `kubectl-handoff` (a symlink or copy of the binary) they
//! are `kubectl handoff get KEY`, …: kubectl passes the same arguments.

use clap::Args;

use handoff_bridge::POSTGRES_URL_VARS;
use handoff_bridge::tools::HandoffView;
use handoff_bridge::tools::diff::unified;
use handoff_bridge::tools::search::{matched_words, preview_around, terms};
use handoff_core::api::Handoff;
use handoff_core::text::{visible_block, visible_line};
use handoff_kube::store::HandoffStore;
use handoff_mirror::Mirror;
use handoff_mirror::dsn::PostgresArgs;

/// The namespace option every SRE subcommand takes.
#[derive(Debug, Clone, Args)]
pub struct Namespace {
    /// The namespace (default: the kubeconfig context's, else `default`).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
}

/// `handoff get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The handoff key.
    pub key: String,
    #[command(flatten)]
    namespace: Namespace,
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
    postgres: PostgresArgs,
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
    postgres: PostgresArgs,
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
    postgres: PostgresArgs,
}

/// The kubeconfig's client and the namespace to read.
async fn kube(namespace: &Namespace) -> anyhow::Result<(kube::Client, String)> {
    let config = handoff_kube::proxy::infer().await?;
    let ns = namespace
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    Ok((kube::Client::try_from(config)?, ns))
}

/// The namespace without a client (for mirror-only commands).
async fn namespace_only(namespace: &Namespace) -> anyhow::Result<String> {
    match &namespace.namespace {
        Some(ns) => Ok(ns.clone()),
        None => Ok(handoff_kube::proxy::infer().await?.default_namespace),
    }
}

/// The mirror, or an error saying how to name it.
fn mirror(command: &str, postgres: &PostgresArgs) -> anyhow::Result<Mirror> {
    let url = postgres
        .resolve(&POSTGRES_URL_VARS, |name| std::env::var(name).ok())?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "`handoff {command}` reads the PostgreSQL mirror, and no URL was given: pass \
                 --postgres-url URL (or --postgres-url-file PATH), or set HANDOFF_POSTGRES_URL"
            )
        })?;
    Ok(Mirror::new(&url, false)?)
}

/// `handoff get KEY`: prints the handoff as markdown under a header.
pub async fn get(args: GetArgs) -> anyhow::Result<()> {
    let (client, ns) = kube(&args.namespace).await?;
    let found = HandoffStore::new(client, &ns).get(&args.key).await?;
    let h = found.ok_or_else(|| {
        anyhow::anyhow!("no handoff exists for key `{}` in namespace {ns}", args.key)
    })?;
    print!("{}", markdown(&h));
    Ok(())
}

/// A handoff as markdown: a header, then the body (the fields of the one
/// handoff view the tools return). Whatever would not show as itself on a
/// terminal (an ESC sequence, a bidi control: validation refuses them, an
/// older object may still hold them) is printed escaped, so a body cannot
/// rewrite the header above it.
pub fn markdown(h: &Handoff) -> String {
    let view = HandoffView::of(h);
    let facts = &view.facts;
    let mut header = vec![
        format!("# Handoff `{}`", visible_line(&facts.handoff_key)),
        String::new(),
        format!("- project: {}", visible_line(&facts.project)),
    ];
    header.extend(
        facts
            .repo
            .as_ref()
            .map(|r| format!("- repo: {}", visible_line(r))),
    );
    header.extend(
        facts
            .kind
            .as_ref()
            .map(|k| format!("- kind: {}", visible_line(k))),
    );
    header.push(format!(
        "- revision: {}",
        view.revision
            .map_or_else(|| "not counted yet".to_owned(), |r| r.to_string())
    ));
    header.push(format!(
        "- writer: {}",
        visible_line(facts.created_by.as_deref().unwrap_or("unknown"))
    ));
    header.push(format!(
        "- updated: {}",
        visible_line(facts.updated_at.as_deref().unwrap_or("unknown"))
    ));
    format!(
        "{}\n\n---\n\n{}\n",
        header.join("\n"),
        visible_block(view.body.trim_end())
    )
}

/// `handoff history KEY`: the revisions the mirror keeps, newest first.
pub async fn history(args: HistoryArgs) -> anyhow::Result<()> {
    let mirror = mirror("history", &args.postgres)?;
    let ns = namespace_only(&args.namespace).await?;
    let rows = mirror
        .revisions(&ns, &args.key, None, i64::from(args.limit))
        .await?;
    if rows.is_empty() {
        anyhow::bail!(
            "the history holds no revisions of `{}` in namespace {ns} (never written, deleted, or not mirrored yet)",
            args.key
        );
    }
    println!("REVISION\tUPDATED\tWRITER\tBYTES");
    for r in rows {
        println!(
            "{}\t{}\t{}\t{}",
            r.revision,
            r.written_at,
            visible_line(
                Some(r.created_by.as_str())
                    .filter(|w| !w.is_empty())
                    .unwrap_or("unknown")
            ),
            r.bytes
        );
    }
    Ok(())
}

/// `handoff diff KEY A B`: the unified diff of two revisions' bodies.
pub async fn diff(args: DiffArgs) -> anyhow::Result<()> {
    let mirror = mirror("diff", &args.postgres)?;
    let ns = namespace_only(&args.namespace).await?;
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
    Ok(())
}

/// `handoff search PROJECT QUERY`: the best matches, one per line.
pub async fn search(args: SearchArgs) -> anyhow::Result<()> {
    let mirror = mirror("search", &args.postgres)?;
    let ns = namespace_only(&args.namespace).await?;
    let (wanted, _) = terms(&args.query);
    if wanted.is_empty() {
        anyhow::bail!(
            "invalid QUERY: at least one word to look for (not only `or` or -excluded words); got {:?}",
            args.query
        );
    }
    let rows = mirror
        .search(
            &ns,
            &args.project,
            args.repo.as_deref(),
            &args.query,
            0,
            i64::from(args.limit),
        )
        .await?;
    println!("KEY\tRANK\tMATCHED\tPREVIEW");
    for found in rows {
        let r = &found.row;
        let matched = matched_words(&wanted, &r.handoff_key, &r.body);
        println!(
            "{}\t{:.4}\t{}\t{}",
            visible_line(&r.handoff_key),
            found.rank,
            visible_line(&matched.join(",")),
            visible_line(&preview_around(&r.body, &matched))
        );
    }
    Ok(())
}

/// `handoff move`.
#[derive(Debug, Args)]
pub struct MoveArgs {
    /// The project whose handoffs move (label `project`).
    #[arg(long)]
    pub project: String,
    /// The namespace they are in now.
    #[arg(long, default_value = "handoff-system")]
    pub from: String,
    /// The team's namespace they move to (it must exist: config/tenant).
    #[arg(long)]
    pub to: String,
    /// Print what would move; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Pure: the object `h` becomes in `namespace`: the same name, labels and
/// spec, minus `spec.createdBy` (the copy is written by whoever moves it,
/// and the authorship policy lets nobody claim another's name).
pub fn moved(h: &Handoff, namespace: &str) -> Handoff {
    let mut spec = h.spec.clone();
    spec.created_by = None;
    let mut copy = Handoff::new(&kube::ResourceExt::name_any(h), spec);
    copy.metadata.namespace = Some(namespace.to_owned());
    copy.metadata.labels = h.metadata.labels.clone();
    copy
}

/// `handoff move --project P --from NS --to TEAM`: moves a project's
/// handoffs into a team's namespace, one at a time (applied there, then
/// deleted here only if unchanged since it was read), saying what it does.
pub async fn move_project(args: MoveArgs) -> anyhow::Result<()> {
    use kube::ResourceExt;
    use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
    anyhow::ensure!(
        args.from != args.to,
        "--from and --to are both {:?}: nothing would move",
        args.from
    );
    let client = kube::Client::try_from(handoff_kube::proxy::infer().await?)?;
    let source: Api<Handoff> = Api::namespaced(client.clone(), &args.from);
    let target: Api<Handoff> = Api::namespaced(client, &args.to);
    let selector = format!("{}={}", handoff_core::names::PROJECT_LABEL, args.project);
    let params = ListParams::default().labels(&selector);
    let mut pages = handoff_kube::cluster::Pages::new(&source, &params);
    let mut count = 0usize;
    while let Some(page) = pages.next().await? {
        for h in page {
            let name = h.name_any();
            let what = format!("{}/{name} → {}", args.from, args.to);
            if args.dry_run {
                println!("would move {what}");
                continue;
            }
            let copy = moved(&h, &args.to);
            target
                .patch(
                    &name,
                    &PatchParams::apply(handoff_core::names::LOCAL_FIELD_MANAGER),
                    &Patch::Apply(&copy),
                )
                .await
                .map_err(|e| anyhow::anyhow!("{what}: cannot write the copy: {e}"))?;
            let unchanged = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: h.uid(),
                    resource_version: h.resource_version(),
                }),
                ..DeleteParams::default()
            };
            source.delete(&name, &unchanged).await.map_err(|e| {
                anyhow::anyhow!(
                    "{what}: copied, but the original changed or could not be deleted ({e}); \
                     compare both and delete {}/{name} by hand",
                    args.from
                )
            })?;
            count += 1;
            println!("moved {what}");
        }
    }
    eprintln!(
        "handoff move: {count} handoff(s) of project {} {}",
        args.project,
        if args.dry_run {
            "listed (dry run)"
        } else {
            "moved"
        }
    );
    Ok(())
}

/// `handoff name`.
#[derive(Debug, Args)]
pub struct NameArgs {
    /// The handoff key.
    pub key: String,
}

/// `handoff name KEY`: the `metadata.name` a Handoff of `KEY` must have
/// (the admission webhook refuses any other), for writing one by hand:
/// `name: $(handoff name 'acme/api#42')`.
pub fn name(args: &NameArgs) {
    println!("{}", handoff_core::api::naming::name_for_key(&args.key));
}
