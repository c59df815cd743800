//! Every string argument of every tool, read from the tools' own
//! definitions (their input schemas), with a hidden character in it: the
//! calls the bad-input suites drive through a bridge, and what no answer
//! may hold (PostgreSQL's error text). A tool added to the table without a
//! valid call here fails those suites.

use serde_json::{Value, json};

use handoff_bridge::profiles::Profile;

/// A valid call of each tool, which one argument at a time is spoiled.
fn valid_args(tool: &str) -> Value {
    match tool {
        "get_handoff" | "delete_handoff" | "list_revisions" => json!({"handoff_key": "k"}),
        "write_handoff" => {
            json!({"handoff_key": "k", "project": "p", "repo": "org/r", "kind": "issue", "body": "b"})
        }
        "list_handoffs" | "list_offers" => json!({"project": "p"}),
        "offer_handoff" => json!({"project": "p", "to": "dev-lead", "handoff_key": "k"}),
        "reject_offer" => json!({"offer": "nope-1"}),
        "search_handoffs" => json!({"project": "p", "query": "refund"}),
        "diff_handoff" => json!({"handoff_key": "k", "from": 1, "to": 2}),
        other => panic!("no valid call of {other}: add one to tests/common/bad_args.rs"),
    }
}

/// The hidden characters put in each argument: NUL, and ESC (a control
/// character that is no whitespace), with the name the case goes by.
const HIDDEN: [(char, &str); 2] = [('\u{0}', "NUL"), ('\u{1b}', "ESC")];

/// Whether a property's schema says it is a string (or a string or null).
fn is_string(schema: &Value) -> bool {
    match &schema["type"] {
        Value::String(t) => t == "string",
        Value::Array(types) => types.iter().any(|t| t == "string"),
        _ => false,
    }
}

/// The (tool, argument) pairs whose schema says string, in table order:
/// every tool the groomer (which sees them all) is offered.
pub(crate) fn string_arguments() -> Vec<(&'static str, String)> {
    let mut pairs = Vec::new();
    for tool in handoff_bridge::tools::for_profile(&Profile::new("refine")) {
        let definition = (tool.definition)();
        let properties = definition
            .input_schema
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or_else(|| panic!("{}: an input schema without properties", tool.name));
        for (field, schema) in properties {
            if is_string(schema) {
                pairs.push((tool.name, field.clone()));
            }
        }
    }
    pairs
}

/// One call per tool, string argument and hidden character: (what the case
/// is, the plan step, the field its refusal must name).
pub(crate) fn hidden_character_calls() -> Vec<(String, Value, String)> {
    let pairs = string_arguments();
    for expected in [
        ("search_handoffs", "query"),
        ("search_handoffs", "cursor"),
        ("list_handoffs", "cursor"),
        ("list_offers", "cursor"),
        ("list_revisions", "cursor"),
        ("reject_offer", "offer"),
        ("offer_handoff", "to"),
        ("write_handoff", "body"),
        ("diff_handoff", "handoff_key"),
    ] {
        assert!(
            pairs.iter().any(|(t, f)| (*t, f.as_str()) == expected),
            "{expected:?} is not among the string arguments the schemas give: {pairs:?}"
        );
    }
    let mut calls = Vec::new();
    for (tool, field) in pairs {
        for (hidden, name) in HIDDEN {
            let mut args = valid_args(tool);
            args[&field] = json!(format!("a{hidden}b"));
            calls.push((
                format!("{tool} {field} with {name}"),
                json!({"op": "call", "tool": tool, "args": args}),
                field.clone(),
            ));
        }
    }
    calls
}

/// What PostgreSQL's error text looks like; no answer may hold any.
pub(crate) const POSTGRES_TEXT: [&str; 6] = [
    "db error",
    "ERROR:",
    "invalid byte sequence",
    "SQLSTATE",
    "0x00",
    "tsquery",
];

/// Asserts that `answer` (a step's result, or its text) holds none of
/// [`POSTGRES_TEXT`].
pub(crate) fn assert_no_postgres_text(case: &str, answer: &str) {
    for words in POSTGRES_TEXT {
        assert!(
            !answer.contains(words),
            "{case}: the answer carries PostgreSQL's text ({words:?}): {answer}"
        );
    }
}
