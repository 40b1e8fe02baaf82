//! The body of a note: headings, top-level blocks, links and inline tags.
//!
//! pulldown-cmark finds the structure (and so which text is code); links and
//! tags, which are Obsidian syntax rather than CommonMark, are then scanned
//! in the text that is not code, HTML or a comment.

use std::ops::Range;

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// What a note's body contains, with byte ranges into the body text.
#[derive(Clone, Debug, Default)]
pub(crate) struct BodyAnalysis {
    pub headings: Vec<Heading>,
    pub blocks: Vec<Block>,
    pub links: Vec<Link>,
    pub inline_tags: Vec<String>,
    /// Dataview inline fields (`key:: value`), in order.
    pub inline_fields: Vec<(String, String)>,
}

// The parts of a body are the note model's types (so that `note.rs` imports
// nothing from the parser); they are named here too, where they are made.
pub(crate) use crate::note::{Block, BlockKind, Heading, Link, LinkKind};

pub(crate) fn analyze(body: &str) -> BodyAnalysis {
    let mut analysis = BodyAnalysis::default();
    let mut excluded: Vec<Range<usize>> = Vec::new();
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES;

    let mut depth = 0usize;
    let mut block_start: Option<(BlockKind, usize)> = None;
    let mut heading_text: Option<(u8, String)> = None;
    let mut markdown_link: Option<(String, usize)> = None;
    let mut open_headings = OpenHeadings::default();

    for (event, range) in Parser::new_ext(body, options).into_offset_iter() {
        match event {
            Event::Start(tag) => {
                if depth == 0 {
                    block_start = Some((block_kind(&tag), range.start));
                }
                depth += 1;
                match tag {
                    Tag::Heading { level, .. } => {
                        heading_text = Some((heading_level(level), String::new()));
                    }
                    Tag::CodeBlock(_) | Tag::HtmlBlock => excluded.push(range.clone()),
                    Tag::Link { dest_url, .. } => {
                        markdown_link = Some((dest_url.to_string(), range.start));
                    }
                    _ => {}
                }
            }
            Event::End(tag_end) => {
                depth = depth.saturating_sub(1);
                if let TagEnd::Link = tag_end
                    && let Some((dest, start)) = markdown_link.take()
                    && let Some(link) = markdown_note_link(&dest, start..range.end)
                {
                    analysis.links.push(link);
                }
                if let TagEnd::Heading(_) = tag_end
                    && let Some((level, text)) = heading_text.take()
                {
                    let range = whole_lines(body, range.clone());
                    let parent = open_headings.parent_of(level, analysis.headings.len());
                    analysis.headings.push(Heading {
                        level,
                        text: text.trim().to_string(),
                        range,
                        parent,
                    });
                }
                if depth == 0
                    && let Some((kind, start)) = block_start.take()
                {
                    let heading = (kind == BlockKind::Heading)
                        .then(|| analysis.headings.len().checked_sub(1))
                        .flatten();
                    analysis.blocks.push(Block {
                        kind,
                        range: whole_lines(body, start..range.end),
                        heading,
                    });
                }
            }
            Event::Text(text) => {
                if let Some((_, heading)) = heading_text.as_mut() {
                    heading.push_str(&text);
                }
            }
            Event::Code(code) => {
                excluded.push(range.clone());
                if let Some((_, heading)) = heading_text.as_mut() {
                    heading.push_str(&code);
                }
            }
            Event::Html(_) | Event::InlineHtml(_) => excluded.push(range.clone()),
            Event::Rule if depth == 0 => analysis.blocks.push(Block {
                kind: BlockKind::Rule,
                range: whole_lines(body, range.clone()),
                heading: None,
            }),
            _ => {}
        }
    }

    excluded.extend(obsidian_comments(body));
    let excluded = merge_ranges(excluded);
    analysis.inline_fields = super::reader::inline_fields(body, &excluded);
    let mut scanned = scan_wikilinks(body, &excluded);
    let mut with_links = excluded;
    with_links.extend(scanned.iter().map(|l| l.range.clone()));
    let excluded = merge_ranges(with_links);
    analysis.inline_tags = scan_tags(body, &excluded);
    analysis.links.append(&mut scanned);
    analysis.links.sort_by_key(|l| l.range.start);
    analysis
}

