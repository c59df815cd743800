//! Raw HTTP/1.1 against a bridge, for the hostile-input suites and the
//! benchmarks: one request per connection (`Connection: close`, read to
//! the end), bounded floods of requests with invalid tokens, and reading
//! the bridge's metrics. Everything stays on the loopback address it is
//! given.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// `host:port` of an `http://` or `https://` URL.
pub fn addr_of(url: &str) -> anyhow::Result<String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| anyhow::anyhow!("http(s) URL expected: {url}"))?;
    Ok(rest.split('/').next().unwrap_or(rest).to_owned())
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Header names (lower case) and values.
    pub headers: Vec<(String, String)>,
    /// The body as text (lossy).
    pub body: String,
}

impl Answer {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Parses a whole HTTP/1.1 answer (a Content-Length or close-delimited body).
    pub fn parse(bytes: &[u8]) -> anyhow::Result<Self> {
        let text = String::from_utf8_lossy(bytes);
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| anyhow::anyhow!("no complete answer head: {text:?}"))?;
        let mut lines = head.lines();
        let status_line = lines.next().unwrap_or_default();
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("bad status line {status_line:?}"))?;
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        Ok(Self {
            status,
            headers,
            body: body.to_owned(),
        })
    }
}

/// A `POST /mcp` carrying `body`, with `token` as a bearer token when
/// given, that closes the connection after the answer.
pub fn mcp_post(addr: &str, token: Option<&str>, body: &str) -> Vec<u8> {
    mcp_post_as(addr, token, None, body)
}

/// [`mcp_post`] with `profile` in `X-Handoff-Profile` when given (a caller
/// whose ServiceAccount names no profile, such as a static token's user,
/// sees no tool without it).
pub fn mcp_post_as(addr: &str, token: Option<&str>, profile: Option<&str>, body: &str) -> Vec<u8> {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let profile = profile
        .map(|p| format!("X-Handoff-Profile: {p}\r\n"))
        .unwrap_or_default();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\n{auth}{profile}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A `tools/call` JSON-RPC body.
pub fn tool_call(tool: &str, arguments: serde_json::Value) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}})
    .to_string()
}

/// Writes `request` on `stream` and reads the answer to the end (a TLS
/// peer that closes without `close_notify` after its answer is an end too).
pub async fn exchange_on<S>(stream: &mut S, request: &[u8]) -> anyhow::Result<Answer>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    stream.write_all(request).await?;
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !answer.is_empty() => {}
        Err(e) => return Err(e.into()),
    }
    Answer::parse(&answer)
}

/// One request on a new connection to `addr`.
pub async fn exchange(addr: &str, request: &[u8]) -> anyhow::Result<Answer> {
    let mut stream = TcpStream::connect(addr).await?;
    exchange_on(&mut stream, request).await
}

/// What a flood got back.
#[derive(Debug, Default)]
pub struct Tally {
    /// Answers by status code.
    pub statuses: BTreeMap<u16, usize>,
    /// Requests that got no answer (connection errors).
    pub failures: usize,
    /// The first failure, if any.
    pub first_failure: Option<String>,
}

/// `count` requests to `addr`, `in_flight` at a time, each a `POST /mcp`
/// on a connection of its own with the token `token(i)`.
pub async fn flood(
    addr: &str,
    count: usize,
    in_flight: usize,
    token: impl Fn(usize) -> String,
) -> Tally {
    let slots = Arc::new(tokio::sync::Semaphore::new(in_flight.max(1)));
    let body = tool_call("get_handoff", serde_json::json!({"handoff_key": "k"}));
    let mut requests = tokio::task::JoinSet::new();
    for i in 0..count {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            break;
        };
        let request = mcp_post(addr, Some(&token(i)), &body);
        let addr = addr.to_owned();
        requests.spawn(async move {
            let answer = exchange(&addr, &request).await;
            drop(slot);
            answer
        });
    }
    let mut tally = Tally::default();
    while let Some(joined) = requests.join_next().await {
        match joined.map_err(anyhow::Error::from).and_then(|a| a) {
            Ok(answer) => *tally.statuses.entry(answer.status).or_default() += 1,
            Err(err) => {
                tally.failures += 1;
                tally
                    .first_failure
                    .get_or_insert_with(|| format!("{err:#}"));
            }
        }
    }
    tally
}

/// `GET path` of `addr` on a new connection, closed after the answer.
pub async fn get(addr: &str, path: &str) -> anyhow::Result<Answer> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    exchange(addr, request.as_bytes()).await
}

/// The text of `http://addr/metrics`.
pub async fn scrape(addr: &str) -> anyhow::Result<String> {
    let answer = get(addr, "/metrics").await?;
    anyhow::ensure!(answer.status == 200, "metrics answered {}", answer.status);
    Ok(answer.body)
}

/// The value of one series (`name{labels}` as exposed) in a metrics text;
/// absent series are 0 (a counter not yet incremented is not exposed).
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_urls_and_metrics_are_read() {
        let answer = Answer::parse(
            b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 4\r\n\r\nbusy",
        )
        .expect("parses");
        assert_eq!(answer.status, 503);
        assert_eq!(answer.header("Retry-After"), Some("1"));
        assert_eq!(answer.body, "busy");
        assert!(Answer::parse(b"HTTP/1.1 200 OK\r\n").is_err());
        assert_eq!(
            addr_of("https://127.0.0.1:8443/mcp").expect("url"),
            "127.0.0.1:8443"
        );
        assert!(addr_of("ftp://x").is_err());
        let text = "a_total{result=\"ok\"} 3\na_total{result=\"rejected\"} 5\n";
        assert_eq!(metric(text, "a_total{result=\"rejected\"}"), 5.0);
        assert_eq!(metric(text, "a_total{result=\"unavailable\"}"), 0.0);
    }
}
