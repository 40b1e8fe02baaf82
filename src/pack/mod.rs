//! Selecting, compressing and fitting pages to a token budget (seed Steps
//! 2–5), producing a [`Pack`]: the rendered bundle plus an account of it.
//!
//! The budget is exact: every piece of the pack is measured with the chosen
//! counter at boundaries where measures add up (see [`crate::tokens`]), so
//! the sum of the pieces is the size of the printed pack, which is checked
//! once more at the end.

pub(crate) mod bases;
pub(crate) mod compress;
pub(crate) mod dedup;
pub(crate) mod excerpt;
pub(crate) mod map;
pub(crate) mod render;
pub(crate) mod style;
pub(crate) mod template;

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
use excerpt::Pieces;
use render::Header;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use rustc_hash::FxHashMap;

pub const DEFAULT_BUDGET: usize = 8000;
pub const MAX_BUDGET: usize = 100_000;
/// Budgets above this print the seed's "large pack" warning.
pub(crate) const LARGE_BUDGET: usize = 50_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PackMode {
    Topic(String),
    Recent,
    /// An overview of the vault (`pack --map`): folders, hubs, tags and
    /// the latest activity, no pages.
    Map,
    /// The context around one note (`pack --note`).
    Note(NoteAnchor),
}

/// A note-anchored pack's note and how far around it to look.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteAnchor {
    /// The note's path in the vault (already checked to be a listed note).
    pub path: String,
    /// Link hops around the note: 0 the note and similar notes only.
    pub depth: usize,
    /// Whether the note itself is the first page.
    pub include_self: bool,
}

#[derive(Clone, Debug)]
pub struct PackOptions {
    pub budget: usize,
    pub tokenizer: Tokenizer,
    pub generated_at: DateTime<Utc>,
    pub candidate_limit: usize,
    /// Query-aware packing: the sentences of all candidates compete for
    /// the budget by relevance and page rank (see `Packer::spread`), and a
    /// summary taken from the body is shortened to its first sentence.
    /// `None`: the seed's rules (summary blocks for every page that fits,
    /// then whole bodies in rank order, else first paragraph plus Key Ideas).
    pub relevance: Option<Relevance>,
    /// The notes linking to a note (source index, sentence around the
    /// link), for the backlink entries of the top pages.
    pub backlinks: Option<Backlinks>,
    /// How many recent daily notes to add after the pages (0–30).
    pub dailies: usize,
    /// Linked neighbours of the top hits added as candidates (hybrid
    /// topic packs; depth 0, the default, adds none).
    pub graph: crate::retrieve::graph::GraphOptions,
    /// Notes that open the pack before the ranked pages, in order, within
    /// half the budget (topic packs; `pins:` and `--pin`), by path. A path
    /// the vault does not list is skipped: the session checks them first.
    pub pins: Vec<String>,
    /// Notes left out whatever the ranking (`--exclude-note`, or what an
    /// MCP session already received), by path; those the ranking found
    /// are named in one line.
    pub exclude: Vec<String>,
    /// The daily notes a request's filter lets through, when it has one
    /// (the session sets it): `--dailies` picks the newest among them.
    pub admitted_dailies: Option<Vec<usize>>,
    /// Every page's vault text between an opening and a closing marker
    /// whose id is a hash of the pack (`--fence`).
    pub fence: bool,
    /// The request has a filter: a pack with nothing to show says the
    /// filter let nothing through, not that the vault is empty.
    pub filtered: bool,
    /// A note-anchored pack's note, when it is packed: its page takes at
    /// most half the room while the pages around it can use the rest (a
    /// long note would otherwise fill the pack, its every sentence being
    /// about itself), and what they leave after.
    pub anchored: Option<usize>,
}

/// Looks up a note's backlinks.
#[derive(Clone)]
pub struct Backlinks(pub std::sync::Arc<BacklinkLookup>);

/// A note's backlinks as `(source, sentence)`, read from the vault given.
pub(crate) type BacklinkLookup = dyn Fn(&Vault, usize) -> Vec<(usize, String)> + Send + Sync;

impl std::fmt::Debug for Backlinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Backlinks(..)")
    }
}

/// How many notes ranked below the candidates `dropped` lists (all are
/// counted in `below_threshold`).
pub(crate) const MAX_LISTED_BELOW_THRESHOLD: usize = 100;

/// How many of the top pages get backlink entries, and how many each.
pub(crate) const BACKLINK_PAGES: usize = 3;
pub(crate) const BACKLINKS_PER_PAGE: usize = 5;

/// Scores text for the query a pack is built for.
#[derive(Clone)]
pub struct Relevance(pub std::sync::Arc<excerpt::Scorer>);

impl std::fmt::Debug for Relevance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Relevance(..)")
    }
}

/// The label of a pinned page in its heading (where a ranked page shows
/// its tier).
pub(crate) const PINNED_LABEL: &str = "pinned";

/// A summary taken from the body is cut to this many characters in a
/// query-aware pack's summary block.
pub(crate) const SHORT_SUMMARY_CHARS: usize = 200;