/// The headings that can still enclose a later one: each of a lower level
/// than every heading after it. A heading's parent is the nearest earlier
/// heading of a lower level; one of a level no lower than a later heading's
/// can never be that for anything after the later one, so it leaves the
/// stack, and finding every parent costs time linear in the headings.
#[derive(Default)]
struct OpenHeadings {
    /// (level, index into the headings), levels strictly increasing.
    stack: Vec<(u8, usize)>,
}

impl OpenHeadings {
    /// The parent of heading `idx` of `level`, which then opens.
    fn parent_of(&mut self, level: u8, idx: usize) -> Option<usize> {
        while self.stack.last().is_some_and(|&(open, _)| open >= level) {
            self.stack.pop();
        }
        let parent = self.stack.last().map(|&(_, parent)| parent);
        self.stack.push((level, idx));
        parent
    }
}

fn block_kind(tag: &Tag<'_>) -> BlockKind {
    match tag {
        Tag::Heading { .. } => BlockKind::Heading,
        Tag::Paragraph => BlockKind::Paragraph,
        Tag::List(_) => BlockKind::List,
        Tag::CodeBlock(_) => BlockKind::Code,
        Tag::BlockQuote(_) => BlockKind::Quote,
        Tag::Table(_) => BlockKind::Table,
        Tag::HtmlBlock => BlockKind::Html,
        _ => BlockKind::Other,
    }
}

fn heading_level(level: HeadingLevel) -> u8 {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// Widens a range to whole lines, without the final line break.
fn whole_lines(text: &str, range: Range<usize>) -> Range<usize> {
    let start = text[..range.start].rfind('\n').map_or(0, |i| i + 1);
    let end = range.end.max(start).min(text.len());
    let end = start + text[start..end].trim_end_matches(['\n', '\r']).len();
    start..end
}

/// `%% … %%` spans, which Obsidian hides from the reader.
fn obsidian_comments(body: &str) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    if !body.contains("%%") {
        return ranges;
    }
    let mut from = 0;
    while let Some(open) = body[from..].find("%%") {
        let start = from + open;
        match body[start + 2..].find("%%") {
            Some(close) => {
                let end = start + 2 + close + 2;
                ranges.push(start..end);
                from = end;
            }
            None => break,
        }
    }
    ranges
}

/// Sorts and merges ranges so that membership is one binary search.
fn merge_ranges(mut ranges: Vec<Range<usize>>) -> Vec<Range<usize>> {
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match merged.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => merged.push(range),
        }
    }
    merged
}

/// `excluded` must come from [`merge_ranges`].
fn is_excluded(pos: usize, excluded: &[Range<usize>]) -> bool {
    let idx = excluded.partition_point(|r| r.start <= pos);
    idx > 0 && excluded[idx - 1].contains(&pos)
}

/// `[[…]]` and `![[…]]` on one line, outside `excluded`. A `[[` whose
/// link would hold another `[[` gives way to the later one.
///
/// Every search below resumes where the last one stopped, or reuses its
/// answer, so the scan is linear in the body however many brackets share a
/// line: the end of the current line, the first `]]` after the candidate,
/// and the last `[[` before that `]]` are each looked up once.
fn scan_wikilinks(body: &str, excluded: &[Range<usize>]) -> Vec<Link> {
    let bytes = body.as_bytes();
    let mut links = Vec::new();
    let mut from = 0;
    // The end of the line holding the last candidate.
    let mut line_end: Option<usize> = None;
    // The first `]]` at or after `close_from` on that line, if any.
    let mut close: Option<(usize, Option<usize>)> = None;
    // For that `]]`: the last `[[` ending before it, at or after `open_from`.
    let mut last_open: Option<(usize, usize, Option<usize>)> = None;
    while let Some(found) = memchr::memchr(b'[', &bytes[from..]) {
        let open = from + found;
        from = open + 1;
        if bytes.get(open + 1) != Some(&b'[') || is_excluded(open, excluded) {
            continue;
        }
        let line_end = match line_end {
            Some(end) if open < end => end,
            _ => {
                let end = memchr::memchr(b'\n', &bytes[open..]).map_or(body.len(), |i| open + i);
                close = None;
                line_end = Some(end);
                end
            }
        };
        let search_from = open + 2;
        let close_at = match close {
            Some((start, None)) if start <= search_from => None,
            Some((start, Some(at))) if start <= search_from && at >= search_from => Some(at),
            _ => {
                let at = memchr::memmem::find(&bytes[search_from..line_end], b"]]")
                    .map(|i| search_from + i);
                close = Some((search_from, at));
                at
            }
        };
        let Some(close_at) = close_at else {
            from = line_end;
            continue;
        };
        let inner_open = match last_open {
            Some((at, start, last)) if at == close_at && start <= search_from => last,
            _ => {
                let last = memchr::memmem::rfind(&bytes[search_from..close_at], b"[[")
                    .map(|i| search_from + i);
                last_open = Some((close_at, search_from, last));
                last
            }
        };
        if inner_open.is_some_and(|at| at >= search_from) {
            from = open + 2;
            continue;
        }
        let inner = &body[search_from..close_at];
        let embed = open > 0 && bytes[open - 1] == b'!';
        let start = if embed { open - 1 } else { open };
        let end = close_at + 2;
        from = end;
        if let Some(link) = parse_wikilink(inner, embed, start..end) {
            links.push(link);
        }
    }
    links
}

