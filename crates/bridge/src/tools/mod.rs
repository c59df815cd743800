//! The tools the bridge serves, one module each — its arguments, validation,
//! handler, result and text — and [`TOOLS`], the one table `tools/list`,
//! profile gating and `tools/call` all read.
//!
//! The contract has four tools ([`get`], [`write`], [`list`], [`delete`]);
//! the offer tools ([`offer`], [`list_offers`], [`reject_offer`]) are
//! extensions, gated like write/get/list, and so are [`search`],
//! [`list_revisions`] and [`diff`]. Adding a tool: a module with its
//! `TOOL` entry, and a row in [`TOOLS`].
//!
//! Here too: the results several tools share ([`HandoffFacts`], the one
//! view of a handoff every result flattens; [`HandoffView`];
//! [`OfferView`]), the shape of a definition ([`definition`], with
//! [`reads`] / [`writes`] annotations), and in [`page`] the page size and
//! the one cursor codec of the paged tools.

pub(crate) mod delete;
pub mod diff;
pub mod get;
pub(crate) mod list;
pub(crate) mod list_offers;
pub(crate) mod list_revisions;
pub(crate) mod offer;
pub(crate) mod page;
pub(crate) mod reject_offer;
pub mod search;
pub(crate) mod write;

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::ResourceExt;
use rmcp::model::{JsonObject, ToolAnnotations};
use schemars::JsonSchema;
use serde::Serialize;

use super::call::{Answer, Call, CallError};
use super::profiles::{Audience, Profile};
use handoff_core::api::naming::name_for_key;
use handoff_core::api::{Handoff, HandoffOffer, OfferPhase};
use handoff_core::handoff::view::{revision, updated_at};
use handoff_mirror::ListedRow;

/// A tool's handler: its call, and the arguments as sent.
pub(crate) type Handler =
    for<'a> fn(&'a Call<'a>, Option<JsonObject>) -> BoxFuture<'a, Result<Answer, CallError>>;

/// One tool: what [`TOOLS`] holds for it.
pub struct Tool {
    /// The wire name, e.g. `get_handoff`.
    pub name: &'static str,
    /// Which profiles see it and may call it.
    pub audience: Audience,
    /// What the caller does, for Forbidden messages: "identity … may not
    /// {action} handoffs in namespace …".
    pub action: &'static str,
    /// Its MCP definition (schemas, description, annotations).
    pub definition: fn() -> rmcp::model::Tool,
    /// Runs a call.
    pub call: Handler,
}

/// Every tool, in the order `tools/list` shows them.
pub(crate) static TOOLS: &[&Tool] = &[
    &get::TOOL,
    &write::TOOL,
    &list::TOOL,
    &delete::TOOL,
    &offer::TOOL,
    &list_offers::TOOL,
    &reject_offer::TOOL,
    &search::TOOL,
    &list_revisions::TOOL,
    &diff::TOOL,
];

/// The tool with this wire name.
pub fn find(name: &str) -> Option<&'static Tool> {
    TOOLS.iter().copied().find(|t| t.name == name)
}

/// The tools `profile` sees, in table order.
pub fn for_profile(profile: &Profile) -> impl Iterator<Item = &'static Tool> + '_ {
    TOOLS.iter().copied().filter(|t| t.visible_to(profile))
}

/// The answer to a call of a tool that does not exist: the tools this
/// caller's profile has.
pub fn unknown(name: &str, profile: &Profile) -> String {
    let names: Vec<&str> = for_profile(profile).map(|t| t.name).collect();
    let offered = if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    };
    format!(
        "unknown tool `{name}`: tools for {}: {offered}",
        profile.who()
    )
}

impl Tool {
    /// Whether `profile` sees this tool and may call it.
    pub(crate) fn visible_to(&self, profile: &Profile) -> bool {
        profile.admits(self.audience)
    }
}

/// The annotations of a tool that only reads (the cluster or the mirror).
pub(crate) fn reads() -> ToolAnnotations {
    ToolAnnotations::new().read_only(true).open_world(false)
}

/// Whether a writing tool may destroy what it finds.
pub(crate) struct Destructive(pub(crate) bool);

