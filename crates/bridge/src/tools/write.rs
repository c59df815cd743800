//! `write_handoff` (contract): creates or replaces the handoff of a key, as
//! the caller, recording the caller's name in `createdBy`, in one
//! server-side apply. Identical content from the same writer writes nothing
//! (`unchanged`; see [`handoff_kube::store`] for how the apply's answer tells). With the optional
//! `expected_revision`, the write is conditional: it replaces the handoff only
//! while it is still at that counted content revision, and otherwise fails
//! with a conflict naming the current revision, its writer and time
//! ([`handoff_kube::store::HandoffStore::write_if_at`]). Without it: latest wins.
//!
//! Every text field is checked for credentials before anything is sent
//! ([`handoff_core::secrets`]; refused with the field, the kind and the line, never
//! the secret). The result carries the body's quality warnings
//! ([`handoff_core::lint`]) in an optional `warnings` field and in the text: an
//! addition to the contract's result, which clients that do not know it
//! ignore. The body is linted under its namespace's budget
//! ([`handoff_kube::settings`], cached; a bad setting is logged and the default
//! used), read only after the write succeeded.

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::contract::{Answer, Call, CallError, Tool, answer};
use super::definition::{Destructive, Idempotent, definition, writes};
use super::views::HandoffView;
use crate::profiles::Audience;
use handoff_core::api::HandoffSpec;
use handoff_core::api::validation::{self, FieldError};
use handoff_core::handoff::outcome::WriteOutcome;
use handoff_core::lint::{self, Warning};
use handoff_kube::store::WriteError;

const NAME: &str = "write_handoff";

/// The row of `write_handoff` in the tool table.
pub(crate) const TOOL: Tool = Tool {
    name: NAME,
    audience: Audience::Writers,
    action: "write (get, create, patch)",
    definition: || {
        definition::<WriteArgs, WriteResult>(
            NAME,
            "Write (create or replace) the handoff for a continuation key: a COMPACT markdown summary of \
             current state, what is done, what is next, open questions and key files/PRs. Call it before \
             you finish. Writing identical content changes nothing. Latest write wins; to never overwrite \
             another agent's newer write (long sessions, keys shared by several agents), pass \
             `expected_revision` = the `revision` get_handoff returned: the write then fails with a \
             conflict (naming the current revision, writer and time; nothing written) if the handoff \
             changed since, or if its newest write is not counted yet.",
            writes(Destructive(false), Idempotent(true)),
        )
    },
    call: |call, args| Box::pin(handle(call, args)),
};

/// Arguments of `write_handoff`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    /// The continuation key from your preamble (the conversation object key, stable per issue).
    pub handoff_key: String,
    /// The project (a label value: letters, digits, '-', '_', '.', at most 63 characters).
    pub project: String,
    /// The repository, e.g. `org/repo` (optional).
    #[serde(default)]
    pub repo: Option<String>,
    /// The kind of work, e.g. `issue`, `incident`, `pr` (optional).
    #[serde(default)]
    pub kind: Option<String>,
    /// A COMPACT markdown summary: current state, done, next, open questions, key files/PRs.
    /// A summary, not a log: at most 32768 characters.
    pub body: String,
    /// Optional: write only if the handoff is still at this content revision (the `revision`
    /// get_handoff returned, 1 or more); otherwise the call fails with a conflict and writes
    /// nothing. Omit it for latest-wins.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub expected_revision: Option<i64>,
}

/// Result of `write_handoff`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct WriteResult {
    /// `created`, `updated`, or `unchanged` (identical content: nothing written).
    pub outcome: WriteOutcome,
    /// The handoff as stored; its `revision` is absent until the
    /// controller has counted this content, and `updated_at` is when it
    /// was written.
    pub handoff: HandoffView,
    /// Quality warnings about the body (never errors; the handoff was
    /// written): fix them and write again. Absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

async fn handle(call: &Call<'_>, args: Option<JsonObject>) -> Result<Answer, CallError> {
    let args: WriteArgs = call.args(args)?;
    let expected = args.expected_revision;
    let mut spec = validate(args)?;
    let writer = call
        .caller
        .username()
        .await
        .map_err(|e| call.kube_error(e))?;
    spec.created_by = Some(writer.to_owned()).filter(|w| !w.is_empty());
    let store = call.caller.store();
    let write = async {
        match expected {
            None => store.write(&spec).await.map_err(|e| call.kube_error(e)),
            Some(expected) => store
                .write_if_at(&spec, expected)
                .await
                .map_err(|e| match e {
                    WriteError::Kube(e) => call.kube_error(e),
                    WriteError::Conflict(conflict) => CallError::Conflict(conflict.to_string()),
                }),
        }
    };
    // The namespace's budget is read (or found cached) only once the
    // caller's own write succeeded: a caller RBAC refuses makes the bridge
    // read nothing with its identity (handoff_kube::settings).
    let (outcome, stored) = write.await?;
    let budget = call.budgets.budget(store.namespace()).await;
    let result = WriteResult {
        outcome,
        warnings: lint::lint(&stored.spec.body, budget.tokens),
        handoff: HandoffView::of(&stored),
    };
    let text = text(&result);
    Ok(answer(&result, text))
}

