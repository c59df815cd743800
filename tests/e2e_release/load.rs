//! Agents writing continuously while the installation changes under them:
//! writers through the Kubernetes API (as `kubectl` and GitOps write: the
//! webhook admits each one) and writers through the bridge's Service (as
//! agents write: MCP `write_handoff` over HTTP, a new connection per call,
//! as a stateless client would). Nothing is retried: a write either
//! succeeds at the first attempt or counts as failed, and every
//! successful write's handoff must be found afterwards with its last body.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use handoff_core::api::Handoff;
use handoff_testkit::http::{exchange, tool_call};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::watch;

/// The API writers' field manager.
const WRITER: &str = "e2e-release-writer";

/// How long a writer rests between two writes (bounds the load).
const PAUSE: Duration = Duration::from_millis(100);

/// What the writers did.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Writes attempted.
    pub(crate) attempted: usize,
    /// The failed writes' messages (each one is a failure).
    pub(crate) failed: Vec<String>,
    /// Each key written with success and its last body.
    pub(crate) written: BTreeMap<String, String>,
}

impl Tally {
    fn record(&mut self, key: String, body: String, outcome: Result<(), String>) {
        self.attempted += 1;
        match outcome {
            Ok(()) => {
                self.written.insert(key, body);
            }
            Err(e) => self.failed.push(format!("{key}: {e}")),
        }
    }
}

/// Pure: the key and body of writer `writer`'s `n`th write. Every third
/// write rewrites the writer's previous key (an UPDATE), the others create
/// a new key (a CREATE): both kinds of admission are exercised.
pub(crate) fn nth_write(writer: &str, n: usize) -> (String, String) {
    let slot = if n % 3 == 2 { n - 1 } else { n };
    (
        format!("upgrade/{writer}#{slot}"),
        format!("writer {writer}, write {n}"),
    )
}

/// A bridge writer: where the Service answers and the caller's token.
pub(crate) struct BridgeWriter {
    /// `ip:port` of the bridge Service (its ClusterIP: the host is the node).
    pub(crate) addr: String,
    /// The Host header the bridge allows (`--allowed-host`).
    pub(crate) host: String,
    /// A writer agent's ServiceAccount token.
    pub(crate) token: String,
}

/// The way one writer writes.
enum Path {
    /// Server-side apply through the Kubernetes API.
    Api(Api<Handoff>),
    /// `write_handoff` through the bridge.
    Bridge(BridgeWriter),
}

impl Path {
    async fn write(&self, key: &str, body: &str) -> Result<(), String> {
        match self {
            Path::Api(api) => write_by_api(api, key, body).await,
            Path::Bridge(bridge) => write_by_bridge(bridge, key, body).await,
        }
    }
}

/// The writers, running until [`Load::stop`].
pub(crate) struct Load {
    stop: watch::Sender<bool>,
    tally: Arc<Mutex<Tally>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// Starts `api_writers` writers through `handoffs` (the API) and one
    /// through each of `bridges`.
    pub(crate) fn start(
        handoffs: Api<Handoff>,
        api_writers: usize,
        bridges: Vec<BridgeWriter>,
    ) -> Self {
        let (stop, stopped) = watch::channel(false);
        let tally = Arc::new(Mutex::new(Tally::default()));
        let writers = (0..api_writers)
            .map(|i| (format!("api{i}"), Path::Api(handoffs.clone())))
            .chain(
                bridges
                    .into_iter()
                    .enumerate()
                    .map(|(i, bridge)| (format!("mcp{i}"), Path::Bridge(bridge))),
            );
        let mut tasks = Vec::new();
        for (name, path) in writers {
            let (tally, stopped) = (tally.clone(), stopped.clone());
            tasks.push(tokio::spawn(async move {
                let mut n = 0;
                while !*stopped.borrow() {
                    let (key, body) = nth_write(&name, n);
                    let outcome = path.write(&key, &body).await;
                    lock(&tally).record(key, body, outcome);
                    n += 1;
                    tokio::time::sleep(PAUSE).await;
                }
            }));
        }
        Self { stop, tally, tasks }
    }

