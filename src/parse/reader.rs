//! A block as its reader sees it: what Obsidian's reading view shows of the
//! source, without what costs an agent tokens and shows nothing.
//!
//! Applied to the text of one top-level block that is not a code block
//! (code, fenced or inline, is kept exactly). pulldown-cmark finds images,
//! links, HTML and code; the rest (block ids, callout fold markers) is
//! Obsidian syntax found line by line outside code.

use std::ops::Range;

use pulldown_cmark::{Event, LinkType, Options, Parser, Tag, TagEnd};

/// A Markdown link whose URL is longer than this (in bytes) is shown by its
/// text: past this length a URL costs more tokens than it tells, unless
/// the link is all its line says (an entry of a list of resources).
pub(crate) const LONG_URL_BYTES: usize = 40;

/// The reader's view of `text` (one non-code top-level block). The result
/// may be empty: a block of badges or empty HTML shows nothing.
pub(crate) fn reader_text(text: &str) -> String {
    reader_view(text, false)
}

/// [`reader_text`], with every Markdown link to a web page shown by its
/// label when `labels` (a summary or a backlink's sentence: one line that
/// describes, where an address is noise).
fn reader_view(text: &str, labels: bool) -> String {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES;
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    let mut code: Vec<Range<usize>> = Vec::new();
    // Open images and links, innermost last.
    let mut frames: Vec<Frame> = Vec::new();
    for (event, range) in Parser::new_ext(text, options).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(_)) | Event::Code(_) => {
                code.push(range.clone());
                if let Event::Code(code_text) = event
                    && let Some(frame) = frames.last_mut()
                {
                    frame.text.push_str(&code_text);
                }
            }
            Event::Start(Tag::HtmlBlock) => {
                edits.push((range.clone(), html_text(&text[range], true)));
            }
            Event::Start(Tag::Image { dest_url, .. }) => frames.push(Frame {
                range,
                url: dest_url.to_string(),
                link_type: None,
                text: String::new(),
                images: 0,
                shown_images: 0,
            }),
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                ..
            }) => frames.push(Frame {
                range,
                url: dest_url.to_string(),
                link_type: Some(link_type),
                text: String::new(),
                images: 0,
                shown_images: 0,
            }),
            Event::End(TagEnd::Image) => {
                let Some(image) = frames.pop() else { continue };
                let alt = image.text.trim().to_string();
                let shown = if is_badge(&image.url) || names_its_file(&alt, &image.url) {
                    String::new()
                } else {
                    alt
                };
                if let Some(parent) = frames.last_mut() {
                    parent.images += 1;
                    parent.shown_images += usize::from(!shown.is_empty());
                    parent.text.push_str(&shown);
                }
                edits.push((image.range, shown));
            }
            Event::End(TagEnd::Link) => {
                let Some(link) = frames.pop() else { continue };
                let visible = link.text.trim().to_string();
                if let Some(parent) = frames.last_mut() {
                    parent.text.push_str(&visible);
                }
                // A link to a heading of the same note (`[集合](#集合)`)
                // reads as its words: the anchor leads nowhere in a pack.
                if link.url.starts_with('#') && !visible.is_empty() {
                    edits.push((link.range, visible));
                    continue;
                }
                // Read as labels, every link with one is its label
                // (`[https://x.org/](https://x.org/)` as its address once,
                // `[Google](google.com)` as `Google`); an autolink stays.
                if labels
                    && !visible.is_empty()
                    && !matches!(link.link_type, Some(LinkType::Autolink | LinkType::Email))
                {
                    edits.push((link.range, visible));
                    continue;
                }
                let external = link.url.contains("://");
                let bare = matches!(link.link_type, Some(LinkType::Autolink | LinkType::Email))
                    || visible == link.url;
                if !external || bare {
                    continue;
                }
                if visible.is_empty() && link.images > 0 && link.shown_images == 0 {
                    // A badge that links somewhere: nothing to read.
                    edits.push((link.range, String::new()));
                } else if !visible.is_empty()
                    && (labels
                        || link.url.len() > LONG_URL_BYTES && !is_the_whole_line(text, &link.range))
                {
                    edits.push((link.range, visible));
                }
            }
            Event::Text(part) => {
                // A character reference (`&#96;`, `&amp;`) shows its
                // character, as Obsidian renders it.
                // Not one that would become markup (`&lt;!--`, `&#91;&#91;`,
                // `&#37;&#37;`, `&#35;tag`): shown as written.
                let written = &text[range.clone()];
                if written.starts_with('&')
                    && written.ends_with(';')
                    && written != &*part
                    && !part.contains(['<', '>', '[', ']', '%', '#'])
                {
                    edits.push((range, part.to_string()));
                }
                if let Some(frame) = frames.last_mut() {
                    frame.text.push_str(&part);
                }
            }
            Event::InlineHtml(html) => {
                edits.push((range, html_text(&html, false)));
            }
            _ => {}
        }
    }
    edits.extend(line_edits(text, &code));
    apply(text, edits)
}

