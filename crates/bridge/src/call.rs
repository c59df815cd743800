//! What every tool call shares: the one dispatch ([`Services::dispatch`]:
//! the profile gate, the timeout, the handler), the context a tool's
//! handler runs in (the tool, the caller, the mirror, the offer settings),
//! the one error type,
//! argument parsing, and the mapping of apiserver, mirror and offer-store
//! failures to messages an agent can act on — including the access review
//! that guards answers served from the mirror.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::JsonObject;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::auth::Caller;
use super::tools::Tool;
use handoff_core::api::validation::FieldError;
use handoff_core::names::BRIDGE_FIELD_MANAGER;
use handoff_kube::offers::{OfferError, OfferStore};
use handoff_kube::settings::Budgets;
use handoff_mirror::{Mirror, MirrorError};

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

/// Longest a tool call may wait for the apiserver before answering with a
/// retriable error.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// The answer when the apiserver did not answer within [`CALL_TIMEOUT`].
pub fn timed_out() -> String {
    format!(
        "the Kubernetes API did not answer within {}s; retriable: try again shortly",
        CALL_TIMEOUT.as_secs()
    )
}

/// What calls read from besides their caller: one set per stdio server,
/// per HTTP server, or per in-process call of a hook.
#[derive(Clone)]
pub struct Services {
    /// The PostgreSQL mirror lists and history are answered from, if any.
    pub mirror: Option<Arc<Mirror>>,
    /// How the offer tools check agent activity.
    pub offers: OfferSettings,
    /// The lint budgets of namespaces (`write_handoff`'s warnings).
    pub budgets: Arc<Budgets>,
}

/// Why a dispatched call has no answer.
#[derive(Debug)]
pub enum Unanswered {
    /// The caller's profile does not see the tool: the refusal to show.
    Hidden(String),
    /// The handler failed.
    Failed(CallError),
    /// The handler did not finish within [`CALL_TIMEOUT`].
    TimedOut,
}

impl Services {
    /// The call of `tool` by `caller` with these services.
    pub(crate) fn call<'a>(&'a self, tool: &'static Tool, caller: &'a Caller) -> Call<'a> {
        Call {
            tool,
            caller,
            mirror: self.mirror.as_deref(),
            offers: &self.offers,
            budgets: &self.budgets,
        }
    }

    /// Runs `tool` for `caller` with `args`: the one dispatch of the stdio
    /// and HTTP servers and of a hook's in-process link. A tool the
    /// caller's profile does not see is refused (it is hidden from
    /// `tools/list` too); the handler gets [`CALL_TIMEOUT`].
    pub async fn dispatch(
        &self,
        tool: &'static Tool,
        caller: &Caller,
        args: Option<JsonObject>,
    ) -> Result<Answer, Unanswered> {
        if !tool.visible_to(caller.profile()) {
            return Err(Unanswered::Hidden(
                caller.profile().refusal(tool.name, tool.audience),
            ));
        }
        let call = self.call(tool, caller);
        match tokio::time::timeout(CALL_TIMEOUT, (tool.call)(&call, args)).await {
            Ok(answered) => answered.map_err(Unanswered::Failed),
            Err(_) => Err(Unanswered::TimedOut),
        }
    }
}

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
    /// The mirror could not be read.
    #[error("the handoff mirror (PostgreSQL) is unavailable ({0}); retriable: try again shortly")]
    Mirror(#[from] MirrorError),
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
            CallError::Refused(_) => "refused",
            CallError::Conflict(_) => "conflict",
        }
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
            // An admission policy (not RBAC) refused the object: say which, and why.
            kube::Error::Api(status)
                if status.code == 403 && status.message.contains("ValidatingAdmissionPolicy") =>
            {
                (
                    "forbidden",
                    format!("an admission policy refused the write: {}", status.message),
                )
            }
            kube::Error::Api(status) if status.code == 403 => (
                "forbidden",
                format!(
                    "identity {} may not {} handoffs in namespace {namespace} (the apiserver's RBAC refused: {})",
                    self.caller.known_username(),
                    self.tool.action,
                    status.message
                ),
            ),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::get::GetArgs;
    use crate::tools::write::WriteArgs;

    /// The message of parsing `args` for `tool` as `T`, which must fail.
    fn refusal<T: DeserializeOwned + std::fmt::Debug>(
        tool: &str,
        args: Option<serde_json::Value>,
    ) -> String {
        parse_args::<T>(tool, args.and_then(|v| v.as_object().cloned()))
            .expect_err("invalid arguments")
            .to_string()
    }

    #[test]
    fn parse_errors_name_the_tool_and_the_field() {
        use serde_json::json;
        // (message, fragments it must contain)
        let cases: [(String, &[&str]); 4] = [
            (
                refusal::<WriteArgs>("write_handoff", Some(json!({"handoff_key": "k"}))),
                &["write_handoff", "missing field `project`"],
            ),
            (
                refusal::<GetArgs>("get_handoff", Some(json!({"handoff_key": 5}))),
                &[
                    "get_handoff",
                    "invalid type: integer `5`, expected a string",
                ],
            ),
            (
                refusal::<GetArgs>("get_handoff", Some(json!({"handoff_key": "k", "x": 1}))),
                &["unknown field `x`"],
            ),
            (
                refusal::<GetArgs>("get_handoff", None),
                &["missing field `handoff_key`"],
            ),
        ];
        for (message, fragments) in cases {
            for fragment in fragments {
                assert!(
                    message.contains(fragment),
                    "{fragment:?} not in {message:?}"
                );
            }
        }
    }
}
