//! Selecting, compressing and fitting pages to a token budget (seed Steps
//! 2–5), producing a [`Pack`]: the rendered bundle plus an account of it.
//!
//! The budget is exact: every piece of the pack is measured with the chosen
//! counter at boundaries where measures add up (see [`crate::tokens`]), so
//! the sum of the pieces is the size of the printed pack, which is checked
//! once more at the end.

pub mod compress;
pub mod dedup;
pub mod render;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use crate::note::{Diagnostic, SummarySource, Tier};
use crate::retrieve::frontmatter::relevance_pass;
use crate::retrieve::recent::recent_order;
use crate::retrieve::{CANDIDATE_LIMIT, Candidate, Explanation, Query, RuleHit, SignalError};
use crate::tokens::Tokenizer;
use crate::vault::Vault;

pub use compress::BodyMode;
use compress::{CompressedBody, PackState, compress, page_key};
use render::Header;

pub const DEFAULT_BUDGET: usize = 8000;
pub const MAX_BUDGET: usize = 100_000;
/// Budgets above this print the seed's "large pack" warning.
pub const LARGE_BUDGET: usize = 50_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PackMode {
    Topic(String),
    Recent,
}

#[derive(Clone, Debug)]
pub struct PackOptions {
    pub budget: usize,
    pub tokenizer: Tokenizer,
    pub generated_at: DateTime<Utc>,
    pub candidate_limit: usize,
}

impl PackOptions {
    pub fn new(budget: usize, tokenizer: Tokenizer, generated_at: DateTime<Utc>) -> PackOptions {
        PackOptions {
            budget,
            tokenizer,
            generated_at,
            candidate_limit: CANDIDATE_LIMIT,
        }
    }
}

/// A finished pack: the bundle and the data behind it.
#[derive(Clone, Debug, Serialize)]
pub struct Pack {
    pub mode: &'static str,
    pub topic: Option<String>,
    pub query_terms: Vec<String>,
    /// `hybrid` (fused arms) or `frontmatter` (the seed's pass alone).
    pub ranker: &'static str,
    /// Arms that failed; the pack was built from the others.
    pub signal_errors: Vec<SignalError>,
    pub budget: usize,
    /// The token count of `bundle` under `counter`.
    pub actual: usize,
    pub counter: Tokenizer,
    pub generated: String,
    /// Candidates considered (at most 20).
    pub candidates: usize,
    pub pages: Vec<PackedPage>,
    pub pages_dropped: usize,
    pub dropped: Vec<DroppedPage>,
    pub warnings: Vec<String>,
    pub diagnostics: Vec<Diagnostic>,
    /// The exact markdown printed.
    pub bundle: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct PackedPage {
    pub path: String,
    pub title: String,
    pub tier: Tier,
    pub tags: Vec<String>,
    pub summary: String,
    pub summary_source: SummarySource,
    pub score: f64,
    pub score_breakdown: Vec<RuleHit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explanation: Option<Explanation>,
    pub body_mode: BodyMode,
    /// The page block's token count, as printed in its heading.
    pub tokens: usize,
    /// Pages named by `_(content also in …)_` markers in this body.
    pub content_also_in: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct DroppedPage {
    pub path: String,
    pub title: String,
    pub tier: Tier,
    pub score: f64,
    pub reason: &'static str,
}

/// Builds the pack for `mode` from `vault` with the seed's ranking: the
/// frontmatter relevance pass for a topic, recent activity otherwise.
pub fn build_pack(vault: &Vault, mode: &PackMode, options: &PackOptions) -> Pack {
    let ranked = match mode {
        PackMode::Topic(topic) => relevance_pass(vault, &Query::parse(topic)),
        PackMode::Recent => recent_order(vault),
    };
    build_pack_from(vault, mode, ranked, "frontmatter", Vec::new(), options)
}

/// Builds the pack for `mode` from candidates ranked elsewhere (best
/// first; only the first `candidate_limit` are considered).
pub fn build_pack_from(
    vault: &Vault,
    mode: &PackMode,
    ranked: Vec<Candidate>,
    ranker: &'static str,
    signal_errors: Vec<SignalError>,
    options: &PackOptions,
) -> Pack {
    let (topic, query_terms) = match mode {
        PackMode::Topic(topic) => {
            let query = Query::parse(topic);
            (Some(query.text), query.terms)
        }
        PackMode::Recent => (None, Vec::new()),
    };
    let candidates: Vec<Candidate> = ranked.into_iter().take(options.candidate_limit).collect();
    let mut pack = Pack {
        mode: match mode {
            PackMode::Topic(_) => "topic",
            PackMode::Recent => "recent",
        },
        topic,
        query_terms,
        ranker: if matches!(mode, PackMode::Recent) {
            "recent"
        } else {
            ranker
        },
        signal_errors,
        budget: options.budget,
        actual: 0,
        counter: options.tokenizer,
        generated: options
            .generated_at
            .to_rfc3339_opts(SecondsFormat::Secs, true),
        candidates: candidates.len(),
        pages: Vec::new(),
        pages_dropped: 0,
        dropped: Vec::new(),
        warnings: Vec::new(),
        diagnostics: vault.diagnostics.clone(),
        bundle: String::new(),
    };
    if options.budget > LARGE_BUDGET {
        pack.warnings.push(render::LARGE_PACK_WARNING.to_string());
    }
    Packer {
        vault,
        options,
        candidates: &candidates,
    }
    .fill(&mut pack);
    pack.pages_dropped = pack.candidates - pack.pages.len();
    pack
}

struct Packer<'a> {
    vault: &'a Vault,
    options: &'a PackOptions,
    candidates: &'a [Candidate],
}

/// A page chosen for the pack, with the body it will carry.
struct Chosen<'a> {
    candidate: &'a Candidate,
    body: Option<CompressedBody>,
    mode: BodyMode,
}

