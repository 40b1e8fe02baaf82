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
pub(super) const ON_THE_FLY_NOTES: usize = 16;

/// The semantic status of a partly embedded vault: `partial (41% of
/// chunks; …)`. The share is rounded down, so it says 100% only when done.
pub(super) fn partial_status(model: &str, done: usize, total: usize, estimated: bool) -> String {
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
pub(super) const EXCERPT_NOTES: usize = 32;

/// How much a piece in the section most similar to the query gains, as a
/// share of a piece holding every query term: enough to lift the section
/// that answers in other words, not to bury an exact match. Scaled down
/// for model families whose arm weighs less than BERT's (static models).
pub(super) const SEMANTIC_EXCERPT_WEIGHT: f64 = 0.5;

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

/// Texts reduced to match keys end to end, each with a value: one search
/// finds the first text holding a piece.
#[derive(Default)]
struct Keyed {
    keys: String,
    /// Each text's end in `keys` and its value.
    ends: Vec<(usize, f64)>,
}

impl Keyed {
    fn push(&mut self, key: &str, value: f64) {
        self.keys.push_str(key);
        // A separator no key holds: a piece never matches across texts.
        self.keys.push('\u{1}');
        self.ends.push((self.keys.len(), value));
    }

    /// The value of the first text holding `key`.
    fn find(&self, key: &str) -> Option<f64> {
        let at = memchr::memmem::find(self.keys.as_bytes(), key.as_bytes())?;
        let text = self.ends.partition_point(|(end, _)| *end <= at);
        self.ends.get(text).map(|(_, value)| *value)
    }
}

/// The chunks of the candidate notes that have a vector, each with its
/// similarity to the query scaled to 0..1 between the median and the best
/// (a section no more similar than the median gains nothing), and the
/// passages of a few long sections, each with its section's share in
/// proportion to its own similarity among the section's passages.
struct ChunkSimilarity {
    chunks: Keyed,
    /// Searched first: a piece inside a passage takes the passage's share.
    passages: Keyed,
}

impl ChunkSimilarity {
    /// `chunks`: each chunk's match key and similarity; `passages`: for
    /// some chunks (by index in `chunks`), their passages' keys and
    /// similarities.
    fn of(
        chunks: Vec<(String, f32)>,
        passages: Vec<(usize, Vec<(String, f32)>)>,
    ) -> Option<ChunkSimilarity> {
        let mut sims: Vec<f32> = chunks.iter().map(|(_, sim)| *sim).collect();
        sims.sort_by(f32::total_cmp);
        let (median, best) = (*sims.get(sims.len() / 2)?, *sims.last()?);
        if best <= median {
            return None;
        }
        let scaled: Vec<f64> = chunks
            .iter()
            .map(|(_, sim)| f64::from((sim - median).max(0.0) / (best - median)))
            .collect();
        let mut keyed = Keyed::default();
        for ((key, _), value) in chunks.iter().zip(&scaled) {
            keyed.push(key, *value);
        }
        let mut passage_keys = Keyed::default();
        for (chunk, found) in passages {
            let Some(&section) = scaled.get(chunk) else {
                continue;
            };
            let low = found
                .iter()
                .map(|(_, sim)| *sim)
                .fold(f32::INFINITY, f32::min);
            let high = found
                .iter()
                .map(|(_, sim)| *sim)
                .fold(f32::NEG_INFINITY, f32::max);
            for (key, sim) in &found {
                // Passages all alike say nothing more than their section.
                let share = if high > low {
                    f64::from((sim - low) / (high - low))
                } else {
                    1.0
                };
                passage_keys.push(key, section * share);
            }
        }
        Some(ChunkSimilarity {
            chunks: keyed,
            passages: passage_keys,
        })
    }

    /// The scaled similarity of the first passage, else chunk, holding
    /// `text`; else 0.
    fn of_text(&self, text: &str) -> f64 {
        let key = match_key(text);
        if key.chars().count() < MIN_KEY_CHARS {
            return 0.0;
        }
        self.passages
            .find(&key)
            .or_else(|| self.chunks.find(&key))
            .unwrap_or(0.0)
    }
}

/// The candidates (best first) whose most similar section, when long, is
/// embedded passage by passage at pack time.
pub(super) const PASSAGE_NOTES: usize = 3;

/// A section body longer than this (in characters) is long: its passages
/// are embedded when it is the most similar section of a top note.
pub(super) const LONG_SECTION_CHARS: usize = 600;

/// The most characters of one passage (cut as chunks are: at a paragraph,
/// line, sentence or word end in its second half).
pub(super) const PASSAGE_CHARS: usize = 400;

/// The most passages one pack embeds (whole sections only). A count, not
/// a time, so the same pack is chosen whatever the machine's load: 12
/// passages of multilingual-e5 should cost about 0.3 s on two cores the
/// first time (by its 35 chunks/s; not measured), nothing once cached; a
/// static model's, microseconds.
pub(super) const PASSAGES_PER_PACK: usize = 12;

/// [`PASSAGES_PER_PACK`], or `CTXPACK_EXCERPT_PASSAGES` when it is set to
/// a count (0 turns passage vectors off, leaving the sections' own: how
/// the benchmarks measure what passages add).
fn passages_per_pack() -> usize {
    std::env::var("CTXPACK_EXCERPT_PASSAGES")
        .ok()
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(PASSAGES_PER_PACK)
}

/// Passage vectors embedded so far, by model fingerprint and text: for the
/// whole process, so a server's sessions (re-opened after every change and
/// while embedding) keep them. Bounded; emptied when full.
static PASSAGE_VECTORS: std::sync::LazyLock<std::sync::Mutex<PassageCache>> =
    std::sync::LazyLock::new(Default::default);

/// A passage's vector by the hash of its model's fingerprint and text.
type PassageCache = std::collections::HashMap<[u8; 32], std::sync::Arc<Vec<f32>>>;

/// The most passage vectors kept (about 6 MB of 384 dimensions).
const PASSAGE_CACHE: usize = 4096;

fn passage_key(fingerprint: &str, text: &str) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    hasher.update(fingerprint.as_bytes());
    hasher.update(&[0]);
    hasher.update(text.as_bytes());
    *hasher.finalize().as_bytes()
}

