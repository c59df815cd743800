//! The export file: JSON Lines, versioned, and its validation.
//!
//! ```text
//! {"apiVersion":"handoff.dev/export/v1","kind":"HandoffExport","namespace":"team-a","exportedAt":"…","history":false}
//! {"name":"acme-api-42-…","spec":{"handoffKey":"acme/api#42","project":"shop",…},"revision":3,"updatedAt":"…"}
//! …
//! {"kind":"HandoffExportEnd","handoffs":2}
//! ```
//!
//! Why JSON Lines and not one document: the export writes each page of
//! the apiserver's list as it reads it (memory stays one page, however
//! large the namespace), and every error on import names a line, an entry
//! and a key; `jq -c`, `grep` and `split` work per handoff. Why a header
//! and an end line: the header carries the format's version, checked
//! first; the end line carries the count, so a truncated file (a full
//! disk, an interrupted copy), which would otherwise be valid JSON Lines,
//! is refused instead of imported in part.
//!
//! Parsing reads each line as a JSON value and checks the fields one by
//! one (no field unknown, none missing, each of its type), so an error
//! names the line, the entry, the key and the field, never a parser's
//! text; then every spec goes through the checks every write meets
//! ([`validation::handoff_spec`], [`validation::no_credentials_in_handoff`]:
//! the bridge's and the admission webhook's), history bodies through the
//! credential scan too.

use serde::Serialize;
use serde_json::{Map, Value};

use handoff_core::api::HandoffSpec;
use handoff_core::api::naming::name_for_key;
use handoff_core::api::validation::{self, FieldError};
use handoff_core::text::visible_line;

/// The version of the format this release writes and reads.
pub const API_VERSION: &str = "handoff.dev/export/v1";
/// The header line's `kind`.
pub const HEADER_KIND: &str = "HandoffExport";
/// The end line's `kind`.
pub const END_KIND: &str = "HandoffExportEnd";
/// Most errors an import prints before it stops listing them.
const MAX_ERRORS: usize = 20;

/// The first line.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// Always [`API_VERSION`].
    pub api_version: String,
    /// Always [`HEADER_KIND`].
    pub kind: String,
    /// The namespace exported.
    pub namespace: String,
    /// The project exported, when only one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// When the export started (RFC 3339).
    pub exported_at: String,
    /// Whether entries carry the mirror's revisions.
    pub history: bool,
}

/// One handoff: its object's name, spec and the status worth keeping.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// `metadata.name`, always the one derived from the key.
    pub name: String,
    /// The spec as stored (key, project, repo, kind, body, createdBy).
    pub spec: HandoffSpec,
    /// `metadata.creationTimestamp` in the source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// `status.revision` in the source (the target counts from 1 again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// `status.updatedAt` in the source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// The mirror's revisions of the key, oldest first (`--history`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Revision>,
}

/// One revision from the mirror's history.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Revision {
    /// Its number.
    pub revision: i64,
    /// When it was counted (RFC 3339).
    pub written_at: String,
    /// Who wrote it (empty when unknown).
    pub created_by: String,
    /// Its project.
    pub project: String,
    /// Its repo.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// Its kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Its body.
    pub body: String,
}

/// The last line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct End {
    /// Always [`END_KIND`].
    pub kind: String,
    /// How many entries the file holds.
    pub handoffs: u64,
}

impl End {
    /// The end line of a file of `handoffs` entries.
    pub fn new(handoffs: u64) -> Self {
        Self {
            kind: END_KIND.to_owned(),
            handoffs,
        }
    }
}

/// A parsed, validated file.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// The header.
    pub header: Header,
    /// The entries, in file order.
    pub entries: Vec<Entry>,
}

/// One line of JSON (no newline): what the export writes.
pub fn line(value: &impl Serialize) -> Result<String, serde_json::Error> {
    serde_json::to_string(value)
}

