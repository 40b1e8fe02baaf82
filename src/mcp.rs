//! The MCP server: the library's operations as tools for agents, over
//! stdio. Only this module knows the protocol; each tool validates its
//! arguments, makes one `Session` call and returns JSON or markdown.
//!
//! One `Session` is kept warm and shared by all calls; a watcher thread
//! re-opens (and so updates) the index after a burst of changes and swaps
//! the new session in, so calls never wait for an update.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock as Content, Extensions, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, Implementation, ListPromptsResult, ListResourcesResult,
    PaginatedRequestParams, Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ResourceContents, Role, ServerCapabilities,
    ServerConfig, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{
    ErrorData as McpError, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router,
};
use serde::Deserialize;

use crate::assemble::AssembleRequest;
use crate::pack::style::{Shape, Style};
use crate::pack::{PackMode, PackOptions};
use crate::progress::Progress;
use crate::request::{
    DEFAULT_BUDGET, DEFAULT_SEARCH_LIMIT, Direction, MAX_BUDGET, MAX_DAILIES, MAX_DEPTH,
    MAX_SEARCH_LIMIT_MCP, MAX_SUBQUERIES, PackInput, RankOptions, SearchInput, Spelling,
    source_date_epoch,
};
use crate::session::upkeep::{self, AnnChoice, QmdConfig, QmdError, VectorFormat};
use crate::session::{
    IndexChoice, LoggedPack, ModelChoice, NoteRequest, PackRequest, Session, StoreTarget,
};
use crate::tokens::Tokenizer;

pub(crate) mod filters;
mod http_hosts;
mod lenient;
pub(crate) mod packs;
mod resources;
mod seen;
mod stdio;

/// What the server serves.
#[derive(Clone, Debug)]
pub(crate) struct ServeOptions {
    pub root: PathBuf,
    pub index_dir: Option<PathBuf>,
    pub model: ModelChoice,
    pub qmd: Option<Result<QmdConfig, QmdError>>,
    pub reranker: Option<PathBuf>,
    /// When the semantic arm uses its HNSW graph.
    pub ann: AnnChoice,
    /// How the vectors are stored (`None`: as they are).
    pub vectors: Option<VectorFormat>,
    pub limits: ServeLimits,
    /// Serve a vault from a PostgreSQL store (the folder is never read).
    pub store: Option<StoreTarget>,
    /// Whether packs append their line to the vault's `log.md` (as its
    /// `log:` setting allows); `serve --no-log` turns it off.
    pub log: bool,
}

/// What one client may cost the server.
#[derive(Clone, Debug)]
pub(crate) struct ServeLimits {
    /// Tool calls running at once; more wait for a turn.
    pub concurrent_calls: usize,
    /// A call (waiting for its turn included) is abandoned after this.
    pub call_timeout: Duration,
    /// Open HTTP sessions; a new one past this is refused (503).
    pub max_sessions: usize,
    /// A tool result larger than this (under the pack's counter) returns
    /// its first part and a pack handle.
    pub max_result_tokens: usize,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            concurrent_calls: 8,
            call_timeout: Duration::from_secs(60),
            max_sessions: 64,
            max_result_tokens: DEFAULT_MAX_RESULT_TOKENS,
        }
    }
}

/// How the tools fit together, for the agent (the server's `instructions`).
const INSTRUCTIONS: &str = "\
ctxpack serves a Markdown vault (a folder of notes) and nothing outside it; \
all tools work offline on that folder.
- To gather what the vault knows about a topic in one call, use context_pack \
with a query and a budget_tokens that fits your context: it returns the most \
relevant notes, compressed and never over the budget. Use note=PATH instead of \
query for the context around one note, or recent=true for the latest notes.
- To look around first, use search (ranked paths with the best sentence of \
each), then get_note to read one note whole, one heading's section or a line \
range.
- A result too large for one answer comes in parts: its pack_handle and \
next_offset go to read_pack for the next part; grep_pack finds lines in that \
pack and gives offsets to read from.
- After using a note, mark_useful records whether it helped; later searches \
rank by that feedback.
- Meeting a vault for the first time, context_pack with map=true (or the \
ctxpack://map resource) gives a budgeted overview: folders, hub notes, tags, \
latest activity. exclude_seen=true leaves out notes this session already \
received whole; fence=true marks the vault's text as quoted data.
- status describes the vault and its index (note count, problems found).
Only context_pack (one line in the vault's log.md, where there is one) and \
mark_useful (a vote kept beside the index) write anything; the other tools \
only read.";

/// Added to [`INSTRUCTIONS`] where the served folder is a writing project.
const ASSEMBLE_INSTRUCTIONS: &str = "\
This folder is a writing project: assemble builds one agent's layered context \
for a unit (chapter) of a work, as the project's recipe says, and saves a \
review copy where the recipe names one. Agents of the same unit share its \
first part byte for byte.";

/// How often a server embedding in the background re-opens its session,
/// so calls search the chunks embedded so far (each re-opening reads the
/// journal of what is embedded).
const REOPEN_WHILE_EMBEDDING: Duration = Duration::from_secs(30);

/// Below the ~25,000 tokens at which a popular client truncates results.
pub(crate) const DEFAULT_MAX_RESULT_TOKENS: usize = 20_000;

/// An incoming JSON-RPC line longer than this is answered with an error
/// and dropped (a tool's arguments are far smaller).
pub(crate) const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// Serves MCP over stdin/stdout until the client disconnects.
pub(crate) fn serve_stdio(options: ServeOptions) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("start the async runtime")?;
    let served = runtime.block_on(async move {
        let (server, failure) =
            CtxpackServer::open_in_background(options, tokio::runtime::Handle::current())?;
        let (to_server, from_client) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(from_client);
        let guard = tokio::spawn(stdio::relay(to_server, MAX_MESSAGE_BYTES));
        let service = server
            .serve((server_read, server_write))
            .await
            .context("start the MCP session")?;
        let served = tokio::select! {
            served = service.waiting() => served.context("serve MCP"),
            Ok(err) = failure => return Err(err),
        };
        // The server's last answers are still in the relay: write them out.
        let _ = guard.await;
        served?;
        Ok(())
    });
    if served.is_err() {
        // Stdin is read by a blocking read that nothing can cancel: a
        // server that could not open its vault does not wait for input.
        runtime.shutdown_background();
    }
    served
}

/// Serves MCP over streamable HTTP at `/mcp` on `address` until
/// interrupted. A bind outside loopback needs a bearer `token`; the `Host`
/// header must name the server (loopback names, the bound address, or one of
/// `extra_hosts`) and a browser's `Origin` one of those hosts (DNS-rebinding
/// protection).
pub(crate) fn serve_http(
    options: ServeOptions,
    address: SocketAddr,
    token: Option<String>,
    extra_hosts: Vec<String>,
) -> Result<()> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };

    if !address.ip().is_loopback() && token.is_none() {
        anyhow::bail!("serving on {address}, outside loopback, needs --token");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("start the async runtime")?;
    runtime.block_on(async move {
        let max_sessions = options.limits.max_sessions;
        let (server, failure) =
            CtxpackServer::open_in_background(options, tokio::runtime::Handle::current())?;
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("cannot listen on {address}"))?;
        let bound = listener.local_addr()?;
        let hosts = http_hosts::allowed(bound, &extra_hosts);
        let origins: Vec<String> = hosts
            .iter()
            .map(|h| {
                if h.contains(':') && !h.starts_with('[') {
                    format!("http://[{h}]:{}", bound.port())
                } else {
                    format!("http://{h}:{}", bound.port())
                }
            })
            .collect();
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_allowed_origins(origins);
        let sessions = Arc::new(LocalSessionManager::default());
        // Each HTTP session gets its own server object, which owns what
        // that session has received (`exclude_seen`).
        let service = StreamableHttpService::new(
            move || Ok(server.for_new_session()),
            Arc::clone(&sessions),
            config,
        );
        let token = Arc::new(token);
        // Sessions open one at a time, so the count checked is the count
        // the new session joins (checked and opened apart, 60 concurrent
        // initializes opened 7 sessions under a limit of 2).
        let opening = Arc::new(tokio::sync::Mutex::new(()));
        let router =
            axum::Router::new()
                .nest_service("/mcp", service)
                .layer(axum::middleware::from_fn(
                    move |request: axum::extract::Request, next: axum::middleware::Next| {
                        let token = Arc::clone(&token);
                        let sessions = Arc::clone(&sessions);
                        let opening = Arc::clone(&opening);
                        async move {
                            if let Some(refused) = check_bearer(token.as_deref(), &request) {
                                return refused;
                            }
                            if request.method() == axum::http::Method::DELETE {
                                return end_session(&sessions, request, next).await;
                            }
                            let opens_session = request.method() == axum::http::Method::POST
                                && !request.headers().contains_key("mcp-session-id");
                            if !opens_session {
                                return next.run(request).await;
                            }
                            // The body is read first, so a client sending
                            // it slowly holds no other opening up.
                            let request = match read_body(request).await {
                                Ok(request) => request,
                                Err(refused) => return refused,
                            };
                            let _opening = opening.lock().await;
                            if let Some(refused) = check_sessions(&sessions, max_sessions).await {
                                return refused;
                            }
                            // The session is in the manager's table when
                            // the answer to its `initialize` comes back.
                            next.run(request).await
                        }
                    },
                ));
        eprintln!("ctxpack: serving MCP at http://{bound}/mcp");
        let served = axum::serve(listener, router).with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        });
        tokio::select! {
            served = std::future::IntoFuture::into_future(served) => {
                served.context("serve MCP over HTTP")?;
            }
            Ok(err) = failure => return Err(err),
        }
        Ok(())
    })
}

