//! Agent profiles and which tools each may see: the contract's four tools
//! and their extensions, per profile, as docs/contract.md ("Who sees which
//! tool") and docs/agents.md ("Identity and profile") describe them.
//!
//! The profile is the *agent-facing* gate: it decides which tools an agent
//! is shown and may call, so a coding agent is never tempted to delete
//! someone's handoff. It is not the security boundary: the bridge acts with
//! the caller's own credentials, and the apiserver's RBAC decides what that
//! identity may really do (a `refine` profile without `delete` rights still
//! gets Forbidden).
//!
//! Each tool names its [`Audience`] in its row of the tool table
//! (`tools::TOOLS`); this module says which profiles each audience admits.

/// Profiles that may read and write handoffs.
pub const WRITER_PROFILES: [&str; 5] = [
    "implement",
    "issueLifecycle",
    "incident",
    "brainstorm",
    "refine",
];
/// The one profile that may also delete.
pub(crate) const GROOMER_PROFILE: &str = "refine";

/// Who may see and call a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Every profile of [`WRITER_PROFILES`]: the contract's get, write and
    /// list, and the offer tools.
    Writers,
    /// Only [`GROOMER_PROFILE`]: the tools that delete handoffs.
    Groomer,
}

/// An agent profile as given (any string; unknown ones see no tool).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Profile(pub String);

impl Profile {
    /// The profile named `name` (trimmed).
    pub fn new(name: &str) -> Self {
        Self(name.trim().to_owned())
    }

    /// The contract's spelling of a known profile (matched case-insensitively).
    pub(crate) fn canonical(&self) -> Option<&'static str> {
        WRITER_PROFILES
            .into_iter()
            .find(|p| p.eq_ignore_ascii_case(&self.0))
    }

    /// Whether this profile may see and call the tools of `audience`.
    pub fn admits(&self, audience: Audience) -> bool {
        match (self.canonical(), audience) {
            (None, _) => false,
            (Some(p), Audience::Groomer) => p == GROOMER_PROFILE,
            (Some(_), Audience::Writers) => true,
        }
    }

    /// The profile as messages name it: ``profile `x` `` or `no profile`.
    pub fn who(&self) -> String {
        if self.0.is_empty() {
            "no profile".to_owned()
        } else {
            format!("profile `{}`", self.0)
        }
    }

    /// Why `tool`, for `audience`, is refused, for the agent.
    pub fn refusal(&self, tool: &str, audience: Audience) -> String {
        let rule = match audience {
            Audience::Groomer => {
                format!("only the `{GROOMER_PROFILE}` profile may delete handoffs")
            }
            Audience::Writers => format!(
                "handoff tools are for the profiles {}",
                WRITER_PROFILES.join(", ")
            ),
        };
        format!("tool `{tool}` is not available to {}: {rule}", self.who())
    }

    /// The label value / name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audience_table() {
        // (profile, admits writers' tools, admits the groomer's)
        let cases = [
            ("refine", true, true),
            ("implement", true, false),
            ("issueLifecycle", true, false),
            ("issuelifecycle", true, false),
            ("incident", true, false),
            ("brainstorm", true, false),
            ("review", false, false),
            ("", false, false),
            ("refine2", false, false),
        ];
        for (profile, writers, groomer) in cases {
            let p = Profile::new(profile);
            assert_eq!(p.admits(Audience::Writers), writers, "profile {profile:?}");
            assert_eq!(p.admits(Audience::Groomer), groomer, "profile {profile:?}");
        }
    }

    #[test]
    fn refusals_name_the_profile_and_the_tool() {
        // (profile, tool, audience, fragments of the refusal)
        let cases: [(&str, &str, Audience, &[&str]); 2] = [
            (
                "implement",
                "delete_handoff",
                Audience::Groomer,
                &["`delete_handoff`", "`implement`", "refine"],
            ),
            (
                "",
                "get_handoff",
                Audience::Writers,
                &["no profile", "get_handoff"],
            ),
        ];
        for (profile, tool, audience, fragments) in cases {
            let msg = Profile::new(profile).refusal(tool, audience);
            for fragment in fragments {
                assert!(msg.contains(fragment), "{fragment:?} not in {msg:?}");
            }
        }
    }
}
