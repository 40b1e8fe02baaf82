//! How text becomes index terms: words of alphabetic scripts are lower-cased,
//! stop words removed and English-stemmed; runs of CJK characters become
//! single characters plus overlapping character pairs, which needs no
//! dictionary and finds any Chinese or Japanese substring of two or more
//! characters.

use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, Token,
    TokenStream, Tokenizer,
};

use crate::text::is_cjk;

/// The name under which the analyzer is registered with tantivy.
pub const ANALYZER: &str = "ctxpack";

/// Builds the analyzer used for every indexed text field and every query.
pub fn analyzer() -> TextAnalyzer {
    let stop_words = StopWordFilter::new(Language::English)
        .unwrap_or_else(|| StopWordFilter::remove(Vec::<String>::new()));
    TextAnalyzer::builder(MixedTokenizer::default())
        .filter(RemoveLongFilter::limit(48))
        .filter(LowerCaser)
        .filter(stop_words)
        .filter(Stemmer::new(Language::English))
        .build()
}

/// The terms of `text`, in order, as the index sees them.
pub fn terms(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
    let mut stream = analyzer.token_stream(text);
    let mut terms = Vec::new();
    while stream.advance() {
        terms.push(stream.token().text.clone());
    }
    terms
}

/// Splits text into alphanumeric words and CJK unigrams and bigrams.
#[derive(Clone, Default)]
pub struct MixedTokenizer {
    tokens: Vec<Token>,
}

pub struct MixedTokenStream<'a> {
    tokens: &'a mut [Token],
    next: usize,
}

impl Tokenizer for MixedTokenizer {
    type TokenStream<'a> = MixedTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> MixedTokenStream<'a> {
        self.tokens.clear();
        let mut position = 0usize;
        let mut word_start: Option<usize> = None;
        let mut previous_cjk: Option<(usize, char)> = None;
        let push = |tokens: &mut Vec<Token>, from: usize, to: usize, position: usize| {
            tokens.push(Token {
                offset_from: from,
                offset_to: to,
                position,
                text: text[from..to].to_string(),
                position_length: 1,
            });
        };
        for (offset, ch) in text.char_indices() {
            if is_cjk(ch) {
                if let Some(start) = word_start.take() {
                    push(&mut self.tokens, start, offset, position);
                    position += 1;
                }
                let end = offset + ch.len_utf8();
                if let Some((prev_offset, _)) = previous_cjk {
                    push(
                        &mut self.tokens,
                        prev_offset,
                        end,
                        position.saturating_sub(1),
                    );
                }
                push(&mut self.tokens, offset, end, position);
                position += 1;
                previous_cjk = Some((offset, ch));
                continue;
            }
            previous_cjk = None;
            if ch.is_alphanumeric() {
                word_start.get_or_insert(offset);
            } else if let Some(start) = word_start.take() {
                push(&mut self.tokens, start, offset, position);
                position += 1;
            }
        }
        if let Some(start) = word_start {
            push(&mut self.tokens, start, text.len(), position);
        }
        MixedTokenStream {
            tokens: &mut self.tokens,
            next: 0,
        }
    }
}

impl TokenStream for MixedTokenStream<'_> {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_is_stemmed_and_stop_words_dropped() {
        let mut a = analyzer();
        assert_eq!(
            terms(&mut a, "The Running of the Leaders"),
            ["run", "leader"]
        );
    }

    #[test]
    fn cjk_becomes_unigrams_and_bigrams() {
        let mut a = analyzer();
        assert_eq!(
            terms(&mut a, "分布式ok事务"),
            ["分", "分布", "布", "布式", "式", "ok", "事", "事务", "务"]
        );
    }

    #[test]
    fn punctuation_and_symbols_are_separators() {
        let mut a = analyzer();
        assert_eq!(
            terms(&mut a, "\"raft\": (AND) OR -leader [x]"),
            ["raft", "leader", "x"]
        );
    }
}
