//! The one shell of the scripted model servers: a listener on a free port
//! of 127.0.0.1, served by axum on its own thread and runtime (so a test
//! may block on the CLI while it serves), a script of turns played in
//! order, and a log of every request, whatever its path. What a request
//! is answered is the wire format's business ([`Answerer`]: Anthropic
//! Messages in [`super::anthropic`], OpenAI Responses in
//! [`super::openai`], Gemini's streamGenerateContent in
//! [`super::gemini`]); it runs under the shell's lock, given the request
//! and the script, and does no I/O.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Logged {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path and query (`/v1/messages?beta=true`).
    pub path: String,
    /// The body as JSON (`Null` when empty or not JSON).
    pub body: Value,
}

impl Logged {
    /// Whether this is a `POST` to `path` (the query aside).
    pub(crate) fn is_post_to(&self, path: &str) -> bool {
        self.method == "POST" && self.path.split('?').next() == Some(path)
    }
}

/// What a wire format answers one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) content_type: &'static str,
    pub(crate) body: String,
}

impl Reply {
    /// `200 OK` with a JSON body.
    pub(crate) fn json(body: &Value) -> Reply {
        Reply::json_with(StatusCode::OK, body)
    }

    /// A JSON body with `status`.
    pub(crate) fn json_with(status: StatusCode, body: &Value) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            body: body.to_string(),
        }
    }

    /// `200 OK` with server-sent events.
    pub(crate) fn sse(body: String) -> Reply {
        Reply {
            status: StatusCode::OK,
            content_type: "text/event-stream",
            body,
        }
    }
}

/// The turns left to play, how many answers were given, and what went
/// wrong while serving.
pub(crate) struct Script<T> {
    turns: VecDeque<T>,
    answered: usize,
    faults: Vec<String>,
}

impl<T> Script<T> {
    pub(crate) fn new(turns: Vec<T>) -> Self {
        Script {
            turns: turns.into(),
            answered: 0,
            faults: Vec::new(),
        }
    }

    /// Counts one more answer; its number, from 1 (ids stay unique for
    /// the server's life, across [`Server::play`]).
    pub(crate) fn answer_number(&mut self) -> usize {
        self.answered += 1;
        self.answered
    }

    /// The next turn of the script, if any is left.
    pub(crate) fn next_turn(&mut self) -> Option<T> {
        self.turns.pop_front()
    }

    /// Records what went wrong (a script calling a tool not offered).
    pub(crate) fn fault(&mut self, fault: String) {
        self.faults.push(fault);
    }

    /// How many turns are left, and the faults so far (for the wire
    /// formats' tests).
    #[cfg(test)]
    pub(crate) fn state(&self) -> (usize, &[String]) {
        (self.turns.len(), &self.faults)
    }
}

/// How a wire format answers a request, given the script.
pub(crate) type Answerer<T> = fn(&Logged, &mut Script<T>) -> Reply;

struct Shared<T> {
    script: Script<T>,
    log: Vec<Logged>,
    answer: Answerer<T>,
}

type Handle<T> = Arc<Mutex<Shared<T>>>;

fn lock<T>(shared: &Handle<T>) -> MutexGuard<'_, Shared<T>> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A scripted server, serving until dropped.
pub(crate) struct Server<T> {
    url: String,
    shared: Handle<T>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl<T: Send + 'static> Server<T> {
    /// Starts serving `script` on a free port of 127.0.0.1, on a thread
    /// named `name`, answering with `answer`.
    pub(crate) fn start(name: &str, script: Vec<T>, answer: Answerer<T>) -> anyhow::Result<Self> {
        Self::start_on(name, std::net::Ipv4Addr::LOCALHOST.into(), script, answer)
    }

    /// [`Server::start`] on a free port of `ip` (an address of this host).
    pub(crate) fn start_on(
        name: &str,
        ip: std::net::IpAddr,
        script: Vec<T>,
        answer: Answerer<T>,
    ) -> anyhow::Result<Self> {
        let listener = std::net::TcpListener::bind((ip, 0))?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}", listener.local_addr()?);
        let shared: Handle<T> = Arc::new(Mutex::new(Shared {
            script: Script::new(script),
            log: Vec::new(),
            answer,
        }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let app = Router::new()
            .fallback(serve::<T>)
            .with_state(shared.clone());
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(async {
                            let _ = stopped.await;
                        })
                        .await;
                });
            })?;
        Ok(Server {
            url,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `http://<ip>:<port>`.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Replaces what is left of the script (the next session's turns) and
    /// clears the log.
    pub(crate) fn play(&self, script: Vec<T>) {
        let mut shared = lock(&self.shared);
        shared.script.turns = script.into();
        shared.log.clear();
    }

    /// Every request received since the start or the last [`play`](Self::play).
    pub(crate) fn log(&self) -> Vec<Logged> {
        lock(&self.shared).log.clone()
    }

    /// The turns of the script not played yet.
    pub(crate) fn left(&self) -> usize {
        lock(&self.shared).script.turns.len()
    }

    /// What went wrong while serving (empty when nothing did).
    pub(crate) fn faults(&self) -> Vec<String> {
        lock(&self.shared).script.faults.clone()
    }
}

impl<T> Drop for Server<T> {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Logs a request and answers it as the wire format says.
async fn serve<T>(
    State(shared): State<Handle<T>>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let logged = Logged {
        method: method.to_string(),
        path: uri
            .path_and_query()
            .map_or_else(|| uri.path().to_owned(), |p| p.to_string()),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let reply = {
        let mut shared = lock(&shared);
        let Shared {
            script,
            log,
            answer,
        } = &mut *shared;
        let reply = answer(&logged, script);
        log.push(logged);
        reply
    };
    (
        reply.status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(reply.content_type),
        )],
        reply.body,
    )
        .into_response()
}
