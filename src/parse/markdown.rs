//! The body of a note: headings, top-level blocks, links and inline tags.
//!
//! pulldown-cmark finds the structure (and so which text is code); links and
//! tags, which are Obsidian syntax rather than CommonMark, are then scanned
//! in the text that is not code, HTML or a comment.

use std::ops::Range;

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use serde::Serialize;

/// What a note's body contains, with byte ranges into the body text.
#[derive(Clone, Debug, Default)]
pub struct BodyAnalysis {
    pub headings: Vec<Heading>,
    pub blocks: Vec<Block>,
    pub links: Vec<Link>,
    pub inline_tags: Vec<String>,
    /// Dataview inline fields (`key:: value`), in order.
    pub inline_fields: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Heading {
    pub level: u8,
    pub text: String,
    /// Byte range of the heading line(s).
    pub range: Range<usize>,
    /// Index of the enclosing heading (the nearest earlier one of lower level).
    pub parent: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockKind {
    Heading,
    Paragraph,
    List,
    Code,
    Quote,
    Table,
    Html,
    Rule,
    Other,
}

/// A top-level block: its range covers whole lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub kind: BlockKind,
    pub range: Range<usize>,
    /// For heading blocks, the index into `BodyAnalysis::headings`.
    pub heading: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkKind {
    /// `[[target]]`
    Wiki,
    /// `![[target]]`
    Embed,
    /// `[text](relative/path.md)`
    Markdown,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Link {
    pub kind: LinkKind,
    /// The note named, as written (no `.md` for wikilinks); empty for a link
    /// to a heading of the same note.
    pub target: String,
    pub heading: Option<String>,
    pub block: Option<String>,
    pub alias: Option<String>,
    /// Byte range of the whole link in the body.
    pub range: Range<usize>,
}

impl Link {
    /// The text a reader sees where the link stands.
    pub fn display_text(&self) -> String {
        if let Some(alias) = &self.alias {
            return alias.clone();
        }
        let mut text = self.target.clone();
        if let Some(heading) = &self.heading {
            if !text.is_empty() {
                text.push_str(" > ");
            }
            text.push_str(heading);
        }
        text
    }
}

pub fn analyze(body: &str) -> BodyAnalysis {
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
                    let parent = analysis
                        .headings
                        .iter()
                        .rposition(|h: &Heading| h.level < level);
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

fn scan_wikilinks(body: &str, excluded: &[Range<usize>]) -> Vec<Link> {
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

fn percent_decode(text: &str) -> String {
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

fn is_tag_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-' || c == '/'
}

fn scan_tags(body: &str, excluded: &[Range<usize>]) -> Vec<String> {
    let mut tags: Vec<String> = Vec::new();
    for (pos, _) in body.match_indices('#') {
        let preceded_ok = body[..pos]
            .chars()
            .next_back()
            .is_none_or(char::is_whitespace);
        if !preceded_ok || is_excluded(pos, excluded) {
            continue;
        }
        let rest = &body[pos + 1..];
        let len: usize = rest
            .chars()
            .take_while(|&c| is_tag_char(c))
            .map(char::len_utf8)
            .sum();
        let tag = rest[..len].trim_end_matches('/');
        if tag.is_empty() || tag.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if !tags.iter().any(|t| t.eq_ignore_ascii_case(tag)) {
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
}
