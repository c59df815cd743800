//! How a hook (and `handoff rescue`) reaches handoff, calling the same tools
//! an agent calls:
//!
//! - **the bridge over HTTP(S)** when `HANDOFF_MCP_URL` is set, with the
//!   bearer token of `HANDOFF_TOKEN`, else of the file `HANDOFF_TOKEN_FILE`,
//!   read again at every call (a projected ServiceAccount token rotates),
//!   and the profile header from `HANDOFF_PROFILE`; an `https://` bridge is
//!   verified against the CA certificates of `HANDOFF_CA_FILE` (PEM), else
//!   the system's. The bridge answers a stateless
//!   JSON-RPC `tools/call` POST, so one request per call is the whole
//!   protocol: a minimal client over hyper (already in the build for
//!   kube's client) rather than rmcp's streamable-HTTP client, whose
//!   session handshake and extra HTTP stack a one-shot hook does not need;
//! - **in process** otherwise, with the kubeconfig or in-cluster identity,
//!   exactly as `handoff mcp --stdio` acts: the same dispatch
//!   (`handoff_bridge::call::Services::dispatch`: the profile must see the
//!   tool, the handler gets the bridge's call timeout), RBAC as the caller.
//!
//! Every network step is bounded ([`CONNECT_TIMEOUT`], the apiserver
//! timeouts and call timeout of the stdio bridge, and the caller's overall
//! deadline), so a
//! hook never hangs its agent.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};
use serde_json::{Value, json};

use handoff_bridge::auth::{self, Caller, PROFILE_HEADER};
use handoff_bridge::call::{OfferSettings, Services, Unanswered, timed_out};
use handoff_bridge::profiles::Profile;
use handoff_bridge::tools;
use handoff_core::offers::DEFAULT_ACTIVE_SELECTOR;
use handoff_kube::settings::{Budgets, READ_TIMEOUT};

/// How long connecting to the bridge may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The bridge's URL.
pub const URL_VAR: &str = "HANDOFF_MCP_URL";
/// A bearer token.
pub const TOKEN_VAR: &str = "HANDOFF_TOKEN";
/// A file holding the bearer token (read at every call).
pub const TOKEN_FILE_VAR: &str = "HANDOFF_TOKEN_FILE";
/// The CA certificates (PEM) an `https://` bridge is verified against.
pub const CA_FILE_VAR: &str = "HANDOFF_CA_FILE";

/// Where the bearer token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Value(String),
    File(PathBuf),
}

impl Token {
    /// The token now (a file is read again each time).
    fn current(&self) -> anyhow::Result<String> {
        match self {
            Token::Value(v) => Ok(v.trim().to_owned()),
            Token::File(path) => {
                let token = std::fs::read_to_string(path)
                    .with_context(|| format!("{TOKEN_FILE_VAR} {}", path.display()))?;
                let token = token.trim();
                if token.is_empty() {
                    bail!("{TOKEN_FILE_VAR} {} is empty", path.display());
                }
                Ok(token.to_owned())
            }
        }
    }
}

