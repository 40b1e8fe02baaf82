//! The seed's cheap relevance pass (Step 1) and tier-aware order (Step 2).

use crate::note::{NoteMeta, SummarySource};
use crate::retrieve::{Candidate, Query, Rule, RuleHit};
use crate::text::{contains_term, fold};
use crate::vault::Vault;

/// Scores every note against the query's terms and returns those scoring
/// above zero, ordered by score, then tier, then path.
///
/// Each rule is checked once per term and the points add up, so a page
/// matching the whole phrase and its words outranks one matching one word.
pub fn relevance_pass(vault: &Vault, query: &Query) -> Vec<Candidate> {
    let mut candidates: Vec<Candidate> = vault
        .metas
        .iter()
        .enumerate()
        .filter_map(|(idx, note)| {
            let description = vault.index_descriptions.get(&idx).map(|d| fold(d));
            let breakdown = score_note(note, description.as_deref(), query);
            let score: u32 = breakdown.iter().map(|hit| hit.points).sum();
            (score > 0).then_some(Candidate {
                note: idx,
                score: f64::from(score),
                breakdown,
                explanation: None,
            })
        })
        .collect();
    candidates.sort_by(|a, b| {
        let (na, nb) = (&vault.metas[a.note], &vault.metas[b.note]);
        b.score
            .total_cmp(&a.score)
            .then(na.tier.cmp(&nb.tier))
            .then(na.path.cmp(&nb.path))
    });
    candidates
}

fn score_note(note: &NoteMeta, index_description: Option<&str>, query: &Query) -> Vec<RuleHit> {
    let names: Vec<String> = std::iter::once(&note.title)
        .chain(&note.aliases)
        .map(|name| fold(name))
        .collect();
    let tags: Vec<String> = note.tags.iter().map(|t| fold(t)).collect();
    // The rule reads the `summary:` field; a summary taken from the body's
    // first paragraph is left to the full-text arm.
    let summary = match note.summary_source {
        SummarySource::Frontmatter => fold(&note.summary),
        _ => String::new(),
    };
    let mut hits = Vec::new();
    for term in &query.terms {
        let mut hit = |rule: Rule| {
            hits.push(RuleHit {
                rule,
                term: term.clone(),
                points: rule.points(),
            })
        };
        if names.iter().any(|name| name == term) {
            hit(Rule::TitleOrAlias);
        }
        if tags.iter().any(|tag| tag_matches(tag, term)) {
            hit(Rule::Tag);
        }
        if contains_term(&summary, term) {
            hit(Rule::Summary);
        }
        if index_description.is_some_and(|d| contains_term(d, term)) {
            hit(Rule::IndexDescription);
        }
    }
    hits
}

/// A folded tag matches a term whole, or by one level of a nested tag.
fn tag_matches(tag: &str, term: &str) -> bool {
    tag == term || tag.split('/').any(|level| level.trim() == term)
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
