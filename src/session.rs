//! A vault opened for queries: the index brought up to date, the arms, the
//! feedback store, and the operations every interface offers (search and
//! pack), so the CLI and the MCP server rank and pack identically.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use rayon::prelude::*;
use serde::Serialize;

use crate::analysis::analyzer;
use crate::embed::Embedder;
use crate::index::vectors::{AnnChoice, EmbedMode, SemanticIndex, VectorFormat};
use crate::index::{IndexConfig, Speculation, UpdateReport, VaultIndex, location};
use crate::note::Tier;
use crate::pack::{
    Backlinks, GraphNeighbour, GraphTrace, NoteAnchor, Pack, PackMode, PackOptions, QueryTrace,
    Relevance, ResearchTrace, build_pack_from,
};
use crate::privacy::Policy;
use crate::progress::Progress;
use crate::retrieve::graph::{self, Direction, GraphOptions};
use crate::retrieve::qmd::{QmdConfig, QmdError};
use crate::retrieve::recent::recent_order;
use crate::retrieve::{
    ArmHit, Candidate, Explanation, Method, RankOptions, RankedList, Ranking, Reranker,
    SignalError, Sources, fuse, rank, seed_rank, signals,
};
use crate::store::Store;
use crate::store::feedback::FeedbackStore;
use crate::text::collapse_whitespace;
use crate::vault::{Vault, VaultOptions};

mod embedding;
mod error;
mod filtering;
mod floor;
mod ops;
mod pins;
mod role_files;
pub(crate) mod upkeep;

// Exported by lib.rs: on a line of its own, as `unreachable_pub` judges a
// grouped `pub use` as a whole.
pub use error::SessionError;
pub use ops::NoteRequest;
pub(crate) use ops::{LoggedPack, header_does_not_fit};

/// Where the index lives, whether to draw progress, and which embedding
/// model the semantic arm uses.
#[derive(Clone, Debug, Default)]
pub struct IndexChoice {
    /// `--index-dir`; otherwise `CTXPACK_INDEX_DIR` or the cache folder.
    pub dir: Option<PathBuf>,
    /// Where the progress of indexing and embedding is reported.
    pub progress: Progress,
    pub model: ModelChoice,
    /// QMD as an external arm, when the config names a collection (or why
    /// it cannot run).
    pub qmd: Option<Result<QmdConfig, QmdError>>,
    /// A cross-encoder folder.
    pub reranker: Option<PathBuf>,
    /// When the semantic arm uses its HNSW graph.
    pub ann: AnnChoice,
    /// How the vectors are stored; `None` keeps the stored format (f32
    /// for a new index).
    pub vectors: Option<VectorFormat>,
    /// Folders (relative, `/`-separated) outside the vault's view: never
    /// listed, indexed or read. A view with hidden folders has an index of
    /// its own, beside the whole vault's.
    pub hidden: Vec<String>,
    /// A PostgreSQL store to read the vault from instead of the folder and
    /// the embedded index.
    pub store: Option<StoreTarget>,
    /// Embed the notes whose vectors the store lacks (`index --store`; a
    /// server, perhaps read-only, never writes).
    pub embed_into_store: bool,
}

/// A vault in a PostgreSQL store.
#[derive(Clone, Debug)]
pub struct StoreTarget {
    pub url: crate::store::postgres::StoreUrl,
    /// The vault's id in the store.
    pub vault: String,
}

/// The embedding model of the semantic arm.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ModelChoice {
    /// `CTXPACK_MODEL` if set (`none` turns the arm off), else the model
    /// store's default, else no semantic arm.
    #[default]
    Default,
    Named(String),
    Off,
}

impl ModelChoice {
    /// The model name to load, or why there is none.
    pub fn resolve(&self, store: Option<&Path>) -> Result<String, NoModel> {
        let from_env = || {
            std::env::var("CTXPACK_MODEL")
                .ok()
                .filter(|m| !m.trim().is_empty())
        };
        let name = match self {
            ModelChoice::Off => return Err(NoModel::Off),
            ModelChoice::Named(name) => name.clone(),
            ModelChoice::Default => match from_env() {
                Some(name) => name,
                None => store
                    .and_then(crate::embed::default_model)
                    .ok_or(NoModel::NoneStored)?,
            },
        };
        if matches!(name.as_str(), "none" | "off") {
            return Err(NoModel::Named);
        }
        Ok(name)
    }
}

/// Why the semantic arm has no model: the arm's status, as `status`
/// prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoModel {
    /// `--model none`.
    Off,
    /// `none` (or `off`) named by `CTXPACK_MODEL` or `--model`.
    Named,
    /// No model asked for, and the model store has no default.
    NoneStored,
}

impl std::fmt::Display for NoModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NoModel::Off => "off (--model none)",
            NoModel::Named => "off (model none)",
            NoModel::NoneStored => "off: no embedding model (add one with `ctxpack model import`)",
        })
    }
}

impl std::error::Error for NoModel {}

/// The semantic arm's model and the vault's vectors.
pub struct Semantic {
    pub embedder: Box<dyn Embedder>,
    pub index: Box<dyn crate::store::VectorSearch>,
    /// The embedded index's vectors (the same as `index`), which may still
    /// be partial; `None` for a PostgreSQL store's.
    pub vectors: Option<Arc<SemanticIndex>>,
}

/// Which ranking a pack uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ranker {
    /// Every available arm, fused (the same ranking as `search`).
    #[default]
    Hybrid,
    /// The seed's frontmatter relevance pass alone.
    Frontmatter,
}

impl Ranker {
    pub fn name(self) -> &'static str {
        match self {
            Ranker::Hybrid => "hybrid",
            Ranker::Frontmatter => "frontmatter",
        }
    }
}

/// Where a vault and its index are, and the policy it is read under.
struct Place {
    /// Canonical.
    root: PathBuf,
    policy: Arc<Policy>,
    /// The index folder (a view's, when folders are hidden).
    index_dir: Option<PathBuf>,
    /// The folders outside the view: those asked for, and over a writing
    /// project every library no work binds (no agent may read it through
    /// `assemble`, so none reads it around it, on any face).
    hidden: Vec<String>,
}

impl Place {
    fn of(root: &Path, choice: &IndexChoice) -> Result<Place> {
        let root = root
            .canonicalize()
            .with_context(|| format!("cannot open vault {}", root.display()))?;
        let policy = Arc::new(Policy::load(&root)?);
        crate::tokens::never_cache_inside(&root);
        let index_dir = location::index_dir(&root, choice.dir.as_deref());
        // The folder a view's index sits in must not overlap the vault either.
        if let Some(dir) = &index_dir {
            location::check_outside(&root, dir)?;
        }
        let mut hidden = choice.hidden.clone();
        hidden.extend(crate::assemble::unbound_libraries(&root).map_err(anyhow::Error::msg)?);
        hidden.sort();
        hidden.dedup();
        let index_dir = index_dir.map(|dir| location::view_dir(dir, &hidden));
        Ok(Place {
            root,
            policy,
            index_dir,
            hidden,
        })
    }

