//! `delete_handoff` (contract, groomer only): deletes the handoff of a key;
//! deleting a key without one is not an error.

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::contract::{Answer, Call, CallError, Tool, answer};
use super::definition::{Destructive, Idempotent, definition, writes};
use crate::profiles::Audience;
use handoff_core::api::validation;

const NAME: &str = "delete_handoff";

/// The row of `delete_handoff` in the tool table.
pub(crate) const TOOL: Tool = Tool {
    name: NAME,
    audience: Audience::Groomer,
    action: "delete",
    definition: || {
        definition::<DeleteArgs, DeleteResult>(
            NAME,
            "Delete the handoff for a key (stale or done work). Deleting a key that has no handoff is not an error.",
            writes(Destructive(true), Idempotent(true)),
        )
    },
    call: |call, args| Box::pin(handle(call, args)),
};

/// Arguments of `delete_handoff`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeleteArgs {
    /// The key of the handoff to delete.
    pub handoff_key: String,
}

/// Result of `delete_handoff`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct DeleteResult {
    /// Whether a handoff existed and was deleted (false: there was none).
    pub deleted: bool,
    /// The key.
    pub handoff_key: String,
}

async fn handle(call: &Call<'_>, args: Option<JsonObject>) -> Result<Answer, CallError> {
    let args: DeleteArgs = call.args(args)?;
    validation::handoff_key(&args.handoff_key)?;
    let deleted = call
        .caller
        .store()
        .delete(&args.handoff_key)
        .await
        .map_err(|e| call.kube_error(e))?;
    let result = DeleteResult {
        deleted,
        handoff_key: args.handoff_key,
    };
    let text = text(&result);
    Ok(answer(&result, text))
}

/// The text of a `delete_handoff` answer.
pub(crate) fn text(result: &DeleteResult) -> String {
    if result.deleted {
        format!("Deleted the handoff for `{}`.", result.handoff_key)
    } else {
        format!(
            "No handoff existed for `{}`; nothing to delete.",
            result.handoff_key
        )
    }
}
