//! What agents working on Kubernetes print: kubeconfig credentials,
//! bootstrap tokens, tokens given to kubectl and the values of Secrets
//! (in YAML, JSON or `kubectl create secret --from-literal`). A Secret's
//! rules come before `kubeconfig-token`: a `token:` under a Secret's
//! `data:` is named as the Secret's value. (A ServiceAccount token is a
//! JWT: the `jwt` rule names it.)

use super::{Class, Rule};

pub(super) const RULES: &[Rule] = &[
    Rule {
        id: "kubeconfig-client-key-data",
        description: "a kubeconfig user's client key (base64 of a PEM private key)",
        keywords: &["client-key-data"],
        pattern: r#"client-key-data["']?[ \t]*:[ \t]*["']?(?P<secret>[A-Za-z0-9+/]{16,}={0,2})"#,
        entropy: 0.0,
        class: Class::Assignment,
    },
    Rule {
        id: "kubernetes-bootstrap-token",
        description: "a Kubernetes bootstrap token (kubeadm join)",
        keywords: &["token"],
        pattern: r"(?i)token[\w .-]{0,20}[:= \t]+[\x22\x27]?(?P<secret>[a-z0-9]{6}\.[a-z0-9]{16})\b",
        entropy: 0.0,
        class: Class::Assignment,
    },
    Rule {
        id: "kubeadm-certificate-key",
        description: "a kubeadm certificate key (decrypts the control-plane certificates kubeadm uploads)",
        keywords: &["--certificate-key", "certificate key"],
        pattern: r"(?i)(?:--certificate-key[= ]|using certificate key:\s*)(?P<secret>[a-f0-9]{64})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "kubectl-token",
        description: "a bearer token given to kubectl (--token)",
        keywords: &["--token"],
        pattern: r#"\bkubectl\b[^\n]*?[ \t]--token[= ]["']?(?P<secret>[A-Za-z0-9._-]{20,})(?:["'\s]|$)"#,
        entropy: 3.0,
        class: Class::Assignment,
    },
    Rule {
        id: "kubectl-from-literal",
        description: "a Secret's value given to kubectl create secret (--from-literal)",
        keywords: &["--from-literal"],
        pattern: r#"\bsecret[ \t]+generic\b[^\n]*?--from-literal[= ]["']?[\w.-]+=["']?(?P<secret>[^\s"']{4,})"#,
        entropy: 0.0,
        class: Class::Assignment,
    },
    // `kind: Secret` and its `data:` must be in one document (no `---`
    // between them), or `kind: Secret` must follow the data block directly
    // (as kubectl sorts the keys), so that a ConfigMap's data next to a
    // Secret is not read as the Secret's.
    Rule {
        id: "kubernetes-secret-yaml",
        description: "a value under a Kubernetes Secret's data or stringData",
        keywords: &["kind: secret"],
        pattern: r#"(?m)^[ \t-]*kind:[ \t]*["']?Secret["']?[ \t]*\n(?:(?:[^\n-][^\n]*|-(?:[^\n-][^\n]*)?|--(?:[^\n-][^\n]*)?)?\n)*?[ \t]*["']?(?:data|stringData)["']?[ \t]*:[ \t]*\n(?:[ \t]+[^\n]*\n)*?[ \t]+["']?[\w.-]+["']?[ \t]*:[ \t]*["']?(?P<secret>[^\s"'|>{}]{4,})"#,
        entropy: 0.0,
        class: Class::Assignment,
    },
    Rule {
        id: "kubectl-secret-yaml",
        description: "a value under a Kubernetes Secret's data as kubectl get -o yaml prints it (data before kind)",
        keywords: &["kind: secret"],
        pattern: r#"(?m)^[ \t]*data:[ \t]*\n[ \t]+["']?[\w.-]+["']?[ \t]*:[ \t]*["']?(?P<secret>[^\s"'|>{}]{4,})[^\n]*\n(?:[ \t]+[^\n]*\n)*?[ \t]*kind:[ \t]*["']?Secret\b"#,
        entropy: 0.0,
        class: Class::Assignment,
    },
    // The same for JSON: `"kind": "Secret"` before the data in one object
    // (or `kubectl patch secret`), or right after the data object as
    // kubectl sorts the keys.
    Rule {
        id: "kubernetes-secret-json",
        description: "a value under a Kubernetes Secret's data or stringData, as JSON (also in kubectl patch secret)",
        keywords: &["\"secret\"", "patch secret"],
        pattern: r#"(?:"kind"\s*:\s*"Secret"\s*,\s*(?:"[\w.-]+"\s*:\s*(?:"[^"]*"|\{(?:[^{}]|\{[^{}]*\})*\})\s*,\s*)*?|\bpatch[ \t]+secret\b[^\n]*?)"(?:data|stringData)"\s*:\s*\{\s*"[\w.-]+"\s*:\s*"(?P<secret>[^"\s]{4,})""#,
        entropy: 0.0,
        class: Class::Assignment,
    },
    Rule {
        id: "kubectl-secret-json",
        description: "a value under a Kubernetes Secret's data as kubectl get -o json prints it (data before kind)",
        keywords: &["\"secret\""],
        pattern: r#""(?:data|stringData)"\s*:\s*\{\s*"[\w.-]+"\s*:\s*"(?P<secret>[^"\s]{4,})"(?:\s*,\s*"[\w.-]+"\s*:\s*"[^"]*")*\s*\}\s*,\s*"kind"\s*:\s*"Secret""#,
        entropy: 0.0,
        class: Class::Assignment,
    },
    Rule {
        id: "kubeconfig-token",
        description: "a kubeconfig user's bearer token",
        keywords: &["token"],
        pattern: r#"(?m)^[ \t-]*(?:token|id-token|refresh-token|access-token)["']?[ \t]*:[ \t]*["']?(?P<secret>[A-Za-z0-9._~+/-]{20,}={0,2})["']?[ \t]*$"#,
        entropy: 3.0,
        class: Class::Assignment,
    },
];
