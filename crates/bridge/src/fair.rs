//! The fair share's shell (the decision is [`handoff_core::fairness`]):
//! after authentication every request asks for a slot under its caller's
//! identity; it is served at once, waits in its caller's queue (at most
//! `--queue-wait`) until a freed slot is handed to it round-robin, or is
//! refused: 429 with `Retry-After` when its caller is over its share, 503
//! when the whole bridge is full; either with a JSON-RPC error under the
//! request's id.
//!
//! A refusal is answered no sooner than `--queue-wait` after the request
//! asked, also when its caller's queue was already full: a caller that
//! retries at once (ignoring `Retry-After`) then sends at most its
//! concurrency in requests per wait, instead of spending the bridge's CPU
//! (and the other callers' with it) on a storm of instant refusals. The
//! wait holds no slot, only the request's connection, which
//! `--max-connections` bounds.
//!
//! A slot is held by a [`Slot`] and a waiting request by a guard, both
//! released on drop, so a request that is answered, times out or whose
//! client goes away gives its room back; a grant that races a timeout is
//! kept (and served) rather than lost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::oneshot;

use super::jsonrpc::{Refusal as JsonRpcError, SERVER_BUSY, id_of};
use handoff_core::fairness::{Admission, Cancelled, Fairness, Refusal, Shares, Ticket};
use handoff_kube::telemetry::BridgeMetrics;

/// Seconds a refused caller is asked to wait (`Retry-After`).
pub(crate) const RETRY_AFTER_SECONDS: &str = "1";

/// The message of a 429: the caller is over its share.
pub const OVER_SHARE: &str = "this caller is over its share of the bridge (--max-in-flight-per-caller requests in flight and --max-queued-per-caller waiting); retriable: retry after Retry-After seconds, or send fewer requests at once";

/// The message of a 503 from the fair share: the bridge is full.
pub const OVERLOADED: &str = "the bridge is serving as many requests as it may; retriable";

/// Most bytes of a refused request's body read to find its id; a longer
/// body is answered under a null id.
const MAX_ID_BYTES: usize = 64 * 1024;

/// The identity a request is served under (the user its bearer token
/// resolved to), put in its extensions by authentication.
#[derive(Clone, Debug)]
pub(crate) struct Identity(pub(crate) Arc<str>);

/// The fair share of one bridge process (of its requests; `diff_handoff`
/// has one of its own for its turns, without metrics).
pub(crate) struct FairShare {
    state: Mutex<Queues>,
    wait: Duration,
    metrics: Option<Arc<BridgeMetrics>>,
}

/// The decision's state and the waiting requests' wake-ups.
struct Queues {
    fairness: Fairness,
    waiters: HashMap<Ticket, oneshot::Sender<()>>,
}

impl FairShare {
    /// A fair share whose slots, queue and waits are the bridge's metrics.
    pub(crate) fn new(shares: Shares, wait: Duration, metrics: Arc<BridgeMetrics>) -> Arc<Self> {
        Self::with(shares, wait, Some(metrics))
    }

    /// A fair share counted nowhere.
    pub(crate) fn unmetered(shares: Shares, wait: Duration) -> Arc<Self> {
        Self::with(shares, wait, None)
    }

