//! The shape of a tool's MCP definition: [`definition`] (name, description,
//! argument and result schemas), the [`reads`] / [`writes`] annotations,
//! and [`schema`], which keeps only the formats JSON Schema defines. A leaf:
//! every tool module imports it; it imports none of the bridge's files.

use std::sync::Arc;

use rmcp::model::{JsonObject, ToolAnnotations};
use schemars::JsonSchema;

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
/// The MCP definition of a tool taking `Args` and answering `Result`.
pub(crate) fn definition<Args: JsonSchema, Result: JsonSchema>(
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
pub(crate) fn schema<T: JsonSchema>() -> Arc<JsonObject> {
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
