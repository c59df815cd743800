//! docs/contract.md defines the contract for people; this test keeps it
//! the contract the bridge serves: the four tools, each with exactly the
//! arguments of its input schema, their types and whether they are
//! required.

use std::collections::BTreeMap;

use super::find;

/// The contract's tools, in the order docs/contract.md presents them.
const CONTRACT: [&str; 4] = [
    "write_handoff",
    "get_handoff",
    "list_handoffs",
    "delete_handoff",
];

/// An argument as documented or defined: its JSON type and whether it is
/// required.
type Arguments = BTreeMap<String, (String, bool)>;

/// The tools docs/contract.md has a `## \`tool\`` section for, in order,
/// with the argument rows of each section's table
/// (`| \`name\` | type | yes/no | rule |`); the tables of other sections
/// are not arguments.
fn documented(doc: &str) -> Vec<(String, Arguments)> {
    let mut tools: Vec<(String, Arguments)> = Vec::new();
    for line in doc.lines() {
        if let Some(name) = line
            .strip_prefix("## `")
            .and_then(|rest| rest.strip_suffix('`'))
        {
            tools.push((name.to_owned(), Arguments::new()));
        } else if line.starts_with("## ") {
            tools.push((String::new(), Arguments::new()));
        } else if let (Some((tool, arguments)), Some(row)) =
            (tools.last_mut(), line.strip_prefix("| `"))
        {
            if tool.is_empty() {
                continue;
            }
            let cells: Vec<&str> = row.split(" | ").collect();
            let name = cells[0].trim_end_matches('`');
            let required = match cells.get(2).copied() {
                Some("yes") => true,
                Some("no") => false,
                other => {
                    panic!("docs/contract.md: `{name}`: required must be yes or no, got {other:?}")
                }
            };
            arguments.insert(name.to_owned(), (cells[1].to_owned(), required));
        }
    }
    tools.retain(|(name, _)| !name.is_empty());
    tools
}

/// The arguments `tool`'s input schema defines.
fn defined(tool: &str) -> Arguments {
    let definition = (find(tool)
        .unwrap_or_else(|| panic!("{tool} is not in the bridge's tool table"))
        .definition)();
    let schema = &definition.input_schema;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(serde_json::Value::as_array)
        .map(|r| r.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    let properties = schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .unwrap_or_else(|| panic!("{tool}: no properties in {schema:?}"));
    properties
        .iter()
        .map(|(name, property)| {
            let kind = match &property["type"] {
                serde_json::Value::String(kind) => kind.clone(),
                serde_json::Value::Array(kinds) => kinds
                    .iter()
                    .filter_map(serde_json::Value::as_str)
                    .find(|k| *k != "null")
                    .unwrap_or_default()
                    .to_owned(),
                other => panic!("{tool}.{name}: type {other}"),
            };
            (name.clone(), (kind, required.contains(&name.as_str())))
        })
        .collect()
}

#[test]
fn the_contract_doc_lists_exactly_the_contract_tools_and_arguments() {
    let doc = include_str!("../../../../docs/contract.md");
    let documented = documented(doc);
    let names: Vec<&str> = documented.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, CONTRACT, "docs/contract.md: the contract's tools");
    for (tool, arguments) in &documented {
        assert_eq!(
            arguments,
            &defined(tool),
            "docs/contract.md, `{tool}`: (type, required) per argument, as documented (left) \
             and as the bridge defines them (right)"
        );
    }
}

#[test]
fn a_doc_that_drifts_is_caught() {
    let doc = "## `get_handoff`\n\n| argument | type | required | rule |\n|---|---|---|---|\n\
               | `handoff_key` | string | yes | the key |\n";
    let documented = documented(doc);
    assert_eq!(documented.len(), 1);
    assert_ne!(
        documented[0].1,
        defined("get_handoff"),
        "`revision` is missing"
    );
}