    fn with(shares: Shares, wait: Duration, metrics: Option<Arc<BridgeMetrics>>) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(Queues {
                fairness: Fairness::new(shares),
                waiters: HashMap::new(),
            }),
            wait,
            metrics,
        })
    }

    /// The state; a panic while it was held leaves counts that are still
    /// consistent (every change is made whole under the lock), so a
    /// poisoned lock is used as is.
    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for `identity`: at once, after a wait in its queue, or a
    /// refusal.
    pub(crate) async fn acquire(self: &Arc<Self>, identity: &Arc<str>) -> Result<Slot, Refusal> {
        let (ticket, granted) = {
            let mut queues = self.lock();
            let admission = queues.fairness.admit(identity);
            let ticket = match admission {
                Admission::Granted => {
                    self.publish(&queues);
                    return Ok(self.slot(identity));
                }
                Admission::Refused(refusal) => return Err(refusal),
                Admission::Queued(ticket) => ticket,
            };
            let (tx, rx) = oneshot::channel();
            queues.waiters.insert(ticket, tx);
            self.publish(&queues);
            (ticket, rx)
        };
        let started = Instant::now();
        let mut waiting = Waiting {
            share: self.clone(),
            identity: identity.clone(),
            ticket: Some(ticket),
        };
        let woken = tokio::time::timeout(self.wait, granted).await;
        if let Some(metrics) = &self.metrics {
            metrics.queue_waited(started.elapsed());
        }
        waiting.ticket = None;
        if matches!(woken, Ok(Ok(()))) {
            return Ok(self.slot(identity));
        }
        let mut queues = self.lock();
        queues.waiters.remove(&ticket);
        let cancelled = queues.fairness.cancel(identity, ticket);
        self.publish(&queues);
        match cancelled {
            Cancelled::Granted => Ok(self.slot(identity)),
            Cancelled::Waiting(refusal) => Err(refusal),
        }
    }

    fn slot(self: &Arc<Self>, identity: &Arc<str>) -> Slot {
        Slot {
            share: self.clone(),
            identity: identity.clone(),
        }
    }

    /// Gives `identity`'s slot back and wakes the requests granted the room.
    fn release(&self, identity: &str) {
        let mut queues = self.lock();
        let granted = queues.fairness.release(identity);
        for (_, ticket) in granted {
            // A waiter whose receiver is gone is being dropped: its guard
            // finds the ticket granted and releases it.
            if let Some(wake) = queues.waiters.remove(&ticket) {
                let _ = wake.send(());
            }
        }
        self.publish(&queues);
    }

    fn publish(&self, queues: &Queues) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        metrics.in_flight().set(count(queues.fairness.in_flight()));
        metrics.queued().set(count(queues.fairness.queued()));
    }
}

/// One slot of a caller's share, given back when dropped.
pub(crate) struct Slot {
    share: Arc<FairShare>,
    identity: Arc<str>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.share.release(&self.identity);
    }
}

/// A request waiting in its caller's queue; dropped while waiting (its
/// client went away, the request timed out), it leaves the queue, or gives
/// back the slot it was granted meanwhile.
struct Waiting {
    share: Arc<FairShare>,
    identity: Arc<str>,
    ticket: Option<Ticket>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket else {
            return;
        };
        let mut queues = self.share.lock();
        queues.waiters.remove(&ticket);
        let cancelled = queues.fairness.cancel(&self.identity, ticket);
        self.share.publish(&queues);
        drop(queues);
        if cancelled == Cancelled::Granted {
            self.share.release(&self.identity);
        }
    }
}

/// Middleware: serves `request` in a slot of its caller's share, or answers
/// the refusal. A request without an [`Identity`] (none reaches here:
/// authentication runs first) is served under the empty identity.
pub(crate) async fn fair_share(
    State(share): State<Arc<FairShare>>,
    request: Request,
    next: Next,
) -> Response {
    let identity = request
        .extensions()
        .get::<Identity>()
        .map_or_else(|| Arc::from(""), |i| i.0.clone());
    let asked = Instant::now();
    match share.acquire(&identity).await {
        Ok(slot) => {
            let response = next.run(request).await;
            drop(slot);
            response
        }
        Err(refusal) => {
            tokio::time::sleep(share.wait.saturating_sub(asked.elapsed())).await;
            if let Some(metrics) = &share.metrics {
                metrics.refusal(refusal.as_str());
            }
            let body = axum::body::to_bytes(request.into_body(), MAX_ID_BYTES).await;
            let id = body.map_or(serde_json::Value::Null, |b| id_of(&b));
            refused(refusal, id)
        }
    }
}

