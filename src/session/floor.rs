//! The floor under note packs and topic packs: a note counts as similar to
//! an anchor only when it shares more than one word with it, a note of
//! properties alone is packed with the notes its properties link to, and a
//! pack that fills little of its budget while linked notes wait says so.

use crate::note::Note;
use crate::pack::Pack;
use crate::retrieve::graph::{Direction, TOPIC_SEEDS};
use crate::store::Store;
use crate::vault::Vault;

/// How many distinct terms of the similarity query a note must hold to be
/// packed as similar: one shared word ("control" in a book title and in an
/// essay on self-control) is a coincidence, not a likeness.
pub(super) const MIN_SHARED_TERMS: usize = 2;

/// English function words the analyzer keeps (its stop words are fewer),
/// as stems: sharing `out` and one more word is no likeness either.
const FUNCTION_WORDS: &[&str] = &[
    "about", "after", "all", "also", "am", "ani", "been", "befor", "can", "could", "did", "do",
    "doe", "down", "each", "from", "had", "ha", "have", "he", "her", "here", "hi", "how", "i",
    "it", "just", "me", "more", "most", "my", "off", "onli", "other", "our", "out", "over", "she",
    "so", "some", "than", "them", "those", "too", "up", "veri", "we", "were", "what", "when",
    "where", "which", "while", "who", "whi", "would", "should", "you", "your",
];

/// The terms of `query` that can show a likeness: not function words.
pub(super) fn telling_terms(query: &str) -> Vec<String> {
    let mut terms = crate::analysis::query_terms(query);
    terms.retain(|term| !FUNCTION_WORDS.contains(&term.as_str()));
    terms
}

/// A topic of this many telling words asks for a likeness: a ranked note
/// must hold [`MIN_SHARED_TERMS`] of them. With fewer, one word is the
/// whole question; with more (a claim, a paragraph), the ranking already
/// puts a note sharing one word far down, and a pack of a long question
/// at a large budget is better for the few that still answer it.
const FLOOR_TERMS: std::ops::RangeInclusive<usize> = 3..=6;

/// How far down the semantic arm's list a note counts as found by its
/// meaning: the arm ranks every note, so its tail says nothing.
const MEANING_RANK: usize = 10;

/// The candidates of a topic pack that say something of the topic, in
/// order: in a question of three to six telling words (`how do leaders
/// get elected`: leader, get, elect), a note holding one of them only
/// (`Get started` in a Readme) is a coincidence, not an answer, unless the
/// semantic arm ranks it among its best. Read only until `wanted` notes have passed
/// (the pack considers no more); the notes after them are kept unread.
pub(super) fn topic_candidates(
    vault: &Vault,
    topic: &str,
    candidates: Vec<crate::retrieve::Candidate>,
    wanted: usize,
) -> Vec<crate::retrieve::Candidate> {
    let terms = telling_terms(topic);
    // Only a topic asked as a sentence (it has words a question is asked
    // with, `how`, `do`, `about`, …): a list of keywords (`zab zookeeper
    // charter`) asks for each of them, and one word held is an answer.
    let mut words = std::collections::HashSet::new();
    crate::analysis::visit_terms(topic, |term| {
        words.insert(term.to_string());
    });
    let asked = words.len() > terms.len();
    if !asked || !FLOOR_TERMS.contains(&terms.len()) {
        return candidates;
    }
    // Read on every core, as the pack reads its pages.
    let notes: Vec<usize> = candidates.iter().take(wanted * 2).map(|c| c.note).collect();
    vault.preload(&notes);
    let by_meaning = |candidate: &crate::retrieve::Candidate| {
        candidate.explanation.as_ref().is_some_and(|explanation| {
            explanation
                .arms
                .iter()
                .any(|arm| arm.arm == "semantic" && arm.rank <= MEANING_RANK)
        })
    };
    let mut kept = Vec::with_capacity(candidates.len());
    let mut passed = 0;
    let mut rest = candidates.into_iter();
    for candidate in rest.by_ref() {
        if by_meaning(&candidate)
            || shared_terms(&vault.note(candidate.note), &terms, MIN_SHARED_TERMS)
                >= MIN_SHARED_TERMS
        {
            kept.push(candidate);
            passed += 1;
            if passed == wanted {
                break;
            }
        }
    }
    kept.extend(rest);
    kept
}

