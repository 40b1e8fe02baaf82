//! The ranking signals, each behind one small interface, and the one list
//! that registers them ([`signals`]): arms rank notes of their own
//! ([`Arm`]); rescorers adjust the fused list ([`Rescorer`]); expanders
//! re-rank a pack's merged candidates ([`Expander`]: graph neighbours). A
//! new signal is one type here (or in `rescore.rs`) and one line in
//! [`signals`]; `fusion::rank` runs, fuses and explains them all, and
//! `fusion::expand` runs the expanders.

use std::borrow::Cow;

use anyhow::Result;

use crate::embed::Embedder;
use crate::index::feedback::FeedbackStore;
use crate::retrieve::frontmatter::relevance_top;
use crate::retrieve::fusion::{Fusion, Reranker};
use crate::retrieve::graph::{GraphExpander, GraphOptions};
use crate::retrieve::qmd::{self, QmdConfig, QmdError};
use crate::retrieve::rescore::{
    Expander, FeedbackRescorer, LinkListRescorer, RecencyRescorer, RerankRescorer, Rescorer,
};
use crate::retrieve::{Query, Rule, RuleHit};
use crate::store::{Store, VectorSearch};
use crate::vault::Vault;

/// What a session offers the signals; each takes what it needs.
pub(crate) struct Sources<'a> {
    pub vault: &'a Vault,
    /// The index (embedded or PostgreSQL), for BM25.
    pub store: Option<&'a dyn Store>,
    /// Why there is no index.
    pub store_error: Option<&'a str>,
    /// The embedding model and the vault's vectors.
    pub semantic: Option<(&'a dyn Embedder, &'a dyn VectorSearch)>,
    /// Why the chosen model failed.
    pub semantic_error: Option<&'a str>,
    /// QMD's configuration, or why it cannot run.
    pub qmd: Option<&'a Result<QmdConfig, QmdError>>,
    pub feedback: &'a FeedbackStore,
    pub reranker: Option<&'a dyn Reranker>,
    /// Why the chosen reranker could not be loaded.
    pub reranker_error: Option<&'a str>,
    /// The text a reranker reads for a note.
    pub passage: &'a dyn Fn(usize) -> String,
    /// `--graph-depth`: depth 0 lists no graph signal.
    pub graph: GraphOptions,
}

/// Every ranking signal the sources allow, in the order `fusion::rank`
/// uses them: the arms' lists are fused in this order, and the rescorers
/// applied in this order. A signal that was asked for but cannot run is
/// listed with its reason, reported with every ranking.
pub(crate) fn signals<'a>(sources: &Sources<'a>) -> Vec<Signal<'a>> {
    let s = sources;
    let mut list = vec![Signal::arm(FrontmatterArm { vault: s.vault })];
    list.extend(
        s.store
            .map(|store| Signal::arm(Bm25Arm::new(store, s.vault))),
    );
    list.extend(Signal::unavailable("bm25", s.store_error));
    list.extend(
        s.semantic
            .map(|(embedder, index)| Signal::arm(SemanticArm { embedder, index })),
    );
    list.extend(Signal::unavailable("semantic", s.semantic_error));
    match s.qmd {
        Some(Ok(config)) => list.push(Signal::arm(QmdArm {
            config,
            vault: s.vault,
        })),
        Some(Err(error)) => list.push(Signal::Unavailable {
            name: "qmd",
            message: Cow::Owned(error.to_string()),
        }),
        None => {}
    }
    list.push(Signal::rescorer(LinkListRescorer));
    list.push(Signal::rescorer(RecencyRescorer));
    list.push(Signal::rescorer(FeedbackRescorer {
        feedback: s.feedback,
    }));
    list.extend(s.reranker.map(|reranker| {
        Signal::rescorer(RerankRescorer {
            reranker,
            passage: s.passage,
        })
    }));
    list.extend(Signal::unavailable("rerank", s.reranker_error));
    // A missing link graph is reported by the expansion itself, after the
    // rankings' errors, where packs have always listed it.
    if s.graph.depth > 0 {
        list.push(Signal::expander(GraphExpander {
            store: s.store,
            options: s.graph,
        }));
    }
    list
}