impl PackOptions {
    pub fn new(budget: usize, tokenizer: Tokenizer, generated_at: DateTime<Utc>) -> PackOptions {
        PackOptions {
            budget,
            tokenizer,
            generated_at,
            candidate_limit: CANDIDATE_LIMIT,
            relevance: None,
            backlinks: None,
            dailies: 0,
            graph: Default::default(),
            pins: Vec::new(),
            exclude: Vec::new(),
            admitted_dailies: None,
            fence: false,
            filtered: false,
            anchored: None,
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
    /// What the semantic arm did (hybrid packs): `on (...)` or why it is off.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub semantic: String,
    /// With subqueries: which query found what.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub research: Option<ResearchTrace>,
    /// Note-anchored packs and `--graph-depth`: the links walked, the
    /// neighbours they brought in and the hubs not walked through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<GraphTrace>,
    pub budget: usize,
    /// The token count of `bundle` under `counter`.
    pub actual: usize,
    pub counter: Tokenizer,
    /// The `# Methodology:` text: the counter's, and under `chars4` that
    /// CJK characters count whole when the pack may hold some.
    #[serde(skip)]
    pub methodology: &'static str,
    pub generated: String,
    /// Candidates considered (at most 20).
    pub candidates: usize,
    pub pages: Vec<PackedPage>,
    pub pages_dropped: usize,
    pub dropped: Vec<DroppedPage>,
    /// Recent daily notes printed after the pages (`--dailies`).
    pub dailies: Vec<PackedPage>,
    /// Daily notes asked for that did not fit.
    pub dailies_dropped: usize,
    /// Notes the ranking found beyond the candidate limit (the first 100
    /// are listed in `dropped` with reason `below_threshold`).
    pub below_threshold: usize,
    /// Tokens per part of the pack (under `counter`; each part rounded on
    /// its own for chars4).
    pub parts: PartTokens,
    pub warnings: Vec<String>,
    pub diagnostics: Vec<Diagnostic>,
    /// Pins that did not fit whole in half the budget, in pin order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pins_cut: Vec<PinCut>,
    /// Notes the ranking found but left out as already in the reader's
    /// context, best first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub already_in_context: Vec<String>,
    /// The fence id of a fenced pack.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fence: Option<String>,
    /// The lines printed before the pages (every style prints them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub preface: Vec<String>,
    /// A vault map's entries, as printed (`pack --map`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub map: Option<map::VaultMap>,
    /// The exact markdown printed.
    pub bundle: String,
    /// Whether the vault is an obsidian-wiki one (its notes carry `title:`
    /// fields), whose packs keep the seed's messages. Known only where a
    /// message depends on it (an empty pack, a budget over
    /// [`LARGE_BUDGET`]); `false` elsewhere.
    #[serde(skip)]
    pub wiki: bool,
    /// The request had a filter (see [`PackOptions::filtered`]).
    #[serde(skip)]
    pub filtered: bool,
}

/// Whether `vault` is laid out as obsidian-wiki writes it: a note with a
/// `title:` field (the seed's page shape). Scans until the first one.
pub(crate) fn is_wiki_vault(vault: &Vault) -> bool {
    (0..vault.metas.len())
        .any(|note| vault.metas[note].title_source == crate::note::TitleSource::Frontmatter)
}

/// The large-pack warning a finished pack gets, if any: the seed's for a
/// budget over [`LARGE_BUDGET`] in an obsidian-wiki vault, else one for a
/// pack over that size.
pub(crate) fn large_warning(pack: &Pack) -> Option<String> {
    if pack.wiki {
        (pack.budget > LARGE_BUDGET).then(|| render::LARGE_PACK_WARNING.to_string())
    } else {
        (pack.actual > LARGE_BUDGET).then(|| render::large_pack_warning(pack.actual))
    }
}

/// A pin that did not fit whole in half the budget.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PinCut {
    pub path: String,
    /// `excerpt`, `summary` (its summary block only) or `left_out`.
    pub kept: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct PackedPage {
    pub path: String,
    pub title: String,
    pub tier: Tier,
    pub tags: Vec<String>,
    /// The note's aliases, shown beside its tags (none for a page with a
    /// `title:` field, whose block keeps the seed's lines).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
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
    /// Backlink entries printed under the body.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub backlinks: Vec<String>,
    /// The `![[note]]` embeds of the body: which were expanded in place,
    /// and why the others stay links.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub embeds: Vec<compress::EmbedReport>,
    /// Secrets the privacy policy replaced in this note (line and kind,
    /// never the secret).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redactions: Vec<crate::privacy::Redaction>,
    /// What the page block shows, kept for the other output styles (the
    /// JSON report already carries the whole markdown bundle).
    #[serde(skip)]
    pub shown: ShownPage,
}

/// The text of a page block as printed: the styles render the same
/// selection in other layouts.
#[derive(Clone, Debug, Default)]
pub struct ShownPage {
    /// The tier, or `daily` for a recent daily note.
    pub label: String,
    /// The summary line shown (may be shortened from the note's).
    pub summary: String,
    /// The body, with its dedup markers and excerpt gaps, if any.
    pub body: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PartTokens {
    pub header: usize,
    /// Page blocks (summary blocks and bodies), without backlinks.
    pub notes: usize,
    pub backlinks: usize,
    pub dailies: usize,
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
        PackMode::Map => Vec::new(),
        PackMode::Topic(topic) => relevance_pass(vault, &Query::parse(topic)),
        PackMode::Recent => recent_order(vault),
        PackMode::Note(anchor) => vault
            .metas
            .search_path(&anchor.path)
            .ok()
            .filter(|_| anchor.include_self)
            .map(|note| Candidate {
                note,
                score: 1.0,
                breakdown: Vec::new(),
                explanation: None,
            })
            .into_iter()
            .collect(),
    };
    build_pack_from(vault, mode, ranked, "frontmatter", Vec::new(), options)
}

/// Builds the pack for `mode` from candidates ranked elsewhere (best
/// first; only the first `candidate_limit` are considered).
pub(crate) fn build_pack_from(
    vault: &Vault,
    mode: &PackMode,
    ranked: Vec<Candidate>,
    ranker: &'static str,
    signal_errors: Vec<SignalError>,
    options: &PackOptions,
) -> Pack {
    if *mode == PackMode::Map {
        // No ranking makes a map; without an index there are no hubs.
        return map::markdown_map(vault, Err("links need the index".into()), options);
    }
    let (topic, query_terms) = match mode {
        PackMode::Map => (None, Vec::new()),
        PackMode::Topic(topic) => {
            let query = Query::parse(topic);
            (Some(query.text), query.terms)
        }
        PackMode::Recent => (None, Vec::new()),
        PackMode::Note(anchor) => (Some(note_pack_topic(vault, &anchor.path)), Vec::new()),
    };
    // Pins open the pack; excluded notes never enter it. Both leave the
    // ranked list, and the excluded ones it would have offered as
    // candidates are named.
    let indexes = |paths: &[String]| -> Vec<usize> {
        let mut found: Vec<usize> = Vec::new();
        for path in paths {
            if let Ok(note) = vault.metas.search_path(path)
                && vault.is_listed(path)
                && !found.contains(&note)
            {
                found.push(note);
            }
        }
        found
    };
    let exclude: std::collections::HashSet<usize> = indexes(&options.exclude).into_iter().collect();
    let pin_notes = indexes(&options.pins);
    let excluded = |note: usize| exclude.contains(&note);
    let pins: Vec<Candidate> = pin_notes
        .iter()
        .filter(|&&note| !excluded(note))
        .map(|&note| Candidate {
            note,
            score: 0.0,
            breakdown: Vec::new(),
            explanation: None,
        })
        .collect();
    let mut already_seen: Vec<String> = pin_notes
        .iter()
        .filter(|&&note| excluded(note))
        .map(|&note| vault.metas[note].name().to_string())
        .collect();
    let ranked: Vec<Candidate> = if exclude.is_empty() && pin_notes.is_empty() {
        ranked
    } else {
        let mut kept = Vec::with_capacity(ranked.len());
        for candidate in ranked {
            if excluded(candidate.note) {
                if kept.len() < options.candidate_limit {
                    already_seen.push(vault.metas[candidate.note].name().to_string());
                }
            } else if !pin_notes.contains(&candidate.note) {
                kept.push(candidate);
            }
        }
        kept
    };
    let matched = ranked.len();
    let mut ranked = ranked.into_iter();
    let mut candidates: Vec<Candidate> = ranked.by_ref().take(options.candidate_limit).collect();
    // Notes the ranking found beyond the candidates, listed up to a limit.
    let below: Vec<DroppedPage> = match mode {
        PackMode::Topic(_) | PackMode::Note(_) => ranked
            .take(MAX_LISTED_BELOW_THRESHOLD)
            .map(|c| {
                let meta = &vault.metas[c.note];
                DroppedPage {
                    path: meta.path.clone(),
                    title: meta.title.clone(),
                    tier: meta.tier,
                    score: c.score,
                    reason: "below_threshold",
                }
            })
            .collect(),
        PackMode::Recent | PackMode::Map => Vec::new(),
    };
    let blank = Pack {
        mode: match mode {
            PackMode::Topic(_) => "topic",
            PackMode::Recent => "recent",
            PackMode::Note(_) => "note",
            PackMode::Map => "map",
        },
        topic,
        query_terms,
        ranker: if matches!(mode, PackMode::Recent) {
            "recent"
        } else {
            ranker
        },
        signal_errors,
        semantic: String::new(),
        research: None,
        graph: None,
        budget: options.budget,
        actual: 0,
        counter: options.tokenizer,
        methodology: options.tokenizer.methodology(),
        generated: options
            .generated_at
            .to_rfc3339_opts(SecondsFormat::Secs, true),
        candidates: candidates.len(),
        pages: Vec::new(),
        pages_dropped: 0,
        dropped: Vec::new(),
        dailies: Vec::new(),
        dailies_dropped: 0,
        below_threshold: 0,
        parts: PartTokens::default(),
        warnings: Vec::new(),
        diagnostics: vault.diagnostics.clone(),
        pins_cut: Vec::new(),
        already_in_context: already_seen,
        fence: None,
        preface: Vec::new(),
        map: None,
        bundle: String::new(),
        wiki: (candidates.is_empty() || options.budget > LARGE_BUDGET) && is_wiki_vault(vault),
        filtered: options.filtered,
    };
    let recent: Vec<Candidate> = recent_dailies(
        vault,
        options.dailies,
        &exclude,
        options.admitted_dailies.as_deref(),
    )
    .into_iter()
    .filter(|d| !pins.iter().any(|p| p.note == d.note))
    .collect();
    let fill = |pack: &mut Pack, candidates: &[Candidate]| {
        let dailies: Vec<Candidate> = recent
            .iter()
            .filter(|d| !candidates.iter().any(|c| c.note == d.note))
            .cloned()
            .collect();
        pack.candidates = pins.len() + candidates.len();
        Packer {
            vault,
            options,
            candidates,
            dailies: &dailies,
            pins: &pins,
        }
        .fill(pack);
    };
    // Fills a copy of `blank`; a recent daily the ranking found but the
    // pages left out is shown with the dailies instead: it is packed again
    // without it as a page. Each round removes a candidate, so this ends.
    let fill_all = |blank: &Pack, candidates: &mut Vec<Candidate>| -> Pack {
        let mut pack = blank.clone();
        fill(&mut pack, candidates);
        while !recent.is_empty() {
            let displaced: Vec<usize> = recent
                .iter()
                .map(|d| d.note)
                .filter(|&note| {
                    candidates.iter().any(|c| c.note == note)
                        && !pack.pages.iter().any(|p| p.path == vault.metas[note].path)
                })
                .collect();
            if displaced.is_empty() {
                break;
            }
            candidates.retain(|c| !displaced.contains(&c.note));
            pack = blank.clone();
            fill(&mut pack, candidates);
        }
        pack
    };
    let ranked_count = candidates.len();
    let mut pack = fill_all(&blank, &mut candidates);
    // A pack that prints CJK text says that its counter counted those
    // characters whole (chars4). The line is part of what the budget
    // holds, so the pack is filled again with it; a pack without CJK
    // keeps the seed's line and bytes.
    let cjk_line = options.tokenizer.methodology_for(true);
    if pack.methodology != cjk_line && crate::tokens::has_cjk(&pack.bundle) {
        let blank = Pack {
            methodology: cjk_line,
            ..blank
        };
        pack = fill_all(&blank, &mut candidates);
    }
    pack.pages_dropped = pack.candidates - pack.pages.len();
    pack.below_threshold = if !matches!(mode, PackMode::Recent) {
        matched - ranked_count
    } else {
        0
    };
    pack.dropped.extend(below);
    pack.warnings.extend(large_warning(&pack));
    pack
}

struct Packer<'a> {
    vault: &'a Vault,
    options: &'a PackOptions,
    candidates: &'a [Candidate],
    /// Recent daily notes to add after the pages, newest first.
    dailies: &'a [Candidate],
    /// Pinned notes, printed first, in order.
    pins: &'a [Candidate],
}

/// A page chosen for the pack, with the body it will carry.
struct Chosen<'a> {
    /// Position in the candidate list.
    rank: usize,
    candidate: &'a Candidate,
    body: Option<CompressedBody>,
    mode: BodyMode,
    /// The summary line shown.
    summary: String,
    /// Backlink entries shown under the body.
    backlinks: Vec<String>,
    /// The tier, or `daily`.
    label: String,
    /// A recent daily note, printed after the pages.
    daily: bool,
}

