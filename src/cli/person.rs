//! The person's path of `handoff history | diff | search`: the reads go
//! through the bridge (`handoff mcp --listen`, reached over a
//! port-forward) as the person, with the bearer token of their own
//! kubeconfig, so the bridge's access review (a SelfSubjectAccessReview
//! made with that token, before any read of the mirror) and thus RBAC
//! decide, as for agents. No database credentials on the laptop.
//!
//! The token is the one kube-rs would send to the apiserver: the
//! kubeconfig user's `token`, `tokenFile`, exec credential plugin (OIDC,
//! cloud logins: the ExecCredential protocol, run by kube-rs) or auth
//! provider. kube-rs keeps its authentication private but exposes it as a
//! tower layer ([`ConfigExt::auth_layer`]); the layer is applied to a
//! request that goes nowhere and the `Authorization` header it gets is
//! read back, so every way kube-rs authenticates works here unchanged, and
//! no credential protocol is written twice. A user that proves itself
//! with a client certificate only has nothing to forward (the
//! certificate's key signs the TLS handshake with the apiserver, not a
//! request the bridge could pass on): refused, saying what to do.

use std::path::Path;

use anyhow::{Context, anyhow, bail};
use http_body_util::Empty;
use hyper::body::Bytes;
use kube::client::ConfigExt;
use serde_json::Value;
use tower::{Layer, ServiceExt};

use crate::hook::link::{Link, Token};

/// The profile the person's calls name (the tools they call are every
/// writer profile's; `refine` is the console's, the groomer's view).
const PROFILE: &str = "refine";

/// The port-forward that reaches the bridge of `config/default`.
pub(super) const PORT_FORWARD: &str =
    "kubectl -n handoff-system port-forward svc/handoff-bridge 8080:8080";

/// The bridge, called as the person in one namespace.
pub(super) struct Person {
    link: Link,
    url: String,
    command: &'static str,
}

impl Person {
    /// The bridge at `bridge` (its base URL, or its `/mcp` URL), as the
    /// holder of the token in `token_file`, else of the kubeconfig's, for
    /// `namespace`; `ca_file` verifies an `https://` bridge.
    pub(super) async fn connect(
        command: &'static str,
        bridge: &str,
        namespace: &str,
        token_file: Option<&Path>,
        ca_file: Option<&Path>,
    ) -> anyhow::Result<Self> {
        let url = endpoint(bridge, namespace)?;
        let token = match token_file {
            Some(path) => token_in_file(path)?,
            None => {
                let config = handoff_kube::proxy::infer()
                    .await
                    .context("reading your kubeconfig (for the token to send the bridge)")?;
                bearer(kubeconfig_authorization(&config).await?.as_deref())?
            }
        };
        let link = Link::http(url.clone(), Token::Value(token), PROFILE, ca_file)?;
        Ok(Self { link, url, command })
    }

    /// Calls `tool`: its structured result, or an error in our words (a
    /// refusal keeps the bridge's text: who, which verb, which namespace).
    pub(super) async fn call(&self, tool: &str, args: Value) -> anyhow::Result<Value> {
        self.link.call(tool, args).await.map_err(|e| {
            let text = format!("{e:#}");
            if text.contains("is unreachable") {
                anyhow!(
                    "`handoff {}`: {text}; is a port-forward running? e.g. `{PORT_FORWARD}`, \
                     then --bridge http://localhost:8080",
                    self.command
                )
            } else if text.contains("may not ") || text.contains("forbidden") {
                anyhow!(
                    "`handoff {}` refused you (the identity of the token sent) at the bridge {}: {text}",
                    self.command,
                    self.url
                )
            } else {
                anyhow!(
                    "`handoff {}` through the bridge at {}: {text}",
                    self.command,
                    self.url
                )
            }
        })
    }
}

/// Pure: the bridge's route for `namespace`, from the URL given (the
/// bridge's base URL, with or without its `/mcp` path).
pub(super) fn endpoint(given: &str, namespace: &str) -> anyhow::Result<String> {
    let invalid = |problem: &str| {
        anyhow!(
            "invalid --bridge / HANDOFF_BRIDGE_URL: the bridge's http:// or https:// URL (e.g. \
             http://localhost:8080 after `{PORT_FORWARD}`); {problem}: {given:?}"
        )
    };
    let root = given.trim().trim_end_matches('/');
    let root = root.strip_suffix("/mcp").unwrap_or(root);
    let uri: http::Uri = root.parse().map_err(|_| invalid("not a URL"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.authority().is_none() {
        return Err(invalid("not an http:// or https:// URL with a host"));
    }
    if uri.path().contains("/mcp/") {
        return Err(invalid(
            "give it without /mcp/ns/…: the namespace comes from -n or the kubeconfig",
        ));
    }
    Ok(format!("{root}/mcp/ns/{namespace}"))
}

/// The token in `path`, trimmed; an empty file is an error.
fn token_in_file(path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--token-file {}: cannot read it", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        bail!(
            "--token-file {}: the file is empty (rule: it holds one bearer token)",
            path.display()
        );
    }
    Ok(token.to_owned())
}