/// Pure: the bridge to call, from the environment; `None` means in process.
pub fn bridge_from(
    var: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<Option<(String, Token)>> {
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    let Some(url) = set(URL_VAR) else {
        return Ok(None);
    };
    if !url.starts_with("http://") && !url.starts_with("https://") {
        bail!("{URL_VAR}: an http:// or https:// URL of the bridge's /mcp; got {url:?}");
    }
    let token = match (set(TOKEN_VAR), set(TOKEN_FILE_VAR)) {
        (Some(token), _) => Token::Value(token),
        (None, Some(file)) => Token::File(PathBuf::from(file)),
        (None, None) => bail!("{URL_VAR} is set, but neither {TOKEN_VAR} nor {TOKEN_FILE_VAR} is"),
    };
    Ok(Some((url, token)))
}

/// A way to call the handoff tools.
pub enum Link {
    Http {
        client: Box<Client<HttpsConnector<HttpConnector>, Full<Bytes>>>,
        url: String,
        token: Token,
        profile: String,
    },
    Local {
        caller: Box<Caller>,
    },
}

impl Link {
    /// The bridge of the environment, else the kubeconfig or in-cluster
    /// identity in `namespace` (default: the kubeconfig's).
    pub async fn from_env(namespace: Option<&str>, profile: &str) -> anyhow::Result<Self> {
        if let Some((url, token)) = bridge_from(|name| std::env::var(name).ok())? {
            let ca_file = std::env::var_os(CA_FILE_VAR).filter(|v| !v.is_empty());
            return Self::http(url, token, profile, ca_file.as_deref().map(Path::new));
        }
        let config = handoff_kube::proxy::infer().await?;
        let namespace = namespace
            .map(str::to_owned)
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = kube::Client::try_from(auth::with_timeouts(config))?;
        Ok(Link::Local {
            caller: Box::new(Caller::new(client, &namespace, Profile::new(profile))),
        })
    }

    /// The bridge at `url` (its `/mcp` route), called with `token` and the
    /// profile header `profile`; an `https://` bridge is verified against
    /// the CA certificates of `ca_file` (PEM), else the system's.
    pub fn http(
        url: String,
        token: Token,
        profile: &str,
        ca_file: Option<&Path>,
    ) -> anyhow::Result<Self> {
        let mut http = HttpConnector::new();
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        http.enforce_http(false);
        let builder = match ca_file {
            Some(path) => HttpsConnectorBuilder::new().with_tls_config(tls_config(path)?),
            None => HttpsConnectorBuilder::new()
                .with_provider_and_native_roots(Arc::new(rustls::crypto::ring::default_provider()))
                .context("the system's CA certificates")?,
        };
        let connector = builder.https_or_http().enable_http1().wrap_connector(http);
        let client = Box::new(Client::builder(TokioExecutor::new()).build(connector));
        Ok(Link::Http {
            client,
            url,
            token,
            profile: profile.trim().to_owned(),
        })
    }

    /// Calls `tool` with `args`: its structured result, or an error with
    /// the tool's message.
    pub async fn call(&self, tool: &str, args: Value) -> anyhow::Result<Value> {
        match self {
            Link::Http {
                client,
                url,
                token,
                profile,
            } => {
                let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": tool, "arguments": args}});
                let mut request = http::Request::post(url.as_str())
                    .header(
                        http::header::AUTHORIZATION,
                        format!("Bearer {}", token.current()?),
                    )
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .header(http::header::ACCEPT, "application/json, text/event-stream");
                if !profile.is_empty() {
                    request = request.header(PROFILE_HEADER, profile.as_str());
                }
                let request = request.body(Full::new(Bytes::from(body.to_string())))?;
                let response = client.request(request).await.map_err(|e| {
                    anyhow::Error::new(e).context(format!("the bridge at {url} is unreachable"))
                })?;
                let status = response.status();
                let sse = response
                    .headers()
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.starts_with("text/event-stream"));
                let bytes = response.into_body().collect().await?.to_bytes();
                if !status.is_success() {
                    bail!(
                        "the bridge at {url} answered {status}: {}",
                        String::from_utf8_lossy(&bytes).trim()
                    );
                }
                result(tool, &answer(&bytes, sse)?)
            }
            Link::Local { caller } => {
                let not_seen = || {
                    anyhow!(
                        "profile {:?} does not see {tool} (set HANDOFF_PROFILE or --profile)",
                        caller.profile().as_str()
                    )
                };
                let found = tools::find(tool).ok_or_else(not_seen)?;
                let Value::Object(args) = args else {
                    bail!("{tool}: the arguments are not an object");
                };
                let services = Services {
                    mirror: None,
                    offers: OfferSettings {
                        acting: None,
                        active_selector: DEFAULT_ACTIVE_SELECTOR.to_owned(),
                    },
                    budgets: Arc::new(Budgets::new(caller.client().clone(), READ_TIMEOUT)),
                };
                match services.dispatch(found, caller, Some(args)).await {
                    Ok((structured, _)) => Ok(structured),
                    Err(Unanswered::Hidden(_)) => Err(not_seen()),
                    Err(Unanswered::Failed(e)) => Err(anyhow!("{tool}: {e}")),
                    Err(Unanswered::TimedOut) => Err(anyhow!("{tool}: {}", timed_out())),
                }
            }
        }
    }
}

