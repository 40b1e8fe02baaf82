//! The retrieval arms, each behind the same small interface.

use anyhow::Result;

use crate::embed::Embedder;
use crate::retrieve::frontmatter::relevance_pass;
use crate::retrieve::qmd::{self, QmdConfig};
use crate::retrieve::{Query, RuleHit};
use crate::store::{Store, VectorSearch};
use crate::vault::Vault;

/// A hit as one arm sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ArmHit {
    pub note: usize,
    pub score: f64,
    pub rules: Vec<RuleHit>,
}

/// A ranked list of notes for a query.
pub trait Arm {
    fn name(&self) -> &'static str;
    /// Up to `limit` hits among the notes `keep` accepts, best first.
    fn rank(&self, query: &str, limit: usize, keep: &dyn Fn(usize) -> bool) -> Result<Vec<ArmHit>>;
}

/// The seed's frontmatter relevance pass (+5/+3/+2/+1).
pub struct FrontmatterArm<'a> {
    pub vault: &'a Vault,
}

impl Arm for FrontmatterArm<'_> {
    fn name(&self) -> &'static str {
        "frontmatter"
    }

    fn rank(&self, query: &str, limit: usize, keep: &dyn Fn(usize) -> bool) -> Result<Vec<ArmHit>> {
        Ok(relevance_pass(self.vault, &Query::parse(query))
            .into_iter()
            .filter(|c| keep(c.note))
            .take(limit)
            .map(|c| ArmHit {
                note: c.note,
                score: c.score,
                rules: c.breakdown,
            })
            .collect())
    }
}

/// BM25 over the full-text index (title, aliases, tags, summary, headings,
/// body).
pub struct Bm25Arm<'a> {
    pub store: &'a dyn Store,
    /// How many notes the store holds (no more can be fetched).
    pub notes: usize,
}

impl Arm for Bm25Arm<'_> {
    fn name(&self) -> &'static str {
        "bm25"
    }

    fn rank(&self, query: &str, limit: usize, keep: &dyn Fn(usize) -> bool) -> Result<Vec<ArmHit>> {
        let mut fetch = limit;
        loop {
            let hits = self.store.search_notes(query, fetch)?;
            let exhausted = hits.len() < fetch;
            let kept: Vec<ArmHit> = hits
                .into_iter()
                .filter(|(note, _)| keep(*note))
                .take(limit)
                .map(|(note, score)| ArmHit {
                    note,
                    score: f64::from(score),
                    rules: Vec::new(),
                })
                .collect();
            if kept.len() >= limit || exhausted || fetch >= self.notes {
                return Ok(kept);
            }
            fetch = fetch.saturating_mul(4);
        }
    }
}

/// Vector similarity: the query's embedding against every chunk's, a note
/// scoring as its best chunk.
pub struct SemanticArm<'a> {
    pub embedder: &'a dyn Embedder,
    pub index: &'a dyn VectorSearch,
}

impl Arm for SemanticArm<'_> {
    fn name(&self) -> &'static str {
        "semantic"
    }

    fn rank(&self, query: &str, limit: usize, keep: &dyn Fn(usize) -> bool) -> Result<Vec<ArmHit>> {
        let vector = self.embedder.embed_query(query);
        Ok(self
            .index
            .search(&vector, limit, keep)
            .into_iter()
            .map(|(note, score)| ArmHit {
                note,
                score: f64::from(score),
                rules: Vec::new(),
            })
            .collect())
    }
}

/// QMD's semantic search, run as an external command (seed 000, Step 1).
pub struct QmdArm<'a> {
    pub config: &'a QmdConfig,
    pub vault: &'a Vault,
}

impl QmdArm<'_> {
    /// The vault notes QMD returns for `query`, best first.
    pub fn notes(&self, query: &str, limit: usize) -> Result<Vec<(usize, f64)>> {
        let hits =
            qmd::search(self.config, &self.vault.root, query, limit).map_err(anyhow::Error::msg)?;
        Ok(hits
            .into_iter()
            .filter_map(|hit| {
                let note = self.vault.metas.search_path(&hit.path).ok()?;
                Some((note, hit.score))
            })
            .collect())
    }
}

impl Arm for QmdArm<'_> {
    fn name(&self) -> &'static str {
        "qmd"
    }

    fn rank(&self, query: &str, limit: usize, keep: &dyn Fn(usize) -> bool) -> Result<Vec<ArmHit>> {
        Ok(self
            .notes(query, limit)?
            .into_iter()
            .filter(|(note, _)| keep(*note))
            .map(|(note, score)| ArmHit {
                note,
                score,
                rules: Vec::new(),
            })
            .collect())
    }
}
