//! The one place where ranking signals meet. Every signal is registered in
//! one list ([`signals`](crate::retrieve::arms::signals)): the arms' ranked
//! lists are fused by one function ([`fuse`]), then the rescorers adjust
//! the fused list in the list's order. Subquery coverage, note packs and
//! the seed's frontmatter ranking fuse their lists with the same function.
//! Every hit carries its explanation, so `--explain` costs nothing extra.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::retrieve::arms::{ArmHit, FrontmatterArm, QmdArm, Signal};
use crate::retrieve::qmd::QmdConfig;
use crate::retrieve::{Arm, Candidate, RuleHit};
use crate::vault::Vault;

pub use crate::retrieve::rescore::{Adjustment, RERANK_TOP, Rerank, Rescorer};

/// How the arms' lists become one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fusion {
    /// Weighted reciprocal rank fusion: an arm adds `weight / (k + rank)`.
    Rrf,
    /// Weighted score fusion: an arm adds `weight` times its score
    /// min-max-normalised over its own list (0 for notes not on it). Keeps
    /// how far apart an arm's hits are, which rank fusion throws away.
    Score,
}

/// Scores (query, passage) pairs: a cross-encoder, read by the rerank
/// rescorer. Models implement it (`embed::rerank`); ranking owns the seam.
pub trait Reranker: Send + Sync {
    fn name(&self) -> &str;
    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, String>;
}

/// How results are ranked.
#[derive(Clone, Debug)]
pub struct RankOptions {
    /// `None`: reciprocal rank fusion, unless an arm fuses better by score
    /// (the semantic arm's model family: see `Embedder::default_fusion`).
    pub fusion: Option<Fusion>,
    /// The `k` of reciprocal rank fusion.
    pub rrf_k: f64,
    /// Weight of each signal by name; one not listed has its own default
    /// ([`Arm::default_weight`]; 1 for the reranker).
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

    /// The weight the user gave `signal`, else `default`.
    pub fn weight_or(&self, signal: &str, default: f64) -> f64 {
        self.weights.get(signal).copied().unwrap_or(default)
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

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankedHit {
    pub note: usize,
    pub score: f64,
    pub explanation: Explanation,
}

/// A signal that failed; the others went on.
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

/// One ranked list entering fusion, best first.
#[derive(Clone, Debug, PartialEq)]
pub struct RankedList {
    pub arm: &'static str,
    pub weight: f64,
    pub hits: Vec<ArmHit>,
}

impl RankedList {
    /// A fused ranking as one list of a further fusion (weight 1).
    pub fn of_ranking(arm: &'static str, ranking: &Ranking) -> RankedList {
        RankedList {
            arm,
            weight: 1.0,
            hits: ranking
                .hits
                .iter()
                .map(|hit| ArmHit {
                    note: hit.note,
                    score: hit.score,
                    rules: Vec::new(),
                })
                .collect(),
        }
    }
}

/// How a list's hits add up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Method {
    /// Weighted reciprocal rank: a hit adds `weight / (k + rank)`.
    Rrf { k: f64 },
    /// [`Fusion::Score`]: a hit adds `weight` times its min-max-normalised
    /// score (`weight` itself when the list's scores are all equal).
    Score,
    /// The seed's points: a hit adds `weight` times its score, the rule
    /// points the arm gave it.
    Points,
    /// Reciprocal rank over lists that are fused rankings already
    /// (subqueries, a note's links and similar notes). The same
    /// `weight / (k + rank)`, but summed as `(k + position) + 1`, the order
    /// packs have always used: for a `k` that is not a whole number the
    /// two orders can differ in the last bit, and a pack's scores are kept
    /// bit for bit.
    Rankings { k: f64 },
}

/// A note's fused score and each list's share of it, lists in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Fused {
    pub score: f64,
    pub arms: Vec<ArmRank>,
}

/// Fuses ranked lists into one score per note (notes in number order):
/// each list, in order, adds its share to every note on it.
pub fn fuse(lists: Vec<RankedList>, method: Method) -> BTreeMap<usize, Fused> {
    let mut fused: BTreeMap<usize, Fused> = BTreeMap::new();
    for list in lists {
        let (low, high) = list
            .hits
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), h| {
                (lo.min(h.score), hi.max(h.score))
            });
        let weight = list.weight;
        for (position, hit) in list.hits.into_iter().enumerate() {
            let rank = position + 1;
            let contribution = match method {
                Method::Rrf { k } => weight / (k + rank as f64),
                Method::Score if high > low => weight * (hit.score - low) / (high - low),
                Method::Score => weight,
                Method::Points => weight * hit.score,
                Method::Rankings { k } => weight / (k + position as f64 + 1.0),
            };
            let entry = fused.entry(hit.note).or_insert_with(|| Fused {
                score: 0.0,
                arms: Vec::new(),
            });
            entry.score += contribution;
            entry.arms.push(ArmRank {
                arm: list.arm,
                rank,
                score: hit.score,
                weight,
                contribution,
                rules: hit.rules,
            });
        }
    }
    fused
}