    fn index_config(&self, choice: &IndexChoice) -> Option<IndexConfig> {
        let dir = self.index_dir.as_ref()?;
        let mut config = IndexConfig::new(dir.clone());
        config.progress = choice.progress.clone();
        config.hidden = self.hidden.clone();
        config.policy = Arc::clone(&self.policy);
        Some(config)
    }

    /// An index that could not be opened is a reason to read the vault
    /// directly, unless the user's configuration or vault is wrong.
    fn open_index(
        &self,
        opened: Result<(VaultIndex, UpdateReport)>,
    ) -> Result<Result<(VaultIndex, UpdateReport), String>> {
        match opened {
            Ok(opened) => Ok(Ok(opened)),
            Err(err) if crate::index::is_fatal(&err) => Err(err),
            Err(err) => Ok(Err(format!("{err:#}"))),
        }
    }
}

pub struct Session {
    pub root: PathBuf,
    pub vault: Vault,
    /// The index the arms query: embedded or PostgreSQL.
    pub store: Option<Box<dyn Store>>,
    pub index_dir: Option<PathBuf>,
    /// What opening the index did.
    pub update: Option<UpdateReport>,
    /// Why there is no index (the BM25 arm is then unavailable).
    pub index_error: Option<String>,
    pub feedback: FeedbackStore,
    pub semantic: Option<Semantic>,
    /// What the semantic arm is doing: `on (...)` or why it is off.
    pub semantic_status: String,
    /// Set when a chosen model failed (reported with every ranking).
    semantic_error: Option<String>,
    pub qmd: Option<Result<QmdConfig, QmdError>>,
    pub reranker: Option<Box<dyn Reranker>>,
    /// What the reranker did (empty when none was asked for).
    pub rerank_status: String,
    rerank_error: Option<String>,
}

impl Session {
    /// Opens the vault at `root` with its index, updated. If the index
    /// cannot be opened or built, the vault is read directly and searches
    /// go on without the BM25 arm, saying why.
    pub fn open(root: &Path, choice: &IndexChoice) -> Result<Session> {
        let _timed = crate::timings::phase("session.open");
        if let Some(target) = &choice.store {
            return Session::open_store(target, choice);
        }
        let place = Place::of(root, choice)?;
        let opened = match place.index_config(choice) {
            Some(config) => place.open_index(VaultIndex::open(&place.root, &config))?,
            None => Err("no index folder: set HOME, XDG_CACHE_HOME or --index-dir".to_string()),
        };
        Session::assemble(&place, opened, choice)
    }

    /// Opens the vault as [`open`](Self::open) does and runs `operation` on
    /// it. Without a live watcher, walking the vault to find what changed
    /// is most of an open's cost; so `operation` runs on the index as last
    /// committed while the walk goes on beside it, and if the walk finds
    /// the vault changed, the index is brought up to date and `operation`
    /// runs again. Either way the answer is the one an up-to-date index
    /// gives. `operation` must only read: what a caller writes (a log
    /// line), it writes after.
    pub fn open_then<T: Send>(
        root: &Path,
        choice: &IndexChoice,
        operation: impl Fn(&Session) -> T + Sync,
    ) -> Result<(Session, T)> {
        let open_and_run = || -> Result<(Session, T)> {
            let session = Session::open(root, choice)?;
            let answer = operation(&session);
            Ok((session, answer))
        };
        if choice.store.is_some() {
            return open_and_run();
        }
        let place = Place::of(root, choice)?;
        let Some(config) = place.index_config(choice) else {
            return open_and_run();
        };
        // The operation runs inside: its own phase shows its share.
        let timed = crate::timings::phase("session.open+operation");
        let speculation = VaultIndex::open_speculating(&place.root, &config, |index| {
            let session = Session::assemble(&place, Ok((index, UpdateReport::default())), choice)?;
            let answer = operation(&session);
            Ok::<_, anyhow::Error>((session, answer))
        });
        match speculation {
            Ok(Speculation::Fresh(Ok((mut session, answer)), report)) => {
                session.update = Some(report);
                Ok((session, answer))
            }
            Ok(Speculation::Stale(prechecked)) => {
                let opened = place.open_index(VaultIndex::open_prechecked(
                    &place.root,
                    &config,
                    prechecked,
                ))?;
                let session = Session::assemble(&place, opened, choice)?;
                drop(timed);
                let answer = operation(&session);
                Ok((session, answer))
            }
            // Whatever went wrong, the plain open meets it again and
            // answers as it always does.
            Ok(Speculation::Fresh(Err(_), _)) | Err(_) => {
                drop(timed);
                open_and_run()
            }
        }
    }

    /// The session over an opened index (or, when it could not be opened,
    /// the vault read directly, with the reason).
    fn assemble(
        place: &Place,
        opened: Result<(VaultIndex, UpdateReport), String>,
        choice: &IndexChoice,
    ) -> Result<Session> {
        let (vault, store, update, index_error) = match opened {
            Ok((index, report)) => {
                let mut vault = index.vault();
                vault.set_hidden(place.hidden.clone());
                vault.set_policy(Arc::clone(&place.policy));
                (
                    vault,
                    Some(Box::new(index) as Box<dyn Store>),
                    Some(report),
                    None,
                )
            }
            Err(error) => (
                Vault::load(
                    &place.root,
                    &VaultOptions {
                        hidden: place.hidden.clone(),
                        policy: Arc::clone(&place.policy),
                        ..VaultOptions::default()
                    },
                )?,
                None,
                None,
                Some(error),
            ),
        };
        let feedback = store
            .as_ref()
            .and_then(|store| store.feedback().ok())
            .unwrap_or_default();
        let mut session = Session {
            vault,
            root: place.root.clone(),
            store,
            index_dir: place.index_dir.clone(),
            update,
            index_error,
            feedback,
            semantic: None,
            semantic_status: String::new(),
            semantic_error: None,
            qmd: choice.qmd.clone(),
            reranker: None,
            rerank_status: String::new(),
            rerank_error: None,
        };
        let semantic = crate::timings::phase("session.semantic");
        session.open_semantic(choice, EmbedMode::Bounded);
        drop(semantic);
        session.open_reranker(choice.reranker.clone());
        Ok(session)
    }

    /// Opens a vault in a PostgreSQL store: metadata, texts, postings,
    /// backlinks, vectors and feedback all come from the store (the vault's
    /// folder is never read, and need not exist here). A store that cannot
    /// be opened is an error, not a fallback: a server must not answer
    /// from nothing.
    pub fn open_store(target: &StoreTarget, choice: &IndexChoice) -> Result<Session> {
        let store = crate::store::postgres::PgStore::open(&target.url, &target.vault)?;
        let root = store.root();
        let vault = crate::store::Store::vault(&store);
        let feedback = crate::store::Store::feedback(&store)?;
        let mut session = Session {
            vault,
            root,
            store: Some(Box::new(store)),
            index_dir: None,
            update: None,
            index_error: None,
            feedback,
            semantic: None,
            semantic_status: String::new(),
            semantic_error: None,
            qmd: None,
            reranker: None,
            rerank_status: String::new(),
            rerank_error: None,
        };
        session.open_semantic(choice, EmbedMode::Bounded);
        session.open_reranker(choice.reranker.clone());
        Ok(session)
    }

