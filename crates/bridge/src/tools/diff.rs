//! `diff_handoff` (extension): a unified diff between two revisions of a
//! key from the PostgreSQL mirror's history (the `similar` crate), cut at
//! [`MAX_DIFF_BYTES`] on a line boundary (the result says so). Gated like
//! `get_handoff{revision}`; without the mirror, an error saying how to turn
//! it on.

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::list_revisions::needs_mirror;
use super::{Tool, definition, reads};
use crate::call::{Answer, Call, CallError, answer};
use crate::profiles::Audience;
use handoff_core::api::validation::{self, FieldError};
use handoff_mirror::{ListedRow, Mirror};

const NAME: &str = "diff_handoff";

/// Longest diff answered, in bytes; a longer one is cut.
pub(crate) const MAX_DIFF_BYTES: usize = 16 * 1024;

/// The row of `diff_handoff` in the tool table.
pub(crate) const TOOL: Tool = Tool {
    name: NAME,
    audience: Audience::Writers,
    action: "get",
    definition: || {
        definition::<DiffArgs, DiffResult>(
            NAME,
            "Show what changed in a handoff between two revisions (numbers from list_revisions), as a \
             unified diff of the bodies (cut when longer than 16 KiB; the answer says so).",
            reads(),
        )
    },
    call: |call, args| Box::pin(handle(call, args)),
};

/// Arguments of `diff_handoff`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffArgs {
    /// The continuation key.
    pub handoff_key: String,
    /// The older revision (1 or more).
    #[schemars(range(min = 1))]
    pub from: i64,
    /// The newer revision (1 or more).
    #[schemars(range(min = 1))]
    pub to: i64,
}

/// Result of `diff_handoff`.
#[derive(Debug, Serialize, JsonSchema, PartialEq)]
pub struct DiffResult {
    /// The key.
    pub handoff_key: String,
    /// The revision diffed from.
    pub from: i64,
    /// The revision diffed to.
    pub to: i64,
    /// The unified diff of the bodies (empty when identical).
    pub diff: String,
    /// True when the diff was cut at 16 KiB.
    pub truncated: bool,
}

async fn handle(call: &Call<'_>, args: Option<JsonObject>) -> Result<Answer, CallError> {
    let args: DiffArgs = call.args(args)?;
    validation::handoff_key(&args.handoff_key)?;
    for (field, value) in [("from", args.from), ("to", args.to)] {
        if value < 1 {
            return Err(FieldError {
                field,
                rule: "a content revision number, 1 or more".into(),
                problem: format!("got {value}"),
            }
            .into());
        }
    }
    let Some(mirror) = call.mirror else {
        return Err(needs_mirror(NAME));
    };
    call.authorize("get").await?;
    let result = between(
        mirror,
        call.namespace(),
        &args.handoff_key,
        args.from,
        args.to,
    )
    .await?;
    let text = text(&result);
    Ok(answer(&result, text))
}

/// The diff of `key` from revision `from` to `to`; an unknown revision is
/// refused by name.
pub async fn between(
    mirror: &Mirror,
    namespace: &str,
    key: &str,
    from: i64,
    to: i64,
) -> Result<DiffResult, CallError> {
    let old = known(mirror, namespace, key, "from", from).await?;
    let new = known(mirror, namespace, key, "to", to).await?;
    let (diff, truncated) = unified(&old.body, &new.body, from, to, MAX_DIFF_BYTES);
    Ok(DiffResult {
        handoff_key: key.to_owned(),
        from,
        to,
        diff,
        truncated,
    })
}

async fn known(
    mirror: &Mirror,
    namespace: &str,
    key: &str,
    field: &'static str,
    revision: i64,
) -> Result<ListedRow, CallError> {
    mirror
        .revision(namespace, key, revision)
        .await?
        .ok_or_else(|| {
            FieldError {
                field,
                rule: "a revision the history holds (see list_revisions)".into(),
                problem: format!("`{key}` has no revision {revision} in the history"),
            }
            .into()
        })
}

/// The unified diff of `old` → `new`, at most `max` bytes (cut after the
/// last whole line that fits); and whether it was cut.
pub fn unified(old: &str, new: &str, from: i64, to: i64, max: usize) -> (String, bool) {
    let diff = similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("revision {from}"), &format!("revision {to}"))
        .to_string();
    if diff.len() <= max {
        return (diff, false);
    }
    let mut cut = String::with_capacity(max);
    for line in diff.split_inclusive('\n') {
        if cut.len() + line.len() > max {
            break;
        }
        cut.push_str(line);
    }
    (cut, true)
}

/// The text of a `diff_handoff` answer.
pub fn text(result: &DiffResult) -> String {
    let head = format!(
        "Changes to `{}` from revision {} to revision {}",
        result.handoff_key, result.from, result.to
    );
    if result.diff.is_empty() {
        return format!("{head}: none (the bodies are identical).");
    }
    let cut = if result.truncated {
        format!(
            "\n(diff cut at {MAX_DIFF_BYTES} bytes; read whole revisions with get_handoff{{revision}})"
        )
    } else {
        String::new()
    };
    format!("{head}:\n\n{}{cut}", result.diff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_are_unified_and_cut_on_a_line_boundary() {
        let (diff, cut) = unified("a\nb\n", "a\nc\n", 1, 2, MAX_DIFF_BYTES);
        assert_eq!(
            diff,
            "--- revision 1\n+++ revision 2\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
        );
        assert!(!cut);
        let old: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        let (diff, cut) = unified(&old, "", 1, 2, 1000);
        assert!(
            cut && diff.len() <= 1000 && diff.ends_with('\n'),
            "{}",
            diff.len()
        );
        assert_eq!(
            unified("same\n", "same\n", 1, 2, 10),
            (String::new(), false)
        );
    }
}
