//! `handoff export` and `handoff import`: a namespace's (or a project's)
//! handoffs to a file and back, into another namespace or cluster, with
//! the kubeconfig `kubectl` uses (the person's identity: RBAC decides).
//!
//! - The file ([`format`]) is versioned JSON Lines, validated whole before
//!   anything is written.
//! - Export lists the namespace a page at a time (the apiserver's `limit`
//!   and `continue`) and writes each page before reading the next. An
//!   object whose name is not the one derived from its key (a twin or a
//!   squat) is skipped and named on stderr: a file never carries one.
//! - `--history` adds the PostgreSQL mirror's revisions of each key, read
//!   directly with the mirror administrator's URL (`--postgres-url`,
//!   `--postgres-url-file` or HANDOFF_POSTGRES_URL), as `handoff history`
//!   reads them for the administrator.
//! - Import plans first ([`plan`]: pure), then writes, one request per
//!   created or updated handoff; an unchanged one is not sent, so a second
//!   import of the same file changes nothing. Created with POST (it fails
//!   if someone wrote the key since the plan, instead of replacing it),
//!   updated (`--overwrite`) with a server-side apply carrying the
//!   resourceVersion read (again failing on a concurrent write), as the
//!   field manager `handoff-import`. `spec.createdBy` is not written, as
//!   `handoff move` does not: the authorship policy lets nobody claim
//!   another's name, so the copy is the importer's (the file keeps who
//!   wrote it). Every write also meets the admission webhook and policies.
//! - History is not imported: the target's mirror counts the imported
//!   handoffs from revision 1 (the controller's resync rows them); an
//!   export's history stays in the file.

pub mod format;
pub mod plan;

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

use handoff_bridge::POSTGRES_URL_VARS;
use handoff_core::api::naming::{labels_for, name_for_key};
use handoff_core::api::{Handoff, HandoffSpec};
use handoff_core::text::visible_line;
use handoff_kube::cluster::Pages;
use handoff_mirror::Mirror;
use handoff_mirror::dsn::PostgresArgs;

use crate::cli::{Namespace, kube};
use format::{End, Entry, Header, Revision};
use plan::{Action, Existing};

/// The field manager of an import's updates.
pub const IMPORT_FIELD_MANAGER: &str = "handoff-import";

/// `handoff export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    namespace: Namespace,
    /// Only this project's handoffs (`spec.project`).
    #[arg(long)]
    pub project: Option<String>,
    /// Write to this file instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Add each key's revisions from the PostgreSQL mirror (the mirror
    /// administrator's URL: --postgres-url, --postgres-url-file or
    /// HANDOFF_POSTGRES_URL).
    #[arg(long)]
    pub history: bool,
    #[command(flatten)]
    postgres: PostgresArgs,
}

/// `handoff import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The file `handoff export` wrote.
    pub file: PathBuf,
    #[command(flatten)]
    namespace: Namespace,
    /// Replace a handoff the target holds with another content (without
    /// it, such an entry refuses the import).
    #[arg(long)]
    pub overwrite: bool,
    /// Validate and plan, print what would happen, write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `handoff export`: the handoffs of a namespace (or project) as an export
/// file, on stdout or into `--output`; progress and skipped objects on
/// stderr.
pub async fn export(args: ExportArgs) -> anyhow::Result<()> {
    if let Some(project) = &args.project {
        handoff_core::api::validation::project(project)
            .map_err(|e| anyhow::anyhow!("--project: {e}"))?;
    }
    let mirror = if args.history {
        let url = args
            .postgres
            .resolve(&POSTGRES_URL_VARS, |name| std::env::var(name).ok())?
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "`handoff export --history` reads the PostgreSQL mirror as its administrator, \
                     and no URL was given: pass --postgres-url URL (or --postgres-url-file PATH), \
                     or set HANDOFF_POSTGRES_URL"
                )
            })?;
        Some(Mirror::new(&url, false)?)
    } else {
        None
    };
    let (client, ns) = kube(&args.namespace).await?;
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).map_err(|e| {
                anyhow::anyhow!("--output {}: cannot create it: {e}", path.display())
            })?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let header = Header {
        api_version: format::API_VERSION.to_owned(),
        kind: format::HEADER_KIND.to_owned(),
        namespace: ns.clone(),
        project: args.project.clone(),
        exported_at: jiff::Timestamp::now().to_string(),
        history: args.history,
    };
    writeln!(out, "{}", format::line(&header)?)?;
    let api: Api<Handoff> = Api::namespaced(client, &ns);
    let mut params = ListParams::default();
    if let Some(project) = &args.project {
        params = params.fields(&format!("spec.project={project}"));
    }
    let mut pages = Pages::new(&api, &params);
    let (mut written, mut skipped) = (0u64, 0u64);
    while let Some(page) = pages.next().await? {
        for h in page {
            let Some(mut entry) = entry_of(&h) else {
                skipped += 1;
                eprintln!(
                    "handoff export: skipped {}/{}: its name is not the one derived from its key \
                     `{}` ({}), a twin or squat",
                    ns,
                    h.name_any(),
                    visible_line(&h.spec.handoff_key),
                    name_for_key(&h.spec.handoff_key)
                );
                continue;
            };
            if let Some(mirror) = &mirror {
                entry.history = history(mirror, &ns, &h.spec.handoff_key).await?;
            }
            writeln!(out, "{}", format::line(&entry)?)?;
            written += 1;
        }
        eprintln!("handoff export: {written} handoff(s) of {ns} written…");
    }
    writeln!(out, "{}", format::line(&End::new(written))?)?;
    out.flush()?;
    eprintln!("handoff export: done: {written} handoff(s) exported, {skipped} skipped");
    Ok(())
}