impl<'a> Packer<'a> {
    fn tokenizer(&self) -> Tokenizer {
        self.options.tokenizer
    }

    /// An empty pack state that knows which notes the pack may show.
    fn new_state(&self) -> PackState {
        PackState {
            // One embed may take at most a quarter of the pack.
            embed_limit: (self.tokenizer().capacity(self.options.budget) / 4).max(1),
            // Only a pack in recent order has no relevance.
            dated: self.options.relevance.is_none(),
            members: Some(
                self.candidates
                    .iter()
                    .chain(self.dailies)
                    .chain(self.pins)
                    .map(|c| c.note)
                    .collect(),
            ),
            ..PackState::default()
        }
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
            candidates: self.pins.len() + self.candidates.len(),
            methodology: pack.methodology,
            preface: &pack.preface,
        }
        .render()
    }

    /// What the two fence lines of a page cost (nothing unfenced): the
    /// same for every id (see [`render::FENCE_ID_DIGITS`]).
    fn fence_cost(&self) -> usize {
        if !self.options.fence {
            return 0;
        }
        self.measure(&render::fence_open(render::FENCE_PLACEHOLDER))
            + self.measure(&render::fence_close(render::FENCE_PLACEHOLDER))
    }

    /// The preface lines with the fence id `id` (a placeholder while the
    /// pages are chosen: it measures the same).
    fn preface(&self, pack: &Pack, id: &str, pages: bool) -> Vec<String> {
        let mut lines = Vec::new();
        if self.options.fence && pages {
            lines.push(render::fence_notice(id));
        }
        if !pack.pins_cut.is_empty() {
            let cut: Vec<String> = pack
                .pins_cut
                .iter()
                .map(|cut| {
                    let name = cut.path.strip_suffix(".md").unwrap_or(&cut.path);
                    format!("[[{name}]] ({})", cut.kept.replace('_', " "))
                })
                .collect();
            lines.push(format!("Pins cut to half the budget: {}", cut.join(", ")));
        }
        if !pack.already_in_context.is_empty() {
            lines.push(format!(
                "Already in your context: {}",
                render::name_list(&pack.already_in_context)
            ));
        }
        lines
    }

    /// The pinned pages, in order, while they fit in `half` tokens: whole,
    /// else the seed's excerpt, else the summary block, else left out
    /// (each cut one named in `pack.pins_cut`). Returns the pages and
    /// what they take.
    fn pin_pages(&self, pack: &mut Pack, half: usize) -> (Vec<Chosen<'a>>, usize) {
        let mut used = 0;
        let mut chosen = Vec::new();
        let state = self.new_state();
        for pin in self.pins {
            let note = &self.vault.metas[pin.note];
            let summary = self.summary(note);
            let head = self.measure(&render::page_head(
                note.name(),
                PINNED_LABEL,
                self.options.budget,
            )) + self.fence_cost();
            let cost = |body: Option<&CompressedBody>| {
                head + self.measure(&render::page_rest(
                    note,
                    &summary,
                    body.map(|b| b.text.as_str()),
                    &[],
                ))
            };
            let full = compress(self.vault, pin.note, BodyMode::Full, &state, &summary);
            let excerpt = || {
                compress(self.vault, pin.note, BodyMode::Excerpt, &state, &summary)
                    .filter(|e| full.as_ref().is_none_or(|f| f.text != e.text))
            };
            let fits = |c: usize| used + c <= half;
            let (body, mode, kept) = if fits(cost(full.as_ref())) {
                (full.clone(), BodyMode::Full, None)
            } else if let Some(excerpt) = excerpt().filter(|e| fits(cost(Some(e)))) {
                (Some(excerpt), BodyMode::Excerpt, Some("excerpt"))
            } else if fits(cost(None)) {
                (None, BodyMode::SummaryOnly, Some("summary"))
            } else {
                pack.pins_cut.push(PinCut {
                    path: note.path.clone(),
                    kept: "left_out",
                });
                pack.dropped.push(DroppedPage {
                    path: note.path.clone(),
                    title: note.title.clone(),
                    tier: note.tier,
                    score: pin.score,
                    reason: "pin_budget",
                });
                continue;
            };
            used += cost(body.as_ref());
            if let Some(kept) = kept {
                pack.pins_cut.push(PinCut {
                    path: note.path.clone(),
                    kept,
                });
            }
            chosen.push(Chosen {
                rank: 0,
                candidate: pin,
                body,
                mode,
                summary: summary.clone(),
                backlinks: Vec::new(),
                label: PINNED_LABEL.to_string(),
                daily: false,
            });
        }
        (chosen, used)
    }

    /// Packs the pages within the budget. An exact counter's measures add
    /// up at line breaks, but a printed pack can still count a token or two
    /// more than they sum to (the last page loses its final line break,
    /// and `[…]` without one is a token longer in o200k): such a pack is
    /// packed again with that much less room, before any body is given up.
    fn fill(&self, pack: &mut Pack) {
        let fresh = pack.clone();
        let mut slack = 0;
        for attempt in 1..=FIT_ATTEMPTS {
            match self.fill_within(pack, slack, attempt == FIT_ATTEMPTS) {
                Ok(()) => return,
                Err(over) => {
                    *pack = fresh.clone();
                    slack += over;
                }
            }
        }
    }

    /// [`Packer::fill`] with `slack` tokens less room; `Err(by how much)`
    /// when the printed pack is over budget and `last` is false (else
    /// bodies are given up from the end until it fits).
    fn fill_within(&self, pack: &mut Pack, slack: usize, last: bool) -> Result<(), usize> {
        let full_capacity = self
            .tokenizer()
            .capacity(self.options.budget)
            .saturating_sub(slack);
        // Daily notes asked for get up to a quarter of the budget, kept
        // aside while the pages are packed.
        let daily_blocks: Vec<usize> = self
            .dailies
            .iter()
            .map(|d| self.daily_block_measure(d.note))
            .collect();
        let daily_reserve = daily_blocks.iter().sum::<usize>().min(full_capacity / 4);
        let capacity = full_capacity - daily_reserve;
        if self.candidates.is_empty() && self.dailies.is_empty() && self.pins.is_empty() {
            let message = render::empty_text_of(pack);
            let title = self.title(pack, 0);
            pack.preface = self.preface(pack, "", false);
            pack.bundle = [
                render::empty_with(&title, &pack.preface, message),
                render::empty(&title, message),
                format!("# {title}\n"),
            ]
            .into_iter()
            .find(|text| self.measure(text) <= capacity)
            .unwrap_or_default();
            if !pack.bundle.contains(&render::preface_lines(&pack.preface)) {
                pack.preface.clear();
            }
            pack.actual = self.tokenizer().count(&pack.bundle);
            return Ok(());
        }

        // Pins first: they take at most half the budget, and the ranked
        // pages share what is left.
        let (pinned, pins_used) = self.pin_pages(pack, full_capacity / 2);
        pack.preface = self.preface(pack, render::FENCE_PLACEHOLDER, true);
        let reserved_header = self.measure(&self.header(
            pack,
            self.options.budget,
            self.pins.len() + self.candidates.len(),
        )) + pins_used;
        // A page head with the largest number it could print.
        let fence_cost = self.fence_cost();
        let head_cost: Vec<usize> = self
            .candidates
            .iter()
            .map(|c| {
                let note = &self.vault.metas[c.note];
                self.measure(&render::page_head(
                    note.name(),
                    note.tier.name(),
                    self.options.budget,
                )) + fence_cost
            })
            .collect();
        let summary_cost: Vec<usize> = self
            .candidates
            .iter()
            .zip(&head_cost)
            .map(|(c, head)| {
                let note = &self.vault.metas[c.note];
                head + self.measure(&render::page_rest(note, &self.summary(note), None, &[]))
            })
            .collect();
        let (mut chosen, mut used, mut state) = match &self.options.relevance {
            Some(relevance) => self.spread(
                pack,
                relevance,
                capacity,
                reserved_header,
                &head_cost,
                &summary_cost,
            ),
            None => self.seed_passes(pack, capacity, reserved_header, &summary_cost),
        };

        // Backlinks of the top pages, while they fit.
        if let Some(backlinks) = &self.options.backlinks {
            for page in chosen.iter_mut().take(BACKLINK_PAGES) {
                let note = &self.vault.metas[page.candidate.note];
                let body = page.body.as_ref().map(|b| b.text.as_str());
                let mut lines: Vec<String> = Vec::new();
                let mut sources: Vec<usize> = Vec::new();
                for (source, context) in (backlinks.0)(self.vault, page.candidate.note) {
                    if source == page.candidate.note || sources.contains(&source) {
                        continue;
                    }
                    if lines.len() == BACKLINKS_PER_PAGE {
                        break;
                    }
                    let meta = &self.vault.metas[source];
                    let line = render::backlink_line(meta.name(), &meta.title, &context);
                    let before =
                        self.measure(&render::page_rest(note, &page.summary, body, &lines));
                    lines.push(line);
                    let after = self.measure(&render::page_rest(note, &page.summary, body, &lines));
                    if used + (after - before) > capacity {
                        lines.pop();
                        continue;
                    }
                    used += after - before;
                    sources.push(source);
                }
                page.backlinks = lines;
            }
        }

        // The pins open the pack (they were reserved before the ranked
        // pages, and get no backlink entries).
        chosen.splice(0..0, pinned);

        // Recent daily notes, newest first, with their content where it fits.
        let capacity = full_capacity;
        for daily in self.dailies {
            let note = &self.vault.metas[daily.note];
            let summary = note.summary.clone();
            let head = self.measure(&render::page_head(
                note.name(),
                "daily",
                self.options.budget,
            )) + fence_cost;
            let summary_block = head + self.measure(&render::page_rest(note, &summary, None, &[]));
            if used + summary_block > capacity {
                pack.dailies_dropped += 1;
                continue;
            }
            used += summary_block;
            let mut page = Chosen {
                rank: usize::MAX,
                candidate: daily,
                body: None,
                mode: BodyMode::SummaryOnly,
                summary: summary.clone(),
                backlinks: Vec::new(),
                label: "daily".to_string(),
                daily: true,
            };
            let room = capacity - used;
            let extra = |text: &str| {
                self.measure(&render::page_rest(note, &summary, Some(text), &[]))
                    .saturating_sub(summary_block - head)
            };
            let full = compress(self.vault, daily.note, BodyMode::Full, &state, &summary);
            let body = full
                .filter(|full| extra(&full.text) <= room)
                .map(|full| (full, BodyMode::Full))
                .or_else(|| {
                    compress(self.vault, daily.note, BodyMode::Excerpt, &state, &summary)
                        .filter(|seed| extra(&seed.text) <= room)
                        .map(|seed| (seed, BodyMode::Excerpt))
                });
            if let Some((body, mode)) = body {
                used += extra(&body.text);
                state.commit(&body, note.name());
                page.body = Some(body);
                page.mode = mode;
            }
            chosen.push(page);
        }

        // Render, then check the printed size; the sums make the check pass,
        // and if it ever does not, bodies are given up from the end.
        loop {
            let (bundle, actual, page_tokens) = self.render(pack, &chosen);
            let counted = self.tokenizer().count(&bundle);
            if counted > self.options.budget && !last {
                return Err(counted - self.options.budget);
            }
            if counted <= self.options.budget || !self.give_up_a_body(&mut chosen) {
                pack.bundle = bundle;
                pack.actual = counted;
                debug_assert_eq!(counted, actual, "measures must add up");
                let (dailies, pages): (Vec<_>, Vec<_>) =
                    chosen.iter().zip(page_tokens).partition(|(c, _)| c.daily);
                let packed = |list: Vec<(&Chosen, usize)>| -> Vec<PackedPage> {
                    list.into_iter()
                        .map(|(c, tokens)| self.packed_page(c, tokens))
                        .collect()
                };
                pack.pages = packed(pages);
                pack.dailies = packed(dailies);
                if counted > self.options.budget {
                    pack.bundle.clear();
                    pack.actual = 0;
                    pack.pages.clear();
                    pack.dailies.clear();
                }
                return Ok(());
            }
        }
    }

    /// Query-aware selection. The pieces of every candidate's body
    /// (sentences, lines, whole code blocks and tables) compete for the
    /// budget by value: the piece's relevance to the query, discounted by
    /// its page's rank. A page enters the pack with its first chosen piece,
    /// and a large budget still ends with whole bodies. A piece another
    /// page already shows is left out.
    fn spread(
        &self,
        pack: &mut Pack,
        relevance: &Relevance,
        capacity: usize,
        reserved_header: usize,
        head_cost: &[usize],
        summary_cost: &[usize],
    ) -> (Vec<Chosen<'a>>, usize, PackState) {
        let count = self.candidates.len();
        let mut state = self.new_state();
        // Every candidate's body is compressed below, one after another.
        let notes: Vec<usize> = self.candidates.iter().map(|c| c.note).collect();
        self.vault.preload(&notes);
        let summaries: Vec<String> = self
            .candidates
            .iter()
            .map(|c| self.summary(&self.vault.metas[c.note]))
            .collect();
        // Bodies are compressed in rank order without block de-duplication:
        // that happens piece by piece below, against what is actually shown.
        let fulls: Vec<Option<CompressedBody>> = self
            .candidates
            .iter()
            .zip(&summaries)
            .map(|(candidate, summary)| {
                state.shown_links.insert(page_key(candidate.note));
                let full = compress(self.vault, candidate.note, BodyMode::Full, &state, summary);
                if let Some(full) = &full {
                    state.commit_links(full);
                }
                full
            })
            .collect();
        // Each page's pieces, with the keys they de-duplicate by.
        let (pieces, piece_keys): (Vec<Option<Pieces>>, Vec<Vec<String>>) = fulls
            .iter()
            .map(|full| {
                let page = full.as_ref().map(|f| Pieces::of(f, &*relevance.0));
                let keys = page.as_ref().map_or_else(Vec::new, |page| {
                    (0..page.len()).map(|i| dedup_key(page.text(i))).collect()
                });
                (page, keys)
            })
            .unzip();
        let summary_keys: Vec<String> = summaries.iter().map(|s| dedup_key(s)).collect();

        let best = pieces
            .iter()
            .flatten()
            .flat_map(|p| (0..p.len()).map(|i| p.score(i)))
            .fold(0.0_f64, f64::max);
        let mut order: Vec<(f64, usize, Option<usize>)> = Vec::new();
        for (rank, page) in pieces.iter().enumerate() {
            let tier = self.vault.metas[self.candidates[rank].note].tier;
            let weight = rank_weight(rank) * tier_weight(tier);
            // The summary block alone: the page is named, its summary shown.
            let summary_relevance = BASE_VALUE * best + (relevance.0)(&summaries[rank]).max(0.0);
            order.push((weight * summary_relevance, rank, None));
            let Some(page) = page else { continue };
            let distance = distance_to_a_match(page);
            // In a long page an arbitrary sentence is less likely to be the
            // one needed: the base shrinks past a short note's length.
            let chars: usize = (0..page.len()).map(|i| page.text(i).chars().count()).sum();
            let length_share = (SHORT_PAGE_CHARS as f64 / chars.max(1) as f64).min(1.0);
            let mut offered: Vec<(f64, usize, Option<usize>)> = Vec::new();
            for (piece, &distance) in distance.iter().enumerate() {
                if piece_keys[rank][piece] == summary_keys[rank] || page.is_filler(piece) {
                    continue;
                }
                let d = distance.min(1000) as f64;
                let base = BASE_VALUE * best * length_share * (1.0 - NEARNESS * d / (d + 1.0));
                let relevance = base + page.score(piece).max(0.0);
                offered.push((weight * relevance, rank, Some(piece)));
            }
            // Each piece taken re-renders its page, so a huge page offers
            // only its best pieces; the rest show as gaps (`[…]`).
            if offered.len() > MAX_PIECES_PER_PAGE {
                offered.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.2.cmp(&b.2)));
                offered.truncate(MAX_PIECES_PER_PAGE);
            }
            order.extend(offered);
        }
        order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        // The cap is the anchor's: none when it was left out (rank 0 is
        // then another note).
        let anchor_cap = (count > 1
            && self.options.anchored == self.candidates.first().map(|c| c.note)
            && self.options.anchored.is_some())
        .then(|| capacity.saturating_sub(reserved_header) / 2);
        if anchor_cap.is_some() {
            anchor_first(&mut order, pieces[0].as_ref());
        }

        let mut used = reserved_header;
        let mut cost: Vec<usize> = vec![0; count];
        let mut bodies: Vec<Option<CompressedBody>> = vec![None; count];
        let mut chosen_pieces: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); count];
        let mut duplicate_pieces: Vec<BTreeMap<usize, String>> = vec![BTreeMap::new(); count];
        let mut shown: HashMap<String, usize> = HashMap::new();
        let mut measures: FxHashMap<String, usize> = FxHashMap::default();
        let mut named: Vec<bool> = vec![false; count];
        // The anchor's cap holds in the first pass; the second offers its
        // pieces again, without it, in the room the other pages left.
        let passes = if anchor_cap.is_some() { 2 } else { 1 };
        for (pass, &(_, rank, piece)) in
            (0..passes).flat_map(|pass| order.iter().map(move |o| (pass, o)))
        {
            let cap = match anchor_cap {
                Some(cap) if pass == 0 && rank == 0 => cap,
                _ => usize::MAX,
            };
            let Some(piece) = piece else {
                if cost[rank] == 0 && used + summary_cost[rank] <= capacity {
                    used += summary_cost[rank];
                    cost[rank] = summary_cost[rank];
                    named[rank] = true;
                }
                continue;
            };
            let Some(page) = &pieces[rank] else { continue };
            let note = &self.vault.metas[self.candidates[rank].note];
            let key = &piece_keys[rank][piece];
            if key.chars().count() >= MIN_DEDUP_CHARS
                && let Some(&other) = shown.get(key)
                && other != rank
            {
                let other = self.vault.metas[self.candidates[other].note].name();
                duplicate_pieces[rank].insert(piece, other.to_string());
                if cost[rank] > 0 {
                    // The page is in: show the marker where it fits.
                    let body = page.render(
                        &chosen_pieces[rank],
                        &duplicate_blocks(page, &duplicate_pieces[rank]),
                    );
                    let new_cost = head_cost[rank]
                        + self.rest_cost(&mut measures, note, &summaries[rank], &body);
                    if used - cost[rank] + new_cost <= capacity {
                        used = used - cost[rank] + new_cost;
                        cost[rank] = new_cost;
                        bodies[rank] = Some(body);
                    }
                }
                continue;
            }
            let room = capacity.saturating_sub(used);
            let opening = if cost[rank] == 0 {
                summary_cost[rank]
            } else {
                0
            };
            // A piece comes with its unit (a lead-in and what it
            // introduces): all of it or none.
            let unit: Vec<usize> = page
                .unit(piece)
                .filter(|p| !chosen_pieces[rank].contains(p))
                .collect();
            if unit.is_empty() {
                continue;
            }
            let unit_measure: usize = unit.iter().map(|&p| self.measure(page.text(p))).sum();
            if unit_measure.saturating_sub(PIECE_SLACK) + opening > room {
                continue;
            }
            chosen_pieces[rank].extend(unit.iter().copied());
            let body = page.render(
                &chosen_pieces[rank],
                &duplicate_blocks(page, &duplicate_pieces[rank]),
            );
            let new_cost =
                head_cost[rank] + self.rest_cost(&mut measures, note, &summaries[rank], &body);
            if used - cost[rank] + new_cost <= capacity && new_cost <= cap {
                used = used - cost[rank] + new_cost;
                cost[rank] = new_cost;
                bodies[rank] = Some(body);
                for &p in &unit {
                    shown.entry(piece_keys[rank][p].clone()).or_insert(rank);
                }
            } else {
                for p in &unit {
                    chosen_pieces[rank].remove(p);
                }
            }
        }

        let mut chosen: Vec<Chosen> = Vec::new();
        let mut state = self.new_state();
        for (rank, candidate) in self.candidates.iter().enumerate() {
            let note = &self.vault.metas[candidate.note];
            let mut pick = Chosen {
                rank,
                candidate,
                body: None,
                mode: BodyMode::SummaryOnly,
                summary: summaries[rank].clone(),
                backlinks: Vec::new(),
                label: note.tier.name().to_string(),
                daily: false,
            };
            let complete = pieces[rank].as_ref().is_none_or(|page| {
                (0..page.len()).all(|i| {
                    chosen_pieces[rank].contains(&i)
                        || duplicate_pieces[rank].contains_key(&i)
                        || piece_keys[rank][i] == summary_keys[rank]
                        || page.is_filler(i)
                })
            });
            // A summary block that already carries the whole body is whole.
            let summary_mode = if complete {
                BodyMode::Full
            } else {
                BodyMode::SummaryOnly
            };
            match bodies[rank].take() {
                Some(body) => {
                    let page = pieces[rank].as_ref().expect("a chosen piece has a page");
                    pick.mode = if complete {
                        BodyMode::Full
                    } else {
                        BodyMode::Excerpt
                    };
                    pick.body = Some(body);
                    if complete && !duplicate_pieces[rank].is_empty() {
                        let whole = page.render_whole(
                            &chosen_pieces[rank],
                            &duplicate_blocks(page, &duplicate_pieces[rank]),
                        );
                        let whole_cost = head_cost[rank]
                            + self.rest_cost(&mut measures, note, &summaries[rank], &whole);
                        if used - cost[rank] + whole_cost <= capacity {
                            used = used - cost[rank] + whole_cost;
                            pick.body = Some(whole);
                        }
                    } else if complete {
                        // The page as the seed prints a whole body: the whole
                        // first paragraph as the summary line and the body
                        // without it, else the body with its Sources line.
                        let whole = self.whole_form(candidate.note, &state, head_cost[rank]);
                        let full = fulls[rank].clone().map(|full| {
                            let cost = head_cost[rank]
                                + self.rest_cost(&mut measures, note, &summaries[rank], &full);
                            (summaries[rank].clone(), Some(full), cost)
                        });
                        if let Some((summary, body, whole_cost)) = [whole, full]
                            .into_iter()
                            .flatten()
                            .find(|(_, _, whole_cost)| used - cost[rank] + whole_cost <= capacity)
                        {
                            used = used - cost[rank] + whole_cost;
                            pick.summary = summary;
                            pick.body = body;
                        }
                    }
                }
                None if named[rank] => pick.mode = summary_mode,
                None if used + summary_cost[rank] <= capacity => {
                    used += summary_cost[rank];
                    pick.mode = summary_mode;
                }
                None => {
                    let has_content = pieces[rank].as_ref().is_some_and(|p| !p.is_empty());
                    let only_duplicates = has_content
                        && pieces[rank].as_ref().is_some_and(|p| {
                            (0..p.len()).all(|i| {
                                p.score(i) <= 0.0 || duplicate_pieces[rank].contains_key(&i)
                            })
                        })
                        && !duplicate_pieces[rank].is_empty();
                    pack.dropped.push(DroppedPage {
                        path: note.path.clone(),
                        title: note.title.clone(),
                        tier: note.tier,
                        score: candidate.score,
                        reason: if only_duplicates {
                            "duplicate"
                        } else {
                            "budget"
                        },
                    });
                    continue;
                }
            }
            state.shown_links.insert(page_key(candidate.note));
            if let Some(body) = &pick.body {
                state.commit(body, note.name());
            }
            chosen.push(pick);
        }
        (chosen, used, state)
    }

    /// What a page block costs after its head, with `body`.
    ///
    /// With an exact counter, the text is measured line by line: cut at
    /// every safe boundary (a line break before a line that starts with
    /// neither a space nor a slash, where measures add up exactly), each
    /// line's measure remembered in `measures`. Adding a sentence to a page
    /// then re-counts the lines it changed, not the page or the block: a
    /// page of one huge block (a long quote) re-counted whole for each of
    /// its thousands of pieces was quadratic, and remembering each version
    /// of the block took gigabytes.
    fn rest_cost(
        &self,
        measures: &mut FxHashMap<String, usize>,
        note: &crate::note::NoteMeta,
        summary: &str,
        body: &CompressedBody,
    ) -> usize {
        let joined_len = body.blocks.iter().map(|b| b.text.len() + 2).sum::<usize>();
        let additive = !body.blocks.is_empty()
            && joined_len == body.text.len() + 2
            && body
                .blocks
                .iter()
                .all(|b| crate::tokens::is_safe_boundary("\n", &b.text) && !b.text.is_empty());
        if self.tokenizer() == Tokenizer::Chars4 {
            // The chars4 measure adds up anywhere, and is cheaper to count
            // than to look up.
            if !additive {
                return self.measure(&render::page_rest(note, summary, Some(&body.text), &[]));
            }
            return self.measure(&render::page_rest(note, summary, None, &[]))
                + body
                    .blocks
                    .iter()
                    .map(|b| self.measure(&b.text) + 2)
                    .sum::<usize>();
        }
        if !additive {
            let text = render::page_rest(note, summary, Some(&body.text), &[]);
            return measure_lines(self.tokenizer(), measures, &text);
        }
        let mut total = self.measure(&render::page_rest(note, summary, None, &[]));
        let mut segment = String::new();
        for block in &body.blocks {
            segment.clear();
            segment.push_str(&block.text);
            segment.push_str("\n\n");
            total += measure_lines(self.tokenizer(), measures, &segment);
        }
        debug_assert_eq!(
            total,
            self.measure(&render::page_rest(note, summary, Some(&body.text), &[])),
            "block measures must add up"
        );
        total
    }

    /// A whole page as the seed prints it when its body fits: the full
    /// first paragraph as the summary line, the body without it. Returns
    /// the summary line, the body and the block's cost.
    fn whole_form(
        &self,
        note_index: usize,
        state: &PackState,
        head_cost: usize,
    ) -> Option<(String, Option<CompressedBody>, usize)> {
        let note = &self.vault.metas[note_index];
        if note.summary_source != SummarySource::FirstParagraph || note.summary.ends_with('…') {
            return None;
        }
        let body = compress(self.vault, note_index, BodyMode::Full, state, &note.summary);
        let cost = head_cost
            + self.measure(&render::page_rest(
                note,
                &note.summary,
                body.as_ref().map(|b| b.text.as_str()),
                &[],
            ));
        Some((note.summary.clone(), body, cost))
    }

    /// The seed's passes (no query to weigh text by): a summary block for
    /// every candidate that fits, then in rank order the whole body where
    /// it fits, else the seed's excerpt, then summary blocks again where
    /// room is left.
    fn seed_passes(
        &self,
        pack: &mut Pack,
        capacity: usize,
        reserved_header: usize,
        summary_cost: &[usize],
    ) -> (Vec<Chosen<'a>>, usize, PackState) {
        // Pass 1: a summary block for every candidate, dropping whole pages
        // (peripheral first, lowest ranked first) until the blocks fit.
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
        let mut state = self.new_state();
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
            // The summary line as reserved (possibly shortened), and as shown
            // when the whole body follows it (then never shortened).
            let summary = self.summary(note);
            // A summary cut from a longer first paragraph would repeat the
            // body's opening: keep the short line then.
            let whole_summary = match note.summary_source {
                SummarySource::FirstParagraph if note.summary.ends_with('…') => summary.clone(),
                // Read from the body's words, which then follow whole: the
                // line would say them twice (pages with a `title:` keep the
                // obsidian-wiki's summary line; section names stay, as a body of
                // empty sections shows none of them).
                SummarySource::Section | SummarySource::List | SummarySource::Properties
                    if note.title_source != crate::note::TitleSource::Frontmatter =>
                {
                    String::new()
                }
                _ => note.summary.clone(),
            };
            let summary_rest = self.measure(&render::page_rest(note, &summary, None, &[]));
            let extra_with = |line: &str, text: Option<&str>| {
                self.measure(&render::page_rest(note, line, text, &[]))
                    .saturating_sub(summary_rest)
            };
            let mut pick = Chosen {
                rank: i,
                candidate,
                body: None,
                mode: BodyMode::SummaryOnly,
                summary: summary.clone(),
                backlinks: Vec::new(),
                label: note.tier.name().to_string(),
                daily: false,
            };
            let full = compress(
                self.vault,
                candidate.note,
                BodyMode::Full,
                &state,
                &whole_summary,
            );
            let needed = extra_with(&whole_summary, full.as_ref().map(|b| b.text.as_str()));
            let room = capacity - used.min(capacity);
            if needed <= room {
                // The whole body, or nothing left once compressed: the
                // summary block already carries all of it.
                used += needed;
                pick.mode = BodyMode::Full;
                pick.summary = whole_summary;
                if let Some(full) = full {
                    state.commit(&full, note.name());
                    pick.body = Some(full);
                }
            } else if let Some(body) =
                compress(self.vault, candidate.note, BodyMode::Full, &state, &summary).and_then(
                    |full| {
                        self.excerpt(&full, candidate.note, &state, &mut |text| {
                            extra_with(&summary, Some(text)) <= room
                        })
                    },
                )
            {
                used += extra_with(&summary, Some(&body.text));
                state.commit(&body, note.name());
                pick.body = Some(body);
                pick.mode = BodyMode::Excerpt;
            }
            chosen.push(pick);
        }

        // Pass 3: pages dropped to leave room for bodies come back, as
        // summary blocks, wherever room is left.
        for (i, candidate) in self.candidates.iter().enumerate() {
            if selected[i] || used + summary_cost[i] > capacity {
                continue;
            }
            selected[i] = true;
            used += summary_cost[i];
            let note = &self.vault.metas[candidate.note];
            pack.dropped.retain(|d| d.path != note.path);
            let at = chosen.iter().take_while(|c| c.rank < i).count();
            chosen.insert(
                at,
                Chosen {
                    rank: i,
                    candidate,
                    body: None,
                    mode: BodyMode::SummaryOnly,
                    summary: self.summary(note),
                    backlinks: Vec::new(),
                    label: note.tier.name().to_string(),
                    daily: false,
                },
            );
        }

        (chosen, used, state)
    }

    /// The summary line of a page: in a query-aware pack, a summary taken
    /// from the body is cut short (the body or excerpt carries the rest).
    fn summary(&self, note: &crate::note::NoteMeta) -> String {
        if self.options.relevance.is_some() && note.summary_source == SummarySource::FirstParagraph
        {
            crate::text::first_sentence(&note.summary, SHORT_SUMMARY_CHARS)
        } else {
            note.summary.clone()
        }
    }

    /// The seed's excerpt of a body that does not fit: its first paragraph
    /// plus Key Ideas, if that fits.
    fn excerpt(
        &self,
        full: &CompressedBody,
        note: usize,
        state: &PackState,
        fits: &mut dyn FnMut(&str) -> bool,
    ) -> Option<CompressedBody> {
        let summary = self.summary(&self.vault.metas[note]);
        compress(self.vault, note, BodyMode::Excerpt, state, &summary)
            .filter(|seed| seed.text != full.text && fits(&seed.text))
    }

    /// The next page to drop when summary blocks do not fit: the lowest
    /// ranked peripheral page, else the lowest ranked page.
    fn drop_victim(&self, selected: &[bool]) -> Option<usize> {
        self.drop_victim_after(selected, None)
    }

    /// What a daily note's whole block would take.
    fn daily_block_measure(&self, note: usize) -> usize {
        let meta = &self.vault.metas[note];
        let body = compress(
            self.vault,
            note,
            BodyMode::Full,
            &self.new_state(),
            &meta.summary,
        );
        self.measure(&render::page_head(
            meta.name(),
            "daily",
            self.options.budget,
        )) + self.fence_cost()
            + self.measure(&render::page_rest(
                meta,
                &meta.summary,
                body.as_ref().map(|b| b.text.as_str()),
                &[],
            ))
    }

    /// Like `drop_victim`, among the pages ranked after `after`.
    fn drop_victim_after(&self, selected: &[bool], after: Option<usize>) -> Option<usize> {
        let first = after.map_or(0, |a| a + 1);
        let mut ranked = (first..self.candidates.len())
            .rev()
            .filter(|&i| selected[i]);
        let peripheral = ranked
            .clone()
            .find(|&i| self.vault.metas[self.candidates[i].note].tier == Tier::Peripheral);
        peripheral.or_else(|| ranked.next())
    }

    fn give_up_a_body(&self, chosen: &mut [Chosen]) -> bool {
        match chosen.iter_mut().rev().find(|c| c.body.is_some()) {
            Some(page) => {
                page.body = None;
                page.mode = BodyMode::SummaryOnly;
                page.summary = self.summary(&self.vault.metas[page.candidate.note]);
                page.backlinks.clear();
                true
            }
            None => false,
        }
    }

    /// The bundle, its token count by the sum of measures, and each page
    /// block's token count. Each number printed in the pack is the fixed
    /// point of "count the text that contains this number".
    fn render(&self, pack: &mut Pack, chosen: &[Chosen]) -> (String, usize, Vec<usize>) {
        let tokenizer = self.tokenizer();
        let mut parts = PartTokens::default();
        let (mut notes, mut backlinks, mut dailies) = (0, 0, 0);
        let mut blocks: Vec<String> = Vec::with_capacity(chosen.len());
        let mut page_tokens = Vec::with_capacity(chosen.len());
        let mut pages_measure = 0;
        let fence_cost = self.fence_cost();
        let mut rests: Vec<String> = Vec::with_capacity(chosen.len());
        for (i, page) in chosen.iter().enumerate() {
            let note = &self.vault.metas[page.candidate.note];
            let body = page.body.as_ref().map(|b| b.text.as_str());
            let mut rest = render::page_rest(
                note,
                render::shown_summary(note, &page.summary, body),
                body,
                &page.backlinks,
            );
            if i + 1 == chosen.len() {
                rest.pop();
            }
            let rest_measure = self.measure(&rest);
            let tokens = fixed_point(|t| {
                tokenizer.tokens(
                    self.measure(&render::page_head(note.name(), &page.label, t))
                        + fence_cost
                        + rest_measure,
                )
            });
            let head = render::page_head(note.name(), &page.label, tokens);
            let block = self.measure(&head) + fence_cost + rest_measure;
            pages_measure += block;
            if page.daily {
                dailies += block;
            } else {
                let lines: usize = page.backlinks.iter().map(|l| self.measure(l) + 1).sum();
                let lines = if lines > 0 {
                    lines + self.measure("backlinks:\n\n")
                } else {
                    0
                };
                backlinks += lines.min(block);
                notes += block - lines.min(block);
            }
            page_tokens.push(tokens);
            blocks.push(head);
            rests.push(rest);
        }
        // A fenced pack's id is a hash of everything it prints but the
        // markers, so the same pages get the same id and no page can hold
        // the marker that would close its fence early.
        if self.options.fence && !chosen.is_empty() {
            let mut content = self.title(pack, 0);
            for (head, rest) in blocks.iter().zip(&rests) {
                content.push_str(head);
                content.push_str(rest);
            }
            let id = render::fence_id(&content);
            pack.preface = self.preface(pack, &id, true);
            for (head, rest) in blocks.iter_mut().zip(&rests) {
                head.push_str(&render::fence_open(&id));
                head.push_str(rest);
                head.push_str(&render::fence_close(&id));
            }
            pack.fence = Some(id);
        } else {
            if self.options.fence {
                // No page, nothing fenced: no notice either.
                pack.preface = self.preface(pack, "", false);
            }
            for (head, rest) in blocks.iter_mut().zip(&rests) {
                head.push_str(rest);
            }
        }
        let included = chosen.iter().filter(|c| !c.daily).count();
        let actual = fixed_point(|a| {
            tokenizer.tokens(self.measure(&self.header(pack, a, included)) + pages_measure)
        });
        parts.header = tokenizer.tokens(self.measure(&self.header(pack, actual, included)));
        parts.notes = tokenizer.tokens(notes);
        parts.backlinks = tokenizer.tokens(backlinks);
        parts.dailies = tokenizer.tokens(dailies);
        pack.parts = parts;
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
            aliases: render::shown_aliases(note).to_vec(),
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
            backlinks: chosen.backlinks.clone(),
            embeds: chosen
                .body
                .as_ref()
                .map(|b| b.embeds.clone())
                .unwrap_or_default(),
            redactions: self.vault.note(chosen.candidate.note).redactions.clone(),
            shown: ShownPage {
                label: chosen.label.clone(),
                summary: chosen.summary.clone(),
                body: chosen.body.as_ref().map(|b| b.text.clone()),
            },
        }
    }
}

