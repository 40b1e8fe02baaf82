//! The seed's cheap relevance pass (Step 1) and tier-aware order (Step 2).

use crate::note_tables::NoteKeys;
use crate::retrieve::{Candidate, Query, Rule, RuleHit};
use crate::text::WordFinder;
use crate::vault::Vault;

/// Scores every note against the query's terms and returns those scoring
/// above zero, ordered by score, then tier, then path.
///
/// Each rule is checked once per term and the points add up, so a page
/// matching the whole phrase and its words outranks one matching one word.
pub(crate) fn relevance_pass(vault: &Vault, query: &Query) -> Vec<Candidate> {
    let keys = vault.match_keys();
    let mut scorer = Scorer::new(query);
    let mut candidates: Vec<Candidate> = notes_to_score(vault, query)
        .into_iter()
        .filter_map(|note| {
            let breakdown = scorer.breakdown(keys.note(note)?);
            let points: u32 = breakdown.iter().map(|hit| hit.points).sum();
            (points > 0).then(|| Candidate {
                note,
                score: f64::from(points),
                breakdown,
                explanation: None,
            })
        })
        .collect();
    sort_by_score(vault, &mut candidates);
    candidates
}

/// The first `limit` notes of [`relevance_pass`] that `keep` keeps, in its
/// order, without sorting the rest: a query whose words are in most of a
/// large vault (`notes` at 100k) spent a fifth of a search sorting them.
/// Only the notes kept have their rules written out: the others' scores
/// are plain sums.
pub(crate) fn relevance_top(
    vault: &Vault,
    query: &Query,
    limit: usize,
    keep: &dyn Fn(usize) -> bool,
) -> Vec<Candidate> {
    let mut scored = scored_notes(vault, query);
    scored.retain(|&(_, note)| keep(note));
    if scored.len() > limit {
        scored.select_nth_unstable_by(limit, |a, b| by_score(vault, a, b));
        scored.truncate(limit);
    }
    scored.sort_unstable_by(|a, b| by_score(vault, a, b));
    with_breakdowns(vault, query, scored)
}

/// The query's terms prepared for scoring many notes.
struct Scorer<'q> {
    query: &'q Query,
    finders: Vec<WordFinder<'q>>,
    /// Finds which terms occur in a note's summary and description at all
    /// (one pass over each); only those are then checked as whole words.
    occurring: Option<aho_corasick::AhoCorasick>,
    in_summary: Vec<bool>,
    in_description: Vec<bool>,
}

