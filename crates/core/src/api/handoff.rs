//! The `Handoff` custom resource: one compact summary per conversation key.
//!
//! The schema is the first line of validation for everyone who writes
//! handoffs (the MCP bridge, `kubectl`, GitOps): every rule carries a message
//! that names the field, the rule and what is wrong with the value, and the
//! apiserver refuses the whole object, so nothing half-written is stored.
//!
//! Limits, and why:
//! - `body` ≤ [`MAX_BODY_CHARS`] characters (32 Ki): a handoff is a summary —
//!   current state, done, next, open questions, references — that a fresh
//!   agent reads on every start. 32 Ki characters is about 8k tokens, ample
//!   for that and an order of magnitude below a replayed transcript; it also
//!   keeps lists cheap and the object far under etcd's 1.5 MiB request limit.
//! - `handoffKey` ≤ [`MAX_KEY_BYTES`] bytes of UTF-8: the key is the agent
//!   wrapper's `CONVERSATION_OBJECT_KEY`, an S3-style object key of up to
//!   1,024 bytes; that also fits a PostgreSQL b-tree index entry of the
//!   mirror (≈ 2.7 KB). The object's name is a fold + hash of it, so the
//!   length never reaches `metadata.name`.
//! - no control characters in `handoffKey`, `repo`, `kind`, `createdBy`, and
//!   no NUL in `body` (PostgreSQL text cannot hold NUL; a key with a newline
//!   is a bug upstream, not a name).
//! - `project` must be a valid label value, so `kubectl get handoffs -l
//!   project=x` always finds every handoff of a project.
#![allow(
    unreachable_pub,
    reason = "kube's KubeSchema derive copies each spec struct, `pub` and all, into a private scope"
)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::core::Rule;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Most characters a handoff body may hold (see the module docs).
pub const MAX_BODY_CHARS: usize = 32 * 1024;
/// Most bytes of UTF-8 a handoff key may hold (see the module docs).
pub const MAX_KEY_BYTES: usize = 1024;
/// Most characters of `repo` (`org/repo`, a URL).
pub const MAX_REPO_CHARS: usize = 253;
/// Most characters of `kind` and of a label value.
pub const MAX_LABEL_CHARS: usize = 63;
/// Most characters of `createdBy` (a Kubernetes user name).
pub const MAX_WRITER_CHARS: usize = 512;

/// CEL: the string is a valid label value (its length is the schema's
/// `maxLength`, [`MAX_LABEL_CHARS`]).
pub(super) const LABEL_VALUE_CEL: &str =
    r"self.matches('^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')";

/// The rule of every resource's `project`: a valid label value, so
/// `kubectl get <resource> -l project=x` finds all of a project's objects.
pub(super) fn project_rule() -> Rule {
    Rule::new(LABEL_VALUE_CEL).message(
        "project must be a valid label value: at most 63 characters, only letters, digits, '-', \
         '_' or '.', starting and ending with a letter or digit",
    )
}