/// Moves the anchor page's entries (rank 0) to the front of `order`, as
/// an outline: its summary, then the first piece of every section, then
/// the second of every section, and so on (each round in the order of the
/// page). Every sentence of a note is about the note, so likeness to the
/// note's own words picks its rarest details, where a reader of the note
/// wants its shape, from its first section to its last.
fn anchor_first(order: &mut Vec<(f64, usize, Option<usize>)>, page: Option<&Pieces>) {
    let (mut anchor, rest): (Vec<_>, Vec<_>) = order.drain(..).partition(|entry| entry.1 == 0);
    // Each piece's place within its section.
    let places: Vec<usize> = page.map_or_else(Vec::new, |page| {
        let mut place = 0;
        (0..page.len())
            .map(|piece| {
                place = if page.opens_section(piece) {
                    0
                } else {
                    place + 1
                };
                place
            })
            .collect()
    });
    anchor.sort_by_key(|&(_, _, piece)| match piece {
        None => (0, 0),
        Some(piece) => (1 + places.get(piece).copied().unwrap_or(0), piece),
    });
    order.extend(anchor);
    order.extend(rest);
}

/// How much a page's rank discounts the value of its text in a
/// query-aware pack: the second page's sentences count half as much as the
/// first's, the tenth's a tenth.
fn rank_weight(rank: usize) -> f64 {
    1.0 / (1.0 + rank as f64)
}

