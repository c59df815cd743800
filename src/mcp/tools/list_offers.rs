//! `list_offers` (extension): a project's offers, optionally to one agent
//! or in one phase, oldest first.

use rmcp::model::{JsonObject, ToolAnnotations};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{OfferView, Tool, definition};
use crate::api::OfferPhase;
use crate::api::validation::{self, FieldError};
use crate::mcp::call::{Answer, Call, CallError, answer};
use crate::mcp::profiles::Audience;

const NAME: &str = "list_offers";

/// The row of `list_offers` in the tool table.
pub const TOOL: Tool = Tool {
    name: NAME,
    audience: Audience::Writers,
    action: "list offers of",
    definition: || {
        definition::<ListOffersArgs, ListOffersResult>(
            NAME,
            "List a project's offers (optionally to one agent, or in one phase).",
            ToolAnnotations::new().read_only(true).open_world(false),
        )
    },
    call: |call, args| Box::pin(handle(call, args)),
};

/// Arguments of `list_offers`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListOffersArgs {
    /// The project.
    pub project: String,
    /// Only offers to this agent.
    #[serde(default)]
    pub to: Option<String>,
    /// Only offers in this phase: Offered, Accepted, Completed, Rejected or Superseded.
    #[serde(default)]
    pub phase: Option<OfferPhase>,
}

/// Result of `list_offers`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ListOffersResult {
    /// Offers, oldest first.
    pub offers: Vec<OfferView>,
}

async fn handle(call: &Call<'_>, args: Option<JsonObject>) -> Result<Answer, CallError> {
    let args: ListOffersArgs = call.args(args)?;
    validate(&args)?;
    let offers = call
        .offer_store()
        .list(&args.project, args.to.as_deref(), args.phase)
        .await
        .map_err(|e| call.offer_error(e))?;
    let result = ListOffersResult {
        offers: offers.iter().map(OfferView::of).collect(),
    };
    let text = text(&args.project, &result);
    Ok(answer(&result, text))
}

/// Checks the project and the destination.
fn validate(args: &ListOffersArgs) -> Result<(), FieldError> {
    validation::project(&args.project)?;
    if let Some(to) = &args.to {
        validation::label_value("to", to)?;
    }
    Ok(())
}

/// The text of a `list_offers` answer.
pub fn text(project: &str, result: &ListOffersResult) -> String {
    format!("{} offer(s) in project {project}.", result.offers.len())
}