/// A handoff: the compact summary an agent leaves for whoever continues the
/// same conversation (issue, incident, …). One current handoff per key: the
/// object name is derived from `spec.handoffKey`, and a write replaces it.
// clippy reads the repeated `type_ = "string"` of separate printcolumns as
// duplicated attributes; they are arguments of different columns.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "handoff.dev",
    version = "v1alpha1",
    kind = "Handoff",
    plural = "handoffs",
    shortname = "ho",
    category = "agents",
    namespaced,
    status = "HandoffStatus",
    doc = "A compact summary (\"where I left off, next steps\") that lets a fresh agent continue a conversation without replaying its transcript. One current Handoff per conversation key.",
    printcolumn(
        name = "Key",
        type_ = "string",
        json_path = ".spec.handoffKey",
        description = "Conversation object key"
    ),
    printcolumn(name = "Project", type_ = "string", json_path = ".spec.project"),
    printcolumn(name = "Repo", type_ = "string", json_path = ".spec.repo"),
    printcolumn(name = "Kind", type_ = "string", json_path = ".spec.kind"),
    printcolumn(
        name = "Updated",
        type_ = "date",
        json_path = ".status.updatedAt",
        description = "Last content change"
    ),
    printcolumn(
        name = "Revision",
        type_ = "integer",
        json_path = ".status.revision",
        description = "Content changes counted; 1 after creation"
    ),
    printcolumn(
        name = "Tokens",
        type_ = "integer",
        json_path = ".status.approxTokens",
        description = "Approximate tokens an agent reads for the body"
    ),
    printcolumn(
        name = "Lint",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Linted\")].reason",
        description = "NoWarnings, or Warnings (kubectl describe shows them)"
    ),
    printcolumn(
        name = "Writer",
        type_ = "string",
        json_path = ".spec.createdBy",
        priority = 1
    ),
    printcolumn(
        name = "Origin",
        type_ = "string",
        json_path = ".status.origin",
        description = "Written by an agent, or Rescued from a transcript",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    selectable = ".spec.project",
    selectable = ".spec.repo",
    selectable = ".spec.kind",
    selectable = ".spec.handoffKey"
)]
#[serde(rename_all = "camelCase")]
pub struct HandoffSpec {
    /// The conversation object key this handoff continues (stable per issue,
    /// e.g. `acme/api#42`). The object's name is derived from it; it cannot
    /// change after creation. At most 1024 bytes of UTF-8, no control
    /// characters.
    #[x_kube(
        validation = Rule::new("self == oldSelf").message("handoffKey is immutable: write a new Handoff for a different key"),
        validation = Rule::new("!self.matches('[[:cntrl:]]')").message("handoffKey must not contain control characters (newline, tab, NUL, ...)"),
        validation = Rule::new("size(bytes(self)) <= 1024").message("handoffKey must be at most 1024 bytes of UTF-8"),
    )]
    #[schemars(length(min = 1, max = MAX_KEY_BYTES))]
    pub handoff_key: String,

    /// The project this handoff belongs to. Must be a valid label value (at
    /// most 63 characters: letters, digits, '-', '_' or '.', starting and
    /// ending with a letter or digit) so `kubectl get handoffs -l project=x`
    /// always works.
    #[x_kube(validation = project_rule())]
    #[schemars(length(min = 1, max = MAX_LABEL_CHARS))]
    pub project: String,

    /// The repository the work is in, any string (e.g. `org/repo`). Select
    /// it with `--field-selector spec.repo=org/repo`; it is also a `repo`
    /// label when it is a valid label value. At most 253 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("!self.matches('[[:cntrl:]]')").message("repo must not contain control characters"))]
    #[schemars(length(max = MAX_REPO_CHARS))]
    pub repo: Option<String>,

    /// What kind of work this is (e.g. `issue`, `incident`, `pr`). At most
    /// 63 characters, no control characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("!self.matches('[[:cntrl:]]')").message("kind must not contain control characters"))]
    #[schemars(length(max = MAX_LABEL_CHARS))]
    pub kind: Option<String>,

    /// The summary itself, in markdown: current state, what is done, what is
    /// next, open questions, key files and PRs. A summary, not a log: at most
    /// 32768 characters (about 8k tokens), no NUL characters.
    #[x_kube(validation = Rule::new("!self.contains('\\u0000')").message("body must not contain NUL characters"))]
    #[schemars(length(min = 1, max = MAX_BODY_CHARS))]
    pub body: String,

    /// The authenticated identity that wrote this version (a Kubernetes user
    /// or service account name). Set by the writer from its credentials, never
    /// taken from tool arguments; an admission policy keeps it honest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("!self.matches('[[:cntrl:]]')").message("createdBy must not contain control characters"))]
    #[schemars(length(max = MAX_WRITER_CHARS))]
    pub created_by: Option<String>,
}

impl HandoffSpec {
    /// The handoff of `handoff_key` in `project` saying `body`, with no
    /// repo, kind or writer (set those after).
    pub fn new(
        handoff_key: impl Into<String>,
        project: impl Into<String>,
        body: impl Into<String>,
    ) -> Self {
        Self {
            handoff_key: handoff_key.into(),
            project: project.into(),
            repo: None,
            kind: None,
            body: body.into(),
            created_by: None,
        }
    }