/// The vectors of `texts` (embedded as passages), from the cache or
/// embedded now through `try_embed_many`; an error (a remote server down)
/// when the model fails, and nothing is cached then.
fn passage_vectors(
    embedder: &dyn crate::embed::Embedder,
    texts: &[String],
) -> Result<Vec<std::sync::Arc<Vec<f32>>>, crate::embed::ModelError> {
    let keys: Vec<[u8; 32]> = texts
        .iter()
        .map(|text| passage_key(embedder.fingerprint(), text))
        .collect();
    let mut found: Vec<Option<std::sync::Arc<Vec<f32>>>> = {
        let cache = PASSAGE_VECTORS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        keys.iter().map(|key| cache.get(key).cloned()).collect()
    };
    let missing: Vec<usize> = (0..texts.len()).filter(|&i| found[i].is_none()).collect();
    if !missing.is_empty() {
        let wanted: Vec<&str> = missing.iter().map(|&i| texts[i].as_str()).collect();
        // An excerpt is chosen while someone waits: a served model gets
        // the query's bound.
        let embedded =
            embedder.try_embed_many_within(&wanted, crate::embed::remote::query_deadline())?;
        if embedded.len() != wanted.len() || embedded.iter().any(|v| v.len() != embedder.dims()) {
            return Err(crate::embed::ModelError::Run(
                "the model returned vectors of the wrong count or size".into(),
            ));
        }
        let mut cache = PASSAGE_VECTORS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() + missing.len() > PASSAGE_CACHE {
            cache.clear();
        }
        for (&i, vector) in missing.iter().zip(embedded) {
            let vector = std::sync::Arc::new(vector);
            cache.insert(keys[i], std::sync::Arc::clone(&vector));
            found[i] = Some(vector);
        }
    }
    Ok(found.into_iter().flatten().collect())
}

/// A long section to embed passage by passage: its chunk's index among the
/// scored chunks, its heading path line and its body.
struct LongSection {
    chunk: usize,
    label: String,
    body: String,
}

/// The passages of `sections` (whole sections, in order, within
/// `limit` passages), each with its match key and similarity to the
/// query vector `wanted`, by section; none when the model fails.
fn passage_similarities(
    embedder: &dyn crate::embed::Embedder,
    wanted: &[f32],
    sections: &[LongSection],
    limit: usize,
) -> Vec<(usize, Vec<(String, f32)>)> {
    let mut chosen: Vec<(usize, &str, Vec<&str>)> = Vec::new();
    let mut count = 0;
    for section in sections {
        let passages = crate::analysis::text_pieces(&section.body, PASSAGE_CHARS);
        if passages.len() < 2 || count + passages.len() > limit {
            continue;
        }
        count += passages.len();
        chosen.push((section.chunk, section.label.as_str(), passages));
    }
    // Embedded as their section's chunk is, under its heading path.
    let texts: Vec<String> = chosen
        .iter()
        .flat_map(|(_, label, passages)| passages.iter().map(move |p| format!("{label}\n{p}")))
        .collect();
    let Ok(vectors) = passage_vectors(embedder, &texts) else {
        return Vec::new();
    };
    let mut vectors = vectors.into_iter();
    chosen
        .into_iter()
        .map(|(chunk, _, passages)| {
            let scored: Vec<(String, f32)> = passages
                .into_iter()
                .zip(vectors.by_ref())
                .map(|(passage, vector)| (match_key(passage), crate::embed::dot(&vector, wanted)))
                .collect();
            (chunk, scored)
        })
        .collect()
}

