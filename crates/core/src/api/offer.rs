//! The `HandoffOffer` custom resource: a handoff *offered* to a destination
//! agent (an architect hands a story to `dev-lead`, say).
//!
//! Lifecycle: `Offered` → `Accepted` (a Job of the destination agent names
//! the offer in its `handoff.dev/offer` annotation) → `Completed` (that Job
//! succeeded); or `Rejected` (explicitly) or `Superseded` (by a newer offer
//! to the same destination, or because the agent was activated for other
//! work). An offer without a phase yet is pending (`Offered`).
//!
//! Who moves it: the spec never changes after creation (a CEL transition
//! rule, for everyone); the phase is written by the controller, by the
//! bridge's own identity for the offer flow and for a `reject_offer` of the
//! destination agent, and by groomers. Terminal offers carry `finishedAt`
//! and are deleted by the controller after `--offer-retention`.
//!
//! Invariant: at most one `Offered` per (namespace, project, to). Offers of
//! one destination carry a sequence number in their name
//! (`<destination slot>-<n>`): creating `n+1` is the optimistic lock, so two
//! racing offerers can never both win, and an offer only ever supersedes
//! lower-numbered ones (see `crate::offers`).
#![allow(
    unreachable_pub,
    reason = "kube's KubeSchema derive copies each spec struct, `pub` and all, into a private scope"
)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::handoff::{
    LABEL_VALUE_CEL, MAX_BODY_CHARS, MAX_KEY_BYTES, MAX_LABEL_CHARS, project_rule,
};

/// Longest offering session id.
pub const MAX_SESSION_CHARS: usize = 253;
/// Longest artifact reference.
pub const MAX_ARTIFACT_CHARS: usize = 1024;

/// A handoff offered to a destination agent.
// clippy reads the repeated `type_ = ...` of separate printcolumns as
// duplicated attributes; they are arguments of different columns.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "handoff.dev",
    version = "v1alpha1",
    kind = "HandoffOffer",
    plural = "handoffoffers",
    shortname = "hof",
    category = "agents",
    namespaced,
    status = "HandoffOfferStatus",
    doc = "A handoff offered to a destination agent. At most one is Offered per project and destination; newer offers supersede it, and activating the agent supersedes what is still pending.",
    printcolumn(name = "Project", type_ = "string", json_path = ".spec.project"),
    printcolumn(name = "To", type_ = "string", json_path = ".spec.to"),
    printcolumn(name = "From", type_ = "string", json_path = ".spec.fromKey"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Superseded By",
        type_ = "string",
        json_path = ".status.supersededBy"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.reason",
        priority = 1
    ),
    printcolumn(
        name = "Session",
        type_ = "string",
        json_path = ".spec.session",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    selectable = ".spec.project",
    selectable = ".spec.to"
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self == oldSelf").message("spec is immutable after creation: an offer is a record of what was offered; offer again (offer_handoff) to change it"))]
pub struct HandoffOfferSpec {
    /// The project. A valid label value.
    #[x_kube(validation = project_rule())]
    #[schemars(length(min = 1, max = MAX_LABEL_CHARS))]
    pub project: String,
    /// The destination agent (e.g. `dev-lead`, `infra`). A valid label value.
    #[x_kube(validation = Rule::new(LABEL_VALUE_CEL).message("to must be a valid label value (an agent name such as dev-lead): at most 63 characters, letters, digits, '-', '_' or '.'"))]
    #[schemars(length(min = 1, max = MAX_LABEL_CHARS))]
    pub to: String,
    /// The handoff key of the offering conversation.
    #[schemars(length(min = 1, max = MAX_KEY_BYTES))]
    pub from_key: String,
    /// The offering session (repeats within one session are recognised).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_SESSION_CHARS))]
    pub session: Option<String>,
    /// A reference or digest of what is handed over (may be empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_ARTIFACT_CHARS))]
    pub artifact: Option<String>,
    /// What the destination should know (markdown, a summary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_BODY_CHARS))]
    pub body: Option<String>,
}

/// Where an offer is in its lifecycle.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum OfferPhase {
    /// Pending: the destination has not taken it up.
    Offered,
    /// A Job of the destination agent took it up.
    Accepted,
    /// That Job succeeded.
    Completed,
    /// Explicitly declined.
    Rejected,
    /// Replaced by a newer offer, or the agent was activated for other work.
    Superseded,
}

/// Why an offer was superseded.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum SupersedeReason {
    /// A newer offer to the same destination.
    NewOffer,
    /// The destination agent started on other work.
    AgentActivated,
}

/// What happened to an offer.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandoffOfferStatus {
    /// `Offered`, `Accepted`, `Completed`, `Rejected` or `Superseded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<OfferPhase>,
    /// The offer (or, for `AgentActivated`, the Job) that replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// Why it was superseded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<SupersedeReason>,
    /// The Job that accepted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// When it reached a terminal phase (`Completed`, `Rejected`,
    /// `Superseded`); the controller deletes it `--offer-retention` later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// Conditions (reserved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

impl OfferPhase {
    /// Whether nothing moves an offer out of this phase (it is kept for
    /// `--offer-retention`, then deleted).
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Rejected | Self::Superseded)
    }
}

impl HandoffOfferSpec {
    /// An offer of the conversation `from_key` to the agent `to` in
    /// `project`, with no session, artifact or body (set those after).
    pub fn new(
        project: impl Into<String>,
        to: impl Into<String>,
        from_key: impl Into<String>,
    ) -> Self {
        Self {
            project: project.into(),
            to: to.into(),
            from_key: from_key.into(),
            session: None,
            artifact: None,
            body: None,
        }
    }
}

impl HandoffOffer {
    /// The phase, pending when none is set yet.
    pub fn phase(&self) -> OfferPhase {
        self.status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or(OfferPhase::Offered)
    }
}
