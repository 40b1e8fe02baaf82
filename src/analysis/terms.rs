//! A text's terms as both stores index them: the query side of the
//! analyzer.

use super::analyzer;

/// The analysed, de-duplicated terms of a query, without the words a
/// question is asked with when it has others ([`QUESTION_WORDS`]).
pub(crate) fn query_terms(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    visit_terms(text, |term| {
        if !seen.contains(term) {
            seen.insert(term.to_string());
            terms.push(term.to_string());
        }
    });
    if terms.iter().any(|term| !is_question_term(term)) {
        terms.retain(|term| !is_question_term(term));
    }
    terms
}

/// Words a question is asked with (`what did I discuss with Steph`, `how
/// do I …`). The index keeps them (its stop words are Lucene's short list:
/// a note may be about "what"), but a query that has other words drops
/// them, so that a question ranks as its keywords, not by the essays that
/// say "I" most. The frontmatter pass drops them too
/// (`retrieve::query`).
pub(crate) const QUESTION_WORDS: [&str; 27] = [
    "about", "could", "did", "do", "does", "done", "from", "had", "has", "have", "how", "i", "its",
    "me", "my", "our", "should", "vs", "we", "what", "when", "where", "which", "who", "why",
    "would", "your",
];

/// Whether an analysed term is one of [`QUESTION_WORDS`] as analysed.
fn is_question_term(term: &str) -> bool {
    static TERMS: std::sync::OnceLock<std::collections::HashSet<String>> =
        std::sync::OnceLock::new();
    TERMS
        .get_or_init(|| {
            let mut terms = std::collections::HashSet::new();
            for word in QUESTION_WORDS {
                visit_terms(word, |term| {
                    terms.insert(term.to_string());
                });
            }
            terms
        })
        .contains(term)
}

/// Calls `visit` with each term of `text`, in order, as the index sees
/// them, without collecting them (excerpt scoring analyses every sentence
/// of a pack's candidates).
pub(crate) fn visit_terms(text: &str, mut visit: impl FnMut(&str)) {
    thread_local! {
        static ANALYZER: std::cell::RefCell<tantivy::tokenizer::TextAnalyzer> =
            std::cell::RefCell::new(analyzer::analyzer());
    }
    ANALYZER.with(|analyzer| {
        let mut analyzer = analyzer.borrow_mut();
        let mut stream = analyzer.token_stream(text);
        while stream.advance() {
            visit(&stream.token().text);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_is_searched_by_its_keywords() {
        assert_eq!(
            query_terms("what did I discuss with Steph"),
            ["discuss", "steph"]
        );
        assert_eq!(query_terms("where did I go in Kyoto"), ["go", "kyoto"]);
        assert_eq!(query_terms("How do I rebase?"), ["rebas"]);
        // A query of question words alone keeps them: they are all it asks.
        assert_eq!(query_terms("what did I"), ["what", "did", "i"]);
        assert_eq!(query_terms("Docker 镜像"), ["docker", "镜", "镜像", "像"]);
    }
}