impl<'a> Packer<'a> {
    fn tokenizer(&self) -> Tokenizer {
        self.options.tokenizer
    }

    fn measure(&self, text: &str) -> usize {
        self.tokenizer().measure(text)
    }

    fn title(&self, pack: &Pack, included: usize) -> String {
        match &pack.topic {
            Some(topic) => format!("Context Pack: {topic}"),
            None => format!("Context Pack: Recent Activity (last {included} pages)"),
        }
    }

    fn header(&self, pack: &Pack, actual: usize, included: usize) -> String {
        Header {
            title: &self.title(pack, included),
            generated: &pack.generated,
            budget: self.options.budget,
            actual,
            included,
            candidates: self.candidates.len(),
            methodology: self.tokenizer().methodology(),
        }
        .render()
    }

    fn fill(&self, pack: &mut Pack) {
        let capacity = self.tokenizer().capacity(self.options.budget);
        if self.candidates.is_empty() {
            let message = if pack.topic.is_some() {
                render::EMPTY_TOPIC_TEXT
            } else {
                render::EMPTY_RECENT_TEXT
            };
            let title = self.title(pack, 0);
            pack.bundle = [render::empty(&title, message), format!("# {title}\n")]
                .into_iter()
                .find(|text| self.measure(text) <= capacity)
                .unwrap_or_default();
            pack.actual = self.tokenizer().count(&pack.bundle);
            return;
        }

        // Pass 1: a summary block for every candidate, dropping whole pages
        // (peripheral first, lowest ranked first) until the blocks fit.
        let worst_page_tokens = self.options.budget;
        let reserved_header =
            self.measure(&self.header(pack, self.options.budget, self.candidates.len()));
        let summary_cost: Vec<usize> = self
            .candidates
            .iter()
            .map(|c| {
                let note = &self.vault.metas[c.note];
                self.measure(&render::page_head(
                    note.name(),
                    note.tier,
                    worst_page_tokens,
                )) + self.measure(&render::page_rest(note, None))
            })
            .collect();
        let mut selected: Vec<bool> = vec![true; self.candidates.len()];
        let mut used = reserved_header + summary_cost.iter().sum::<usize>();
        while used > capacity {
            let Some(victim) = self.drop_victim(&selected) else {
                break;
            };
            selected[victim] = false;
            used -= summary_cost[victim];
        }

        // Pass 2: in rank order, the full body if it fits, else the excerpt.
        let mut state = PackState::default();
        let mut chosen: Vec<Chosen> = Vec::new();
        for (i, candidate) in self.candidates.iter().enumerate() {
            if !selected[i] {
                let note = &self.vault.metas[candidate.note];
                pack.dropped.push(DroppedPage {
                    path: note.path.clone(),
                    title: note.title.clone(),
                    tier: note.tier,
                    score: candidate.score,
                    reason: "budget",
                });
                continue;
            }
            state.shown_links.insert(page_key(candidate.note));
            let note = &self.vault.metas[candidate.note];
            let summary_rest = self.measure(&render::page_rest(note, None));
            let mut pick = Chosen {
                candidate,
                body: None,
                mode: BodyMode::SummaryOnly,
            };
            let mut tried: Option<String> = None;
            for mode in [BodyMode::Full, BodyMode::Excerpt] {
                let Some(body) = compress(self.vault, candidate.note, mode, &state) else {
                    if mode == BodyMode::Full {
                        // Nothing of the body is left once compressed: the
                        // summary block already carries all of it.
                        pick.mode = BodyMode::Full;
                        break;
                    }
                    continue;
                };
                if tried.as_deref() == Some(body.text.as_str()) {
                    continue;
                }
                let with_body = self.measure(&render::page_rest(note, Some(&body.text)));
                let extra = with_body.saturating_sub(summary_rest);
                if used + extra <= capacity {
                    used += extra;
                    state.commit(&body, note.name());
                    pick.body = Some(body);
                    pick.mode = mode;
                    break;
                }
                tried = Some(body.text);
            }
            chosen.push(pick);
        }

        // Render, then check the printed size; the sums make the check pass,
        // and if it ever does not, bodies are given up from the end.
        loop {
            let (bundle, actual, page_tokens) = self.render(pack, &chosen);
            let counted = self.tokenizer().count(&bundle);
            if counted <= self.options.budget || !self.give_up_a_body(&mut chosen) {
                pack.bundle = bundle;
                pack.actual = counted;
                debug_assert_eq!(counted, actual, "measures must add up");
                pack.pages = chosen
                    .iter()
                    .zip(page_tokens)
                    .map(|(c, tokens)| self.packed_page(c, tokens))
                    .collect();
                if counted > self.options.budget {
                    pack.bundle.clear();
                    pack.actual = 0;
                    pack.pages.clear();
                }
                return;
            }
        }
    }

