//! `list_offers` (extension): a project's offers, optionally to one agent
//! or in one phase, paged: at most `limit` (default 50, at most 200) per
//! answer, and a `next_cursor` to continue.
//!
//! Each answer is one page of the apiserver's list (its `limit` and
//! `continue`, with the field selector on the project and destination), in
//! the apiserver's order (by name). The phase is filtered in the page, so
//! with `phase` a page may hold fewer than `limit` offers (even none) and
//! still have a `next_cursor`. The cursor wraps the apiserver's `continue`
//! token with the filters it was made for, so it cannot continue another
//! listing; it expires with the apiserver's token (minutes).

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::contract::{Answer, Call, CallError, Tool, answer};
use super::definition::{definition, reads};
use super::page;
use super::views::OfferView;
use crate::profiles::Audience;
use handoff_core::api::OfferPhase;
use handoff_core::api::validation::{self, FieldError};
use handoff_kube::offers::OfferError;

const NAME: &str = "list_offers";

/// The row of `list_offers` in the tool table.
pub(crate) const TOOL: Tool = Tool {
    name: NAME,
    audience: Audience::Writers,
    action: "list offers of",
    definition: || {
        definition::<ListOffersArgs, ListOffersResult>(
            NAME,
            "List a project's offers (optionally to one agent, or in one phase), by name. Page with limit \
             (1-200, default 50) and next_cursor; with phase a page may hold fewer than limit.",
            reads(),
        )
    },
    call: |call, args| Box::pin(handle(call, args)),
};

/// Arguments of `list_offers`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListOffersArgs {
    /// The project.
    pub project: String,
    /// Only offers to this agent.
    #[serde(default)]
    pub to: Option<String>,
    /// Only offers in this phase: Offered, Accepted, Completed, Rejected or Superseded.
    #[serde(default)]
    pub phase: Option<OfferPhase>,
    /// Page size, 1–200 (default 50).
    #[serde(default)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page, to continue (with the same project, to and phase).
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Result of `list_offers`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ListOffersResult {
    /// Offers of this page, by name.
    pub offers: Vec<OfferView>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The wire form of a cursor: the filters and the apiserver's token.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Cursor {
    /// Project.
    p: String,
    /// Destination, if any.
    t: Option<String>,
    /// Phase, if any.
    s: Option<OfferPhase>,
    /// The apiserver's `continue` token.
    c: String,
}

async fn handle(call: &Call<'_>, args: Option<JsonObject>) -> Result<Answer, CallError> {
    let args: ListOffersArgs = call.args(args)?;
    let (limit, page) = validate(&args)?;
    let (offers, next) = call
        .offer_store()
        .list_page(
            &args.project,
            args.to.as_deref(),
            args.phase,
            limit,
            page.as_deref(),
        )
        .await
        .map_err(|e| match e {
            OfferError::Kube(kube::Error::Api(s)) if s.code == 410 => {
                CallError::Field(FieldError {
                    field: "cursor",
                    rule: "a next_cursor of the last few minutes (the apiserver's continue token)"
                        .into(),
                    problem: format!(
                        "it has expired ({}); list again without a cursor",
                        s.message
                    ),
                })
            }
            other => call.offer_error(other),
        })?;
    let result = ListOffersResult {
        offers: offers.iter().map(OfferView::of).collect(),
        next_cursor: next.map(|c| encode_cursor(&args, c)),
    };
    let text = text(&args.project, &result);
    Ok(answer(&result, text))
}

/// Checks the project, the destination, the page size and the cursor, in
/// that order: the page size and the apiserver's token to continue from.
fn validate(args: &ListOffersArgs) -> Result<(u32, Option<String>), FieldError> {
    validation::project(&args.project)?;
    if let Some(to) = &args.to {
        validation::label_value("to", to)?;
    }
    let limit = u32::try_from(page::limit(args.limit)?).unwrap_or(u32::MAX);
    let token = page::given(args.cursor.as_deref())
        .map(|c| decode_cursor(args, c))
        .transpose()?;
    Ok((limit, token))
}

fn encode_cursor(args: &ListOffersArgs, token: String) -> String {
    page::encode(&Cursor {
        p: args.project.clone(),
        t: args.to.clone(),
        s: args.phase,
        c: token,
    })
}

/// The apiserver's token of a cursor made for the same filters.
fn decode_cursor(args: &ListOffersArgs, cursor: &str) -> Result<String, FieldError> {
    let invalid = |problem: &str| {
        page::invalid(
            "the next_cursor of a previous list_offers answer, unchanged, with the same project, to and phase",
            problem,
        )
    };
    let cursor: Cursor = page::decode(cursor).map_err(|why| invalid(why.problem()))?;
    if cursor.p != args.project || cursor.t != args.to || cursor.s != args.phase {
        return Err(invalid(&format!(
            "it continues the listing of project {:?}, to {:?}, phase {:?}",
            cursor.p, cursor.t, cursor.s
        )));
    }
    // The token goes to the apiserver: no hidden character in it.
    validation::line_text("cursor", &cursor.c, validation::MAX_CURSOR_CHARS)
        .map_err(|e| invalid(&format!("its continue token is not one: {}", e.problem)))?;
    Ok(cursor.c)
}

/// The text of a `list_offers` answer.
pub(crate) fn text(project: &str, result: &ListOffersResult) -> String {
    let more = if result.next_cursor.is_some() {
        " More: pass next_cursor."
    } else {
        ""
    };
    format!(
        "{} offer(s) in project {project}.{more}",
        result.offers.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(limit: Option<u32>, cursor: Option<String>) -> ListOffersArgs {
        ListOffersArgs {
            project: "shop".into(),
            to: Some("dev-lead".into()),
            phase: None,
            limit,
            cursor,
        }
    }

    #[test]
    fn limits_and_cursors_are_validated() {
        assert_eq!(validate(&args(None, None)).expect("default"), (50, None));
        assert_eq!(validate(&args(Some(200), None)).expect("max").0, 200);
        for bad in [0, 201] {
            let err = validate(&args(Some(bad), None)).expect_err("out of range");
            assert_eq!(
                (err.field, err.rule.as_str(), err.problem),
                ("limit", "a page size from 1 to 200", format!("got {bad}"))
            );
        }
        let cursor = encode_cursor(&args(None, None), "token-1".into());
        assert_eq!(
            validate(&args(Some(2), Some(cursor.clone()))).expect("its own cursor"),
            (2, Some("token-1".to_owned()))
        );
        let mut other = args(None, Some(cursor));
        other.to = Some("tester".into());
        let err = validate(&other).expect_err("another listing");
        assert_eq!(err.field, "cursor");
        assert!(
            err.problem
                .contains("continues the listing of project \"shop\", to Some(\"dev-lead\")"),
            "{}",
            err.problem
        );
        let err = validate(&args(None, Some("%%".into()))).expect_err("not base64");
        assert!(err.problem.contains("not base64url"), "{}", err.problem);
        let hidden = encode_cursor(&args(None, None), "token\u{0}1".into());
        let err = validate(&args(None, Some(hidden))).expect_err("a NUL in the token");
        assert_eq!(err.field, "cursor");
        assert!(
            err.problem
                .contains("continue token is not one: it contains the control character U+0000"),
            "{}",
            err.problem
        );
    }
}
