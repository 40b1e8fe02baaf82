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
pub(crate) trait Rescorer {
    fn name(&self) -> &'static str;
    fn rescore(&self, query: &str, ranking: &mut Ranking, vault: &Vault, options: &RankOptions);
}

/// A signal that re-ranks a pack's final candidate list: the list the
/// subqueries' rankings were merged into by coverage slots, so it runs
/// once per pack, after every per-query [`rank`], through
/// [`expand`](crate::retrieve::fusion::expand). It may add notes no arm
/// ranked (graph neighbours). An error is why it could not run (as an
/// [`Arm`](crate::retrieve::arms::Arm)'s is).
pub(crate) trait Expander {
    fn name(&self) -> &'static str;
    fn expand(&self, candidates: &mut Vec<Candidate>) -> anyhow::Result<Expansion>;
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
pub(crate) const RERANK_TOP: usize = 20;

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

/// What the link-list prior did to a hit: `after = before * factor`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Prior {
    /// The share of the note's text on link lines (0 to 1).
    pub share: f64,
    pub factor: f64,
    pub before: f64,
    pub after: f64,
}

/// A note whose text is more than this share of link lines is weighed
/// down: below it a note explains with some links; above, it is mostly a
/// list of pages elsewhere.
const LINK_LIST_FREE_SHARE: f64 = 0.5;

/// The weight a note entirely of link lines loses (linearly from
/// [`LINK_LIST_FREE_SHARE`]): it stays found, below the notes that explain
/// what its link titles name (itnotes-zh `search "docker 镜像"`: the
/// bookmark note Docker_Material no longer leads Docker_Note).
const LINK_LIST_PENALTY: f64 = 0.5;

/// Notes that are mostly lists of links rank below notes that explain: a
/// prior from each note's share of link lines, computed when it was parsed
/// (`NoteMeta::link_lists`), so both stores apply it alike.
pub(crate) struct LinkListRescorer;

impl Rescorer for LinkListRescorer {
    fn name(&self) -> &'static str {
        "link_lists"
    }

    fn rescore(&self, _query: &str, ranking: &mut Ranking, vault: &Vault, _options: &RankOptions) {
        let mut moved = false;
        for hit in &mut ranking.hits {
            let share = f64::from(vault.metas[hit.note].link_lists.min(100)) / 100.0;
            if share <= LINK_LIST_FREE_SHARE {
                continue;
            }
            let excess = (share - LINK_LIST_FREE_SHARE) / (1.0 - LINK_LIST_FREE_SHARE);
            let factor = 1.0 - LINK_LIST_PENALTY * excess;
            let before = hit.score;
            hit.score = before * factor;
            hit.explanation.link_lists = Some(Prior {
                share,
                factor,
                before,
                after: hit.score,
            });
            moved = true;
        }
        if moved {
            sort_hits(&mut ranking.hits, vault);
        }
    }
}

/// Recency, blended in with `--recency-weight`: 0.5 ^ (age / stale days).
pub(crate) struct RecencyRescorer;

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
pub(crate) struct FeedbackRescorer<'a> {
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
pub(crate) struct RerankRescorer<'a> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn hit(note: usize, score: f64) -> RankedHit {
        RankedHit {
            note,
            score,
            explanation: Explanation {
                arms: Vec::new(),
                fused: score,
                recency: None,
                feedback: None,
                rerank: None,
                link_lists: None,
            },
        }
    }

    #[test]
    fn notes_mostly_of_links_fall_below_notes_that_explain() {
        let vault = Vault::from_texts(
            "/v".into(),
            &[
                (
                    "links.md".into(),
                    "- [Docker images](https://a.example/images)\n- https://b.example/rmi\n".into(),
                ),
                (
                    "notes.md".into(),
                    "A docker image is the template a container starts from.\n".into(),
                ),
                // A link line seen as 41 characters after 22 of prose: 65%.
                (
                    "mixed.md".into(),
                    "Images: the templates.\n\n- [Docker images: a guide to every command](https://example.org/d)\n"
                        .into(),
                ),
            ],
        );
        assert_eq!(
            vault.metas.iter().map(|m| m.link_lists).collect::<Vec<_>>(),
            [100, 65, 0]
        );
        let mut ranking = Ranking {
            hits: vec![hit(0, 0.04), hit(1, 0.035), hit(2, 0.03)],
            signal_errors: Vec::new(),
        };
        let options = RankOptions::new(Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap());
        LinkListRescorer.rescore("docker", &mut ranking, &vault, &options);
        let order: Vec<(usize, f64)> = ranking.hits.iter().map(|h| (h.note, h.score)).collect();
        assert_eq!(order[0], (2, 0.03));
        assert_eq!(order[1].0, 1);
        // 0.65 is 30% of the way from 0.5 to 1: a factor of 1 - 0.5 * 0.3.
        assert!((order[1].1 - 0.035 * (1.0 - 0.5 * 0.3)).abs() < 1e-12);
        assert_eq!(order[2], (0, 0.02));
        let prior = ranking.hits[2].explanation.link_lists.as_ref().unwrap();
        assert_eq!((prior.share, prior.factor, prior.before), (1.0, 0.5, 0.04));
        assert_eq!(ranking.hits[0].explanation.link_lists, None);
    }
}
