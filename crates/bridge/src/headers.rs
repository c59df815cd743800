//! `handoff mcp-headers`: prints the bridge's request headers as JSON, for
//! clients that ask a command for them at each connection (Claude Code's
//! `headersHelper`).
//!
//! A projected ServiceAccount token is rotated by the kubelet and the old
//! one expires, so a token copied into a client config once stops working
//! in a long run. Reading the token file again at every connection keeps
//! an agent on the current token; the kubelet rotates at 80% of the
//! token's life, so a token read at connection time stays valid for at
//! least a fifth of it.
//!
//! The file is best named in the command (`--token-file`): Claude Code
//! strips variables with TOKEN in their names (and KEY, SECRET, PASSWORD,
//! AUTH, CREDENTIALS) from the environment of a project's headersHelper
//! (`.mcp.json`), so `HANDOFF_TOKEN_FILE` never reaches it there; without
//! either, the error says so (docs/agents.md, "headersHelper").

use std::path::PathBuf;

use clap::Args;

use super::auth::PROFILE_HEADER;

/// Arguments of `handoff mcp-headers`.
#[derive(Debug, Args)]
pub struct HeadersArgs {
    /// The bearer token's file (read again on every run), e.g. a projected
    /// ServiceAccount token. Name it here in a Claude Code headersHelper:
    /// Claude Code strips `HANDOFF_TOKEN_FILE` from its environment.
    #[arg(long, env = "HANDOFF_TOKEN_FILE", value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// A profile to send in the `x-handoff-profile` header (used only when
    /// the caller's ServiceAccount has no `handoff.dev/profile` label).
    #[arg(long, env = "HANDOFF_PROFILE")]
    pub profile: Option<String>,
}

/// Why no headers could be printed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum HeadersError {
    /// Neither `--token-file` nor `HANDOFF_TOKEN_FILE`.
    #[error(
        "no token file: pass --token-file PATH (rule: Claude Code strips variables with TOKEN \
         in their names, HANDOFF_TOKEN_FILE too, from a headersHelper's environment, so name \
         the file in the helper's command)"
    )]
    NoTokenFile,
    /// The file holds no token.
    #[error("the token file {0} is empty (rule: it holds one bearer token)")]
    Empty(String),
    /// The file holds more than a token.
    #[error(
        "the token file {0} holds whitespace or control characters inside the token \
         (rule: one bearer token, optionally followed by a newline)"
    )]
    Malformed(String),
}

/// Pure: the headers JSON for the file `path` holding `contents`.
pub(crate) fn headers_json(
    path: &str,
    contents: &str,
    profile: Option<&str>,
) -> Result<String, HeadersError> {
    let token = contents.trim_end_matches(['\n', '\r']);
    if token.is_empty() {
        return Err(HeadersError::Empty(path.into()));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(HeadersError::Malformed(path.into()));
    }
    let mut headers = serde_json::Map::new();
    headers.insert("Authorization".into(), format!("Bearer {token}").into());
    if let Some(profile) = profile.filter(|p| !p.is_empty()) {
        headers.insert(PROFILE_HEADER.into(), profile.into());
    }
    Ok(serde_json::Value::Object(headers).to_string())
}

/// Pure: the token file given, or why there is none.
pub(crate) fn token_file(given: Option<PathBuf>) -> Result<PathBuf, HeadersError> {
    given
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or(HeadersError::NoTokenFile)
}

/// Runs `handoff mcp-headers`.
pub fn run(args: HeadersArgs) -> anyhow::Result<()> {
    let file = token_file(args.token_file)?;
    let path = file.display().to_string();
    let contents = std::fs::read_to_string(&file)
        .map_err(|e| anyhow::anyhow!("cannot read the token file {path}: {e}"))?;
    println!(
        "{}",
        headers_json(&path, &contents, args.profile.as_deref())?
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_is_required_and_its_absence_names_the_rule() {
        let cases: [(Option<&str>, Result<&str, HeadersError>); 3] = [
            (Some("/t"), Ok("/t")),
            (Some(""), Err(HeadersError::NoTokenFile)),
            (None, Err(HeadersError::NoTokenFile)),
        ];
        for (given, want) in cases {
            assert_eq!(
                token_file(given.map(PathBuf::from)),
                want.map(PathBuf::from),
                "{given:?}"
            );
        }
        let message = HeadersError::NoTokenFile.to_string();
        assert!(!message.contains('\n'), "{message}");
        for part in [
            "--token-file",
            "Claude Code strips variables with TOKEN in their names",
            "HANDOFF_TOKEN_FILE",
            "headersHelper",
        ] {
            assert!(message.contains(part), "{part:?} missing from {message:?}");
        }
    }

    #[test]
    fn headers_cases() {
        let cases: [(&str, Option<&str>, Result<&str, HeadersError>); 6] = [
            (
                "eyJ.a.b\n",
                None,
                Ok(r#"{"Authorization":"Bearer eyJ.a.b"}"#),
            ),
            (
                "eyJ.a.b",
                Some("implement"),
                Ok(r#"{"Authorization":"Bearer eyJ.a.b","x-handoff-profile":"implement"}"#),
            ),
            (
                "eyJ.a.b\r\n",
                Some(""),
                Ok(r#"{"Authorization":"Bearer eyJ.a.b"}"#),
            ),
            ("", None, Err(HeadersError::Empty("/t".into()))),
            ("\n", None, Err(HeadersError::Empty("/t".into()))),
            (
                "two\ntokens",
                None,
                Err(HeadersError::Malformed("/t".into())),
            ),
        ];
        for (contents, profile, want) in cases {
            assert_eq!(
                headers_json("/t", contents, profile),
                want.map(str::to_owned),
                "{contents:?}"
            );
        }
    }
}
