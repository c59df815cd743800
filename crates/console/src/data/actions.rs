//! The two writes of the console, through the bridge's tools as the
//! person (`delete_handoff`, `reject_offer`): the same RBAC, checks and
//! messages as when an agent calls them. The object is read first as the
//! person, so a missing one is [`ReadError::NotFound`] and a refusal
//! leaves it as it was.

use serde_json::json;

use super::errors::{Doing, ReadError};
use super::handoff::stored;
use super::offers::{rejectable, stored_offer};
use super::tool;
use handoff_bridge::auth::Caller;
use handoff_bridge::call::Services;
use handoff_core::handoff::canonical;

/// Deletes the handoff object `name` (its key's handoff).
pub async fn delete_handoff(
    caller: &Caller,
    services: &Services,
    name: &str,
) -> Result<(), ReadError> {
    let h = stored(caller, name).await?;
    let namespace = caller.store().namespace();
    // The tool deletes by key: the object at the key's name. A twin or a
    // squat is another object, which it would not delete.
    if !canonical(&h) {
        return Err(ReadError::Invalid {
            field: "name",
            rule: "the current handoff of a key (its name derived from its key)".into(),
            problem: format!(
                "{name} is a twin or a squat, not its key's handoff; remove it with \
                 `kubectl delete handoff {name} -n {namespace}`"
            ),
        });
    }
    let doing = Doing {
        action: "delete handoffs",
        namespace,
    };
    let args = json!({ "handoff_key": h.spec.handoff_key });
    let answer = tool::call(services, caller, "delete_handoff", args, doing).await?;
    if answer["deleted"] == json!(true) {
        Ok(())
    } else {
        Err(ReadError::NotFound(format!(
            "The handoff {name} was already gone when it was to be deleted."
        )))
    }
}

/// Rejects the offer `name` (it stays, phase Rejected).
pub async fn reject_offer(
    caller: &Caller,
    services: &Services,
    name: &str,
) -> Result<(), ReadError> {
    let offer = stored_offer(caller, name).await?;
    let phase = offer.phase();
    if !rejectable(phase) && phase != handoff_core::api::OfferPhase::Rejected {
        return Err(ReadError::Invalid {
            field: "name",
            rule: "an offer still pending or taken up".into(),
            problem: format!("offer {name} is {phase:?}"),
        });
    }
    let doing = Doing {
        action: "reject offers",
        namespace: caller.store().namespace(),
    };
    tool::call(
        services,
        caller,
        "reject_offer",
        json!({ "offer": name }),
        doing,
    )
    .await?;
    Ok(())
}
