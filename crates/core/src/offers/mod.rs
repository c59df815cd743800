//! The offer decision and the names that make it safe under concurrency,
//! and the controller loops' [`plan`]. Pure.

pub mod plan;

use sha2::{Digest, Sha256};

use crate::api::HandoffOfferSpec;

/// What a new offer does, given the destination's pending offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing pending: create it.
    Create,
    /// The same offer is already pending: answer with it, write nothing.
    ReturnExisting,
    /// Create it and supersede the pending one.
    CreateAndSupersede,
}

/// The outcome a caller is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A new offer; nothing was pending.
    Created,
    /// An equivalent offer is pending (same session, no new artifact; or
    /// if-absent mode); it is returned and nothing was written.
    AlreadyOffered,
    /// A new offer replaced the pending one.
    SupersededPrevious,
    /// The destination agent is already active in the project; nothing was written.
    AgentAlreadyActive,
}

/// The decision table:
/// - no pending offer → create;
/// - if-absent mode and one is pending → return it;
/// - pending from the SAME session and no new artifact (empty or equal) →
///   return it;
/// - otherwise (a new artifact, or another session) → create and supersede.
pub fn decide(
    pending: Option<&HandoffOfferSpec>,
    new: &HandoffOfferSpec,
    if_absent: bool,
) -> Decision {
    let Some(pending) = pending else {
        return Decision::Create;
    };
    let same_session = pending.session == new.session;
    let new_artifact = new.artifact.as_deref().filter(|a| !a.is_empty());
    let no_new_artifact = new_artifact.is_none() || new_artifact == pending.artifact.as_deref();
    if if_absent || (same_session && no_new_artifact) {
        Decision::ReturnExisting
    } else {
        Decision::CreateAndSupersede
    }
}

/// The slot of a (project, destination): the common prefix of its offers'
/// names and the value of their `handoff.dev/slot` label. Readable part of
/// the destination plus a hash of the exact pair.
pub fn slot(project: &str, to: &str) -> String {
    let readable: String = to
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(24)
        .collect();
    let readable = readable.trim_matches('-');
    let digest = Sha256::digest(format!("{project}\0{to}").as_bytes());
    let hash: String = digest.iter().take(5).map(|b| format!("{b:02x}")).collect();
    if readable.is_empty() {
        format!("offer-{hash}")
    } else {
        format!("{readable}-{hash}")
    }
}

/// The name of the `seq`-th offer of a slot.
pub fn offer_name(slot: &str, seq: u64) -> String {
    format!("{slot}-{seq}")
}

/// The sequence number of an offer of `slot` (`None` for other names).
pub fn seq_of(name: &str, slot: &str) -> Option<u64> {
    name.strip_prefix(slot)?.strip_prefix('-')?.parse().ok()
}

/// The label selector of jobs that make an agent active, from a template
/// with `{to}` and `{project}` placeholders.
pub fn active_selector(template: &str, project: &str, to: &str) -> String {
    template.replace("{to}", to).replace("{project}", project)
}

/// The default template of [`active_selector`].
pub const DEFAULT_ACTIVE_SELECTOR: &str = "handoff.dev/agent={to},project={project}";

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(session: Option<&str>, artifact: Option<&str>) -> HandoffOfferSpec {
        HandoffOfferSpec {
            session: session.map(Into::into),
            artifact: artifact.map(Into::into),
            ..HandoffOfferSpec::new("shop", "dev-lead", "arch#1")
        }
    }

    #[test]
    fn the_decision_table() {
        use Decision::*;
        let cases = [
            // (pending, new, if_absent) → decision
            (None, spec(Some("s1"), None), false, Create),
            (None, spec(Some("s1"), Some("a")), true, Create),
            (
                Some(spec(Some("s1"), None)),
                spec(Some("s1"), None),
                false,
                ReturnExisting,
            ),
            (
                Some(spec(Some("s1"), Some("a"))),
                spec(Some("s1"), None),
                false,
                ReturnExisting,
            ),
            (
                Some(spec(Some("s1"), Some("a"))),
                spec(Some("s1"), Some("")),
                false,
                ReturnExisting,
            ),
            (
                Some(spec(Some("s1"), Some("a"))),
                spec(Some("s1"), Some("a")),
                false,
                ReturnExisting,
            ),
            (
                Some(spec(Some("s1"), Some("a"))),
                spec(Some("s1"), Some("b")),
                false,
                CreateAndSupersede,
            ),
            (
                Some(spec(Some("s1"), None)),
                spec(Some("s1"), Some("b")),
                false,
                CreateAndSupersede,
            ),
            (
                Some(spec(Some("s1"), None)),
                spec(Some("s2"), None),
                false,
                CreateAndSupersede,
            ),
            (
                Some(spec(None, None)),
                spec(None, None),
                false,
                ReturnExisting,
            ),
            (
                Some(spec(Some("s1"), None)),
                spec(Some("s2"), Some("b")),
                true,
                ReturnExisting,
            ),
        ];
        for (pending, new, if_absent, expected) in cases {
            assert_eq!(
                decide(pending.as_ref(), &new, if_absent),
                expected,
                "{pending:?} / {new:?} / {if_absent}"
            );
        }
    }

    #[test]
    fn slots_and_sequence_numbers() {
        let s = slot("shop", "Dev Lead");
        assert!(s.starts_with("dev-lead-") && s.len() <= 40, "{s}");
        assert_ne!(slot("shop", "dev-lead"), slot("shop2", "dev-lead"));
        assert_ne!(
            slot("a", "b-c"),
            slot("a-b", "c"),
            "the pair is hashed exactly"
        );
        assert!(slot("shop", "日本").starts_with("offer-"));
        assert_eq!(seq_of(&offer_name(&s, 7), &s), Some(7));
        assert_eq!(seq_of("other-7", &s), None);
        assert_eq!(seq_of(&format!("{s}-x"), &s), None);
        assert_eq!(
            active_selector(DEFAULT_ACTIVE_SELECTOR, "shop", "dev-lead"),
            "handoff.dev/agent=dev-lead,project=shop"
        );
    }
}
