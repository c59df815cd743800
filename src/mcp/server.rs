//! The MCP server: `tools/list` filtered by profile, `tools/call` dispatched
//! to the store with the caller's credentials, every failure turned into a
//! message an agent can act on.
//!
//! With a mirror (`handoff mcp --postgres-url`), `list_handoffs` and
//! `get_handoff{revision}` are answered from PostgreSQL — after a
//! SelfSubjectAccessReview with the caller's own credentials, so a caller
//! without `list` (or `get`) is refused with the same Forbidden the
//! apiserver would give. Without a mirror, lists come from the apiserver
//! and a `revision` is refused with a message saying history needs the
//! mirror.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde::Serialize;

use super::auth::Caller;
use super::offer_tools::{
    self, ListOffersArgs, ListOffersResult, OfferArgs, OfferResult, OfferView, RejectArgs,
    RejectResult,
};
use super::profiles::{ToolName, WRITER_PROFILES};
use super::tools::{
    self, DeleteArgs, DeleteResult, GetArgs, GetResult, HandoffView, ListArgs, WriteArgs,
    WriteResult,
};
use crate::api::validation::FieldError;
use crate::mirror::{Mirror, MirrorError};
use crate::names::BRIDGE_FIELD_MANAGER;
use crate::offers::decision::Outcome;
use crate::offers::store::{OfferError, OfferStore};
use crate::store::ListQuery;
use crate::telemetry::{BridgeMetrics, ToolCallLabels};

/// Longest a tool call may wait for the apiserver before answering with a
/// retriable error.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// The MCP server of one stdio process or of HTTP requests.
#[derive(Clone)]
pub struct HandoffServer {
    /// The caller of a stdio process; `None` over HTTP, where each request
    /// carries its own (see `http.rs`).
    fixed: Option<Arc<Caller>>,
    metrics: Arc<BridgeMetrics>,
    mirror: Option<Arc<Mirror>>,
    offers: OfferSettings,
}

/// How the offer tools check whether a destination agent is active.
#[derive(Clone)]
pub struct OfferSettings {
    /// The identity that lists agent Jobs (the bridge's own, read-only);
    /// `None`: the caller's.
    pub reader: Option<kube::Client>,
    /// Label selector template of an agent's Jobs (`{to}`, `{project}`).
    pub active_selector: String,
}

/// Why a call failed, classified for the metric and the message.
#[derive(Debug, thiserror::Error)]
enum CallError {
    #[error("{0}")]
    Args(String),
    #[error("{0}")]
    Field(#[from] FieldError),
    #[error("{message}")]
    Kube {
        outcome: &'static str,
        message: String,
    },
    #[error("{0}")]
    Unsupported(String),
    #[error("the handoff mirror (PostgreSQL) is unavailable ({0}); retriable: try again shortly")]
    Mirror(#[from] MirrorError),
    #[error("{0}")]
    Refused(String),
}

impl CallError {
    fn outcome(&self) -> &'static str {
        match self {
            CallError::Args(_) | CallError::Field(_) | CallError::Unsupported(_) => "invalid",
            CallError::Kube { outcome, .. } => outcome,
            CallError::Mirror(_) => "unavailable",
            CallError::Refused(_) => "refused",
        }
    }
}

impl HandoffServer {
    /// A server for one fixed caller (stdio).
    pub fn for_caller(
        caller: Arc<Caller>,
        metrics: Arc<BridgeMetrics>,
        offers: OfferSettings,
    ) -> Self {
        Self {
            fixed: Some(caller),
            metrics,
            mirror: None,
            offers,
        }
    }

    /// A server whose callers come with each HTTP request.
    pub fn per_request(metrics: Arc<BridgeMetrics>, offers: OfferSettings) -> Self {
        Self {
            fixed: None,
            metrics,
            mirror: None,
            offers,
        }
    }

    fn offer_store(&self, caller: &Caller) -> OfferStore {
        let reader = self
            .offers
            .reader
            .clone()
            .unwrap_or_else(|| caller.client().clone());
        let namespace = caller.store().namespace();
        OfferStore::new(
            caller.client().clone(),
            reader,
            namespace,
            &self.offers.active_selector,
            BRIDGE_FIELD_MANAGER,
        )
    }

