//! Ranking notes for a pack: the seed's frontmatter relevance pass and the
//! recent-activity order.

pub(crate) mod arms;
pub(crate) mod frontmatter;
pub(crate) mod fusion;
pub(crate) mod graph;
pub(crate) mod qmd;
pub(crate) mod query;
pub(crate) mod recent;
pub(crate) mod rescore;
pub(crate) mod syntax;

use serde::Serialize;

pub(crate) use arms::{Arm, ArmHit, Sources, signals};
// Exported by lib.rs: on a line of its own, as `unreachable_pub` judges a
// grouped `pub use` as a whole.
pub use fusion::RankOptions;
pub(crate) use fusion::{
    Explanation, Method, RankedList, Ranking, Reranker, SignalError, fuse, rank, seed_rank,
};
pub(crate) use query::Query;

/// How many candidates a pack considers (seed Step 1).
pub(crate) const CANDIDATE_LIMIT: usize = 20;

/// A note chosen as a pack candidate, with why it ranked where it did.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// Index into `Vault::metas`.
    pub note: usize,
    /// The relevance score (0 in recent mode).
    pub score: f64,
    /// The frontmatter rules that fired (frontmatter ranking).
    pub breakdown: Vec<RuleHit>,
    /// The fused ranking's account (hybrid ranking).
    pub explanation: Option<Explanation>,
}

/// One scoring rule that fired for one query term.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuleHit {
    pub rule: Rule,
    pub term: String,
    pub points: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// +5: the title or an alias equals the term.
    TitleOrAlias,
    /// +3: a tag (or one `/` level of a nested tag) equals the term.
    Tag,
    /// +2: the `summary:` contains the term.
    Summary,
    /// +1: the page's `index.md` description contains the term.
    IndexDescription,
    /// Recent mode: linked from `hot.md`.
    Hot,
    /// +4: QMD's semantic pass returned the page (seed 000, Step 1).
    Qmd,
}

impl Rule {
    pub fn points(self) -> u32 {
        match self {
            Rule::TitleOrAlias => 5,
            Rule::Tag => 3,
            Rule::Summary => 2,
            Rule::IndexDescription => 1,
            Rule::Hot => 0,
            Rule::Qmd => 4,
        }
    }
}
