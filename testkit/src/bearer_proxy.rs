//! The stand-in for an authenticating proxy (oauth2-proxy and its kind) in
//! front of the console in proxy mode: a loopback reverse proxy that sets
//! `Authorization: Bearer <token>` on every request it forwards — what the
//! real proxy does once the person signed in with the cluster's OIDC
//! issuer. A browser cannot set that header itself (WebDriver has no way
//! to), so the browser tests talk to the console through this.
//!
//! It forwards the request as it came (method, path, the `Host` the browser
//! sent — oauth2-proxy passes the Host header on by default —, body) and
//! streams the answer back as it arrives, so Server-Sent Events pass.
//! Whatever `Authorization` the client sent is dropped first: behind a
//! real proxy the person cannot choose the token. Dropping the proxy stops
//! it and every connection it holds.

use std::convert::Infallible;

use anyhow::{Context, Result};
use http::header::{AUTHORIZATION, HeaderValue};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

type Body = UnsyncBoxBody<Bytes, hyper::Error>;

/// A running stand-in proxy on a free loopback port; stopped on drop.
pub struct BearerProxy {
    url: String,
    accept: JoinHandle<()>,
}

/// Where requests go and with which token.
#[derive(Clone)]
struct Forward {
    upstream: Uri,
    bearer: Option<HeaderValue>,
    client: Client<HttpConnector, Incoming>,
}

impl BearerProxy {
    /// Forwards to `upstream` (`http://host:port`) with `Authorization:
    /// Bearer <token>` on every request.
    pub async fn start(upstream: &str, token: &str) -> Result<Self> {
        let bearer = HeaderValue::from_str(&format!("Bearer {token}"))
            .context("the token is not a valid header value")?;
        Self::spawn(upstream, Some(bearer)).await
    }

    /// Forwards to `upstream` without any `Authorization` (a person the
    /// proxy let through without a token: a misconfigured proxy).
    pub async fn start_without_token(upstream: &str) -> Result<Self> {
        Self::spawn(upstream, None).await
    }

    async fn spawn(upstream: &str, bearer: Option<HeaderValue>) -> Result<Self> {
        let upstream: Uri = upstream
            .parse()
            .with_context(|| format!("upstream {upstream:?} is not a URL"))?;
        anyhow::ensure!(
            upstream.scheme_str() == Some("http") && upstream.authority().is_some(),
            "upstream {upstream} must be http://host:port"
        );
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let forward = Forward {
            upstream,
            bearer,
            client: Client::builder(TokioExecutor::new()).build(HttpConnector::new()),
        };
        let accept = tokio::spawn(accept_loop(listener, forward));
        Ok(Self { url, accept })
    }

    /// `http://127.0.0.1:<port>`: where the browser goes.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for BearerProxy {
    fn drop(&mut self) {
        // The connections are in the loop's JoinSet: they end with it.
        self.accept.abort();
    }
}

async fn accept_loop(listener: TcpListener, forward: Forward) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let forward = forward.clone();
        connections.spawn(async move {
            let service = service_fn(move |request| {
                let forward = forward.clone();
                async move { Ok::<_, Infallible>(forward.relay(request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        // Reap the finished ones so the set does not grow.
        while connections.try_join_next().is_some() {}
    }
}

impl Forward {
    /// The upstream's answer, or 502 saying why there is none.
    async fn relay(&self, request: Request<Incoming>) -> Response<Body> {
        match self.send(request).await {
            Ok(answer) => answer.map(|b| b.boxed_unsync()),
            Err(e) => {
                let text = format!("bearer proxy: the upstream did not answer: {e:#}\n");
                let mut answer = Response::new(
                    Full::new(Bytes::from(text))
                        .map_err(|never| match never {})
                        .boxed_unsync(),
                );
                *answer.status_mut() = StatusCode::BAD_GATEWAY;
                answer
            }
        }
    }

    async fn send(&self, request: Request<Incoming>) -> Result<Response<Incoming>> {
        let (mut parts, body) = request.into_parts();
        parts.uri = upstream_uri(&self.upstream, &parts.uri)?;
        parts.headers.remove(AUTHORIZATION);
        if let Some(bearer) = &self.bearer {
            parts.headers.insert(AUTHORIZATION, bearer.clone());
        }
        Ok(self
            .client
            .request(Request::from_parts(parts, body))
            .await?)
    }
}

/// The upstream's URI for a request's path and query.
fn upstream_uri(upstream: &Uri, request: &Uri) -> Result<Uri> {
    let path = request.path_and_query().map_or("/", |p| p.as_str());
    let authority = upstream.authority().map(|a| a.as_str()).unwrap_or_default();
    format!("http://{authority}{path}")
        .parse()
        .with_context(|| format!("cannot forward {path:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_keeps_its_path_and_query_on_the_upstream() {
        let upstream: Uri = "http://127.0.0.1:8080".parse().unwrap();
        let cases = [
            ("/", "http://127.0.0.1:8080/"),
            (
                "/ns/a/live?project=p",
                "http://127.0.0.1:8080/ns/a/live?project=p",
            ),
            ("http://proxy:1/x?y=1", "http://127.0.0.1:8080/x?y=1"),
        ];
        for (request, want) in cases {
            let request: Uri = request.parse().unwrap();
            assert_eq!(upstream_uri(&upstream, &request).unwrap().to_string(), want);
        }
    }
}
