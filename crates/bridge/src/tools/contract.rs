//! What a tool is and what its handler is given: the row of the tool table
//! ([`Tool`], with its [`Handler`]), the call a handler runs in ([`Call`]:
//! the tool, the caller, the mirror, the offer settings), the one error
//! type ([`CallError`]), argument parsing, and the mapping of apiserver,
//! mirror and offer-store failures to messages an agent can act on —
//! including the access review that guards answers served from the mirror.
//!
//! A leaf of the bridge's files: every tool module, the table
//! ([`crate::tools`]) and the dispatch ([`crate::call`]) import it, and it
//! imports none of them, so the bridge's imports run one way.

use futures::future::BoxFuture;
use rmcp::model::JsonObject;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::auth::Caller;
use crate::profiles::{Audience, Profile};
use handoff_core::api::validation::FieldError;
use handoff_core::names::BRIDGE_FIELD_MANAGER;
use handoff_core::quota;
use handoff_kube::offers::{OfferError, OfferStore};
use handoff_kube::settings::Budgets;
use handoff_mirror::{Blame, Mirror, MirrorError};

/// A tool's handler: its call, and the arguments as sent.
pub(crate) type Handler =
    for<'a> fn(&'a Call<'a>, Option<JsonObject>) -> BoxFuture<'a, Result<Answer, CallError>>;

/// One tool: what [`crate::tools::TOOLS`] holds for it.
pub struct Tool {
    /// The wire name, e.g. `get_handoff`.
    pub name: &'static str,
    /// Which profiles see it and may call it.
    pub audience: Audience,
    /// What the caller does, for Forbidden messages: "identity … may not
    /// {action} handoffs in namespace …".
    pub action: &'static str,
    /// Its MCP definition (schemas, description, annotations).
    pub definition: fn() -> rmcp::model::Tool,
    /// Runs a call.
    pub call: Handler,
}

impl Tool {
    /// Whether `profile` sees this tool and may call it.
    pub(crate) fn visible_to(&self, profile: &Profile) -> bool {
        profile.admits(self.audience)
    }
}

/// Which identity moves offers, and how the offer tools check whether a
/// destination agent is active.
#[derive(Clone)]
pub struct OfferSettings {
    /// The identity that writes offer status and Events and lists agent
    /// Jobs (the bridge's own, over HTTP); `None`: the caller's (stdio,
    /// where the caller is the user's own kubeconfig).
    pub acting: Option<kube::Client>,
    /// Label selector template of an agent's Jobs (`{to}`, `{project}`).
    pub active_selector: String,
}

/// A successful call: the structured result and the text shown beside it.
pub type Answer = (serde_json::Value, String);

/// One tool call: which tool, for whom, and what the bridge reads from.
pub struct Call<'a> {
    /// The tool called.
    pub tool: &'static Tool,
    /// Who calls, with their own credentials.
    pub caller: &'a Caller,
    /// The PostgreSQL mirror lists and history are answered from, if any.
    pub mirror: Option<&'a Mirror>,
    /// How the offer tools check agent activity.
    pub offers: &'a OfferSettings,
    /// The lint budgets of namespaces (`write_handoff`'s warnings).
    pub budgets: &'a Budgets,
}

/// Why a call failed, classified for the metric and the message.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The arguments do not parse (missing field, wrong type, unknown field).
    #[error("{0}")]
    Args(String),
    /// A field breaks its rule.
    #[error("{0}")]
    Field(#[from] FieldError),
    /// The apiserver refused or failed.
    #[error("{message}")]
    Kube {
        /// The metric's outcome label.
        outcome: &'static str,
        /// The agent-actionable message.
        message: String,
    },
    /// This bridge cannot answer that (e.g. history without the mirror).
    #[error("{0}")]
    Unsupported(String),
    /// The mirror could not be read: why, in our words ([`Blame::Unavailable`]).
    #[error("the handoff mirror (PostgreSQL) is unavailable ({0}); retriable: try again shortly")]
    Mirror(String),
    /// The mirror failed for a reason of its own (its error is logged).
    #[error(
        "the handoff mirror (PostgreSQL) failed to answer; the bridge's log has the reason: \
         ask the operator"
    )]
    MirrorFailed,
    /// The call was understood and declined (e.g. an agent already at work).
    #[error("{0}")]
    Refused(String),
    /// A conditional write found the handoff at another revision; nothing
    /// was written.
    #[error("{0}")]
    Conflict(String),
}

impl CallError {
    /// The outcome label of the metric.
    pub fn outcome(&self) -> &'static str {
        match self {
            CallError::Args(_) | CallError::Field(_) | CallError::Unsupported(_) => "invalid",
            CallError::Kube { outcome, .. } => outcome,
            CallError::Mirror(_) => "unavailable",
            CallError::MirrorFailed => "error",
            CallError::Refused(_) => "refused",
            CallError::Conflict(_) => "conflict",
        }
    }
}

