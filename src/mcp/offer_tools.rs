//! The offer tools — `offer_handoff`, `list_offers`, `reject_offer` — gated
//! like write/get/list. Arguments, results, schemas, validation and texts
//! (pure); the server runs them against an [`crate::offers::store::OfferStore`].

use kube::ResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::validation::{self, FieldError};
use crate::api::{HandoffOffer, HandoffOfferSpec, MAX_BODY_CHARS, OfferPhase};
use crate::offers::decision::Outcome;

/// Arguments of `offer_handoff`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OfferArgs {
    /// The project (a label value).
    pub project: String,
    /// The destination agent, e.g. `dev-lead` (a label value).
    pub to: String,
    /// Your conversation's handoff key (what the destination continues from).
    pub handoff_key: String,
    /// Your session id: repeating an offer in the same session without a new artifact changes nothing.
    #[serde(default)]
    pub session: Option<String>,
    /// A reference or digest of what you hand over (a PR, a document hash); a new one supersedes.
    #[serde(default)]
    pub artifact: Option<String>,
    /// What the destination should know (a compact markdown summary).
    #[serde(default)]
    pub body: Option<String>,
    /// Create only if nothing is pending and the agent is not active; otherwise answer why (not an error).
    #[serde(default)]
    pub if_absent: Option<bool>,
}

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

/// Arguments of `reject_offer`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RejectArgs {
    /// The offer's name (from offer_handoff or list_offers).
    pub offer: String,
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

/// Result of `offer_handoff`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OfferResult {
    /// created, already_offered, superseded_previous or agent_already_active.
    pub outcome: Outcome,
    /// The offer now pending (absent when the agent is already active).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offer: Option<OfferView>,
}

/// Result of `list_offers`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ListOffersResult {
    /// Offers, oldest first.
    pub offers: Vec<OfferView>,
}

/// Result of `reject_offer`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RejectResult {
    /// The rejected offer.
    pub offer: OfferView,
}

/// Validates offer arguments into a spec and the if-absent flag.
pub fn offer_spec(args: OfferArgs) -> Result<(HandoffOfferSpec, bool), FieldError> {
    validation::project(&args.project)?;
    validation::label_value("to", &args.to)?;
    validation::handoff_key(&args.handoff_key)?;
    let body = args.body.filter(|b| !b.is_empty());
    if let Some(body) = &body {
        validation::max_chars("body", body, MAX_BODY_CHARS)?;
    }
    let artifact = args.artifact.filter(|a| !a.is_empty());
    if let Some(artifact) = &artifact {
        validation::max_chars("artifact", artifact, 1024)?;
    }
    let session = args.session.filter(|s| !s.is_empty());
    if let Some(session) = &session {
        validation::max_chars("session", session, 253)?;
    }
    let spec = HandoffOfferSpec {
        project: args.project,
        to: args.to,
        from_key: args.handoff_key,
        session,
        artifact,
        body,
    };
    Ok((spec, args.if_absent.unwrap_or(false)))
}

/// The text of an `offer_handoff` answer.
pub fn offer_text(spec: &HandoffOfferSpec, result: &OfferResult) -> String {
    let name = result
        .offer
        .as_ref()
        .map(|o| o.name.as_str())
        .unwrap_or("-");
    match result.outcome {
        Outcome::Created => format!(
            "Offered to {} in project {} as {name}.",
            spec.to, spec.project
        ),
        Outcome::AlreadyOffered => format!(
            "Already offered: {name} is pending for {}; nothing was written.",
            spec.to
        ),
        Outcome::SupersededPrevious => {
            format!(
                "Offered to {} as {name}; the previously pending offer was superseded.",
                spec.to
            )
        }
        Outcome::AgentAlreadyActive => format!(
            "agent_already_active: {} is already working in project {}; nothing was offered.",
            spec.to, spec.project
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offer_arguments_are_validated() {
        let args = |to: &str, key: &str| OfferArgs {
            project: "shop".into(),
            to: to.into(),
            handoff_key: key.into(),
            session: Some(String::new()),
            artifact: None,
            body: None,
            if_absent: None,
        };
        assert_eq!(
            offer_spec(args("dev lead", "k")).expect_err("to").field,
            "to"
        );
        assert_eq!(
            offer_spec(args("dev-lead", "")).expect_err("key").field,
            "handoff_key"
        );
        let (spec, if_absent) = offer_spec(args("dev-lead", "arch#1")).expect("valid");
        assert_eq!(
            (spec.session, if_absent),
            (None, false),
            "an empty session means none"
        );
    }

    #[test]
    fn the_refusal_is_named() {
        let spec = offer_spec(OfferArgs {
            project: "shop".into(),
            to: "infra".into(),
            handoff_key: "k".into(),
            session: None,
            artifact: None,
            body: None,
            if_absent: None,
        })
        .expect("valid")
        .0;
        let text = offer_text(
            &spec,
            &OfferResult {
                outcome: Outcome::AgentAlreadyActive,
                offer: None,
            },
        );
        assert!(text.starts_with("agent_already_active"), "{text}");
    }
}
