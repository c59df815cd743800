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
//! Beside the tools, three leaves they all import, which import no tool:
//! [`contract`] (what a tool is and what its handler gets: [`contract::Tool`],
//! [`contract::Call`], [`contract::CallError`], argument parsing, the error
//! mapping), [`definition`] (the shape of a definition, with its `reads` /
//! `writes` annotations) and [`views`] (the results several tools share:
//! [`HandoffFacts`], the one view of a handoff every result flattens;
//! [`HandoffView`]; [`OfferView`]); and in [`page`] the page size and the
//! one cursor codec of the paged tools. This table imports the tools, the
//! tools import only those leaves, so no two files import each other.

pub mod contract;
#[cfg(test)]
mod contract_doc;
pub(crate) mod definition;
pub(crate) mod delete;
pub mod diff;
pub mod get;
pub mod list;
pub(crate) mod list_offers;
pub(crate) mod list_revisions;
pub(crate) mod offer;
pub mod page;
pub(crate) mod reject_offer;
pub mod search;
pub(crate) mod views;
pub(crate) mod write;

use self::contract::Tool;
use crate::profiles::Profile;

pub use self::views::{HandoffFacts, HandoffView, OfferView};

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

#[cfg(test)]
mod tests {
    use super::*;
    use definition::STANDARD_FORMATS;
    use serde::de::DeserializeOwned;

    /// Every tool in table order, and whether only the groomer sees it.
    const AUDIENCES: [(&str, bool); 10] = [
        ("get_handoff", false),
        ("write_handoff", false),
        ("list_handoffs", false),
        ("delete_handoff", true),
        ("offer_handoff", false),
        ("list_offers", false),
        ("reject_offer", false),
        ("search_handoffs", false),
        ("list_revisions", false),
        ("diff_handoff", false),
    ];

    /// The tools a writer (`groomer` false) or the groomer sees, in table order.
    fn seen_by(groomer: bool) -> Vec<&'static str> {
        AUDIENCES
            .iter()
            .filter(|(_, only_groomer)| groomer || !only_groomer)
            .map(|(name, _)| *name)
            .collect()
    }

    #[test]
    fn the_contract_table() {
        let (writer, groomer) = (seen_by(false), seen_by(true));
        let cases: [(&str, &[&str]); 9] = [
            ("refine", &groomer),
            ("implement", &writer),
            ("issueLifecycle", &writer),
            ("issuelifecycle", &writer),
            ("incident", &writer),
            ("brainstorm", &writer),
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
        let (writer, groomer) = (seen_by(false), seen_by(true));
        // (profile, who the message names, the tools it lists)
        let cases: [(&str, &str, &[&str]); 3] = [
            ("refine", "profile `refine`", &groomer),
            ("implement", "profile `implement`", &writer),
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

    /// The message of parsing `args` for `tool` as `T`, which must fail.
    fn refusal<T: DeserializeOwned + std::fmt::Debug>(
        tool: &str,
        args: Option<serde_json::Value>,
    ) -> String {
        contract::parse_args::<T>(tool, args.and_then(|v| v.as_object().cloned()))
            .expect_err("invalid arguments")
            .to_string()
    }

    #[test]
    fn parse_errors_name_the_tool_and_the_field() {
        use serde_json::json;
        // (message, fragments it must contain)
        let cases: [(String, &[&str]); 4] = [
            (
                refusal::<write::WriteArgs>("write_handoff", Some(json!({"handoff_key": "k"}))),
                &["write_handoff", "missing field `project`"],
            ),
            (
                refusal::<get::GetArgs>("get_handoff", Some(json!({"handoff_key": 5}))),
                &[
                    "get_handoff",
                    "invalid type: integer `5`, expected a string",
                ],
            ),
            (
                refusal::<get::GetArgs>("get_handoff", Some(json!({"handoff_key": "k", "x": 1}))),
                &["unknown field `x`"],
            ),
            (
                refusal::<get::GetArgs>("get_handoff", None),
                &["missing field `handoff_key`"],
            ),
        ];
        for (message, fragments) in cases {
            for fragment in fragments {
                assert!(
                    message.contains(fragment),
                    "{fragment:?} not in {message:?}"
                );
            }
        }
    }
}
