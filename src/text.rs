//! Text normalisation shared by parsing, matching and de-duplication.

use unicode_normalization::UnicodeNormalization;

/// Folds text for matching: NFKC, lower case, `-` and `_` read as spaces,
/// whitespace collapsed to single spaces and trimmed.
pub(crate) fn fold(text: &str) -> String {
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
pub(crate) fn collapse_whitespace(text: &str) -> String {
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
pub(crate) fn is_cjk(ch: char) -> bool {
    matches!(ch as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F  // CJK Extensions B–F and supplements
    )
}

/// `text` with its control characters other than line breaks and tabs
/// written as escapes (`\u{1b}`), so that printing it cannot move a
/// terminal's cursor or change its colours.
pub(crate) fn visible_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars()
            .map(|c| {
                if c.is_control() && c != '\n' && c != '\t' {
                    c.escape_unicode().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// Finds `needle` in `haystack` (both already folded) as a whole word: the
/// characters around a match must not be letters or digits, except next to
/// CJK characters, where words have no delimiters. The code searches
/// many haystacks with one [`WordFinder`]; this one-shot form is the tests'.
/// Characters that show nothing (or a blank that does not break a word)
/// and join the text around them: a token split by one is shown, and
/// copied, whole. Format and bidi controls, joiners, variation selectors,
/// tag characters and the Hangul fillers.
pub(crate) const INVISIBLE: &[(char, char)] = &[
    ('\u{ad}', '\u{ad}'),
    ('\u{34f}', '\u{34f}'),
    ('\u{61c}', '\u{61c}'),
    ('\u{115f}', '\u{1160}'),
    ('\u{17b4}', '\u{17b5}'),
    ('\u{180b}', '\u{180f}'),
    ('\u{200b}', '\u{200f}'),
    ('\u{202a}', '\u{202e}'),
    ('\u{2060}', '\u{206f}'),
    ('\u{3164}', '\u{3164}'),
    ('\u{fe00}', '\u{fe0f}'),
    ('\u{feff}', '\u{feff}'),
    ('\u{ffa0}', '\u{ffa0}'),
    ('\u{1bca0}', '\u{1bca3}'),
    ('\u{e0000}', '\u{e0fff}'),
];

pub(crate) fn is_invisible(c: char) -> bool {
    INVISIBLE
        .iter()
        .any(|&(first, last)| (first..=last).contains(&c))
}

#[cfg(test)]
pub(crate) fn contains_term(haystack: &str, needle: &str) -> bool {
    WordFinder::new(needle).is_in(haystack)
}

/// A folded term prepared once to be found as a whole word (see
/// [`contains_term`]) in many haystacks: building the substring searcher
/// costs more than one short search.
pub(crate) struct WordFinder<'n> {
    needle: &'n str,
    finder: memchr::memmem::Finder<'n>,
    needs_start_boundary: bool,
    needs_end_boundary: bool,
}

impl<'n> WordFinder<'n> {
    pub(crate) fn new(needle: &'n str) -> WordFinder<'n> {
        WordFinder {
            needle,
            finder: memchr::memmem::Finder::new(needle.as_bytes()),
            needs_start_boundary: needle.chars().next().is_some_and(|c| !is_cjk(c)),
            needs_end_boundary: needle.chars().next_back().is_some_and(|c| !is_cjk(c)),
        }
    }

    pub(crate) fn is_in(&self, haystack: &str) -> bool {
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
pub(crate) fn truncate_chars(text: &str, max_chars: usize) -> String {
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

/// How many bytes of `line` are its opening marks: indentation, quote
/// marks (`>`), list markers (`-`, `*`, `+`, `11.`, `3)`, each followed by
/// a space) and task boxes (`[ ] `, `[x] `), in any nesting (`> - [ ] `).
pub(crate) fn line_marks_len(line: &str) -> usize {
    let mut rest = line;
    loop {
        let trimmed = rest.trim_start_matches([' ', '\t']);
        let digits = trimmed.len()
            - trimmed
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .len();
        let next = trimmed
            .strip_prefix('>')
            .or_else(|| {
                trimmed
                    .strip_prefix(['-', '*', '+'])
                    .filter(|r| r.starts_with(' '))
            })
            .or_else(|| {
                (digits > 0 && digits <= 9)
                    .then(|| trimmed[digits..].strip_prefix(['.', ')']))
                    .flatten()
                    .filter(|r| r.starts_with(' '))
            })
            .or_else(|| {
                ["[ ] ", "[x] ", "[X] "]
                    .iter()
                    .find_map(|t| trimmed.strip_prefix(t))
            });
        match next {
            Some(after) => rest = after,
            None => return line.len() - trimmed.len(),
        }
    }
}

/// The byte ranges of `text` where a full stop is not a sentence end:
/// wikilinks and embeds (`[[Books.md]]`, `![[a.png]]`), code spans, a
/// Markdown link's URL, bare URLs (`https://docker.com`) and HTML tags.
/// Sorted and disjoint, so [`in_markup`] is one binary search. Linear in
/// the text: a closing mark searched for and not found is not found from
/// any later place either, so it is never searched for again (a note of
/// unclosed `[[` made each search run to its end).
pub(crate) fn markup_spans(text: &str) -> Vec<std::ops::Range<usize>> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let (mut no_wiki_close, mut no_paren_close, mut no_angle_close) = (false, false, false);
    // The shortest run of backticks with no later run as long.
    let mut unclosed_ticks = usize::MAX;
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        let end = if rest.starts_with("[[") {
            let close = (!no_wiki_close).then(|| rest.find("]]")).flatten();
            no_wiki_close = close.is_none();
            close.map(|close| i + close + 2)
        } else if rest.starts_with('`') {
            let ticks = rest.len() - rest.trim_start_matches('`').len();
            let close = (ticks < unclosed_ticks)
                .then(|| rest[ticks..].find(&rest[..ticks]))
                .flatten();
            match close {
                Some(close) => Some(i + ticks + close + ticks),
                None => {
                    // An unclosed run is literal text, skipped whole.
                    unclosed_ticks = unclosed_ticks.min(ticks);
                    i += ticks;
                    continue;
                }
            }
        } else if rest.starts_with("](") {
            let close = (!no_paren_close).then(|| rest.find(')')).flatten();
            no_paren_close = close.is_none();
            if let Some(close) = close {
                // The link's label too (`[一口气学完！](url)`): a
                // terminator in it ends no sentence. Searched back only to
                // the line's start or the last span, so the scan stays
                // linear.
                let floor = spans
                    .last()
                    .map_or(0, |span: &std::ops::Range<usize>| span.end)
                    .max(text[..i].rfind('\n').map_or(0, |p| p + 1));
                let start = text[floor..i].rfind('[').map_or(i, |p| floor + p);
                spans.push(start..i + close + 1);
                i += close + 1;
                continue;
            }
            None
        } else if rest.starts_with("://") {
            // Back to the scheme's start (never into the span before),
            // forward to the next space.
            let floor = spans
                .last()
                .map_or(0, |span: &std::ops::Range<usize>| span.end);
            let start = text[floor..i]
                .rfind(|c: char| !c.is_ascii_alphanumeric())
                .map_or(floor, |p| floor + p + 1);
            let end = rest
                .find(|c: char| c.is_whitespace() || matches!(c, '<' | '>' | '"'))
                .map_or(text.len(), |e| i + e);
            // Punctuation closing a sentence is not part of the URL.
            let end = i + text[i..end]
                .trim_end_matches(['.', ',', ';', ':', '!', '?', ')'])
                .len();
            spans.push(start..end);
            i = end;
            continue;
        } else if rest.starts_with('<')
            && rest[1..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '/')
        {
            let close = (!no_angle_close).then(|| rest.find('>')).flatten();
            no_angle_close = close.is_none();
            close.map(|close| i + close + 1)
        } else {
            None
        };
        match end {
            Some(end) => {
                spans.push(i..end);
                i = end;
            }
            None => i += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    spans
}

#[cfg(test)]
#[test]
fn unclosed_marks_make_no_spans_and_closed_ones_after_them_still_do() {
    let text = "[[a ``` b ](c <d `f` https://x.org/y. z";
    let spans: Vec<&str> = markup_spans(text).into_iter().map(|r| &text[r]).collect();
    assert_eq!(spans, ["`f`", "https://x.org/y"]);
    // A hostile note: one mark after another, never closed.
    let hostile = "[[a ](b <c ".repeat(20_000);
    assert!(markup_spans(&hostile).is_empty());
}

/// Whether byte `at` falls inside one of `spans` (from [`markup_spans`]).
pub(crate) fn in_markup(spans: &[std::ops::Range<usize>], at: usize) -> bool {
    let after = spans.partition_point(|span| span.start <= at);
    after > 0 && spans[after - 1].contains(&at)
}

/// Whether the text after a full stop and a space starts a new sentence:
/// a capital letter, a digit-free quote or bracket, or CJK — not "e.g. the",
/// "vs. placebo" or "P = .04".
pub(crate) fn starts_sentence(after: &str) -> bool {
    after
        .trim_start()
        .chars()
        .next()
        .is_none_or(|c| c.is_uppercase() || is_cjk(c) || matches!(c, '"' | '“' | '(' | '['))
}

/// `text` cut into sentences (each with its terminator and the space
/// after it, together covering the whole text): at line breaks, after
/// `。！？`, and after `.!?` at the end or before a space and a sentence
/// start — never inside a link, URL, embed, code span or tag.
pub(crate) fn sentences(text: &str) -> Vec<&str> {
    let spans = markup_spans(text);
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, ch)) = chars.next() {
        let end = i + ch.len_utf8();
        let ends = match ch {
            '\n' => true,
            '。' | '！' | '？' => !in_markup(&spans, i),
            '.' | '!' | '?' => {
                !in_markup(&spans, i)
                    && (end == text.len()
                        || (text[end..].starts_with([' ', '\t', '\n'])
                            && starts_sentence(&text[end..])))
            }
            _ => false,
        };
        if ends {
            // The spaces after a terminator go with its sentence.
            let mut stop = end;
            while let Some(&(j, c)) = chars.peek() {
                if c == ' ' || c == '\t' {
                    stop = j + 1;
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(&text[start..stop]);
            start = stop;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// The first sentence of `text`, at most `max_chars` characters.
pub(crate) fn first_sentence(text: &str, max_chars: usize) -> String {
    let markup = markup_spans(text);
    let end = text
        .char_indices()
        .find(|&(i, c)| {
            matches!(c, '。' | '！' | '？')
                || (matches!(c, '.' | '!' | '?')
                    && !in_markup(&markup, i)
                    && text[i + 1..].starts_with(' ')
                    && i + 1 >= 40.min(text.len()))
        })
        .map_or(text.len(), |(i, c)| i + c.len_utf8());
    truncate_chars(&text[..end], max_chars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_end_outside_links_urls_embeds_and_code() {
        let text = "See [[Books. Vol 2]] and ![[a.png]] here. Run `x. Y` at https://docker.com/a. Next one! \
                    A [site](https://x.org/A. B) ok. 第一句。第二句\nline two e.g. this. End";
        assert_eq!(
            sentences(text),
            [
                "See [[Books. Vol 2]] and ![[a.png]] here. ",
                "Run `x. Y` at https://docker.com/a. ",
                "Next one! ",
                "A [site](https://x.org/A. B) ok. ",
                "第一句。",
                "第二句\n",
                "line two e.g. this. ",
                "End"
            ]
        );
        assert_eq!(sentences("").len(), 0);
        // A terminator in a link's label, full-width too, ends nothing.
        assert_eq!(
            sentences("* [一口气学完！nginx. Server](https://b.example/1) 好。下一句"),
            [
                "* [一口气学完！nginx. Server](https://b.example/1) 好。",
                "下一句"
            ]
        );
        let text = "a `c` [x `y`. z](u) [[w]] [v](t)";
        let spans: Vec<&str> = markup_spans(text).into_iter().map(|r| &text[r]).collect();
        // A label is searched back only to the span before it (linear).
        assert_eq!(spans, ["`c`", "`y`", "](u)", "[[w]]", "[v](t)"]);
        // Unclosed marks are plain text: the sentences still end.
        assert_eq!(
            sentences("Open [[ here. Tick ` there. Paren ]( and <b here. End"),
            [
                "Open [[ here. ",
                "Tick ` there. ",
                "Paren ]( and <b here. ",
                "End"
            ]
        );
        assert_eq!(sentences("no end"), ["no end"]);
    }

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
