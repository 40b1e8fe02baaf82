//! The seed's cheap relevance pass (Step 1) and tier-aware order (Step 2).

pub use crate::note::MatchKeys;
use crate::note_tables::NoteKeys;
use crate::retrieve::{Candidate, Query, Rule, RuleHit};
use crate::text::WordFinder;
use crate::vault::Vault;

/// Scores every note against the query's terms and returns those scoring
/// above zero, ordered by score, then tier, then path.
///
/// Each rule is checked once per term and the points add up, so a page
/// matching the whole phrase and its words outranks one matching one word.
pub fn relevance_pass(vault: &Vault, query: &Query) -> Vec<Candidate> {
    let keys = vault.match_keys();
    let finders: Vec<WordFinder> = query.terms.iter().map(|t| WordFinder::new(t)).collect();
    let mut candidates: Vec<Candidate> = keys
        .iter()
        .enumerate()
        .filter_map(|(idx, keys)| {
            let breakdown = score_note(keys, query, &finders);
            let score: u32 = breakdown.iter().map(|hit| hit.points).sum();
            (score > 0).then_some(Candidate {
                note: idx,
                score: f64::from(score),
                breakdown,
                explanation: None,
            })
        })
        .collect();
    sort_by_score(vault, &mut candidates);
    candidates
}

/// Adds the seed's +4 to every page QMD returned (adding pages the pass
/// did not score), then restores the pass's order.
pub fn add_qmd_points(vault: &Vault, candidates: &mut Vec<Candidate>, qmd_notes: &[usize]) {
    for &note in qmd_notes {
        let hit = RuleHit {
            rule: Rule::Qmd,
            term: String::new(),
            points: Rule::Qmd.points(),
        };
        match candidates.iter_mut().find(|c| c.note == note) {
            Some(candidate) => {
                candidate.score += f64::from(hit.points);
                candidate.breakdown.push(hit);
            }
            None => candidates.push(Candidate {
                note,
                score: f64::from(hit.points),
                breakdown: vec![hit],
                explanation: None,
            }),
        }
    }
    sort_by_score(vault, candidates);
}

/// Score, then tier, then path: the pass's order.
fn sort_by_score(vault: &Vault, candidates: &mut [Candidate]) {
    candidates.sort_by(|a, b| {
        let (na, nb) = (&vault.metas[a.note], &vault.metas[b.note]);
        b.score
            .total_cmp(&a.score)
            .then(na.tier.cmp(&nb.tier))
            .then(na.path.cmp(&nb.path))
    });
}

/// `finders` are the query's terms, prepared.
fn score_note(keys: NoteKeys<'_>, query: &Query, finders: &[WordFinder]) -> Vec<RuleHit> {
    let mut hits = Vec::new();
    for (term, finder) in query.terms.iter().zip(finders) {
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
        if finder.is_in(keys.summary()) {
            hit(Rule::Summary);
        }
        if finder.is_in(keys.description()) {
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
    fn nested_tags_match_by_level() {
        assert!(tag_matches("ai/llm", "llm"));
        assert!(tag_matches("machine learning", "machine learning"));
        assert!(!tag_matches("ai/llm", "ai/ll"));
    }
}
