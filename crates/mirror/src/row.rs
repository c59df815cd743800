//! The rows the mirror holds and reads: a counted Handoff's row
//! ([`Row`]), its version for resync ([`RowVersion`]), and a handoff's
//! content as lists, search and the history read it ([`ListedRow`]).

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::MirrorError;
use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;

/// One row of `handoffs`: the mirror's copy of a counted Handoff.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `metadata.uid`.
    pub id: String,
    /// `metadata.name`: the name derived from the key (the only objects
    /// the mirror holds).
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// `spec.handoffKey`.
    pub handoff_key: String,
    /// `spec.project`.
    pub project: String,
    /// `spec.repo`.
    pub repo: Option<String>,
    /// `spec.kind`.
    pub kind: Option<String>,
    /// `spec.createdBy`, empty when the object names no writer.
    pub created_by: String,
    /// `spec.body`.
    pub body: String,
    /// `status.revision`.
    pub revision: i64,
    /// `metadata.resourceVersion`, as the integer etcd issued.
    pub resource_version: i64,
    /// `metadata.creationTimestamp`.
    pub created_at: Timestamp,
    /// `status.updatedAt`.
    pub updated_at: Timestamp,
}

impl Row {
    /// The row for `h`; `Ok(None)` while the controller has not counted it
    /// yet (no `status.revision` / `status.updatedAt`). An object whose
    /// name is not the one derived from its key is refused: it is not the
    /// key's handoff, and the mirror never holds it.
    pub fn of(h: &Handoff) -> Result<Option<Row>, MirrorError> {
        let Some(status) = h.status.as_ref() else {
            return Ok(None);
        };
        let (Some(revision), Some(updated_at)) = (status.revision, status.updated_at.as_ref())
        else {
            return Ok(None);
        };
        let object = handoff_core::handoff::describe(h);
        let problem = |problem: &str| MirrorError::Object {
            object: object.clone(),
            problem: problem.to_owned(),
        };
        if !handoff_core::handoff::canonical(h) {
            return Err(problem(&format!(
                "its name is not {}, the name derived from its handoffKey",
                name_for_key(&h.spec.handoff_key)
            )));
        }
        let id = h.uid().ok_or_else(|| problem("it has no metadata.uid"))?;
        let namespace = h
            .namespace()
            .ok_or_else(|| problem("it has no namespace"))?;
        let rv = h.resource_version().unwrap_or_default();
        let resource_version = parse_resource_version(&rv)
            .ok_or_else(|| problem(&format!("resourceVersion {rv:?} is not an integer")))?;
        let created_at = h
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .unwrap_or(updated_at.0);
        Ok(Some(Row {
            id,
            name: h.name_any(),
            namespace,
            handoff_key: h.spec.handoff_key.clone(),
            project: h.spec.project.clone(),
            repo: h.spec.repo.clone(),
            kind: h.spec.kind.clone(),
            created_by: h.spec.created_by.clone().unwrap_or_default(),
            body: h.spec.body.clone(),
            revision,
            resource_version,
            created_at,
            updated_at: updated_at.0,
        }))
    }
}

/// What identifies a row's version, for resync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowVersion {
    /// Namespace.
    pub namespace: String,
    /// The key.
    pub handoff_key: String,
    /// `metadata.uid` of the object it was written from.
    pub id: String,
    /// Content revision.
    pub revision: i64,
    /// resourceVersion it was written from.
    pub resource_version: i64,
}

/// A resourceVersion as the integer etcd issued, if it is one.
pub(crate) fn parse_resource_version(rv: &str) -> Option<i64> {
    rv.parse::<i64>().ok().filter(|v| *v >= 0)
}

/// Whether resync must rewrite the row `row` (if any) for the object of
/// uid `id` at content revision `revision`.
pub(crate) fn is_stale(row: Option<&RowVersion>, id: &str, revision: i64) -> bool {
    row.is_none_or(|row| row.id != id || row.revision < revision)
}

/// A position in list order: `(updated_at, handoff_key)`.
pub type ListAfter = (Timestamp, String);

/// A handoff's content as it is read back: a current row (`list_handoffs`,
/// search) or a past revision of the history ([`crate::Mirror::revision`], whose
/// `updated_at` is when that revision was counted).
#[derive(Debug, Clone, PartialEq)]
pub struct ListedRow {
    /// The key.
    pub handoff_key: String,
    /// Project.
    pub project: String,
    /// Repo.
    pub repo: Option<String>,
    /// Kind.
    pub kind: Option<String>,
    /// Writer (empty when unknown).
    pub created_by: String,
    /// Body.
    pub body: String,
    /// `status.updatedAt`.
    pub updated_at: Timestamp,
    /// Content revision.
    pub revision: i64,
}

impl ListedRow {
    /// A row whose first eight columns are key, project, repo, kind,
    /// writer, body, updated_at and revision (the list, search and
    /// revision queries).
    pub fn of(r: &tokio_postgres::Row) -> Self {
        Self {
            handoff_key: r.get(0),
            project: r.get(1),
            repo: r.get(2),
            kind: r.get(3),
            created_by: r.get(4),
            body: r.get(5),
            updated_at: r.get(6),
            revision: r.get(7),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_versions_must_be_integers() {
        assert_eq!(parse_resource_version("12345"), Some(12345));
        assert_eq!(parse_resource_version(""), None);
        assert_eq!(parse_resource_version("abc"), None);
        assert_eq!(parse_resource_version("-1"), None);
    }
}
