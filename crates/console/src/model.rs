//! What each page shows, as plain data: the reads (`data`) fill these, the
//! pages (`render`) draw them. Nothing here does I/O or writes HTML, so a
//! page can be rendered in a test from a literal, and a read can be checked
//! without a browser.
//!
//! Times are [`Timestamp`]s (UTC); the page writes them as absolute UTC
//! text inside a `<time datetime=…>`, and the console's script shows them
//! in the viewer's zone. Counts that were cut short say so ([`Count`]).

use jiff::Timestamp;

/// Who is looking, and what the page may offer them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewer {
    /// The username the apiserver knows the person by (SelfSubjectReview).
    pub username: String,
    /// How the person signed in.
    pub mode: Mode,
    /// The token every form of this person's pages carries (CSRF).
    pub csrf: String,
}

/// How the console was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `handoff console` on a laptop, as the person's kubeconfig.
    Laptop,
    /// In the cluster, as the bearer token an authenticating proxy forwards.
    Proxy,
}

/// A count that may have been cut short at a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// Exactly this many.
    Exact(u64),
    /// At least this many: counting stopped at the bound.
    AtLeast(u64),
}

/// The front page: the namespaces the person can read, with their projects.
#[derive(Debug, Clone, PartialEq)]
pub struct Overview {
    /// Namespaces where the person may list handoffs, by name.
    pub namespaces: Vec<NamespaceSummary>,
}

/// One namespace of the front page.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceSummary {
    pub namespace: String,
    /// Projects (the `project` label) with their counts, by name.
    pub projects: Vec<ProjectCount>,
    /// Handoffs in the namespace.
    pub handoffs: Count,
}

/// One project's counts.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectCount {
    pub project: String,
    pub handoffs: Count,
    /// Offers of the project still waiting for their destination.
    pub pending_offers: Count,
}

/// Whether a handoff's body passed the controller's quality lint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LintStatus {
    /// `Linted=True`.
    Passed,
    /// `Linted=False`, with the condition's message.
    Failed(String),
    /// The controller has not judged this generation yet.
    Pending,
}

/// Who wrote a handoff's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The agent wrote it (`write_handoff` or kubectl).
    Written,
    /// Rescued from a transcript by a hook: not the agent's own words.
    Rescued,
}

/// One handoff as a row of a list: everything but the body.
#[derive(Debug, Clone, PartialEq)]
pub struct HandoffRow {
    /// The object's name (derived from the key).
    pub name: String,
    pub key: String,
    pub project: String,
    pub repo: Option<String>,
    pub kind: Option<String>,
    /// `spec.createdBy`: the agent that wrote it.
    pub writer: Option<String>,
    pub updated: Option<Timestamp>,
    /// `status.revision` (the mirror's revision of this body).
    pub revision: Option<i64>,
    /// `status.approxTokens`.
    pub tokens: Option<i64>,
    pub lint: LintStatus,
    pub origin: Origin,
    /// Older than its project's TTL: the next grooming pass deletes it.
    pub stale: bool,
}

/// The filters of a project's list, as `list_handoffs` takes them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilters {
    pub repo: Option<String>,
    pub kind: Option<String>,
}

/// A project's handoffs, one page at a time (`list_handoffs`' page size
/// and cursor).
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectPage {
    pub namespace: String,
    pub project: String,
    pub filters: ListFilters,
    pub rows: Vec<HandoffRow>,
    /// The cursor of the next page, when there is one.
    pub next: Option<String>,
    /// Whether the person may delete handoffs here (RBAC).
    pub may_delete: bool,
    /// The resourceVersion of the listing drawn: the live stream watches
    /// from it, so a write just after the read is still announced.
    pub version: Option<String>,
}

