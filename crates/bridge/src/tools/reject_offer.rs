//! `reject_offer` (extension): the destination agent rejects an offer
//! addressed to it; it stays as a record, phase Rejected.
//!
//! Who may: the caller must first be able to `get` the offer with its own
//! credentials (RBAC, before anything is done with the bridge's identity);
//! then it must be the destination in the offer's namespace — a
//! ServiceAccount *of that namespace* labelled `handoff.dev/agent=<spec.to>`
//! ([`crate::auth::Caller::agent`]: another namespace's account is no agent
//! here, whatever its own admin labelled it) — or a caller whose own RBAC
//! lets it patch `handoffoffers/status` in that namespace (a groomer; a
//! SelfSubjectAccessReview with its own credentials). The phase is then
//! written with the bridge's identity (agents have no right on the status
//! subresource). A refusal says which of the two the caller is not.
//! Only a pending (`Offered`) or taken-up (`Accepted`) offer can be
//! rejected; rejecting a rejected one changes nothing.

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::contract::{Answer, Call, CallError, Tool, answer};
use super::definition::{Destructive, Idempotent, definition, writes};
use super::views::OfferView;
use crate::profiles::Audience;
use handoff_core::api::validation;
use handoff_core::api::{HandoffOffer, OfferPhase};
use handoff_core::names::AGENT_LABEL;

const NAME: &str = "reject_offer";

/// The row of `reject_offer` in the tool table.
pub(crate) const TOOL: Tool = Tool {
    name: NAME,
    audience: Audience::Writers,
    action: "reject offers of",
    definition: || {
        definition::<RejectArgs, RejectResult>(
            NAME,
            "Reject an offer addressed to you (it stays as a record, phase Rejected). Only the destination \
             agent (its ServiceAccount labelled handoff.dev/agent=<to>) or a groomer may.",
            writes(Destructive(true), Idempotent(true)),
        )
    },
    call: |call, args| Box::pin(handle(call, args)),
};

/// Arguments of `reject_offer`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RejectArgs {
    /// The offer's name (from offer_handoff or list_offers).
    pub offer: String,
}

/// Result of `reject_offer`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RejectResult {
    /// The rejected offer.
    pub offer: OfferView,
}

async fn handle(call: &Call<'_>, args: Option<JsonObject>) -> Result<Answer, CallError> {
    let args: RejectArgs = call.args(args)?;
    validation::object_name("offer", &args.offer)?;
    let store = call.offer_store();
    // The caller's own read first: RBAC decides whether it may see the offer.
    let offer = store
        .get(&args.offer)
        .await
        .map_err(|e| call.offer_error(e))?;
    let agent = call
        .caller
        .agent()
        .await
        .map_err(|e| call.kube_error(e))?
        .map(str::to_owned);
    if agent.as_deref() != Some(offer.spec.to.as_str()) {
        let label = call
            .caller
            .agent_label()
            .await
            .map_err(|e| call.kube_error(e))?
            .map(str::to_owned);
        let grooms = call
            .caller
            .may_on("handoffoffers/status", "patch")
            .await
            .map_err(|e| call.kube_error(e))?;
        if !grooms {
            let user = call
                .caller
                .username()
                .await
                .map_err(|e| call.kube_error(e))?;
            let home = call.caller.account_namespace();
            let account = match home {
                Some(home) if home != call.namespace() => Account::Elsewhere {
                    home,
                    label: label.as_deref(),
                },
                _ => Account::Here(label.as_deref()),
            };
            return Err(CallError::Refused(not_the_destination(
                &offer,
                call.namespace(),
                user,
                account,
            )));
        }
    }
    if matches!(
        offer.phase(),
        OfferPhase::Completed | OfferPhase::Superseded
    ) {
        return Err(CallError::Refused(already_finished(&offer)));
    }
    let rejected = store
        .reject(&offer)
        .await
        .map_err(|e| call.offer_error(e))?;
    let result = RejectResult {
        offer: OfferView::of(&rejected),
    };
    Ok(answer(&result, text(&args.offer)))
}

/// What the caller's ServiceAccount is, for a refusal.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Account<'a> {
    /// In the offer's namespace (or not a ServiceAccount), with this agent label.
    Here(Option<&'a str>),
    /// A ServiceAccount of namespace `home`, not the offer's, with this label.
    Elsewhere {
        home: &'a str,
        label: Option<&'a str>,
    },
}

/// The refusal of a caller that is not the offer's destination in
/// `namespace` (the offer's) and may not patch its status there either.
pub(crate) fn not_the_destination(
    offer: &HandoffOffer,
    namespace: &str,
    user: &str,
    account: Account<'_>,
) -> String {
    let to = &offer.spec.to;
    let name = offer.metadata.name.as_deref().unwrap_or_default();
    let is = match account {
        Account::Here(Some(agent)) => format!("is labelled {AGENT_LABEL}={agent}"),
        Account::Here(None) => format!("is not labelled {AGENT_LABEL}={to}"),
        Account::Elsewhere { home, label } => {
            let labelled = label
                .map(|l| format!(", labelled {AGENT_LABEL}={l} there,"))
                .unwrap_or_default();
            format!(
                "is a ServiceAccount of namespace {home}{labelled} and no agent of namespace {namespace}, \
                 where the offer is (an agent is a ServiceAccount of the offer's namespace)"
            )
        }
    };
    format!(
        "reject_offer: only the destination agent {to:?} may reject offer {name}; the caller {user} {is} \
         (nor may it patch handoffoffers/status itself, as a groomer may)"
    )
}

/// The refusal to reject an offer that already finished otherwise.
pub(crate) fn already_finished(offer: &HandoffOffer) -> String {
    format!(
        "reject_offer: offer {} is already {:?}; only an Offered or Accepted offer can be rejected",
        offer.metadata.name.as_deref().unwrap_or_default(),
        offer.phase()
    )
}

/// The text of a `reject_offer` answer.
pub(crate) fn text(offer: &str) -> String {
    format!("Offer {offer} rejected.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::api::HandoffOfferSpec;

    #[test]
    fn the_refusal_names_the_offer_its_destination_and_the_caller() {
        let offer = HandoffOffer::new(
            "dev-lead-abc-1",
            HandoffOfferSpec::new("shop", "dev-lead", "k"),
        );
        let user = "system:serviceaccount:ns:impl";
        assert_eq!(
            not_the_destination(&offer, "ns", user, Account::Here(None)),
            "reject_offer: only the destination agent \"dev-lead\" may reject offer dev-lead-abc-1; the caller \
             system:serviceaccount:ns:impl is not labelled handoff.dev/agent=dev-lead (nor may it patch \
             handoffoffers/status itself, as a groomer may)"
        );
        assert!(
            not_the_destination(&offer, "ns", user, Account::Here(Some("tester"))).contains(
                "the caller system:serviceaccount:ns:impl is labelled handoff.dev/agent=tester"
            )
        );
        let elsewhere = Account::Elsewhere {
            home: "team-b",
            label: Some("dev-lead"),
        };
        assert_eq!(
            not_the_destination(
                &offer,
                "team-a",
                "system:serviceaccount:team-b:dev-lead",
                elsewhere
            ),
            "reject_offer: only the destination agent \"dev-lead\" may reject offer dev-lead-abc-1; the caller \
             system:serviceaccount:team-b:dev-lead is a ServiceAccount of namespace team-b, labelled \
             handoff.dev/agent=dev-lead there, and no agent of namespace team-a, where the offer is (an agent is \
             a ServiceAccount of the offer's namespace) (nor may it patch handoffoffers/status itself, as a \
             groomer may)"
        );
    }
}