    /// Writes attempted so far.
    pub(crate) fn attempted(&self) -> usize {
        lock(&self.tally).attempted
    }

    /// Stops the writers, waits for their last write, and tallies.
    pub(crate) async fn stop(self) -> Tally {
        let _ = self.stop.send(true);
        for task in self.tasks {
            if let Err(e) = task.await {
                panic!("a writer panicked: {e}");
            }
        }
        std::mem::take(&mut *lock(&self.tally))
    }
}

fn lock(tally: &Mutex<Tally>) -> std::sync::MutexGuard<'_, Tally> {
    tally.lock().unwrap_or_else(|e| e.into_inner())
}

/// A server-side apply of the key's handoff, as `kubectl apply
/// --server-side` and GitOps write: a CREATE the first time, an UPDATE
/// when the write rewrites the key (never a conflict with the
/// controller's own metadata and status writes).
async fn write_by_api(api: &Api<Handoff>, key: &str, body: &str) -> Result<(), String> {
    let handoff = crate::writes::handoff(key, body);
    let name = handoff.metadata.name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply(WRITER).force(),
        &Patch::Apply(&handoff),
    )
    .await
    .map(drop)
    .map_err(|e| format!("apply: {e}"))
}

/// Pure: the `POST /mcp` of a `write_handoff` call by `bridge`'s agent.
pub(crate) fn bridge_request(bridge: &BridgeWriter, key: &str, body: &str) -> Vec<u8> {
    let call = tool_call(
        "write_handoff",
        json!({"handoff_key": key, "project": "shop", "body": body}),
    );
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{call}",
        bridge.host,
        bridge.token,
        call.len()
    )
    .into_bytes()
}

/// One `write_handoff` through the bridge, on a new connection.
async fn write_by_bridge(bridge: &BridgeWriter, key: &str, body: &str) -> Result<(), String> {
    let answer = exchange(&bridge.addr, &bridge_request(bridge, key, body))
        .await
        .map_err(|e| format!("bridge: {e:#}"))?;
    if answer.status != 200 {
        return Err(format!(
            "bridge answered {}: {}",
            answer.status, answer.body
        ));
    }
    let reply: Value = serde_json::from_str(&answer.body)
        .map_err(|e| format!("bridge's answer is not JSON ({e}): {}", answer.body))?;
    if reply["result"]["isError"] == json!(true) || reply.get("error").is_some() {
        return Err(format!("write_handoff refused: {reply}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_third_write_rewrites_the_previous_key() {
        let keys: Vec<String> = (0..6).map(|n| nth_write("w", n).0).collect();
        assert_eq!(
            keys,
            [
                "upgrade/w#0",
                "upgrade/w#1",
                "upgrade/w#1",
                "upgrade/w#3",
                "upgrade/w#4",
                "upgrade/w#4"
            ]
        );
        assert_ne!(
            nth_write("w", 1).1,
            nth_write("w", 2).1,
            "the rewrite changes the body"
        );
    }

    #[test]
    fn a_failed_write_is_counted_and_never_kept() {
        let mut tally = Tally::default();
        tally.record("a".into(), "1".into(), Ok(()));
        tally.record("a".into(), "2".into(), Err("refused".into()));
        tally.record("b".into(), "3".into(), Ok(()));
        assert_eq!(tally.attempted, 3);
        assert_eq!(tally.failed, ["a: refused"]);
        assert_eq!(
            tally.written["a"], "1",
            "the refused rewrite is not expected"
        );
    }

    #[test]
    fn the_bridge_request_names_the_allowed_host_and_the_agent() {
        let bridge = BridgeWriter {
            addr: "10.0.0.1:8080".into(),
            host: "handoff-bridge.handoff-system.svc".into(),
            token: "t0k".into(),
        };
        let request = String::from_utf8(bridge_request(&bridge, "k#1", "b")).unwrap_or_default();
        assert!(
            request.contains("Host: handoff-bridge.handoff-system.svc\r\n"),
            "{request}"
        );
        assert!(
            request.contains("Authorization: Bearer t0k\r\n"),
            "{request}"
        );
        assert!(request.contains("\"write_handoff\""), "{request}");
    }
}