    async fn dispatch_offer(
        &self,
        caller: &Caller,
        tool: ToolName,
        args: Option<rmcp::model::JsonObject>,
    ) -> Result<(serde_json::Value, String), CallError> {
        let store = self.offer_store(caller);
        let fail = |e| offer_error(caller, tool, e);
        match tool {
            ToolName::Offer => {
                let args: OfferArgs = tools::parse_args(tool, args).map_err(CallError::Args)?;
                let (spec, if_absent) = offer_tools::offer_spec(args)?;
                let (outcome, offer) = store.offer(&spec, if_absent).await.map_err(fail)?;
                let result = OfferResult {
                    outcome,
                    offer: offer.as_ref().map(OfferView::of),
                };
                let text = offer_tools::offer_text(&spec, &result);
                if outcome == Outcome::AgentAlreadyActive && !if_absent {
                    return Err(CallError::Refused(text));
                }
                Ok((json(&result), text))
            }
            ToolName::ListOffers => {
                let args: ListOffersArgs =
                    tools::parse_args(tool, args).map_err(CallError::Args)?;
                crate::api::validation::project(&args.project)?;
                if let Some(to) = &args.to {
                    crate::api::validation::label_value("to", to)?;
                }
                let offers = store
                    .list(&args.project, args.to.as_deref(), args.phase)
                    .await
                    .map_err(fail)?;
                let result = ListOffersResult {
                    offers: offers.iter().map(OfferView::of).collect(),
                };
                let text = format!(
                    "{} offer(s) in project {}.",
                    result.offers.len(),
                    args.project
                );
                Ok((json(&result), text))
            }
            _ => {
                let args: RejectArgs = tools::parse_args(tool, args).map_err(CallError::Args)?;
                let offer = store.reject(&args.offer).await.map_err(fail)?;
                let text = format!("Offer {} rejected.", args.offer);
                Ok((
                    json(&RejectResult {
                        offer: OfferView::of(&offer),
                    }),
                    text,
                ))
            }
        }
    }

    /// Answers lists and history from `mirror` (see the module docs).
    pub fn with_mirror(mut self, mirror: Option<Arc<Mirror>>) -> Self {
        self.mirror = mirror;
        self
    }

    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Arc<Caller>, McpError> {
        if let Some(caller) = &self.fixed {
            return Ok(caller.clone());
        }
        ctx.extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Arc<Caller>>())
            .cloned()
            .ok_or_else(|| {
                McpError::internal_error(
                    "request reached the server without an authenticated caller",
                    None,
                )
            })
    }

    async fn dispatch(
        &self,
        caller: &Caller,
        tool: ToolName,
        args: Option<rmcp::model::JsonObject>,
    ) -> Result<(serde_json::Value, String), CallError> {
        match tool {
            ToolName::Get => {
                let args: GetArgs = tools::parse_args(tool, args).map_err(CallError::Args)?;
                crate::api::validation::handoff_key(&args.handoff_key)?;
                if let Some(revision) = args.revision {
                    return self.get_revision(caller, &args.handoff_key, revision).await;
                }
                let found = caller
                    .store()
                    .get(&args.handoff_key)
                    .await
                    .map_err(|e| kube_error(caller, tool, e))?;
                let result = GetResult {
                    found: found.is_some(),
                    handoff: found.as_ref().map(HandoffView::of),
                };
                Ok((json(&result), tools::text::get(&args.handoff_key, &result)))
            }
            ToolName::Write => {
                let args: WriteArgs = tools::parse_args(tool, args).map_err(CallError::Args)?;
                let mut request = tools::write_request(args)?;
                let writer = caller
                    .username()
                    .await
                    .map_err(|e| kube_error(caller, tool, e))?;
                request.created_by = Some(writer.to_owned()).filter(|w| !w.is_empty());
                let (outcome, stored) = caller
                    .store()
                    .write(&request)
                    .await
                    .map_err(|e| kube_error(caller, tool, e))?;
                let result = WriteResult {
                    outcome,
                    handoff: HandoffView::of(&stored),
                };
                Ok((json(&result), tools::text::write(&result)))
            }
            ToolName::List => {
                let args: ListArgs = tools::parse_args(tool, args).map_err(CallError::Args)?;
                crate::api::validation::project(&args.project)?;
                let limit = tools::list_limit(args.limit)?;
                let after = tools::list_after(args.cursor.as_deref())?;
                if let Some(mirror) = &self.mirror {
                    authorize(caller, tool, "list").await?;
                    let result = list_from_mirror(mirror, caller, &args, limit).await?;
                    return Ok((json(&result), tools::text::list(&args.project, &result)));
                }
                let query = ListQuery {
                    project: args.project.clone(),
                    repo: args.repo.clone(),
                };
                let sorted = caller
                    .store()
                    .list_sorted(&query)
                    .await
                    .map_err(|e| kube_error(caller, tool, e))?;
                let result = tools::list_page(
                    sorted,
                    after.as_ref(),
                    limit,
                    args.include_body.unwrap_or(false),
                );
                Ok((json(&result), tools::text::list(&args.project, &result)))
            }
            ToolName::Delete => {
                let args: DeleteArgs = tools::parse_args(tool, args).map_err(CallError::Args)?;
                crate::api::validation::handoff_key(&args.handoff_key)?;
                let deleted = caller
                    .store()
                    .delete(&args.handoff_key)
                    .await
                    .map_err(|e| kube_error(caller, tool, e))?;
                let result = DeleteResult {
                    deleted,
                    handoff_key: args.handoff_key,
                };
                Ok((json(&result), tools::text::delete(&result)))
            }
            ToolName::Offer | ToolName::ListOffers | ToolName::RejectOffer => {
                self.dispatch_offer(caller, tool, args).await
            }
        }
    }
}

