//! The agents tier, Gemini CLI half: the real `gemini` (`@google/gemini-cli`,
//! pinned by `tests/agents/gemini/package-lock.json`, installed by `make
//! agents-gemini`) runs whole headless `-p` sessions against the scripted
//! Gemini API of the test kit, with the shipped
//! `examples/gemini/settings.json` used verbatim as the user's settings:
//! only what a user fills in is added (the auth type, the kubeconfig, `PATH`
//! to `handoff`, the key and the project). The apiserver is this binary's
//! own control plane.
//!
//! Why: `tests/it/hooks.rs` feeds the hooks payloads shaped as documented;
//! only the CLI itself shows whether it starts the MCP server with what it
//! needs, runs the hooks under its own event names (`AfterAgent`, not
//! `Stop`), and feeds their answers to the model. Assertions read what the
//! model saw (the server's request log), what was stored (the cluster) and
//! what the CLI printed (its `-o json` answer).
//!
//! Hygiene: the model, the apiserver and the MCP server are on 127.0.0.1;
//! every session runs with an empty environment but what is set here,
//! behind a proxy that refuses and counts every connection ([`Trap`]), with
//! `NO_PROXY` covering loopback, so nothing else can leave the machine and
//! any attempt fails the test; `HOME` and `TMPDIR` (where the CLI writes
//! error reports) are temp dirs per test (nothing of this machine's user
//! config is read or written); usage statistics, telemetry and update
//! checks are off in the shipped settings; the model is always named (`-m`,
//! so no routing call is made) and stdin is `/dev/null` (a piped stdin
//! would be prepended to the prompt).

mod common;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use handoff::hook::stop_reason;
use handoff_core::api::MAX_BODY_CHARS;
use handoff_testkit::model::gemini::{
    Gemini, MODEL, Turn, declared, function_responses, last_text, user_texts,
};
use handoff_testkit::{self as testing, TestEnv};
use handoff_transcript::rescue::{DEFAULT_MAX_TOKENS, RESCUE_MARK, approx_tokens};
use serde_json::{Value, json};

use common::tier::{next_second, stored, workdir};

/// The pinned Gemini CLI; fails (never skips) when it is not installed.
fn gemini() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/agents/gemini/node_modules/.bin/gemini");
    assert!(
        bin.exists(),
        "the Gemini CLI is missing at {}: run `make agents-gemini` (npm ci in tests/agents/gemini)",
        bin.display()
    );
    bin
}

/// `examples/gemini/settings.json`, as shipped.
fn shipped() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/gemini/settings.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Merges `extra` into `into`, objects key by key (what `extra` adds must
/// not replace anything the shipped file says).
fn merge(into: &mut Value, extra: Value) {
    match (into, extra) {
        (Value::Object(into), Value::Object(extra)) => {
            for (key, value) in extra {
                match into.get_mut(&key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        into.insert(key, value);
                    }
                }
            }
        }
        (slot, value) => panic!("the tier would replace {slot} by {value}"),
    }
}

/// The user's part: the API-key auth type. Without it, with
/// `GOOGLE_GEMINI_BASE_URL` set, Gemini CLI picks the `gateway` type, which
/// headless runs refuse (exit 41, "Invalid auth method selected.").
fn user_part() -> Value {
    json!({"security": {"auth": {"selectedType": "gemini-api-key"}}})
}

/// The proxy of every session: a listener on loopback that closes every
/// connection it is offered and counts them, so a request for anything but
/// loopback (which `NO_PROXY` covers) fails here instead of leaving the
/// machine, and is seen: every session asserts that none was made (with
/// usage statistics on, Gemini CLI would connect to `play.googleapis.com`).
/// Without `NO_PROXY`, Gemini CLI sends even the loopback model through it
/// and retries until killed.
struct Trap {
    url: String,
    offered: Arc<AtomicUsize>,
}

impl Trap {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("the trap listens");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let offered = Arc::new(AtomicUsize::new(0));
        let count = offered.clone();
        // The thread waits in accept for the rest of the test binary's life.
        std::thread::spawn(move || {
            for connection in listener.incoming() {
                count.fetch_add(1, Ordering::SeqCst);
                drop(connection);
            }
        });
        Self { url, offered }
    }

    fn offered(&self) -> usize {
        self.offered.load(Ordering::SeqCst)
    }
}