/// Refuses a request without the expected `Authorization: Bearer` token
/// (the scheme is case-insensitive, as HTTP says).
fn check_bearer(
    token: Option<&str>,
    request: &axum::extract::Request,
) -> Option<axum::response::Response> {
    use axum::response::IntoResponse;
    let token = token?;
    let given = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, credentials)| credentials.trim());
    let matches = given.is_some_and(|given| {
        // Compared in constant time, so the token cannot be guessed byte by byte.
        given.len() == token.len()
            && given
                .bytes()
                .zip(token.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    });
    (!matches).then(|| {
        (
            axum::http::StatusCode::UNAUTHORIZED,
            [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
            "missing or wrong bearer token",
        )
            .into_response()
    })
}

/// `request` with its body read into memory (at most [`MAX_MESSAGE_BYTES`]).
async fn read_body(
    request: axum::extract::Request,
) -> Result<axum::extract::Request, axum::response::Response> {
    use axum::response::IntoResponse;
    let (parts, body) = request.into_parts();
    match axum::body::to_bytes(body, MAX_MESSAGE_BYTES).await {
        Ok(bytes) => Ok(axum::extract::Request::from_parts(
            parts,
            axum::body::Body::from(bytes),
        )),
        Err(_) => Err((
            axum::http::StatusCode::BAD_REQUEST,
            format!("cannot read the request body (at most {MAX_MESSAGE_BYTES} bytes)"),
        )
            .into_response()),
    }
}

/// A DELETE ends the session it names, as the protocol says: 204 when it
/// was open, 404 when no such session is (rmcp answers 202 either way, and
/// clients take 202 for a failed termination).
async fn end_session(
    sessions: &rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    let Some(id) = request
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_string)
    else {
        return (
            StatusCode::BAD_REQUEST,
            "a DELETE names the session it ends (Mcp-Session-Id)",
        )
            .into_response();
    };
    let open = sessions
        .sessions
        .read()
        .await
        .keys()
        .any(|session| session.as_ref() == id.as_str());
    if !open {
        return (StatusCode::NOT_FOUND, "no such session").into_response();
    }
    let response = next.run(request).await;
    if response.status() == StatusCode::ACCEPTED {
        return StatusCode::NO_CONTENT.into_response();
    }
    response
}

/// Refuses a request that would open a session past the limit.
async fn check_sessions(
    sessions: &rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
    max_sessions: usize,
) -> Option<axum::response::Response> {
    use axum::response::IntoResponse;
    if sessions.sessions.read().await.len() >= max_sessions {
        return Some(
            (
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "too many open MCP sessions (limit {max_sessions}); close one or retry later"
                ),
            )
                .into_response(),
        );
    }
    None
}

#[derive(Clone)]
pub(crate) struct CtxpackServer {
    state: Arc<State>,
    tool_router: ToolRouter<Self>,
    /// The notes this session received whole: one memory per MCP session.
    seen: Arc<seen::SeenNotes>,
}

impl CtxpackServer {
    /// The server for a new HTTP session: the shared state, and a memory
    /// of received notes of its own.
    fn for_new_session(&self) -> CtxpackServer {
        CtxpackServer {
            seen: Arc::default(),
            ..self.clone()
        }
    }
}

struct State {
    options: ServeOptions,
    /// `None` until the first open ends: a server answers `initialize`
    /// before its vault and model are open, and calls wait for them.
    session: Mutex<Option<Arc<Session>>>,
    /// Told when a session is put in place.
    opened: Condvar,
    /// Turns on the blocking pool: one per call running at once.
    turns: Arc<tokio::sync::Semaphore>,
    /// Packs too large for one result, read on by handle.
    packs: packs::PackStore,
    /// Notes clients subscribed to, told when the watcher sees them change.
    subscriptions: resources::Subscriptions,
    /// The time packs are stamped with when `SOURCE_DATE_EPOCH` fixes it
    /// (reproducible output is the server's setting, not a tool argument
    /// an agent would have to know about).
    generated_at: Option<DateTime<Utc>>,
}

impl State {
    fn session(&self) -> Arc<Session> {
        let current = self.current();
        // A store another process synced: every call sees its last commit.
        if current.is_stale() {
            match self.reopen() {
                Ok(()) => return self.current(),
                Err(err) => eprintln!("ctxpack: warning: cannot reopen the store: {err:#}"),
            }
        }
        current
    }

