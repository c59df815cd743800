//! One handoff, whole: the object read by name as the person, its row, and
//! its revisions from the mirror (`list_revisions`, through the dispatch).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::errors::{Doing, ReadError, no_mirror};
use super::reads::{api, object_name, one, project_ttl};
use super::rows::handoff_row as row_of;
use super::tool;
use crate::model::{HandoffPage, HandoffRow, RevisionRow, Unavailable};
use handoff_bridge::auth::Caller;
use handoff_bridge::call::Services;
use handoff_core::api::Handoff;
use handoff_core::handoff::canonical;
use handoff_core::lint::BYTES_PER_TOKEN;

/// The handoff object `name`, read as the person.
pub(super) async fn stored(caller: &Caller, name: &str) -> Result<Handoff, ReadError> {
    object_name("name", name)?;
    let doing = Doing {
        action: "read handoffs",
        namespace: caller.store().namespace(),
    };
    one(
        &api::<Handoff>(caller),
        name,
        &format!("handoff named {name}"),
        doing,
    )
    .await
}

/// The row of `h`, with its project's TTL.
async fn row(caller: &Caller, h: &Handoff) -> HandoffRow {
    let ttl = project_ttl(caller, &h.spec.project).await;
    row_of(h, ttl, Timestamp::now())
}

/// One handoff as a row (the delete confirmation shows it).
pub async fn handoff_row(caller: &Caller, name: &str) -> Result<HandoffRow, ReadError> {
    let h = stored(caller, name).await?;
    Ok(row(caller, &h).await)
}

/// One handoff, whole, with its revisions (or why there are none).
pub async fn handoff(
    caller: &Caller,
    services: &Services,
    name: &str,
) -> Result<HandoffPage, ReadError> {
    let h = stored(caller, name).await?;
    let (row, revisions, may_delete) = futures::join!(
        row(caller, &h),
        revisions(caller, services, &h),
        caller.may("delete"),
    );
    Ok(HandoffPage {
        namespace: caller.store().namespace().to_owned(),
        row,
        body: h.spec.body.clone(),
        revisions,
        may_delete: may_delete.unwrap_or(false),
        version: h.metadata.resource_version.clone(),
    })
}

/// The newest revisions of `h`'s key in the mirror (one page of
/// `list_revisions`), or why they cannot be shown.
async fn revisions(
    caller: &Caller,
    services: &Services,
    h: &Handoff,
) -> Result<Vec<RevisionRow>, Unavailable> {
    if !canonical(h) {
        return Err(Unavailable(
            "This object is not its key's handoff (its name is not the one derived from its key: a \
             twin or a squat), so it has no history; see the problems page."
                .into(),
        ));
    }
    if services.mirror.is_none() {
        return Err(Unavailable(no_mirror("Revisions")));
    }
    let doing = Doing {
        action: "read the history of handoffs",
        namespace: caller.store().namespace(),
    };
    let args = json!({ "handoff_key": h.spec.handoff_key });
    match tool::call(services, caller, "list_revisions", args, doing).await {
        Ok(answer) => Ok(revision_rows(&answer)),
        Err(err) => Err(Unavailable(err.to_string())),
    }
}

/// The token estimate of a body of `bytes` bytes (as `approxTokens`).
fn tokens_of_bytes(bytes: i64) -> i64 {
    let per_token = i64::try_from(BYTES_PER_TOKEN).unwrap_or(4);
    bytes.saturating_add(per_token - 1) / per_token
}

/// The rows of a `list_revisions` answer.
pub(super) fn revision_rows(answer: &Value) -> Vec<RevisionRow> {
    answer["revisions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            Some(RevisionRow {
                revision: r["revision"].as_i64()?,
                at: r["updated_at"]
                    .as_str()
                    .and_then(|t| t.parse::<Timestamp>().ok()),
                writer: r["created_by"].as_str().map(str::to_owned),
                tokens: r["body_bytes"].as_i64().map(tokens_of_bytes),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::PROFILE;
    use handoff_bridge::profiles::Profile;

    #[test]
    fn the_profile_sees_every_tool_the_console_calls() {
        let profile = Profile::new(PROFILE);
        for name in [
            "list_revisions",
            "diff_handoff",
            "search_handoffs",
            "delete_handoff",
            "reject_offer",
        ] {
            let tool = handoff_bridge::tools::find(name).expect(name);
            assert!(
                profile.admits(tool.audience),
                "{PROFILE} does not see {name}"
            );
        }
    }

    #[test]
    fn revisions_are_read_from_the_tools_answer() {
        let answer = json!({"revisions": [
            {"revision": 3, "updated_at": "2026-12-01T10:00:00Z", "created_by": "alice", "body_bytes": 9},
            {"revision": 2, "updated_at": "not a time", "body_bytes": 8},
            {"updated_at": "2026-12-01T09:00:00Z"},
        ]});
        let rows = revision_rows(&answer);
        let got: Vec<_> = rows
            .iter()
            .map(|r| {
                (
                    r.revision,
                    r.at.map(|t| t.as_second()),
                    r.writer.as_deref(),
                    r.tokens,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (3, Some(1_796_119_200), Some("alice"), Some(3)),
                (2, None, None, Some(2))
            ],
            "a row without a revision number is skipped"
        );
        assert!(revision_rows(&json!({})).is_empty());
    }
}