/// One test's Gemini CLI: its directories, its kubeconfig (the test's
/// namespace as the context's), the model server.
struct Agent {
    dir: tempfile::TempDir,
    model: Gemini,
    proxy: Trap,
    key: String,
}

/// What one session printed (`-o json`).
struct Run {
    ok: bool,
    session: String,
    response: String,
    stderr: String,
}

impl Agent {
    /// An agent whose settings are the shipped file, the user's part and
    /// `extra` merged in.
    fn new(env: &TestEnv, namespace: &str, key: &str, extra: Value) -> Self {
        let model = Gemini::start(Vec::new()).expect("the scripted model starts");
        let dir = workdir(env, namespace, &["home/.gemini", "work", "tmp"]);
        let mut settings = shipped();
        merge(&mut settings, user_part());
        merge(&mut settings, extra);
        std::fs::write(
            dir.path().join("home/.gemini/settings.json"),
            serde_json::to_string_pretty(&settings).expect("settings"),
        )
        .expect("settings.json");
        Self {
            dir,
            model,
            proxy: Trap::start(),
            key: key.to_owned(),
        }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// One headless session playing `script`; it must succeed.
    fn session(&self, script: Vec<Turn>) -> Run {
        let run = self.run(script);
        assert!(run.ok, "gemini failed: {}\n{}", run.response, run.stderr);
        assert!(self.model.faults().is_empty(), "{:?}", self.model.faults());
        run
    }

    /// One `gemini -m … -p … -o json` session playing `script`, behind
    /// [`Trap`], in the work directory; nothing may have gone through it.
    fn run(&self, script: Vec<Turn>) -> Run {
        self.model.play(script);
        let path = format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            self.path("bin").display()
        );
        let out = Command::new(gemini())
            .current_dir(self.path("work"))
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.path("home"))
            // Where it writes its error reports.
            .env("TMPDIR", self.path("tmp"))
            .env("KUBECONFIG", self.path("kubeconfig"))
            .env("CONVERSATION_OBJECT_KEY", &self.key)
            .env("HANDOFF_PROJECT", "agents-tier")
            .env("GEMINI_API_KEY", "scripted")
            .env("GOOGLE_GEMINI_BASE_URL", self.model.url())
            // Headless runs refuse an untrusted folder (exit 55).
            .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
            .env("GEMINI_FORCE_FILE_STORAGE", "true")
            .env("HTTPS_PROXY", &self.proxy.url)
            .env("HTTP_PROXY", &self.proxy.url)
            .env("NO_PROXY", "127.0.0.1,localhost")
            .args(["-m", MODEL, "-o", "json", "-p", "Continue the work."])
            .stdin(Stdio::null())
            .output()
            .expect("gemini runs");
        assert_eq!(
            self.proxy.offered(),
            0,
            "something tried to leave the machine through the proxy"
        );
        let printed: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        Run {
            ok: out.status.success(),
            session: printed["session_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            response: printed["response"].as_str().map_or_else(
                || String::from_utf8_lossy(&out.stdout).into_owned(),
                str::to_owned,
            ),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `handoff transcript read` of this agent's session `id`.
    fn transcript(&self, id: &str) -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_handoff"))
            .args(["transcript", "read", "--agent", "gemini", "--session", id])
            .arg("--agent-home")
            .arg(self.path("home/.gemini"))
            .arg("--cwd")
            .arg(self.path("work"))
            .args(["--max-bytes", "0"])
            .env_clear()
            .output()
            .expect("handoff runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("transcript JSON")
    }
}

/// The handoff stored under `key` in `namespace`, if any.
const BODY: &str = "## State\nThe agents tier runs Gemini CLI.\n\n## Done\n- the scripted model\n\n## Next\n- resume\n\n## Open questions\n- none\n\n## Refs\n- tests/agents_gemini.rs\n";

fn write_call(key: &str, body: &str) -> Turn {
    Turn::mcp(
        "handoff",
        "write_handoff",
        json!({"handoff_key": key, "project": "agents-tier", "body": body}),
    )
}

/// How many of `requests` end with the AfterAgent hook's reason as the
/// newest user turn (the hook's block, as the model sees it).
fn blocks(requests: &[Value], key: &str) -> usize {
    let reason = stop_reason(key);
    requests.iter().filter(|r| last_text(r) == reason).count()
}

/// The shipped settings give the model the handoff tools (`mcp_handoff_*`:
/// the stdio bridge started with the session's `KUBECONFIG`), and the
/// session asks for nothing but the model.
#[tokio::test]
async fn the_shipped_settings_give_gemini_the_handoff_tools() {
    let env = testing::shared();
    let ns = env.namespace("gemini-tools").await;
    let agent = Agent::new(env, &ns, "issue-40-tools", json!({}));
    agent.session(vec![
        Turn::text("Nothing to do."),
        Turn::text("Still nothing."),
    ]);
    let requests = agent.model.model_requests();
    let first = requests.first().expect("Gemini CLI asked the model");
    let tools = declared(first);
    for tool in ["get_handoff", "write_handoff", "list_handoffs"] {
        let name = format!("mcp_handoff_{tool}");
        assert!(
            tools.contains(&name),
            "Gemini CLI declared no `{name}` (declared: {tools:?})"
        );
    }
    let asked: Vec<String> = agent.model.log().iter().map(|r| r.path.clone()).collect();
    let stream = format!("/v1beta/models/{MODEL}:streamGenerateContent?alt=sse");
    assert!(
        asked.iter().all(|p| *p == stream),
        "Gemini CLI asked for more than the model: {asked:?}"
    );
}

/// Resume: session 1 writes through the real MCP client and ends with no
/// block (a fresh write); session 2's first model request already holds
/// the handoff (SessionStart's additionalContext, which Gemini CLI puts in
/// the prompt as `<hook_context>`), so the model resumes with no tool call.
#[tokio::test]
async fn a_second_session_starts_with_the_handoff_of_the_first() {
    let env = testing::shared();
    let ns = env.namespace("gemini-resume").await;
    let key = "issue-40-resume";
    let agent = Agent::new(env, &ns, key, json!({}));

    agent.session(vec![
        write_call(key, BODY),
        Turn::text("Written; stopping."),
    ]);
    let first = agent.model.model_requests();
    assert_eq!(first.len(), 2, "one write, one end: no block");
    let answered = function_responses(first.last().expect("session 1 asked the model"));
    assert_eq!(
        answered.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["mcp_handoff_write_handoff"],
        "{answered:?}"
    );
    assert!(
        !last_text(&first[0]).contains("<hook_context>"),
        "session 1 began without a handoff: {}",
        last_text(&first[0])
    );
    let handoff = stored(env, &ns, key).expect("session 1 stored the handoff");
    assert_eq!(handoff["spec"]["body"], BODY, "the write, not a rescue");
    assert_eq!(handoff["spec"]["project"], "agents-tier");

    let next = BODY.replace("- resume\n", "- forget\n");
    agent.session(vec![
        write_call(key, &next),
        Turn::text("Resumed; stopping."),
    ]);
    let second = agent.model.model_requests();
    assert_eq!(
        second.len(),
        2,
        "one write, one end: no get_handoff, no block"
    );
    let prompt = last_text(&second[0]);
    assert!(
        prompt.starts_with("<hook_context>Prior handoff for continuation key")
            && prompt.contains("The agents tier runs Gemini CLI.")
            && prompt.contains(key)
            && prompt.ends_with("</hook_context>\n\nContinue the work."),
        "session 2's prompt holds the handoff: {prompt}"
    );
    let handoff = stored(env, &ns, key).expect("still stored");
    assert_eq!(handoff["spec"]["body"], next.as_str(), "session 2's write");
}

/// Forget: the model ends its turn without writing; the AfterAgent hook
/// blocks once, Gemini CLI sends its reason to the model as a new user
/// turn, the model writes, and the session ends with the agent's handoff
/// stored (not a rescue). The session file, read by `handoff transcript
/// read`, holds the session in order.
#[tokio::test]
async fn after_agent_blocks_once_until_the_model_writes() {
    let env = testing::shared();
    let ns = env.namespace("gemini-forget").await;
    let key = "issue-40-forget";
    let agent = Agent::new(env, &ns, key, json!({}));
    let run = agent.session(vec![
        Turn::text("All done."),
        write_call(key, BODY),
        Turn::text("Written; stopping."),
    ]);
    let requests = agent.model.model_requests();
    assert_eq!(requests.len(), 3, "one block, one write, one end");
    assert_eq!(blocks(&requests, key), 1, "asked exactly once");
    assert_eq!(
        last_text(&requests[1]),
        stop_reason(key),
        "the block's reason is the newest user turn"
    );
    assert_eq!(
        function_responses(&requests[2]).len(),
        1,
        "write_handoff was answered"
    );
    let handoff = stored(env, &ns, key).expect("the model's write is stored");
    assert_eq!(
        handoff["spec"]["body"], BODY,
        "the agent's handoff, not a rescue"
    );
    assert!(
        run.response.ends_with("Written; stopping."),
        "{}",
        run.response
    );

    let read = agent.transcript(&run.session);
    let turns: Vec<(String, String, Value)> = read["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| {
            (
                t["role"].as_str().unwrap_or_default().to_owned(),
                t["text"].as_str().unwrap_or_default().to_owned(),
                t["tools"].clone(),
            )
        })
        .collect();
    let roles: Vec<&str> = turns.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "user", "assistant"],
        "{read:#}"
    );
    assert_eq!(turns[0].1, "Continue the work.");
    assert_eq!(turns[1].1, "All done.");
    // Gemini CLI records the block as a user message whose content is the
    // reason and whose displayContent is the session's prompt again.
    assert_eq!(turns[2].1, "Continue the work.", "{read:#}");
    assert_eq!(turns[3].1, "Written; stopping.");
    assert_eq!(
        turns[3].2,
        json!(["[tool] mcp_handoff_write_handoff"]),
        "{read:#}"
    );
}