    /// Whether the vault was read from a PostgreSQL store (its folder is
    /// then never read or written).
    pub fn is_from_store(&self) -> bool {
        self.store
            .as_ref()
            .is_some_and(|store| store.embedded().is_none())
    }

    /// Whether the index has changed under this session (a PostgreSQL
    /// store synced since it was opened): a server then opens a new one.
    pub fn is_stale(&self) -> bool {
        self.store.as_ref().is_some_and(|store| store.is_stale())
    }

    /// Loads the cross-encoder asked for; without one, reranking is off
    /// and (when one was asked for) every ranking says why.
    fn open_reranker(&mut self, chosen: Option<PathBuf>) {
        let Some(dir) = chosen else {
            return;
        };
        match crate::embed::load_reranker(&dir) {
            Ok(reranker) => {
                self.rerank_status = format!(
                    "on ({}, top {})",
                    reranker.name(),
                    crate::retrieve::fusion::RERANK_TOP
                );
                self.reranker = Some(reranker);
            }
            Err(error) => {
                self.rerank_status = format!("off: {error}");
                self.rerank_error = Some(error.to_string());
            }
        }
    }

    /// The text a reranker reads for a note: title, summary and the start
    /// of the body.
    fn passage(&self, note: usize) -> String {
        let note = self.vault.note(note);
        let mut passage = format!("{}\n{}\n", note.meta.title, note.meta.summary);
        passage.extend(note.body.chars().take(1_500));
        passage
    }

    /// Loads the chosen model and opens the vault's vectors, embedding
    /// what they lack as `mode` allows. A failure leaves the arm off and is
    /// reported with every ranking.
    fn open_semantic(&mut self, choice: &IndexChoice, mode: EmbedMode) {
        let store = crate::embed::store_dir();
        let name = match choice.model.resolve(store.as_deref()) {
            Ok(name) => name,
            Err(status) => {
                self.semantic_status = status.to_string();
                return;
            }
        };
        let opened = (|| -> Result<(Semantic, String), String> {
            let store =
                store.ok_or("no model folder: set HOME, XDG_DATA_HOME or CTXPACK_MODELS_DIR")?;
            let embedder = crate::embed::load(&store, &name).map_err(|err| err.to_string())?;
            if let Some(pg) = self.store.as_ref().and_then(|store| store.postgres()) {
                let vectors = crate::store::postgres::vectors::PgVectors::open(
                    pg,
                    &self.vault,
                    embedder.as_ref(),
                    choice.embed_into_store,
                    choice.ann,
                )
                .map_err(|err| format!("cannot read the store's vectors: {err:#}"))?;
                let missing = match vectors.stale {
                    0 => String::new(),
                    n => format!(
                        ", {n} notes without vectors: run `ctxpack index --store` with this model"
                    ),
                };
                let status = format!(
                    "{} chunks, {} embedded now, pgvector, {}{missing}",
                    vectors.chunks, vectors.embedded, vectors.search
                );
                return Ok((
                    Semantic {
                        embedder,
                        index: Box::new(vectors),
                        vectors: None,
                    },
                    status,
                ));
            }
            let index = self.store.as_ref().and_then(|store| store.embedded());
            let (Some(index), Some(dir)) = (index, &self.index_dir) else {
                return Err("the semantic arm needs the index".into());
            };
            let mut vectors = SemanticIndex::open_bounded(
                dir,
                &self.vault,
                &index.catalog,
                embedder.as_ref(),
                choice.vectors,
                mode,
                &choice.progress,
            )
            .map_err(|err| format!("cannot embed the vault: {err:#}"))?;
            let search = match vectors.use_ann(dir, choice.ann) {
                Ok(true) if vectors.ann_built() => ", HNSW built now",
                Ok(true) => ", HNSW",
                Ok(false) => ", exact",
                Err(_) => ", exact: the HNSW graph failed",
            };
            let status = format!(
                "{} chunks, {} embedded now{search}",
                vectors.chunks, vectors.embedded
            );
            let vectors = Arc::new(vectors);
            Ok((
                Semantic {
                    embedder,
                    index: Box::new(Arc::clone(&vectors)),
                    vectors: Some(vectors),
                },
                status,
            ))
        })();
        match opened {
            Ok((semantic, status)) => {
                self.semantic_status = match semantic.vectors.as_deref() {
                    Some(vectors) if vectors.is_partial() => embedding::partial_status(
                        &name,
                        vectors.done_chunks(),
                        vectors.chunks,
                        vectors.is_estimated(),
                    ),
                    _ => format!("on ({name}, {status})"),
                };
                self.semantic = Some(semantic);
            }
            Err(error) => {
                self.semantic_status = format!("off: model '{name}' failed: {error}");
                self.semantic_error = Some(format!("model '{name}': {error}"));
            }
        }
    }

    /// A session over a vault already in memory, without an index.
    pub fn without_index(vault: Vault) -> Session {
        Session {
            root: vault.root.clone(),
            vault,
            store: None,
            index_dir: None,
            update: None,
            index_error: Some("no index".into()),
            feedback: FeedbackStore::default(),
            semantic: None,
            semantic_status: "off: no index".into(),
            semantic_error: None,
            qmd: None,
            reranker: None,
            rerank_status: String::new(),
            rerank_error: None,
        }
    }

