//! Semantic search that never waits for embedding: a session searches the
//! chunks that have a vector, embeds on the fly (within
//! [`ON_THE_FLY`]) what the lexical top candidates of a query still lack,
//! and says how much is embedded; the rest is embedded by `ctxpack index`,
//! `serve` in the background, or a watcher.

use std::path::Path;

use anyhow::Result;

use super::{IndexChoice, Session};
use crate::index::vectors::{self, EmbedMode, ON_THE_FLY, SemanticIndex, VectorFormat};
use crate::progress::Progress;

/// The lexical (BM25) top notes of a query whose missing chunks are
/// embedded on the fly, best first, until the bound is reached.
pub const ON_THE_FLY_NOTES: usize = 16;

/// The semantic status of a partly embedded vault: `partial (41% of
/// chunks; …)`. The share is rounded down, so it says 100% only when done.
pub fn partial_status(model: &str, done: usize, total: usize, estimated: bool) -> String {
    let about = if estimated { "about " } else { "" };
    format!(
        "partial ({}% of chunks; {model}, {done} of {about}{total} chunks embedded, the rest \
         by `ctxpack index`, `serve` or a watcher)",
        percent(done, total)
    )
}

fn percent(done: usize, total: usize) -> usize {
    (done.saturating_mul(100) / total.max(1)).min(100)
}

impl Session {
    /// The partly embedded vectors of this session, if they are.
    fn partial_vectors(&self) -> Option<&SemanticIndex> {
        self.semantic
            .as_ref()
            .and_then(|s| s.vectors.as_deref())
            .filter(|v| v.is_partial())
    }

    /// Whether some of the vault's chunks still lack a vector.
    pub fn semantic_is_partial(&self) -> bool {
        self.partial_vectors().is_some()
    }

    /// What the semantic arm is doing now: [`Session::semantic_status`],
    /// with the share embedded brought up to date while it is partial.
    pub fn semantic_now(&self) -> String {
        match (self.partial_vectors(), &self.semantic) {
            (Some(vectors), Some(semantic)) => partial_status(
                semantic.embedder.name(),
                vectors.done_chunks(),
                vectors.chunks,
                vectors.is_estimated(),
            ),
            _ => self.semantic_status.clone(),
        }
    }

    /// Embeds, within [`ON_THE_FLY`], the chunks the query's lexical top
    /// notes (among those `keep` accepts) lack, so they compete in the
    /// semantic arm of this ranking and every later one. Nothing to do
    /// when every chunk has a vector.
    pub(super) fn embed_candidates(&self, query: &str, keep: &dyn Fn(usize) -> bool) {
        let (Some(vectors), Some(semantic), Some(store)) =
            (self.partial_vectors(), &self.semantic, &self.store)
        else {
            return;
        };
        let Ok(hits) = store.search_notes(query, ON_THE_FLY_NOTES * 4) else {
            return;
        };
        let notes: Vec<usize> = hits
            .into_iter()
            .map(|(note, _)| note)
            .filter(|&note| keep(note))
            .take(ON_THE_FLY_NOTES)
            .collect();
        vectors.embed_notes(&self.vault, semantic.embedder.as_ref(), &notes, &ON_THE_FLY);
    }

    /// Embeds every chunk the vault's vectors lack (with `choice`'s
    /// progress), as `ctxpack index` does before it returns; the session
    /// then searches the complete vectors.
    pub fn finish_embedding(&mut self, choice: &IndexChoice) {
        if self.semantic_is_partial() {
            self.semantic = None;
            self.semantic_error = None;
            self.open_semantic(choice, EmbedMode::Complete);
        }
    }

    /// Embeds every chunk the vault's vectors lack, journalled batch by
    /// batch and reported to `progress`, and writes the vector file. The
    /// session itself goes on searching what it had: a server opens a new
    /// one afterwards. Returns how many chunks were embedded.
    pub fn embed_rest(&self, format: Option<VectorFormat>, progress: &Progress) -> Result<usize> {
        let (Some(semantic), Some(index), Some(dir)) = (
            &self.semantic,
            self.store.as_ref().and_then(|s| s.embedded()),
            &self.index_dir,
        ) else {
            return Ok(0);
        };
        if !self.semantic_is_partial() {
            return Ok(0);
        }
        let done = SemanticIndex::sync(
            dir,
            &self.vault,
            &index.catalog,
            semantic.embedder.as_ref(),
            format,
            progress,
        )?;
        Ok(done.embedded)
    }
}

