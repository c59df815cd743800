//! What session-start hands the agent: the key's handoff fenced as a prior
//! summary, cut to what the agent keeps of `additionalContext` (past it,
//! the agent would hide the rest, and the way back to it, behind a file of
//! its own).

use handoff_core::goals;
use handoff_transcript::ContextLimit;

use super::Stored;

/// Pure: the `additionalContext` of session-start for `h`.
pub fn session_context(h: &Stored) -> String {
    goals::prior_handoff(&goals::Prior {
        key: &h.handoff_key,
        revision: h.revision,
        author: h.created_by.as_deref(),
        updated: h.updated_at.as_deref(),
        body: &h.body,
    })
}

/// Pure: the longest head of `body` of at most `budget` in `limit`'s unit,
/// cut after its last whole line when that keeps at least half of it.
fn head_within(body: &str, budget: usize, limit: ContextLimit) -> &str {
    let mut used = 0;
    let mut end = 0;
    for (i, c) in body.char_indices() {
        used += limit.size_of(c);
        if used > budget {
            break;
        }
        end = i + c.len_utf8();
    }
    if end == body.len() {
        return body;
    }
    let head = &body[..end];
    match head.rfind('\n') {
        Some(nl) if nl >= head.len() / 2 => &body[..=nl],
        _ => head,
    }
}

/// Pure: [`session_context`] within `limit` (none: whole). A handoff too
/// long for it keeps its head (State and Next come first in the skill's
/// sections) and ends with how much was cut, the key and "call get_handoff
/// for the rest", so the agent sees where the rest is instead of the
/// agent's own preview of a spilled file.
pub fn capped_context(h: &Stored, limit: Option<ContextLimit>) -> String {
    let whole = session_context(h);
    let Some(limit) = limit.filter(|l| l.size(&whole) > l.most()) else {
        return whole;
    };
    let total = h.body.chars().count();
    let key = &h.handoff_key;
    let note = |shown: usize| {
        format!(
            "\nThis handoff was cut to fit the agent's context: above are the first {shown} of its \
             {total} characters. Call get_handoff with handoff_key `{key}` for the rest.\n"
        )
    };
    let with_body = |body: &str| {
        session_context(&Stored {
            body: body.to_owned(),
            ..h.clone()
        })
    };
    let mut budget = limit
        .most()
        .saturating_sub(limit.size(&with_body("")) + limit.size(&note(total)));
    loop {
        let head = head_within(&h.body, budget, limit);
        let text = with_body(head) + &note(head.chars().count());
        let over = limit.size(&text).saturating_sub(limit.most());
        if over == 0 || budget == 0 {
            return text;
        }
        budget = budget.saturating_sub(over);
    }
}
