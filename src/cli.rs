//! The SRE's subcommands, with the kubeconfig `kubectl` uses (`KUBECONFIG`,
//! else `~/.kube/config`, else in-cluster; the namespace from `-n`, else
//! the context's):
//!
//! - `handoff get KEY` — the current handoff, from the apiserver, as
//!   markdown under a header (key, project, repo, kind, revision, writer,
//!   time);
//! - `handoff history KEY`, `handoff diff KEY A B`, `handoff search PROJECT
//!   QUERY` — from the PostgreSQL mirror's history, one of two ways
//!   ([`reads`]): as the person, through the bridge (`--bridge URL` or
//!   `HANDOFF_BRIDGE_URL`, e.g. over `kubectl port-forward`) with the
//!   kubeconfig's bearer token, so RBAC decides as it does for agents and
//!   no database credential is on the laptop ([`person`]); or, for the
//!   mirror's administrator only, the mirror directly (`--postgres-url`,
//!   `--postgres-url-file` or `HANDOFF_POSTGRES_URL`: the URL is the
//!   credential, no access review). Both or neither is an error naming the
//!   two ways.
//!
//! `handoff name KEY` prints the name a Handoff of `KEY` must have (the
//! admission webhook refuses any other), for writing one by hand.
//!
//! Installed as `kubectl-handoff` (a symlink or copy of the binary) they
//! are `kubectl handoff get KEY`, …: kubectl passes the same arguments.

mod person;
mod reads;

use clap::Args;

use handoff_bridge::tools::HandoffView;
use handoff_core::api::Handoff;
use handoff_core::text::{visible_block, visible_line};
use handoff_kube::store::HandoffStore;

pub use reads::{DiffArgs, HistoryArgs, ReadFrom, SearchArgs, diff, history, search};

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

/// The kubeconfig's client and the namespace to read.
pub(crate) async fn kube(namespace: &Namespace) -> anyhow::Result<(kube::Client, String)> {
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