/// Whether repeating a writing tool's call changes nothing more.
pub(crate) struct Idempotent(pub(crate) bool);

/// The annotations of a tool that writes.
pub(crate) fn writes(destructive: Destructive, idempotent: Idempotent) -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(false)
        .destructive(destructive.0)
        .idempotent(idempotent.0)
        .open_world(false)
}

/// The MCP definition of a tool taking `Args` and answering `Result`.
pub fn definition<Args: JsonSchema, Result: JsonSchema>(
    name: &'static str,
    description: &'static str,
    annotations: ToolAnnotations,
) -> rmcp::model::Tool {
    rmcp::model::Tool::new(name, description, schema::<Args>())
        .with_raw_output_schema(schema::<Result>())
        .with_annotations(annotations)
}

/// The formats JSON Schema 2020-12 defines. schemars also emits OpenAPI's
/// (`uint`, `uint32`, `int64`, `double`, …); clients that validate schemas
/// warn about every one of them (the TypeScript SDK prints `unknown format
/// "uint" ignored in schema` on each connection), so [`schema`] drops them.
/// `minimum` / `maximum` still say what they meant.
pub(crate) const STANDARD_FORMATS: [&str; 19] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// The JSON schema of `T` as an MCP schema object, with standard formats
/// only ([`STANDARD_FORMATS`]).
pub fn schema<T: JsonSchema>() -> Arc<JsonObject> {
    let mut value = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    drop_nonstandard_formats(&mut value);
    Arc::new(match value {
        serde_json::Value::Object(map) => map,
        _ => JsonObject::new(),
    })
}

/// Removes every `format` that is not a JSON Schema 2020-12 format.
fn drop_nonstandard_formats(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            let nonstandard = map
                .get("format")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|f| !STANDARD_FORMATS.contains(&f));
            if nonstandard {
                map.remove("format");
            }
            map.values_mut().for_each(drop_nonstandard_formats);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(drop_nonstandard_formats),
        _ => {}
    }
}

/// What every view of a handoff shows of it, whether read from the
/// apiserver or from the mirror: the one handoff view, flattened into the
/// full view ([`HandoffView`]), a list entry and a search match.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct HandoffFacts {
    /// The conversation key.
    pub handoff_key: String,
    /// Project.
    pub project: String,
    /// Repository, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// Kind of work, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Who wrote this version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// When the content last changed (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

impl HandoffFacts {
    /// The facts of a stored handoff.
    pub fn of(h: &Handoff) -> Self {
        Self {
            handoff_key: h.spec.handoff_key.clone(),
            project: h.spec.project.clone(),
            repo: h.spec.repo.clone(),
            kind: h.spec.kind.clone(),
            created_by: h.spec.created_by.clone(),
            updated_at: updated_at(h).map(|t| t.0.to_string()),
        }
    }

    /// The facts of a mirror row (current, or a past revision).
    pub(crate) fn of_row(row: &ListedRow) -> Self {
        Self {
            handoff_key: row.handoff_key.clone(),
            project: row.project.clone(),
            repo: row.repo.clone(),
            kind: row.kind.clone(),
            created_by: Some(row.created_by.clone()).filter(|w| !w.is_empty()),
            updated_at: Some(row.updated_at.to_string()),
        }
    }
}

/// A handoff as tools return it.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct HandoffView {
    /// Key, project, repo, kind, writer, time.
    #[serde(flatten)]
    pub facts: HandoffFacts,
    /// The summary.
    pub body: String,
    /// Content revision (1 after creation), once the controller has counted it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// The Kubernetes object holding it (`namespace/name`).
    pub object: String,
}

impl HandoffView {
    /// The view of a stored handoff: its revision and time as
    /// [`handoff_core::handoff::view::counted`] rules (none and the write's time
    /// while the controller has not counted this content).
    pub fn of(h: &Handoff) -> Self {
        Self {
            facts: HandoffFacts::of(h),
            body: h.spec.body.clone(),
            revision: revision(h),
            object: format!("{}/{}", h.namespace().unwrap_or_default(), h.name_any()),
        }
    }