impl HandoffServer {
    /// `get_handoff{revision}`: from the mirror's history, after an access review.
    async fn get_revision(
        &self,
        caller: &Caller,
        key: &str,
        revision: i64,
    ) -> Result<(serde_json::Value, String), CallError> {
        let Some(mirror) = &self.mirror else {
            return Err(CallError::Unsupported(format!(
                "invalid `revision`: past revisions are kept in the handoff history, which needs the \
                 PostgreSQL mirror, and this bridge runs without it (start it with --postgres-url); \
                 call get_handoff without `revision` for the current handoff of `{key}`"
            )));
        };
        if revision < 1 {
            return Err(FieldError {
                field: "revision",
                rule: "a content revision number, 1 or more".into(),
                problem: format!("got {revision}"),
            }
            .into());
        }
        authorize(caller, ToolName::Get, "get").await?;
        let namespace = caller.store().namespace();
        let row = mirror.revision(namespace, key, revision).await?;
        let result = GetResult {
            found: row.is_some(),
            handoff: row.as_ref().map(|r| HandoffView::of_revision(namespace, r)),
        };
        Ok((
            json(&result),
            tools::text::get_revision(key, revision, &result),
        ))
    }
}

/// Refuses `caller` unless RBAC lets it `verb` handoffs: the same Forbidden
/// message the apiserver's refusal produces.
async fn authorize(caller: &Caller, tool: ToolName, verb: &str) -> Result<(), CallError> {
    let allowed = caller
        .may(verb)
        .await
        .map_err(|e| kube_error(caller, tool, e))?;
    if allowed {
        return Ok(());
    }
    let namespace = caller.store().namespace();
    let user = caller
        .username()
        .await
        .map_err(|e| kube_error(caller, tool, e))?
        .to_owned();
    let message = forbidden_message(&user, verb, namespace);
    let status = kube::core::Status::failure(&message, "Forbidden").with_code(403);
    Err(kube_error(caller, tool, kube::Error::Api(status.boxed())))
}

/// The apiserver's wording of an RBAC refusal on handoffs.
pub fn forbidden_message(user: &str, verb: &str, namespace: &str) -> String {
    format!(
        "handoffs.{group} is forbidden: User \"{user}\" cannot {verb} resource \"handoffs\" in API group \"{group}\" in the namespace \"{namespace}\"",
        group = crate::api::GROUP
    )
}

/// One `list_handoffs` page from the mirror.
async fn list_from_mirror(
    mirror: &Mirror,
    caller: &Caller,
    args: &ListArgs,
    limit: usize,
) -> Result<tools::ListResult, CallError> {
    let after = match tools::mirror_start(args.cursor.as_deref())? {
        tools::MirrorStart::PastEnd => {
            return Ok(tools::ListResult {
                handoffs: Vec::new(),
                next_cursor: None,
            });
        }
        tools::MirrorStart::Top => None,
        tools::MirrorStart::After(after) => Some(after),
    };
    let repo = args.repo.as_deref().filter(|r| !r.is_empty());
    let fetch = i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1);
    let rows = mirror
        .list(
            caller.store().namespace(),
            &args.project,
            repo,
            after.as_ref(),
            fetch,
        )
        .await?;
    Ok(tools::mirror_page(
        rows,
        limit,
        args.include_body.unwrap_or(false),
    ))
}

/// An offer failure as an agent-actionable message.
fn offer_error(caller: &Caller, tool: ToolName, err: OfferError) -> CallError {
    match err {
        OfferError::Kube(e) => kube_error(caller, tool, e),
        busy @ OfferError::Busy { .. } => CallError::Kube {
            outcome: "unavailable",
            message: busy.to_string(),
        },
        missing @ OfferError::NotFound(_) => CallError::Args(missing.to_string()),
    }
}

