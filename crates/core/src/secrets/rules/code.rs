//! Source hosting, package registries, container registries, CI and
//! developer tooling.
//!
//! Nearly all of these tokens carry an issuer's prefix (`ghp_`, `glpat-`,
//! `npm_`, `pypi-`), so they are [`Class::Prefixed`]. Where a token has no
//! prefix of its own (an `.npmrc` `_authToken`, often a UUID; a Codecov or
//! Snyk token, a UUID; a Sidekiq Enterprise credential) the rule asks for
//! the context that names it (`_authToken=`, `CODECOV_TOKEN=`,
//! `BUNDLE_ENTERPRISE__CONTRIBSYS__COM=`) and is still `Prefixed`: that
//! context is what is distinctive, and the UUID allowance of
//! [`Class::Assignment`] would let the credential through. Values that are
//! only recognised by a generic name (a Docker `"auth"`, a NuGet
//! `ClearTextPassword`) are [`Class::Assignment`].
//!
//! Where a token's alphabet has `-` or `_`, `\b` cannot mark its end, so
//! the pattern asks for a character outside the alphabet (or the end of
//! the text) after the `secret` group. Where one issuer has a longer token
//! that starts like a shorter one (GitLab's routable tokens), the longer
//! rule comes first: on overlapping matches the earlier rule names the text.
//!
//! A decoded view counts only where the credential itself was rewritten,
//! so a Docker config or an `.npmrc` quoted inside a JSON string (its
//! context behind `\"` or `\n` escapes) is matched as written: those two
//! rules accept the escapes. A Docker `"auth"` is padded base64 (of
//! `user:password`); an identity token is opaque: the rule takes padded
//! base64 or at least 32 token characters, so that a word like
//! `"auth": "oauth2-client-credentials"` is no credential.

use super::{Class, Rule};