    /// The names of the arms this session can run.
    pub fn arm_names(&self) -> Vec<&'static str> {
        let mut names = vec!["frontmatter"];
        if self.store.is_some() {
            names.push("bm25");
        }
        if self.semantic.is_some() {
            names.push("semantic");
        }
        names
    }

    /// The fused ranking for `query` over the notes `keep` accepts.
    pub fn rank(
        &self,
        query: &str,
        options: &RankOptions,
        keep: &dyn Fn(usize) -> bool,
    ) -> Ranking {
        self.embed_candidates(query, keep);
        let passage = |note: usize| self.passage(note);
        let signals = self.signals(&passage, GraphOptions::default());
        rank(&signals, query, &self.vault, options, keep)
    }

    /// Every ranking signal this session offers (see [`signals`]); `graph`
    /// adds the `--graph-depth` expansion of a pack's candidates.
    fn signals<'s>(
        &'s self,
        passage: &'s dyn Fn(usize) -> String,
        graph: GraphOptions,
    ) -> Vec<crate::retrieve::arms::Signal<'s>> {
        signals(&Sources {
            vault: &self.vault,
            store: self.store.as_deref(),
            store_error: self.index_error.as_deref(),
            semantic: self
                .semantic
                .as_ref()
                .map(|s| (s.embedder.as_ref(), s.index.as_ref())),
            semantic_error: self.semantic_error.as_deref(),
            qmd: self.qmd.as_ref(),
            feedback: &self.feedback,
            reranker: self.reranker.as_deref(),
            reranker_error: self.rerank_error.as_deref(),
            passage,
            graph,
        })
    }

    pub fn search(&self, request: &SearchRequest) -> SearchResults {
        // Phrases and exclusions constrain which notes rank; the words
        // rank them.
        let syntax = crate::retrieve::syntax::QuerySyntax::parse(&request.query);
        let admission = self.admission(&request.filter, Some(&syntax));
        let keep = |note: usize| admission.admits(note);
        // Each arm must return at least as many hits as were asked for.
        let mut rank = request.rank.clone();
        rank.depth = rank.depth.max(request.limit);
        let ranking = self.rank(&syntax.text, &rank, &keep);
        let total = ranking.hits.len();
        let more = total >= rank.depth;
        let top: Vec<_> = ranking.hits.into_iter().take(request.limit).collect();
        let paths: Vec<&str> = top
            .iter()
            .map(|h| self.vault.metas[h.note].path.as_str())
            .collect();
        let best_sections = self
            .store
            .as_ref()
            .and_then(|store| {
                store
                    .search_sections(&syntax.text, &paths, paths.len() * 8)
                    .ok()
            })
            .unwrap_or_default();
        let terms = crate::analysis::query_terms(&syntax.text);
        let hits = top
            .into_iter()
            .enumerate()
            .map(|(i, hit)| {
                let meta = &self.vault.metas[hit.note];
                let section = best_sections
                    .iter()
                    .find(|(path, _, _)| *path == meta.path)
                    .map(|(_, ordinal, _)| *ordinal);
                let (snippet, highlights) = self.snippet(hit.note, section, &terms);
                SearchHit {
                    rank: i + 1,
                    score: hit.score,
                    path: meta.path.clone(),
                    title: meta.title.clone(),
                    tier: meta.tier,
                    snippet,
                    highlights,
                    explanation: hit.explanation,
                }
            })
            .collect();
        // The query is quoted back (`No notes match '…'`): a secret pasted
        // into it is printed redacted, as a pack's topic is.
        let policy = self.vault.policy();
        let redact = |text: String| policy.redact_printed(&text).unwrap_or(text);
        SearchResults {
            query: redact(collapse_whitespace(&request.query)),
            total,
            more,
            hits,
            signal_errors: ranking.signal_errors,
            semantic: self.semantic_now(),
            rerank: self.rerank_status.clone(),
            warnings: self
                .filter_warnings(&request.filter)
                .into_iter()
                .chain(self.empty_vault_warning())
                .collect(),
            parsed: syntax.constrains().then(|| redact(syntax.describe())),
            filtered: request.is_filtered(),
        }
    }

    /// The best sentence of a note for the query terms: from the section
    /// that matched best, else from the whole body.
    fn snippet(
        &self,
        note: usize,
        section: Option<usize>,
        terms: &[String],
    ) -> (String, Vec<Range<usize>>) {
        let note = self.vault.note(note);
        let mut analyzer = analyzer::analyzer();
        // The sentence matching most terms, with how many it matches, in
        // the blocks of `range` that `wanted` takes: prose first, a code
        // block's line only when no prose matches (`---`, a fence or a
        // command was shown for notes whose prose did not match).
        let mut best_sentence = |range: Range<usize>, code: bool| {
            let mut best: Option<(usize, String)> = None;
            let blocks = note.blocks.iter().filter(|block| {
                block.range.start < range.end
                    && range.start < block.range.end
                    && match block.kind {
                        crate::note::BlockKind::Code => code,
                        crate::note::BlockKind::Heading
                        | crate::note::BlockKind::Rule
                        | crate::note::BlockKind::Html => false,
                        _ => !code,
                    }
            });
            for block in blocks {
                let text =
                    &note.body[block.range.start.max(range.start)..block.range.end.min(range.end)];
                for sentence in crate::text::sentences(text) {
                    // Headings, and links alone (a contents entry, an embed, a
                    // bookmark): other pages' names, not what this one says.
                    if sentence.trim_start().starts_with('#')
                        || crate::parse::is_links_only(sentence)
                        || !sentence.chars().any(char::is_alphanumeric)
                    {
                        continue;
                    }
                    let sentence = collapse_whitespace(sentence);
                    let trimmed = sentence.trim_start();
                    if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                        continue;
                    }
                    let found = analyzer::terms(&mut analyzer, &sentence);
                    let matched = terms.iter().filter(|t| found.contains(t)).count();
                    if (!code || matched > 0)
                        && best.as_ref().is_none_or(|(score, _)| matched > *score)
                    {
                        best = Some((matched, sentence));
                    }
                }
            }
            best
        };
        let matched = |best: Option<(usize, String)>| best.filter(|(matched, _)| *matched > 0);
        // A section can be its heading alone (the heading matched, its
        // text is in the subsections below): the body is read instead.
        let sections = note.sections();
        let section_range = section
            .and_then(|s| sections.get(s))
            .map(|s| s.range.clone());
        let whole = 0..note.body.len();
        let prose = section_range
            .clone()
            .and_then(|range| matched(best_sentence(range, false)))
            .or_else(|| best_sentence(whole.clone(), false));
        let best = match prose {
            Some((found, sentence)) if found > 0 => Some((found, sentence)),
            unmatched => section_range
                .and_then(|range| best_sentence(range, true))
                .or_else(|| best_sentence(whole, true))
                .or(unmatched),
        };
        // A note found by a property (`director: Ridley Scott`) shows that
        // property when no sentence of its body has a query term.
        let best = match best {
            Some((matched, sentence)) if matched > 0 => Some(sentence),
            unmatched => crate::pack::compress::shown_property_lines(&self.vault, &note, false)
                .map(|line| {
                    let found = analyzer::terms(&mut analyzer, &line);
                    (terms.iter().filter(|t| found.contains(t)).count(), line)
                })
                .filter(|(matched, _)| *matched > 0)
                // The first of the best (`max_by_key` keeps the last).
                .rev()
                .max_by_key(|(matched, _)| *matched)
                .map(|(_, line)| line)
                .or(unmatched.map(|(_, sentence)| sentence)),
        };
        // As a reader sees it: links as their words, no block ids.
        let snippet = best
            .map(|s| {
                let shown = crate::parse::reader::reader_text(&s);
                collapse_whitespace(&crate::parse::reader::links_as_words(&shown))
            })
            .map(|s| crate::text::truncate_chars(&s, 240))
            .unwrap_or_else(|| crate::text::truncate_chars(&note.meta.summary, 240));
        let highlights = highlight(&mut analyzer, &snippet, terms);
        (snippet, highlights)
    }

    /// The pack printed in `shape`, within the request's budget whatever
    /// the layout costs (see [`crate::pack::style`]); an error is a
    /// template's.
    pub fn pack_shaped(
        &self,
        request: &PackRequest,
        shape: &crate::pack::style::Shape,
    ) -> Result<Pack, SessionError> {
        if request.mode == PackMode::Map {
            return self.map_pack(request, shape);
        }
        let options = &request.options;
        let policy = self.vault.policy();
        let redact = |text: &str| policy.redact_printed(text);
        crate::pack::style::shape_pack(
            shape,
            options.budget,
            options.tokenizer,
            &redact,
            |budget| {
                let mut request = request.clone();
                request.options.budget = budget;
                self.pack(&request)
            },
        )
        // `to_string` whatever the shaping error's type: a template's.
        .map_err(SessionError::Shape)
    }

    /// The pack of `request`. A topic and subqueries are redacted before
    /// anything prints or logs them, and the printed pack is checked once
    /// more for secrets after every transformation (HTML to text, links to
    /// their text): one found there is replaced and the pack refitted to
    /// its budget.
    pub fn pack(&self, request: &PackRequest) -> Pack {
        if request.mode == PackMode::Map {
            return self.markdown_map(request);
        }
        let policy = self.vault.policy();
        let redacted;
        let request = match redacted_request(policy, request) {
            Some(clean) => {
                redacted = clean;
                &redacted
            }
            None => request,
        };
        let budget = request.options.budget;
        let mut inner = budget;
        let mut sized = request.clone();
        loop {
            let pack = self.pack_unchecked(&sized);
            match crate::pack::style::redact_printed(pack, budget, |text| {
                policy.redact_printed(text)
            }) {
                Ok(pack) => return pack,
                Err(excess) => {
                    inner = inner.saturating_sub(excess).max(1);
                    sized.options.budget = inner;
                }
            }
        }
    }

    fn pack_unchecked(&self, request: &PackRequest) -> Pack {
        let filtered;
        let request = match self.admitted_dailies(request) {
            Some(dailies) => {
                let mut with = request.clone();
                with.options.admitted_dailies = Some(dailies);
                filtered = with;
                &filtered
            }
            None => request,
        };
        let mut pack = self.pack_mode(request);
        pack.warnings.extend(self.filter_warnings(&request.filter));
        pack
    }

    fn pack_mode(&self, request: &PackRequest) -> Pack {
        let vault = &self.vault;
        let admission = self.admission(&request.filter, None);
        match (&request.mode, request.ranker) {
            (PackMode::Map, _) => self.markdown_map(request),
            (PackMode::Note(anchor), _) => self.note_pack(request, anchor),
            (PackMode::Recent, _) => {
                let mut pack = build_pack_from(
                    vault,
                    &request.mode,
                    admitted(recent_order(vault), &admission),
                    "recent",
                    Vec::new(),
                    &request.options,
                );
                pack.warnings
                    .extend(crate::retrieve::recent::undated_warning(vault, &pack));
                pack
            }
            (PackMode::Topic(topic), Ranker::Frontmatter) => {
                let syntax = crate::retrieve::syntax::QuerySyntax::parse(topic);
                let admission = admission.with_syntax(&syntax);
                let (candidates, signal_errors) = seed_rank(vault, &syntax.text, self.qmd.as_ref());
                let candidates = admitted(candidates, &admission);
                let mut options = request.options.clone();
                options.pins = self.pins(&options.pins);
                if request.backlinks {
                    options.backlinks = self.backlinks(&candidates, options.candidate_limit);
                }
                build_pack_from(
                    vault,
                    &request.mode,
                    candidates,
                    "frontmatter",
                    signal_errors,
                    &options,
                )
            }
            (PackMode::Topic(topic), Ranker::Hybrid) => {
                let queries = research_queries(topic, &request.subqueries);
                // Each query's words rank; its phrases and exclusions, with
                // the request's filter, decide which notes may.
                let syntaxes: Vec<crate::retrieve::syntax::QuerySyntax> = queries
                    .iter()
                    .map(|query| crate::retrieve::syntax::QuerySyntax::parse(query))
                    .collect();
                let rankings: Vec<Ranking> = syntaxes
                    .par_iter()
                    .map(|syntax| {
                        let admission = admission.with_syntax(syntax);
                        self.rank(&syntax.text, &request.rank, &|n| admission.admits(n))
                    })
                    .collect();
                let words: Vec<&str> = syntaxes.iter().map(|s| s.text.as_str()).collect();
                let mut options = request.options.clone();
                options.pins = self.pins(&options.pins);
                options.relevance = Some(self.relevance(&words.join(" ")));
                let mut signal_errors = rankings
                    .first()
                    .map(|r| r.signal_errors.clone())
                    .unwrap_or_default();
                let (mut candidates, trace) =
                    coverage_slots(vault, &queries, rankings, request.rank.rrf_k);
                // Subqueries each bring their own words: the floor reads
                // one topic's.
                let mut weak_matches = Vec::new();
                if queries.len() == 1 {
                    let wanted = request.options.candidate_limit;
                    (candidates, weak_matches) = floor::topic_candidates(
                        vault,
                        self.store.as_deref(),
                        &syntaxes[0].text,
                        candidates,
                        wanted,
                    );
                }
                let mut graph_trace = self.expand_topic_candidates(
                    &mut candidates,
                    &request.options.graph,
                    &mut signal_errors,
                );
                if !admission.admits_all() {
                    // Linked neighbours pass the same filter as ranked notes.
                    candidates = admitted(candidates, &admission);
                    if let Some(trace) = &mut graph_trace {
                        keep_admitted_neighbours(vault, trace, &candidates);
                    }
                }
                if self.semantic.is_some() {
                    options.relevance = Some(self.excerpt_relevance(&words.join(" "), &candidates));
                }
                if request.backlinks {
                    options.backlinks = self.backlinks(&candidates, options.candidate_limit);
                }
                let mut pack = build_pack_from(
                    vault,
                    &request.mode,
                    candidates,
                    "hybrid",
                    signal_errors,
                    &options,
                );
                // Said, not hidden: a note the floor left out is listed.
                pack.dropped.extend(weak_matches);
                if queries.len() > 1 {
                    pack.research = Some(trace);
                }
                if request.options.graph.depth == 0
                    && let Some(thin) =
                        floor::thin_pack_warning(&pack, vault, self.store.as_deref())
                {
                    pack.warnings.push(thin);
                }
                pack.graph = graph_trace;
                pack.semantic = self.semantic_now();
                pack
            }
        }
    }

    /// The note `given` names, for a note-anchored pack: a path relative
    /// to the vault (`.md` may be left out), or an absolute path inside it.
    /// A path leading outside the vault, and any file that is not a note
    /// the vault lists (hidden, skipped, ignored, private by policy), is
    /// refused, with one message for all of those.
    pub fn anchor_note(&self, given: &str) -> Result<String, SessionError> {
        let trimmed = given.trim();
        let relative_given = if Path::new(trimmed).is_absolute() {
            let outside = || SessionError::NotInVault {
                given: given.to_string(),
                root: self.root.clone(),
            };
            let real = Path::new(trimmed).canonicalize().map_err(|_| outside())?;
            let root = self
                .root
                .canonicalize()
                .unwrap_or_else(|_| self.root.clone());
            real.strip_prefix(&root)
                .map_err(|_| outside())?
                .to_str()
                .ok_or_else(outside)?
                .to_string()
        } else {
            trimmed.to_string()
        };
        let relative = crate::vault::inside_vault(&self.root, &relative_given)?;
        [relative.clone(), format!("{relative}.md")]
            .into_iter()
            .find(|path| self.note_index(path).is_some())
            .or_else(|| self.listed_note_named(&relative_given))
            .ok_or_else(|| {
                self.with_suggestions(SessionError::NoSuchNote(relative.clone()), &relative_given)
            })
    }

    fn note_index(&self, path: &str) -> Option<usize> {
        self.vault.metas.search_path(path).ok()
    }

    /// The context around one note: the note (unless left out), the notes
    /// within `depth` link hops either way, and the notes most similar to
    /// it (the hybrid ranking for its title and most distinctive words),
    /// the two lists fused by reciprocal rank.
    fn note_pack(&self, request: &PackRequest, anchor: &NoteAnchor) -> Pack {
        let vault = &self.vault;
        let mut options = request.options.clone();
        let Some(anchor_note) = self.note_index(&anchor.path) else {
            let mut pack = build_pack_from(
                vault,
                &request.mode,
                Vec::new(),
                "hybrid",
                Vec::new(),
                &options,
            );
            pack.warnings
                .push(format!("no note '{}' in the vault", anchor.path));
            return pack;
        };
        let note = vault.note(anchor_note);
        // A note of properties alone is what its properties say, and is
        // packed with the notes they link to, even at depth 0.
        let only_properties = floor::body_is_only_properties(&note);
        let (query, depth) = if only_properties {
            let said = crate::analysis::property_text(&note);
            (
                self.similarity_query(&note.meta.title, &said),
                anchor.depth.max(1),
            )
        } else {
            (
                self.similarity_query(&note.meta.title, &note.body),
                anchor.depth,
            )
        };
        // The note asked for is packed whatever the filter; the notes
        // around it pass it.
        let admission = self.admission(&request.filter, None);
        let mut ranking = self.rank(&query, &request.rank, &|n| {
            n != anchor_note && admission.admits(n)
        });
        let terms = floor::telling_terms(&query);
        ranking.hits.retain(|hit| {
            let shared =
                floor::shared_terms(&vault.note(hit.note), &terms, floor::MIN_SHARED_TERMS);
            shared >= floor::MIN_SHARED_TERMS
        });
        let mut signal_errors = ranking.signal_errors.clone();
        let graph = self.store.as_deref().and_then(|store| store.link_graph());
        let mut walk = match &graph {
            Some(graph) if depth > 0 => {
                graph.neighbourhood(&[(anchor_note, 1.0)], depth, Direction::Both, true)
            }
            None if depth > 0 => {
                signal_errors.push(no_links_error(self));
                Default::default()
            }
            _ => Default::default(),
        };
        if !admission.admits_all() {
            walk.neighbours.retain(|n| admission.admits(n.note));
        }
        let k = request.rank.rrf_k;
        let linked: Vec<usize> = walk
            .neighbours
            .iter()
            .take(graph::NOTE_NEIGHBOURS)
            .map(|n| n.note)
            .collect();
        let links = RankedList {
            arm: "graph",
            weight: 1.0,
            hits: walk
                .neighbours
                .iter()
                .take(graph::NOTE_NEIGHBOURS)
                .map(|n| ArmHit {
                    note: n.note,
                    score: n.score,
                    rules: Vec::new(),
                })
                .collect(),
        };
        let similar = RankedList::of_ranking("similar", &ranking);
        let fused: std::collections::BTreeMap<usize, f64> =
            fuse(vec![links, similar], Method::Rankings { k })
                .into_iter()
                .map(|(note, fused)| (note, fused.score))
                .collect();
        let mut order: Vec<usize> = fused.keys().copied().collect();
        // Ties (one linked note against one similar note at the same rank)
        // go to the linked note, then by path.
        order.sort_by(|&a, &b| {
            fused[&b]
                .total_cmp(&fused[&a])
                .then(linked.contains(&b).cmp(&linked.contains(&a)))
                .then_with(|| vault.metas[a].path.cmp(&vault.metas[b].path))
        });
        let mut explanations: std::collections::BTreeMap<usize, Explanation> = ranking
            .hits
            .into_iter()
            .map(|hit| (hit.note, hit.explanation))
            .collect();
        let mut candidates: Vec<Candidate> = Vec::new();
        // The note itself scores as if first in both lists.
        if anchor.include_self {
            candidates.push(Candidate {
                note: anchor_note,
                score: 2.0 / (k + 1.0),
                breakdown: Vec::new(),
                explanation: None,
            });
        }
        candidates.extend(
            order
                .into_iter()
                .map(|note| fused_candidate(note, fused[&note], &mut explanations)),
        );
        options.relevance = Some(self.relevance(&query));
        options.anchored = anchor.include_self.then_some(anchor_note);
        if request.backlinks {
            options.backlinks = self.backlinks(&candidates, options.candidate_limit);
        }
        let position = |note: usize| candidates.iter().position(|c| c.note == note);
        let trace = GraphTrace {
            anchor: Some(anchor.path.clone()),
            depth,
            direction: Direction::Both,
            hub_threshold: graph.as_ref().map_or(0, |g| g.hub_threshold()),
            hubs: walk
                .hubs
                .iter()
                .map(|&n| vault.metas[n].path.clone())
                .collect(),
            neighbours: walk
                .neighbours
                .iter()
                .take(graph::NOTE_NEIGHBOURS)
                .filter_map(|n| {
                    Some(GraphNeighbour {
                        path: vault.metas[n.note].path.clone(),
                        via: vault.metas[n.via].path.clone(),
                        hops: n.hops,
                        degree: n.degree,
                        position: position(n.note)? + 1,
                    })
                })
                .collect(),
            similar_query: Some(query.clone()),
        };
        let mut pack = build_pack_from(
            vault,
            &request.mode,
            candidates,
            "hybrid",
            signal_errors,
            &options,
        );
        pack.query_terms = crate::analysis::query_terms(&query);
        pack.graph = Some(trace);
        pack.semantic = self.semantic_now();
        pack
    }

    /// A bounded query for the notes similar to one: its title and its
    /// [`SIMILAR_TERMS`] most distinctive words (term frequency, damped,
    /// times inverse document frequency over sections) among the first
    /// [`SIMILAR_SCAN_BYTES`] of its body. Words that are only digits are
    /// left out (they name, they do not describe).
    fn similarity_query(&self, title: &str, body: &str) -> String {
        use tantivy::tokenizer::TokenStream;
        let mut end = body.len().min(SIMILAR_SCAN_BYTES);
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        let text = &body[..end];
        let mut analyzer = analyzer::analyzer();
        let mut stream = analyzer.token_stream(text);
        // term -> (count, the first word it came from)
        let mut counts: std::collections::BTreeMap<String, (usize, String)> = Default::default();
        while stream.advance() {
            let token = stream.token();
            if token.text.chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            counts
                .entry(token.text.clone())
                .or_insert_with(|| (0, text[token.offset_from..token.offset_to].to_string()))
                .0 += 1;
        }
        let terms: Vec<String> = counts.keys().cloned().collect();
        let idf = match &self.store {
            Some(store) => store.section_idf(&terms),
            None => vec![1.0; terms.len()],
        };
        let mut scored: Vec<(f64, &String)> = terms
            .iter()
            .zip(idf)
            .map(|(term, idf)| ((1.0 + (counts[term].0 as f64).ln()) * idf, term))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        let title_terms = crate::analysis::query_terms(title);
        let words: Vec<&str> = scored
            .iter()
            .filter(|(_, term)| !title_terms.contains(term))
            .take(SIMILAR_TERMS)
            .map(|(_, term)| counts[*term].1.as_str())
            .collect();
        // A date or number in the title (`2023-09-12 Meeting with Steph`)
        // matches every note dated that day, not the topic: left out, as
        // the body's numbers are, unless the title is nothing else.
        let worded: Vec<&str> = title
            .split_whitespace()
            .filter(|word| {
                word.chars()
                    .any(|c| !(c.is_ascii_digit() || c.is_ascii_punctuation()))
            })
            .collect();
        let mut query = if worded.is_empty() {
            title.to_string()
        } else {
            worded.join(" ")
        };
        for word in words {
            query.push(' ');
            query.push_str(word);
        }
        query
    }

    /// `--graph-depth`: the linked neighbours of a topic pack's top hits
    /// added to its candidates, by the graph signal of the session's list
    /// (see [`crate::retrieve::fusion::expand`]).
    fn expand_topic_candidates(
        &self,
        candidates: &mut Vec<Candidate>,
        options: &GraphOptions,
        signal_errors: &mut Vec<SignalError>,
    ) -> Option<GraphTrace> {
        let passage = |note: usize| self.passage(note);
        let signals = self.signals(&passage, *options);
        let expansion = crate::retrieve::fusion::expand(&signals, candidates, signal_errors)
            .into_iter()
            .next()?;
        let path = |note: usize| self.vault.metas[note].path.clone();
        Some(GraphTrace {
            anchor: None,
            depth: expansion.options.depth,
            direction: expansion.options.direction,
            hub_threshold: expansion.hub_threshold,
            hubs: expansion.hubs.into_iter().map(path).collect(),
            neighbours: expansion
                .added
                .into_iter()
                .map(|a| GraphNeighbour {
                    path: path(a.neighbour.note),
                    via: path(a.neighbour.via),
                    hops: a.neighbour.hops,
                    degree: a.neighbour.degree,
                    position: a.position + 1,
                })
                .collect(),
            similar_query: None,
        })
    }
}