    /// The session in place, waited for while the first one opens.
    fn current(&self) -> Arc<Session> {
        let mut session = self
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            if let Some(current) = session.as_ref() {
                return Arc::clone(current);
            }
            session = self
                .opened
                .wait(session)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// The time a pack is stamped with: fixed, or now.
    fn now(&self) -> DateTime<Utc> {
        self.generated_at.unwrap_or_else(Utc::now)
    }

    fn reopen(&self) -> Result<()> {
        let fresh = Arc::new(open_session(&self.options)?);
        *self
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(fresh);
        self.opened.notify_all();
        Ok(())
    }
}

fn open_session(options: &ServeOptions) -> Result<Session> {
    Session::open(
        &options.root,
        &IndexChoice {
            dir: options.index_dir.clone(),
            progress: Progress::none(),
            model: options.model.clone(),
            qmd: options.qmd.clone(),
            reranker: options.reranker.clone(),
            ann: options.ann,
            vectors: options.vectors,
            // (Over a writing project the session hides every library no
            // work binds, as on the command line.)
            hidden: Vec::new(),
            store: options.store.clone(),
            embed_into_store: false,
        },
    )
}

/// The `tokenizer` and `format` arguments: the counter, and whether JSON
/// was asked for.
fn counter_and_format(
    tokenizer: Option<&str>,
    format: Option<&str>,
) -> Result<(Tokenizer, bool), String> {
    let tokenizer = tokenizer.unwrap_or("chars4").parse()?;
    match format.unwrap_or("markdown") {
        "markdown" => Ok((tokenizer, false)),
        "json" => Ok((tokenizer, true)),
        other => Err(format!("format must be markdown or json, got '{other}'")),
    }
}

/// The HTTP session a request came in (its `Mcp-Session-Id`); `None` over
/// stdio, where the one client owns everything.
fn session_of(extensions: &Extensions) -> Option<String> {
    extensions
        .get::<axum::http::request::Parts>()?
        .headers
        .get("mcp-session-id")?
        .to_str()
        .ok()
        .map(str::to_string)
}

/// The notes a pack shows whole (pages and dailies printed in full): a
/// client that received the pack has them.
fn whole_notes(pack: &crate::pack::Pack) -> Vec<String> {
    pack.pages
        .iter()
        .chain(&pack.dailies)
        .filter(|page| page.body_mode == crate::pack::BodyMode::Full)
        .map(|page| page.path.clone())
        .collect()
}

/// The one answer for every note path that is not a readable listed note
/// (outside the vault, absolute, hidden, skipped, private, missing, a
/// symlink leading out): it repeats only what the caller sent, so it tells
/// neither where the vault is, nor whether a hidden file exists, nor where a
/// link points.
fn timed_out(tool: &str, limit: Duration) -> CallToolResult {
    tool_error(format!(
        "the {tool} call took longer than {} s and was abandoned",
        limit.as_secs_f64()
    ))
}

fn tool_error(message: impl std::fmt::Display) -> CallToolResult {
    CallToolResult::error(vec![Content::text(message.to_string())])
}

/// What the note after a pack's part costs at most (its offsets written
/// with the most digits they can have).
fn continuation_cost(
    handle: &str,
    total_bytes: usize,
    total_tokens: usize,
    tokenizer: Tokenizer,
) -> usize {
    let widest = packs::Continuation {
        pack_handle: handle,
        total_bytes,
        total_tokens,
        next_offset: Some(total_bytes),
        hint: packs::READ_ON,
    };
    tokenizer.count(&serde_json::to_string_pretty(&widest).unwrap_or_default())
}

fn json_result<T: serde::Serialize>(value: &T) -> CallToolResult {
    match serde_json::to_string_pretty(value) {
        Ok(text) => CallToolResult::success(vec![Content::text(text)]),
        Err(err) => tool_error(format!("cannot encode the result: {err}")),
    }
}

/// A tool error naming the arguments no field takes, as serde names an
/// unknown field of the tools without filters.
fn no_unknown_arguments(
    unknown: &std::collections::BTreeMap<String, serde_json::Value>,
) -> Result<(), CallToolResult> {
    match unknown.keys().next() {
        None => Ok(()),
        Some(name) => Err(tool_error(format!(
            "invalid arguments: unknown field `{name}` (see the tool's input schema)"
        ))),
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct SearchArgs {
    #[schemars(description = "What to look for; any text, taken literally")]
    pub query: String,
    #[schemars(description = format!("How many results (1-{MAX_SEARCH_LIMIT_MCP}, default {DEFAULT_SEARCH_LIMIT})"))]
    #[schemars(range(min = 1, max = MAX_SEARCH_LIMIT_MCP))]
    #[serde(default, deserialize_with = "lenient::count")]
    pub limit: Option<usize>,
    #[schemars(description = "Only notes under this folder, e.g. 'concepts'")]
    pub folder: Option<String>,
    #[schemars(description = "Include why each note ranked where it did")]
    #[serde(default, deserialize_with = "lenient::flag")]
    pub explain: Option<bool>,
    #[serde(flatten)]
    pub filters: filters::FilterArgs,
    /// Arguments no field takes (`budget` for `budget_tokens`): refused,
    /// never ignored. serde cannot deny them beside a flattened field.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: std::collections::BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct ContextPackArgs {
    #[schemars(description = "The topic or question to pack context for (omit with recent=true)")]
    pub query: Option<String>,
    #[schemars(description = format!("Up to {MAX_SUBQUERIES} further questions to gather evidence for"))]
    #[schemars(length(max = MAX_SUBQUERIES))]
    pub subqueries: Option<Vec<String>>,
    #[schemars(description = format!("Token budget for the whole pack (1-{MAX_BUDGET}, default {DEFAULT_BUDGET})"))]
    #[schemars(range(min = 1, max = MAX_BUDGET))]
    #[serde(default, deserialize_with = "lenient::count")]
    pub budget_tokens: Option<usize>,
    #[schemars(description = "Pack the most recently updated notes instead of a topic")]
    #[serde(default, deserialize_with = "lenient::flag")]
    pub recent: Option<bool>,
    #[schemars(description = "Add backlink entries under the top pages (default true)")]
    #[serde(default, deserialize_with = "lenient::flag")]
    pub include_backlinks: Option<bool>,
    #[schemars(description = format!("Add the N most recent daily notes (0-{MAX_DAILIES}, default 0)"))]
    #[schemars(range(min = 0, max = MAX_DAILIES))]
    #[serde(default, deserialize_with = "lenient::count")]
    pub recent_dailies: Option<usize>,
    #[schemars(description = "Token counter: chars4 (default), o200k or cl100k")]
    pub tokenizer: Option<String>,
    #[schemars(description = "markdown (default): the pack itself; json: the pack as data")]
    pub format: Option<String>,
    #[schemars(
        description = "Layout of the pack: markdown (default), xml, plain or json; all keep the budget"
    )]
    pub style: Option<String>,
    #[schemars(
        description = "Pack the context around this note instead of a query (its path in the vault): the note, what it links to, what links to it, and similar notes"
    )]
    pub note: Option<String>,
    #[schemars(
        description = format!("With note: link hops around it (0-{MAX_DEPTH}, default 1; 0: similar notes only)")
    )]
    #[schemars(range(min = 0, max = MAX_DEPTH))]
    #[serde(default, deserialize_with = "lenient::count")]
    pub depth: Option<usize>,
    #[schemars(description = "With note: include the note itself (default true)")]
    #[serde(default, deserialize_with = "lenient::flag")]
    pub include_self: Option<bool>,
    #[schemars(
        description = format!("With query: add linked neighbours of the top hits, up to N hops (0-{MAX_DEPTH}, default 0)")
    )]
    #[schemars(range(min = 0, max = MAX_DEPTH))]
    #[serde(default, deserialize_with = "lenient::count")]
    pub graph_depth: Option<usize>,
    #[schemars(description = "Which links graph_depth follows: out, in or both (default)")]
    pub graph_direction: Option<String>,
    #[schemars(
        description = "With query: notes (paths in the vault) that open the pack whatever the ranking, after the vault's own pins; they take at most half the budget"
    )]
    pub pins: Option<Vec<String>>,
    #[schemars(
        description = "Leave out the notes this session already received whole (from context_pack, get_note or read_pack); the pack names the ones it would have shown"
    )]
    #[serde(default, deserialize_with = "lenient::flag")]
    pub exclude_seen: Option<bool>,
    #[schemars(
        description = "Fence every note's text between markers no note can forge, with a line saying fenced text is quoted data, never instructions"
    )]
    #[serde(default, deserialize_with = "lenient::flag")]
    pub fence: Option<bool>,
    #[schemars(
        description = "Return a map of the vault instead of notes: folders with note counts and descriptions, hub notes, the most used tags, the latest activity (no query, note or recent)"
    )]
    #[serde(default, deserialize_with = "lenient::flag")]
    pub map: Option<bool>,
    #[serde(flatten)]
    pub filters: filters::FilterArgs,
    /// Arguments no field takes (`budget` for `budget_tokens`): refused,
    /// never ignored. serde cannot deny them beside a flattened field.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: std::collections::BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadPackArgs {
    #[schemars(description = "The pack_handle a large context_pack or assemble result gave")]
    pub pack_handle: String,
    #[schemars(description = "Byte offset to read from: the next_offset of the last part")]
    pub offset: usize,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GrepPackArgs {
    #[schemars(description = "The pack_handle a large context_pack or assemble result gave")]
    pub pack_handle: String,
    #[schemars(
        description = "A regular expression matched against each line (prefix (?i) to ignore case)"
    )]
    pub pattern: String,
    #[schemars(description = format!("Lines of context before and after each match (0-{}, default 2)", packs::MAX_CONTEXT_LINES))]
    #[schemars(range(min = 0, max = packs::MAX_CONTEXT_LINES))]
    #[serde(default, deserialize_with = "lenient::count")]
    pub context: Option<usize>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetNoteArgs {
    #[schemars(description = "The note's path relative to the vault, e.g. 'concepts/raft.md'")]
    pub path: String,
    #[schemars(description = "Only the section under this heading")]
    pub heading: Option<String>,
    #[schemars(description = "Only these lines of the file, as 'FROM-TO' (1-based, inclusive)")]
    pub lines: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MarkUsefulArgs {
    #[schemars(description = "The note's path relative to the vault")]
    pub path: String,
    #[schemars(description = "true if the note helped, false if it did not")]
    pub useful: bool,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StatusArgs {}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AssembleArgs {
    #[schemars(description = "The work (book, project) folder name, e.g. '青灯录'")]
    pub work: String,
    #[schemars(
        description = "The scenario, e.g. continuation, rewrite, expansion, polish, extraction, full_parse, planning, validation, consistency_check, quality_gate (the project's recipe lists them)"
    )]
    pub scenario: String,
    #[schemars(description = "The unit (chapter, task) number, from 1")]
    #[schemars(range(min = 1))]
    pub chapter: i64,
    #[schemars(description = "The user's words for this turn, passed on verbatim")]
    pub intent: String,
    #[schemars(
        description = "The agent (default: the scenario's agent): writer, planner, extractor, detector, judge in the novel recipe"
    )]
    pub agent: Option<String>,
    #[schemars(description = format!("Token budget for the whole pack (1-{MAX_BUDGET}, default {})", crate::assemble::DEFAULT_BUDGET))]
    #[schemars(range(min = 1, max = crate::assemble::MAX_BUDGET))]
    #[serde(default, deserialize_with = "lenient::count")]
    pub budget: Option<usize>,
    #[schemars(description = "Token counter: chars4 (default), o200k or cl100k")]
    pub tokenizer: Option<String>,
    #[schemars(
        description = "markdown (default): the pack itself; json: the pack with its report as data"
    )]
    pub format: Option<String>,
    #[schemars(
        description = "Layout of the pack: markdown (default), xml or json; all keep the budget and the shared baseline prefix"
    )]
    pub style: Option<String>,
    #[schemars(description = "The text to rewrite (required by rewrite)")]
    pub selection: Option<String>,
    #[schemars(
        description = "The unit's revision the rewrite expects (required by rewrite; checked)"
    )]
    pub expected_revision: Option<String>,
    #[schemars(description = "This turn's revision comments, placed last")]
    pub comments: Option<Vec<String>>,
    #[schemars(
        description = "The object under review, relative to the project root (default: the unit's own file)"
    )]
    pub candidate: Option<String>,
    #[schemars(
        description = "New references the user names; they join the search for authorized material"
    )]
    pub references: Option<Vec<String>>,
}