pub(super) const RULES: &[Rule] = &[
    // GitHub: `gh` + a letter for the kind + `_` + 36 base62 characters
    // (the last six a checksum); fine-grained tokens are `github_pat_` + 82.
    Rule {
        id: "github-fine-grained-pat",
        description: "a GitHub fine-grained personal access token",
        keywords: &["github_pat_"],
        pattern: r"\bgithub_pat_[A-Za-z0-9_]{82}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "github-pat",
        description: "a GitHub personal access token (classic)",
        keywords: &["ghp_"],
        pattern: r"\bghp_[A-Za-z0-9]{36}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "github-oauth",
        description: "a GitHub OAuth access token",
        keywords: &["gho_"],
        pattern: r"\bgho_[A-Za-z0-9]{36}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "github-app-token",
        description: "a GitHub App user-to-server or installation token",
        keywords: &["ghu_", "ghs_"],
        pattern: r"\bgh[us]_[A-Za-z0-9]{36,255}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "github-refresh-token",
        description: "a GitHub App refresh token",
        keywords: &["ghr_"],
        pattern: r"\bghr_[A-Za-z0-9]{36,255}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    // GitLab: one prefix per kind of token (GitLab's token overview); a
    // routable token is the prefix, a base64url payload, `.`, a two-character
    // version, `.` and a base36 length and CRC.
    Rule {
        id: "gitlab-pat-routable",
        description: "a GitLab personal, project or group access token (routable)",
        keywords: &["glpat-"],
        pattern: r"\bglpat-[A-Za-z0-9_-]{27,300}\.[0-9a-z]{2}\.?[0-9a-z]{7,9}\b",
        entropy: 3.5,
        class: Class::Prefixed,
    },
    Rule {
        id: "gitlab-pat",
        description: "a GitLab personal access token",
        keywords: &["glpat-"],
        pattern: r"\bglpat-[A-Za-z0-9_-]{20,}",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "gitlab-ptt",
        description: "a GitLab pipeline trigger token",
        keywords: &["glptt-"],
        pattern: r"\bglptt-[0-9a-f]{40}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "gitlab-rrt",
        description: "a GitLab runner registration token",
        keywords: &["gr1348941"],
        pattern: r"\b(?P<secret>GR1348941[A-Za-z0-9_-]{20})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "gitlab-runner-authentication-token-routable",
        description: "a GitLab runner authentication token (routable)",
        keywords: &["glrt-t"],
        pattern: r"\bglrt-t[0-9]_[A-Za-z0-9_-]{27,300}\.[0-9a-z]{2}\.?[0-9a-z]{7,9}\b",
        entropy: 3.5,
        class: Class::Prefixed,
    },
    Rule {
        id: "gitlab-runner-authentication-token",
        description: "a GitLab runner authentication token",
        keywords: &["glrt-"],
        pattern: r"\b(?P<secret>glrt-[A-Za-z0-9_-]{20})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "gitlab-deploy-token",
        description: "a GitLab deploy token",
        keywords: &["gldt-"],
        pattern: r"\b(?P<secret>gldt-[A-Za-z0-9_-]{20})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "gitlab-feed-token",
        description: "a GitLab feed token",
        keywords: &["glft-"],
        pattern: r"\b(?P<secret>glft-[A-Za-z0-9_-]{20})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "gitlab-feature-flag-client-token",
        description: "a GitLab feature flags client token",
        keywords: &["glffct-"],
        pattern: r"\b(?P<secret>glffct-[A-Za-z0-9_-]{20})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "gitlab-incoming-mail-token",
        description: "a GitLab incoming mail token",
        keywords: &["glimt-"],
        pattern: r"\b(?P<secret>glimt-[A-Za-z0-9_-]{25})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "gitlab-kubernetes-agent-token",
        description: "a GitLab agent for Kubernetes token",
        keywords: &["glagent-"],
        pattern: r"\b(?P<secret>glagent-[A-Za-z0-9_-]{50})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "gitlab-oauth-app-secret",
        description: "a GitLab OAuth application secret",
        keywords: &["gloas-"],
        pattern: r"\b(?P<secret>gloas-[A-Za-z0-9_-]{64})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "gitlab-scim-token",
        description: "a GitLab SCIM OAuth access token",
        keywords: &["glsoat-"],
        pattern: r"\b(?P<secret>glsoat-[A-Za-z0-9_-]{20})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "gitlab-cicd-job-token",
        description: "a GitLab CI/CD job token",
        keywords: &["glcbt-"],
        pattern: r"\b(?P<secret>glcbt-[A-Za-z0-9]{1,5}_[A-Za-z0-9_-]{20})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "gitlab-session-cookie",
        description: "a GitLab session cookie",
        keywords: &["_gitlab_session="],
        pattern: r"\b_gitlab_session=(?P<secret>[0-9a-f]{32})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    // Package registries.
    Rule {
        id: "npm-access-token",
        description: "an npm access token",
        keywords: &["npm_"],
        pattern: r"\bnpm_[A-Za-z0-9]{36}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "npmrc-auth-token",
        description: "an .npmrc registry credential (_authToken or _auth)",
        keywords: &["_auth"],
        pattern: r#"(?m)(?:^[ \t]*|\\n[ \t]*|:)_auth(?:Token)?[ \t]*=[ \t]*["']?(?P<secret>[A-Za-z0-9._~+/=-]{16,})"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "pypi-upload-token",
        description: "a PyPI upload token",
        keywords: &["pypi-ageichlwas5vcmc"],
        pattern: r"\b(?P<secret>pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,1000})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "rubygems-api-token",
        description: "a RubyGems API key",
        keywords: &["rubygems_"],
        pattern: r"\brubygems_[0-9a-f]{48}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "clojars-api-token",
        description: "a Clojars deploy token",
        keywords: &["clojars_"],
        pattern: r"(?i)\bCLOJARS_[a-z0-9]{60}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "nuget-api-key",
        description: "a NuGet.org API key",
        keywords: &["oy2"],
        pattern: r"\boy2[a-z0-9]{43}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "nuget-config-password",
        description: "a package source password in a NuGet.Config",
        keywords: &["cleartextpassword", "<add"],
        pattern: r#"(?i)<add\s+key\s*=\s*"(?:ClearText)?Password"\s+value\s*=\s*"(?P<secret>[^"%$][^"]{3,})""#,
        entropy: 0.0,
        class: Class::Assignment,
    },
    Rule {
        id: "artifactory-api-key",
        description: "a JFrog Artifactory API key",
        keywords: &["akcp"],
        pattern: r"\bAKCp[A-Za-z0-9]{69}\b",
        entropy: 3.5,
        class: Class::Prefixed,
    },
    Rule {
        id: "artifactory-reference-token",
        description: "a JFrog Artifactory reference token",
        keywords: &["cmvmdgtu"],
        pattern: r"\bcmVmdGtu[A-Za-z0-9]{56}\b",
        entropy: 3.5,
        class: Class::Prefixed,
    },
    Rule {
        id: "sidekiq-secret",
        description: "a Sidekiq Pro or Enterprise gem server credential",
        keywords: &["__contribsys__com"],
        pattern: r#"(?i)\bBUNDLE_(?:ENTERPRISE|GEMS)__CONTRIBSYS__COM["']?[ \t]*[:=][ \t]*["']?(?P<secret>[0-9a-f]{8}:[0-9a-f]{8})\b"#,
        entropy: 0.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "sidekiq-sensitive-url",
        description: "a Sidekiq Pro or Enterprise gem server URL with its credential",
        keywords: &["contribsys.com"],
        pattern: r"(?i)\bhttps?://(?P<secret>[0-9a-f]{8}:[0-9a-f]{8})@(?:gems|enterprise)\.contribsys\.com\b",
        entropy: 0.0,
        class: Class::Prefixed,
    },
    // Container registries.
    Rule {
        id: "docker-config-auth",
        description: "a registry credential in a Docker config.json (auth or identitytoken)",
        keywords: &["auth\"", "auth\\\"", "identitytoken", "registrytoken"],
        pattern: r#"(?i)\\?"(?:auth|identitytoken|registrytoken)\\?"[ \t]*:[ \t]*\\?"(?P<secret>(?:[A-Za-z0-9+/]{4}){3,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?|[A-Za-z0-9+/._~-]{32,}={0,2})\\?""#,
        entropy: 3.0,
        class: Class::Assignment,
    },
    Rule {
        id: "docker-hub-pat",
        description: "a Docker Hub personal or organization access token",
        keywords: &["dckr_pat_", "dckr_oat_"],
        pattern: r"\b(?P<secret>dckr_(?:pat|oat)_[A-Za-z0-9_-]{24,64})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    // CI, code quality and developer tooling.
    Rule {
        id: "codecov-access-token",
        description: "a Codecov upload or API token",
        keywords: &["codecov"],
        pattern: r#"(?i)\bcodecov[\w.-]{0,20}?(?:token|key)\b["']?[ \t]*[:=][ \t]*["']?(?P<secret>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[a-z0-9]{32})\b"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "snyk-api-token",
        description: "a Snyk API token",
        keywords: &["snyk"],
        pattern: r#"(?i)\bsnyk(?:[\w.-]{0,20}?(?:token|key)\b["']?[ \t]*[:=]|[ \t]+auth|[ \t]+config[ \t]+set[ \t]+api[ \t]*=)[ \t]*["']?(?P<secret>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "sonar-api-token",
        description: "a SonarQube or SonarCloud user, project or analysis token",
        keywords: &["squ_", "sqp_", "sqa_"],
        pattern: r"\bsq[upa]_[0-9a-f]{40}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "sourcegraph-access-token",
        description: "a Sourcegraph access token",
        keywords: &["sgp_"],
        pattern: r"\bsgp_(?:[0-9a-f]{16}_|local_)?[0-9a-f]{40}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "travisci-access-token",
        description: "a Travis CI access token",
        keywords: &["travis"],
        pattern: r#"(?i)\btravis[\w.-]{0,20}?(?:token|key|secret)\b["']?[ \t]*[:=][ \t]*["']?(?P<secret>[A-Za-z0-9]{22})\b"#,
        entropy: 3.5,
        class: Class::Assignment,
    },
    Rule {
        id: "droneci-access-token",
        description: "a Drone CI access token",
        keywords: &["drone"],
        pattern: r#"(?i)\bdrone[\w.-]{0,20}?(?:token|key|secret)\b["']?[ \t]*[:=][ \t]*["']?(?P<secret>[A-Za-z0-9]{32})\b"#,
        entropy: 3.5,
        class: Class::Assignment,
    },
    Rule {
        id: "buildkite-api-token",
        description: "a Buildkite API access token",
        keywords: &["bkua_"],
        pattern: r"\bbkua_[0-9a-f]{40}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "octopus-deploy-api-key",
        description: "an Octopus Deploy API key",
        keywords: &["api-"],
        pattern: r"\bAPI-[A-Z0-9]{26}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "harness-api-key",
        description: "a Harness personal or service account token",
        keywords: &["pat.", "sat."],
        pattern: r"\b(?:pat|sat)\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "prefect-api-token",
        description: "a Prefect Cloud API key",
        keywords: &["pnu_"],
        pattern: r"\bpnu_[A-Za-z0-9]{36}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "postman-api-token",
        description: "a Postman API key",
        keywords: &["pmak-"],
        pattern: r"\bPMAK-[0-9a-fA-F]{24}-[0-9a-fA-F]{34}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "linear-api-key",
        description: "a Linear API key",
        keywords: &["lin_api_"],
        pattern: r"\blin_api_[A-Za-z0-9]{40}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "linear-client-secret",
        description: "a Linear OAuth application's client secret",
        keywords: &["linear"],
        pattern: r#"(?i)\blinear[\w.-]{0,20}?secret\b["']?[ \t]*[:=][ \t]*["']?(?P<secret>[0-9a-f]{32})\b"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "atlassian-api-token",
        description: "an Atlassian (Jira, Confluence, Bitbucket) API token",
        keywords: &["atatt3"],
        pattern: r"\b(?P<secret>ATATT3[A-Za-z0-9_=-]{150,250})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.5,
        class: Class::Prefixed,
    },
    Rule {
        id: "readme-api-token",
        description: "a ReadMe API key",
        keywords: &["rdme_"],
        pattern: r"\brdme_[a-z0-9]{70}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "infracost-api-token",
        description: "an Infracost API key",
        keywords: &["ico-"],
        pattern: r"\bico-[A-Za-z0-9]{32}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
];