fn json<T: Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or_default()
}

/// The verb RBAC checks for a tool, for Forbidden messages.
fn verb(tool: ToolName) -> &'static str {
    match tool {
        ToolName::Get => "get",
        ToolName::List => "list",
        ToolName::Write => "write (get, create, patch)",
        ToolName::Delete => "delete",
        ToolName::Offer => "offer (create, patch) to",
        ToolName::ListOffers => "list offers of",
        ToolName::RejectOffer => "reject offers of",
    }
}

/// An apiserver error as an agent-actionable message.
fn kube_error(caller: &Caller, tool: ToolName, err: kube::Error) -> CallError {
    let namespace = caller.store().namespace();
    let (outcome, message) = match &err {
        // An admission policy (not RBAC) refused the object: say which, and why.
        kube::Error::Api(status)
            if status.code == 403 && status.message.contains("ValidatingAdmissionPolicy") =>
        {
            (
                "forbidden",
                format!("an admission policy refused the write: {}", status.message),
            )
        }
        kube::Error::Api(status) if status.code == 403 => (
            "forbidden",
            format!(
                "identity {} may not {} handoffs in namespace {namespace} (the apiserver's RBAC refused: {})",
                caller.known_username(),
                verb(tool),
                status.message
            ),
        ),
        kube::Error::Api(status) if status.code == 401 => (
            "forbidden",
            "the apiserver did not accept your credentials (an expired token?)".to_owned(),
        ),
        kube::Error::Api(status) if status.code == 422 || status.code == 400 => (
            "invalid",
            format!("the apiserver refused the handoff: {}", status.message),
        ),
        kube::Error::Api(status) if status.code == 429 || status.code >= 500 => (
            "unavailable",
            format!(
                "the Kubernetes API is temporarily unavailable ({}: {}); retriable: try again shortly",
                status.code, status.message
            ),
        ),
        kube::Error::Api(status) => (
            "error",
            format!("the apiserver answered {}: {}", status.code, status.message),
        ),
        other => (
            "unavailable",
            format!("the Kubernetes API is unreachable ({other}); retriable: try again shortly"),
        ),
    };
    CallError::Kube { outcome, message }
}

/// The profile label of the metric: a contract profile, or `other`.
fn profile_label(caller: &Caller) -> String {
    WRITER_PROFILES
        .into_iter()
        .find(|p| p.eq_ignore_ascii_case(caller.profile().as_str()))
        .unwrap_or("other")
        .to_owned()
}

impl ServerHandler for HandoffServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("handoff", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Handoffs are compact summaries that let an agent continue a conversation without its transcript. \
                 At start: get_handoff with the continuation key from your preamble (none: start fresh). \
                 Before you finish: write_handoff with a compact markdown summary.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let caller = self.caller(&ctx)?;
        let tools = caller
            .profile()
            .tools()
            .into_iter()
            .map(tools::definition)
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(tool) = ToolName::parse(&request.name) else {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool `{}`: this server offers get_handoff, write_handoff, list_handoffs, delete_handoff",
                    request.name
                ),
                None,
            ));
        };
        let caller = self.caller(&ctx)?;
        let started = Instant::now();
        let (result, outcome) = if !caller.profile().allows(tool) {
            (
                CallToolResult::error(vec![ContentBlock::text(caller.profile().refusal(tool))]),
                "refused",
            )
        } else {
            match tokio::time::timeout(
                CALL_TIMEOUT,
                self.dispatch(&caller, tool, request.arguments),
            )
            .await
            {
                Ok(Ok((structured, text))) => {
                    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                    result.structured_content = Some(structured);
                    (result, "ok")
                }
                Ok(Err(err)) => {
                    let outcome = err.outcome();
                    (
                        CallToolResult::error(vec![ContentBlock::text(err.to_string())]),
                        outcome,
                    )
                }
                Err(_) => (
                    CallToolResult::error(vec![ContentBlock::text(format!(
                        "the Kubernetes API did not answer within {}s; retriable: try again shortly",
                        CALL_TIMEOUT.as_secs()
                    ))]),
                    "unavailable",
                ),
            }
        };
        let labels = ToolCallLabels {
            tool: tool.as_str().to_owned(),
            profile: profile_label(&caller),
            outcome: outcome.to_owned(),
        };
        tracing::info!(tool = %tool, profile = %labels.profile, outcome, elapsed_ms = started.elapsed().as_millis() as u64, "tool call");
        self.metrics.record(labels, started.elapsed());
        Ok(result.into())
    }
}
