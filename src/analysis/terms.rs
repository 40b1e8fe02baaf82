//! A text's terms as both stores index them: the query side of the
//! analyzer.

use super::analyzer;

/// The analysed, de-duplicated terms of a query.
pub(crate) fn query_terms(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    visit_terms(text, |term| {
        if !seen.contains(term) {
            seen.insert(term.to_string());
            terms.push(term.to_string());
        }
    });
    terms
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