#[tool_router]
impl CtxpackServer {
    /// Opens the vault and its index (building or updating it).
    pub(crate) fn open(options: ServeOptions) -> Result<CtxpackServer> {
        let server = Self::unopened(options)?;
        server.state.reopen()?;
        Ok(server)
    }

    /// A server that answers at once (`initialize`, the lists of tools,
    /// resources and prompts) while its vault, index and model open on a
    /// thread of their own (a model's load and a partly embedded vault's
    /// journal took 100-300 ms, past a client's patience); calls wait for
    /// the opening. Once open, the server watches the vault and embeds
    /// what it lacks, on `runtime`. Why the opening failed arrives on the
    /// receiver (nothing arrives when it succeeds).
    fn open_in_background(
        options: ServeOptions,
        runtime: tokio::runtime::Handle,
    ) -> Result<(CtxpackServer, tokio::sync::oneshot::Receiver<anyhow::Error>)> {
        let server = Self::unopened(options)?;
        let (failed, failure) = tokio::sync::oneshot::channel();
        let opening = server.clone();
        std::thread::spawn(move || match opening.state.reopen() {
            Ok(()) => {
                // The watcher announces changes from the runtime.
                let _runtime = runtime.enter();
                opening.watch();
                opening.embed_in_background();
            }
            Err(err) => {
                let _ = failed.send(err);
            }
        });
        Ok((server, failure))
    }

    /// The server with everything but its session, which calls wait for.
    fn unopened(options: ServeOptions) -> Result<CtxpackServer> {
        let generated_at = source_date_epoch()?;
        let mut tool_router = Self::tool_router();
        // Outside a writing project every assemble call fails: an agent
        // offered the tool there would only waste a turn learning that.
        let project = match &options.store {
            // Served from a store, the project is the one synced there.
            Some(target) => crate::assemble::store_has_project(target).unwrap_or(false),
            None => crate::assemble::has_recipe(&options.root),
        };
        if !project {
            tool_router.remove_route("assemble");
        }
        let turns = Arc::new(tokio::sync::Semaphore::new(
            options.limits.concurrent_calls.max(1),
        ));
        Ok(CtxpackServer {
            state: Arc::new(State {
                options,
                session: Mutex::new(None),
                opened: Condvar::new(),
                turns,
                packs: packs::PackStore::default(),
                subscriptions: resources::Subscriptions::default(),
                generated_at,
            }),
            tool_router,
            seen: Arc::default(),
        })
    }