/// Ranks with every signal: runs the arms (those of weight above 0), fuses
/// their lists, reports the signals that could not run, then applies the
/// rescorers in order. `keep` filters notes before fusion (folder or tag
/// filters).
pub fn rank(
    signals: &[Signal<'_>],
    query: &str,
    vault: &Vault,
    options: &RankOptions,
    keep: &dyn Fn(usize) -> bool,
) -> Ranking {
    let mut ranking = Ranking::default();
    let arms = || signals.iter().filter_map(Signal::as_arm);
    let method = match options
        .fusion
        .or_else(|| arms().find_map(|arm| arm.default_fusion()))
        .unwrap_or(Fusion::Rrf)
    {
        Fusion::Rrf => Method::Rrf { k: options.rrf_k },
        Fusion::Score => Method::Score,
    };
    let mut lists = Vec::new();
    for arm in arms() {
        let weight = options.weight_or(arm.name(), arm.default_weight());
        if weight <= 0.0 {
            continue;
        }
        match arm.rank(query, options.depth, keep) {
            Ok(hits) => lists.push(RankedList {
                arm: arm.name(),
                weight,
                hits: hits.into_iter().filter(|h| keep(h.note)).collect(),
            }),
            Err(err) => ranking.signal_errors.push(SignalError {
                arm: arm.name().to_string(),
                message: format!("{err:#}"),
            }),
        }
    }
    ranking.hits = fuse(lists, method)
        .into_iter()
        .map(|(note, fused)| RankedHit {
            note,
            score: fused.score,
            explanation: Explanation {
                arms: fused.arms,
                fused: fused.score,
                recency: None,
                feedback: None,
                rerank: None,
            },
        })
        .collect();
    sort_hits(&mut ranking.hits, vault);
    for signal in signals {
        if let Signal::Unavailable { name, message } = signal {
            ranking.signal_errors.push(SignalError {
                arm: (*name).to_string(),
                message: (*message).to_string(),
            });
        }
    }
    for rescorer in signals.iter().filter_map(Signal::as_rescorer) {
        rescorer.rescore(query, &mut ranking, vault, options);
    }
    ranking
}

/// The seed's ranking (`--ranker frontmatter`, seed 000 Step 1): the
/// frontmatter pass's rule points plus QMD's +4 for every page it returns
/// (pages the pass did not score join), summed. Only these two signals: the
/// seed names them, and a new signal leaves the seed's ranking alone.
pub fn seed_rank(
    vault: &Vault,
    topic: &str,
    qmd: Option<&Result<QmdConfig, String>>,
) -> (Vec<Candidate>, Vec<SignalError>) {
    let frontmatter = FrontmatterArm { vault };
    let mut lists = Vec::new();
    let mut signal_errors = Vec::new();
    if let Ok(hits) = frontmatter.rank(topic, usize::MAX, &|_| true) {
        lists.push(RankedList {
            arm: frontmatter.name(),
            weight: 1.0,
            hits,
        });
    }
    match qmd {
        Some(Ok(config)) => {
            let arm = QmdArm { config, vault };
            match arm.seed_hits(topic) {
                Ok(hits) => lists.push(RankedList {
                    arm: arm.name(),
                    weight: 1.0,
                    hits,
                }),
                Err(err) => signal_errors.push(SignalError {
                    arm: arm.name().into(),
                    message: format!("{err:#}"),
                }),
            }
        }
        Some(Err(error)) => signal_errors.push(SignalError {
            arm: "qmd".into(),
            message: error.clone(),
        }),
        None => {}
    }
    let mut candidates: Vec<Candidate> = fuse(lists, Method::Points)
        .into_iter()
        .map(|(note, fused)| Candidate {
            note,
            score: fused.score,
            breakdown: fused.arms.into_iter().flat_map(|arm| arm.rules).collect(),
            explanation: None,
        })
        .collect();
    crate::retrieve::frontmatter::sort_by_score(vault, &mut candidates);
    (candidates, signal_errors)
}

/// By score, then tier, then path: the seed's order, deterministic.
pub fn sort_hits(hits: &mut [RankedHit], vault: &Vault) {
    hits.sort_by(|a, b| {
        let (ma, mb) = (&vault.metas[a.note], &vault.metas[b.note]);
        b.score
            .total_cmp(&a.score)
            .then(ma.tier.cmp(&mb.tier))
            .then_with(|| ma.path.cmp(&mb.path))
    });
}