/// The answer to a refused request, under its id.
pub(crate) fn refused(refusal: Refusal, id: serde_json::Value) -> Response {
    let (status, message) = match refusal {
        Refusal::OverShare => (StatusCode::TOO_MANY_REQUESTS, OVER_SHARE),
        Refusal::Overloaded => (StatusCode::SERVICE_UNAVAILABLE, OVERLOADED),
    };
    let error = JsonRpcError {
        id,
        code: SERVER_BUSY,
        message: message.to_owned(),
    };
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::RETRY_AFTER, RETRY_AFTER_SECONDS),
        ],
        error.to_line(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::routing::post;
    use tokio::sync::Semaphore;
    use tower::ServiceExt;

    use super::*;

    /// The order requests reached the handler in, by their `x-who` header.
    type Log = Arc<Mutex<Vec<String>>>;

    /// `/mcp` behind the fair share: the identity is the `x-who` header
    /// (its first letter); the handler logs the header, then answers once
    /// `gate` gives it a permit (one per request).
    fn app(share: Arc<FairShare>, gate: Arc<Semaphore>, log: Log) -> axum::Router {
        axum::Router::new()
            .route(
                "/mcp",
                post(move |request: Request| {
                    let (gate, log) = (gate.clone(), log.clone());
                    async move {
                        let who = who(&request);
                        log.lock().expect("log").push(who);
                        gate.acquire().await.expect("gate open").forget();
                        "answered"
                    }
                }),
            )
            .layer(axum::middleware::from_fn_with_state(share, fair_share))
            .layer(axum::middleware::from_fn(
                |mut request: Request, next: Next| async move {
                    let identity = who(&request).chars().take(1).collect::<String>();
                    request
                        .extensions_mut()
                        .insert(Identity(Arc::from(identity)));
                    next.run(request).await
                },
            ))
    }

    fn who(request: &Request) -> String {
        request
            .headers()
            .get("x-who")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    }

    fn call(who: &str) -> Request {
        Request::post("/mcp")
            .header("x-who", who)
            .body(Body::from(
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#,
            ))
            .expect("request")
    }

    fn share(
        max_in_flight: usize,
        per_caller: usize,
        wait: Duration,
    ) -> (Arc<FairShare>, Arc<BridgeMetrics>) {
        let metrics = BridgeMetrics::new();
        let shares = Shares {
            max_in_flight,
            per_caller,
            queued_per_caller: 4,
            max_queued: 16,
        };
        (FairShare::new(shares, wait, metrics.clone()), metrics)
    }

    /// Waits until the gauges show `in_flight` and `queued`.
    async fn eventually(metrics: &BridgeMetrics, in_flight: i64, queued: i64) {
        for _ in 0..1000 {
            if (metrics.in_flight().get(), metrics.queued().get()) == (in_flight, queued) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        panic!(
            "in flight {}, queued {} (want {in_flight}, {queued})",
            metrics.in_flight().get(),
            metrics.queued().get()
        );
    }

    async fn json(response: Response) -> serde_json::Value {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .expect("body");
        serde_json::from_slice(&bytes).expect("a JSON-RPC body")
    }

    #[tokio::test]
    async fn a_caller_over_its_share_gets_429_while_another_is_served() {
        let wait = Duration::from_secs(2);
        let (share, metrics) = share(8, 1, wait);
        let gate = Arc::new(Semaphore::new(0));
        let app = app(share, gate.clone(), Log::default());
        let first = tokio::spawn(app.clone().oneshot(call("a1")));
        eventually(&metrics, 1, 0).await;
        let queued: Vec<_> = (2..6)
            .map(|i| tokio::spawn(app.clone().oneshot(call(&format!("a{i}")))))
            .collect();
        eventually(&metrics, 1, 4).await;
        let asked = Instant::now();
        let refused = tokio::spawn(app.clone().oneshot(call("a6")));

        let other = tokio::spawn(app.clone().oneshot(call("b1")));
        eventually(&metrics, 2, 4).await;
        gate.add_permits(6);
        for answer in queued.into_iter().chain([first, other]) {
            let answer = answer.await.expect("join").expect("infallible");
            assert_eq!(answer.status(), StatusCode::OK);
        }
        eventually(&metrics, 0, 0).await;

        let refused = refused.await.expect("join").expect("infallible");
        assert!(
            asked.elapsed() >= wait,
            "a refusal is answered no sooner than the queue wait"
        );
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        let body = json(refused).await;
        assert_eq!(body["id"], 7, "{body}");
        assert_eq!(body["error"]["code"], SERVER_BUSY, "{body}");
        assert_eq!(body["error"]["message"], OVER_SHARE, "{body}");
        assert!(
            metrics
                .encode()
                .contains("handoff_mcp_http_refusals_total{reason=\"over_share\"} 1"),
            "{}",
            metrics.encode()
        );
    }

    #[tokio::test]
    async fn freed_slots_go_round_robin_among_callers() {
        let (share, metrics) = share(1, 1, Duration::from_secs(60));
        let gate = Arc::new(Semaphore::new(0));
        let log = Log::default();
        let app = app(share, gate.clone(), log.clone());
        let mut calls = vec![tokio::spawn(app.clone().oneshot(call("a1")))];
        eventually(&metrics, 1, 0).await;
        for (queued, who) in ["a2", "a3", "b1", "c1", "b2"].into_iter().enumerate() {
            calls.push(tokio::spawn(app.clone().oneshot(call(who))));
            eventually(&metrics, 1, queued as i64 + 1).await;
        }
        for served in 1..=6 {
            gate.add_permits(1);
            eventually(&metrics, i64::from(served < 6), (5 - served).max(0)).await;
        }
        for answer in calls {
            let answer = answer.await.expect("join").expect("infallible");
            assert_eq!(answer.status(), StatusCode::OK);
        }
        assert_eq!(
            *log.lock().expect("log"),
            ["a1", "a2", "b1", "c1", "a3", "b2"]
        );
    }

    #[tokio::test]
    async fn a_wait_that_runs_out_is_refused_and_leaves_the_queue() {
        for (max_in_flight, who, status, message) in [
            (4, "a2", StatusCode::TOO_MANY_REQUESTS, OVER_SHARE),
            (1, "b1", StatusCode::SERVICE_UNAVAILABLE, OVERLOADED),
        ] {
            let (share, metrics) = share(max_in_flight, 1, Duration::from_millis(30));
            let gate = Arc::new(Semaphore::new(0));
            let app = app(share, gate.clone(), Log::default());
            let held = tokio::spawn(app.clone().oneshot(call("a1")));
            eventually(&metrics, 1, 0).await;
            let refused = app.clone().oneshot(call(who)).await.expect("infallible");
            assert_eq!(refused.status(), status, "{who}");
            assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
            assert_eq!(json(refused).await["error"]["message"], message);
            eventually(&metrics, 1, 0).await;
            gate.add_permits(1);
            held.await.expect("join").expect("infallible");
            eventually(&metrics, 0, 0).await;
            assert!(
                metrics
                    .encode()
                    .contains("handoff_mcp_http_queue_wait_seconds_count 1")
            );
        }
    }

    #[tokio::test]
    async fn abandoned_requests_give_their_slot_and_their_place_back() {
        let (share, metrics) = share(1, 1, Duration::from_secs(60));
        let gate = Arc::new(Semaphore::new(0));
        let app = app(share, gate.clone(), Log::default());
        let held = tokio::spawn(app.clone().oneshot(call("a1")));
        eventually(&metrics, 1, 0).await;
        let waiting = tokio::spawn(app.clone().oneshot(call("b1")));
        eventually(&metrics, 1, 1).await;
        waiting.abort();
        eventually(&metrics, 1, 0).await;
        held.abort();
        eventually(&metrics, 0, 0).await;
        gate.add_permits(1);
        let after = app.oneshot(call("c1")).await.expect("infallible");
        assert_eq!(after.status(), StatusCode::OK, "the room came back");
    }
}