    /// Runs a tool's body on the blocking pool, so a slow call never stalls
    /// the async workers that answer the others: at most
    /// `concurrent_calls` at once, each abandoned (with a tool error) after
    /// `call_timeout`, and a panic becomes a tool error, never a request
    /// left unanswered.
    async fn call<F>(&self, tool: &'static str, body: F) -> CallToolResult
    where
        F: FnOnce(&State) -> CallToolResult + Send + 'static,
    {
        let limits = &self.state.options.limits;
        let deadline = tokio::time::Instant::now() + limits.call_timeout;
        let turn =
            match tokio::time::timeout_at(deadline, Arc::clone(&self.state.turns).acquire_owned())
                .await
            {
                Ok(Ok(turn)) => turn,
                Ok(Err(_)) => return tool_error("the server is shutting down"),
                Err(_) => return timed_out(tool, limits.call_timeout),
            };
        let state = Arc::clone(&self.state);
        // The turn is held until the body ends, even after a timeout, so
        // abandoned calls still count against the limit.
        let task = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            body(&state)
        });
        match tokio::time::timeout_at(deadline, task).await {
            Ok(Ok(result)) => result,
            Ok(Err(err)) if err.is_panic() => {
                eprintln!("ctxpack: error: the {tool} tool failed unexpectedly (a bug)");
                tool_error(format!(
                    "internal error in {tool}: the call failed unexpectedly; the server goes on"
                ))
            }
            Ok(Err(_)) => tool_error(format!("the {tool} call was cancelled")),
            Err(_) => timed_out(tool, limits.call_timeout),
        }
    }

    /// Calls tool `tool` with JSON `arguments` on this thread, as a client's
    /// `tools/call` would (for fuzzing argument decoding and validation).
    pub(crate) fn call_blocking(&self, tool: &str, arguments: serde_json::Value) -> CallToolResult {
        fn decode<T: serde::de::DeserializeOwned>(
            arguments: serde_json::Value,
        ) -> Result<T, CallToolResult> {
            serde_json::from_value(arguments)
                .map_err(|err| tool_error(format!("invalid arguments: {err}")))
        }
        if !self.tool_router.has_route(tool) {
            return tool_error(format!("no tool '{tool}'"));
        }
        let state = &self.state;
        let seen = Some(self.seen.as_ref());
        let result = match tool {
            "search" => decode(arguments).map(|args| state.search(args)),
            "context_pack" => decode(arguments).map(|args| state.context_pack(args, None, seen)),
            "assemble" => decode(arguments).map(|args| state.assemble(args, None)),
            "get_note" => decode(arguments).map(|args| state.get_note(args, None, seen)),
            "mark_useful" => decode(arguments).map(|args| state.mark_useful(args)),
            "status" => decode::<StatusArgs>(arguments).map(|_| state.status()),
            "read_pack" => decode(arguments).map(|args| state.read_pack(args, None, seen)),
            "grep_pack" => decode(arguments).map(|args| state.grep_pack(args, None)),
            other => Err(tool_error(format!("no tool '{other}'"))),
        };
        result.unwrap_or_else(|error| error)
    }

    /// Keeps the index current: after each burst of file changes (300 ms
    /// of quiet), the session is re-opened, which updates the index, and
    /// swapped in. Calls in flight keep the session they started with.
    /// One kernel watch set serves both this and the socket commands on
    /// this vault ask what changed.
    pub(crate) fn watch(&self) {
        if self.state.options.store.is_some() {
            // A store's changes are seen by generation, on every call.
            return;
        }
        let state = Arc::clone(&self.state);
        // Change notifications are sent from the server's runtime.
        let runtime = tokio::runtime::Handle::try_current().ok();
        // The watch is registered before this returns, so nothing written
        // after the server answers its first call can be missed; commands
        // on this vault ask it what changed instead of walking.
        let (watched_root, index_dir) = {
            let session = state.session();
            (session.root.clone(), session.index_dir.clone())
        };
        let watch = match upkeep::VaultWatch::start(&watched_root, index_dir.as_deref(), None) {
            Ok(watch) => watch,
            Err(err) => {
                eprintln!("ctxpack: warning: {err}; the index updates on restart");
                return;
            }
        };
        std::thread::spawn(move || {
            let root = state.options.root.clone();
            let watched = watch.run(&mut |changed| {
                if let Err(err) = state.reopen() {
                    eprintln!("ctxpack: warning: index update failed: {err:#}");
                }
                // The watcher names paths under the folder it resolved;
                // announcements name them under the root as served.
                let changed: Vec<PathBuf> = changed
                    .iter()
                    .map(|path| match path.strip_prefix(&watched_root) {
                        Ok(rel) => root.join(rel),
                        Err(_) => path.clone(),
                    })
                    .collect();
                if let (Some(runtime), false) = (&runtime, changed.is_empty()) {
                    state.subscriptions.notify(runtime, &root, &changed);
                }
            });
            if let Err(err) = watched {
                eprintln!("ctxpack: warning: {err:#}; the index updates on restart");
            }
        });
    }

    /// Embeds what the vault's vectors still lack on a thread of its own,
    /// re-opening the session every [`REOPEN_WHILE_EMBEDDING`] and at the
    /// end, so calls search what is embedded so far; no call waits for it
    /// (each embeds on the fly only what its own query needs, bounded).
    pub(crate) fn embed_in_background(&self) {
        if !self.state.session().semantic_is_partial() {
            return;
        }
        let state = Arc::clone(&self.state);
        std::thread::spawn(move || {
            let session = state.session();
            let reopening = Arc::clone(&state);
            let last = std::sync::Mutex::new(std::time::Instant::now());
            let progress = Progress::new(move |event| {
                if !matches!(event, crate::progress::Event::Advanced { .. }) {
                    return;
                }
                let Ok(mut last) = last.lock() else { return };
                if last.elapsed() >= REOPEN_WHILE_EMBEDDING {
                    if let Err(err) = reopening.reopen() {
                        eprintln!("ctxpack: warning: index update failed: {err:#}");
                    }
                    *last = std::time::Instant::now();
                }
            });
            // On a pool of one thread: the calls' own work (the query's
            // embedding, what they embed on the fly) runs on the shared pool
            // and never queues behind a batch of the vault's chunks.
            let embedded = match rayon::ThreadPoolBuilder::new().num_threads(1).build() {
                Ok(pool) => pool.install(|| session.embed_rest(state.options.vectors, &progress)),
                Err(_) => session.embed_rest(state.options.vectors, &progress),
            };
            match embedded {
                Ok(_) => {
                    if let Err(err) = state.reopen() {
                        eprintln!("ctxpack: warning: index update failed: {err:#}");
                    }
                }
                Err(err) => eprintln!("ctxpack: warning: background embedding failed: {err:#}"),
            }
        });
    }

    #[tool(
        description = "Rank the vault's notes for a query (full-text BM25 fused with the notes' titles, aliases, tags and summaries). Returns rank, path, title, score and the best matching sentence of each hit.",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn search(&self, Parameters(args): Parameters<SearchArgs>) -> CallToolResult {
        self.call("search", move |state| state.search(args)).await
    }

    #[tool(
        description = "Build a token-budgeted context pack: the notes most relevant to a query (or the most recent ones), compressed, de-duplicated, with relevant excerpts, backlinks and optional daily notes, never over budget_tokens. Returns the pack as markdown (default) or JSON. Where the vault keeps a log.md, appends one line to it recording the pack.",
        // Not read-only: the log.md line. Each call adds its own line, so
        // a repeat is not a no-op; nothing is overwritten or removed.
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn context_pack(
        &self,
        Parameters(args): Parameters<ContextPackArgs>,
        extensions: Extensions,
    ) -> CallToolResult {
        let owner = session_of(&extensions);
        let seen = Arc::clone(&self.seen);
        self.call("context_pack", move |state| {
            state.context_pack(args, owner.as_deref(), Some(&seen))
        })
        .await
    }

    #[tool(
        description = "Assemble one agent's layered context for a unit (chapter) of the writing project: a baseline shared byte for byte by every agent of the unit, the agent's identity and instructions, its own material, this turn's intent last, and a report of every field and source left out and why. When the project's recipe names a review file, the pack is saved there too, replacing the last one.",
        // Not read-only: the review copy. It replaces only that copy, and
        // the same arguments write the same bytes again.
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn assemble(
        &self,
        Parameters(args): Parameters<AssembleArgs>,
        extensions: Extensions,
    ) -> CallToolResult {
        let owner = session_of(&extensions);
        self.call("assemble", move |state| {
            state.assemble(args, owner.as_deref())
        })
        .await
    }

    #[tool(
        description = "Read one note of the vault by its relative path, whole or one heading's section or a line range. Paths outside the vault are refused.",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn get_note(
        &self,
        Parameters(args): Parameters<GetNoteArgs>,
        extensions: Extensions,
    ) -> CallToolResult {
        let owner = session_of(&extensions);
        let seen = Arc::clone(&self.seen);
        self.call("get_note", move |state| {
            state.get_note(args, owner.as_deref(), Some(&seen))
        })
        .await
    }

    #[tool(
        description = "Record that a note was useful (or not) for the current task; feedback can re-rank later searches. Writes only to the index folder, never to the vault.",
        // Every call adds a vote, so a repeat counts twice.
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn mark_useful(&self, Parameters(args): Parameters<MarkUsefulArgs>) -> CallToolResult {
        self.call("mark_useful", move |state| state.mark_useful(args))
            .await
    }

    #[tool(
        description = "Describe the vault and its index: notes, sections, diagnostics, ranking arms.",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn status(&self, Parameters(_): Parameters<StatusArgs>) -> CallToolResult {
        self.call("status", move |state| state.status()).await
    }

    #[tool(
        description = "Read the next part of a pack too large for one result, by the pack_handle and next_offset the last part gave. Parts end at line ends.",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn read_pack(
        &self,
        Parameters(args): Parameters<ReadPackArgs>,
        extensions: Extensions,
    ) -> CallToolResult {
        let owner = session_of(&extensions);
        let seen = Arc::clone(&self.seen);
        self.call("read_pack", move |state| {
            state.read_pack(args, owner.as_deref(), Some(&seen))
        })
        .await
    }

    #[tool(
        description = "Find the lines of a large pack (by pack_handle) matching a regular expression, with context lines; each match gives an offset read_pack can start from.",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn grep_pack(
        &self,
        Parameters(args): Parameters<GrepPackArgs>,
        extensions: Extensions,
    ) -> CallToolResult {
        let owner = session_of(&extensions);
        self.call("grep_pack", move |state| {
            state.grep_pack(args, owner.as_deref())
        })
        .await
    }
}

