//! Names, a leaf module: every field manager, label, annotation and
//! finalizer handoff writes, in one place. A name here is part of the
//! interface with the cluster (managedFields, selectors in config/, RBAC,
//! dashboards): change one only with an upgrade note.

/// Field manager of the controller's server-side applies and patches
/// (status, labels, finalizer, schedules' Jobs), and the `reportingController`
/// of its Events.
pub const CONTROLLER_FIELD_MANAGER: &str = "handoff-controller";

/// Field manager of the bridge's server-side applies (an agent's write).
pub const BRIDGE_FIELD_MANAGER: &str = "handoff-bridge";

/// Field manager of the admission webhook's caBundle patch (its
/// self-managed certificate).
pub const WEBHOOK_FIELD_MANAGER: &str = "handoff-webhook";

/// Field manager of objects the local control plane installs (CRDs, RBAC).
pub const LOCAL_FIELD_MANAGER: &str = "handoff-envtest";

/// A finalizer name reserved to the controller: the finalizers policy
/// (config/policy) lets only the controller add or remove finalizers on a
/// Handoff. The controller sets none today (deletes never wait for
/// PostgreSQL); the policy tests use this name.
pub const MIRROR_FINALIZER: &str = "handoff.dev/mirror";

/// Label of a Handoff: its project (when a valid label value).
pub const PROJECT_LABEL: &str = "project";
/// Label of a Handoff: its repository (when a valid label value).
pub(crate) const REPO_LABEL: &str = "repo";
/// Label of a Handoff: its kind (when a valid label value).
pub(crate) const KIND_LABEL: &str = "kind";

/// Label of a ServiceAccount: the agent profile the bridge serves it.
pub const PROFILE_LABEL: &str = "handoff.dev/profile";

/// Label of an offer: its destination agent.
pub const TO_LABEL: &str = "handoff.dev/to";
/// Label of an offer: its (project, destination) slot, at most one `Offered`.
pub const SLOT_LABEL: &str = "handoff.dev/slot";
/// Label of an agent's Job: which agent it runs (activation of offers).
/// Also the label of an agent's ServiceAccount: which agent it is, so the
/// destination of an offer (`spec.to`) may reject it (`reject_offer`).
pub const AGENT_LABEL: &str = "handoff.dev/agent";

/// Namespace label claiming a namespace for a controller of that name
/// (a tenant's own, or a test suite's): a controller run with
/// [`UNCLAIMED_NAMESPACES`] leaves such namespaces alone.
pub const CONTROLLER_LABEL: &str = "handoff.dev/controller";
/// The namespace selector of the shared controller (config/manager and
/// `handoff dev`): every namespace no other controller claims.
pub const UNCLAIMED_NAMESPACES: &str = "!handoff.dev/controller";
/// Annotation of an agent's Job: the offer it takes up.
pub const OFFER_ANNOTATION: &str = "handoff.dev/offer";

/// Label of a schedule's Job: the schedule that made it.
pub const SCHEDULE_LABEL: &str = "handoff.dev/schedule";
/// Label of a schedule's Job: `refine` or `brainstorm`.
pub const ROLE_LABEL: &str = "handoff.dev/role";
/// Annotation of a schedule's Job: the cron tick it runs for.
pub(crate) const TICK_ANNOTATION: &str = "handoff.dev/tick";

/// The ConfigMap of a namespace's handoff settings (the lint's soft token
/// budget, see [`crate::settings`]): the bridge and the controller may
/// `get` this name only.
pub const SETTINGS_CONFIGMAP: &str = "handoff-settings";