/// One registered ranking signal.
pub(crate) enum Signal<'a> {
    /// A ranked list of its own, fused with the others.
    Arm(Box<dyn Arm + 'a>),
    /// An adjustment of the fused list.
    Rescorer(Box<dyn Rescorer + 'a>),
    /// A re-ranking of a pack's merged candidates, once per pack.
    Expander(Box<dyn Expander + 'a>),
    /// A signal that was asked for but cannot run, and why.
    Unavailable {
        name: &'static str,
        message: Cow<'a, str>,
    },
}

impl<'a> Signal<'a> {
    pub(crate) fn arm(arm: impl Arm + 'a) -> Signal<'a> {
        Signal::Arm(Box::new(arm))
    }

    pub(crate) fn rescorer(rescorer: impl Rescorer + 'a) -> Signal<'a> {
        Signal::Rescorer(Box::new(rescorer))
    }

    pub(crate) fn expander(expander: impl Expander + 'a) -> Signal<'a> {
        Signal::Expander(Box::new(expander))
    }

    fn unavailable(name: &'static str, message: Option<&'a str>) -> Option<Signal<'a>> {
        message.map(|message| Signal::Unavailable {
            name,
            message: Cow::Borrowed(message),
        })
    }

    /// The arm, if this signal is one.
    pub(crate) fn as_arm(&self) -> Option<&(dyn Arm + 'a)> {
        match self {
            Signal::Arm(arm) => Some(arm.as_ref()),
            _ => None,
        }
    }

    /// The expander, if this signal is one.
    pub(crate) fn as_expander(&self) -> Option<&(dyn Expander + 'a)> {
        match self {
            Signal::Expander(expander) => Some(expander.as_ref()),
            _ => None,
        }
    }

    /// The rescorer, if this signal is one.
    pub(crate) fn as_rescorer(&self) -> Option<&(dyn Rescorer + 'a)> {
        match self {
            Signal::Rescorer(rescorer) => Some(rescorer.as_ref()),
            _ => None,
        }
    }
}

/// A hit as one arm sees it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ArmHit {
    pub note: usize,
    pub score: f64,
    pub rules: Vec<RuleHit>,
}

/// A ranked list of notes for a query.
pub(crate) trait Arm {
    fn name(&self) -> &'static str;
    /// Up to `limit` hits among the notes `keep` accepts, best first.
    fn rank(&self, query: &str, limit: usize, keep: &dyn Fn(usize) -> bool) -> Result<Vec<ArmHit>>;
    /// The arm's fusion weight when the user gives none.
    fn default_weight(&self) -> f64 {
        1.0
    }
    /// How the arm's list fuses best when the user does not say; the first
    /// arm with a preference decides.
    fn default_fusion(&self) -> Option<Fusion> {
        None
    }
}

/// The seed's frontmatter relevance pass (+5/+3/+2/+1).
pub(crate) struct FrontmatterArm<'a> {
    pub vault: &'a Vault,
}

impl Arm for FrontmatterArm<'_> {
    fn name(&self) -> &'static str {
        "frontmatter"
    }

    fn rank(&self, query: &str, limit: usize, keep: &dyn Fn(usize) -> bool) -> Result<Vec<ArmHit>> {
        Ok(relevance_top(self.vault, &Query::parse(query), limit, keep)
            .into_iter()
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
pub(crate) struct Bm25Arm<'a> {
    pub store: &'a dyn Store,
    /// How many notes the store holds (no more can be fetched).
    pub notes: usize,
}

impl<'a> Bm25Arm<'a> {
    pub(crate) fn new(store: &'a dyn Store, vault: &Vault) -> Bm25Arm<'a> {
        Bm25Arm {
            store,
            notes: vault.metas.len(),
        }
    }
}

/// A first list keeping fewer than one note in this many suggests a
/// narrow filter (see [`Bm25Arm`]'s `rank`).
const FEW_KEPT: usize = 8;

impl Arm for Bm25Arm<'_> {
    fn name(&self) -> &'static str {
        "bm25"
    }

    fn rank(&self, query: &str, limit: usize, keep: &dyn Fn(usize) -> bool) -> Result<Vec<ArmHit>> {
        let hit = |(note, score): (usize, f32)| ArmHit {
            note,
            score: f64::from(score),
            rules: Vec::new(),
        };
        if self.store.scores_every_match() {
            // The cut comes after the filter anyway: one search.
            if let Some(kept) = self.store.search_notes_kept(query, limit, keep) {
                return Ok(kept?.into_iter().map(hit).collect());
            }
        }
        let mut fetch = limit;
        loop {
            let hits = self.store.search_notes(query, fetch)?;
            let exhausted = hits.len() < fetch;
            let listed = hits.len();
            let kept: Vec<ArmHit> = hits
                .into_iter()
                .filter(|(note, _)| keep(*note))
                .take(limit)
                .map(hit)
                .collect();
            if kept.len() >= limit || exhausted || fetch >= self.notes {
                return Ok(kept);
            }
            // The first list kept few of its notes: a narrow filter is at
            // work. A store that can search among the notes it keeps does
            // so once, rather than deeper lists again and again.
            if fetch == limit
                && kept.len().saturating_mul(FEW_KEPT) < listed
                && let Some(kept) = self.store.search_notes_kept(query, limit, keep)
            {
                return Ok(kept?.into_iter().map(hit).collect());
            }
            fetch = fetch.saturating_mul(4);
        }
    }
}

/// Vector similarity: the query's embedding against every chunk's, a note
/// scoring as its best chunk.
pub(crate) struct SemanticArm<'a> {
    pub embedder: &'a dyn Embedder,
    pub index: &'a dyn VectorSearch,
}

