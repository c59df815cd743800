//! Agent profiles and the tools each may see (the contract, DESIGN §2).
//!
//! The profile is the *agent-facing* gate: it decides which tools an agent
//! is shown and may call, so a coding agent is never tempted to delete
//! someone's handoff. It is not the security boundary: the bridge acts with
//! the caller's own credentials, and the apiserver's RBAC decides what that
//! identity may really do (a `refine` profile without `delete` rights still
//! gets Forbidden).

use std::fmt;

/// The four tools of the contract, and the offer tools (gated like
/// write/get/list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolName {
    /// `write_handoff`
    Write,
    /// `list_handoffs`
    List,
    /// `get_handoff`
    Get,
    /// `delete_handoff`
    Delete,
    /// `offer_handoff`
    Offer,
    /// `list_offers`
    ListOffers,
    /// `reject_offer`
    RejectOffer,
}

impl ToolName {
    /// Every tool, in the order `tools/list` shows them.
    pub const ALL: [ToolName; 7] = [
        ToolName::Get,
        ToolName::Write,
        ToolName::List,
        ToolName::Delete,
        ToolName::Offer,
        ToolName::ListOffers,
        ToolName::RejectOffer,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::Write => "write_handoff",
            ToolName::List => "list_handoffs",
            ToolName::Get => "get_handoff",
            ToolName::Delete => "delete_handoff",
            ToolName::Offer => "offer_handoff",
            ToolName::ListOffers => "list_offers",
            ToolName::RejectOffer => "reject_offer",
        }
    }

    /// The tool with this wire name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Profiles that may read and write handoffs.
pub const WRITER_PROFILES: [&str; 5] = [
    "implement",
    "issueLifecycle",
    "incident",
    "brainstorm",
    "refine",
];
/// The one profile that may also delete.
pub const GROOMER_PROFILE: &str = "refine";

/// An agent profile as given (any string; unknown ones see no tool).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Profile(pub String);

impl Profile {
    /// The profile named `name` (trimmed).
    pub fn new(name: &str) -> Self {
        Self(name.trim().to_owned())
    }

    /// The contract's spelling of a known profile (matched case-insensitively).
    fn canonical(&self) -> Option<&'static str> {
        WRITER_PROFILES
            .into_iter()
            .find(|p| p.eq_ignore_ascii_case(&self.0))
    }

    /// Whether this profile may see and call `tool`.
    pub fn allows(&self, tool: ToolName) -> bool {
        match (self.canonical(), tool) {
            (None, _) => false,
            (Some(p), ToolName::Delete) => p == GROOMER_PROFILE,
            (Some(_), _) => true,
        }
    }

    /// The tools this profile sees.
    pub fn tools(&self) -> Vec<ToolName> {
        ToolName::ALL
            .into_iter()
            .filter(|t| self.allows(*t))
            .collect()
    }

    /// Why `tool` is refused, for the agent.
    pub fn refusal(&self, tool: ToolName) -> String {
        let who = if self.0.is_empty() {
            "no profile".to_owned()
        } else {
            format!("profile `{}`", self.0)
        };
        let rule = match tool {
            ToolName::Delete => format!("only the `{GROOMER_PROFILE}` profile may delete handoffs"),
            _ => format!(
                "handoff tools are for the profiles {}",
                WRITER_PROFILES.join(", ")
            ),
        };
        format!("tool `{tool}` is not available to {who}: {rule}")
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
    fn the_contract_table() {
        const WRITER: &[&str] = &[
            "get_handoff",
            "write_handoff",
            "list_handoffs",
            "offer_handoff",
            "list_offers",
            "reject_offer",
        ];
        const GROOMER: &[&str] = &[
            "get_handoff",
            "write_handoff",
            "list_handoffs",
            "delete_handoff",
            "offer_handoff",
            "list_offers",
            "reject_offer",
        ];
        let cases: [(&str, &[&str]); 9] = [
            ("refine", GROOMER),
            ("implement", WRITER),
            ("issueLifecycle", WRITER),
            ("issuelifecycle", WRITER),
            ("incident", WRITER),
            ("brainstorm", WRITER),
            ("review", &[]),
            ("", &[]),
            ("refine2", &[]),
        ];
        for (profile, tools) in cases {
            let got: Vec<&str> = Profile::new(profile)
                .tools()
                .into_iter()
                .map(ToolName::as_str)
                .collect();
            assert_eq!(got, tools, "profile {profile:?}");
        }
    }

    #[test]
    fn refusals_name_the_profile_and_the_tool() {
        let msg = Profile::new("implement").refusal(ToolName::Delete);
        assert!(
            msg.contains("`delete_handoff`")
                && msg.contains("`implement`")
                && msg.contains("refine"),
            "{msg}"
        );
        let msg = Profile::new("").refusal(ToolName::Get);
        assert!(
            msg.contains("no profile") && msg.contains("get_handoff"),
            "{msg}"
        );
    }

    #[test]
    fn wire_names_round_trip() {
        for tool in ToolName::ALL {
            assert_eq!(ToolName::parse(tool.as_str()), Some(tool));
        }
        assert_eq!(ToolName::parse("drop_tables"), None);
    }
}