/// A TLS client configuration trusting the CA certificates of the PEM file
/// at `path`.
fn tls_config(path: &Path) -> anyhow::Result<ClientConfig> {
    let what = || format!("{CA_FILE_VAR} {}", path.display());
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_file_iter(path).with_context(what)? {
        roots
            .add(certificate.with_context(what)?)
            .with_context(what)?;
    }
    if roots.is_empty() {
        bail!("{}: holds no PEM certificate", what());
    }
    Ok(
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// Pure: the JSON-RPC answer in a response body, plain JSON or an SSE
/// stream (the `data:` event that answers request 1).
pub fn answer(bytes: &[u8], sse: bool) -> anyhow::Result<Value> {
    if !sse {
        return serde_json::from_slice(bytes).context("the bridge's answer is not JSON");
    }
    let text = String::from_utf8_lossy(bytes);
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|v| v["id"] == json!(1))
        .ok_or_else(|| anyhow!("the bridge's event stream holds no answer"))
}

/// Pure: the structured content of a `tools/call` answer, or an error with
/// the JSON-RPC or tool error's message.
pub fn result(tool: &str, answer: &Value) -> anyhow::Result<Value> {
    if let Some(message) = answer["error"]["message"].as_str() {
        bail!("{tool}: {message}");
    }
    let result = &answer["result"];
    if result["isError"] == json!(true) {
        let text: Vec<&str> = result["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["text"].as_str())
            .collect();
        bail!("{tool}: {}", text.join(" "));
    }
    match &result["structuredContent"] {
        Value::Null => bail!("{tool}: the answer has no structured content: {answer}"),
        structured => Ok(structured.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn the_bridge_comes_from_the_environment() {
        const URL: &str = "http://bridge:8080/mcp";
        let url = URL;
        assert_eq!(bridge_from(vars(&[])).unwrap(), None);
        assert_eq!(
            bridge_from(vars(&[
                (URL_VAR, URL),
                (TOKEN_VAR, "t"),
                (TOKEN_FILE_VAR, "/f")
            ]))
            .unwrap(),
            Some((url.to_owned(), Token::Value("t".into()))),
            "a token value wins over a file"
        );
        assert_eq!(
            bridge_from(vars(&[(URL_VAR, URL), (TOKEN_FILE_VAR, "/f")])).unwrap(),
            Some((url.to_owned(), Token::File("/f".into())))
        );
        let errors = [
            (
                vars(&[(URL_VAR, URL)]),
                "neither HANDOFF_TOKEN nor HANDOFF_TOKEN_FILE",
            ),
            (
                vars(&[(URL_VAR, "bridge:8080/mcp"), (TOKEN_VAR, "t")]),
                "an http:// or https:// URL",
            ),
        ];
        for (env, want) in errors {
            let err = bridge_from(env).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn answers_in_json_or_an_event_stream() {
        let plain = br#"{"jsonrpc":"2.0","id":1,"result":{"isError":false,"structuredContent":{"found":false}}}"#;
        let sse = format!(
            "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}}\n\ndata: {}\n\n",
            String::from_utf8_lossy(plain)
        );
        for (bytes, is_sse) in [(plain.to_vec(), false), (sse.into_bytes(), true)] {
            let a = answer(&bytes, is_sse).unwrap();
            assert_eq!(result("get_handoff", &a).unwrap(), json!({"found": false}));
        }
        assert!(answer(b"data: nothing\n", true).is_err());
    }

    #[test]
    fn tool_and_protocol_errors_carry_their_message() {
        let cases = [
            (
                json!({"result": {"isError": true, "content": [{"type": "text", "text": "invalid `project`"}]}}),
                "write_handoff: invalid `project`",
            ),
            (
                json!({"error": {"code": -32602, "message": "unknown tool"}}),
                "write_handoff: unknown tool",
            ),
            (
                json!({"result": {"isError": false}}),
                "no structured content",
            ),
        ];
        for (a, want) in cases {
            let err = result("write_handoff", &a).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
        }
    }
}