/// Whether the link at `range` is all its line says, after the markers of
/// a list item, a task or a quote: an entry of a list of resources, whose
/// address is what the entry is for and keeps it whatever its length.
fn is_the_whole_line(text: &str, range: &Range<usize>) -> bool {
    // Both scans stop at the first character that is not a space or a
    // marker: a line of many links costs each link only its neighbours.
    let after = text.as_bytes()[range.end..]
        .iter()
        .take_while(|&&b| b != b'\n')
        .all(|b| b.is_ascii_whitespace());
    if !after {
        return false;
    }
    let bytes = text.as_bytes();
    let mut line_start = range.start;
    while line_start > 0 {
        let b = bytes[line_start - 1];
        if b == b'\n' {
            break;
        }
        if !(b.is_ascii_whitespace() || b.is_ascii_digit() || b"->*+.)[]xX".contains(&b)) {
            return false;
        }
        line_start -= 1;
    }
    let before = &text[line_start..range.start];
    crate::text::line_marks_len(before) == before.len()
}

/// `text` (a summary: one line) with its links as a reader sees them: an
/// aliased wikilink as its alias, a Markdown link or an anchor as its
/// label, a link to a web page too (`[Eclipse](https://eclipse.org/)` as
/// `Eclipse`). A summary is shown alone, where `[[Composability|composable]]`
/// or `[JDK](../Java_Note.md#jdk)` is markup a reader never sees; a plain
/// `[[Raft]]` stays, as the pack writes every link to a note.
pub(crate) fn links_as_words(text: &str) -> String {
    links_read(text, true)
}

/// `text` with its Markdown links read as their labels (to a note or to
/// the web alike); wikilinks stay as written. For a backlink's sentence,
/// whose wikilinks the pack shows as links.
pub(crate) fn markdown_links_as_labels(text: &str) -> String {
    if !text.contains("](") {
        return text.to_string();
    }
    links_read(text, false)
}

fn links_read(text: &str, wiki_aliases: bool) -> String {
    if !text.contains("[[") && !text.contains("](") {
        return text.to_string();
    }
    let text = reader_view(text, true);
    let analysis = crate::parse::markdown::analyze(&text);
    let mut out = String::with_capacity(text.len());
    let mut cursor = 0;
    for link in &analysis.links {
        if link.range.start < cursor {
            continue;
        }
        let written = &text[link.range.clone()];
        let words = match (link.kind, &link.alias) {
            (crate::note::LinkKind::Markdown, _) => written
                .strip_prefix('[')
                .and_then(|rest| {
                    rest.rfind("](")
                        .map(|close| rest[..close].trim().to_string())
                })
                .unwrap_or_else(|| link.display_text()),
            (crate::note::LinkKind::Wiki, Some(alias)) if wiki_aliases => alias.clone(),
            _ => written.to_string(),
        };
        out.push_str(&text[cursor..link.range.start]);
        out.push_str(&words);
        cursor = link.range.end;
    }
    out.push_str(&text[cursor..]);
    out
}