/// The tools' bodies: plain blocking functions, run on the blocking pool.
impl State {
    fn search(&self, args: SearchArgs) -> CallToolResult {
        if let Err(unknown) = no_unknown_arguments(&args.unknown) {
            return unknown;
        }
        let request = match (SearchInput {
            spelling: Spelling::Params,
            query: args.query,
            limit: args.limit.unwrap_or(DEFAULT_SEARCH_LIMIT),
            rank: RankOptions::new(Utc::now()),
            // `folder` is one more folder of the filter: the same rule, and
            // the same warning when the vault has no such folder.
            filters: {
                let mut filters = args.filters.filters(None);
                filters.folders.extend(args.folder);
                filters
            },
        })
        .validate()
        {
            Ok(request) => request,
            Err(err) => return tool_error(err.to_string()),
        };
        let session = self.session();
        let results = session.search(&request);
        let mut value = match serde_json::to_value(&results) {
            Ok(value) => value,
            Err(err) => return tool_error(err.to_string()),
        };
        if !args.explain.unwrap_or(false)
            && let Some(hits) = value["hits"].as_array_mut()
        {
            for hit in hits {
                if let Some(hit) = hit.as_object_mut() {
                    hit.remove("explanation");
                }
            }
        }
        json_result(&value)
    }

    fn context_pack(
        &self,
        args: ContextPackArgs,
        owner: Option<&str>,
        seen: Option<&seen::SeenNotes>,
    ) -> CallToolResult {
        if let Err(unknown) = no_unknown_arguments(&args.unknown) {
            return unknown;
        }
        let (tokenizer, json) =
            match counter_and_format(args.tokenizer.as_deref(), args.format.as_deref()) {
                Ok(choice) => choice,
                Err(message) => return tool_error(message),
            };
        let graph_direction = match args
            .graph_direction
            .as_deref()
            .unwrap_or("both")
            .parse::<Direction>()
        {
            Ok(direction) => direction,
            Err(err) => return tool_error(err.to_string()),
        };
        let now = self.now();
        let style = match args.style.as_deref().unwrap_or("markdown").parse::<Style>() {
            Ok(style) => style,
            Err(message) => return tool_error(message),
        };
        let input = PackInput {
            topic: args.query,
            recent: args.recent.unwrap_or(false),
            note: args.note,
            depth: args.depth,
            include_self: args.include_self,
            subqueries: args.subqueries.unwrap_or_default(),
            graph_depth: args.graph_depth.unwrap_or(0),
            graph_direction,
            budget: args.budget_tokens.unwrap_or(DEFAULT_BUDGET),
            dailies: args.recent_dailies.unwrap_or(0),
            tokenizer,
            backlinks: args.include_backlinks.unwrap_or(true),
            pins: args.pins.unwrap_or_default(),
            fence: args.fence.unwrap_or(false),
            map: args.map.unwrap_or(false),
            filters: args.filters.filters(None),
            ..PackInput::new(Spelling::Params, now)
        };
        let exclude_seen = args.exclude_seen.unwrap_or(false);
        if exclude_seen && input.map {
            return tool_error(
                crate::request::RequestError {
                    rule: crate::request::Rule::MapAlone,
                    spelling: Spelling::Params,
                }
                .to_string(),
            );
        }
        let mut request = match input.validate() {
            Ok(request) => request,
            Err(err) => return tool_error(err.to_string()),
        };
        let session = self.session();
        if let Err(message) = session.resolve_pack_notes(&mut request, Spelling::Params) {
            return tool_error(message);
        }
        // What this session already holds: vault paths recorded as sent,
        // so they need no resolving (one since deleted is simply not met).
        if exclude_seen && let Some(seen) = seen {
            request.options.exclude.extend(seen.paths());
        }
        let LoggedPack {
            mut pack,
            log_error,
        } = match session.pack_and_log(&request, &Shape::Style(style), self.options.log) {
            Ok(logged) => logged,
            Err(message) => return tool_error(message),
        };
        if let Some(failed) = log_error {
            // The JSON result says so too (the printed pack stays as it
            // was counted).
            let warning = format!("could not append to log.md: {}", failed.error);
            eprintln!("ctxpack: warning: {warning}");
            pack.warnings.push(warning);
        }
        let whole = whole_notes(&pack);
        // A markdown result is the pack alone; what the filters name that
        // the vault lacks follows it, so a typo is not read as "nothing",
        // and so does why a pack is empty.
        let mut filter_warnings = session.filter_warnings(&request.filter);
        if pack.bundle.is_empty() {
            filter_warnings.push(crate::session::header_does_not_fit(request.options.budget));
        }
        let text = if json {
            match serde_json::to_string_pretty(&pack) {
                Ok(text) => text,
                Err(err) => return tool_error(format!("cannot encode the result: {err}")),
            }
        } else {
            pack.bundle
        };
        let mut result = self.sized_result_noting(text, tokenizer, owner, whole, seen);
        if !json && result.is_error != Some(true) {
            for warning in filter_warnings {
                result
                    .content
                    .push(Content::text(format!("warning: {warning}")));
            }
        }
        result
    }

    /// `text` as a tool result, or, when it is over the result limit, its
    /// first part and a handle to read the rest by (only in the session
    /// `owner`).
    fn sized_result(
        &self,
        text: String,
        tokenizer: Tokenizer,
        owner: Option<&str>,
    ) -> CallToolResult {
        self.sized_result_noting(text, tokenizer, owner, Vec::new(), None)
    }

    /// [`State::sized_result`] for a text that shows `notes` whole: they
    /// are recorded in `seen` once the client has the whole text (now, or
    /// when `read_pack` reaches its end).
    fn sized_result_noting(
        &self,
        text: String,
        tokenizer: Tokenizer,
        owner: Option<&str>,
        notes: Vec<String>,
        seen: Option<&seen::SeenNotes>,
    ) -> CallToolResult {
        let limit = self.options.limits.max_result_tokens;
        let total_tokens = tokenizer.count(&text);
        if total_tokens <= limit {
            if let Some(seen) = seen {
                seen.record(notes);
            }
            return CallToolResult::success(vec![Content::text(text)]);
        }
        let total_bytes = text.len();
        let handle = self
            .packs
            .put_with_notes(text.clone(), tokenizer, owner, notes);
        // The part and the note saying how to read on share the bound.
        let room = limit.saturating_sub(continuation_cost(
            &handle,
            total_bytes,
            total_tokens,
            tokenizer,
        ));
        let (first, next) = match packs::part_at(&text, 0, tokenizer, room) {
            Ok((first, next)) => (first.to_string(), next),
            Err(message) => return tool_error(message),
        };
        let continuation = packs::Continuation {
            pack_handle: &handle,
            total_bytes,
            total_tokens,
            next_offset: (next < total_bytes).then_some(next),
            hint: packs::READ_ON,
        };
        match serde_json::to_string_pretty(&continuation) {
            Ok(note) => CallToolResult::success(vec![Content::text(first), Content::text(note)]),
            Err(err) => tool_error(format!("cannot encode the result: {err}")),
        }
    }

