//! The rescorers: signals that adjust the fused list instead of ranking
//! notes of their own (recency, feedback, a cross-encoder). [`rank`]
//! applies them in the order the signal list gives, each re-sorting what it
//! moved.
//!
//! [`rank`]: crate::retrieve::fusion::rank

use serde::Serialize;

use crate::index::feedback::FeedbackStore;
use crate::retrieve::Candidate;
use crate::retrieve::fusion::{
    Explanation, RankOptions, RankedHit, Ranking, Reranker, SignalError, sort_hits,
};
use crate::retrieve::graph::Expansion;
use crate::vault::Vault;

/// A signal that re-scores the fused hits (sorted best first), records
/// what it did in each hit's explanation, and restores the order.
pub trait Rescorer {
    fn name(&self) -> &'static str;
    fn rescore(&self, query: &str, ranking: &mut Ranking, vault: &Vault, options: &RankOptions);
}

/// A signal that re-ranks a pack's final candidate list: the list the
/// subqueries' rankings were merged into by coverage slots, so it runs
/// once per pack, after every per-query [`rank`], through
/// [`expand`](crate::retrieve::fusion::expand). It may add notes no arm
/// ranked (graph neighbours). An error is why it could not run.
pub trait Expander {
    fn name(&self) -> &'static str;
    fn expand(&self, candidates: &mut Vec<Candidate>) -> Result<Expansion, String>;
}

/// A re-rank step: `after = (1 - weight) * before / top + weight * signal`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Adjustment {
    pub signal: f64,
    pub weight: f64,
    pub before: f64,
    pub after: f64,
}

/// How many fused hits a reranker re-scores.
pub const RERANK_TOP: usize = 20;

/// A reranker's view of a hit: `after = before + weight / (k + rank)`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rerank {
    pub score: f64,
    /// 1-based rank by the reranker's score among the re-scored hits.
    pub rank: usize,
    pub weight: f64,
    pub before: f64,
    pub after: f64,
}

/// Recency, blended in with `--recency-weight`: 0.5 ^ (age / stale days).
pub struct RecencyRescorer;

impl Rescorer for RecencyRescorer {
    fn name(&self) -> &'static str {
        "recency"
    }

    fn rescore(&self, _query: &str, ranking: &mut Ranking, vault: &Vault, options: &RankOptions) {
        if options.recency_weight > 0.0 {
            let signals: Vec<f64> = ranking
                .hits
                .iter()
                .map(|h| recency(vault, h.note, options))
                .collect();
            blend(
                &mut ranking.hits,
                &signals,
                options.recency_weight,
                |e, a| e.recency = Some(a),
            );
            sort_hits(&mut ranking.hits, vault);
        }
    }
}

/// The notes marked useful (or not), blended in with `--feedback-weight`.
pub struct FeedbackRescorer<'a> {
    pub feedback: &'a FeedbackStore,
}

impl Rescorer for FeedbackRescorer<'_> {
    fn name(&self) -> &'static str {
        "feedback"
    }

    fn rescore(&self, _query: &str, ranking: &mut Ranking, vault: &Vault, options: &RankOptions) {
        if options.feedback_weight > 0.0 && !self.feedback.notes.is_empty() {
            let signals: Vec<f64> = ranking
                .hits
                .iter()
                .map(|h| self.feedback.score(&vault.metas[h.note].path))
                .collect();
            blend(
                &mut ranking.hits,
                &signals,
                options.feedback_weight,
                |e, a| e.feedback = Some(a),
            );
            sort_hits(&mut ranking.hits, vault);
        }
    }
}

/// A cross-encoder over the top [`RERANK_TOP`] hits (each note read as
/// `passage` gives it): its order is blended into the fused scores, so a
/// hit moves by how the reranker ranks it, weighted like one more arm
/// (`rerank`, default 1).
pub struct RerankRescorer<'a> {
    pub reranker: &'a dyn Reranker,
    pub passage: &'a dyn Fn(usize) -> String,
}

impl Rescorer for RerankRescorer<'_> {
    fn name(&self) -> &'static str {
        "rerank"
    }

    fn rescore(&self, query: &str, ranking: &mut Ranking, vault: &Vault, options: &RankOptions) {
        let weight = options.weight_or(self.name(), 1.0);
        let top = ranking.hits.len().min(RERANK_TOP);
        if weight <= 0.0 || top == 0 {
            return;
        }
        let passages: Vec<String> = ranking.hits[..top]
            .iter()
            .map(|h| (self.passage)(h.note))
            .collect();
        let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
        let scores = match self.reranker.score(query, &refs) {
            Ok(scores) if scores.len() == top => scores,
            Ok(_) => {
                ranking.signal_errors.push(SignalError {
                    arm: self.name().into(),
                    message: "the reranker returned the wrong number of scores".into(),
                });
                return;
            }
            Err(err) => {
                ranking.signal_errors.push(SignalError {
                    arm: self.name().into(),
                    message: err.to_string(),
                });
                return;
            }
        };
        let mut order: Vec<usize> = (0..top).collect();
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        for (position, &i) in order.iter().enumerate() {
            let hit = &mut ranking.hits[i];
            let before = hit.score;
            let after = before + weight / (options.rrf_k + (position + 1) as f64);
            hit.score = after;
            hit.explanation.rerank = Some(Rerank {
                score: f64::from(scores[i]),
                rank: position + 1,
                weight,
                before,
                after,
            });
        }
        sort_hits(&mut ranking.hits[..top], vault);
    }
}

fn blend(
    hits: &mut [RankedHit],
    signals: &[f64],
    weight: f64,
    record: impl Fn(&mut Explanation, Adjustment),
) {
    let weight = weight.clamp(0.0, 1.0);
    let top = hits.iter().map(|h| h.score).fold(0.0, f64::max);
    if top <= 0.0 {
        return;
    }
    for (hit, &signal) in hits.iter_mut().zip(signals) {
        let before = hit.score;
        hit.score = (1.0 - weight) * before / top + weight * signal;
        record(
            &mut hit.explanation,
            Adjustment {
                signal,
                weight,
                before,
                after: hit.score,
            },
        );
    }
}

/// 0.5 ^ (age / stale_days): 1 for a note updated now, 0.5 at `stale_days`.
fn recency(vault: &Vault, note: usize, options: &RankOptions) -> f64 {
    let Some(updated) = vault.metas[note].updated_at() else {
        return 0.0;
    };
    let age_days = (options.now - updated).num_seconds().max(0) as f64 / 86_400.0;
    let half_life = options.stale_days.max(f64::MIN_POSITIVE);
    0.5f64.powf(age_days / half_life)
}