    /// The content of a handoff: project, repo, kind and body. The key is
    /// its identity and the writer is not content: the same summary written
    /// again by someone else changes nothing (no new revision, no write).
    pub fn content(&self) -> (&str, Option<&str>, Option<&str>, &str) {
        (
            &self.project,
            self.repo.as_deref(),
            self.kind.as_deref(),
            &self.body,
        )
    }

    /// Whether `other` holds exactly this content (see [`Self::content`]).
    pub fn same_content(&self, other: &HandoffSpec) -> bool {
        self.content() == other.content()
    }

    /// A stable hash of [`Self::content`] (kept in `status.contentHash`): 16
    /// hex characters of SHA-256 over the length-prefixed fields, so no two
    /// different contents share an encoding.
    pub fn content_hash(&self) -> String {
        let (project, repo, kind, body) = self.content();
        let mut hasher = Sha256::new();
        for field in [Some(project), repo, kind, Some(body)] {
            match field {
                None => hasher.update([0u8]),
                Some(value) => {
                    hasher.update([1u8]);
                    hasher.update((value.len() as u64).to_be_bytes());
                    hasher.update(value.as_bytes());
                }
            }
        }
        hasher
            .finalize()
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// The first characters of every rescued body (`handoff rescue`): how a
/// rescued handoff is recognised (a later rescue may replace it; an
/// agent-written one newer than the session is never replaced).
pub const RESCUE_MARK: &str = "> **Rescued handoff**";

/// Whether `body` is a rescued handoff (see [`RESCUE_MARK`]).
pub fn is_rescued(body: &str) -> bool {
    body.starts_with(RESCUE_MARK)
}

/// Who wrote a handoff's body: an agent (or a person), or `handoff rescue`
/// from a transcript when the agent left none.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub enum HandoffOrigin {
    /// Written by an agent or a person.
    Written,
    /// Extracted from a transcript by `handoff rescue` (the body starts
    /// with [`RESCUE_MARK`]).
    Rescued,
}

impl HandoffOrigin {
    /// The origin of `body`.
    pub fn of(body: &str) -> Self {
        if is_rescued(body) {
            Self::Rescued
        } else {
            Self::Written
        }
    }
}

/// Where the controller has got with a handoff.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub enum HandoffPhase {
    /// Written, not yet processed by the controller.
    Pending,
    /// The controller has processed the latest generation.
    Current,
}

/// What the controller observed about a handoff.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandoffStatus {
    /// How many content changes (project, repo, kind or body) this handoff
    /// has seen; 1 after creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// When the content last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Time>,
    /// Size of the body in bytes (UTF-8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_bytes: Option<i64>,
    /// A cheap estimate of the tokens an agent reads for the body: one token
    /// per 4 bytes of UTF-8, rounded up (see `handoff_core::lint::approx_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approx_tokens: Option<i64>,
    /// `Rescued` when the counted body was extracted from a transcript by
    /// `handoff rescue`, else `Written`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<HandoffOrigin>,
    /// `Pending` until the controller has processed the latest generation, then `Current`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<HandoffPhase>,
    /// A hash of the content the controller last counted (SHA-256 of
    /// project, repo, kind and body, 16 hex characters). `revision` is
    /// incremented when the spec's hash differs from this one, so a write
    /// that changes only `createdBy`, labels or annotations is not a new
    /// revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions such as `Mirrored` (the row in the PostgreSQL mirror is current).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
/// Characters of body shown per entry when `include_body` is off.
pub const PREVIEW_CHARS: usize = 160;

/// The first characters of a body on one line.
pub fn preview_line(body: &str) -> String {
    let flat: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut preview: String = flat.chars().take(PREVIEW_CHARS).collect();
    if flat.chars().count() > PREVIEW_CHARS {
        preview.push('…');
    }
    preview
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_are_one_bounded_line() {
        let p = preview_line("## State\n\n  working   on it\n");
        assert_eq!(p, "## State working on it");
        assert_eq!(
            preview_line(&"w ".repeat(500)).chars().count(),
            PREVIEW_CHARS + 1
        );
    }
}