impl Session {
    /// The scorer of a pack's excerpts for `query`: [`Session::relevance`]
    /// (the query terms' weights), plus, with a model, the similarity to
    /// the query of the chunk a piece was embedded in (the stored vectors
    /// of each section), and inside the most similar long section of each
    /// of the first notes, of its passage (embedded now, bounded, cached),
    /// so a section and a paragraph that answer in other words are chosen
    /// too. Without a model it is
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
        // A piece holding every query term scores this much lexically. The
        // share follows the family's measured arm weight (up to BERT's 0.5):
        // a static model's similarity lowered SciFact's evidence in pack
        // at the full share (0.677 -> 0.665 at 512 tokens).
        let family = (semantic.embedder.default_weight() / 0.5).clamp(0.0, 1.0);
        let share = excerpt_weight() * family;
        if share == 0.0 {
            // Nothing to add: no query or passage is embedded for it.
            return lexical;
        }
        // A query the model cannot embed (a remote server down) leaves the
        // excerpts lexical, as without a model.
        let Ok(wanted) = semantic.embedder.try_embed_query(query) else {
            return lexical;
        };
        let mut chunks: Vec<(String, f32)> = Vec::new();
        let mut long: Vec<LongSection> = Vec::new();
        for (rank, candidate) in candidates.iter().take(EXCERPT_NOTES).enumerate() {
            let texts = crate::analysis::chunk_texts(&self.vault.note(candidate.note));
            let found = vectors.chunk_vectors(candidate.note, &texts);
            // The note's most similar section: (its index, similarity, text).
            let mut best: Option<(usize, f32, &str)> = None;
            for (text, vector) in texts.iter().zip(found) {
                let Some(vector) = vector else { continue };
                // A section's chunk starts with its heading path.
                let body = text.split_once('\n').map_or(text.as_str(), |(_, b)| b);
                let sim = crate::embed::dot(&vector, &wanted);
                if best.is_none_or(|(_, most, _)| sim > most) {
                    best = Some((chunks.len(), sim, text.as_str()));
                }
                chunks.push((match_key(body), sim));
            }
            if rank < PASSAGE_NOTES
                && let Some((chunk, _, text)) = best
                && let Some((label, body)) = text.split_once('\n')
                && body.chars().count() > LONG_SECTION_CHARS
            {
                long.push(LongSection {
                    chunk,
                    label: label.to_string(),
                    body: body.to_string(),
                });
            }
        }
        // A section no more similar than the median gains nothing, nor do
        // its passages: they are not embedded.
        let mut sims: Vec<f32> = chunks.iter().map(|(_, sim)| *sim).collect();
        sims.sort_by(f32::total_cmp);
        if let Some(&median) = sims.get(sims.len() / 2) {
            long.retain(|section| chunks[section.chunk].1 > median);
        }
        let passages = passage_similarities(
            semantic.embedder.as_ref(),
            &wanted,
            &long,
            passages_per_pack(),
        );
        let Some(similar) = ChunkSimilarity::of(chunks, passages) else {
            return lexical;
        };
        let full = (lexical.0)(query).max(1.0) * share;
        let lexical = lexical.0;
        crate::pack::Relevance(std::sync::Arc::new(move |text: &str| {
            lexical(text) + full * similar.of_text(text)
        }))
    }
}