/// Never writes: the model ends every turn without writing. AfterAgent
/// blocks once; its second run (`stop_hook_active`) and SessionEnd rescue
/// the session file, marked as rescued and within the budget.
#[tokio::test]
async fn a_session_that_never_writes_is_rescued() {
    let env = testing::shared();
    let ns = env.namespace("gemini-never").await;
    let key = "issue-40-never";
    let agent = Agent::new(env, &ns, key, json!({}));
    let run = agent.session(vec![Turn::text("All done."), Turn::text("Still done.")]);
    let requests = agent.model.model_requests();
    assert_eq!(
        requests.len(),
        2,
        "one block, then the guarded stop lets it end"
    );
    // The hook's notice is a systemMessage, which Gemini CLI shows.
    let notice = format!(
        "Hook system message: handoff: no handoff was written for `{key}` in this session; \
         at the second stop, a rescued one was extracted"
    );
    assert!(run.stderr.contains(&notice), "{}", run.stderr);
    assert_eq!(blocks(&requests, key), 1, "asked exactly once");
    let handoff = stored(env, &ns, key).expect("a rescue is stored");
    let body = handoff["spec"]["body"].as_str().unwrap_or_default();
    assert!(body.starts_with(RESCUE_MARK), "{body}");
    assert_eq!(handoff["spec"]["kind"], "rescued");
    assert!(body.contains("Still done."), "the last model text: {body}");
    assert!(
        approx_tokens(body) <= DEFAULT_MAX_TOKENS,
        "within the default --max-tokens: {} bytes",
        body.len()
    );
}

