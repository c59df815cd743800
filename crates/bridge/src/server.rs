//! The MCP server: `tools/list` shows the tools of the caller's profile,
//! `tools/call` looks the tool up in the one table (`tools::TOOLS`) and
//! dispatches it ([`Services::dispatch`]: refused when the profile does not
//! have it, else its handler within the call timeout, with the caller's
//! credentials); every failure becomes a message an agent can act on, and
//! every call a metric.
//!
//! Resources (`handoff://{handoff_key}`, see `resources`) and the prompt
//! `continue` (see `prompts`) are gated like `get_handoff` and read the
//! current handoff as the caller, as it does ([`HandoffServer::current`]).
//!
//! With a mirror (`handoff mcp` with `HANDOFF_POSTGRES_URL`), the handlers of
//! `list_handoffs` and `get_handoff{revision}` answer from PostgreSQL after
//! an access review (see `tools::list`, `tools::get`).

use std::sync::Arc;
use std::time::Instant;

use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListToolsResult, PaginatedRequestParams, PromptMessage,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Role, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};

use super::auth::Caller;
use super::call::{CALL_TIMEOUT, OfferSettings, Services, Unanswered, timed_out};
use super::tools;
use super::tools::contract::Tool;
use super::tools::views::HandoffView;
use super::{prompts, resources};
use handoff_core::api::Handoff;
use handoff_kube::settings::{Budgets, READ_TIMEOUT};
use handoff_kube::telemetry::{BridgeMetrics, ToolCallLabels};
use handoff_mirror::Mirror;

/// The MCP server of one stdio process or of HTTP requests.
#[derive(Clone)]
pub(crate) struct HandoffServer {
    /// The caller of a stdio process; `None` over HTTP, where each request
    /// carries its own (see `http.rs`).
    fixed: Option<Arc<Caller>>,
    metrics: Arc<BridgeMetrics>,
    services: Services,
}

impl HandoffServer {
    /// A server for one fixed caller (stdio); the namespace's lint budget
    /// is read with the caller's own credentials.
    pub(crate) fn for_caller(
        caller: Arc<Caller>,
        metrics: Arc<BridgeMetrics>,
        offers: OfferSettings,
    ) -> Self {
        let budgets = Arc::new(Budgets::new(caller.client().clone(), READ_TIMEOUT));
        Self {
            fixed: Some(caller),
            metrics,
            services: Services {
                mirror: None,
                offers,
                budgets,
            },
        }
    }

    /// A server whose callers come with each HTTP request; `budgets` is
    /// shared by every request (read with the bridge's own identity).
    pub(crate) fn per_request(
        metrics: Arc<BridgeMetrics>,
        offers: OfferSettings,
        budgets: Arc<Budgets>,
    ) -> Self {
        Self {
            fixed: None,
            metrics,
            services: Services {
                mirror: None,
                offers,
                budgets,
            },
        }
    }

    /// Answers lists and history from `mirror` (see the module docs).
    pub(crate) fn with_mirror(mut self, mirror: Option<Arc<Mirror>>) -> Self {
        self.services.mirror = mirror;
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

    /// Runs `tool` for `caller` (see [`Services::dispatch`]): the result
    /// and the outcome label of the metric.
    async fn run(
        &self,
        tool: &'static Tool,
        caller: &Caller,
        args: Option<rmcp::model::JsonObject>,
    ) -> (CallToolResult, &'static str) {
        let error = |text: String| CallToolResult::error(vec![ContentBlock::text(text)]);
        match self.services.dispatch(tool, caller, args).await {
            Ok((structured, text)) => {
                let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                result.structured_content = Some(structured);
                (result, "ok")
            }
            Err(Unanswered::Hidden(refusal)) => (error(refusal), "refused"),
            Err(Unanswered::Failed(err)) => (error(err.to_string()), err.outcome()),
            Err(Unanswered::TimedOut) => (error(timed_out()), "unavailable"),
        }
    }

    /// The current handoff of `key`, read as `caller` with `get_handoff`'s
    /// gate, timeout and error messages: what resources and the `continue`
    /// prompt serve.
    async fn current(&self, caller: &Caller, key: &str) -> Result<Option<Handoff>, McpError> {
        gate(caller)?;
        let call = self.services.call(&tools::get::TOOL, caller);
        match tokio::time::timeout(CALL_TIMEOUT, caller.store().get(key)).await {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(err)) => Err(McpError::internal_error(
                call.kube_error(err).to_string(),
                None,
            )),
            Err(_) => Err(McpError::internal_error(timed_out(), None)),
        }
    }
}

