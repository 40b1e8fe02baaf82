//! Text normalisation shared by parsing, matching and de-duplication.

use unicode_normalization::UnicodeNormalization;

/// Folds text for matching: NFKC, lower case, `-` and `_` read as spaces,
/// whitespace collapsed to single spaces and trimmed.
pub fn fold(text: &str) -> String {
    if text.is_ascii() {
        return fold_chars(text.chars().map(|c| c.to_ascii_lowercase()), text.len());
    }
    fold_chars(text.nfkc().flat_map(char::to_lowercase), text.len())
}

fn fold_chars(chars: impl Iterator<Item = char>, len: usize) -> String {
    let mut out = String::with_capacity(len);
    let mut pending_space = false;
    for ch in chars {
        if ch.is_whitespace() || ch == '-' || ch == '_' {
            pending_space = !out.is_empty();
            continue;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        out.push(ch);
    }
    out
}

/// Collapses every run of whitespace to one space and trims the ends.
pub fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // Control characters count as spaces, so no title, query or summary
    // carries a terminal escape or a line break into a one-line field.
    for word in text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// True for the ideographs and syllabaries of Chinese, Japanese and Korean,
/// which are written without spaces between words.
pub fn is_cjk(ch: char) -> bool {
    matches!(ch as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F  // CJK Extensions B–F and supplements
    )
}

/// Finds `needle` in `haystack` (both already folded) as a whole word: the
/// characters around a match must not be letters or digits, except next to
/// CJK characters, where words have no delimiters.
pub fn contains_term(haystack: &str, needle: &str) -> bool {
    WordFinder::new(needle).is_in(haystack)
}

/// A folded term prepared once to be found as a whole word (see
/// [`contains_term`]) in many haystacks: building the substring searcher
/// costs more than one short search.
pub struct WordFinder<'n> {
    needle: &'n str,
    finder: memchr::memmem::Finder<'n>,
    needs_start_boundary: bool,
    needs_end_boundary: bool,
}

impl<'n> WordFinder<'n> {
    pub fn new(needle: &'n str) -> WordFinder<'n> {
        WordFinder {
            needle,
            finder: memchr::memmem::Finder::new(needle.as_bytes()),
            needs_start_boundary: needle.chars().next().is_some_and(|c| !is_cjk(c)),
            needs_end_boundary: needle.chars().next_back().is_some_and(|c| !is_cjk(c)),
        }
    }

    pub fn is_in(&self, haystack: &str) -> bool {
        if self.needle.is_empty() || haystack.len() < self.needle.len() {
            return false;
        }
        let mut from = 0;
        while let Some(found) = self.finder.find(&haystack.as_bytes()[from..]) {
            let start = from + found;
            let end = start + self.needle.len();
            // Overlapping matches count: the next search starts one character on.
            from = start + haystack[start..].chars().next().map_or(1, char::len_utf8);
            let before_ok = !self.needs_start_boundary
                || haystack[..start]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !c.is_alphanumeric());
            let after_ok = !self.needs_end_boundary
                || haystack[end..]
                    .chars()
                    .next()
                    .is_none_or(|c| !c.is_alphanumeric());
            if before_ok && after_ok {
                return true;
            }
        }
        false
    }
}

/// Cuts `text` to at most `max_chars` characters, preferring a word boundary,
/// and marks the cut with an ellipsis (which counts toward the limit).
pub fn truncate_chars(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let keep = max_chars.saturating_sub(1);
    let mut cut: String = text.chars().take(keep).collect();
    let ends_in_cjk = cut.chars().next_back().is_some_and(is_cjk);
    if !ends_in_cjk
        && let Some(space) = cut.rfind(' ')
        && space * 2 > cut.len()
    {
        cut.truncate(space);
    }
    let trimmed_len = cut.trim_end().len();
    cut.truncate(trimmed_len);
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_normalises_width_case_and_separators() {
        assert_eq!(
            fold("  Ｒａｆｔ_Consensus-Protocol  "),
            "raft consensus protocol"
        );
        assert_eq!(fold("分布式　事务"), "分布式 事务");
    }

    #[test]
    fn contains_term_respects_word_boundaries_except_for_cjk() {
        assert!(contains_term("the raft protocol", "raft"));
        assert!(!contains_term("a craftsman", "raft"));
        assert!(contains_term("raft.", "raft"));
        assert!(contains_term("基于两阶段提交的协议", "两阶段提交"));
        assert!(!contains_term("abc", ""));
    }

    #[test]
    fn truncate_prefers_word_boundary() {
        assert_eq!(truncate_chars("short", 10), "short");
        assert_eq!(truncate_chars("alpha beta gamma delta", 12), "alpha beta…");
        assert_eq!(truncate_chars("一二三四五六", 4), "一二三…");
    }
}