    /// The next page to drop when summary blocks do not fit: the lowest
    /// ranked peripheral page, else supporting, else core.
    fn drop_victim(&self, selected: &[bool]) -> Option<usize> {
        [Tier::Peripheral, Tier::Supporting, Tier::Core]
            .into_iter()
            .find_map(|tier| {
                (0..self.candidates.len()).rev().find(|&i| {
                    selected[i] && self.vault.metas[self.candidates[i].note].tier == tier
                })
            })
    }

    fn give_up_a_body(&self, chosen: &mut [Chosen]) -> bool {
        match chosen.iter_mut().rev().find(|c| c.body.is_some()) {
            Some(page) => {
                page.body = None;
                page.mode = BodyMode::SummaryOnly;
                true
            }
            None => false,
        }
    }

    /// The bundle, its token count by the sum of measures, and each page
    /// block's token count. Each number printed in the pack is the fixed
    /// point of "count the text that contains this number".
    fn render(&self, pack: &Pack, chosen: &[Chosen]) -> (String, usize, Vec<usize>) {
        let tokenizer = self.tokenizer();
        let mut blocks: Vec<String> = Vec::with_capacity(chosen.len());
        let mut page_tokens = Vec::with_capacity(chosen.len());
        let mut pages_measure = 0;
        for (i, page) in chosen.iter().enumerate() {
            let note = &self.vault.metas[page.candidate.note];
            let mut rest = render::page_rest(note, page.body.as_ref().map(|b| b.text.as_str()));
            if i + 1 == chosen.len() {
                rest.pop();
            }
            let rest_measure = self.measure(&rest);
            let tokens = fixed_point(|t| {
                tokenizer.tokens(
                    self.measure(&render::page_head(note.name(), note.tier, t)) + rest_measure,
                )
            });
            let head = render::page_head(note.name(), note.tier, tokens);
            pages_measure += self.measure(&head) + rest_measure;
            page_tokens.push(tokens);
            blocks.push(head + &rest);
        }
        let included = chosen.len();
        let actual = fixed_point(|a| {
            tokenizer.tokens(self.measure(&self.header(pack, a, included)) + pages_measure)
        });
        let header_text = self.header(pack, actual, included);
        let capacity = tokenizer.capacity(self.options.budget);
        if self.measure(&header_text) + pages_measure > capacity && chosen.is_empty() {
            return (String::new(), 0, page_tokens);
        }
        let mut bundle = header_text;
        for block in blocks {
            bundle.push_str(&block);
        }
        (bundle, actual, page_tokens)
    }

    fn packed_page(&self, chosen: &Chosen, tokens: usize) -> PackedPage {
        let note = &self.vault.metas[chosen.candidate.note];
        PackedPage {
            path: note.path.clone(),
            title: note.title.clone(),
            tier: note.tier,
            tags: note.tags.clone(),
            summary: note.summary.clone(),
            summary_source: note.summary_source,
            score: chosen.candidate.score,
            score_breakdown: chosen.candidate.breakdown.clone(),
            explanation: chosen.candidate.explanation.clone(),
            body_mode: chosen.mode,
            tokens,
            content_also_in: chosen
                .body
                .as_ref()
                .map(|b| {
                    let mut pages = b.duplicates_of.clone();
                    pages.dedup();
                    pages
                })
                .unwrap_or_default(),
        }
    }
}

/// The value `x` with `f(x) == x`, found by iteration from `f(0)`; if the
/// iteration cycles, the largest value seen (the count only grows with the
/// number's digits, so this settles within a few steps).
fn fixed_point(mut f: impl FnMut(usize) -> usize) -> usize {
    let mut x = f(0);
    let mut largest = x;
    for _ in 0..16 {
        let next = f(x);
        if next == x {
            return x;
        }
        largest = largest.max(next);
        x = next;
    }
    largest
}