/// One handoff, whole.
#[derive(Debug, Clone, PartialEq)]
pub struct HandoffPage {
    pub namespace: String,
    pub row: HandoffRow,
    /// The markdown body as stored (the page renders and sanitises it).
    pub body: String,
    /// Its revisions in the mirror, newest first; or why there are none.
    pub revisions: Result<Vec<RevisionRow>, Unavailable>,
    /// Whether the person may delete it (RBAC).
    pub may_delete: bool,
    /// The object's resourceVersion as drawn: the live stream watches
    /// from it, so a write just after the read is still announced.
    pub version: Option<String>,
}

/// Why a part of a page that needs the mirror (revisions, diff, search)
/// could not be shown: a sentence for people, never a library's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

/// One stored revision of a handoff.
#[derive(Debug, Clone, PartialEq)]
pub struct RevisionRow {
    pub revision: i64,
    pub at: Option<Timestamp>,
    pub writer: Option<String>,
    pub tokens: Option<i64>,
}

/// A bounded diff between two revisions of one handoff (`diff_handoff`).
#[derive(Debug, Clone, PartialEq)]
pub struct DiffPage {
    pub namespace: String,
    pub name: String,
    pub key: String,
    pub from: i64,
    pub to: i64,
    /// The unified diff, or why there is none.
    pub diff: Result<UnifiedDiff, Unavailable>,
}

/// A unified diff as `diff_handoff` returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnifiedDiff {
    pub text: String,
    /// Cut at the tool's bound.
    pub truncated: bool,
}

/// The mirror's full-text search (`search_handoffs`).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchPage {
    pub namespace: String,
    pub query: String,
    pub project: Option<String>,
    pub hits: Result<Vec<SearchHit>, Unavailable>,
    pub next: Option<String>,
}

/// One search hit.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub name: String,
    pub key: String,
    pub project: String,
    /// Plain text around the match (the page escapes it).
    pub snippet: String,
    pub updated: Option<Timestamp>,
}

/// Offers of a namespace, grouped by destination agent.
#[derive(Debug, Clone, PartialEq)]
pub struct OffersPage {
    pub namespace: String,
    pub groups: Vec<OfferGroup>,
}

/// The offers to one destination, pending first.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferGroup {
    pub to: String,
    pub offers: Vec<OfferRow>,
}

/// One offer.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferRow {
    pub name: String,
    pub project: String,
    pub from_key: String,
    /// `Pending`, `Accepted`, `Superseded`, `Rejected` (the CRD's phase).
    pub phase: String,
    pub superseded_by: Option<String>,
    pub created: Option<Timestamp>,
    /// Whether the person may reject it (RBAC, and it is still pending).
    pub may_reject: bool,
}

/// The refine → brainstorm schedules of a namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulesPage {
    pub namespace: String,
    pub schedules: Vec<ScheduleRow>,
}

/// One BrainstormSchedule.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleRow {
    pub name: String,
    pub project: String,
    pub cron: String,
    pub time_zone: Option<String>,
    pub suspended: bool,
    /// The barrier's state (`status.phase`).
    pub phase: Option<String>,
    pub active_job: Option<String>,
    pub next: Option<Timestamp>,
    /// The current cycle first, then the last one.
    pub cycles: Vec<CycleRow>,
}

/// One refine → brainstorm cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct CycleRow {
    pub tick: Timestamp,
    pub refine: StepRow,
    pub brainstorm: Option<StepRow>,
    /// The cycle's result, when it ended.
    pub result: Option<String>,
}

/// One Job of a cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRow {
    pub job: String,
    pub result: Option<String>,
}

/// What needs a person's attention in a namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct ProblemsPage {
    pub namespace: String,
    /// Twins and squats: objects with `KeyBound=False`.
    pub unbound: Vec<Problem>,
    /// Handoffs whose body failed the lint.
    pub lint_failed: Vec<Problem>,
    /// How far the PostgreSQL mirror is behind, or why it is not known.
    pub mirror: Health,
    /// Whether the controller is alive (its leader Lease is renewed).
    pub controller: Health,
}

/// One object with a problem.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub name: String,
    pub key: String,
    /// The condition's message.
    pub message: String,
}

/// The health of one part of the system, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    Healthy(String),
    Degraded(String),
    Unknown(String),
}
