//! A `handoff mcp --listen` process on a free loopback port, for the
//! integration suites and the benchmarks (a real separate process, as the
//! bridge runs in a cluster).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A running HTTP bridge; killed on drop.
pub struct BridgeProcess {
    child: Child,
    url: String,
}

impl BridgeProcess {
    /// Starts `binary mcp --listen 127.0.0.1:0 --namespace <namespace> <extra>`
    /// with `kubeconfig` as its own identity and waits for its address.
    pub fn start(
        binary: &Path,
        kubeconfig: &Path,
        namespace: &str,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        let mut child = Command::new(binary)
            .args(["mcp", "--listen", "127.0.0.1:0", "--namespace", namespace])
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| anyhow::anyhow!("the bridge's stderr is not piped"))?;
        let mut lines = BufReader::new(stderr).lines();
        let url = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| served_url(&l));
        let Some(url) = url else {
            let status = child.wait()?;
            anyhow::bail!("the bridge exited ({status}) before printing its address");
        };
        // Keep draining stderr so the bridge never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(Self { child, url })
    }

    /// `http://127.0.0.1:<port>/mcp`
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// The URL in the bridge's `handoff mcp: serving <url> …` line.
fn served_url(line: &str) -> Option<String> {
    Some(
        line.split_once("serving ")?
            .1
            .split_whitespace()
            .next()?
            .to_owned(),
    )
}

impl Drop for BridgeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_served_line_is_parsed() {
        let line = "handoff mcp: serving http://127.0.0.1:4242/mcp (namespace ns)";
        assert_eq!(
            super::served_url(line).as_deref(),
            Some("http://127.0.0.1:4242/mcp")
        );
        assert_eq!(super::served_url("{\"level\":\"INFO\"}"), None);
    }
}
