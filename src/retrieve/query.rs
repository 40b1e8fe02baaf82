//! Turning a topic into query terms.

use crate::text::fold;

/// Words too common to count as query terms on their own.
const STOP_WORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from",
    "how", "i", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "that",
    "the", "their", "this", "to", "vs", "was", "we", "what", "when", "where", "which", "who",
    "why", "will", "with", "your", "的", "了", "和", "与", "及", "是", "在",
];

/// The longest query (topic, subquery, search) a caller may give, in
/// characters: enough for a pasted paragraph, and it bounds what one call
/// can cost (every term is matched against every note).
pub const MAX_QUERY_CHARS: usize = 4096;

/// Refuses a query longer than [`MAX_QUERY_CHARS`], naming what it was.
pub fn check_query_length(what: &str, text: &str) -> Result<(), QueryTooLong> {
    let chars = text.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(QueryTooLong {
            what: what.to_string(),
            chars,
        });
    }
    Ok(())
}

/// A query longer than [`MAX_QUERY_CHARS`]: what it was (`topic`, ...)
/// and its length in characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryTooLong {
    pub what: String,
    pub chars: usize,
}

impl std::fmt::Display for QueryTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let QueryTooLong { what, chars } = self;
        write!(
            f,
            "{what} is {chars} characters long; at most {MAX_QUERY_CHARS} are accepted"
        )
    }
}

impl std::error::Error for QueryTooLong {}

/// A topic and the terms the relevance pass matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Query {
    /// The topic as given, whitespace collapsed.
    pub text: String,
    /// The folded whole phrase first, then each content word of a
    /// multi-word topic (stop words removed), without repeats.
    pub terms: Vec<String>,
}

/// A word cut where it passes between CJK and other characters: a
/// question written without spaces (`怎么给docker配置镜像加速`) holds the
/// name its note is titled and tagged by (`docker`).
fn script_runs(word: &str) -> impl Iterator<Item = &str> {
    let mut rest = word;
    std::iter::from_fn(move || {
        let first = rest.chars().next()?;
        let cjk = crate::text::is_cjk(first);
        let end = rest
            .char_indices()
            .find(|&(_, c)| crate::text::is_cjk(c) != cjk)
            .map_or(rest.len(), |(at, _)| at);
        let (run, after) = rest.split_at(end);
        rest = after;
        Some(run)
    })
}

impl Query {
    pub(crate) fn parse(topic: &str) -> Query {
        let text = crate::text::collapse_whitespace(topic);
        let phrase = fold(&text);
        let mut terms = Vec::new();
        if !phrase.is_empty() {
            terms.push(phrase.clone());
        }
        let words: Vec<String> = phrase
            .split(|c: char| {
                c.is_whitespace() || (c.is_ascii_punctuation() && c != '/' && c != '+' && c != '#')
            })
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '+' && c != '#'))
            .flat_map(script_runs)
            .filter(|w| {
                !w.is_empty()
                    && !STOP_WORDS.contains(w)
                    && !crate::analysis::QUESTION_WORDS.contains(w)
            })
            .map(str::to_string)
            .collect();
        if words.len() > 1 || words.first().is_some_and(|w| *w != phrase) {
            for word in words {
                if !terms.contains(&word) {
                    terms.push(word);
                }
            }
        }
        Query { text, terms }
    }

    // Only the tests ask: callers look at `terms` themselves.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_too_long_says_what_and_how_long() {
        assert_eq!(
            check_query_length("topic", &"é".repeat(MAX_QUERY_CHARS)),
            Ok(())
        );
        let err = check_query_length("subquery 2", &"x".repeat(MAX_QUERY_CHARS + 1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "subquery 2 is 4097 characters long; at most 4096 are accepted"
        );
    }

    #[test]
    fn phrase_then_content_words() {
        let q = Query::parse("  The Raft   consensus-algorithm ");
        assert_eq!(q.text, "The Raft consensus-algorithm");
        assert_eq!(
            q.terms,
            [
                "the raft consensus algorithm",
                "raft",
                "consensus",
                "algorithm"
            ]
        );
    }

    #[test]
    fn a_word_is_cut_between_cjk_and_other_characters() {
        let q = Query::parse("怎么给Docker配置镜像加速");
        assert_eq!(
            q.terms,
            [
                "怎么给docker配置镜像加速",
                "怎么给",
                "docker",
                "配置镜像加速"
            ]
        );
        assert_eq!(Query::parse("镜像").terms, ["镜像"]);
    }

    #[test]
    fn single_word_is_one_term() {
        assert_eq!(Query::parse("Raft").terms, ["raft"]);
        assert_eq!(Query::parse("分布式事务").terms, ["分布式事务"]);
        assert_eq!(Query::parse("C++").terms, ["c++"]);
    }

    #[test]
    fn only_stop_words_keeps_the_phrase() {
        assert_eq!(Query::parse("the who").terms, ["the who"]);
        assert!(Query::parse("   ").is_empty());
    }

    #[test]
    fn cjk_words_separated_by_spaces() {
        assert_eq!(
            Query::parse("分布式 事务").terms,
            ["分布式 事务", "分布式", "事务"]
        );
    }
}