/// Pure: the entry of `h`, or `None` for a twin or squat.
pub fn entry_of(h: &Handoff) -> Option<Entry> {
    let name = h.name_any();
    if name != name_for_key(&h.spec.handoff_key) {
        return None;
    }
    let status = h.status.as_ref();
    Some(Entry {
        name,
        spec: h.spec.clone(),
        created_at: h
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
        revision: status.and_then(|s| s.revision),
        updated_at: status
            .and_then(|s| s.updated_at.as_ref())
            .map(|t| t.0.to_string()),
        history: Vec::new(),
    })
}

/// The mirror's revisions of `key`, oldest first.
async fn history(mirror: &Mirror, ns: &str, key: &str) -> anyhow::Result<Vec<Revision>> {
    let mut out = Vec::new();
    for listed in mirror
        .revisions(ns, key, None, i64::MAX)
        .await?
        .iter()
        .rev()
    {
        if let Some(r) = mirror.revision(ns, key, listed.revision).await? {
            out.push(Revision {
                revision: r.revision,
                written_at: r.updated_at.to_string(),
                created_by: r.created_by,
                project: r.project,
                repo: r.repo,
                kind: r.kind,
                body: r.body,
            });
        }
    }
    Ok(out)
}

/// `handoff import FILE`: validates the file whole, plans against the
/// target, then writes (or, with `--dry-run`, says what it would).
pub async fn import(args: ImportArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| anyhow::anyhow!("{}: cannot read it: {e}", args.file.display()))?;
    let file = format::parse(&text).map_err(|errors| {
        anyhow::anyhow!(
            "{} is refused, nothing was written:\n  {}",
            args.file.display(),
            errors.join("\n  ")
        )
    })?;
    let (client, ns) = kube(&args.namespace).await?;
    let api: Api<Handoff> = Api::namespaced(client, &ns);
    let mut existing = Vec::new();
    let mut pages = Pages::new(&api, &ListParams::default());
    while let Some(page) = pages.next().await? {
        existing.extend(page.iter().map(|h| Existing {
            name: h.name_any(),
            key: h.spec.handoff_key.clone(),
            content_hash: h.spec.content_hash(),
            resource_version: h.resource_version(),
        }));
    }
    let plan = plan::plan(&file.entries, &existing, args.overwrite);
    if !plan.refusals.is_empty() {
        anyhow::bail!(
            "{} is refused for namespace {ns}, nothing was written:\n  {}",
            args.file.display(),
            plan.refusals.join("\n  ")
        );
    }
    let (created, unchanged, updated) = plan.counts();
    let history: usize = file.entries.iter().map(|e| e.history.len()).sum();
    if history > 0 {
        eprintln!(
            "handoff import: the file's {history} history revision(s) are not imported: the \
             target's mirror counts each handoff from revision 1"
        );
    }
    if args.dry_run {
        for (index, action) in &plan.actions {
            println!(
                "would {}: {}",
                verb(action),
                visible_line(&file.entries[*index].spec.handoff_key)
            );
        }
        println!(
            "dry run: {created} to create, {unchanged} unchanged, {updated} to update in {ns}"
        );
        return Ok(());
    }
    let total = plan.actions.len();
    for (done, (index, action)) in plan.actions.iter().enumerate() {
        let entry = &file.entries[*index];
        write(&api, entry, action).await.map_err(|e| {
            anyhow::anyhow!(
                "entry {}, key `{}`: cannot {} it in {ns}: {e} ({done} of {total} entries done \
                 before it; importing the file again resumes)",
                index + 1,
                visible_line(&entry.spec.handoff_key),
                verb(action)
            )
        })?;
        if (done + 1) % 500 == 0 {
            eprintln!("handoff import: {} of {total} entries done…", done + 1);
        }
    }
    println!("imported into {ns}: {created} created, {unchanged} unchanged, {updated} updated");
    Ok(())
}

fn verb(action: &Action) -> &'static str {
    match action {
        Action::Create => "create",
        Action::Unchanged => "leave unchanged",
        Action::Update { .. } => "update",
    }
}

/// Pure: the object an entry is written as (no `spec.createdBy`, see the
/// module docs), at `resource_version` when given.
pub fn object_of(entry: &Entry, resource_version: Option<String>) -> Handoff {
    let spec = HandoffSpec {
        created_by: None,
        ..entry.spec.clone()
    };
    let mut h = Handoff::new(&name_for_key(&spec.handoff_key), spec);
    h.metadata.labels = Some(labels_for(
        &h.spec.project,
        h.spec.repo.as_deref(),
        h.spec.kind.as_deref(),
    ));
    h.metadata.resource_version = resource_version;
    h
}

async fn write(api: &Api<Handoff>, entry: &Entry, action: &Action) -> Result<(), kube::Error> {
    match action {
        Action::Unchanged => Ok(()),
        Action::Create => {
            let params = PostParams {
                field_manager: Some(IMPORT_FIELD_MANAGER.to_owned()),
                ..PostParams::default()
            };
            api.create(&params, &object_of(entry, None)).await.map(drop)
        }
        Action::Update { resource_version } => {
            let h = object_of(entry, resource_version.clone());
            let params = PatchParams::apply(IMPORT_FIELD_MANAGER).force();
            api.patch(&h.name_any(), &params, &Patch::Apply(&h))
                .await
                .map(drop)
        }
    }
}