fn parse_wikilink(inner: &str, embed: bool, range: Range<usize>) -> Option<Link> {
    let inner = inner.replace("\\|", "|");
    let (reference, alias) = match inner.split_once('|') {
        Some((reference, alias)) => (reference, Some(alias.trim().to_string())),
        None => (inner.as_str(), None),
    };
    let (target, fragment) = match reference.split_once('#') {
        Some((target, fragment)) => (target, Some(fragment.trim())),
        None => (reference, None),
    };
    let target = target.trim();
    let target = target.strip_suffix(".md").unwrap_or(target).to_string();
    let (heading, block) = match fragment {
        Some(f) if f.starts_with('^') => (None, Some(f[1..].to_string())),
        Some(f) if !f.is_empty() => (Some(f.to_string()), None),
        _ => (None, None),
    };
    if target.is_empty() && heading.is_none() && block.is_none() {
        return None;
    }
    Some(Link {
        kind: if embed {
            LinkKind::Embed
        } else {
            LinkKind::Wiki
        },
        target,
        heading,
        block,
        alias: alias.filter(|a| !a.is_empty()),
        range,
    })
}

/// A Markdown link counts as a note link when it points at a relative path.
fn markdown_note_link(dest: &str, range: Range<usize>) -> Option<Link> {
    if dest.is_empty() || dest.contains("://") || dest.starts_with("mailto:") {
        return None;
    }
    let (path, fragment) = match dest.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (dest, None),
    };
    let path = percent_decode(path);
    let lower = path.to_ascii_lowercase();
    let has_other_extension = path
        .rsplit('/')
        .next()
        .and_then(|name| name.rsplit_once('.'))
        .is_some_and(|(_, ext)| !ext.eq_ignore_ascii_case("md") && ext.len() <= 5);
    if path.is_empty() || has_other_extension {
        return None;
    }
    let target = if lower.ends_with(".md") {
        path[..path.len() - 3].to_string()
    } else {
        path
    };
    Some(Link {
        kind: LinkKind::Markdown,
        target,
        heading: fragment.filter(|f| !f.is_empty()).map(percent_decode),
        block: None,
        alias: None,
        range,
    })
}

pub(crate) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(value) = u8::from_str_radix(hex, 16)
        {
            out.push(value);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

/// The tag of the characters `run` after the `#` at `pos`: without a
/// trailing `/`, nor, when underscores opened it (`_#tag_`, `__#tag__`,
/// italic or bold), the underscores that close it.
fn tag_written<'b>(body: &str, pos: usize, run: &'b str) -> &'b str {
    let tag = run.trim_end_matches('/');
    if body[..pos].ends_with('_') {
        tag.trim_end_matches('_').trim_end_matches('/')
    } else {
        tag
    }
}

/// Whether `rest` (after a `#`) starts with a colour: 3, 4, 6 or 8 hex
/// digits and then no more tag characters.
fn is_colour(rest: &str) -> bool {
    let digits = rest.bytes().take_while(u8::is_ascii_hexdigit).count();
    matches!(digits, 3 | 4 | 6 | 8)
        && rest[digits..]
            .chars()
            .next()
            .is_none_or(|c| !is_tag_char(c))
}