    fn read_pack(
        &self,
        args: ReadPackArgs,
        owner: Option<&str>,
        seen: Option<&seen::SeenNotes>,
    ) -> CallToolResult {
        let (text, tokenizer) = match self.packs.get(&args.pack_handle, owner) {
            Ok(found) => found,
            Err(message) => return tool_error(message),
        };
        let limit = self.options.limits.max_result_tokens;
        let total_tokens = tokenizer.count(&text);
        let room = limit.saturating_sub(continuation_cost(
            &args.pack_handle,
            text.len(),
            total_tokens,
            tokenizer,
        ));
        let (part, next) = match packs::part_at(&text, args.offset, tokenizer, room) {
            Ok(found) => found,
            Err(message) => return tool_error(message),
        };
        let done = next >= text.len();
        if done && let Some(seen) = seen {
            seen.record(self.packs.notes(&args.pack_handle, owner));
        }
        let continuation = packs::Continuation {
            pack_handle: &args.pack_handle,
            total_bytes: text.len(),
            total_tokens,
            next_offset: (!done).then_some(next),
            hint: if done { packs::DONE } else { packs::READ_ON },
        };
        match serde_json::to_string_pretty(&continuation) {
            Ok(note) => {
                CallToolResult::success(vec![Content::text(part.to_string()), Content::text(note)])
            }
            Err(err) => tool_error(format!("cannot encode the result: {err}")),
        }
    }

    fn grep_pack(&self, args: GrepPackArgs, owner: Option<&str>) -> CallToolResult {
        let (text, tokenizer) = match self.packs.get(&args.pack_handle, owner) {
            Ok(found) => found,
            Err(message) => return tool_error(message),
        };
        let limit = self.options.limits.max_result_tokens;
        match packs::grep(
            &text,
            &args.pattern,
            args.context.unwrap_or(2),
            tokenizer,
            limit,
        ) {
            Ok(found) => json_result(&found),
            Err(message) => tool_error(message),
        }
    }

    fn assemble(&self, args: AssembleArgs, owner: Option<&str>) -> CallToolResult {
        let (tokenizer, json) =
            match counter_and_format(args.tokenizer.as_deref(), args.format.as_deref()) {
                Ok(choice) => choice,
                Err(message) => return tool_error(message),
            };
        if args.chapter < 1 {
            return tool_error(format!("chapter must be 1 or more, got {}", args.chapter));
        }
        let style = match args.style.as_deref().unwrap_or("markdown").parse::<Style>() {
            Ok(style) => style,
            Err(message) => return tool_error(message),
        };
        let request = AssembleRequest {
            work: args.work,
            scenario: args.scenario,
            unit: args.chapter,
            intent: args.intent,
            agent: args.agent,
            budget: args.budget.unwrap_or(crate::assemble::DEFAULT_BUDGET),
            tokenizer,
            selection: args.selection,
            expected_revision: args.expected_revision,
            comments: args.comments.unwrap_or_default(),
            candidate: args.candidate,
            references: args.references.unwrap_or_default(),
            recipe: None,
            index_dir: None,
            write_review: true,
            store: self.options.store.clone(),
            style,
        };
        // From a store, each call reads the project as last synced, and no
        // review copy is written (the server has no project folder).
        let assembled = match &self.options.store {
            Some(_) => crate::assemble::assemble_from_store(&request, None),
            None => crate::assemble::assemble(&self.options.root, &request),
        };
        match assembled {
            Ok(assembly) if json => match serde_json::to_string_pretty(&assembly) {
                Ok(text) => self.sized_result(text, tokenizer, owner),
                Err(err) => tool_error(format!("cannot encode the result: {err}")),
            },
            Ok(assembly) => self.sized_result(assembly.text, tokenizer, owner),
            Err(err) => tool_error(err.to_string()),
        }
    }

    /// A note's text, bounded as a pack is: over the result limit, its
    /// first part and a handle to read on (a note of 85,000 characters
    /// came back in one result, past what clients keep).
    fn get_note(
        &self,
        args: GetNoteArgs,
        owner: Option<&str>,
        seen: Option<&seen::SeenNotes>,
    ) -> CallToolResult {
        let whole = args.heading.is_none() && args.lines.is_none();
        let request = NoteRequest {
            path: args.path,
            heading: args.heading,
            lines: args.lines,
        };
        let session = self.session();
        match session.get_note(&request) {
            Ok(text) => {
                let shown_whole = if whole {
                    session
                        .note_text(&request.path)
                        .map(|(path, _)| vec![path])
                        .unwrap_or_default()
                } else {
                    Vec::new()
                };
                drop(session);
                self.sized_result_noting(text, Tokenizer::Chars4, owner, shown_whole, seen)
            }
            Err(message) => tool_error(message),
        }
    }

    fn mark_useful(&self, args: MarkUsefulArgs) -> CallToolResult {
        match self.session().mark_useful(&args.path, args.useful) {
            Ok((relative, counts)) => json_result(&serde_json::json!({
                "path": relative,
                "useful": counts.useful,
                "not_useful": counts.not_useful,
                "score": counts.score(),
            })),
            Err(err) => tool_error(err.to_string()),
        }
    }

    /// The text of a resource: a note (as `get_note` reads it) or a kept
    /// pack.
    fn read_resource(
        &self,
        uri: &str,
        owner: Option<&str>,
        seen: &seen::SeenNotes,
    ) -> Result<ReadResourceResult, String> {
        let contents = match resources::parse_uri(uri)? {
            resources::Target::Note(path) => {
                let session = self.session();
                let (relative, text) = session.note_text(&path).map_err(|e| e.to_string())?;
                seen.record([relative]);
                ResourceContents::text(text, uri).with_mime_type("text/markdown")
            }
            resources::Target::Map => {
                let request = PackRequest::new(
                    PackMode::Map,
                    PackOptions::new(DEFAULT_BUDGET, Tokenizer::Chars4, self.now()),
                );
                let pack = self.session().pack(&request);
                ResourceContents::text(pack.bundle, uri).with_mime_type("text/markdown")
            }
            resources::Target::Pack(handle) => {
                let (text, _) = self.packs.get(&handle, owner)?;
                ResourceContents::text(text.to_string(), uri).with_mime_type("text/plain")
            }
        };
        Ok(ReadResourceResult::new(vec![contents]))
    }

