//! `offer_handoff` (extension): offers the caller's handoff to a destination
//! agent through a `HandoffOffer`. At most one offer is pending per
//! destination; an agent already at work is refused (`agent_already_active`,
//! an error unless `if_absent` asked only to create when possible).

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::contract::{Answer, Call, CallError, Tool, answer};
use super::definition::{Destructive, Idempotent, definition, writes};
use super::views::OfferView;
use crate::profiles::Audience;
use handoff_core::api::validation::{self, FieldError};
use handoff_core::api::{HandoffOfferSpec, MAX_ARTIFACT_CHARS, MAX_BODY_CHARS, MAX_SESSION_CHARS};
use handoff_core::offers::Outcome;

const NAME: &str = "offer_handoff";

/// The row of `offer_handoff` in the tool table.
pub(crate) const TOOL: Tool = Tool {
    name: NAME,
    audience: Audience::Writers,
    action: "offer (create HandoffOffers for)",
    definition: || {
        definition::<OfferArgs, OfferResult>(
            NAME,
            "Offer your handoff to a destination agent (e.g. dev-lead). At most one offer is pending per \
             destination: a repeat in the same session returns the pending one, a new artifact or another \
             session supersedes it; an agent already at work is refused (agent_already_active).",
            writes(Destructive(false), Idempotent(false)),
        )
    },
    call: |call, args| Box::pin(handle(call, args)),
};

/// Arguments of `offer_handoff`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OfferArgs {
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

/// Result of `offer_handoff`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct OfferResult {
    /// created, already_offered, superseded_previous or agent_already_active.
    pub outcome: Outcome,
    /// The offer now pending (absent when the agent is already active).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offer: Option<OfferView>,
}

async fn handle(call: &Call<'_>, args: Option<JsonObject>) -> Result<Answer, CallError> {
    let (spec, if_absent) = validate(call.args(args)?)?;
    let (outcome, offer) = call
        .offer_store()
        .offer(&spec, if_absent)
        .await
        .map_err(|e| call.offer_error(e))?;
    let result = OfferResult {
        outcome,
        offer: offer.as_ref().map(OfferView::of),
    };
    let text = text(&spec, &result);
    if outcome == Outcome::AgentAlreadyActive && !if_absent {
        return Err(CallError::Refused(text));
    }
    Ok(answer(&result, text))
}

/// Validates offer arguments into a spec and the if-absent flag.
pub(crate) fn validate(args: OfferArgs) -> Result<(HandoffOfferSpec, bool), FieldError> {
    validation::project(&args.project)?;
    validation::no_credentials("project", &args.project)?;
    validation::label_value("to", &args.to)?;
    validation::no_credentials("to", &args.to)?;
    validation::handoff_key(&args.handoff_key)?;
    validation::no_credentials("handoff_key", &args.handoff_key)?;
    let body = args.body.filter(|b| !b.is_empty());
    if let Some(body) = &body {
        validation::multiline_text("body", body, MAX_BODY_CHARS)?;
        validation::no_credentials("body", body)?;
    }
    let artifact = args.artifact.filter(|a| !a.is_empty());
    if let Some(artifact) = &artifact {
        validation::line_text("artifact", artifact, MAX_ARTIFACT_CHARS)?;
        validation::no_credentials("artifact", artifact)?;
    }
    let session = args.session.filter(|s| !s.is_empty());
    if let Some(session) = &session {
        validation::line_text("session", session, MAX_SESSION_CHARS)?;
        validation::no_credentials("session", session)?;
    }
    let spec = HandoffOfferSpec {
        session,
        artifact,
        body,
        ..HandoffOfferSpec::new(args.project, args.to, args.handoff_key)
    };
    Ok((spec, args.if_absent.unwrap_or(false)))
}

/// The text of an `offer_handoff` answer.
pub(crate) fn text(spec: &HandoffOfferSpec, result: &OfferResult) -> String {
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

    fn args(to: &str, key: &str) -> OfferArgs {
        OfferArgs {
            project: "shop".into(),
            to: to.into(),
            handoff_key: key.into(),
            session: Some(String::new()),
            artifact: None,
            body: None,
            if_absent: None,
        }
    }

    #[test]
    fn offer_arguments_are_validated() {
        // (to, key, the field refused or None when valid)
        let cases = [
            ("dev lead", "k", Some("to")),
            ("dev-lead", "", Some("handoff_key")),
            ("dev-lead", "arch#1", None),
        ];
        for (to, key, refused) in cases {
            match (validate(args(to, key)), refused) {
                (Err(err), Some(field)) => assert_eq!(err.field, field, "{to:?} {key:?}"),
                (Ok((spec, if_absent)), None) => assert_eq!(
                    (spec.session, if_absent),
                    (None, false),
                    "an empty session means none"
                ),
                (got, want) => panic!("{to:?} {key:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn the_refusal_is_named() {
        let (spec, _) = validate(args("infra", "k")).expect("valid");
        let text = text(
            &spec,
            &OfferResult {
                outcome: Outcome::AgentAlreadyActive,
                offer: None,
            },
        );
        assert!(text.starts_with("agent_already_active"), "{text}");
    }
}