/// Whether the `#` at `pos` of `body` can start a tag: at the start, after
/// a blank, or after the marks and brackets that wrap one without joining
/// it (`**#tag**`, `_#tag_`, `==#tag==`, `<mark>#tag</mark>`, `(#tag)`,
/// `[#tag]`, `"#tag"`, `,#tag`). Not after a word (`C#`), a `#` (a
/// heading's marks), `&` (`&#35;`), the `/`, `:`, `.` of a path or address,
/// nor in a link's target (`[Install](#install)`, an anchor). A heading's
/// id (`{#id}`) reads as a tag too: a `#private` there keeps its note out,
/// failing closed.
fn can_start_tag(body: &str, pos: usize) -> bool {
    let before = &body[..pos];
    match before.chars().next_back() {
        None => true,
        Some('(') => !before[..before.len() - 1].ends_with(']'),
        // `{{#each}}`: a template's block, not a tag.
        Some('{') if before.ends_with("{{") => false,
        // `"#ff0000"`, `'#fff'`: a colour in quotes, not a tag.
        Some('"' | '\'' | '{') if is_colour(&body[pos + 1..]) => false,
        Some(c) => {
            c.is_whitespace()
                || matches!(
                    c,
                    '*' | '_'
                        | '='
                        | '~'
                        | '>'
                        | ','
                        | ';'
                        | '|'
                        | '!'
                        | '?'
                        | '['
                        | '{'
                        | '"'
                        | '\''
                        | '“'
                        | '‘'
                        | '「'
                        | '『'
                        | '（'
                        | '【'
                        | '《'
                        | '〈'
                        | '«'
                        | '—'
                        | '–'
                )
        }
    }
}

pub(crate) fn is_tag_char(c: char) -> bool {
    // A combining mark is part of its letter: `#secre\u{301}t` (decomposed,
    // as macOS writes `é`) is the tag `#secrét`, not `#secre`.
    c.is_alphanumeric()
        || c == '_'
        || c == '-'
        || c == '/'
        || (!c.is_ascii() && unicode_normalization::char::is_combining_mark(c))
}