/// The candidates `admission` lets through, in order.
fn admitted(candidates: Vec<Candidate>, admission: &filtering::Admission<'_>) -> Vec<Candidate> {
    if admission.admits_all() {
        return candidates;
    }
    candidates
        .into_iter()
        .filter(|c| admission.admits(c.note))
        .collect()
}

/// A graph trace's neighbours that are still candidates, at their places.
fn keep_admitted_neighbours(vault: &Vault, trace: &mut GraphTrace, candidates: &[Candidate]) {
    trace.neighbours.retain_mut(|n| {
        match candidates
            .iter()
            .position(|c| vault.metas[c.note].path == n.path)
        {
            Some(at) => {
                n.position = at + 1;
                true
            }
            None => false,
        }
    });
}

/// How many bytes of a note's body its similarity query is drawn from.
pub(crate) const SIMILAR_SCAN_BYTES: usize = 64 * 1024;
/// How many distinctive words the similarity query adds to the title.
pub(crate) const SIMILAR_TERMS: usize = 12;

fn no_links_error(session: &Session) -> SignalError {
    SignalError {
        arm: "graph".into(),
        message: graph::NoLinks::of(session.store.as_deref()).to_string(),
    }
}

/// The queries of a pack: the topic, then each subquery trimmed, with
/// whitespace collapsed and NFC-normalised, without repeats (ignoring case).
pub(crate) fn research_queries(topic: &str, subqueries: &[String]) -> Vec<String> {
    use unicode_normalization::UnicodeNormalization;
    let mut queries: Vec<String> = Vec::new();
    for query in std::iter::once(topic).chain(subqueries.iter().map(String::as_str)) {
        let query: String = collapse_whitespace(query).nfc().collect();
        if !query.is_empty()
            && !queries
                .iter()
                .any(|q| q.to_lowercase() == query.to_lowercase())
        {
            queries.push(query);
        }
    }
    queries
}

