//! The one way the console calls a bridge tool: by name, with its JSON
//! arguments, as the person ([`Caller`]), through
//! [`Services::dispatch`] — the profile gate, the call's timeout and the
//! tool's own checks (the mirror's access review, its bounds).

use handoff_bridge::auth::Caller;
use handoff_bridge::call::Services;
use handoff_bridge::tools;
use serde_json::Value;

use super::errors::{Doing, ReadError};

/// The structured answer of `tool` called with `args` (a JSON object).
pub(super) async fn call(
    services: &Services,
    caller: &Caller,
    tool: &'static str,
    args: Value,
    doing: Doing<'_>,
) -> Result<Value, ReadError> {
    let (Some(found), Value::Object(args)) = (tools::find(tool), args) else {
        tracing::error!(
            tool,
            "the console calls a tool the bridge does not have, or without an object"
        );
        return Err(ReadError::Unavailable(format!(
            "The console cannot {} (the bridge has no tool `{tool}`); this is a bug of the \
             console: please report it.",
            doing.action
        )));
    };
    services
        .dispatch(found, caller, Some(args))
        .await
        .map(|(structured, _text)| structured)
        .map_err(|err| doing.unanswered(err))
}