/// Whether an image's alt text is only its file's name (what editors
/// such as Typora write when an image is pasted): the reader sees a
/// picture, not `image-20191102214024405`.
fn names_its_file(alt: &str, url: &str) -> bool {
    let path = url.split(['?', '#']).next().unwrap_or_default();
    let file = path.rsplit(['/', '\\']).next().unwrap_or_default();
    let stem = file.rsplit_once('.').map_or(file, |(stem, _)| stem);
    !alt.is_empty()
        && (alt.eq_ignore_ascii_case(file)
            || alt.eq_ignore_ascii_case(stem)
            || alt.eq_ignore_ascii_case(&file.replace("%20", " "))
            || alt.eq_ignore_ascii_case(&stem.replace("%20", " ")))
}

/// An image or link being read.
struct Frame {
    range: Range<usize>,
    url: String,
    /// `None` for an image.
    link_type: Option<LinkType>,
    /// The text shown inside (images already replaced by what they show).
    text: String,
    images: usize,
    shown_images: usize,
}

/// Status badges: pictures of a build state or version that say nothing
/// in a prompt.
fn is_badge(url: &str) -> bool {
    let url = url.to_ascii_lowercase();
    let path = url.split(['?', '#']).next().unwrap_or(&url);
    ["shields.io/", "badgen.net/", "badge.fury.io/"]
        .iter()
        .any(|host| path.contains(host))
        || path
            .rsplit('/')
            .take(2)
            .any(|segment| segment.starts_with("badge"))
}

/// Block ids (`text ^id` at a line's end, or `^id` alone on a line) and
/// callout fold markers (`> [!note]- Title`), outside code.
fn line_edits(text: &str, code: &[Range<usize>]) -> Vec<(Range<usize>, String)> {
    let mut sorted = code.to_vec();
    sorted.sort_by_key(|r| r.start);
    let mut code: Vec<Range<usize>> = Vec::with_capacity(sorted.len());
    for range in sorted {
        match code.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => code.push(range),
        }
    }
    // Of the merged spans that start at or before `pos`, only the last can
    // hold it: one binary search, not a scan of every span for every line.
    let in_code = |pos: usize| {
        let idx = code.partition_point(|r| r.start <= pos);
        idx > 0 && code[idx - 1].contains(&pos)
    };
    let mut edits = Vec::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let content = line.trim_end_matches(['\n', '\r']);
        let end = start + content.len();
        if let Some(caret) = content.rfind('^') {
            let id = &content[caret + 1..];
            let before = &content[..caret];
            let is_id = !id.is_empty()
                && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && (before.is_empty() || before.ends_with([' ', '\t']));
            if is_id && !in_code(start + caret) {
                let cut = start + before.trim_end_matches([' ', '\t']).len();
                edits.push((cut..end, String::new()));
            }
        }
        let quoted = content.trim_start_matches([' ', '\t', '>']);
        let markers = content.len() - quoted.len();
        if content[..markers].contains('>')
            && quoted.starts_with("[!")
            && let Some(close) = quoted.find(']')
            && quoted[close + 1..].starts_with(['+', '-'])
            && !in_code(start + markers)
        {
            let at = start + markers + close + 1;
            edits.push((at..at + 1, String::new()));
        }
        start += line.len();
    }
    edits
}

