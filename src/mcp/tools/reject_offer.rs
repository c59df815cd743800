//! `reject_offer` (extension): rejects an offer addressed to the caller; it
//! stays as a record, phase Rejected.

use rmcp::model::{JsonObject, ToolAnnotations};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{OfferView, Tool, definition};
use crate::mcp::call::{Answer, Call, CallError, answer};
use crate::mcp::profiles::Audience;

const NAME: &str = "reject_offer";

/// The row of `reject_offer` in the tool table.
pub const TOOL: Tool = Tool {
    name: NAME,
    audience: Audience::Writers,
    action: "reject offers of",
    definition: || {
        definition::<RejectArgs, RejectResult>(
            NAME,
            "Reject an offer addressed to you (it stays as a record, phase Rejected).",
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(true)
                .open_world(false),
        )
    },
    call: |call, args| Box::pin(handle(call, args)),
};

/// Arguments of `reject_offer`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RejectArgs {
    /// The offer's name (from offer_handoff or list_offers).
    pub offer: String,
}

/// Result of `reject_offer`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RejectResult {
    /// The rejected offer.
    pub offer: OfferView,
}

async fn handle(call: &Call<'_>, args: Option<JsonObject>) -> Result<Answer, CallError> {
    let args: RejectArgs = call.args(args)?;
    let offer = call
        .offer_store()
        .reject(&args.offer)
        .await
        .map_err(|e| call.offer_error(e))?;
    let result = RejectResult {
        offer: OfferView::of(&offer),
    };
    Ok(answer(&result, text(&args.offer)))
}

/// The text of a `reject_offer` answer.
pub fn text(offer: &str) -> String {
    format!("Offer {offer} rejected.")
}