/// How far embedding the vault in `dir` with the model `name` (from the
/// model folder `models`) got when last seen, as `status` says it:
/// `None` when it is finished, never started, or the model is unknown.
pub(crate) fn embedding_progress(dir: &Path, models: &Path, name: &str) -> Option<String> {
    let manifest = crate::embed::list(models)
        .into_iter()
        .find(|m| m.name == name)?;
    if vectors::embedding_finished(dir, &manifest.fingerprint) {
        return Some(
            "every chunk embedded at the last update; notes changed since by the next search or \
             `ctxpack index`"
                .into(),
        );
    }
    let (done, total) = vectors::embedding_progress(dir, &manifest.fingerprint)?;
    Some(format!(
        "partial: {}% of chunks embedded ({done} of {total}; the rest by `ctxpack index`, \
         `serve` or a watcher)",
        percent(done, total)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piece_takes_the_scaled_similarity_of_the_chunk_it_is_in() {
        let chunk = |text: &str, sim| (match_key(text), sim);
        let similar = ChunkSimilarity::of(
            vec![
                chunk("Yeast ferments the sugars in the dough.", 0.9),
                chunk("The [[oven]] must be *hot* before the bread goes in.", 0.5),
                chunk("Knead the dough for ten minutes.", 0.7),
            ],
            Vec::new(),
        )
        .unwrap();
        // Best: 1; the median (0.7): 0; below it: 0, not negative.
        assert_eq!(similar.of_text("yeast ferments the sugars"), 1.0);
        assert_eq!(similar.of_text("Knead the dough for ten minutes."), 0.0);
        assert_eq!(similar.of_text("The oven must be hot before"), 0.0);
        // Markup differs, the letters are the same.
        let halfway = ChunkSimilarity::of(
            vec![
                chunk("a b c d e f g h i j k l m n o p q", 0.0),
                chunk("The [[oven]] must be *hot* before the bread goes in.", 0.5),
                chunk("zzzz", 1.0),
            ],
            Vec::new(),
        )
        .unwrap();
        assert_eq!(halfway.of_text("The oven must be hot before"), 0.0);
        let spread = ChunkSimilarity::of(
            vec![
                chunk("a b c d e f g h i j k l m n o p q", 0.0),
                chunk("wwww", 0.2),
                chunk("The [[oven]] must be *hot* before the bread goes in.", 0.6),
                chunk("zzzz yyyy", 0.2),
                chunk("zzzz", 1.0),
            ],
            Vec::new(),
        )
        .unwrap();
        assert!((spread.of_text("the oven must be hot, before") - 0.5).abs() < 1e-6);
        // Too short to place, or found nowhere, or across two chunks: 0.
        assert_eq!(spread.of_text("oven"), 0.0);
        assert_eq!(spread.of_text("nothing like any chunk at all"), 0.0);
        assert_eq!(spread.of_text("bread goes in zzzz yyyy"), 0.0);
        // All alike: nothing to tell sections apart by.
        assert!(ChunkSimilarity::of(vec![chunk("x", 0.3), chunk("y", 0.3)], Vec::new()).is_none());
        assert!(ChunkSimilarity::of(Vec::new(), Vec::new()).is_none());
    }

    #[test]
    fn a_piece_in_a_passage_takes_its_share_of_the_section() {
        let key = |text: &str, sim| (match_key(text), sim);
        let section = "Grind the beans coarsely for a press. Rinse the filter with hot water first. \
                       Pour slowly in circles over the grounds.";
        let similar = ChunkSimilarity::of(
            vec![
                key("Title line of the note, said again.", 0.1),
                key(section, 0.9),
                key("An unrelated closing section of words.", 0.5),
            ],
            vec![(
                1,
                vec![
                    key("Grind the beans coarsely for a press.", 0.2),
                    key("Rinse the filter with hot water first.", 0.8),
                    key("Pour slowly in circles over the grounds.", 0.6),
                ],
            )],
        )
        .unwrap();
        // The section scales to 1; its passages share it by similarity.
        assert_eq!(
            similar.of_text("Rinse the filter with hot water first."),
            1.0
        );
        assert_eq!(
            similar.of_text("Grind the beans coarsely for a press."),
            0.0
        );
        assert!(
            (similar.of_text("pour slowly in circles over the grounds") - 2.0 / 3.0).abs() < 1e-6
        );
        // A piece across two passages is found in the section.
        assert_eq!(similar.of_text("for a press. Rinse the filter"), 1.0);
        // Passages all alike keep the section's share.
        let alike = ChunkSimilarity::of(
            vec![
                key("aaaa bbbb cccc dddd", 0.0),
                key(section, 1.0),
                key("eeee", 0.5),
            ],
            vec![(
                1,
                vec![
                    key("Grind the beans coarsely for a press.", 0.4),
                    key("Rinse the filter with hot water first.", 0.4),
                ],
            )],
        )
        .unwrap();
        assert_eq!(alike.of_text("Grind the beans coarsely"), 1.0);
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