/// Refuses a caller whose profile may not `get_handoff`: resources and
/// prompts are gated as it is.
fn gate(caller: &Caller) -> Result<(), McpError> {
    let tool = &tools::get::TOOL;
    if tool.visible_to(caller.profile()) {
        return Ok(());
    }
    Err(McpError::invalid_request(
        caller.profile().refusal(tool.name, tool.audience),
        None,
    ))
}

/// `item` when the caller passes [`gate`], else nothing: what the lists of
/// resources and prompts show.
fn gated<T>(caller: &Caller, item: impl FnOnce() -> T) -> Vec<T> {
    match gate(caller) {
        Ok(()) => vec![item()],
        Err(_) => Vec::new(),
    }
}

/// The profile label of the metric: a contract profile, or `other`.
fn profile_label(caller: &Caller) -> String {
    caller.profile().canonical().unwrap_or("other").to_owned()
}

impl ServerHandler for HandoffServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .build(),
        )
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
        let tools = tools::for_profile(caller.profile())
            .map(|t| (t.definition)())
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = self.caller(&ctx)?;
        let Some(tool) = tools::find(&request.name) else {
            return Err(McpError::invalid_params(
                tools::unknown(&request.name, caller.profile()),
                None,
            ));
        };
        let started = Instant::now();
        let (result, outcome) = self.run(tool, &caller, request.arguments).await;
        let labels = ToolCallLabels {
            tool: tool.name.to_owned(),
            profile: profile_label(&caller),
            outcome: outcome.to_owned(),
        };
        tracing::info!(tool = tool.name, profile = %labels.profile, outcome, elapsed_ms = started.elapsed().as_millis() as u64, "tool call");
        self.metrics.record(labels, started.elapsed());
        Ok(result.into())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let caller = self.caller(&ctx)?;
        Ok(ListResourceTemplatesResult::with_all_items(gated(
            &caller,
            resources::template,
        )))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let caller = self.caller(&ctx)?;
        gate(&caller)?;
        let uri = request.uri;
        let key = resources::key_of(&uri).map_err(|e| McpError::invalid_params(e, None))?;
        let started = Instant::now();
        let found = self.current(&caller, &key).await;
        tracing::info!(resource = %uri, profile = %profile_label(&caller), found = matches!(found, Ok(Some(_))), elapsed_ms = started.elapsed().as_millis() as u64, "resource read");
        match found? {
            Some(handoff) => Ok(ReadResourceResult::new(vec![resources::contents(
                &uri,
                &handoff.spec.body,
            )])
            .into()),
            None => Err(McpError::resource_not_found(
                resources::not_found(&key, &uri),
                Some(serde_json::json!({ "uri": uri, "handoff_key": key })),
            )),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let caller = self.caller(&ctx)?;
        Ok(ListPromptsResult::with_all_items(gated(
            &caller,
            prompts::definition,
        )))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let caller = self.caller(&ctx)?;
        gate(&caller)?;
        if request.name != prompts::CONTINUE {
            return Err(McpError::invalid_params(
                format!(
                    "unknown prompt `{}`: the prompt is `{}`",
                    request.name,
                    prompts::CONTINUE
                ),
                None,
            ));
        }
        let key = prompts::key_arg(request.arguments.as_ref())
            .map_err(|e| McpError::invalid_params(e, None))?;
        let found = self.current(&caller, &key).await?;
        let text = prompts::text(&key, found.as_ref().map(HandoffView::of));
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description(format!("Continue the conversation `{key}`"))
                .into(),
        )
    }
}