    /// The `context_pack` prompt: the markdown pack for `topic` (see
    /// [`Session::prompt_pack`]).
    fn prompt_pack(
        &self,
        arguments: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Result<String, String> {
        let argument = |name: &str| arguments.and_then(|a| a.get(name));
        let topic = match argument("topic") {
            Some(serde_json::Value::String(topic)) => Some(topic.as_str()),
            _ => None,
        };
        // Prompt arguments arrive as strings; a number is taken too, and
        // anything else is 0, which the session refuses.
        let budget = match argument("budget") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::Number(n)) => Some(n.as_u64().unwrap_or(0) as usize),
            Some(serde_json::Value::String(text)) if text.trim().is_empty() => None,
            Some(serde_json::Value::String(text)) => Some(text.trim().parse().unwrap_or(0)),
            Some(_) => Some(0),
        };
        self.session()
            .prompt_pack(topic, budget, self.now())
            .map_err(|err| err.to_string())
    }

    fn status(&self) -> CallToolResult {
        // Through a JSON value, whose keys are in the order the tool has
        // always printed them.
        match serde_json::to_value(self.session().status()) {
            Ok(value) => json_result(&value),
            Err(err) => tool_error(format!("cannot encode the result: {err}")),
        }
    }
}

impl CtxpackServer {
    /// Runs `body` on the blocking pool (a note read, a pack build) for a
    /// request that is not a tool call.
    async fn blocking<T, F>(&self, body: F) -> Result<T, McpError>
    where
        T: Send + 'static,
        F: FnOnce(&State) -> Result<T, String> + Send + 'static,
    {
        let state = Arc::clone(&self.state);
        match tokio::task::spawn_blocking(move || body(&state)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(message)) => Err(McpError::invalid_params(message, None)),
            Err(_) => Err(McpError::internal_error(
                "the request failed unexpectedly",
                None,
            )),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CtxpackServer {
    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let cursor = request.and_then(|r| r.cursor);
        self.blocking(move |state| resources::list(&state.session(), cursor.as_deref()))
            .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let owner = session_of(&context.extensions);
        let seen = Arc::clone(&self.seen);
        self.blocking(move |state| state.read_resource(&request.uri, owner.as_deref(), &seen))
            .await
            .map(ReadResourceResponse::from)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            "context_pack",
            Some(
                "A token-budgeted context pack of the vault's notes on a topic, as a user message",
            ),
            Some(vec![
                PromptArgument::new("topic")
                    .with_description("The topic or question to pack context for")
                    .with_required(true),
                PromptArgument::new("budget")
                    .with_description("Token budget (1-100000, default 8000)")
                    .with_required(false),
            ]),
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if request.name != "context_pack" {
            return Err(McpError::invalid_params(
                format!(
                    "no prompt '{}' (the server has context_pack)",
                    crate::text::truncate_chars(&request.name, 80)
                ),
                None,
            ));
        }
        let arguments = request.arguments;
        let text = self
            .blocking(move |state| state.prompt_pack(arguments.as_ref()))
            .await?;
        let mut result = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]);
        result.description = Some("Context pack".into());
        Ok(GetPromptResponse::from(result))
    }

    // The SDK keeps resources/subscribe for clients of the protocol
    // versions before 2026-07-28, which are the clients in use.
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let uri = request.uri;
        // Only a note the client could read may be watched.
        let checked = uri.clone();
        self.blocking(move |state| match resources::parse_uri(&checked)? {
            resources::Target::Note(path) => {
                let session = state.session();
                session
                    .note_text(&path)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
            resources::Target::Pack(_) => Err("a pack does not change; subscribe to notes".into()),
            resources::Target::Map => Err("subscribe to notes, not the map".into()),
        })
        .await?;
        self.state
            .subscriptions
            .add(uri, context.peer)
            .map_err(|message| McpError::invalid_params(message, None))
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.state.subscriptions.remove(&request.uri, &context.peer);
        Ok(())
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_prompts()
                .build(),
        )
        .with_server_info(Implementation::new("ctxpack", env!("CARGO_PKG_VERSION")))
        .with_instructions(if self.tool_router.has_route("assemble") {
            format!("{INSTRUCTIONS}\n\n{ASSEMBLE_INSTRUCTIONS}")
        } else {
            INSTRUCTIONS.to_string()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schemas' descriptions are made from the request limits; their
    /// text is what clients have always read.
    #[test]
    fn the_schemas_state_the_request_limits() {
        let described = |schema: schemars::Schema, field: &str| {
            schema.as_value()["properties"][field]["description"]
                .as_str()
                .unwrap()
                .to_string()
        };
        let search = || schemars::schema_for!(SearchArgs);
        assert_eq!(
            described(search(), "limit"),
            "How many results (1-100, default 10)"
        );
        let pack = || schemars::schema_for!(ContextPackArgs);
        for (field, text) in [
            (
                "subqueries",
                "Up to 5 further questions to gather evidence for",
            ),
            (
                "budget_tokens",
                "Token budget for the whole pack (1-100000, default 8000)",
            ),
            (
                "recent_dailies",
                "Add the N most recent daily notes (0-30, default 0)",
            ),
            (
                "depth",
                "With note: link hops around it (0-3, default 1; 0: similar notes only)",
            ),
            (
                "graph_depth",
                "With query: add linked neighbours of the top hits, up to N hops (0-3, default 0)",
            ),
        ] {
            assert_eq!(described(pack(), field), text, "{field}");
        }
    }

    /// The integer arguments' schema bounds are the limits the request
    /// checks enforce, so a client validating against the schema refuses
    /// exactly what the server would.
    #[test]
    fn the_schemas_bound_the_integers_as_the_checks_do() {
        let bounds = |schema: schemars::Schema, field: &str| {
            let property = &schema.as_value()["properties"][field];
            (property["minimum"].as_u64(), property["maximum"].as_u64())
        };
        assert_eq!(
            bounds(schemars::schema_for!(SearchArgs), "limit"),
            (Some(1), Some(100))
        );
        for (field, expected) in [
            ("budget_tokens", (Some(1), Some(100_000))),
            ("recent_dailies", (Some(0), Some(30))),
            ("depth", (Some(0), Some(3))),
            ("graph_depth", (Some(0), Some(3))),
        ] {
            assert_eq!(
                bounds(schemars::schema_for!(ContextPackArgs), field),
                expected,
                "{field}"
            );
        }
        assert_eq!(
            bounds(schemars::schema_for!(GrepPackArgs), "context"),
            (Some(0), Some(20))
        );
        assert_eq!(
            bounds(schemars::schema_for!(AssembleArgs), "budget"),
            (Some(1), Some(100_000))
        );
        assert_eq!(
            bounds(schemars::schema_for!(AssembleArgs), "chapter"),
            (Some(1), None)
        );
        let pack = schemars::schema_for!(ContextPackArgs);
        assert_eq!(pack.as_value()["properties"]["subqueries"]["maxItems"], 5);
        assert!(pack.as_value()["properties"].get("generated_at").is_none());
    }

    #[test]
    fn a_panicking_tool_is_a_tool_error_and_the_server_goes_on() {
        let vault = tempfile::tempdir().unwrap();
        let index = tempfile::tempdir().unwrap();
        std::fs::write(vault.path().join("a.md"), "# A\n\nalpha\n").unwrap();
        let server = CtxpackServer::open(ServeOptions {
            root: vault.path().canonicalize().unwrap(),
            index_dir: Some(index.path().to_path_buf()),
            model: ModelChoice::Off,
            qmd: None,
            reranker: None,
            ann: Default::default(),
            vectors: None,
            limits: ServeLimits::default(),
            store: None,
            log: false,
        })
        .unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let failed = runtime.block_on(server.call("search", |_| panic!("a bug")));
        assert_eq!(failed.is_error, Some(true));
        let text = serde_json::to_string(&failed.content).unwrap();
        assert!(text.contains("internal error in search"), "{text}");
        assert!(!text.contains("a bug"), "{text}");
        let answered = runtime.block_on(server.call("search", |state| {
            state.search(SearchArgs {
                query: "alpha".into(),
                limit: None,
                folder: None,
                explain: None,
                filters: Default::default(),
                unknown: Default::default(),
            })
        }));
        assert_eq!(answered.is_error, Some(false));
    }
}