impl<'q> Scorer<'q> {
    fn new(query: &'q Query) -> Scorer<'q> {
        Scorer {
            query,
            finders: query.terms.iter().map(|t| WordFinder::new(t)).collect(),
            occurring: aho_corasick::AhoCorasick::new(&query.terms).ok(),
            in_summary: vec![false; query.terms.len()],
            in_description: vec![false; query.terms.len()],
        }
    }

    fn points(&mut self, keys: NoteKeys<'_>) -> u32 {
        let mut points = 0;
        self.score(keys, |rule, _| points += rule.points());
        points
    }

    fn breakdown(&mut self, keys: NoteKeys<'_>) -> Vec<RuleHit> {
        let terms = &self.query.terms;
        let mut hits = Vec::new();
        self.score(keys, |rule, term| {
            hits.push(RuleHit {
                rule,
                term: terms[term].clone(),
                points: rule.points(),
            })
        });
        hits
    }

    /// Calls `hit` with each rule that fires and the term it fires for, in
    /// term order, then rule order.
    fn score(&mut self, keys: NoteKeys<'_>, mut hit: impl FnMut(Rule, usize)) {
        let (summary, description) = (keys.summary(), keys.description());
        // Whether the prefilter ran: without it every term may occur.
        let marked_summary = mark(self.occurring.as_ref(), summary, &mut self.in_summary);
        let marked_description = mark(
            self.occurring.as_ref(),
            description,
            &mut self.in_description,
        );
        for (i, (term, finder)) in self.query.terms.iter().zip(&self.finders).enumerate() {
            if keys.names().any(|name| name == term) {
                hit(Rule::TitleOrAlias, i);
            }
            if keys.tags().any(|tag| tag_matches(tag, term)) {
                hit(Rule::Tag, i);
            }
            if (!marked_summary || self.in_summary[i]) && finder.is_in(summary) {
                hit(Rule::Summary, i);
            }
            if (!marked_description || self.in_description[i]) && finder.is_in(description) {
                hit(Rule::IndexDescription, i);
            }
        }
    }
}

/// Marks in `seen` which terms occur in `text` as substrings; false (and
/// nothing marked) when there is no automaton to tell. An empty text holds
/// none.
fn mark(automaton: Option<&aho_corasick::AhoCorasick>, text: &str, seen: &mut [bool]) -> bool {
    seen.iter_mut().for_each(|seen| *seen = false);
    if text.is_empty() {
        return true;
    }
    let Some(automaton) = automaton else {
        return false;
    };
    for found in automaton.find_overlapping_iter(text) {
        seen[found.pattern().as_usize()] = true;
    }
    true
}

/// The notes a rule may score, in note order: every rule needs a term
/// inside one of the note's keys, so only the notes holding one.
fn notes_to_score(vault: &Vault, query: &Query) -> Vec<usize> {
    let keys = vault.match_keys();
    match TermSearcher::new(&query.terms) {
        Some(searcher) => keys.notes_holding(
            &query.terms,
            |text, from| searcher.find(text, from),
            is_whole_word,
        ),
        None => (0..keys.len()).collect(),
    }
}

/// Every note scoring above zero, as (score, note), in note order.
fn scored_notes(vault: &Vault, query: &Query) -> Vec<(f64, usize)> {
    let keys = vault.match_keys();
    let mut scorer = Scorer::new(query);
    notes_to_score(vault, query)
        .into_iter()
        .filter_map(|idx| {
            let points = scorer.points(keys.note(idx)?);
            (points > 0).then_some((f64::from(points), idx))
        })
        .collect()
}

/// The candidates of `scored` (in its order), each with the rules that
/// fired for it.
fn with_breakdowns(vault: &Vault, query: &Query, scored: Vec<(f64, usize)>) -> Vec<Candidate> {
    let keys = vault.match_keys();
    let mut scorer = Scorer::new(query);
    scored
        .into_iter()
        .map(|(score, note)| Candidate {
            note,
            score,
            breakdown: keys
                .note(note)
                .map(|keys| scorer.breakdown(keys))
                .unwrap_or_default(),
            explanation: None,
        })
        .collect()
}

/// Finds the leftmost occurrence of any query term: with Teddy (SIMD,
/// a few short patterns) where the CPU allows, else an automaton whose
/// leftmost matching still lets it use a prefilter.
enum TermSearcher {
    Packed(aho_corasick::packed::Searcher),
    Automaton(aho_corasick::AhoCorasick),
}

impl TermSearcher {
    fn new(terms: &[String]) -> Option<TermSearcher> {
        let packed = aho_corasick::packed::Config::new()
            .match_kind(aho_corasick::packed::MatchKind::LeftmostFirst)
            .builder()
            .extend(terms)
            .build();
        match packed {
            Some(searcher) => Some(TermSearcher::Packed(searcher)),
            None => aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                .build(terms)
                .ok()
                .map(TermSearcher::Automaton),
        }
    }

    fn find(&self, text: &str, from: usize) -> Option<(usize, usize)> {
        let found = match self {
            TermSearcher::Packed(searcher) => {
                searcher.find_in(text, aho_corasick::Span::from(from..text.len()))
            }
            TermSearcher::Automaton(automaton) => {
                automaton.find(aho_corasick::Input::new(text).span(from..text.len()))
            }
        }?;
        Some((found.start(), found.pattern().as_usize()))
    }
}

/// Whether `range` of `key` stands as a word, as every rule needs: the key
/// itself (titles, aliases), a tag level, or a whole word of a summary or
/// description ([`WordFinder`]'s boundaries: none needed beside CJK).
fn is_whole_word(key: &str, range: std::ops::Range<usize>) -> bool {
    let term = &key[range.clone()];
    let starts = term.chars().next().is_some_and(crate::text::is_cjk)
        || key[..range.start]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
    let ends = term.chars().next_back().is_some_and(crate::text::is_cjk)
        || key[range.end..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric());
    starts && ends
}

/// Score, then tier, then path: the pass's order. Notes are numbered in
/// path order, so the number stands for the path (a query matching most
/// of a large vault spent most of its sort comparing paths).
pub(crate) fn sort_by_score(vault: &Vault, candidates: &mut [Candidate]) {
    candidates.sort_unstable_by(|a, b| by_score(vault, &(a.score, a.note), &(b.score, b.note)));
}

/// Orders (score, note) pairs by [`sort_by_score`]'s order.
fn by_score(vault: &Vault, a: &(f64, usize), b: &(f64, usize)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0)
        .then_with(|| vault.metas[a.1].tier.cmp(&vault.metas[b.1].tier))
        .then(a.1.cmp(&b.1))
}

