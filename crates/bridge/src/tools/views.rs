//! The views of stored objects the tools return: [`HandoffFacts`] (what
//! every view of a handoff shows, from the apiserver or the mirror alike),
//! [`HandoffView`] (a whole handoff) and [`OfferView`]. A leaf: the tools
//! and the prompts import it; it imports none of the bridge's files.

use kube::ResourceExt;
use schemars::JsonSchema;
use serde::Serialize;

use handoff_core::api::naming::name_for_key;
use handoff_core::api::{Handoff, HandoffOffer, OfferPhase};
use handoff_core::handoff::view::{revision, updated_at};
use handoff_mirror::ListedRow;

/// What every view of a handoff shows of it, whether read from the
/// apiserver or from the mirror: the one handoff view, flattened into the
/// full view ([`HandoffView`]), a list entry and a search match.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct HandoffFacts {
    /// The conversation key.
    pub handoff_key: String,
    /// Project.
    pub project: String,
    /// Repository, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// Kind of work, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Who wrote this version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// When the content last changed (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

impl HandoffFacts {
    /// The facts of a stored handoff.
    pub fn of(h: &Handoff) -> Self {
        Self {
            handoff_key: h.spec.handoff_key.clone(),
            project: h.spec.project.clone(),
            repo: h.spec.repo.clone(),
            kind: h.spec.kind.clone(),
            created_by: h.spec.created_by.clone(),
            updated_at: updated_at(h).map(|t| t.0.to_string()),
        }
    }

    /// The facts of a mirror row (current, or a past revision).
    pub(crate) fn of_row(row: &ListedRow) -> Self {
        Self {
            handoff_key: row.handoff_key.clone(),
            project: row.project.clone(),
            repo: row.repo.clone(),
            kind: row.kind.clone(),
            created_by: Some(row.created_by.clone()).filter(|w| !w.is_empty()),
            updated_at: Some(row.updated_at.to_string()),
        }
    }
}

/// A handoff as tools return it.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct HandoffView {
    /// Key, project, repo, kind, writer, time.
    #[serde(flatten)]
    pub facts: HandoffFacts,
    /// The summary.
    pub body: String,
    /// Content revision (1 after creation), once the controller has counted it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// The Kubernetes object holding it (`namespace/name`).
    pub object: String,
}

impl HandoffView {
    /// The view of a stored handoff: its revision and time as
    /// [`handoff_core::handoff::view::counted`] rules (none and the write's time
    /// while the controller has not counted this content).
    pub fn of(h: &Handoff) -> Self {
        Self {
            facts: HandoffFacts::of(h),
            body: h.spec.body.clone(),
            revision: revision(h),
            object: format!("{}/{}", h.namespace().unwrap_or_default(), h.name_any()),
        }
    }

    /// The view of a past revision from the mirror's history.
    pub(crate) fn of_revision(namespace: &str, row: &ListedRow) -> Self {
        Self {
            facts: HandoffFacts::of_row(row),
            body: row.body.clone(),
            revision: Some(row.revision),
            object: format!("{namespace}/{}", name_for_key(&row.handoff_key)),
        }
    }
}

/// An offer as the tools return it.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct OfferView {
    /// The offer's name.
    pub name: String,
    /// Project.
    pub project: String,
    /// Destination agent.
    pub to: String,
    /// The offering conversation's handoff key.
    pub from_key: String,
    /// The offering session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// What is handed over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<String>,
    /// Offered, Accepted, Completed, Rejected or Superseded.
    pub phase: OfferPhase,
    /// What replaced it, when superseded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
}

impl OfferView {
    /// The view of a stored offer.
    pub fn of(o: &HandoffOffer) -> Self {
        Self {
            name: o.name_any(),
            project: o.spec.project.clone(),
            to: o.spec.to.clone(),
            from_key: o.spec.from_key.clone(),
            session: o.spec.session.clone(),
            artifact: o.spec.artifact.clone(),
            phase: o.phase(),
            superseded_by: o.status.as_ref().and_then(|s| s.superseded_by.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handoff_reads_the_same_from_the_apiserver_and_the_mirror() {
        let at = k8s_openapi::jiff::Timestamp::from_second(60).expect("ts");
        let mut h = Handoff::new(
            &name_for_key("k"),
            handoff_core::api::HandoffSpec {
                repo: Some("o/r".into()),
                created_by: Some("alice".into()),
                ..handoff_core::api::HandoffSpec::new("k", "p", "b")
            },
        );
        h.metadata.namespace = Some("ns".into());
        h.status = Some(handoff_core::api::HandoffStatus {
            revision: Some(3),
            updated_at: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at)),
            content_hash: Some(h.spec.content_hash()),
            ..Default::default()
        });
        let row = ListedRow {
            handoff_key: "k".into(),
            project: "p".into(),
            repo: Some("o/r".into()),
            kind: None,
            created_by: "alice".into(),
            body: "b".into(),
            updated_at: at,
            revision: 3,
        };
        let expected = serde_json::json!({
            "handoff_key": "k", "project": "p", "repo": "o/r", "created_by": "alice",
            "updated_at": "1970-01-01T00:01:00Z", "body": "b", "revision": 3,
            "object": format!("ns/{}", name_for_key("k")),
        });
        for view in [HandoffView::of(&h), HandoffView::of_revision("ns", &row)] {
            assert_eq!(serde_json::to_value(&view).expect("json"), expected);
        }
        let unknown = ListedRow {
            created_by: String::new(),
            ..row
        };
        assert_eq!(HandoffFacts::of_row(&unknown).created_by, None, "no writer");
    }
}
