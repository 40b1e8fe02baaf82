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

/// A term in at least this share of a vault's sections, and in at least
/// [`COMMON_MIN_SECTIONS`] of them, is common: a note holding it alone
/// (`notes` in `evergreen notes`: a daily note's `## Notes` heading) is
/// not about a topic of more words.
const COMMON_SHARE: f64 = 0.05;
const COMMON_MIN_SECTIONS: f64 = 3.0;

/// A telling term of a topic and the word it was read from; words joined
/// by a hyphen (`two-phase`) share a `compound` number.
struct TellingWord<'t> {
    term: String,
    word: &'t str,
    compound: usize,
}

/// The telling terms of `topic`, each once, with their words.
fn telling_words(topic: &str) -> Vec<TellingWord<'_>> {
    let terms = telling_terms(topic);
    let mut words: Vec<TellingWord<'_>> = Vec::with_capacity(terms.len());
    let mut analyzer = crate::analysis::analyzer::analyzer();
    let mut stream = analyzer.token_stream(topic);
    let mut compound = 0;
    let mut previous_end: Option<usize> = None;
    while let Some(token) = stream.next() {
        let joined = previous_end.is_some_and(|end| topic.get(end..token.offset_from) == Some("-"));
        if !joined {
            compound += 1;
        }
        previous_end = Some(token.offset_to);
        if terms.contains(&token.text) && !words.iter().any(|w| w.term == token.text) {
            words.push(TellingWord {
                term: token.text.clone(),
                word: &topic[token.offset_from..token.offset_to],
                compound,
            });
        }
    }
    words
}