/// The text of an HTML fragment: tags out, `<img>` as its alt text (none
/// for a badge), a few entities decoded, script and style dropped. In a
/// block, line breaks follow block tags; inline, a tag leaves nothing (a
/// `<br>` a space).
fn html_text(html: &str, block: bool) -> String {
    let mut out = String::new();
    let mut rest = html;
    let mut skip_until: Option<&str> = None;
    while !rest.is_empty() {
        let Some(open) = rest.find('<') else {
            if skip_until.is_none() {
                out.push_str(rest);
            }
            break;
        };
        if skip_until.is_none() {
            out.push_str(&rest[..open]);
        }
        let tag_text = &rest[open..];
        let Some(close) = tag_text.find('>') else {
            if skip_until.is_none() {
                out.push_str(tag_text);
            }
            break;
        };
        let tag = &tag_text[1..close];
        rest = &tag_text[close + 1..];
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if let Some(end) = skip_until {
            if tag.starts_with('/') && name == end {
                skip_until = None;
            }
            continue;
        }
        match name.as_str() {
            "script" | "style" if !tag.starts_with('/') => {
                skip_until = Some(if name == "script" { "script" } else { "style" });
            }
            "img" => {
                let src = attribute(tag, "src").unwrap_or_default();
                if !is_badge(&src)
                    && let Some(alt) = attribute(tag, "alt")
                {
                    out.push_str(alt.trim());
                }
            }
            "br" => out.push(if block { '\n' } else { ' ' }),
            "p" | "div" | "li" | "tr" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "table"
            | "ul" | "ol" | "details" | "summary" | "blockquote"
                if block =>
            {
                out.push('\n');
            }
            _ => {}
        }
    }
    let out = decode_entities(&out);
    if !block {
        return out;
    }
    out.lines()
        .map(crate::text::collapse_whitespace)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The value of `name="…"` (or `'…'`) in a tag.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find(name) {
        let at = from + found;
        from = at + name.len();
        let preceded = lower[..at].ends_with([' ', '\t', '\n']);
        let rest = lower[from..].trim_start();
        if !preceded || !rest.starts_with('=') {
            continue;
        }
        let value_start = tag.len() - rest.len() + 1;
        let value = tag[value_start..].trim_start();
        let quote = value.chars().next()?;
        if quote == '"' || quote == '\'' {
            let body = &value[1..];
            return Some(body[..body.find(quote).unwrap_or(body.len())].to_string());
        }
        let end = value.find([' ', '\t', '\n', '/']).unwrap_or(value.len());
        return Some(value[..end].to_string());
    }
    None
}

fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    text.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// `text` with the edits made (an edit inside an earlier one is dropped).
/// Lines an edit left blank, or holding only list or quote markers, go;
/// so do runs of blank lines.
fn apply(text: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    if edits.is_empty() {
        return text.to_string();
    }
    edits.sort_by_key(|(range, _)| (range.start, std::cmp::Reverse(range.end)));
    let mut out = String::with_capacity(text.len());
    let mut touched: Vec<usize> = Vec::new();
    let mut cursor = 0;
    for (range, replacement) in edits {
        if range.start < cursor {
            continue;
        }
        out.push_str(&text[cursor..range.start]);
        touched.push(out.len());
        out.push_str(&replacement);
        cursor = range.end;
    }
    out.push_str(&text[cursor..]);

    let mut lines: Vec<String> = Vec::new();
    let mut start = 0;
    let mut touched = touched.into_iter().peekable();
    for line in out.split('\n') {
        let end = start + line.len();
        let mut edited = false;
        while touched.peek().is_some_and(|&at| at <= end) {
            touched.next();
            edited = true;
        }
        start = end + 1;
        if !edited {
            lines.push(line.to_string());
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let tidy = format!(
            "{}{}",
            &line[..indent],
            line[indent..]
                .split(' ')
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        );
        let bare = tidy
            .trim()
            .trim_start_matches(['>', ' '])
            .trim_start_matches(['-', '*', '+'])
            .trim();
        let only_markers =
            bare.is_empty() || bare.trim_end_matches(['.', ')']).parse::<u32>().is_ok();
        if !only_markers {
            lines.push(tidy.trim_end().to_string());
        }
    }
    let mut kept: Vec<String> = Vec::with_capacity(lines.len());
    for line in lines {
        let blank = line.trim().is_empty();
        if blank && kept.last().is_none_or(|l: &String| l.trim().is_empty()) {
            continue;
        }
        kept.push(line);
    }
    while kept.last().is_some_and(|l| l.trim().is_empty()) {
        kept.pop();
    }
    kept.join("\n")
}

/// Dataview inline fields (`key:: value` on a line of its own, or after a
/// list marker), outside code: readable text that also counts as a field.
/// `code` must be sorted and not overlap (as `merge_ranges` leaves it), so
/// each line's test is one binary search.
pub(crate) fn inline_fields(body: &str, code: &[Range<usize>]) -> Vec<(String, String)> {
    let mut fields = Vec::new();
    if !body.contains("::") {
        return fields;
    }
    let mut start = 0;
    for line in body.split_inclusive('\n') {
        let at = start;
        start += line.len();
        let idx = code.partition_point(|r| r.start <= at);
        if idx > 0 && code[idx - 1].contains(&at) {
            continue;
        }
        if !line.contains("::") {
            continue;
        }
        let content = line_field_text(line);
        if let Some((key, value)) = content.split_once("::")
            && let Some(key) = field_key(key)
            && !value.trim().is_empty()
        {
            fields.push((key, value.trim().to_string()));
        }
        let in_code = |offset: usize| {
            let pos = at + offset;
            let idx = code.partition_point(|r| r.start <= pos);
            idx > 0 && code[idx - 1].contains(&pos)
        };
        fields.extend(bracketed_fields(line, in_code));
    }
    fields
}

/// A line as Dataview reads a field on it: after the marks that open it,
/// quote marks (a callout), a heading's `#`s, a list's bullet or number, a
/// task's box (`> private:: true`, `## private:: true`, `1. private::
/// true` are page fields to Dataview, as `- private:: true` is).
fn line_field_text(line: &str) -> &str {
    let mut content = line.trim();
    loop {
        let before = content.len();
        content = content.trim_start_matches(['>', '#', '-', '*', '+', ' ', '\t']);
        let digits = content.len()
            - content
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .len();
        if digits > 0
            && let Some(rest) = content[digits..].strip_prefix(['.', ')'])
            && rest.starts_with([' ', '\t'])
        {
            content = rest;
        }
        for task in ["[ ]", "[x]", "[X]", "[-]", "[/]"] {
            if let Some(rest) = content.strip_prefix(task) {
                content = rest;
            }
        }
        if content.len() == before {
            return content;
        }
    }
}

/// A field's key as Dataview reads it (emphasis around it dropped:
/// `**private**:: true`), if it is one.
fn field_key(key: &str) -> Option<String> {
    let key = key.trim().trim_matches(['*', '_']).trim();
    // As shown: a soft hyphen or zero-width space inside the key is not
    // seen (`pri\u{ad}vate:: true` reads as `private:: true`).
    let shown: String = key
        .chars()
        .filter(|&c| !crate::text::is_invisible(c))
        .collect();
    let valid = shown
        .chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() || c == '_')
        && shown
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '));
    valid.then_some(shown)
}

/// Fields written inside a line, `[key:: value]` or `(key:: value)`, not
/// in code (`in_code` tells by the byte's offset in the line).
fn bracketed_fields(line: &str, in_code: impl Fn(usize) -> bool) -> Vec<(String, String)> {
    let mut fields = Vec::new();
    // The next `]` and `)` at or after the last opener looked at (`None`
    // once there is none): openers come in order, so each closer is found
    // once, and a line of unclosed `[a:: ` stays linear.
    let mut next_close: [Option<Option<usize>>; 2] = [None, None];
    for (at, open) in line.match_indices(['[', '(']) {
        if in_code(at) {
            continue;
        }
        let (slot, close) = if open == "[" { (0, ']') } else { (1, ')') };
        let cached = next_close[slot].filter(|found| found.is_none_or(|end| end > at));
        let end = match cached {
            Some(found) => found,
            None => {
                let found = line[at + 1..].find(close).map(|end| at + 1 + end);
                next_close[slot] = Some(found);
                found
            }
        };
        let Some(end) = end else {
            continue;
        };
        let inner = &line[at + 1..end];
        // A key is a few words; a value past the bound is no flag, and
        // copying every nested opener's long value was quadratic.
        let mut head = MAX_FIELD_KEY_BYTES.min(inner.len());
        while !inner.is_char_boundary(head) {
            head -= 1;
        }
        let Some(colons) = inner[..head].find("::") else {
            continue;
        };
        let (key, value) = (&inner[..colons], &inner[colons + 2..]);
        if value.len() <= MAX_BRACKETED_VALUE_BYTES
            && let Some(key) = field_key(key)
            && !value.trim().is_empty()
        {
            fields.push((key, value.trim().to_string()));
        }
    }
    fields
}