/// A session that writes the very handoff the key already holds (no new
/// `updated_at`, older than the session) has written it: the AfterAgent
/// hook sees the write in Gemini CLI's session file, and neither it nor
/// SessionEnd blocks or rescues over it.
#[tokio::test]
async fn an_identical_rewrite_is_not_rescued_over() {
    let env = testing::shared();
    let ns = env.namespace("gemini-same").await;
    let key = "issue-40-same";
    let agent = Agent::new(env, &ns, key, json!({}));
    agent.session(vec![write_call(key, BODY), Turn::text("Written.")]);
    let before = stored(env, &ns, key).expect("session 1 stored the handoff");
    assert_eq!(
        before["spec"]["body"], BODY,
        "a fresh write is not rescued over"
    );
    next_second();

    agent.session(vec![write_call(key, BODY), Turn::text("Written again.")]);
    let requests = agent.model.model_requests();
    assert_eq!(
        requests.len(),
        2,
        "one write, one end: the AfterAgent hook blocked ({})",
        last_text(requests.last().expect("a request"))
    );
    let after = stored(env, &ns, key).expect("still stored");
    assert_eq!(after["spec"]["body"], BODY, "rescued over");
    assert_eq!(
        after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
        "nothing was written after session 1"
    );
}

/// Gemini CLI keeps a SessionStart additionalContext whole (measured with
/// 0.61: 1,000,000 characters reached the model unchanged), so the Gemini
/// format has no context limit: the longest handoff the API takes
/// ([`MAX_BODY_CHARS`]) reaches the next session whole, to its last line,
/// with no "call get_handoff for the rest".
#[tokio::test]
async fn the_longest_handoff_reaches_the_next_session_whole() {
    let env = testing::shared();
    let ns = env.namespace("gemini-long").await;
    let key = "issue-40-long";
    let agent = Agent::new(env, &ns, key, json!({}));
    let head = "## State\nThe long work is half done.\n## Next\n- write the output\n## Done\n";
    let tail = "## Refs\n- the-last-line-of-the-handoff\n";
    let done = "- checked one more part of the input against the schema, and kept notes\n";
    let lines = (MAX_BODY_CHARS - head.len() - tail.len()) / done.len();
    let long = format!("{head}{}{tail}", done.repeat(lines));
    assert!(long.len() > MAX_BODY_CHARS - done.len(), "{}", long.len());
    agent.session(vec![write_call(key, &long), Turn::text("Written.")]);
    assert_eq!(
        stored(env, &ns, key).expect("stored")["spec"]["body"],
        long.as_str()
    );

    agent.session(vec![write_call(key, BODY), Turn::text("Resumed.")]);
    let requests = agent.model.model_requests();
    let prompt = last_text(requests.first().expect("session 2 asked the model"));
    assert!(
        prompt.contains(&long),
        "the handoff is not whole: {} chars",
        prompt.len()
    );
    assert!(!prompt.contains("for the rest"), "cut: {prompt}");
}

