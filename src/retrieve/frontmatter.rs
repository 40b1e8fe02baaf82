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
    let mut candidates = scored_notes(vault, query);
    sort_by_score(vault, &mut candidates);
    candidates
}

/// The first `limit` notes of [`relevance_pass`] that `keep` keeps, in its
/// order, without sorting the rest: a query whose words are in most of a
/// large vault (`notes` at 100k) spent a fifth of a search sorting them.
pub(crate) fn relevance_top(
    vault: &Vault,
    query: &Query,
    limit: usize,
    keep: &dyn Fn(usize) -> bool,
) -> Vec<Candidate> {
    let mut candidates = scored_notes(vault, query);
    candidates.retain(|c| keep(c.note));
    if candidates.len() > limit {
        candidates.select_nth_unstable_by(limit, |a, b| by_score(vault, a, b));
        candidates.truncate(limit);
    }
    sort_by_score(vault, &mut candidates);
    candidates
}

/// Every note scoring above zero, in note order.
fn scored_notes(vault: &Vault, query: &Query) -> Vec<Candidate> {
    let keys = vault.match_keys();
    let finders: Vec<WordFinder> = query.terms.iter().map(|t| WordFinder::new(t)).collect();
    // One pass over a note's summary and description finds which terms
    // occur in it at all; only those are then checked as whole words.
    let occurring = aho_corasick::AhoCorasick::new(&query.terms).ok();
    let mut in_text = vec![false; query.terms.len()];
    let mut candidates = Vec::new();
    // Every rule needs a term inside one of the note's keys, so only the
    // notes holding one are scored.
    let scored: Vec<usize> = match TermSearcher::new(&query.terms) {
        Some(searcher) => keys.notes_holding(
            &query.terms,
            |text, from| searcher.find(text, from),
            is_whole_word,
        ),
        None => (0..keys.len()).collect(),
    };
    for idx in scored {
        let Some(note) = keys.note(idx) else {
            continue;
        };
        let breakdown = score_note(note, query, &finders, occurring.as_ref(), &mut in_text);
        let score: u32 = breakdown.iter().map(|hit| hit.points).sum();
        if score > 0 {
            candidates.push(Candidate {
                note: idx,
                score: f64::from(score),
                breakdown,
                explanation: None,
            });
        }
    }
    candidates
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
    candidates.sort_unstable_by(|a, b| by_score(vault, a, b));
}

fn by_score(vault: &Vault, a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| vault.metas[a.note].tier.cmp(&vault.metas[b.note].tier))
        .then(a.note.cmp(&b.note))
}

/// `finders` are the query's terms, prepared; `occurring` finds them all
/// in one pass (`in_text` is its scratch space).
fn score_note(
    keys: NoteKeys<'_>,
    query: &Query,
    finders: &[WordFinder],
    occurring: Option<&aho_corasick::AhoCorasick>,
    in_text: &mut [bool],
) -> Vec<RuleHit> {
    let (summary, description) = (keys.summary(), keys.description());
    // Which terms occur in the summary (`Some(true)`), the description, or
    // either, as substrings; `None` when the prefilter is not available.
    let mut mark = |text: &str| -> Option<Vec<bool>> {
        let automaton = occurring?;
        in_text.iter_mut().for_each(|seen| *seen = false);
        for found in automaton.find_overlapping_iter(text) {
            in_text[found.pattern().as_usize()] = true;
        }
        Some(in_text.to_vec())
    };
    let in_summary = if summary.is_empty() {
        Some(vec![false; finders.len()])
    } else {
        mark(summary)
    };
    let in_description = if description.is_empty() {
        Some(vec![false; finders.len()])
    } else {
        mark(description)
    };
    let mut hits = Vec::new();
    for (i, (term, finder)) in query.terms.iter().zip(finders).enumerate() {
        let mut hit = |rule: Rule| {
            hits.push(RuleHit {
                rule,
                term: term.clone(),
                points: rule.points(),
            })
        };
        if keys.names().any(|name| name == term) {
            hit(Rule::TitleOrAlias);
        }
        if keys.tags().any(|tag| tag_matches(tag, term)) {
            hit(Rule::Tag);
        }
        let may_occur = |marks: &Option<Vec<bool>>| marks.as_ref().is_none_or(|m| m[i]);
        if may_occur(&in_summary) && finder.is_in(summary) {
            hit(Rule::Summary);
        }
        if may_occur(&in_description) && finder.is_in(description) {
            hit(Rule::IndexDescription);
        }
    }
    hits
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
            let scored = |candidates: Vec<Candidate>| -> Vec<(usize, u32, usize)> {
                candidates
                    .into_iter()
                    .map(|c| (c.note, c.score as u32, c.breakdown.len()))
                    .collect()
            };
            let finders: Vec<WordFinder> = query.terms.iter().map(|t| WordFinder::new(t)).collect();
            let mut in_text = vec![false; query.terms.len()];
            let mut every_note: Vec<Candidate> = Vec::new();
            for (idx, keys) in vault.match_keys().iter().enumerate() {
                let breakdown = score_note(keys, &query, &finders, None, &mut in_text);
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
