//! Transcript linearizer (issue 7): reads a Claude Code, Codex or Grok session
//! into plain conversational turns and wraps them in a handoff document.

pub mod cli;
