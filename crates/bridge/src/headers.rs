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

use std::path::PathBuf;

use clap::Args;

use super::auth::PROFILE_HEADER;

/// Arguments of `handoff mcp-headers`.
#[derive(Debug, Args)]
pub struct HeadersArgs {
    /// The bearer token's file (read again on every run), e.g. a projected
    /// ServiceAccount token.
    #[arg(long, env = "HANDOFF_TOKEN_FILE", value_name = "PATH")]
    pub token_file: PathBuf,
    /// A profile to send in the `x-handoff-profile` header (used only when
    /// the caller's ServiceAccount has no `handoff.dev/profile` label).
    #[arg(long, env = "HANDOFF_PROFILE")]
    pub profile: Option<String>,
}

/// Why no headers could be printed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum HeadersError {
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

/// Runs `handoff mcp-headers`.
pub fn run(args: HeadersArgs) -> anyhow::Result<()> {
    let path = args.token_file.display().to_string();
    let contents = std::fs::read_to_string(&args.token_file)
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