impl Arm for SemanticArm<'_> {
    fn name(&self) -> &'static str {
        "semantic"
    }

    /// Measured per model family (see `Embedder::default_weight`).
    fn default_weight(&self) -> f64 {
        self.embedder.default_weight()
    }

    fn default_fusion(&self) -> Option<Fusion> {
        Some(self.embedder.default_fusion())
    }

    fn rank(&self, query: &str, limit: usize, keep: &dyn Fn(usize) -> bool) -> Result<Vec<ArmHit>> {
        // A served model may be down or slow: the arm fails, is reported,
        // and the other arms rank.
        let vector = self
            .embedder
            .try_embed_query(query)
            .map_err(anyhow::Error::msg)?;
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
pub(crate) struct QmdArm<'a> {
    pub config: &'a QmdConfig,
    pub vault: &'a Vault,
}

impl QmdArm<'_> {
    /// The vault notes QMD returns for `query`, best first.
    pub(crate) fn notes(&self, query: &str, limit: usize) -> Result<Vec<(usize, f64)>> {
        let hits = qmd::search(self.config, &self.vault.root, query, limit)?;
        Ok(hits
            .into_iter()
            .filter_map(|hit| {
                let note = self.vault.metas.search_path(&hit.path).ok()?;
                Some((note, hit.score))
            })
            .collect())
    }

    /// The seed's view of QMD: +4 points ([`Rule::Qmd`]) for each of the
    /// first [`CANDIDATE_LIMIT`](crate::retrieve::CANDIDATE_LIMIT) pages it
    /// returns, whatever its own score.
    pub(crate) fn seed_hits(&self, query: &str) -> Result<Vec<ArmHit>> {
        Ok(self
            .notes(query, crate::retrieve::CANDIDATE_LIMIT)?
            .into_iter()
            .map(|(note, _)| ArmHit {
                note,
                score: f64::from(Rule::Qmd.points()),
                rules: vec![RuleHit {
                    rule: Rule::Qmd,
                    term: String::new(),
                    points: Rule::Qmd.points(),
                }],
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