/// Pure: the file `text` parsed and validated whole, or every problem
/// found (at most [`MAX_ERRORS`]), each naming the line, the entry, the
/// key and the field.
pub fn parse(text: &str) -> Result<Export, Vec<String>> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let Some(&(first_no, first)) = lines.first() else {
        return Err(vec![
            "the file is empty: an export starts with a HandoffExport header line".to_owned(),
        ]);
    };
    let header = header(first).map_err(|e| vec![format!("line {first_no} (header): {e}")])?;
    let mut errors = Vec::new();
    let Some(&(last_no, last)) = lines.last().filter(|_| lines.len() > 1) else {
        return Err(vec![truncated()]);
    };
    let end = match end(last) {
        Ok(end) => Some(end),
        Err(e) => {
            errors.push(format!("line {last_no}: {e}"));
            None
        }
    };
    let mut entries = Vec::new();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (index, &(line_no, text)) in lines[1..lines.len() - 1].iter().enumerate() {
        let at = format!("line {line_no}, entry {}", index + 1);
        match entry(text) {
            Ok(e) => {
                if let Some(first) = seen.insert(e.spec.handoff_key.clone(), index + 1) {
                    errors.push(format!(
                        "{at}, key `{}`: a twin: entry {first} holds the same key (rule: one \
                         handoff per key)",
                        visible_line(&e.spec.handoff_key)
                    ));
                }
                entries.push(e);
            }
            Err((key, e)) => errors.push(match key {
                Some(key) => format!("{at}, key `{}`: {e}", visible_line(&key)),
                None => format!("{at}: {e}"),
            }),
        }
    }
    if let Some(end) = end.filter(|e| e.handoffs != entries.len() as u64 && errors.is_empty()) {
        errors.push(format!(
            "line {last_no}: invalid `handoffs`: the count of entries; the end line says {}, the \
             file holds {} (a truncated or edited file)",
            end.handoffs,
            entries.len()
        ));
    }
    if errors.is_empty() {
        return Ok(Export { header, entries });
    }
    let more = errors.len().saturating_sub(MAX_ERRORS);
    errors.truncate(MAX_ERRORS);
    if more > 0 {
        errors.push(format!("… and {more} more"));
    }
    Err(errors)
}

fn truncated() -> String {
    format!(
        "the file does not end with a {END_KIND} line (rule: an export ends with the count of its \
         entries): it is truncated"
    )
}

/// The fields of one line's object, checked as they are taken.
struct Fields {
    object: Map<String, Value>,
    prefix: &'static str,
}

impl Fields {
    fn of(text: &str, prefix: &'static str, allowed: &[&str]) -> Result<Self, String> {
        match serde_json::from_str::<Value>(text) {
            Ok(value) => Self::of_value(&value, prefix, allowed),
            Err(e) => Err(format!(
                "not valid JSON (from column {}; rule: one JSON object per line)",
                e.column()
            )),
        }
    }