impl From<MirrorError> for CallError {
    /// A mirror failure whose argument the call cannot name: see [`mirror_error`].
    fn from(err: MirrorError) -> Self {
        mirror_error(err, None)
    }
}

/// A mirror failure as an agent-actionable message that never carries the
/// database's text (it is logged instead): a value PostgreSQL refused is
/// bad input — named as `field` when the call knows which argument it was,
/// else as the call's arguments — not an outage; PostgreSQL unreachable or
/// not answering is retriable; anything else is the mirror's.
pub(crate) fn mirror_error(err: MirrorError, field: Option<&'static str>) -> CallError {
    tracing::warn!(error = %err, field, "the mirror failed a tool call");
    of_blame(err.blame(), field)
}

/// The error of a mirror failure with this blame (see [`mirror_error`]).
fn of_blame(blame: Blame, field: Option<&'static str>) -> CallError {
    match (blame, field) {
        (Blame::Argument(what), Some(field)) => CallError::Field(FieldError {
            field,
            rule: "a value the handoff mirror (PostgreSQL) can take".into(),
            problem: format!("PostgreSQL refused it: {what}"),
        }),
        (Blame::Argument(what), None) => CallError::Args(format!(
            "the handoff mirror (PostgreSQL) refused a value of this call's arguments: {what}"
        )),
        (Blame::Unavailable(why), _) => CallError::Mirror(why),
        (Blame::Mirror, _) => CallError::MirrorFailed,
    }
}

/// Parses the arguments of the tool named `tool`; the message names the
/// tool and serde's reason (missing field, wrong type, unknown field).
pub(crate) fn parse_args<T: DeserializeOwned>(
    tool: &str,
    args: Option<JsonObject>,
) -> Result<T, CallError> {
    let value = serde_json::Value::Object(args.unwrap_or_default());
    serde_json::from_value(value)
        .map_err(|e| CallError::Args(format!("invalid arguments for {tool}: {e}")))
}

/// The answer of a call: `result` as structured content, and `text`.
pub fn answer<T: Serialize>(result: &T, text: String) -> Answer {
    (serde_json::to_value(result).unwrap_or_default(), text)
}

/// The apiserver's wording of an RBAC refusal on handoffs.
pub(crate) fn forbidden_message(user: &str, verb: &str, namespace: &str) -> String {
    format!(
        "handoffs.{group} is forbidden: User \"{user}\" cannot {verb} resource \"handoffs\" in API group \"{group}\" in the namespace \"{namespace}\"",
        group = handoff_core::api::GROUP
    )
}