/// The `Authorization` header kube-rs would send to the apiserver with
/// `config` (running an exec plugin or refreshing a token as it would);
/// `None` when it authenticates with a client certificate only.
async fn kubeconfig_authorization(config: &kube::Config) -> anyhow::Result<Option<String>> {
    let what = "your kubeconfig's credentials (for the token to send the bridge)";
    let Some(layer) = config.auth_layer().context(what)? else {
        return Ok(None);
    };
    let read_back = tower::service_fn(|request: http::Request<Empty<Bytes>>| async move {
        let header = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        Ok::<_, tower::BoxError>(http::Response::new(header))
    });
    layer
        .layer(read_back)
        .oneshot(http::Request::new(Empty::new()))
        .await
        .map(http::Response::into_body)
        .map_err(|e| anyhow!("{what}: {e}"))
}

/// Pure: the bearer token of an `Authorization` header, or why there is
/// none to forward.
fn bearer(authorization: Option<&str>) -> anyhow::Result<String> {
    let what_to_do = "pass --token-file PATH (a file holding a bearer token), or use a \
                      kubeconfig context whose user has a token, a tokenFile or an exec plugin \
                      (OIDC, a cloud login)";
    match authorization.map(|h| h.split_once(' ').unwrap_or((h, ""))) {
        Some((scheme, token))
            if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() =>
        {
            Ok(token.trim().to_owned())
        }
        Some((scheme, _)) => bail!(
            "your kubeconfig's user authenticates with {scheme} credentials, which the bridge does \
             not accept (it takes a bearer token it can review with the apiserver): {what_to_do}"
        ),
        None => bail!(
            "your kubeconfig's user authenticates with a client certificate only, which cannot be \
             forwarded to the bridge (the certificate proves who you are on your own TLS \
             connection to the apiserver; the bridge needs a bearer token to act as you): \
             {what_to_do}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_route_names_the_namespace() {
        let cases = [
            (
                "http://localhost:8080",
                "team-a",
                Ok("http://localhost:8080/mcp/ns/team-a"),
            ),
            (
                "http://localhost:8080/",
                "a",
                Ok("http://localhost:8080/mcp/ns/a"),
            ),
            (
                "http://127.0.0.1:9/mcp",
                "a",
                Ok("http://127.0.0.1:9/mcp/ns/a"),
            ),
            (
                "https://bridge.example/mcp/",
                "a",
                Ok("https://bridge.example/mcp/ns/a"),
            ),
            ("localhost:8080", "a", Err("not an http:// or https:// URL")),
            ("ftp://h", "a", Err("not an http:// or https:// URL")),
            ("http://", "a", Err("invalid --bridge")),
            ("http://h/mcp/ns/b", "a", Err("without /mcp/ns/")),
        ];
        for (given, ns, want) in cases {
            match (endpoint(given, ns), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{given}"),
                (Err(e), Err(want)) => {
                    let e = e.to_string();
                    assert!(
                        e.contains(want) && e.contains("HANDOFF_BRIDGE_URL"),
                        "{given}: {e}"
                    );
                }
                (got, want) => panic!("{given}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn only_a_bearer_token_is_forwarded() {
        assert_eq!(bearer(Some("Bearer abc")).unwrap(), "abc");
        assert_eq!(bearer(Some("bearer  abc ")).unwrap(), "abc");
        for (header, want) in [
            (None, "client certificate only"),
            (Some("Basic dTpw"), "Basic credentials"),
            (Some("Bearer "), "Bearer credentials"),
        ] {
            let e = bearer(header).unwrap_err().to_string();
            assert!(e.contains(want) && e.contains("--token-file PATH"), "{e}");
        }
    }

    async fn authorization_of(kubeconfig: &str) -> anyhow::Result<Option<String>> {
        let kubeconfig: kube::config::Kubeconfig = serde_saphyr::from_str(kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await?;
        kubeconfig_authorization(&config).await
    }

    fn kubeconfig(user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    \
             server: https://127.0.0.1:6443\ncontexts:\n- name: c\n  context:\n    cluster: k\n    \
             user: u\nusers:\n- name: u\n  user:\n{user}"
        )
    }

    /// Each way a kubeconfig user authenticates, as kube-rs sends it: a
    /// token, a token file, an exec plugin speaking the ExecCredential
    /// protocol (a real script), and a client certificate (nothing).
    #[tokio::test]
    async fn the_kubeconfig_token_is_the_one_kube_sends() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "from-file").unwrap();
        let plugin = dir.path().join("login.sh");
        std::fs::write(
            &plugin,
            "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\
             \"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-exec\"}}'\n",
        )
        .unwrap();
        let mut mode = std::fs::metadata(&plugin).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
        std::fs::set_permissions(&plugin, mode).unwrap();
        let cert = handoff_local::ServerTls::generate("t", &["127.0.0.1"]).unwrap();
        let b64 = |pem: &str| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode(pem)
        };
        let cases = [
            (
                "    token: from-value\n".to_owned(),
                Some("Bearer from-value"),
            ),
            (
                format!("    tokenFile: {}\n", file.display()),
                Some("Bearer from-file"),
            ),
            (
                format!(
                    "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      \
                     command: {}\n      interactiveMode: Never\n",
                    plugin.display()
                ),
                Some("Bearer from-exec"),
            ),
            (
                format!(
                    "    client-certificate-data: {}\n    client-key-data: {}\n",
                    b64(&cert.cert),
                    b64(&cert.key)
                ),
                None,
            ),
        ];
        for (user, want) in cases {
            let got = authorization_of(&kubeconfig(&user)).await.unwrap();
            assert_eq!(got.as_deref(), want, "{user}");
        }
    }
}