    fn of_value(value: &Value, prefix: &'static str, allowed: &[&str]) -> Result<Self, String> {
        let Value::Object(object) = value else {
            return Err(format!("not a JSON object; got {}", kind_of(value)));
        };
        let object = object.clone();
        if let Some(unknown) = object.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(format!(
                "unknown field `{prefix}{unknown}` (rule: the fields of {API_VERSION} are {})",
                allowed.join(", ")
            ));
        }
        Ok(Self { object, prefix })
    }

    fn problem(&self, field: &str, rule: &str, got: &Value) -> String {
        let got = match got {
            Value::Null => "it is missing or null".to_owned(),
            other => format!("got {}", kind_of(other)),
        };
        format!("invalid `{}{field}`: {rule}; {got}", self.prefix)
    }

    fn string(&self, field: &str) -> Result<String, String> {
        match self.object.get(field).unwrap_or(&Value::Null) {
            Value::String(s) => Ok(s.clone()),
            other => Err(self.problem(field, "a string", other)),
        }
    }

    fn optional_string(&self, field: &str) -> Result<Option<String>, String> {
        match self.object.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.string(field).map(Some),
        }
    }

    fn int(&self, field: &str) -> Result<i64, String> {
        let value = self.object.get(field).unwrap_or(&Value::Null);
        value
            .as_i64()
            .ok_or_else(|| self.problem(field, "an integer", value))
    }

    fn optional_int(&self, field: &str) -> Result<Option<i64>, String> {
        match self.object.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.int(field).map(Some),
        }
    }

    fn time(&self, field: &str) -> Result<String, String> {
        let value = self.string(field)?;
        match value.parse::<jiff::Timestamp>() {
            Ok(_) => Ok(value),
            Err(_) => Err(format!(
                "invalid `{}{field}`: an RFC 3339 time (e.g. 2026-12-05T09:00:00Z); got {value:?}",
                self.prefix
            )),
        }
    }

    fn optional_time(&self, field: &str) -> Result<Option<String>, String> {
        match self.object.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.time(field).map(Some),
        }
    }

    fn exactly(&self, field: &str, want: &str) -> Result<(), String> {
        let got = self.string(field)?;
        if got == want {
            return Ok(());
        }
        Err(format!(
            "invalid `{}{field}`: must be {want:?} (this release reads {API_VERSION}); got {got:?}",
            self.prefix
        ))
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn header(text: &str) -> Result<Header, String> {
    let f = Fields::of(
        text,
        "",
        &[
            "apiVersion",
            "kind",
            "namespace",
            "project",
            "exportedAt",
            "history",
        ],
    )
    .map_err(|e| format!("{e}; an export starts with its header"))?;
    f.exactly("apiVersion", API_VERSION)?;
    f.exactly("kind", HEADER_KIND)?;
    let history = match f.object.get("history") {
        Some(Value::Bool(b)) => *b,
        other => return Err(f.problem("history", "true or false", other.unwrap_or(&Value::Null))),
    };
    Ok(Header {
        api_version: API_VERSION.to_owned(),
        kind: HEADER_KIND.to_owned(),
        namespace: f.string("namespace")?,
        project: f.optional_string("project")?,
        exported_at: f.time("exportedAt")?,
        history,
    })
}

fn end(text: &str) -> Result<End, String> {
    let f = Fields::of(text, "", &["kind", "handoffs"]).map_err(|_| truncated())?;
    if f.string("kind").ok().as_deref() != Some(END_KIND) {
        return Err(truncated());
    }
    let handoffs = f.int("handoffs")?;
    let handoffs = u64::try_from(handoffs).map_err(|_| {
        format!("invalid `handoffs`: a count of entries, 0 or more; got {handoffs}")
    })?;
    Ok(End::new(handoffs))
}

/// One entry, or its problem with the key when the key was readable.
fn entry(text: &str) -> Result<Entry, (Option<String>, String)> {
    let f = Fields::of(
        text,
        "",
        &[
            "name",
            "spec",
            "createdAt",
            "revision",
            "updatedAt",
            "history",
        ],
    )
    .map_err(|e| (None, e))?;
    // The key names the entry in every error, once it can be read.
    let key = f
        .object
        .get("spec")
        .and_then(|s| s.get("handoffKey"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let spec = spec(f.object.get("spec")).map_err(|e| (key.clone(), e))?;
    let fail = |e: String| (key.clone(), e);
    let name = f.string("name").map_err(fail)?;
    let derived = name_for_key(&spec.handoff_key);
    if name != derived {
        return Err(fail(format!(
            "invalid `name`: the name derived from the key (rule: one name per key, see `handoff \
             name`), {derived:?}; got {name:?}, a twin"
        )));
    }
    validation::handoff_spec(&spec).map_err(|e| fail(spec_error(e)))?;
    validation::no_credentials_in_handoff(&spec).map_err(|e| fail(spec_error(e)))?;
    let history = match f.object.get("history") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| revision(i, item))
            .collect::<Result<_, _>>()
            .map_err(fail)?,
        Some(other) => return Err(fail(f.problem("history", "an array", other))),
    };
    Ok(Entry {
        name,
        created_at: f.optional_time("createdAt").map_err(fail)?,
        revision: f.optional_int("revision").map_err(fail)?,
        updated_at: f.optional_time("updatedAt").map_err(fail)?,
        spec,
        history,
    })
}

/// A field error of the spec, named as the file names it.
fn spec_error(e: FieldError) -> String {
    let field = match e.field {
        "handoff_key" => "handoffKey",
        "created_by" => "createdBy",
        other => other,
    };
    format!("invalid `spec.{field}`: {}; {}", e.rule, e.problem)
}

fn spec(value: Option<&Value>) -> Result<HandoffSpec, String> {
    let Some(value) = value.filter(|v| v.is_object()) else {
        return Err(format!(
            "invalid `spec`: an object (handoffKey, project, body, …); got {}",
            value.map_or("nothing", kind_of)
        ));
    };
    let f = Fields::of_value(
        value,
        "spec.",
        &["handoffKey", "project", "repo", "kind", "body", "createdBy"],
    )?;
    Ok(HandoffSpec {
        handoff_key: f.string("handoffKey")?,
        project: f.string("project")?,
        repo: f.optional_string("repo")?,
        kind: f.optional_string("kind")?,
        body: f.string("body")?,
        created_by: f.optional_string("createdBy")?,
    })
}

fn revision(index: usize, value: &Value) -> Result<Revision, String> {
    let prefix = "history[].";
    let f = Fields::of_value(
        value,
        prefix,
        &[
            "revision",
            "writtenAt",
            "createdBy",
            "project",
            "repo",
            "kind",
            "body",
        ],
    )
    .map_err(|e| format!("history[{index}]: {e}"))?;
    let at = |e: String| format!("history[{index}]: {e}");
    let body = f.string("body").map_err(at)?;
    validation::no_credentials("body", &body)
        .map_err(|e| at(format!("invalid `{prefix}body`: {}; {}", e.rule, e.problem)))?;
    Ok(Revision {
        revision: f.int("revision").map_err(at)?,
        written_at: f.time("writtenAt").map_err(at)?,
        created_by: f.string("createdBy").map_err(at)?,
        project: f.string("project").map_err(at)?,
        repo: f.optional_string("repo").map_err(at)?,
        kind: f.optional_string("kind").map_err(at)?,
        body,
    })
}

#[cfg(test)]
mod tests;