/// Inline `#tags` in first-seen order, each once whatever its case.
fn scan_tags(body: &str, excluded: &[Range<usize>]) -> Vec<String> {
    let mut tags: Vec<String> = Vec::new();
    // Folded as `eq_ignore_ascii_case` compares, so a tag is one lookup.
    let mut seen: rustc_hash::FxHashSet<String> = rustc_hash::FxHashSet::default();
    for (pos, _) in body.match_indices('#') {
        let preceded_ok = can_start_tag(body, pos);
        if !preceded_ok || is_excluded(pos, excluded) {
            continue;
        }
        let rest = &body[pos + 1..];
        let len: usize = rest
            .chars()
            .take_while(|&c| is_tag_char(c) || crate::text::is_invisible(c))
            .map(char::len_utf8)
            .sum();
        let written = tag_written(body, pos, &rest[..len]);
        let shown: String;
        let tag = if written.contains(crate::text::is_invisible) {
            shown = written.replace(crate::text::is_invisible, "");
            shown.as_str()
        } else {
            written
        };
        // A mark belongs to the letter before it: one right after `#`
        // (the keycap emoji `#️⃣`) starts no tag.
        let opens_with_a_mark = tag
            .chars()
            .next()
            .is_some_and(|c| !c.is_ascii() && unicode_normalization::char::is_combining_mark(c));
        if tag.is_empty() || opens_with_a_mark || tag.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if seen.insert(tag.to_ascii_lowercase()) {
            tags.push(tag.to_string());
        }
    }
    tags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_links_of_every_shape_outside_code() {
        let body = "See [[a]], [[b|Bee]], [[c#Part two]] and [[d#^blk1]].\n\n\
                    ![[pic.png]] and [md](notes/e.md) but not [web](https://x.org/f.md)\n\n\
                    ```\n[[not-a-link]] #nottag\n```\n\nInline `[[nope]]` here.\n";
        let analysis = analyze(body);
        let targets: Vec<_> = analysis
            .links
            .iter()
            .map(|l| {
                (
                    l.kind,
                    l.target.as_str(),
                    l.heading.as_deref(),
                    l.block.as_deref(),
                    l.alias.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            targets,
            vec![
                (LinkKind::Wiki, "a", None, None, None),
                (LinkKind::Wiki, "b", None, None, Some("Bee")),
                (LinkKind::Wiki, "c", Some("Part two"), None, None),
                (LinkKind::Wiki, "d", None, Some("blk1"), None),
                (LinkKind::Embed, "pic.png", None, None, None),
                (LinkKind::Markdown, "notes/e", None, None, None),
            ]
        );
        assert!(analysis.inline_tags.is_empty());
    }

    #[test]
    fn inline_tags_skip_headings_urls_numbers_and_code() {
        let body = "# Heading\n\nText #rust and #ai/llm, not#this, #123 or \
                    http://x.org/#frag.\n\n`#code` and %% #hidden %% and #分布式\n";
        assert_eq!(analyze(body).inline_tags, vec!["rust", "ai/llm", "分布式"]);
        // Wrapped in brackets, quotes or underscores, a tag is a tag; a
        // link's anchor is not.
        let body = "(#p1) _#p2_ __#p3__ [#p4] \"#p5\" {#p6} '#p7' 「#p8」 《#p9》 see [x](#anchor) \
                    and ](#no)\ncolor: \"#ff0000\", '#fff', {{#each items}} and \"#private\"\n";
        assert_eq!(
            analyze(body).inline_tags,
            vec![
                "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9", "private"
            ]
        );
    }

    #[test]
    fn tags_wrapped_in_marks_or_inline_html_are_tags() {
        let body = "Filed under <mark>#a</mark>, **#b**, ==#c==, ~~#d~~ and,#f.\n\
                    Not C#h, &#35;i, x.org/#j, a:#k, ##l or [Anchor](#m); {#n}, a heading's id, \
                    reads as a tag (failing closed).\n";
        assert_eq!(
            analyze(body).inline_tags,
            vec!["a", "b", "c", "d", "f", "n"]
        );
    }

    #[test]
    fn a_tag_is_read_as_shown_across_invisible_characters() {
        let body = "#pri\u{ad}vate and #pri\u{200b}vate, #team\u{2060}work\u{200b} done\n";
        assert_eq!(analyze(body).inline_tags, vec!["private", "teamwork"]);
    }

    #[test]
    fn headings_form_a_tree_and_blocks_cover_whole_lines() {
        let body = "# Title\n\nLead.\n\n## A\n\n### A1\n\ntext\n\n## B\n\n- x\n- y\n\n---\n";
        let analysis = analyze(body);
        let levels: Vec<_> = analysis
            .headings
            .iter()
            .map(|h| (h.level, h.text.as_str(), h.parent))
            .collect();
        assert_eq!(
            levels,
            vec![
                (1, "Title", None),
                (2, "A", Some(0)),
                (3, "A1", Some(1)),
                (2, "B", Some(0))
            ]
        );
        let blocks: Vec<_> = analysis
            .blocks
            .iter()
            .map(|b| (b.kind, &body[b.range.clone()]))
            .collect();
        assert_eq!(
            blocks,
            vec![
                (BlockKind::Heading, "# Title"),
                (BlockKind::Paragraph, "Lead."),
                (BlockKind::Heading, "## A"),
                (BlockKind::Heading, "### A1"),
                (BlockKind::Paragraph, "text"),
                (BlockKind::Heading, "## B"),
                (BlockKind::List, "- x\n- y"),
                (BlockKind::Rule, "---"),
            ]
        );
    }

    /// `scan_wikilinks` as it was before its searches were shared: each
    /// candidate searched its line anew. The reference for equality.
    fn reference_wikilinks(body: &str, excluded: &[Range<usize>]) -> Vec<Link> {
        let bytes = body.as_bytes();
        let mut links = Vec::new();
        let mut from = 0;
        while let Some(found) = body[from..].find('[') {
            let open = from + found;
            from = open + 1;
            if bytes.get(open + 1) != Some(&b'[') || is_excluded(open, excluded) {
                continue;
            }
            let line_end = body[open..].find('\n').map_or(body.len(), |i| open + i);
            let Some(close) = body[open + 2..line_end].find("]]") else {
                from = line_end;
                continue;
            };
            let inner = &body[open + 2..open + 2 + close];
            if inner.contains("[[") {
                from = open + 2;
                continue;
            }
            let embed = open > 0 && bytes[open - 1] == b'!';
            let start = if embed { open - 1 } else { open };
            let end = open + 2 + close + 2;
            from = end;
            if let Some(link) = parse_wikilink(inner, embed, start..end) {
                links.push(link);
            }
        }
        links
    }

    /// The tags and heading parents as first written (a scan of every
    /// earlier tag or heading): the reference for equality.
    fn reference_tags(body: &str, excluded: &[Range<usize>]) -> Vec<String> {
        let mut tags: Vec<String> = Vec::new();
        for (pos, _) in body.match_indices('#') {
            let preceded_ok = can_start_tag(body, pos);
            if !preceded_ok || is_excluded(pos, excluded) {
                continue;
            }
            let rest = &body[pos + 1..];
            let len: usize = rest
                .chars()
                .take_while(|&c| is_tag_char(c))
                .map(char::len_utf8)
                .sum();
            let tag = tag_written(body, pos, &rest[..len]);
            if tag.is_empty() || tag.chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            if !tags.iter().any(|t| t.eq_ignore_ascii_case(tag)) {
                tags.push(tag.to_string());
            }
        }
        tags
    }

    fn reference_parents(headings: &[Heading]) -> Vec<Option<usize>> {
        (0..headings.len())
            .map(|i| {
                headings[..i]
                    .iter()
                    .rposition(|h| h.level < headings[i].level)
            })
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn links_tags_and_headings_equal_the_reference_scans(
            body in "([\\[\\]!#|^ aA\n%`>-]|\\[\\[|\\]\\]|#{1,6} |x\\.md){0,120}",
        ) {
            let analysis = analyze(&body);
            // Rebuild the exclusions as `analyze` does, to call the scans.
            let mut excluded: Vec<Range<usize>> = Parser::new_ext(&body, Options::all())
                .into_offset_iter()
                .filter(|(event, _)| matches!(event, Event::Code(_)))
                .map(|(_, range)| range)
                .collect();
            excluded.extend(obsidian_comments(&body));
            let excluded = merge_ranges(excluded);
            proptest::prop_assert_eq!(
                scan_wikilinks(&body, &excluded),
                reference_wikilinks(&body, &excluded)
            );
            proptest::prop_assert_eq!(
                scan_tags(&body, &excluded),
                reference_tags(&body, &excluded)
            );
            let parents: Vec<_> = analysis.headings.iter().map(|h| h.parent).collect();
            proptest::prop_assert_eq!(parents, reference_parents(&analysis.headings));
        }
    }

    #[test]
    fn links_and_tags_all_on_one_line_are_each_found() {
        let line: String = (0..20_000)
            .map(|i| format!("[[n{i}|N {i}]] #t{i} #T{i} "))
            .collect();
        let analysis = analyze(&line);
        assert_eq!(analysis.links.len(), 20_000);
        assert_eq!(analysis.links[19_999].target, "n19999");
        assert_eq!(analysis.links[19_999].alias.as_deref(), Some("N 19999"));
        let first = line.find("[[n19999").unwrap();
        assert_eq!(
            analysis.links[19_999].range,
            first..first + "[[n19999|N 19999]]".len()
        );
        // `#T{i}` is `#t{i}` in another case: each tag once, as first seen.
        assert_eq!(analysis.inline_tags.len(), 20_000);
        assert_eq!(analysis.inline_tags[0], "t0");
        assert_eq!(analysis.inline_tags[19_999], "t19999");
    }

    #[test]
    fn a_line_of_open_brackets_links_the_innermost() {
        let body = format!(
            "{}target]] and [[b]]\n{}",
            "[[".repeat(50_000),
            "[[".repeat(50_000)
        );
        let links = analyze(&body).links;
        let targets: Vec<_> = links
            .iter()
            .map(|l| (l.target.as_str(), l.range.clone()))
            .collect();
        assert_eq!(
            targets,
            vec![("target", 99_998..100_008), ("b", 100_013..100_018)]
        );
    }

    #[test]
    fn many_headings_find_their_parents() {
        let body: String = (0..30_000)
            .map(|i| format!("{} h{i}\n", "#".repeat(6 - i % 6)))
            .collect();
        let headings = analyze(&body).headings;
        assert_eq!(headings.len(), 30_000);
        // Levels run 6, 5, 4, 3, 2, 1, 6, …: each level-1 heading is a root,
        // every other heading's parent is the latest level-1 before it.
        assert_eq!(headings[5].parent, None);
        assert_eq!(headings[6].parent, Some(5));
        assert_eq!(headings[10].parent, Some(5));
        assert_eq!(headings[11].parent, None);
        assert_eq!(headings[0].parent, None);
        assert_eq!(headings[29_999].parent, None);
        assert_eq!(headings[29_998].parent, Some(29_993));
        let flat: String = (0..30_000).map(|i| format!("# h{i}\n")).collect();
        assert!(analyze(&flat).headings.iter().all(|h| h.parent.is_none()));
    }
}
