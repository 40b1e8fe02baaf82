//! The embedded index as a [`Store`]: each method is the index's own.

use std::collections::HashMap;

use anyhow::Result;

use super::VaultIndex;
use super::feedback::{Counts, FeedbackStore};
use crate::analysis::LinkEntry;
use crate::store::{Store, VectorSearch};
use crate::vault::Vault;

impl dyn Store {
    /// The embedded index behind this store, for what only it has (the
    /// vector files beside it, its folder's size).
    pub fn embedded(&self) -> Option<&VaultIndex> {
        self.as_any().downcast_ref()
    }
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

    fn note_properties(&self) -> Option<std::sync::Arc<crate::filter::PropertyTable>> {
        self.property_table()
    }

    fn search_notes(&self, text: &str, limit: usize) -> Result<Vec<(usize, f32)>> {
        VaultIndex::search_notes(self, text, limit)
    }

    fn search_notes_kept(
        &self,
        text: &str,
        limit: usize,
        keep: &dyn Fn(usize) -> bool,
    ) -> Option<Result<Vec<(usize, f32)>>> {
        VaultIndex::search_notes_kept(self, text, limit, keep)
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

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::IndexConfig;

    #[test]
    fn the_embedded_index_is_reached_through_the_store_and_is_not_a_postgres_store() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.md"), "# Raft\n\nA leader is elected.\n").unwrap();
        let mut config = IndexConfig::new(tmp.path().join("index"));
        config.progress = crate::progress::Progress::none();
        let (index, _) = VaultIndex::open(&root, &config).unwrap();
        let store: Box<dyn Store> = Box::new(index);
        let embedded = store.embedded().expect("the embedded index");
        assert!(std::ptr::eq(
            embedded as *const VaultIndex as *const (),
            &*store as *const dyn Store as *const ()
        ));
        assert_eq!(embedded.vault().metas.len(), 1);
        assert!(store.postgres().is_none());
        assert_eq!(store.describe(), config.dir.display().to_string());
    }
}