/// Orders candidates from several rankings: the first query's best hit,
/// then the best not-yet-chosen hit of each other query, then the rest by
/// reciprocal rank fusion over all the lists.
fn coverage_slots(
    vault: &Vault,
    queries: &[String],
    rankings: Vec<Ranking>,
    rrf_k: f64,
) -> (Vec<Candidate>, ResearchTrace) {
    let lists = rankings
        .iter()
        .map(|ranking| RankedList::of_ranking("query", ranking))
        .collect();
    let fused: std::collections::BTreeMap<usize, f64> = fuse(lists, Method::Rankings { k: rrf_k })
        .into_iter()
        .map(|(note, fused)| (note, fused.score))
        .collect();
    // A note's explanation is its ranking by the first query that found it.
    let mut explanations: std::collections::BTreeMap<usize, Explanation> =
        std::collections::BTreeMap::new();
    for hit in rankings.iter().flat_map(|ranking| &ranking.hits) {
        explanations
            .entry(hit.note)
            .or_insert_with(|| hit.explanation.clone());
    }
    let mut order: Vec<usize> = Vec::new();
    let mut trace = ResearchTrace {
        strategy: "coverage_slots",
        queries: Vec::new(),
        no_hits: Vec::new(),
    };
    for (query, ranking) in queries.iter().zip(&rankings) {
        let slot = ranking
            .hits
            .iter()
            .map(|h| h.note)
            .find(|n| !order.contains(n));
        let contributed: Vec<String> = slot.iter().map(|&n| vault.metas[n].path.clone()).collect();
        order.extend(slot);
        if ranking.hits.is_empty() {
            trace.no_hits.push(query.clone());
        }
        trace.queries.push(QueryTrace {
            query: query.clone(),
            top: ranking
                .hits
                .iter()
                .take(5)
                .map(|h| vault.metas[h.note].path.clone())
                .collect(),
            contributed,
        });
    }
    let mut rest: Vec<usize> = fused
        .keys()
        .copied()
        .filter(|n| !order.contains(n))
        .collect();
    rest.sort_by(|&a, &b| {
        let (ma, mb) = (&vault.metas[a], &vault.metas[b]);
        fused[&b]
            .total_cmp(&fused[&a])
            .then(ma.tier.cmp(&mb.tier))
            .then_with(|| ma.path.cmp(&mb.path))
    });
    // Notes filled in by fusion are credited to the queries that found them.
    for &note in rest.iter().take(crate::retrieve::CANDIDATE_LIMIT) {
        if let Some(first) = rankings
            .iter()
            .position(|r| r.hits.iter().any(|h| h.note == note))
        {
            trace.queries[first]
                .contributed
                .push(vault.metas[note].path.clone());
        }
    }
    order.extend(rest);
    let candidates = order
        .into_iter()
        .map(|note| fused_candidate(note, fused[&note], &mut explanations))
        .collect();
    (candidates, trace)
}

