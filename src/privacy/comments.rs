//! Comments a reader never sees: Obsidian's `%%…%%` and HTML's `<!-- … -->`,
//! hidden in reading view, are left out of everything ctxpack shows. Code
//! keeps them: `%%` in a code span or block is code, not a comment.

use std::borrow::Cow;

use crate::parse::markdown::is_tag_char;
use std::ops::Range;

use pulldown_cmark::{Event, Options, Parser, Tag};

/// `body` without its comments (outside code); an unclosed comment runs to
/// the end, as Obsidian shows it.
pub(crate) fn strip(body: &str, obsidian: bool, html: bool) -> Cow<'_, str> {
    let comments = find(body, obsidian, html);
    if comments.is_empty() {
        return Cow::Borrowed(body);
    }
    let mut out = String::with_capacity(body.len());
    let mut cursor = 0;
    // Whether the output's last line holds only blanks so far: kept as the
    // text is copied (looking back along the line for each comment was
    // quadratic in a long line of comments).
    let mut line_blank = true;
    for range in comments {
        let kept = &body[cursor..range.start];
        out.push_str(kept);
        line_blank = match kept.rfind('\n') {
            Some(newline) => kept[newline + 1..].trim().is_empty(),
            None => line_blank && kept.trim().is_empty(),
        };
        // A comment alone on its lines leaves no blank lines behind.
        cursor = if line_blank && body[range.end..].starts_with('\n') {
            range.end + 1
        } else {
            range.end
        };
        // A line that only starts a heading once the comment before it on
        // that line is gone (`%%note%%# Later`) was never a heading:
        // Obsidian shows it as text. Left bare it would read as one, and
        // end a private section early (fail open); escaped, it stays text.
        // (A tag there, `%%x%%#private`, is left as it is: read as a tag,
        // the note stays private.)
        if line_blank && cursor == range.end && starts_a_heading(&body[cursor..]) {
            out.push('\\');
        }
    }
    out.push_str(&body[cursor.min(body.len())..]);
    Cow::Owned(out)
}

/// `body` with each comment that follows a `#tag` and is followed by tag
/// characters replaced by a space (`#private%%until June%%-draft` reads
/// `#private -draft`, as Obsidian tags it), or `None` when no comment
/// does that. Only the tags are read from it: the text shown, and the
/// secrets looked for, join the words as a reader sees them.
pub(crate) fn with_tags_ended(body: &str, obsidian: bool, html: bool) -> Option<String> {
    let comments = find(body, obsidian, html);
    let ends_a_tag = |range: &Range<usize>| {
        ends_in_a_tag(&body[..range.start]) && body[range.end..].starts_with(is_tag_char)
    };
    if !comments.iter().any(ends_a_tag) {
        return None;
    }
    let mut out = String::with_capacity(body.len());
    let mut cursor = 0;
    for range in comments {
        out.push_str(&body[cursor..range.start]);
        out.push(' ');
        cursor = range.end;
    }
    out.push_str(&body[cursor.min(body.len())..]);
    Some(out)
}

/// How far back a comment looks for the tag it would end.
const MAX_TAG_CHARS: usize = 1024;

/// Whether `text` ends in a `#tag` (its last word a `#` and tag
/// characters).
fn ends_in_a_tag(text: &str) -> bool {
    let word_start = text
        .char_indices()
        .rev()
        .take_while(|&(_, c)| is_tag_char(c) || c == '#')
        // Bounded, so that a long word cut by many comments is not read
        // back whole at each.
        .take(MAX_TAG_CHARS)
        .last()
        .map_or(text.len(), |(at, _)| at);
    let word = &text[word_start..];
    word.rfind('#')
        .is_some_and(|hash| word[hash + 1..].chars().next().is_some_and(is_tag_char))
}

/// Whether `rest` opens with an ATX heading marker: blanks, one to six
/// `#`, then a blank or the line's end.
fn starts_a_heading(rest: &str) -> bool {
    let rest = rest.trim_start_matches([' ', '\t']);
    let hashes = rest.len() - rest.trim_start_matches('#').len();
    (1..=6).contains(&hashes)
        && rest[hashes..]
            .chars()
            .next()
            .is_none_or(|c| matches!(c, ' ' | '\t' | '\n' | '\r'))
}

