//! The one seam between what ranks and packs and where a vault's index
//! lives. [`Store`] is everything `retrieve/`, `pack/` and `session.rs` ask
//! of an index: the catalog (as a [`Vault`]), BM25 over notes and sections,
//! backlinks, feedback. Two implementations: the embedded index
//! ([`VaultIndex`], files in the cache folder) and PostgreSQL
//! ([`postgres::PgStore`], shared by any number of stateless servers).
//! Both score BM25 with tantivy's own formula over the same analyzer's
//! terms and the same statistics, so they rank identically.

pub mod postgres;

use std::collections::HashMap;

use anyhow::Result;

use crate::index::feedback::{Counts, FeedbackStore};
use crate::index::{LinkEntry, VaultIndex};
use crate::vault::Vault;

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
    /// span)]` (sentences from [`crate::index::backlink_sentences`]).
    fn backlink_entries(&self, targets: &[usize]) -> HashMap<usize, Vec<LinkEntry>>;
    /// Every resolved link between notes, for graph walks; `None` where
    /// this store does not keep them.
    fn link_graph(&self) -> Option<std::sync::Arc<crate::note::LinkGraph>> {
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
    /// The embedded index behind this store, for what only it has (the
    /// vector files beside it, its folder's size).
    fn embedded(&self) -> Option<&VaultIndex> {
        None
    }
    /// The PostgreSQL store behind this one (its vectors live there).
    fn postgres(&self) -> Option<&postgres::PgStore> {
        None
    }
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

impl VectorSearch for crate::index::vectors::SemanticIndex {
    fn search(
        &self,
        query: &[f32],
        limit: usize,
        keep: &dyn Fn(usize) -> bool,
    ) -> Vec<(usize, f32)> {
        crate::index::vectors::SemanticIndex::search(self, query, limit, keep)
    }
}

impl Store for VaultIndex {
    fn describe(&self) -> String {
        self.dir.display().to_string()
    }

    fn vault(&self) -> Vault {
        VaultIndex::vault(self)
    }

    fn section_count(&self) -> u64 {
        self.catalog.sections
    }

    fn search_notes(&self, text: &str, limit: usize) -> Result<Vec<(usize, f32)>> {
        VaultIndex::search_notes(self, text, limit)
    }

    fn section_idf(&self, terms: &[String]) -> Vec<f64> {
        VaultIndex::section_idf(self, terms)
    }

    fn search_sections(
        &self,
        text: &str,
        paths: &[&str],
        limit: usize,
    ) -> Result<Vec<(String, usize, f32)>> {
        VaultIndex::search_sections(self, text, paths, limit)
    }

    fn backlink_entries(&self, targets: &[usize]) -> HashMap<usize, Vec<LinkEntry>> {
        VaultIndex::backlink_entries(self, targets)
    }

    fn link_graph(&self) -> Option<std::sync::Arc<crate::note::LinkGraph>> {
        VaultIndex::link_graph(self)
    }

    fn feedback(&self) -> Result<FeedbackStore> {
        FeedbackStore::load(&self.dir)
    }

    fn record_feedback(&self, path: &str, useful: bool) -> Result<Counts> {
        FeedbackStore::record(&self.dir, path, useful)
    }

    fn embedded(&self) -> Option<&VaultIndex> {
        Some(self)
    }
}
