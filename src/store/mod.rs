//! The one seam between what ranks and packs and where a vault's index
//! lives. [`Store`] is everything `retrieve/`, `pack/` and `session.rs` ask
//! of an index: the catalog (as a [`Vault`]), BM25 over notes and sections,
//! backlinks, feedback. Two implementations: the embedded index
//! ([`crate::index::VaultIndex`], files in the cache folder) and PostgreSQL
//! ([`postgres::PgStore`], shared by any number of stateless servers).
//! Both score BM25 with tantivy's own formula over the same analyzer's
//! terms and the same statistics (`crate::analysis`), so they rank
//! identically.
//!
//! This module sits below both: it knows neither, and each implements
//! [`Store`] beside itself. What only one of them has is reached by
//! `store.embedded()` or `store.postgres()` (defined next to each).

pub(crate) mod feedback;
pub(crate) mod postgres;

use std::collections::HashMap;

use anyhow::Result;

use crate::analysis::LinkEntry;
use crate::vault::Vault;
use feedback::{Counts, FeedbackStore};

/// What ranking and packing need from an index of one vault.
pub trait Store: Send + Sync {
    /// Where the index lives, for status lines (never a password).
    fn describe(&self) -> String;
    /// The vault as the index knows it: every note's metadata; bodies on
    /// demand.
    fn vault(&self) -> Vault;
    /// How many sections the index holds.
    fn section_count(&self) -> u64;
    /// BM25 over the note-level text, best first: `(note index, score)`.
    fn search_notes(&self, text: &str, limit: usize) -> Result<Vec<(usize, f32)>>;
    /// Each term's inverse document frequency over sections.
    fn section_idf(&self, terms: &[String]) -> Vec<f64>;
    /// BM25 over the sections of the notes at `paths`: `(path, section
    /// ordinal, score)`, best first.
    fn search_sections(
        &self,
        text: &str,
        paths: &[&str],
        limit: usize,
    ) -> Result<Vec<(String, usize, f32)>>;
    /// The backlink entries of each target: `target -> [(source, link
    /// span)]` (sentences from [`crate::analysis::backlink_sentences`]).
    fn backlink_entries(&self, targets: &[usize]) -> HashMap<usize, Vec<LinkEntry>>;
    /// Every resolved link between notes, for graph walks; `None` where
    /// this store does not keep them.
    fn link_graph(&self) -> Option<std::sync::Arc<crate::note::LinkGraph>> {
        None
    }
    /// Every note's property values for filters (`--where`), parallel to
    /// the vault's notes; `None` where this store keeps none.
    fn note_properties(&self) -> Option<std::sync::Arc<crate::filter::PropertyTable>> {
        None
    }
    /// The notes `filter` keeps (`true` by note index), when this store
    /// decides that itself (the PostgreSQL store, in SQL); `None` where the
    /// caller applies the filter note by note.
    fn filtered_notes(&self, _filter: &crate::filter::NoteFilter) -> Option<Result<Vec<bool>>> {
        None
    }
    /// Which of `keys` (folded property keys) some note has, when this
    /// store answers that itself; `None` where the caller reads
    /// [`Store::note_properties`].
    fn present_keys(&self, _keys: &[String]) -> Option<Result<Vec<String>>> {
        None
    }
    /// Whether [`Store::search_notes`] scores every matching note whatever
    /// the limit (then `search_notes_kept` is asked first, filter or not).
    fn scores_every_match(&self) -> bool {
        false
    }
    /// [`Store::search_notes`] among the notes `keep` accepts, in one pass,
    /// when this store can (a narrow filter loses none); `None` where the
    /// caller asks for deeper lists until enough are kept.
    fn search_notes_kept(
        &self,
        _text: &str,
        _limit: usize,
        _keep: &dyn Fn(usize) -> bool,
    ) -> Option<Result<Vec<(usize, f32)>>> {
        None
    }
    /// The `mark-useful` votes.
    fn feedback(&self) -> Result<FeedbackStore>;
    /// Records one vote for the note at `path`.
    fn record_feedback(&self, path: &str, useful: bool) -> Result<Counts>;
    /// Whether the index has changed since this handle was opened (a
    /// long-running server then opens a fresh one).
    fn is_stale(&self) -> bool {
        false
    }
    /// The store as `Any`, so that what only one implementation has (the
    /// embedded index's vector files and folder size, the PostgreSQL
    /// store's vectors) is reached without this trait naming either.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Nearest notes to a query vector, a note scoring as its best chunk.
pub trait VectorSearch: Send + Sync {
    /// Notes by similarity to `query`, best first, at most `limit`, among
    /// those `keep` accepts.
    fn search(
        &self,
        query: &[f32],
        limit: usize,
        keep: &dyn Fn(usize) -> bool,
    ) -> Vec<(usize, f32)>;
}

/// What opening (and updating) an index, or syncing a store, did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct UpdateReport {
    pub added: usize,
    pub changed: usize,
    pub removed: usize,
    pub unchanged: usize,
    /// Why the index was rebuilt from scratch, if it was.
    pub rebuilt: Option<String>,
    /// Another process was updating: this one used the last commit.
    pub busy: bool,
    /// What changed was asked of a live watcher, not found by a walk.
    pub from_watcher: bool,
    /// Why the update could not be written (a full disk, a quota, a
    /// read-only folder): the last good commit serves, and the next open
    /// tries again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

impl UpdateReport {
    pub fn changed_anything(&self) -> bool {
        self.added + self.changed + self.removed > 0 || self.rebuilt.is_some()
    }
}

/// When the semantic arm searches an HNSW graph instead of every vector.
/// Building one is slow (minutes for 100,000 chunks), so only `Always`
/// and `Build` build it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AnnChoice {
    /// From [`ANN_THRESHOLD`] chunks on, the stored graph if it is
    /// current; else the exact scan.
    #[default]
    Auto,
    /// Like `Auto`, but builds the graph when it is missing or stale
    /// (`ctxpack index`).
    Build,
    /// The graph at any size, built when needed (`--ann`).
    Always,
    /// The exact scan (`--exact`).
    Never,
}

/// From this many chunks on, `ctxpack index` builds the graph and searches
/// use it when it is current. Below, the exact scan is fast enough (8 ms
/// for 100,000 chunks of 64 dimensions) and building costs minutes.
pub(crate) const ANN_THRESHOLD: usize = 200_000;
