//! A minimal keep-alive HTTP/1.1 client for MCP `tools/call` requests to a
//! bridge, for benchmarks: it adds almost nothing to what is measured (the
//! bridge answers stateless requests with a Content-Length JSON body).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use serde_json::Value;

/// One keep-alive connection to a bridge's `/mcp`.
pub struct McpHttp {
    stream: BufReader<TcpStream>,
    host: String,
    path: String,
    token: String,
    profile: String,
}

impl McpHttp {
    /// Connects to `url` (`http://host:port/mcp`), authenticating with
    /// `token` and naming `profile` in the profile header.
    pub fn connect(url: &str, token: &str, profile: &str) -> anyhow::Result<Self> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| anyhow::anyhow!("http URL expected: {url}"))?;
        let (host, path) = match rest.split_once('/') {
            Some((h, p)) => (h.to_owned(), format!("/{p}")),
            None => (rest.to_owned(), "/".to_owned()),
        };
        let stream = TcpStream::connect(&host)?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream: BufReader::new(stream),
            host,
            path,
            token: token.into(),
            profile: profile.into(),
        })
    }

    /// Calls a tool; the structured content of a successful result, or an
    /// error with the tool's message.
    pub fn call(&mut self, tool: &str, arguments: Value) -> anyhow::Result<Value> {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}})
        .to_string();
        let request = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nX-Handoff-Profile: {}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.path,
            self.host,
            self.token,
            self.profile,
            body.len()
        );
        self.stream.get_mut().write_all(request.as_bytes())?;
        let mut status = String::new();
        self.stream.read_line(&mut status)?;
        anyhow::ensure!(
            status.contains(" 200 "),
            "the bridge answered {}",
            status.trim()
        );
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line)?;
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse()?;
            }
        }
        let mut answer = vec![0; length];
        self.stream.read_exact(&mut answer)?;
        let answer: Value = serde_json::from_slice(&answer)?;
        let result = &answer["result"];
        anyhow::ensure!(
            result["isError"] == Value::Bool(false),
            "{tool} failed: {answer}"
        );
        Ok(result["structuredContent"].clone())
    }
}
