//! A `handoff mcp --listen` process on a free loopback port, for the
//! integration suites and the benchmarks (a real separate process, as the
//! bridge runs in a cluster). Its stderr (the JSON logs) is kept in a file
//! so tests can inspect what it logged.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A running HTTP bridge; killed on drop.
pub struct BridgeProcess {
    child: Child,
    url: String,
    log: tempfile::NamedTempFile,
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
        Self::start_with_env(binary, kubeconfig, namespace, extra, &[])
    }

    /// [`BridgeProcess::start`] with extra environment variables (e.g. `RUST_LOG`).
    pub fn start_with_env(
        binary: &Path,
        kubeconfig: &Path,
        namespace: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let mut child = Command::new(binary)
            .args(["mcp", "--listen", "127.0.0.1:0", "--namespace", namespace])
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| anyhow::anyhow!("the bridge's stderr is not piped"))?;
        let log = tempfile::NamedTempFile::new()?;
        let mut sink = log.reopen()?;
        let mut lines = BufReader::new(stderr).lines();
        let mut url = None;
        for line in lines.by_ref().map_while(Result::ok) {
            let _ = writeln!(sink, "{line}");
            if let Some(found) = served_url(&line) {
                url = Some(found);
                break;
            }
        }
        let Some(url) = url else {
            let status = child.wait()?;
            anyhow::bail!("the bridge exited ({status}) before printing its address");
        };
        // Keep draining stderr into the log so the bridge never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let _ = writeln!(sink, "{line}");
            }
        });
        Ok(Self { child, url, log })
    }

    /// `http://127.0.0.1:<port>/mcp`
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The process id (for memory readings).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the bridge logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
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