impl Call<'_> {
    /// The call's arguments as `T` (see [`parse_args`]).
    pub fn args<T: DeserializeOwned>(&self, args: Option<JsonObject>) -> Result<T, CallError> {
        parse_args(self.tool.name, args)
    }

    /// The namespace the caller's handoffs live in.
    pub fn namespace(&self) -> &str {
        self.caller.store().namespace()
    }

    /// Refuses the caller unless RBAC lets it `verb` handoffs: the same
    /// Forbidden message the apiserver's refusal produces. Guards answers
    /// from the mirror, where RBAC is not in the path.
    pub(crate) async fn authorize(&self, verb: &str) -> Result<(), CallError> {
        let allowed = self
            .caller
            .may(verb)
            .await
            .map_err(|e| self.kube_error(e))?;
        if allowed {
            return Ok(());
        }
        let user = self
            .caller
            .username()
            .await
            .map_err(|e| self.kube_error(e))?
            .to_owned();
        let message = forbidden_message(&user, verb, self.namespace());
        let status = kube::core::Status::failure(&message, "Forbidden").with_code(403);
        Err(self.kube_error(kube::Error::Api(status.boxed())))
    }

    /// An apiserver error as an agent-actionable message.
    pub(crate) fn kube_error(&self, err: kube::Error) -> CallError {
        let namespace = self.namespace();
        let (outcome, message) = match &err {
            // The team's ResourceQuota refused a create: say which quota, how
            // full, and what to do, not the apiserver's `count/…` text.
            kube::Error::Api(status) if status.code == 403 => match quota::refusal(&status.message)
            {
                Some(refusal @ quota::Refusal::StatusUnknown { .. }) => {
                    ("unavailable", refusal.message(namespace))
                }
                Some(refusal) => ("forbidden", refusal.message(namespace)),
                None => self.forbidden(&status.message),
            },
            kube::Error::Api(status) if status.code == 401 => (
                "forbidden",
                "the apiserver did not accept your credentials (an expired token?)".to_owned(),
            ),
            kube::Error::Api(status) if status.code == 422 || status.code == 400 => (
                "invalid",
                format!("the apiserver refused the handoff: {}", status.message),
            ),
            kube::Error::Api(status) if status.code == 429 || status.code >= 500 => (
                "unavailable",
                format!(
                    "the Kubernetes API is temporarily unavailable ({}: {}); retriable: try again shortly",
                    status.code, status.message
                ),
            ),
            kube::Error::Api(status) => (
                "error",
                format!("the apiserver answered {}: {}", status.code, status.message),
            ),
            other => (
                "unavailable",
                format!(
                    "the Kubernetes API is unreachable ({other}); retriable: try again shortly"
                ),
            ),
        };
        CallError::Kube { outcome, message }
    }

    /// A 403 that is not a quota's: an admission policy's (say which, and
    /// why) or RBAC's.
    fn forbidden(&self, message: &str) -> (&'static str, String) {
        let text = if message.contains("ValidatingAdmissionPolicy") {
            format!("an admission policy refused the write: {message}")
        } else {
            format!(
                "identity {} may not {} handoffs in namespace {} (the apiserver's RBAC refused: {message})",
                self.caller.known_username(),
                self.tool.action,
                self.namespace()
            )
        };
        ("forbidden", text)
    }

    /// The offer store of the call: offers created, listed and read with
    /// the caller's credentials; status, Events and the agent Job check
    /// with the acting identity (the bridge's, or the caller's in stdio).
    pub(crate) fn offer_store(&self) -> OfferStore {
        let acting = self
            .offers
            .acting
            .clone()
            .unwrap_or_else(|| self.caller.client().clone());
        OfferStore::new(
            self.caller.client().clone(),
            acting,
            self.namespace(),
            &self.offers.active_selector,
            BRIDGE_FIELD_MANAGER,
            std::sync::Arc::new(handoff_core::time::SystemClock),
        )
    }

    /// An offer-store failure as an agent-actionable message.
    pub(crate) fn offer_error(&self, err: OfferError) -> CallError {
        match err {
            OfferError::Kube(e) => self.kube_error(e),
            OfferError::Acting(e) => {
                let acting = if self.offers.acting.is_some() {
                    "the bridge's own identity (its Role in this namespace: config/rbac/bridge.yaml)"
                } else {
                    "your identity"
                };
                let answered = match &e {
                    kube::Error::Api(status) => {
                        format!("the apiserver answered {}: {}", status.code, status.message)
                    }
                    other => other.to_string(),
                };
                let outcome = match self.kube_error(e) {
                    CallError::Kube { outcome, .. } => outcome,
                    _ => "error",
                };
                CallError::Kube {
                    outcome,
                    message: format!(
                        "{acting} could not move the offer (its phase, an Event or the agent Job check); {answered}"
                    ),
                }
            }
            busy @ OfferError::Busy { .. } => CallError::Kube {
                outcome: "unavailable",
                message: busy.to_string(),
            },
            missing @ OfferError::NotFound(_) => CallError::Args(missing.to_string()),
        }
    }
}

/// The refusal of a history tool on a bridge without the mirror.
pub(crate) fn needs_mirror(tool: &str) -> CallError {
    CallError::Unsupported(format!(
        "{tool} reads the handoff history, which the PostgreSQL mirror keeps, and this bridge runs \
         without it: start the bridge with --postgres-url (or HANDOFF_POSTGRES_URL, or \
         --postgres-url-file) pointing at the mirror the controller writes"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_failures_are_bad_input_an_outage_or_the_mirrors() {
        let refused = "it holds a character or byte sequence PostgreSQL cannot store (such as NUL)";
        // (blame, the field the call names, the outcome, the message)
        let cases = [
            (
                Blame::Argument(refused),
                Some("query"),
                "invalid",
                format!("invalid `query`: a value the handoff mirror (PostgreSQL) can take; PostgreSQL refused it: {refused}"),
            ),
            (
                Blame::Argument(refused),
                None,
                "invalid",
                format!("the handoff mirror (PostgreSQL) refused a value of this call's arguments: {refused}"),
            ),
            (
                Blame::Unavailable("PostgreSQL did not answer within 5s".into()),
                Some("query"),
                "unavailable",
                "the handoff mirror (PostgreSQL) is unavailable (PostgreSQL did not answer within 5s); retriable: try again shortly".into(),
            ),
            (
                Blame::Mirror,
                None,
                "error",
                "the handoff mirror (PostgreSQL) failed to answer; the bridge's log has the reason: ask the operator".into(),
            ),
        ];
        for (blame, field, outcome, message) in cases {
            let err = of_blame(blame.clone(), field);
            assert_eq!(
                (err.outcome(), err.to_string()),
                (outcome, message),
                "{blame:?}"
            );
        }
    }
}