/// How much a page's tier weighs its text: peripheral pages give way
/// first, as in the seed.
fn tier_weight(tier: Tier) -> f64 {
    match tier {
        Tier::Peripheral => 0.5,
        _ => 1.0,
    }
}

/// What every piece of a page is worth before its query terms count, as a
/// share of the best piece's relevance: the sentences around the matching
/// ones often carry the answer (measured on SciFact train, evidence in a
/// 1024-token pack: 0.76 with a base of 0.001, 0.83 with 0.5).
const BASE_VALUE: f64 = 0.5;
/// Up to this many characters (about 500 tokens: an abstract, a short
/// note) a page's pieces get the whole base value; a longer page's get
/// less in proportion (SciFact evidence unchanged, 0.677 / 0.822 / 0.899
/// at 512 / 1024 / 2048; long notes no longer fill a small pack alone).
const SHORT_PAGE_CHARS: usize = 2_000;
/// How much of the base value a piece loses by distance from the nearest
/// matching piece (at most): context is taken nearest first.
const NEARNESS: f64 = 0.02;
/// Pieces shorter than this (in characters) are never treated as
/// duplicates: "Yes." twice is not repetition.
const MIN_DEDUP_CHARS: usize = 24;
/// A piece never adds fewer tokens to its page than its own count minus
/// this; a cheap check before the exact one.
const PIECE_SLACK: usize = 4;
/// How many times a pack is packed with less room before bodies are given
/// up (see [`Packer::fill`]): each try takes away what the last was over.
const FIT_ATTEMPTS: usize = 3;
/// The most pieces (sentences, lines, blocks) one page offers the packer:
/// bounds the work of a pack over a huge note (about 50,000 tokens of
/// sentences, more than a page needs below the largest budgets).
const MAX_PIECES_PER_PAGE: usize = 3_000;

