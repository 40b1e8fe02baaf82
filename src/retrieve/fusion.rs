//! The one place where arms meet: weighted reciprocal rank fusion, then the
//! opt-in recency and feedback re-ranks, with an explanation for every hit.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::index::feedback::FeedbackStore;
use crate::retrieve::{Arm, RuleHit};
use crate::vault::Vault;

pub use crate::embed::{Fusion, Reranker, SEMANTIC_WEIGHT};

/// How results are ranked.
#[derive(Clone, Debug)]
pub struct RankOptions {
    /// `None`: reciprocal rank fusion, unless the semantic arm's model
    /// family fuses better by score (see `Embedder::default_fusion`).
    pub fusion: Option<Fusion>,
    /// The `k` of reciprocal rank fusion.
    pub rrf_k: f64,
    /// Weight of each arm by name; an arm not listed has weight 1.
    pub weights: BTreeMap<String, f64>,
    /// How many hits each arm contributes.
    pub depth: usize,
    /// Recency re-rank weight in [0, 1]; 0 leaves the order untouched.
    pub recency_weight: f64,
    /// The age, in days, at which recency is 0.5.
    pub stale_days: f64,
    /// "Now" for recency, fixed for reproducible results.
    pub now: DateTime<Utc>,
    /// Feedback re-rank weight in [0, 1]; 0 leaves the order untouched.
    pub feedback_weight: f64,
}

impl RankOptions {
    pub fn new(now: DateTime<Utc>) -> RankOptions {
        RankOptions {
            fusion: None,
            rrf_k: 60.0,
            weights: BTreeMap::new(),
            depth: 100,
            recency_weight: 0.0,
            stale_days: 90.0,
            now,
            feedback_weight: 0.0,
        }
    }

    pub fn weight(&self, arm: &str) -> f64 {
        self.weights.get(arm).copied().unwrap_or(match arm {
            "semantic" => SEMANTIC_WEIGHT,
            _ => 1.0,
        })
    }
}

/// One arm's view of a hit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArmRank {
    pub arm: &'static str,
    /// 1-based rank in the arm's own list.
    pub rank: usize,
    pub score: f64,
    pub weight: f64,
    /// Its share of the fused score: `weight / (k + rank)`, or with score
    /// fusion `weight * (score - min) / (max - min)` over the arm's list.
    pub contribution: f64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleHit>,
}

/// A re-rank step: `after = (1 - weight) * before / top + weight * signal`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Adjustment {
    pub signal: f64,
    pub weight: f64,
    pub before: f64,
    pub after: f64,
}

/// Why a hit ranked where it did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Explanation {
    pub arms: Vec<ArmRank>,
    pub fused: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recency: Option<Adjustment>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback: Option<Adjustment>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerank: Option<Rerank>,
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

/// Re-scores the top [`RERANK_TOP`] hits with `reranker` (each note read as
/// `passage` gives it) and blends its order into the fused scores, so a
/// hit moves by how the reranker ranks it, weighted like one more arm.
pub fn rerank(
    ranking: &mut Ranking,
    query: &str,
    reranker: &dyn Reranker,
    passage: &dyn Fn(usize) -> String,
    vault: &Vault,
    options: &RankOptions,
) {
    let weight = options.weight("rerank");
    let top = ranking.hits.len().min(RERANK_TOP);
    if weight <= 0.0 || top == 0 {
        return;
    }
    let passages: Vec<String> = ranking.hits[..top]
        .iter()
        .map(|h| passage(h.note))
        .collect();
    let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
    let scores = match reranker.score(query, &refs) {
        Ok(scores) if scores.len() == top => scores,
        Ok(_) => {
            ranking.signal_errors.push(SignalError {
                arm: "rerank".into(),
                message: "the reranker returned the wrong number of scores".into(),
            });
            return;
        }
        Err(message) => {
            ranking.signal_errors.push(SignalError {
                arm: "rerank".into(),
                message,
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

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankedHit {
    pub note: usize,
    pub score: f64,
    pub explanation: Explanation,
}

/// An arm that failed; the others went on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SignalError {
    pub arm: String,
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Ranking {
    pub hits: Vec<RankedHit>,
    pub signal_errors: Vec<SignalError>,
}

/// Runs every arm, fuses their lists and applies the re-ranks. `keep`
/// filters notes before fusion (folder or tag filters).
pub fn rank(
    arms: &[&dyn Arm],
    query: &str,
    vault: &Vault,
    feedback: &FeedbackStore,
    options: &RankOptions,
    keep: &dyn Fn(usize) -> bool,
) -> Ranking {
    let mut ranking = Ranking::default();
    let mut fused: BTreeMap<usize, Explanation> = BTreeMap::new();
    for arm in arms {
        let weight = options.weight(arm.name());
        if weight <= 0.0 {
            continue;
        }
        let hits = match arm.rank(query, options.depth, keep) {
            Ok(hits) => hits,
            Err(err) => {
                ranking.signal_errors.push(SignalError {
                    arm: arm.name().to_string(),
                    message: format!("{err:#}"),
                });
                continue;
            }
        };
        let hits: Vec<_> = hits.into_iter().filter(|h| keep(h.note)).collect();
        let (low, high) = hits
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), h| {
                (lo.min(h.score), hi.max(h.score))
            });
        for (position, hit) in hits.into_iter().enumerate() {
            let rank = position + 1;
            let contribution = match options.fusion.unwrap_or(Fusion::Rrf) {
                Fusion::Rrf => weight / (options.rrf_k + rank as f64),
                Fusion::Score if high > low => weight * (hit.score - low) / (high - low),
                Fusion::Score => weight,
            };
            let entry = fused.entry(hit.note).or_insert_with(|| Explanation {
                arms: Vec::new(),
                fused: 0.0,
                recency: None,
                feedback: None,
                rerank: None,
            });
            entry.fused += contribution;
            entry.arms.push(ArmRank {
                arm: arm.name(),
                rank,
                score: hit.score,
                weight,
                contribution,
                rules: hit.rules,
            });
        }
    }
    let mut hits: Vec<RankedHit> = fused
        .into_iter()
        .map(|(note, explanation)| RankedHit {
            note,
            score: explanation.fused,
            explanation,
        })
        .collect();
    sort_hits(&mut hits, vault);

    if options.recency_weight > 0.0 {
        let signals: Vec<f64> = hits
            .iter()
            .map(|h| recency(vault, h.note, options))
            .collect();
        blend(&mut hits, &signals, options.recency_weight, |e, a| {
            e.recency = Some(a)
        });
        sort_hits(&mut hits, vault);
    }
    if options.feedback_weight > 0.0 && !feedback.notes.is_empty() {
        let signals: Vec<f64> = hits
            .iter()
            .map(|h| feedback.score(&vault.metas[h.note].path))
            .collect();
        blend(&mut hits, &signals, options.feedback_weight, |e, a| {
            e.feedback = Some(a)
        });
        sort_hits(&mut hits, vault);
    }
    ranking.hits = hits;
    ranking
}

/// By score, then tier, then path: the seed's order, deterministic.
fn sort_hits(hits: &mut [RankedHit], vault: &Vault) {
    hits.sort_by(|a, b| {
        let (ma, mb) = (&vault.metas[a.note], &vault.metas[b.note]);
        b.score
            .total_cmp(&a.score)
            .then(ma.tier.cmp(&mb.tier))
            .then_with(|| ma.path.cmp(&mb.path))
    });
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
