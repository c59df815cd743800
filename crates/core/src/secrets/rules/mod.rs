//! The rule table, one file per family of issuers.
//!
//! Each rule is written from the issuer's documented token format (a fact,
//! not someone's rule text) and keeps gitleaks' rule id where gitleaks has
//! the rule, so that a refusal names what users of scanners recognise
//! (`stripe-access-token`, `github-pat`). Rules gitleaks lacks (what agents
//! around Kubernetes print, PuTTY keys, headers and cookies) have ids of
//! our own in the same style.
//!
//! Order matters: where two rules match overlapping text, the earlier one
//! names it. So the families go from the most specific (a vendor prefix)
//! to the most generic (an assignment to a name like `password`).

mod cloud;
mod code;
mod generic;
mod keys;
mod kubernetes;
mod saas;

/// How a rule's match is judged before it is a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// A token with a distinctive shape (a vendor prefix, a fixed length and
    /// alphabet): only placeholders are allowed (`ghp_` and 36 `x`), and it
    /// is also looked for across a line break that wraps it.
    Prefixed,
    /// A value in a place that always holds a credential (`password=`, an
    /// `Authorization` or `X-API-Key` header, a URL's password, a
    /// vendor's variable): the allowlist of assigned values applies
    /// (placeholders, variable references, code, filesystem paths, plain
    /// words, digests that say so: `sha256:…`), but not the one of
    /// hex-shaped ids (a bare git SHA, a hex digest, a UUID, a GPG key id):
    /// there, a value that looks like a hash is a credential all the same.
    Assignment,
    /// A value assigned to a name the pattern finds by one of its words
    /// (`generic-api-key`: `…key…=`, `…token…:`): as [`Class::Assignment`]
    /// where the whole name names a credential (`GITHUB_TOKEN`,
    /// `--api-key`); where it says hash, digest or commit (`COMMIT_SHA`,
    /// `api_commit_sha`) or names no credential, hex-shaped ids are
    /// allowed too.
    Named,
}

/// One kind of credential.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rule {
    /// gitleaks' id where gitleaks has the rule, ours otherwise; named in
    /// refusals and in `[redacted: …]`.
    pub(crate) id: &'static str,
    /// What it finds, in words.
    pub(crate) description: &'static str,
    /// Lower-case literals, at least one: the pattern runs only on a text
    /// that holds one of them (in any case), the keyword pre-filter.
    pub(crate) keywords: &'static [&'static str],
    /// The pattern (`regex` crate syntax). The credential is the group named
    /// `secret` when there is one, else the whole match.
    pub(crate) pattern: &'static str,
    /// The least Shannon entropy (bits per character) of the credential;
    /// `0.0` for none.
    pub(crate) entropy: f32,
    /// How the match is judged.
    pub(crate) class: Class,
}

/// Every rule, most specific family first.
pub(crate) fn all() -> impl Iterator<Item = &'static Rule> {
    [
        keys::RULES,
        kubernetes::RULES,
        cloud::RULES,
        code::RULES,
        saas::RULES,
        generic::RULES,
    ]
    .into_iter()
    .flatten()
}