impl Session {
    /// The backlinks of the pack's candidates, looked up in the index.
    fn backlinks(&self, candidates: &[Candidate], limit: usize) -> Option<Backlinks> {
        let store = self.store.as_ref()?;
        let targets: Vec<usize> = candidates.iter().take(limit).map(|c| c.note).collect();
        // The sentences are read only for the pages that show backlinks.
        let found = store.backlink_entries(&targets);
        Some(Backlinks(Arc::new(move |vault, note| {
            let entries = found.get(&note).map(Vec::as_slice).unwrap_or_default();
            crate::analysis::backlink_sentences(vault, entries, crate::pack::BACKLINKS_PER_PAGE)
        })))
    }

    /// A scorer for excerpts: the summed inverse document frequency (over
    /// the index's sections) of the query terms a text contains.
    pub fn relevance(&self, query: &str) -> Relevance {
        let terms = crate::analysis::query_terms(query);
        let weights = match &self.store {
            Some(store) => store.section_idf(&terms),
            None => vec![1.0; terms.len()],
        };
        let weighted: Vec<(String, f64)> = terms.into_iter().zip(weights).collect();
        Relevance(Arc::new(move |text: &str| {
            let mut found = vec![false; weighted.len()];
            crate::analysis::visit_terms(text, |term| {
                if let Some(at) = weighted.iter().position(|(wanted, _)| wanted == term) {
                    found[at] = true;
                }
            });
            weighted
                .iter()
                .zip(found)
                .filter(|(_, found)| *found)
                .map(|((_, weight), _)| weight)
                .sum()
        }))
    }
}