/// The measure of `text` as the sum of its lines' measures, cut where
/// measures add up ([`crate::tokens::is_safe_boundary`]), each looked up in
/// `measures` or counted once.
fn measure_lines(
    tokenizer: Tokenizer,
    measures: &mut FxHashMap<String, usize>,
    text: &str,
) -> usize {
    let mut cached = |line: &str| {
        if let Some(&measure) = measures.get(line) {
            return measure;
        }
        let measure = tokenizer.measure(line);
        measures.insert(line.to_string(), measure);
        measure
    };
    let mut total = 0;
    let mut start = 0;
    for (at, _) in text.match_indices('\n') {
        let cut = at + 1;
        if cut < text.len() && crate::tokens::is_safe_boundary("\n", &text[cut..]) {
            total += cached(&text[start..cut]);
            start = cut;
        }
    }
    total + cached(&text[start..])
}

/// For each piece, how many pieces away the nearest one with a query term
/// is (`usize::MAX / 2` when none has one): context is taken nearest first.
fn distance_to_a_match(page: &Pieces) -> Vec<usize> {
    let far = usize::MAX / 2;
    let mut distance = vec![far; page.len()];
    let mut last: Option<usize> = None;
    for (i, d) in distance.iter_mut().enumerate() {
        if page.score(i) > 0.0 {
            last = Some(i);
        }
        if let Some(at) = last {
            *d = i - at;
        }
    }
    let mut next: Option<usize> = None;
    for i in (0..page.len()).rev() {
        if page.score(i) > 0.0 {
            next = Some(i);
        }
        if let Some(at) = next {
            distance[i] = distance[i].min(at - i);
        }
    }
    distance
}

