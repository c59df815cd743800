//! The one dispatch of every tool call ([`Services::dispatch`]: the profile
//! gate, the timeout, the handler), used by the stdio and HTTP servers and
//! by a hook's in-process link, and what they hand it ([`Services`]). What
//! a call is and what its handler may use is the tools' contract
//! ([`crate::tools::contract`]).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::JsonObject;

use crate::auth::Caller;
use crate::tools::contract::{Answer, Call, CallError, Tool};
use handoff_kube::settings::Budgets;
use handoff_mirror::Mirror;

pub use crate::tools::contract::OfferSettings;

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
