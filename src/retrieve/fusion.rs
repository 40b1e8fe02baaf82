//! The one place where ranking signals meet. Every signal is registered in
//! one list ([`signals`](crate::retrieve::arms::signals)): the arms' ranked
//! lists are fused by one function ([`fuse`]), then the rescorers adjust
//! the fused list in the list's order. Subquery coverage, note packs and
//! the seed's frontmatter ranking fuse their lists with the same function.
//! The expanders (graph neighbours) re-rank a pack's merged candidates
//! ([`expand`]), from the same list.
//! Every hit carries its explanation, so `--explain` costs nothing extra.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::retrieve::arms::{ArmHit, FrontmatterArm, QmdArm, Signal};
use crate::retrieve::graph::Expansion;
use crate::retrieve::qmd::{QmdConfig, QmdError};
use crate::retrieve::{Arm, Candidate, RuleHit};
use crate::vault::Vault;

pub(crate) use crate::retrieve::rescore::{Adjustment, RERANK_TOP, Rerank};

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
    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, crate::embed::ModelError>;
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
    /// The link-list prior, for a note mostly of link lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_lists: Option<crate::retrieve::rescore::Prior>,
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
pub(crate) struct RankedList {
    pub arm: &'static str,
    pub weight: f64,
    pub hits: Vec<ArmHit>,
}

