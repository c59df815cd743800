//! The write at an expected content revision (optimistic concurrency):
//! read, check ([`check_revision`]), then apply guarded by the read's
//! `resourceVersion`.

use std::time::Duration;

use kube::api::{Patch, PatchParams};

use super::{HandoffStore, desired};
use handoff_core::api::naming::name_for_key;
use handoff_core::api::{Handoff, HandoffSpec};
use handoff_core::handoff::outcome::WriteOutcome;
use handoff_core::handoff::view::updated_at;
use handoff_core::names::BRIDGE_FIELD_MANAGER;

impl HandoffStore {
    /// Replaces the handoff for `spec.handoff_key` only if it is still at
    /// content revision `expected` (optimistic concurrency, see
    /// [`check_revision`]): the apply carries the `resourceVersion` of the
    /// read that passed the check, so a write in between makes the
    /// apiserver answer 409; then the handoff is read and checked again (a
    /// status-only change by the controller keeps the revision and the
    /// generation, so the write goes ahead; a content change is a
    /// [`RevisionConflict`]). Identical content at `expected` writes nothing.
    pub async fn write_if_at(
        &self,
        spec: &HandoffSpec,
        expected: i64,
    ) -> Result<(WriteOutcome, Handoff), WriteError> {
        let name = name_for_key(&spec.handoff_key);
        let desired = desired(&name, spec);
        let params = PatchParams::apply(BRIDGE_FIELD_MANAGER).force();
        let mut attempt = 0u32;
        loop {
            let current = self.get(&spec.handoff_key).await?;
            let current = check_revision(&spec.handoff_key, current, expected)?;
            if current.spec.same_content(spec) {
                return Ok((WriteOutcome::Unchanged, current));
            }
            let mut guarded = desired.clone();
            guarded.metadata.resource_version = current.metadata.resource_version.clone();
            match self
                .api
                .patch(&name, &params, &Patch::Apply(&guarded))
                .await
            {
                Ok(written) => return Ok((WriteOutcome::Updated, written)),
                Err(kube::Error::Api(status)) if status.code == 409 && attempt < 5 => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(10 * u64::from(attempt))).await;
                }
                Err(err) => return Err(err.into()),
            }
        }
    }
}

/// Why [`HandoffStore::write_if_at`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The apiserver refused or failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// The handoff is not at the expected revision.
    #[error(transparent)]
    Conflict(#[from] RevisionConflict),
}

/// The handoff is not (or not yet known to be) at the revision the writer
/// expected; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevisionConflict {
    /// No handoff exists for the key (it was never written, or deleted).
    #[error(
        "conflict on `expected_revision`: you expected revision {expected} of `{key}`, but no handoff \
         exists for it (deleted, or never written); nothing was written. Call get_handoff, then \
         write_handoff without `expected_revision` to create it"
    )]
    Missing {
        /// The key written.
        key: String,
        /// The revision the writer expected.
        expected: i64,
    },
    /// Another content revision is current.
    #[error(
        "conflict on `expected_revision`: you expected revision {expected} of `{key}`, but it is at \
         revision {current}, written by {writer} at {at}; nothing was written. Call get_handoff, merge \
         your changes into that revision, and write again with expected_revision {current}"
    )]
    Moved {
        /// The key written.
        key: String,
        /// The revision the writer expected.
        expected: i64,
        /// The current revision.
        current: i64,
        /// Who wrote it.
        writer: String,
        /// When its content was written.
        at: String,
    },
    /// A write the controller has not counted yet came after the last
    /// counted revision, so the current revision is not known yet.
    #[error(
        "conflict on `expected_revision`: you expected revision {expected} of `{key}`, but a write \
         by {writer} at {at} is not counted yet (the last counted revision is {counted}), so it is not \
         known to be revision {expected}; nothing was written. Call get_handoff until it shows the \
         revision, then decide again"
    )]
    Uncounted {
        /// The key written.
        key: String,
        /// The revision the writer expected.
        expected: i64,
        /// The last revision the controller counted (0: none yet).
        counted: i64,
        /// Who wrote the uncounted content.
        writer: String,
        /// When.
        at: String,
    },
}

/// `current` if it is at content revision `expected`: the controller has
/// counted the latest spec (`status.observedGeneration` equals
/// `metadata.generation`, so no write came after the count) and that count
/// (`status.revision`) is `expected`.
pub(crate) fn check_revision(
    key: &str,
    current: Option<Handoff>,
    expected: i64,
) -> Result<Handoff, RevisionConflict> {
    let Some(current) = current else {
        return Err(RevisionConflict::Missing {
            key: key.to_owned(),
            expected,
        });
    };
    let status = current.status.clone().unwrap_or_default();
    let writer = current
        .spec
        .created_by
        .clone()
        .unwrap_or_else(|| "an unknown writer".to_owned());
    let at = updated_at(&current).map_or_else(|| "an unknown time".to_owned(), |t| t.0.to_string());
    let counted = status.revision.unwrap_or(0);
    if status.observed_generation.is_none()
        || status.observed_generation != current.metadata.generation
    {
        return Err(RevisionConflict::Uncounted {
            key: key.to_owned(),
            expected,
            counted,
            writer,
            at,
        });
    }
    if counted != expected {
        return Err(RevisionConflict::Moved {
            key: key.to_owned(),
            expected,
            current: counted,
            writer,
            at,
        });
    }
    Ok(current)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    /// A handoff at `generation`, counted at `observed` as `revision`.
    fn counted(generation: i64, observed: Option<i64>, revision: Option<i64>) -> Handoff {
        let mut h = Handoff::new(
            "k",
            HandoffSpec {
                created_by: Some("system:serviceaccount:ns:agent".into()),
                ..HandoffSpec::new("k", "p", "b")
            },
        );
        h.metadata.generation = Some(generation);
        h.status = Some(handoff_core::api::HandoffStatus {
            content_hash: Some(h.spec.content_hash()),
            revision,
            updated_at: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(60).expect("ts"),
            )),
            observed_generation: observed,
            ..Default::default()
        });
        h
    }

    #[test]
    fn a_write_goes_ahead_only_at_the_counted_expected_revision() {
        assert!(check_revision("k", Some(counted(3, Some(3), Some(2))), 2).is_ok());
        let cases = [
            (None, "no handoff exists for it"),
            (
                Some(counted(3, Some(3), Some(3))),
                "it is at revision 3, written by system:serviceaccount:ns:agent at 1970-01-01T00:01:00Z",
            ),
            (
                Some(counted(4, Some(3), Some(2))),
                "is not counted yet (the last counted revision is 2)",
            ),
            (
                Some(counted(1, None, None)),
                "the last counted revision is 0",
            ),
        ];
        for (current, fragment) in cases {
            let err = check_revision("k", current, 2).expect_err("a conflict");
            let message = err.to_string();
            assert!(
                message
                    .starts_with("conflict on `expected_revision`: you expected revision 2 of `k`"),
                "{message}"
            );
            assert!(
                message.contains(fragment),
                "{fragment:?} not in {message:?}"
            );
            assert!(message.contains("nothing was written"), "{message}");
        }
    }
}