/// A folded tag matches a term whole, or by one level of a nested tag.
fn tag_matches(tag: &str, term: &str) -> bool {
    // A level is part of the tag: a tag that does not hold the term cannot
    // match, which rules out nearly every tag of a vault without splitting.
    tag == term
        || (tag.len() > term.len()
            && tag.contains(term)
            && tag.split('/').any(|level| level.trim() == term))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_and_descriptions_match_whole_words_only() {
        let files: Vec<(String, String)> = [
            (
                "a.md",
                "---\nsummary: Raftery and rafts, not the word itself.\n---\n",
            ),
            ("b.md", "---\nsummary: How raft elects a leader.\n---\n"),
            ("c.md", "---\nsummary: 共识算法与 raft\n---\n"),
            ("index.md", "- [[a]]: about raft logs\n- [[b]]: leaders\n"),
        ]
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
        let vault = Vault::from_texts("/v".into(), &files);
        let found: Vec<(String, Vec<Rule>)> = relevance_pass(&vault, &Query::parse("raft 共识"))
            .into_iter()
            .map(|c| {
                let rules = c.breakdown.iter().map(|h| h.rule).collect();
                (vault.metas[c.note].path.clone(), rules)
            })
            .collect();
        assert_eq!(
            found,
            [
                ("c.md".to_string(), vec![Rule::Summary, Rule::Summary]),
                ("b.md".to_string(), vec![Rule::Summary]),
                ("a.md".to_string(), vec![Rule::IndexDescription]),
            ]
        );
    }

    proptest::proptest! {
        /// Scoring only the notes the key scan finds gives what scoring
        /// every note gives, including for terms that also occur across
        /// the boundary of two notes' keys.
        #[test]
        fn scanning_the_keys_finds_every_note_a_rule_scores(
            notes in proptest::collection::vec(
                (
                    "[ab]{1,3}( [ab]{1,3})?",
                    proptest::collection::vec("[ab]{1,2}(/[ab]{1,2})?", 0..3),
                    "([ab]{1,3} ){0,3}",
                ),
                1..12,
            ),
            query in "[ab]{1,3}( [ab]{1,2}){0,2}",
            limit in 0usize..6,
        ) {
            let files: Vec<(String, String)> = notes
                .iter()
                .enumerate()
                .map(|(i, (title, tags, summary))| {
                    let tags = tags.iter().map(|t| format!("\"{t}\"")).collect::<Vec<_>>();
                    let text = format!(
                        "---\ntitle: \"{title}\"\ntags: [{}]\nsummary: \"{summary}\"\n---\nbody\n",
                        tags.join(", ")
                    );
                    (format!("n{i:02}.md"), text)
                })
                .collect();
            let vault = Vault::from_texts("/v".into(), &files);
            let query = Query::parse(&query);
            let scored = |candidates: Vec<Candidate>| -> Vec<(usize, u32, Vec<RuleHit>)> {
                candidates
                    .into_iter()
                    .map(|c| (c.note, c.score as u32, c.breakdown))
                    .collect()
            };
            // Every note scored, every term checked as a whole word.
            let mut scorer = Scorer::new(&query);
            scorer.occurring = None;
            let mut every_note: Vec<Candidate> = Vec::new();
            for (idx, keys) in vault.match_keys().iter().enumerate() {
                let breakdown = scorer.breakdown(keys);
                let score: u32 = breakdown.iter().map(|hit| hit.points).sum();
                if score > 0 {
                    every_note.push(Candidate {
                        note: idx,
                        score: f64::from(score),
                        breakdown,
                        explanation: None,
                    });
                }
            }
            sort_by_score(&vault, &mut every_note);
            let every_odd: Vec<Candidate> = every_note
                .iter()
                .filter(|c| c.note % 2 == 1)
                .take(limit)
                .cloned()
                .collect();
            proptest::prop_assert_eq!(scored(relevance_pass(&vault, &query)), scored(every_note));
            let odd = |note: usize| note % 2 == 1;
            proptest::prop_assert_eq!(
                scored(relevance_top(&vault, &query, limit, &odd)),
                scored(every_odd)
            );
        }
    }

    #[test]
    fn nested_tags_match_by_level() {
        assert!(tag_matches("ai/llm", "llm"));
        assert!(tag_matches("machine learning", "machine learning"));
        assert!(!tag_matches("ai/llm", "ai/ll"));
    }
}