/// Why the shipped settings wire no PreCompress hook: Gemini CLI 0.61
/// runs it (`trigger: auto`) before every model request, compressing or
/// not, so a rescue there would cost an apiserver call per request and,
/// at the first, replace the last session's handoff by a rescue of a
/// session that has only its prompt. Measured here with a hook that only
/// records its input: one PreCompress per model request.
#[tokio::test]
async fn pre_compress_runs_before_every_model_request() {
    let env = testing::shared();
    let ns = env.namespace("gemini-precompress").await;
    let key = "issue-40-precompress";
    assert!(
        shipped()["hooks"].get("PreCompress").is_none(),
        "the shipped settings wire PreCompress"
    );
    let seen = tempfile::NamedTempFile::new().expect("a file for the hook");
    let command = format!("{{ cat; echo; }} >> {}; echo '{{}}'", seen.path().display());
    let agent = Agent::new(
        env,
        &ns,
        key,
        json!({"hooks": {"PreCompress": [{"hooks": [{"type": "command", "command": command}]}]}}),
    );
    agent.session(vec![
        write_call(key, BODY),
        Turn::text("Written; stopping."),
    ]);
    let requests = agent.model.model_requests().len();
    assert_eq!(requests, 2);
    let text = std::fs::read_to_string(seen.path()).expect("the hook's record");
    let events: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("PreCompress input is JSON"))
        .collect();
    assert_eq!(events.len(), requests, "{text}");
    for event in &events {
        assert_eq!(event["hook_event_name"], "PreCompress");
        assert_eq!(event["trigger"], "auto");
    }
    assert_eq!(
        user_texts(&agent.model.model_requests()[0]).len(),
        2,
        "the first request holds only the session context and the prompt"
    );
}

/// What Gemini CLI cannot do that Codex does: a headless session whose
/// model request fails exits without running AfterAgent (no turn ended)
/// or SessionEnd (measured with 0.61: only SessionStart and PreCompress
/// ran), so such a session is not rescued; the key keeps what it had.
#[tokio::test]
async fn a_session_whose_turn_fails_ends_with_no_hook_to_rescue_it() {
    let env = testing::shared();
    let ns = env.namespace("gemini-end").await;
    let key = "issue-40-end";
    let agent = Agent::new(env, &ns, key, json!({}));
    let run = agent.run(vec![Turn::Fail]);
    assert!(!run.ok, "the session fails with its turn: {}", run.stderr);
    assert!(
        run.stderr.contains("INVALID_ARGUMENT"),
        "the refusal is reported: {}",
        run.stderr
    );
    assert_eq!(
        agent.model.model_requests().len(),
        1,
        "one request, refused"
    );
    assert_eq!(stored(env, &ns, key), None, "a hook rescued the session");
}