impl RankedList {
    /// A fused ranking as one list of a further fusion (weight 1).
    pub(crate) fn of_ranking(arm: &'static str, ranking: &Ranking) -> RankedList {
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
pub(crate) enum Method {
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
pub(crate) struct Fused {
    pub score: f64,
    pub arms: Vec<ArmRank>,
}

/// Fuses ranked lists into one score per note (notes in number order):
/// each list, in order, adds its share to every note on it.
pub(crate) fn fuse(lists: Vec<RankedList>, method: Method) -> BTreeMap<usize, Fused> {
    let mut fused: BTreeMap<usize, Fused> = BTreeMap::new();
    for list in lists {
        let (low, high) = list
            .hits
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), h| {
                (lo.min(h.score), hi.max(h.score))
            });
        let weight = list.weight;
        // Hits an arm scored alike share the best of their ranks: the
        // order an arm breaks its ties in (the frontmatter pass's, by path)
        // says nothing of relevance, and reciprocal rank would weigh it as
        // if it did (23 notes tagged `java` spread over ranks 1 to 23).
        let mut tie: Option<(f64, usize)> = None;
        for (position, hit) in list.hits.into_iter().enumerate() {
            let rank = match tie {
                Some((score, rank)) if score == hit.score => rank,
                _ => position + 1,
            };
            tie = Some((hit.score, rank));
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
pub(crate) fn rank(
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
                link_lists: None,
            },
        })
        .collect();
    sort_hits(&mut ranking.hits, vault);
    for signal in signals {
        if let Signal::Unavailable { name, message } = signal {
            ranking.signal_errors.push(SignalError {
                arm: (*name).to_string(),
                message: message.to_string(),
            });
        }
    }
    for rescorer in signals.iter().filter_map(Signal::as_rescorer) {
        rescorer.rescore(query, &mut ranking, vault, options);
    }
    ranking
}

/// Applies the expanders among `signals` to a pack's merged candidates, in
/// list order (after [`rank`] ranked each query and coverage slots merged
/// them). One that cannot run is reported in `signal_errors`, after the
/// rankings' own errors.
pub(crate) fn expand(
    signals: &[Signal<'_>],
    candidates: &mut Vec<Candidate>,
    signal_errors: &mut Vec<SignalError>,
) -> Vec<Expansion> {
    let mut expansions = Vec::new();
    for expander in signals.iter().filter_map(Signal::as_expander) {
        match expander.expand(candidates) {
            Ok(expansion) => expansions.push(expansion),
            Err(err) => signal_errors.push(SignalError {
                arm: expander.name().into(),
                message: format!("{err:#}"),
            }),
        }
    }
    expansions
}

/// The seed's ranking (`--ranker frontmatter`, seed 000 Step 1): the
/// frontmatter pass's rule points plus QMD's +4 for every page it returns
/// (pages the pass did not score join), summed. Only these two signals: the
/// seed names them, and a new signal leaves the seed's ranking alone.
pub(crate) fn seed_rank(
    vault: &Vault,
    topic: &str,
    qmd: Option<&Result<QmdConfig, QmdError>>,
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
            message: error.to_string(),
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
pub(crate) fn sort_hits(hits: &mut [RankedHit], vault: &Vault) {
    hits.sort_by(|a, b| {
        let (ma, mb) = (&vault.metas[a.note], &vault.metas[b.note]);
        b.score
            .total_cmp(&a.score)
            .then(ma.tier.cmp(&mb.tier))
            .then_with(|| ma.path.cmp(&mb.path))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::feedback::FeedbackStore;
    use crate::retrieve::arms::{Sources, signals};
    use crate::retrieve::frontmatter::relevance_pass;
    use crate::retrieve::rescore::Rescorer;
    use crate::retrieve::{Query, Rule};

    fn vault() -> Vault {
        let files: Vec<(String, String)> = [
            ("a.md", "---\ntitle: Raft\n---\nLeader election.\n"),
            ("b.md", "---\ntags: [raft]\n---\nLogs.\n"),
            ("c.md", "---\nsummary: Paxos, not raft.\n---\n"),
            ("d.md", "Nothing here.\n"),
        ]
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
        Vault::from_texts("/v".into(), &files)
    }

    fn hits(notes: &[(usize, f64)]) -> Vec<ArmHit> {
        notes
            .iter()
            .map(|&(note, score)| ArmHit {
                note,
                score,
                rules: Vec::new(),
            })
            .collect()
    }

    fn list(arm: &'static str, weight: f64, notes: &[(usize, f64)]) -> RankedList {
        RankedList {
            arm,
            weight,
            hits: hits(notes),
        }
    }

    /// An arm that returns a fixed list.
    struct Listed {
        name: &'static str,
        hits: Vec<(usize, f64)>,
        weight: f64,
        fusion: Option<Fusion>,
    }

    impl Listed {
        fn new(name: &'static str, hits: &[(usize, f64)]) -> Listed {
            Listed {
                name,
                hits: hits.to_vec(),
                weight: 1.0,
                fusion: None,
            }
        }
    }

    impl Arm for Listed {
        fn name(&self) -> &'static str {
            self.name
        }

        fn rank(
            &self,
            _query: &str,
            limit: usize,
            keep: &dyn Fn(usize) -> bool,
        ) -> anyhow::Result<Vec<ArmHit>> {
            let kept: Vec<(usize, f64)> = self
                .hits
                .iter()
                .copied()
                .filter(|&(note, _)| keep(note))
                .take(limit)
                .collect();
            Ok(hits(&kept))
        }

        fn default_weight(&self) -> f64 {
            self.weight
        }

        fn default_fusion(&self) -> Option<Fusion> {
            self.fusion
        }
    }

    struct Failing(&'static str);

    impl Arm for Failing {
        fn name(&self) -> &'static str {
            self.0
        }

        fn rank(
            &self,
            _: &str,
            _: usize,
            _: &dyn Fn(usize) -> bool,
        ) -> anyhow::Result<Vec<ArmHit>> {
            Err(anyhow::anyhow!("{} is down", self.0))
        }
    }

    /// Adds 1 to one note's score and reports that it ran, with how many
    /// hits it saw.
    struct Boost(usize);

    impl Rescorer for Boost {
        fn name(&self) -> &'static str {
            "boost"
        }

        fn rescore(&self, _: &str, ranking: &mut Ranking, vault: &Vault, _: &RankOptions) {
            for hit in ranking.hits.iter_mut().filter(|h| h.note == self.0) {
                hit.score += 1.0;
            }
            sort_hits(&mut ranking.hits, vault);
            ranking.signal_errors.push(SignalError {
                arm: self.name().into(),
                message: format!("saw {} hits", ranking.hits.len()),
            });
        }
    }

    fn scores(fused: &BTreeMap<usize, Fused>) -> Vec<(usize, f64)> {
        fused.iter().map(|(&note, f)| (note, f.score)).collect()
    }

    #[test]
    fn rank_fusion_sums_each_list_in_order_and_keeps_every_arm() {
        let fused = fuse(
            vec![
                list("one", 1.0, &[(0, 9.0), (1, 8.0)]),
                list("two", 0.5, &[(1, 3.0), (2, 2.0)]),
            ],
            Method::Rrf { k: 60.0 },
        );
        assert_eq!(
            scores(&fused),
            [
                (0, 1.0 / 61.0),
                (1, 1.0 / 62.0 + 0.5 / 61.0),
                (2, 0.5 / 62.0)
            ]
        );
        let arms: Vec<(&str, usize, f64)> = fused[&1]
            .arms
            .iter()
            .map(|a| (a.arm, a.rank, a.score))
            .collect();
        assert_eq!(arms, [("one", 2, 8.0), ("two", 1, 3.0)]);
    }

    /// An arm's ties share the best rank among them (the order it broke
    /// them in is no evidence); the next score takes its own position.
    #[test]
    fn tied_scores_share_the_best_of_their_ranks() {
        let fused = fuse(
            vec![list(
                "tags",
                1.0,
                &[(0, 5.0), (1, 3.0), (2, 3.0), (3, 3.0), (4, 1.0)],
            )],
            Method::Rrf { k: 60.0 },
        );
        let ranks: Vec<(usize, usize)> = fused
            .iter()
            .map(|(note, f)| (*note, f.arms[0].rank))
            .collect();
        assert_eq!(ranks, [(0, 1), (1, 2), (2, 2), (3, 2), (4, 5)]);
        assert_eq!(fused[&3].score, 1.0 / 62.0);
        // Rankings of rankings keep their positions.
        let packs = fuse(
            vec![list("query", 1.0, &[(0, 1.0), (1, 1.0)])],
            Method::Rankings { k: 60.0 },
        );
        assert_eq!(packs[&1].score, 1.0 / 62.0);
    }

    #[test]
    fn fused_rankings_add_the_one_after_the_position() {
        // At k = 0.001 the fourth hit's (k + 3) + 1 and k + 4 round apart:
        // rankings of rankings keep the packs' summation order.
        let k = 0.001;
        let notes = [(0, 4.0), (1, 3.0), (2, 2.0), (3, 1.0)];
        let packs = fuse(vec![list("query", 1.0, &notes)], Method::Rankings { k });
        let arms = fuse(vec![list("query", 1.0, &notes)], Method::Rrf { k });
        assert_eq!(
            packs[&3].score.to_bits(),
            (1.0 / ((k + 3.0) + 1.0)).to_bits()
        );
        assert_eq!(arms[&3].score.to_bits(), (1.0 / (k + 4.0)).to_bits());
        assert_ne!(packs[&3].score.to_bits(), arms[&3].score.to_bits());
        assert_eq!(packs[&0].score, arms[&0].score);
    }

    #[test]
    fn score_fusion_normalises_each_list_on_its_own() {
        let fused = fuse(
            vec![
                list("spread", 2.0, &[(0, 10.0), (2, 7.0), (1, 4.0)]),
                list("flat", 0.25, &[(3, 5.0), (0, 5.0)]),
            ],
            Method::Score,
        );
        assert_eq!(scores(&fused), [(0, 2.25), (1, 0.0), (2, 1.0), (3, 0.25)]);
    }

    #[test]
    fn points_add_up_with_every_rule_in_list_order() {
        let rule = |rule: Rule| RuleHit {
            rule,
            term: "raft".into(),
            points: rule.points(),
        };
        let frontmatter = RankedList {
            arm: "frontmatter",
            weight: 1.0,
            hits: vec![ArmHit {
                note: 1,
                score: 8.0,
                rules: vec![rule(Rule::TitleOrAlias), rule(Rule::Tag)],
            }],
        };
        let qmd = RankedList {
            arm: "qmd",
            weight: 1.0,
            hits: vec![
                ArmHit {
                    note: 2,
                    score: 4.0,
                    rules: vec![rule(Rule::Qmd)],
                },
                ArmHit {
                    note: 1,
                    score: 4.0,
                    rules: vec![rule(Rule::Qmd)],
                },
            ],
        };
        let fused = fuse(vec![frontmatter, qmd], Method::Points);
        assert_eq!(scores(&fused), [(1, 12.0), (2, 4.0)]);
        let rules: Vec<Rule> = fused[&1]
            .arms
            .iter()
            .flat_map(|a| a.rules.iter().map(|r| r.rule))
            .collect();
        assert_eq!(rules, [Rule::TitleOrAlias, Rule::Tag, Rule::Qmd]);
    }

    #[test]
    fn the_seed_ranking_is_the_frontmatter_pass_and_reports_qmd_that_cannot_run() {
        let vault = vault();
        let pass = relevance_pass(&vault, &Query::parse("raft"));
        assert_eq!(pass.len(), 3);
        let (alone, errors) = seed_rank(&vault, "raft", None);
        assert_eq!(alone, pass);
        assert!(errors.is_empty());
        let broken = Err(QmdError::NotFound("/opt/qmd".into()));
        let (candidates, errors) = seed_rank(&vault, "raft", Some(&broken));
        assert_eq!(candidates, pass);
        assert_eq!(
            errors,
            [SignalError {
                arm: "qmd".into(),
                message: "qmd not found at /opt/qmd".into(),
            }]
        );
    }

    #[test]
    fn rank_runs_arms_then_reports_the_unavailable_then_rescores_in_order() {
        let vault = vault();
        let signals = vec![
            Signal::arm(Listed::new("first", &[(0, 2.0), (1, 1.0)])),
            Signal::arm(Failing("broken")),
            Signal::Unavailable {
                name: "late",
                message: "not configured".into(),
            },
            Signal::arm(Listed::new("second", &[(1, 3.0), (2, 2.0), (3, 1.0)])),
            Signal::rescorer(Boost(2)),
        ];
        let options = RankOptions::new(DateTime::UNIX_EPOCH);
        let ranking = rank(&signals, "q", &vault, &options, &|note| note != 3);
        let order: Vec<(usize, f64)> = ranking.hits.iter().map(|h| (h.note, h.score)).collect();
        assert_eq!(
            order,
            [
                (2, 1.0 / 62.0 + 1.0),
                (1, 1.0 / 62.0 + 1.0 / 61.0),
                (0, 1.0 / 61.0)
            ]
        );
        assert_eq!(ranking.hits[1].explanation.fused, 1.0 / 62.0 + 1.0 / 61.0);
        let errors: Vec<(&str, &str)> = ranking
            .signal_errors
            .iter()
            .map(|e| (e.arm.as_str(), e.message.as_str()))
            .collect();
        assert_eq!(
            errors,
            [
                ("broken", "broken is down"),
                ("late", "not configured"),
                ("boost", "saw 3 hits"),
            ]
        );
    }

    /// Moves the last candidate to the front.
    struct LastFirst;

    impl crate::retrieve::rescore::Expander for LastFirst {
        fn name(&self) -> &'static str {
            "last-first"
        }

        fn expand(&self, candidates: &mut Vec<Candidate>) -> anyhow::Result<Expansion> {
            let last = candidates
                .pop()
                .ok_or_else(|| anyhow::anyhow!("nothing to move"))?;
            candidates.insert(0, last);
            Ok(Expansion {
                options: Default::default(),
                hub_threshold: 7,
                added: Vec::new(),
                hubs: vec![candidates[0].note],
            })
        }
    }

    #[test]
    fn expanders_run_in_list_order_after_the_rankings_and_report_why_not() {
        let candidate = |note: usize| Candidate {
            note,
            score: 1.0,
            breakdown: Vec::new(),
            explanation: None,
        };
        let signals = vec![
            Signal::arm(Listed::new("ignored", &[(3, 1.0)])),
            Signal::expander(LastFirst),
            Signal::expander(crate::retrieve::graph::GraphExpander {
                store: None,
                options: crate::retrieve::graph::GraphOptions {
                    depth: 2,
                    direction: crate::retrieve::graph::Direction::Out,
                },
            }),
            Signal::expander(LastFirst),
        ];
        let mut candidates = vec![candidate(0), candidate(1), candidate(2)];
        let mut errors = vec![SignalError {
            arm: "bm25".into(),
            message: "from the ranking".into(),
        }];
        let expansions = expand(&signals, &mut candidates, &mut errors);
        let order: Vec<usize> = candidates.iter().map(|c| c.note).collect();
        assert_eq!(order, [1, 2, 0]);
        let hubs: Vec<Vec<usize>> = expansions.iter().map(|e| e.hubs.clone()).collect();
        assert_eq!(hubs, [vec![2], vec![1]]);
        let errors: Vec<(&str, &str)> = errors
            .iter()
            .map(|e| (e.arm.as_str(), e.message.as_str()))
            .collect();
        assert_eq!(
            errors,
            [
                ("bm25", "from the ranking"),
                ("graph", "links need the index")
            ]
        );
    }

    #[test]
    fn an_arm_may_prefer_a_fusion_and_a_weight_the_user_overrides() {
        let vault = vault();
        let mut preferring = Listed::new("semantic-like", &[(2, 1.0), (0, 0.5), (1, 0.0)]);
        preferring.weight = 0.5;
        preferring.fusion = Some(Fusion::Score);
        let signals = vec![
            Signal::arm(Listed::new("lexical", &[(0, 3.0), (1, 2.0)])),
            Signal::arm(preferring),
            Signal::arm(Failing("off")),
        ];
        let mut options = RankOptions::new(DateTime::UNIX_EPOCH);
        options.weights.insert("off".into(), 0.0);
        let ranking = rank(&signals, "q", &vault, &options, &|_| true);
        let order: Vec<(usize, f64)> = ranking.hits.iter().map(|h| (h.note, h.score)).collect();
        // lexical: 1 and 0 by min-max; semantic-like: 0.5 x (1, 0.5, 0).
        assert_eq!(order, [(0, 1.25), (2, 0.5), (1, 0.0)]);
        assert!(ranking.signal_errors.is_empty());
        options.fusion = Some(Fusion::Rrf);
        options.weights.insert("semantic-like".into(), 2.0);
        let ranking = rank(&signals, "q", &vault, &options, &|_| true);
        assert_eq!(ranking.hits[0].note, 0);
        assert_eq!(ranking.hits[0].score, 1.0 / 61.0 + 2.0 / 62.0);
    }

    #[test]
    fn the_signal_list_orders_arms_rescorers_and_the_signals_that_cannot_run() {
        let vault = vault();
        let feedback = FeedbackStore::default();
        let broken = Err(QmdError::Mode("turbo".into()));
        let passage = |_: usize| String::new();
        let list = signals(&Sources {
            vault: &vault,
            store: None,
            store_error: Some("no index"),
            semantic: None,
            semantic_error: None,
            qmd: Some(&broken),
            feedback: &feedback,
            reranker: None,
            reranker_error: Some("no bert"),
            passage: &passage,
            graph: crate::retrieve::graph::GraphOptions {
                depth: 1,
                direction: crate::retrieve::graph::Direction::Both,
            },
        });
        let named: Vec<String> = list
            .iter()
            .map(|signal| match signal {
                Signal::Arm(arm) => format!("arm {}", arm.name()),
                Signal::Rescorer(rescorer) => format!("rescorer {}", rescorer.name()),
                Signal::Expander(expander) => format!("expander {}", expander.name()),
                Signal::Unavailable { name, message } => format!("{name}: {message}"),
            })
            .collect();
        assert_eq!(
            named,
            [
                "arm frontmatter",
                "bm25: no index",
                "qmd: QMD_CLI_SEARCH_MODE=\"turbo\" is not a QMD search mode; use quality, \
                 balanced or fast",
                "rescorer link_lists",
                "rescorer recency",
                "rescorer feedback",
                "rerank: no bert",
                "expander graph",
            ]
        );
    }
}