/// A pack filling less than this share of its budget is thin.
const THIN_SHARE: usize = 4;

/// How many distinct `terms` the indexed text of `note` holds, counting up
/// to `enough` (the rest of the note is not read once it is reached).
pub(super) fn shared_terms(note: &Note, terms: &[String], enough: usize) -> usize {
    let mut found = vec![false; terms.len()];
    let mut count = 0;
    for part in crate::analysis::note_text_parts(note) {
        crate::analysis::visit_terms(&part, |term| {
            if count >= enough {
                return;
            }
            if let Some(at) = terms.iter().position(|t| t == term)
                && !found[at]
            {
                found[at] = true;
                count += 1;
            }
        });
        if count >= enough {
            break;
        }
    }
    count
}

/// Whether a note's body says nothing of its own: empty, or only embeds
/// (`![[Books.base#Author]]`). Such a note is what its properties say.
pub(super) fn body_is_only_properties(note: &Note) -> bool {
    let mut rest = note.body.as_str();
    while let Some(start) = rest.find("![[") {
        if rest[..start].chars().any(char::is_alphanumeric) {
            return false;
        }
        match rest[start..].find("]]") {
            Some(end) => rest = &rest[start + end + 2..],
            None => return false,
        }
    }
    !rest.chars().any(char::is_alphanumeric)
}

/// The warning of a topic pack that fills less than a quarter of its
/// budget while notes linked to its top pages are not in it (links were
/// not followed): how many, and how to add them.
pub(super) fn thin_pack_warning(
    pack: &Pack,
    vault: &Vault,
    store: Option<&dyn Store>,
) -> Option<String> {
    if pack.pages.is_empty() || pack.actual * THIN_SHARE >= pack.budget {
        return None;
    }
    let graph = store?.link_graph()?;
    let packed: Vec<usize> = pack
        .pages
        .iter()
        .filter_map(|page| vault.metas.position(&page.path))
        .collect();
    let seeds: Vec<(usize, f64)> = packed
        .iter()
        .take(TOPIC_SEEDS)
        .map(|&note| (note, 1.0))
        .collect();
    let walk = graph.neighbourhood(&seeds, 1, Direction::Both, false);
    let waiting = walk
        .neighbours
        .iter()
        .filter(|n| !packed.contains(&n.note))
        .count();
    let (notes, are) = if waiting == 1 {
        ("note", "is")
    } else {
        ("notes", "are")
    };
    (waiting > 0).then(|| {
        format!(
            "the pack fills {} of its {} tokens, and {waiting} {notes} linked to its pages \
             {are} not in it: following links adds them (--graph-depth 1 on the command line, \
             graph_depth 1 over MCP)",
            pack.actual, pack.budget
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(text: &str) -> Note {
        crate::parse::parse_note("n.md", text, None).0
    }

    #[test]
    fn shared_terms_count_distinct_terms_of_every_indexed_part() {
        let terms = crate::analysis::query_terms("control Kelly emergence");
        let essay = note("# Socks\n\nSelf-control and control of socks.\n");
        assert_eq!(shared_terms(&essay, &terms, 3), 1);
        let book = note("---\nauthor: \"[[Kevin Kelly]]\"\n---\nOn control and emergence.\n");
        assert_eq!(shared_terms(&book, &terms, 3), 3);
        assert_eq!(shared_terms(&book, &terms, 2), 2);
        assert_eq!(shared_terms(&note("Nothing here.\n"), &terms, 2), 0);
    }

    #[test]
    fn function_words_show_no_likeness() {
        assert_eq!(
            telling_terms("Out of Control: what you can do about it, Kevin"),
            ["control", "kevin"]
        );
    }

    #[test]
    fn a_body_of_embeds_alone_is_only_properties() {
        assert!(body_is_only_properties(&note("---\nyear: 1992\n---\n")));
        assert!(body_is_only_properties(&note(
            "---\nyear: 1992\n---\n\n![[Books.base#Author]]\n\n![[x.png]]\n"
        )));
        assert!(!body_is_only_properties(&note(
            "---\nyear: 1992\n---\nA book.\n"
        )));
        assert!(!body_is_only_properties(&note(
            "![[Books.base]] and a word\n"
        )));
        assert!(!body_is_only_properties(&note("![[unclosed\n")));
    }
}