    /// The view of a past revision from the mirror's history.
    pub(crate) fn of_revision(namespace: &str, row: &ListedRow) -> Self {
        Self {
            facts: HandoffFacts::of_row(row),
            body: row.body.clone(),
            revision: Some(row.revision),
            object: format!("{namespace}/{}", name_for_key(&row.handoff_key)),
        }
    }
}

/// An offer as the tools return it.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct OfferView {
    /// The offer's name.
    pub name: String,
    /// Project.
    pub project: String,
    /// Destination agent.
    pub to: String,
    /// The offering conversation's handoff key.
    pub from_key: String,
    /// The offering session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// What is handed over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<String>,
    /// Offered, Accepted, Completed, Rejected or Superseded.
    pub phase: OfferPhase,
    /// What replaced it, when superseded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
}

impl OfferView {
    /// The view of a stored offer.
    pub fn of(o: &HandoffOffer) -> Self {
        Self {
            name: o.name_any(),
            project: o.spec.project.clone(),
            to: o.spec.to.clone(),
            from_key: o.spec.from_key.clone(),
            session: o.spec.session.clone(),
            artifact: o.spec.artifact.clone(),
            phase: o.phase(),
            superseded_by: o.status.as_ref().and_then(|s| s.superseded_by.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRITER: &[&str] = &[
        "get_handoff",
        "write_handoff",
        "list_handoffs",
        "offer_handoff",
        "list_offers",
        "reject_offer",
        "search_handoffs",
        "list_revisions",
        "diff_handoff",
    ];
    const GROOMER: &[&str] = &[
        "get_handoff",
        "write_handoff",
        "list_handoffs",
        "delete_handoff",
        "offer_handoff",
        "list_offers",
        "reject_offer",
        "search_handoffs",
        "list_revisions",
        "diff_handoff",
    ];

    #[test]
    fn the_contract_table() {
        let cases: [(&str, &[&str]); 9] = [
            ("refine", GROOMER),
            ("implement", WRITER),
            ("issueLifecycle", WRITER),
            ("issuelifecycle", WRITER),
            ("incident", WRITER),
            ("brainstorm", WRITER),
            ("review", &[]),
            ("", &[]),
            ("refine2", &[]),
        ];
        for (profile, tools) in cases {
            let got: Vec<&str> = for_profile(&Profile::new(profile))
                .map(|t| t.name)
                .collect();
            assert_eq!(got, tools, "profile {profile:?}");
        }
    }

    #[test]
    fn an_unknown_tool_is_answered_with_exactly_the_profiles_tools() {
        // (profile, who the message names, the tools it lists)
        let cases: [(&str, &str, &[&str]); 3] = [
            ("refine", "profile `refine`", GROOMER),
            ("implement", "profile `implement`", WRITER),
            ("reviewer", "profile `reviewer`", &[]),
        ];
        for (profile, who, tools) in cases {
            let msg = unknown("drop_tables", &Profile::new(profile));
            let prefix = format!("unknown tool `drop_tables`: tools for {who}: ");
            let listed = msg
                .strip_prefix(&prefix)
                .unwrap_or_else(|| panic!("{msg:?} does not start with {prefix:?}"));
            let listed: Vec<&str> = match listed {
                "none" => Vec::new(),
                names => names.split(", ").collect(),
            };
            assert_eq!(listed, tools, "profile {profile:?}");
        }
    }

    #[test]
    fn a_handoff_reads_the_same_from_the_apiserver_and_the_mirror() {
        let at = k8s_openapi::jiff::Timestamp::from_second(60).expect("ts");
        let mut h = Handoff::new(
            &name_for_key("k"),
            handoff_core::api::HandoffSpec {
                handoff_key: "k".into(),
                project: "p".into(),
                repo: Some("o/r".into()),
                kind: None,
                body: "b".into(),
                created_by: Some("alice".into()),
            },
        );
        h.metadata.namespace = Some("ns".into());
        h.status = Some(handoff_core::api::HandoffStatus {
            revision: Some(3),
            updated_at: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at)),
            content_hash: Some(h.spec.content_hash()),
            ..Default::default()
        });
        let row = ListedRow {
            handoff_key: "k".into(),
            project: "p".into(),
            repo: Some("o/r".into()),
            kind: None,
            created_by: "alice".into(),
            body: "b".into(),
            updated_at: at,
            revision: 3,
        };
        let expected = serde_json::json!({
            "handoff_key": "k", "project": "p", "repo": "o/r", "created_by": "alice",
            "updated_at": "1970-01-01T00:01:00Z", "body": "b", "revision": 3,
            "object": format!("ns/{}", name_for_key("k")),
        });
        for view in [HandoffView::of(&h), HandoffView::of_revision("ns", &row)] {
            assert_eq!(serde_json::to_value(&view).expect("json"), expected);
        }
        let unknown = ListedRow {
            created_by: String::new(),
            ..row
        };
        assert_eq!(HandoffFacts::of_row(&unknown).created_by, None, "no writer");
    }

    #[test]
    fn wire_names_are_unique_and_found() {
        for tool in TOOLS {
            let found = find(tool.name).map(|t| t.name);
            assert_eq!(found, Some(tool.name));
            assert_eq!((tool.definition)().name, tool.name, "{}", tool.name);
        }
        assert!(find("drop_tables").is_none());
    }

    /// Every `format` in a schema, wherever it is.
    fn formats(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                if let Some(f) = map.get("format").and_then(serde_json::Value::as_str) {
                    out.push(f.to_owned());
                }
                map.values().for_each(|v| formats(v, out));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| formats(v, out)),
            _ => {}
        }
    }

    #[test]
    fn schemas_carry_only_standard_formats() {
        let mut raw = Vec::new();
        formats(
            &serde_json::to_value(schemars::schema_for!(list::ListArgs)).expect("schema"),
            &mut raw,
        );
        assert!(
            raw.iter().any(|f| !STANDARD_FORMATS.contains(&f.as_str())),
            "schemars emits non-standard formats ({raw:?}); this test would prove nothing"
        );
        for tool in TOOLS {
            let def = (tool.definition)();
            let mut found = Vec::new();
            formats(
                &serde_json::Value::Object((*def.input_schema).clone()),
                &mut found,
            );
            if let Some(output) = &def.output_schema {
                formats(&serde_json::Value::Object((**output).clone()), &mut found);
            }
            let nonstandard: Vec<&String> = found
                .iter()
                .filter(|f| !STANDARD_FORMATS.contains(&f.as_str()))
                .collect();
            assert!(nonstandard.is_empty(), "{}: {nonstandard:?}", tool.name);
        }
    }

    #[test]
    fn every_tool_has_object_schemas_and_honest_annotations() {
        for tool in TOOLS {
            let def = (tool.definition)();
            let kind = def.input_schema.get("type").and_then(|t| t.as_str());
            assert_eq!(kind, Some("object"), "{}", tool.name);
            assert!(def.output_schema.is_some(), "{}", tool.name);
            let a = def.annotations.expect("annotations");
            let writes = a.read_only_hint == Some(false);
            assert!(a.read_only_hint.is_some(), "{}", tool.name);
            assert_eq!(a.destructive_hint.is_some(), writes, "{}", tool.name);
            assert_eq!(a.idempotent_hint.is_some(), writes, "{}", tool.name);
        }
        // (tool, read-only, destructive, idempotent)
        let expected = [
            ("get_handoff", true, None, None),
            ("list_handoffs", true, None, None),
            ("list_offers", true, None, None),
            ("search_handoffs", true, None, None),
            ("list_revisions", true, None, None),
            ("diff_handoff", true, None, None),
            ("write_handoff", false, Some(false), Some(true)),
            ("delete_handoff", false, Some(true), Some(true)),
            ("offer_handoff", false, Some(false), Some(false)),
            ("reject_offer", false, Some(true), Some(true)),
        ];
        for (name, read_only, destructive, idempotent) in expected {
            let tool = find(name).unwrap_or_else(|| panic!("{name} is in the table"));
            let a = (tool.definition)().annotations.expect("annotations");
            assert_eq!(a.read_only_hint, Some(read_only), "{name}");
            assert_eq!(a.destructive_hint, destructive, "{name}");
            assert_eq!(a.idempotent_hint, idempotent, "{name}");
        }
    }
}