/// The byte ranges of the comments in `body` (outside code), in order.
pub(crate) fn find(body: &str, obsidian: bool, html: bool) -> Vec<Range<usize>> {
    let mut comments = Vec::new();
    if !((obsidian && body.contains("%%")) || (html && body.contains("<!--"))) {
        return comments;
    }
    let code = code_ranges(body);
    let mut code_iter = code.iter().peekable();
    let mut at = 0;
    while at < body.len() {
        while code_iter.peek().is_some_and(|r| r.end <= at) {
            code_iter.next();
        }
        if let Some(range) = code_iter.peek()
            && range.start <= at
        {
            at = range.end;
            continue;
        }
        let rest = &body[at..];
        let (open, close) = if obsidian && rest.starts_with("%%") {
            ("%%", "%%")
        } else if html && rest.starts_with("<!--") {
            ("<!--", "-->")
        } else {
            at += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        let end = rest[open.len()..]
            .find(close)
            .map_or(body.len(), |found| at + open.len() + found + close.len());
        comments.push(at..end);
        at = end;
    }
    comments
}

/// Byte ranges of code spans and code blocks, in order.
fn code_ranges(body: &str) -> Vec<Range<usize>> {
    let mut ranges: Vec<Range<usize>> = Vec::new();
    for (event, range) in Parser::new_ext(body, Options::ENABLE_TABLES).into_offset_iter() {
        let is_code = matches!(event, Event::Start(Tag::CodeBlock(_)) | Event::Code(_));
        if is_code && ranges.last().is_none_or(|last| last.end <= range.start) {
            ranges.push(range);
        }
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_are_removed_outside_code() {
        assert_eq!(strip("a %%hidden%% b", true, true), "a  b");
        assert_eq!(strip("a <!-- hidden --> b", true, true), "a  b");
        assert_eq!(
            strip("one\n%%\nblock\ncomment\n%%\ntwo\n", true, true),
            "one\ntwo\n"
        );
        assert_eq!(
            strip("keep `printf(\"%%d\")` %%x%%", true, true),
            "keep `printf(\"%%d\")` "
        );
        assert_eq!(
            strip(
                "```\n%% code %%\n<!-- code -->\n```\n%%gone%%\n",
                true,
                true
            ),
            "```\n%% code %%\n<!-- code -->\n```\n"
        );
        assert_eq!(
            strip("open %% to the end\nstill hidden", true, true),
            "open "
        );
        assert_eq!(strip("共识 %%秘密%% 算法", true, true), "共识  算法");
        // What a comment leaves at the start of its line is not a heading.
        assert_eq!(strip("a\n%%x%%# Later\n", true, true), "a\n\\# Later\n");
        assert_eq!(
            strip("a\n<!--\nx\n--> # Later\n", true, true),
            "a\n\\ # Later\n"
        );
        assert_eq!(strip("# Kept %%x%%\n", true, true), "# Kept \n");
        // A heading or tag on the next line keeps what it is.
        assert_eq!(
            strip("a\n%% tags %%\n#private\n", true, true),
            "a\n#private\n"
        );
        assert_eq!(
            strip("a\n<!-- toc -->\n## Private\n", true, true),
            "a\n## Private\n"
        );
        assert_eq!(strip("<!-- c -->\n# India\n", true, true), "# India\n");
        // A tag after a comment on its line stays a tag.
        assert_eq!(strip("%%x%%#private\n", true, true), "#private\n");
        assert_eq!(
            strip("%%todo%% #mike words\n", true, true),
            " #mike words\n"
        );
    }

    #[test]
    fn each_kind_can_be_kept() {
        assert_eq!(strip("a %%x%% <!--y--> b", false, true), "a %%x%%  b");
        assert_eq!(strip("a %%x%% <!--y--> b", true, false), "a  <!--y--> b");
        assert!(matches!(strip("plain", true, true), Cow::Borrowed(_)));
    }
}
