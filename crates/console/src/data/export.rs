//! A project's handoffs as one download: every current handoff of the
//! project (read as the person, page by page, at most [`MAX_EXPORT`]),
//! newest first, as one markdown document (a heading per key, its facts,
//! then its body) or as JSON (an array of the bridge's `HandoffView`, the
//! shape `get_handoff` answers with: key, project, repo, kind, writer,
//! time, body, revision, object).

use kube::api::ListParams;

use super::errors::{Doing, ReadError};
use super::reads::{all, api};
use handoff_bridge::auth::Caller;
use handoff_bridge::tools::HandoffView;
use handoff_core::api::Handoff;
use handoff_core::api::validation;
use handoff_core::handoff::canonical;
use handoff_kube::store::{newest_first, sort_key};

/// Most handoffs one export holds; a larger project is refused.
pub const MAX_EXPORT: usize = 10_000;

/// The format of an export (`?format=markdown|json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Markdown,
    Json,
}

impl ExportFormat {
    /// The format named `value` (`markdown` or `json`).
    pub fn parse(value: &str) -> Result<Self, ReadError> {
        match value.trim() {
            "markdown" | "md" => Ok(Self::Markdown),
            "json" => Ok(Self::Json),
            other => Err(ReadError::Invalid {
                field: "format",
                rule: "markdown or json".into(),
                problem: format!("got {:?}", other.chars().take(40).collect::<String>()),
            }),
        }
    }
}

/// A file to download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    pub content_type: &'static str,
    pub file_name: String,
    pub bytes: Vec<u8>,
}

/// The markdown document of `handoffs` (in list order).
pub(super) fn markdown(namespace: &str, project: &str, handoffs: &[Handoff]) -> String {
    let mut out = format!(
        "# Handoffs of project {project} in namespace {namespace}\n\n{} handoff(s), newest first.\n",
        handoffs.len()
    );
    for h in handoffs {
        let view = HandoffView::of(h);
        let facts = &view.facts;
        out.push_str(&format!("\n---\n\n## {}\n\n", facts.handoff_key));
        let rows = [
            ("Repository", facts.repo.clone()),
            ("Kind", facts.kind.clone()),
            ("Writer", facts.created_by.clone()),
            ("Updated", facts.updated_at.clone()),
            ("Revision", view.revision.map(|r| r.to_string())),
            ("Object", Some(view.object.clone())),
        ];
        for (label, value) in rows {
            if let Some(value) = value {
                out.push_str(&format!("- {label}: {value}\n"));
            }
        }
        out.push('\n');
        out.push_str(view.body.trim_end());
        out.push('\n');
    }
    out
}

/// The file of `handoffs` in `format`.
pub(super) fn file(
    namespace: &str,
    project: &str,
    handoffs: &[Handoff],
    format: ExportFormat,
) -> Export {
    let stem = format!("{namespace}-{project}-handoffs");
    match format {
        ExportFormat::Markdown => Export {
            content_type: "text/markdown; charset=utf-8",
            file_name: format!("{stem}.md"),
            bytes: markdown(namespace, project, handoffs).into_bytes(),
        },
        ExportFormat::Json => {
            let views: Vec<HandoffView> = handoffs.iter().map(HandoffView::of).collect();
            Export {
                content_type: "application/json",
                file_name: format!("{stem}.json"),
                bytes: serde_json::to_vec_pretty(&views).unwrap_or_default(),
            }
        }
    }
}

/// Every handoff of `project` as one file.
pub async fn export(
    caller: &Caller,
    project: &str,
    format: ExportFormat,
) -> Result<Export, ReadError> {
    validation::project(project)?;
    let namespace = caller.store().namespace();
    let doing = Doing {
        action: "list handoffs",
        namespace,
    };
    let params = ListParams::default().fields(&format!("spec.project={project}"));
    let (mut handoffs, cut) = all(&api::<Handoff>(caller), &params, MAX_EXPORT)
        .await
        .map_err(|e| doing.kube(&e, "project"))?;
    if cut {
        return Err(ReadError::Unavailable(format!(
            "Project {project} holds more than {MAX_EXPORT} handoffs, more than one export holds: \
             export it with `kubectl get handoffs -n {namespace} --field-selector spec.project={project} -o yaml`."
        )));
    }
    handoffs.retain(canonical);
    handoffs.sort_by(|a, b| newest_first(&sort_key(a), &sort_key(b)));
    Ok(file(namespace, project, &handoffs, format))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::rows::fixture::stored;

    #[test]
    fn formats_parse_and_others_are_named() {
        // (value, the format, or None when refused)
        let cases = [
            ("markdown", Some(ExportFormat::Markdown)),
            ("md", Some(ExportFormat::Markdown)),
            (" json ", Some(ExportFormat::Json)),
            ("yaml", None),
            ("", None),
        ];
        for (value, want) in cases {
            match (ExportFormat::parse(value), want) {
                (Ok(got), Some(want)) => assert_eq!(got, want),
                (Err(ReadError::Invalid { field, rule, .. }), None) => {
                    assert_eq!((field, rule.as_str()), ("format", "markdown or json"))
                }
                (got, want) => panic!("{value:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn both_formats_hold_every_handoff_with_its_facts_and_body() {
        let handoffs = [
            stored("acme/api#2", "## State\nsecond body", 20, Vec::new()),
            stored("acme/api#1", "first body\n\n", 10, Vec::new()),
        ];
        let md = file("team", "shop", &handoffs, ExportFormat::Markdown);
        assert_eq!(
            (md.file_name.as_str(), md.content_type),
            ("team-shop-handoffs.md", "text/markdown; charset=utf-8")
        );
        let text = String::from_utf8(md.bytes).expect("utf-8");
        for fragment in [
            "# Handoffs of project shop in namespace team",
            "2 handoff(s)",
            "## acme/api#2\n\n- Repository: o/r\n- Kind: issue\n- Writer: alice\n- Updated: 1970-01-01T00:00:20Z\n- Revision: 2\n",
            "## State\nsecond body\n",
            "## acme/api#1",
            "first body\n",
        ] {
            assert!(text.contains(fragment), "{fragment:?} not in {text}");
        }
        assert!(
            text.find("acme/api#2") < text.find("acme/api#1"),
            "in the given order"
        );

        let json = file("team", "shop", &handoffs, ExportFormat::Json);
        assert_eq!(json.file_name, "team-shop-handoffs.json");
        let parsed: serde_json::Value = serde_json::from_slice(&json.bytes).expect("json");
        let keys: Vec<&str> = parsed
            .as_array()
            .expect("an array")
            .iter()
            .map(|v| v["handoff_key"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(keys, ["acme/api#2", "acme/api#1"]);
        assert_eq!(parsed[0]["body"], "## State\nsecond body");
        assert_eq!(parsed[0]["revision"], 2);
    }
}