/// The text by which pieces count as the same.
fn dedup_key(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The blocks whose every piece another page shows, and which page.
fn duplicate_blocks(
    page: &Pieces,
    duplicates: &BTreeMap<usize, String>,
) -> BTreeMap<usize, String> {
    let mut blocks: BTreeMap<usize, String> = BTreeMap::new();
    if duplicates.is_empty() {
        return blocks;
    }
    let mut partial: BTreeSet<usize> = BTreeSet::new();
    for piece in 0..page.len() {
        let block = page.block(piece);
        match duplicates.get(&piece) {
            Some(other) => {
                blocks.entry(block).or_insert_with(|| other.clone());
            }
            // A wordless piece is never offered, so never a duplicate: it
            // goes with its block.
            None if page.is_filler(piece) => {}
            None => {
                partial.insert(block);
            }
        }
    }
    blocks.retain(|block, _| !partial.contains(block));
    blocks
}

/// The `count` most recent daily notes, newest first (among `admitted`,
/// sorted, when a filter gives them).
fn recent_dailies(
    vault: &Vault,
    count: usize,
    exclude: &std::collections::HashSet<usize>,
    admitted: Option<&[usize]>,
) -> Vec<Candidate> {
    if count == 0 {
        return Vec::new();
    }
    let mut dailies: Vec<usize> = (0..vault.metas.len())
        .filter(|&i| {
            vault.metas[i].daily.is_some()
                && !exclude.contains(&i)
                && admitted.is_none_or(|admitted| admitted.binary_search(&i).is_ok())
        })
        .collect();
    dailies.sort_by(|&a, &b| {
        let (ma, mb) = (&vault.metas[a], &vault.metas[b]);
        mb.daily.cmp(&ma.daily).then_with(|| ma.path.cmp(&mb.path))
    });
    dailies
        .into_iter()
        .take(count)
        .map(|note| Candidate {
            note,
            score: 0.0,
            breakdown: Vec::new(),
            explanation: None,
        })
        .collect()
}

/// The value `x` with `f(x) == x`, found by iteration from `f(0)`; if the
/// iteration cycles, the largest value seen (the count only grows with the
/// number's digits, so this settles within a few steps).
pub(crate) fn fixed_point(mut f: impl FnMut(usize) -> usize) -> usize {
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

/// The title a note-anchored pack is printed under: the note's title and
/// path.
pub(crate) fn note_pack_topic(vault: &Vault, path: &str) -> String {
    let title = vault
        .metas
        .search_path(path)
        .map(|note| vault.metas[note].title.as_str())
        .unwrap_or(path);
    format!("around {title} ({path})")
}

/// The links a pack walked: a note-anchored pack's, or the neighbours
/// `--graph-depth` added to a topic pack.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GraphTrace {
    /// A note-anchored pack's note.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchor: Option<String>,
    pub depth: usize,
    pub direction: crate::retrieve::graph::Direction,
    /// Notes linked from at least this many notes are hubs.
    pub hub_threshold: usize,
    /// Hubs met and not walked through.
    pub hubs: Vec<String>,
    /// The neighbours found, best first: in a topic pack the ones added to
    /// (or moved up in) the candidates, in a note-anchored pack every
    /// linked note ranked.
    pub neighbours: Vec<GraphNeighbour>,
    /// A note-anchored pack's similarity query (its title and most
    /// distinctive words).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similar_query: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GraphNeighbour {
    pub path: String,
    /// The note it was reached from.
    pub via: String,
    pub hops: usize,
    /// Distinct notes linking to it or linked from it.
    pub degree: usize,
    /// Its place in the candidate list (1-based).
    pub position: usize,
}

/// How a pack with subqueries was gathered.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResearchTrace {
    pub strategy: &'static str,
    pub queries: Vec<QueryTrace>,
    /// Queries that found nothing.
    pub no_hits: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueryTrace {
    pub query: String,
    /// The query's own best five notes.
    pub top: Vec<String>,
    /// The notes in the pack's candidate list that this query brought in.
    pub contributed: Vec<String>,
}

/// The seed's Step 6 line for a pack.
pub(crate) fn log_line(pack: &Pack, timestamp: &str) -> String {
    let topic = pack.topic.as_deref().unwrap_or("Recent Activity");
    // Escaped as Markdown reads it, too: the log is a note of the vault,
    // and a topic's `[[link]]`, `#tag` or unclosed `%%`/`<!--` would be
    // one there (an open comment hides every later line in Obsidian).
    // A lone bracket is no link (`[REDACTED:…]` stays as it reads); a
    // doubled one is a wikilink's, escaped.
    let chars: Vec<char> = topic.chars().collect();
    let mut escaped = String::with_capacity(topic.len() + 8);
    for (at, &c) in chars.iter().enumerate() {
        let doubled = |bracket: char| {
            chars.get(at + 1) == Some(&bracket) || at > 0 && chars[at - 1] == bracket
        };
        let markup = match c {
            '\\' | '"' | '#' | '%' | '<' | '$' | '`' => true,
            '[' | ']' => doubled(c),
            _ => false,
        };
        if markup {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    let topic = escaped;
    format!(
        "- [{timestamp}] CONTEXT_PACK topic=\"{topic}\" budget={} actual_tokens={} pages_included={} pages_dropped={}",
        pack.budget,
        pack.actual,
        pack.pages.len(),
        pack.pages_dropped
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn lines_measured_apart_add_up_to_the_text(
            text in "([> /-]{0,4}(word|Word|分布式|1234|\\.|, |'s|[[x]]| +)*\n{0,2}){0,12}",
        ) {
            for tokenizer in [Tokenizer::O200k, Tokenizer::Cl100k, Tokenizer::Chars4] {
                let mut measures = FxHashMap::default();
                proptest::prop_assert_eq!(
                    measure_lines(tokenizer, &mut measures, &text),
                    tokenizer.measure(&text)
                );
                // Remembered lines give the same sum.
                proptest::prop_assert_eq!(
                    measure_lines(tokenizer, &mut measures, &text),
                    tokenizer.measure(&text)
                );
            }
        }
    }

    #[test]
    fn a_long_quote_is_measured_line_by_line() {
        let text: String = (0..2_000)
            .map(|i| format!("{} quoted reply {i}\n", "> ".repeat(1 + i % 50)))
            .collect();
        let mut measures = FxHashMap::default();
        assert_eq!(
            measure_lines(Tokenizer::O200k, &mut measures, &text),
            Tokenizer::O200k.measure(&text)
        );
        // One entry a line, not one a version of the block.
        assert_eq!(measures.len(), 2_000);
    }
}