/// The longest key of a bracketed field read, in bytes.
const MAX_FIELD_KEY_BYTES: usize = 128;
/// The longest value of a bracketed field read, in bytes.
const MAX_BRACKETED_VALUE_BYTES: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_become_their_alt_text_and_badges_nothing() {
        assert_eq!(
            reader_text("A ![diagram of the log](img/log.png) here."),
            "A diagram of the log here."
        );
        assert_eq!(reader_text("A ![](img/log.png) here."), "A here.");
        assert_eq!(
            reader_text(
                "[![build](https://img.shields.io/badge/build-passing-green)](https://ci.example.org/x) \
                 ![version](https://badge.fury.io/js/x.svg)"
            ),
            ""
        );
    }

    #[test]
    fn a_summary_reads_every_link_as_its_label() {
        assert_eq!(
            links_as_words(
                "[Eclipse](https://www.eclipse.org/) 最初是由 [IBM](https://www.ibm.com/) 开发, \
                 see [[Java|the Java note]], [JDK](../Java_Note.md#jdk), <https://x.org> and [[Raft]]."
            ),
            "Eclipse 最初是由 IBM 开发, see the Java note, JDK, <https://x.org> and [[Raft]]."
        );
        assert_eq!(
            links_as_words(
                "官网：[https://www.debian.org/](https://www.debian.org/)，[Google](google.com)。"
            ),
            "官网：https://www.debian.org/，Google。"
        );
        // A body keeps a short address.
        assert_eq!(
            reader_text("[IBM](https://www.ibm.com/)"),
            "[IBM](https://www.ibm.com/)"
        );
    }

    #[test]
    fn long_urls_are_shown_by_their_text_short_and_bare_ones_kept() {
        assert_eq!(
            reader_text("See [the guide](https://example.org/a/very/long/path/to/the/guide.html)."),
            "See the guide."
        );
        assert_eq!(
            reader_text(
                "See [site](https://x.org) and <https://example.org/a/very/long/path/to/x>."
            ),
            "See [site](https://x.org) and <https://example.org/a/very/long/path/to/x>."
        );
        let empty = "[](https://example.org/a/very/long/path/to/the/guide.html)";
        assert_eq!(reader_text(empty), empty);
        // A list of resources keeps the addresses it is for: an entry
        // that is only a link, whatever its markers.
        let list = "* [docker run 命令](https://www.example.com/davis12/p/14467421.html)\n\
                    - [ ] [A task](https://example.org/a/very/long/path/to/the/task.html)\n\
                    > 1. [Quoted](https://example.org/a/very/long/path/to/the/quote.html)\n\
                    * [Guide](https://example.org/a/very/long/path/to/the/guide.html) and more";
        assert_eq!(
            reader_text(list),
            list.replace(
                "[Guide](https://example.org/a/very/long/path/to/the/guide.html)",
                "Guide"
            )
        );
        // A link to a note is the pack's to write (`compress`); an anchor
        // of the same note is its words.
        assert_eq!(reader_text("[notes](notes/a.md)"), "[notes](notes/a.md)");
        assert_eq!(
            reader_text("见 [集合](#集合) 与 [JUnit Platform](#JUnit%20Platform)。"),
            "见 集合 与 JUnit Platform。"
        );
    }

    #[test]
    fn html_becomes_its_text() {
        assert_eq!(
            reader_text(
                "<div align=\"center\">\n<a href=\"https://example.org/edit/very/long/url/x.md\">Edit</a> | \
                 <a href=\"https://example.org/raw/y\">Download</a>\n<img src=\"https://img.shields.io/x\" alt=\"badge\">\n</div>"
            ),
            "Edit | Download"
        );
        assert_eq!(
            reader_text("a <b>bold</b> word<br>next"),
            "a bold word next"
        );
    }

    #[test]
    fn block_ids_and_fold_markers_go_code_stays() {
        assert_eq!(reader_text("A claim. ^claim-1"), "A claim.");
        assert_eq!(
            reader_text("`'` 和&#96; 是跳转；PHP &amp; 我们 &nbsp;x `&amp;` &bogus;"),
            "`'` 和` 是跳转；PHP & 我们 \u{a0}x `&amp;` &bogus;"
        );
        assert_eq!(
            reader_text("a &lt;!-- b &#91;&#91;x&#93;&#93; &#37;&#37; &#35;private"),
            "a &lt;!-- b &#91;&#91;x&#93;&#93; &#37;&#37; &#35;private"
        );
        assert_eq!(reader_text("- one ^a1\n- two"), "- one\n- two");
        assert_eq!(reader_text("x^2 stays"), "x^2 stays");
        assert_eq!(reader_text("`code ^abc`"), "`code ^abc`");
        assert_eq!(
            reader_text("> [!note]- Folded title\n> body"),
            "> [!note] Folded title\n> body"
        );
        assert_eq!(
            reader_text("> [!tip]+ Open\n> body"),
            "> [!tip] Open\n> body"
        );
        assert_eq!(
            reader_text("> [!info] Plain\n> body"),
            "> [!info] Plain\n> body"
        );
        let list = "- item\n\n  ```\n  ![x](https://img.shields.io/a) ^notid\n  ```";
        assert_eq!(reader_text(list), list);
    }

    #[test]
    fn inline_fields_outside_code() {
        let body = "rating:: 4\n- author:: [[Ann]]\nnot a field: x\n```\nk:: v\n```\n";
        let code = vec![std::ops::Range {
            start: body.find("```").unwrap(),
            end: body.len(),
        }];
        assert_eq!(
            inline_fields(body, &code),
            [
                ("rating".to_string(), "4".to_string()),
                ("author".to_string(), "[[Ann]]".to_string())
            ]
        );
    }

    #[test]
    fn inline_fields_in_brackets_or_with_an_emphasised_key() {
        let body = "Status [state:: blocked] and (owner:: Bob), [[link]] (no field).\n\
                    **private**:: true\n\
                    Use `[private:: true]` to hide a note.\n";
        let pairs: Vec<(&str, &str)> =
            vec![("state", "blocked"), ("owner", "Bob"), ("private", "true")];
        let code_at = body.find('`').unwrap();
        let code = [std::ops::Range {
            start: code_at,
            end: code_at + "`[private:: true]`".len(),
        }];
        assert_eq!(
            inline_fields(body, &code),
            pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_field_after_quote_marks_a_heading_a_number_or_a_task_box_is_read() {
        for line in [
            "> private:: true",
            "> > private:: true",
            "## private:: true",
            "1. private:: true",
            "2) private:: true",
            "- [ ] private:: true",
            "-> private:: true",
        ] {
            assert_eq!(
                inline_fields(&format!("Text.\n\n{line}\n"), &[]),
                [("private".to_string(), "true".to_string())],
                "{line}"
            );
        }
    }

    #[test]
    fn a_line_of_unclosed_fields_is_read_in_one_pass() {
        // Each opener looked for its closer to the end of the line, and each
        // nested value was copied: a 1 MB line took minutes.
        let line = "[a:: ".repeat(200_000) + "(b:: x ".repeat(50_000).as_str() + "]\n";
        let fields = inline_fields(&line, &[]);
        assert!(fields.is_empty(), "{} fields", fields.len());
        assert_eq!(
            inline_fields("[a:: 1] [b:: 2] (c:: 3)\n", &[]),
            [("a", "1"), ("b", "2"), ("c", "3")].map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }
}
