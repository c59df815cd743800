//! `get_handoff` (contract): the current handoff of a key, from the
//! apiserver. With `revision`, a past one from the history the PostgreSQL
//! mirror keeps — after a SelfSubjectAccessReview for `get`, since RBAC is
//! not in that path; without a mirror, `revision` is refused with a message
//! saying history needs it. Revision N is revision N of the key's current
//! handoff (the object at the name derived from the key, as the current read
//! is), never of another object holding the key.

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::contract::{Answer, Call, CallError, Tool, answer};
use super::definition::{definition, reads};
use super::views::HandoffView;
use crate::profiles::Audience;
use handoff_core::api::validation::{self, FieldError};

const NAME: &str = "get_handoff";

/// The row of `get_handoff` in the tool table.
pub(crate) const TOOL: Tool = Tool {
    name: NAME,
    audience: Audience::Writers,
    action: "get",
    definition: || {
        definition::<GetArgs, GetResult>(
            NAME,
            "Get the current handoff (compact summary left by the previous agent) for a continuation key. \
             Call it at the start with the key from your preamble. If none exists, start fresh.",
            reads(),
        )
    },
    call: |call, args| Box::pin(handle(call, args)),
};

/// Arguments of `get_handoff`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetArgs {
    /// The continuation key from your preamble.
    pub handoff_key: String,
    /// A past content revision (1 = the first) instead of the current
    /// handoff; served from the history kept by the PostgreSQL mirror.
    #[serde(default)]
    pub revision: Option<i64>,
}

/// Result of `get_handoff`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GetResult {
    /// Whether a handoff exists for the key.
    pub found: bool,
    /// The handoff, when found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff: Option<HandoffView>,
}

async fn handle(call: &Call<'_>, args: Option<JsonObject>) -> Result<Answer, CallError> {
    let args: GetArgs = call.args(args)?;
    validation::handoff_key(&args.handoff_key)?;
    if let Some(revision) = args.revision {
        return past_revision(call, &args.handoff_key, revision).await;
    }
    let found = call
        .caller
        .store()
        .get(&args.handoff_key)
        .await
        .map_err(|e| call.kube_error(e))?;
    let result = GetResult {
        found: found.is_some(),
        handoff: found.as_ref().map(HandoffView::of),
    };
    let text = text(&args.handoff_key, &result);
    Ok(answer(&result, text))
}

/// `get_handoff{revision}`: from the mirror's history, after an access review.
async fn past_revision(call: &Call<'_>, key: &str, revision: i64) -> Result<Answer, CallError> {
    let Some(mirror) = call.mirror else {
        return Err(CallError::Unsupported(format!(
            "invalid `revision`: past revisions are kept in the handoff history, which needs the \
             PostgreSQL mirror, and this bridge runs without it (start it with HANDOFF_POSTGRES_URL or \
             --postgres-url-file); \
             call get_handoff without `revision` for the current handoff of `{key}`"
        )));
    };
    if revision < 1 {
        return Err(FieldError {
            field: "revision",
            rule: "a content revision number, 1 or more".into(),
            problem: format!("got {revision}"),
        }
        .into());
    }
    call.authorize("get").await?;
    let namespace = call.namespace();
    let row = mirror.revision(namespace, key, revision).await?;
    let result = GetResult {
        found: row.is_some(),
        handoff: row.as_ref().map(|r| HandoffView::of_revision(namespace, r)),
    };
    let text = revision_text(key, revision, &result);
    Ok(answer(&result, text))
}

/// The text of a `get_handoff` answer.
pub fn text(key: &str, result: &GetResult) -> String {
    match &result.handoff {
        None => format!(
            "No handoff exists for `{key}`: there is no prior context to continue, so start fresh. \
             Call write_handoff with this key before you finish."
        ),
        Some(h) => {
            let facts = &h.facts;
            let mut meta = vec![format!("project {}", facts.project)];
            meta.extend(facts.repo.as_ref().map(|r| format!("repo {r}")));
            meta.extend(facts.kind.as_ref().map(|k| format!("kind {k}")));
            meta.extend(facts.updated_at.as_ref().map(|u| format!("updated {u}")));
            meta.extend(facts.created_by.as_ref().map(|w| format!("by {w}")));
            format!("Handoff for `{key}` ({}):\n\n{}", meta.join(", "), h.body)
        }
    }
}

/// The text of a `get_handoff{revision}` answer.
fn revision_text(key: &str, revision: i64, result: &GetResult) -> String {
    match &result.handoff {
        None => format!(
            "The history holds no revision {revision} of `{key}` (revisions start at 1, and \
             the history keeps only the newest ones and forgets deleted handoffs; call \
             get_handoff without `revision` for the current one)."
        ),
        Some(_) => format!("(revision {revision}) {}", text(key, result)),
    }
}
