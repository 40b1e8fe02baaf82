//! What a query says beyond its words: `"an exact phrase"` (the words in
//! that order), `-term` and `-"a phrase"` (notes containing them are left
//! out). The words, the phrases' included, are what the arms rank by; the
//! phrases and exclusions are a constraint on which notes may be ranked,
//! checked on the note's indexed text by [`QuerySyntax::admits`], the same
//! for both stores.
//!
//! A hyphen inside a word (`consensus-algorithm`) is part of the word; a
//! quote that is never closed is an ordinary character. A query with no
//! phrase and no exclusion is used exactly as given.

use crate::text::{fold, is_cjk};

/// A query split into what ranks and what constrains.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct QuerySyntax {
    /// What the arms rank by: the query as given when it has no phrase
    /// and no exclusion, else its words and its phrases' words in order.
    pub text: String,
    /// Phrases every admitted note contains, normalised ([`normalise`]).
    pub phrases: Vec<String>,
    /// Words and phrases no admitted note contains, normalised.
    pub excluded: Vec<String>,
}

impl QuerySyntax {
    /// Reads `query`'s phrases and exclusions.
    pub(crate) fn parse(query: &str) -> QuerySyntax {
        let mut words: Vec<&str> = Vec::new();
        let mut phrases = Vec::new();
        let mut excluded = Vec::new();
        let mut rest = query;
        let mut syntax = false;
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            let (negated, body) = match rest.strip_prefix('-') {
                Some(after) if after.starts_with(|c: char| !c.is_whitespace() && c != '-') => {
                    (true, after)
                }
                _ => (false, rest),
            };
            if let Some(inner) = body.strip_prefix('"')
                && let Some(close) = inner.find('"')
            {
                let phrase = &inner[..close];
                rest = &inner[close + 1..];
                syntax = true;
                let normal = normalise(phrase);
                if normal.is_empty() {
                    continue;
                }
                if negated {
                    excluded.push(normal);
                } else {
                    words.push(phrase);
                    phrases.push(normal);
                }
                continue;
            }
            let end = body.find(char::is_whitespace).unwrap_or(body.len());
            let word = &body[..end];
            rest = &body[end..];
            if negated {
                syntax = true;
                let normal = normalise(word);
                if !normal.is_empty() {
                    excluded.push(normal);
                }
            } else {
                words.push(word);
            }
        }
        if !syntax {
            return QuerySyntax {
                text: query.to_string(),
                ..QuerySyntax::default()
            };
        }
        phrases.dedup();
        excluded.sort();
        excluded.dedup();
        QuerySyntax {
            text: words.join(" "),
            phrases,
            excluded,
        }
    }

    /// Whether the query constrains which notes may be ranked.
    pub(crate) fn constrains(&self) -> bool {
        !self.phrases.is_empty() || !self.excluded.is_empty()
    }

    /// Whether the query has exclusions and nothing to rank by.
    pub(crate) fn only_exclusions(&self) -> bool {
        !self.excluded.is_empty() && self.text.trim().is_empty()
    }

    /// Whether a note whose indexed text, normalised, is `text` holds
    /// every phrase and no exclusion.
    pub(crate) fn admits(&self, text: &str) -> bool {
        self.phrases.iter().all(|p| holds(text, p)) && !self.excluded.iter().any(|e| holds(text, e))
    }

    /// The parsed query, one line, as `--explain` shows it.
    pub(crate) fn describe(&self) -> String {
        let mut out = format!("ranked by: {}", self.text);
        if !self.phrases.is_empty() {
            let quoted: Vec<String> = self.phrases.iter().map(|p| format!("\"{p}\"")).collect();
            out.push_str(&format!("; phrases: {}", quoted.join(", ")));
        }
        if !self.excluded.is_empty() {
            let shown: Vec<String> = self
                .excluded
                .iter()
                .map(|e| {
                    if e.contains(' ') {
                        format!("\"{e}\"")
                    } else {
                        e.clone()
                    }
                })
                .collect();
            out.push_str(&format!("; without: {}", shown.join(", ")));
        }
        out
    }
}

/// `text` folded (case, width), every run of characters that are not
/// letters or digits one space: words in order, so a phrase is a
/// substring on word boundaries. Characters of CJK scripts stay side by
/// side, since those scripts write no spaces between words.
pub(crate) fn normalise(text: &str) -> String {
    let folded = fold(text);
    let mut out = String::with_capacity(folded.len());
    let mut space = false;
    for ch in folded.chars() {
        if ch.is_alphanumeric() {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.push(ch);
        } else {
            space = true;
        }
    }
    out
}

/// Whether normalised `text` holds normalised `phrase` on word
/// boundaries (any position inside a run of CJK characters is one).
fn holds(text: &str, phrase: &str) -> bool {
    let (Some(first), Some(last)) = (phrase.chars().next(), phrase.chars().next_back()) else {
        return true;
    };
    let mut from = 0;
    while let Some(found) = text[from..].find(phrase) {
        let start = from + found;
        let end = start + phrase.len();
        let before = text[..start].chars().next_back();
        let after = text[end..].chars().next();
        let open = before.is_none_or(|c| c == ' ' || is_cjk(c) || is_cjk(first));
        let close = after.is_none_or(|c| c == ' ' || is_cjk(c) || is_cjk(last));
        if open && close {
            return true;
        }
        from = start + first.len_utf8();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_without_syntax_is_kept_as_given() {
        for query in [
            "  The Raft   consensus-algorithm ",
            "a - b",
            "don\"t stop",
            "--x",
            "C++ -",
        ] {
            let parsed = QuerySyntax::parse(query);
            assert_eq!(parsed.text, query);
            assert!(!parsed.constrains());
        }
    }

    #[test]
    fn phrases_and_exclusions_are_read() {
        let parsed = QuerySyntax::parse(r#"raft "Leader Election" -paxos -"old notes" log-based"#);
        assert_eq!(parsed.text, "raft Leader Election log-based");
        assert_eq!(parsed.phrases, ["leader election"]);
        assert_eq!(parsed.excluded, ["old notes", "paxos"]);
        assert_eq!(
            parsed.describe(),
            "ranked by: raft Leader Election log-based; phrases: \"leader election\"; \
             without: \"old notes\", paxos"
        );
        let only = QuerySyntax::parse(r#"-paxos -"a b""#);
        assert!(only.only_exclusions());
        // An unclosed quote is an ordinary character.
        let open = QuerySyntax::parse(r#"raft "leader"#);
        assert_eq!(open.text, r#"raft "leader"#);
        assert!(!open.constrains());
    }

    #[test]
    fn a_phrase_holds_its_words_in_order_on_word_boundaries() {
        let text = normalise("The Leader-Election step; elections held. 分布式事务处理");
        let admits = |query| QuerySyntax::parse(query).admits(&text);
        assert!(admits(r#""leader election""#));
        assert!(admits(r#""LEADER ELECTION step""#));
        assert!(!admits(r#""election leader""#));
        assert!(!admits(r#""leader elect""#));
        assert!(!admits(r#""eader election""#));
        assert!(admits(r#""事务""#));
        assert!(admits(r#""分布式事务""#));
        assert!(!admits(r#""事务分布""#));
        assert!(!admits("x -elections"));
        assert!(admits("x -election2"));
        assert!(!admits(r#"x -"step elections""#));
        assert!(admits(r#"x -"elections step""#));
    }
}