/// A fused note as a candidate, with its explanation (taken from
/// `explanations`) and the frontmatter rules it matched.
fn fused_candidate(
    note: usize,
    score: f64,
    explanations: &mut std::collections::BTreeMap<usize, Explanation>,
) -> Candidate {
    let explanation = explanations.remove(&note);
    Candidate {
        note,
        score,
        breakdown: explanation
            .as_ref()
            .map(frontmatter_rules)
            .unwrap_or_default(),
        explanation,
    }
}

fn frontmatter_rules(explanation: &Explanation) -> Vec<crate::retrieve::RuleHit> {
    explanation
        .arms
        .iter()
        .filter(|a| a.arm == "frontmatter")
        .flat_map(|a| a.rules.clone())
        .collect()
}

/// Byte ranges of the words of `text` whose index terms are query terms.
fn highlight(
    analyzer: &mut tantivy::tokenizer::TextAnalyzer,
    text: &str,
    terms: &[String],
) -> Vec<Range<usize>> {
    use tantivy::tokenizer::TokenStream;
    let mut stream = analyzer.token_stream(text);
    let mut ranges: Vec<Range<usize>> = Vec::new();
    while stream.advance() {
        let token = stream.token();
        if terms.contains(&token.text) {
            let range = token.offset_from..token.offset_to;
            match ranges.last_mut() {
                Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
                _ => ranges.push(range),
            }
        }
    }
    ranges
}

#[derive(Clone, Debug)]
pub struct SearchRequest {
    pub query: String,
    pub limit: usize,
    pub rank: RankOptions,
    /// `--where`, `--since`/`--until`, folders and tags in and out.
    pub filter: crate::filter::NoteFilter,
}

impl SearchRequest {
    /// Whether a filter limits which notes may answer (an empty answer
    /// then says so, instead of blaming the query).
    pub fn is_filtered(&self) -> bool {
        !self.filter.is_empty()
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct SearchResults {
    pub query: String,
    /// How many notes matched (before `limit`), at most the ranking's
    /// depth (see `more`).
    pub total: usize,
    /// More notes match than `total`: the ranking kept its depth's worth.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub more: bool,
    pub hits: Vec<SearchHit>,
    pub signal_errors: Vec<SignalError>,
    /// What the semantic arm did (`on (...)`, or why it is off).
    pub semantic: String,
    /// What the reranker did (only when one was asked for).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub rerank: String,
    /// What the filters name that the vault lacks (a folder, a tag, a
    /// property key).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The query's phrases and exclusions as read, when it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parsed: Option<String>,
    /// A filter limited which notes could answer.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub filtered: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct SearchHit {
    pub rank: usize,
    pub score: f64,
    pub path: String,
    pub title: String,
    pub tier: Tier,
    pub snippet: String,
    /// Byte ranges of `snippet` that match query terms.
    #[serde(skip)]
    pub highlights: Vec<Range<usize>>,
    pub explanation: Explanation,
}

/// `request` with secrets in its topic and subqueries redacted, or `None`
/// when it has none.
fn redacted_request(policy: &crate::privacy::Policy, request: &PackRequest) -> Option<PackRequest> {
    let redact = |text: &str| policy.redact_printed(text);
    let topic = match &request.mode {
        PackMode::Topic(topic) => redact(topic),
        _ => None,
    };
    let subqueries: Vec<Option<String>> = request.subqueries.iter().map(|q| redact(q)).collect();
    if topic.is_none() && subqueries.iter().all(Option::is_none) {
        return None;
    }
    let mut clean = request.clone();
    if let Some(topic) = topic {
        clean.mode = PackMode::Topic(topic);
    }
    for (query, redacted) in clean.subqueries.iter_mut().zip(subqueries) {
        if let Some(redacted) = redacted {
            *query = redacted;
        }
    }
    Some(clean)
}

#[derive(Clone, Debug)]
pub struct PackRequest {
    pub mode: PackMode,
    pub ranker: Ranker,
    pub rank: RankOptions,
    pub options: PackOptions,
    /// Further questions to gather evidence for (at most
    /// [`MAX_SUBQUERIES`](crate::request::MAX_SUBQUERIES); hybrid topic packs).
    pub subqueries: Vec<String>,
    /// Backlink entries under the top pages (topic packs; needs the index).
    pub backlinks: bool,
    /// `--where`, `--since`/`--until`, folders and tags in and out.
    pub filter: crate::filter::NoteFilter,
}

impl PackRequest {
    pub fn new(mode: PackMode, options: PackOptions) -> PackRequest {
        PackRequest {
            mode,
            ranker: Ranker::Hybrid,
            rank: RankOptions::new(options.generated_at),
            options,
            subqueries: Vec::new(),
            backlinks: true,
            filter: crate::filter::NoteFilter::default(),
        }
    }
}