/// The candidates whose chunks the excerpt scorer reads (a pack rarely
/// shows more pages).
pub const EXCERPT_NOTES: usize = 32;

/// How much a piece in the section most similar to the query gains, as a
/// share of a piece holding every query term: enough to lift the section
/// that answers in other words, not to bury an exact match. Scaled down
/// for model families whose arm weighs less than BERT's (static models).
pub const SEMANTIC_EXCERPT_WEIGHT: f64 = 0.5;

/// [`SEMANTIC_EXCERPT_WEIGHT`], or `CTXPACK_EXCERPT_SEMANTIC_WEIGHT` when
/// it is set to a number (0 chooses excerpts lexically: how the benchmarks
/// compare the two).
fn excerpt_weight() -> f64 {
    std::env::var("CTXPACK_EXCERPT_SEMANTIC_WEIGHT")
        .ok()
        .and_then(|w| w.trim().parse::<f64>().ok())
        .filter(|w| w.is_finite() && *w >= 0.0)
        .unwrap_or(SEMANTIC_EXCERPT_WEIGHT)
}

/// A piece shorter than this (in letters and digits) is too short to be
/// found in a chunk reliably, and is scored lexically alone.
const MIN_KEY_CHARS: usize = 16;

/// A text reduced to its letters and digits, lower-cased: pieces of a
/// compressed body (links shown as their text, markup gone) are found in
/// the chunks they were embedded in whatever the markup between.
fn match_key(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// The chunks of the candidate notes that have a vector, reduced to match
/// keys end to end (one search finds a piece's chunk), each with its
/// similarity to the query scaled to 0..1 between the median and the best
/// (a section no more similar than the median gains nothing).
struct ChunkSimilarity {
    keys: String,
    /// Each chunk's end in `keys` and its scaled similarity.
    ends: Vec<(usize, f64)>,
}

impl ChunkSimilarity {
    fn of(chunks: Vec<(String, f32)>) -> Option<ChunkSimilarity> {
        let mut sims: Vec<f32> = chunks.iter().map(|(_, sim)| *sim).collect();
        sims.sort_by(f32::total_cmp);
        let (median, best) = (*sims.get(sims.len() / 2)?, *sims.last()?);
        if best <= median {
            return None;
        }
        let mut keys = String::new();
        let mut ends = Vec::with_capacity(chunks.len());
        for (text, sim) in chunks {
            keys.push_str(&text);
            // A separator no key holds: a piece never matches across chunks.
            keys.push('\u{1}');
            ends.push((
                keys.len(),
                f64::from((sim - median).max(0.0) / (best - median)),
            ));
        }
        Some(ChunkSimilarity { keys, ends })
    }

    /// The scaled similarity of the first chunk holding `text`, else 0.
    fn of_text(&self, text: &str) -> f64 {
        let key = match_key(text);
        if key.chars().count() < MIN_KEY_CHARS {
            return 0.0;
        }
        memchr::memmem::find(self.keys.as_bytes(), key.as_bytes()).map_or(0.0, |at| {
            let chunk = self.ends.partition_point(|(end, _)| *end <= at);
            self.ends.get(chunk).map_or(0.0, |(_, sim)| *sim)
        })
    }
}

impl Session {
    /// The scorer of a pack's excerpts for `query`: [`Session::relevance`]
    /// (the query terms' weights), plus, with a model, the similarity to
    /// the query of the chunk a piece was embedded in (the stored vectors
    /// of each section, and of each passage of a long one), so a section
    /// that answers in other words is chosen too. Without a model it is
    /// the lexical scorer unchanged.
    pub fn excerpt_relevance(
        &self,
        query: &str,
        candidates: &[crate::retrieve::Candidate],
    ) -> crate::pack::Relevance {
        let lexical = self.relevance(query);
        let Some((semantic, vectors)) = self
            .semantic
            .as_ref()
            .and_then(|s| Some((s, s.vectors.as_deref()?)))
        else {
            return lexical;
        };
        // A query the model cannot embed (a remote server down) leaves the
        // excerpts lexical, as without a model.
        let Ok(wanted) = semantic.embedder.try_embed_query(query) else {
            return lexical;
        };
        let chunks: Vec<(String, f32)> = candidates
            .iter()
            .take(EXCERPT_NOTES)
            .flat_map(|candidate| {
                let texts = crate::analysis::chunk_texts(&self.vault.note(candidate.note));
                let found = vectors.chunk_vectors(candidate.note, &texts);
                texts
                    .into_iter()
                    .zip(found)
                    .filter_map(|(text, vector)| {
                        // A section's chunk starts with its heading path.
                        let body = text.split_once('\n').map_or(text.as_str(), |(_, b)| b);
                        Some((match_key(body), crate::embed::dot(&vector?, &wanted)))
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        let Some(similar) = ChunkSimilarity::of(chunks) else {
            return lexical;
        };
        // A piece holding every query term scores this much lexically. The
        // share follows the family's measured arm weight (up to BERT's 0.5):
        // a static model's similarity lowered SciFact's evidence in pack
        // at the full share (0.677 -> 0.665 at 512 tokens).
        let family = (semantic.embedder.default_weight() / 0.5).clamp(0.0, 1.0);
        let full = (lexical.0)(query).max(1.0) * excerpt_weight() * family;
        let lexical = lexical.0;
        crate::pack::Relevance(std::sync::Arc::new(move |text: &str| {
            lexical(text) + full * similar.of_text(text)
        }))
    }
}

/// How far embedding the vault in `dir` with the model `name` (from the
/// model folder `models`) got when last seen, as `status` says it:
/// `None` when it is finished, never started, or the model is unknown.
pub fn embedding_progress(dir: &Path, models: &Path, name: &str) -> Option<String> {
    let manifest = crate::embed::list(models)
        .into_iter()
        .find(|m| m.name == name)?;
    let (done, total) = vectors::embedding_progress(dir, &manifest.fingerprint)?;
    Some(format!(
        "partial: {}% of chunks embedded ({done} of {total})",
        percent(done, total)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piece_takes_the_scaled_similarity_of_the_chunk_it_is_in() {
        let chunk = |text: &str, sim| (match_key(text), sim);
        let similar = ChunkSimilarity::of(vec![
            chunk("Yeast ferments the sugars in the dough.", 0.9),
            chunk("The [[oven]] must be *hot* before the bread goes in.", 0.5),
            chunk("Knead the dough for ten minutes.", 0.7),
        ])
        .unwrap();
        // Best: 1; the median (0.7): 0; below it: 0, not negative.
        assert_eq!(similar.of_text("yeast ferments the sugars"), 1.0);
        assert_eq!(similar.of_text("Knead the dough for ten minutes."), 0.0);
        assert_eq!(similar.of_text("The oven must be hot before"), 0.0);
        // Markup differs, the letters are the same.
        let halfway = ChunkSimilarity::of(vec![
            chunk("a b c d e f g h i j k l m n o p q", 0.0),
            chunk("The [[oven]] must be *hot* before the bread goes in.", 0.5),
            chunk("zzzz", 1.0),
        ])
        .unwrap();
        assert_eq!(halfway.of_text("The oven must be hot before"), 0.0);
        let spread = ChunkSimilarity::of(vec![
            chunk("a b c d e f g h i j k l m n o p q", 0.0),
            chunk("wwww", 0.2),
            chunk("The [[oven]] must be *hot* before the bread goes in.", 0.6),
            chunk("zzzz yyyy", 0.2),
            chunk("zzzz", 1.0),
        ])
        .unwrap();
        assert!((spread.of_text("the oven must be hot, before") - 0.5).abs() < 1e-6);
        // Too short to place, or found nowhere, or across two chunks: 0.
        assert_eq!(spread.of_text("oven"), 0.0);
        assert_eq!(spread.of_text("nothing like any chunk at all"), 0.0);
        assert_eq!(spread.of_text("bread goes in zzzz yyyy"), 0.0);
        // All alike: nothing to tell sections apart by.
        assert!(ChunkSimilarity::of(vec![chunk("x", 0.3), chunk("y", 0.3)]).is_none());
        assert!(ChunkSimilarity::of(Vec::new()).is_none());
    }

    #[test]
    fn the_share_is_rounded_down_and_never_past_all() {
        assert_eq!(percent(41, 100), 41);
        assert_eq!(percent(999, 1000), 99);
        assert_eq!(percent(0, 0), 0);
        assert_eq!(percent(7, 5), 100);
        assert_eq!(
            partial_status("e5", 41, 100, false),
            "partial (41% of chunks; e5, 41 of 100 chunks embedded, the rest by \
             `ctxpack index`, `serve` or a watcher)"
        );
        assert!(partial_status("e5", 0, 9, true).contains(", 0 of about 9 chunks embedded,"));
    }
}