/// Which of `words` are common in the store's vault (see [`COMMON_SHARE`]);
/// none without a store.
fn common_words(store: Option<&dyn Store>, words: &[TellingWord<'_>]) -> Vec<bool> {
    let Some(store) = store else {
        return vec![false; words.len()];
    };
    let sections = store.section_count() as f64;
    let terms: Vec<String> = words.iter().map(|w| w.term.clone()).collect();
    store
        .section_idf(&terms)
        .into_iter()
        .map(|idf| {
            // The store gives `ln(1 + (N - df + 0.5) / (df + 0.5))`.
            let ratio = idf.exp() - 1.0;
            let sections_holding = ((sections + 0.5 - 0.5 * ratio) / (ratio + 1.0)).round();
            sections_holding >= COMMON_MIN_SECTIONS && sections_holding >= COMMON_SHARE * sections
        })
        .collect()
}

/// The candidates of a topic pack that say something of the topic, in
/// order. In a question of three to six telling words (`how do leaders
/// get elected`: leader, get, elect), a note holding one of them only
/// (`Get started` in a Readme) is a coincidence, not an answer. In a
/// topic of two to six words otherwise, a note holding only a common one
/// of them (`notes` of `evergreen notes`), or only part of a hyphenated
/// word (`two` of `two-phase commit`), is not about it; a rarer one held
/// alone is (`charter` of `zab zookeeper charter`: a list of keywords
/// asks for each). A note the semantic arm ranks among its best passes,
/// and so does a note whose title, an alias or a tag holds a word of the
/// topic.
/// Read only until `wanted` notes have passed (the pack considers no
/// more); the notes after them are kept unread.
pub(super) fn topic_candidates(
    vault: &Vault,
    store: Option<&dyn Store>,
    topic: &str,
    candidates: Vec<crate::retrieve::Candidate>,
    wanted: usize,
) -> (
    Vec<crate::retrieve::Candidate>,
    Vec<crate::pack::DroppedPage>,
) {
    // A CJK topic's terms are characters and their pairs, not words.
    if crate::tokens::has_cjk(topic) {
        return (candidates, Vec::new());
    }
    let words = telling_words(topic);
    let terms: Vec<String> = words.iter().map(|w| w.term.clone()).collect();
    // Asked as a sentence: it has words a question is asked with (`how`,
    // `do`, `about`, …) beside its telling ones.
    let mut all_words = std::collections::HashSet::new();
    crate::analysis::visit_terms(topic, |term| {
        all_words.insert(term.to_string());
    });
    let asked = all_words.len() > terms.len() && FLOOR_TERMS.contains(&terms.len());
    if !asked && !(2..=*FLOOR_TERMS.end()).contains(&terms.len()) {
        return (candidates, Vec::new());
    }
    let compounds = words.last().map_or(0, |w| w.compound);
    let common = if asked {
        Vec::new()
    } else {
        common_words(store, &words)
    };
    let hyphenated = words
        .windows(2)
        .any(|pair| pair[0].compound == pair[1].compound);
    // Only a topic with a rare word is padded by notes of its common ones;
    // when all its words are common, the ranking weighs them alike.
    let some_common_some_rare = common.contains(&true) && common.contains(&false);
    if !asked && !hyphenated && !some_common_some_rare {
        return (candidates, Vec::new());
    }
    let answers = |held: &[bool]| {
        if asked {
            return held.iter().filter(|&&h| h).count() >= MIN_SHARED_TERMS;
        }
        // Each word, or hyphenated word, is held when all its parts are.
        let mut whole = Vec::new();
        for compound in 1..=compounds {
            let parts: Vec<usize> = (0..words.len())
                .filter(|&at| words[at].compound == compound)
                .collect();
            if !parts.is_empty() && parts.iter().all(|&at| held[at]) {
                whole.push(parts);
            }
        }
        whole.len() >= MIN_SHARED_TERMS
            || whole
                .iter()
                .any(|parts| parts.len() > 1 || !common[parts[0]])
    };
    let window: Vec<usize> = candidates.iter().take(wanted * 2).map(|c| c.note).collect();
    let held_in_window = holders(store, vault, &words, &window);
    if held_in_window.is_none() {
        // Read on every core, as the pack reads its pages.
        vault.preload(&window);
    }
    let by_meaning = |candidate: &crate::retrieve::Candidate| {
        candidate.explanation.as_ref().is_some_and(|explanation| {
            explanation
                .arms
                .iter()
                .any(|arm| arm.arm == "semantic" && arm.rank <= MEANING_RANK)
        })
    };
    // A note named or tagged by a word of the topic is about it (`Books`
    // for `books I want to read`; `Paxos`, tagged `consensus`, for
    // `consensus algorithms` in a vault where most notes say consensus),
    // whatever else it holds: its writer chose those words for it.
    let named = |note: usize| {
        let meta = &vault.metas[note];
        let mut held = vec![false; terms.len()];
        let names = std::iter::once(&meta.title)
            .chain(&meta.aliases)
            .chain(&meta.tags);
        for name in names {
            crate::analysis::visit_terms(name, |term| {
                if let Some(at) = terms.iter().position(|t| t == term) {
                    held[at] = true;
                }
            });
        }
        (1..=words.last().map_or(0, |w| w.compound)).any(|compound| {
            let mut parts = (0..words.len()).filter(|&at| words[at].compound == compound);
            let first = parts.next();
            first.is_some_and(|first| held[first] && parts.all(|at| held[at]))
        })
    };
    let mut kept = Vec::with_capacity(candidates.len());
    let mut left_out = Vec::new();
    let mut passed = 0;
    let mut rest = candidates.into_iter().enumerate();
    for (at, candidate) in rest.by_ref() {
        let passes = by_meaning(&candidate)
            || named(candidate.note)
            || match held_in_window.as_ref().and_then(|held| held.get(at)) {
                Some(held) => answers(held),
                None => answers(&held_terms(&vault.note(candidate.note), &terms)),
            };
        if passes {
            kept.push(candidate);
            passed += 1;
            if passed == wanted {
                break;
            }
        } else {
            let meta = &vault.metas[candidate.note];
            left_out.push(crate::pack::DroppedPage {
                path: meta.path.clone(),
                title: meta.title.clone(),
                tier: meta.tier,
                score: candidate.score,
                reason: WEAK_MATCH,
            });
        }
    }
    kept.extend(rest.map(|(_, candidate)| candidate));
    (kept, left_out)
}

/// The reason a pack's `dropped` list gives for a note the floor left out.
pub(super) const WEAK_MATCH: &str = "weak_match";

/// For each of `notes`, which of `words` its indexed text holds, asked of
/// the store (one narrow search a word) when it can answer without the
/// notes being read; `None` where it cannot.
fn holders(
    store: Option<&dyn Store>,
    vault: &Vault,
    words: &[TellingWord<'_>],
    notes: &[usize],
) -> Option<Vec<Vec<bool>>> {
    let store = store?;
    let mut in_window = vec![false; vault.metas.len()];
    for &note in notes {
        in_window[note] = true;
    }
    let mut held = vec![vec![false; words.len()]; notes.len()];
    for (at, word) in words.iter().enumerate() {
        // The word as written analyses to the term again (a stem would
        // not always: Porter2 is not idempotent).
        let hits = store
            .search_notes_kept(word.word, notes.len(), &|note| in_window[note])?
            .ok()?;
        for (note, _) in hits {
            for (slot, _) in notes.iter().enumerate().filter(|(_, n)| **n == note) {
                held[slot][at] = true;
            }
        }
    }
    Some(held)
}

/// Which of `terms` the indexed text of `note` holds.
fn held_terms(note: &Note, terms: &[String]) -> Vec<bool> {
    let mut held = vec![false; terms.len()];
    for part in crate::analysis::note_text_parts(note) {
        crate::analysis::visit_terms(&part, |term| {
            if let Some(at) = terms.iter().position(|t| t == term) {
                held[at] = true;
            }
        });
    }
    held
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