/// Validates write arguments into a spec, in the contract's order (the
/// writer is filled in later).
pub(crate) fn validate(args: WriteArgs) -> Result<HandoffSpec, FieldError> {
    validation::handoff_key(&args.handoff_key)?;
    validation::no_credentials("handoff_key", &args.handoff_key)?;
    validation::project(&args.project)?;
    validation::no_credentials("project", &args.project)?;
    let repo = args.repo.filter(|r| !r.is_empty());
    let kind = args.kind.filter(|k| !k.is_empty());
    if let Some(repo) = &repo {
        validation::repo(repo)?;
        validation::no_credentials("repo", repo)?;
    }
    if let Some(kind) = &kind {
        validation::kind(kind)?;
        validation::no_credentials("kind", kind)?;
    }
    validation::body(&args.body)?;
    validation::no_credentials("body", &args.body)?;
    if let Some(expected) = args.expected_revision.filter(|r| *r < 1) {
        return Err(FieldError {
            field: "expected_revision",
            rule: "a content revision number, 1 or more (the `revision` get_handoff returned)"
                .into(),
            problem: format!("got {expected}"),
        });
    }
    Ok(HandoffSpec {
        repo,
        kind,
        ..HandoffSpec::new(args.handoff_key, args.project, args.body)
    })
}

/// The text of a `write_handoff` answer, with one line per lint warning.
pub(crate) fn text(result: &WriteResult) -> String {
    let mut text = outcome_text(result);
    if !result.warnings.is_empty() {
        text.push_str("\nWarnings (fix them and write again; the handoff was written):");
        for w in &result.warnings {
            text.push_str(&format!("\n- {}: {}", w.code, w.message));
        }
    }
    text
}

fn outcome_text(result: &WriteResult) -> String {
    let h = &result.handoff;
    match result.outcome {
        WriteOutcome::Unchanged => {
            format!(
                "Handoff `{}` unchanged: it already holds this content; nothing was written.",
                h.facts.handoff_key
            )
        }
        outcome => format!(
            "Handoff `{}` {} in project {} ({} bytes). The next agent with this key will start from it.{}",
            h.facts.handoff_key,
            if outcome == WriteOutcome::Created {
                "created"
            } else {
                "updated"
            },
            h.facts.project,
            h.body.len(),
            revision_note(h.revision)
        ),
    }
}

/// What a written answer says of the revision: its number once counted,
/// else that it is counted shortly (the answer never carries the previous
/// content's revision: [`handoff_core::handoff::view::counted`]).
fn revision_note(revision: Option<i64>) -> String {
    match revision {
        Some(r) => format!(" Revision {r}."),
        None => " Its revision is counted shortly (get_handoff shows it).".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_answer_names_the_revision_only_once_counted() {
        // (revision in the view, what the text ends with)
        let cases = [
            (Some(2), " Revision 2."),
            (
                None,
                " Its revision is counted shortly (get_handoff shows it).",
            ),
        ];
        for (revision, tail) in cases {
            assert_eq!(revision_note(revision), tail, "{revision:?}");
        }
    }

    #[test]
    fn write_arguments_are_validated_in_contract_order() {
        // (key, project, repo, body, the field refused or None when valid)
        let cases = [
            ("", "p", "", "b", Some("handoff_key")),
            ("", "bad project", "", "", Some("handoff_key")),
            ("k", "bad project", "a\u{7}b", "", Some("project")),
            ("k", "p", "a\u{7}b", "", Some("repo")),
            ("k", "p", "", "", Some("body")),
            ("k", "p", "", "b", None),
        ];
        let leaky = format!("## State\nuse ghp_{}", "FakeToken0AB".repeat(3));
        let cases = cases.into_iter().chain([
            ("k", "p", "", leaky.as_str(), Some("body")),
            (
                "k",
                "p",
                "https://u:hunter2fake@git.example.com/r",
                "b",
                Some("repo"),
            ),
            (
                concat!("k ", "AKIA", "QZ7HX3MK2WJ5RT4B"),
                "p",
                "",
                "b",
                Some("handoff_key"),
            ),
        ]);
        for (key, project, repo, body, refused) in cases {
            let args = WriteArgs {
                handoff_key: key.into(),
                project: project.into(),
                repo: Some(repo.into()),
                kind: None,
                body: body.into(),
                expected_revision: None,
            };
            match (validate(args), refused) {
                (Err(err), Some(field)) => assert_eq!(err.field, field, "{key:?} {project:?}"),
                (Ok(spec), None) => assert_eq!(spec.repo, None, "an empty repo means none"),
                (got, want) => panic!("{key:?} {project:?} {body:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
