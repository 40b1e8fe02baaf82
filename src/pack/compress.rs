//! Step 3 of the seed: a page's compressed body.
//!
//! The body loses its frontmatter (already in the summary block), its
//! leading title heading, a lead paragraph that is the summary, its
//! `## Sources` section (kept as a one-line list of names), links already
//! shown earlier in the pack (kept as plain text), paragraphs that a more
//! relevant page already carries (replaced by a marker), thematic breaks
//! (`---` separates pages in a pack) and headings left with nothing under
//! them.

use std::collections::HashSet;

use serde::Serialize;

use crate::note::TitleSource;
use crate::note::{Note, SummarySource};
use crate::pack::bases;
use crate::pack::dedup::{DedupIndex, Fingerprint};
use crate::parse::markdown::{Block, BlockKind, Heading, Link, LinkKind};
use crate::parse::reader::reader_text;
use crate::text::{collapse_whitespace, fold};
use crate::vault::Vault;

/// How much of a page's body a pack carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BodyMode {
    Full,
    /// The lead paragraph plus the `## Key Ideas` section.
    Excerpt,
    SummaryOnly,
}

/// Section headings read as "Key Ideas" (folded).
const KEY_IDEAS_HEADINGS: &[&str] = &["key ideas", "核心观点", "关键要点", "要点"];
/// Section headings read as "Sources" (folded).
const SOURCES_HEADINGS: &[&str] = &["sources", "来源", "参考来源", "参考资料"];

/// What earlier pages of the pack already show.
#[derive(Clone, Debug, Default)]
pub(crate) struct PackState {
    pub shown_links: HashSet<String>,
    pub dedup: DedupIndex,
    /// The notes the pack may show as pages (its candidates and dailies);
    /// `None` when not known, and then every link is kept.
    pub members: Option<HashSet<usize>>,
    /// The most characters one expanded embed may add (0: the default,
    /// [`EMBED_MAX_CHARS`]).
    pub embed_limit: usize,
    /// A pack in recent order: its pages keep the editor's time stamps
    /// (`modified:`), which tell when each changed.
    pub dated: bool,
}

/// How deep embeds inside embedded text are expanded.
pub(crate) const EMBED_MAX_DEPTH: usize = 3;
/// How many embeds one page expands at most, at every depth together.
pub(crate) const EMBED_MAX_COUNT: usize = 16;
/// How many embeds of one page are reported (in JSON's `embeds`) and
/// marked when not expanded; past it an embed stays as written. A page of
/// half a million embeds that resolve to nothing grew to seven times its
/// size in markers and took 870 MB to pack (4 MB note).
pub(crate) const EMBED_MAX_REPORTS: usize = 64;
/// The default cap on the characters one expanded embed adds.
pub(crate) const EMBED_MAX_CHARS: usize = 6000;

/// What became of one `![[…]]` embed of a note in a pack.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EmbedReport {
    /// The embed as written, e.g. `![[Raft#Safety]]`.
    pub link: String,
    /// The note it names, when it resolves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `expanded`, or why not: `not_found`, `no_such_section`, `cycle`,
    /// `too_deep`, `too_large`, `too_many`; for a Bases view also
    /// `unreadable`, `no_such_view`, `unsupported_filter`, `too_many_notes`.
    pub status: &'static str,
    /// How deep it sat (1: in the page itself).
    pub depth: usize,
    /// For an expanded Bases view, how many notes it lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<usize>,
}

/// The embeds one page expands: bounded in depth, count and size, and
/// never through a note already being expanded.
struct Embeds {
    /// The notes being expanded, outermost (the page) first.
    stack: Vec<usize>,
    expanded: usize,
    limit: usize,
    reports: Vec<EmbedReport>,
}

impl Embeds {
    fn new(page: usize, limit: usize) -> Embeds {
        Embeds {
            stack: vec![page],
            expanded: 0,
            limit: if limit == 0 { EMBED_MAX_CHARS } else { limit },
            reports: Vec::new(),
        }
    }

    /// The text standing in place of `link` (an embed in `from`): the
    /// embedded note, section or block as a reader sees it, or the link
    /// itself with a marker saying why not. `None` for embeds of files
    /// that are not notes (images, PDFs): they stay links. A Bases view
    /// becomes the notes it lists.
    fn expand(&mut self, vault: &Vault, from: &Note, link: &Link) -> Option<String> {
        let written = &from.body[link.range.clone()];
        if self.reports.len() >= EMBED_MAX_REPORTS {
            return Some(written.to_string());
        }
        let extension = link
            .target
            .rsplit('/')
            .next()
            .and_then(|name| name.rsplit_once('.'))
            .map(|(_, ext)| ext.to_ascii_lowercase());
        if extension.as_deref() == Some(crate::vault::walk::BASE_EXTENSION) {
            return Some(self.expand_base(vault, from, link));
        }
        // A canvas is read as a note, and embedded as one (`![[board.canvas]]`).
        if extension.is_some_and(|ext| ext != "md" && ext != crate::parse::canvas::EXTENSION) {
            return None;
        }
        let depth = self.stack.len();
        let target = vault.resolve(&from.meta.path, link);
        // Reported in document order: the slot is taken before the
        // embeds inside this one report theirs.
        let slot = self.reports.len();
        self.reports.push(EmbedReport {
            link: written.to_string(),
            path: target.map(|t| vault.metas[t].path.clone()),
            status: "expanded",
            depth,
            notes: None,
        });
        let outcome = match target {
            None => Err("not_found"),
            Some(t) if self.stack.contains(&t) => Err("cycle"),
            Some(_) if depth > EMBED_MAX_DEPTH => Err("too_deep"),
            Some(_) if self.expanded >= EMBED_MAX_COUNT => Err("too_many"),
            Some(t) => {
                self.expanded += 1;
                self.stack.push(t);
                let text = self.embedded_text(vault, t, link);
                self.stack.pop();
                match text {
                    Some(text) if text.chars().count() > self.limit => Err("too_large"),
                    Some(text) => Ok(text),
                    None => Err("no_such_section"),
                }
            }
        };
        let shown = match outcome {
            Ok(text) => text,
            Err(status) => {
                self.reports[slot].status = status;
                marked(written, status)
            }
        };
        Some(shown)
    }

    /// An embedded Bases view: the notes it lists, or the link with a
    /// marker saying why not.
    fn expand_base(&mut self, vault: &Vault, from: &Note, link: &Link) -> String {
        let written = &from.body[link.range.clone()];
        let path = bases::resolve(vault, &from.meta.path, &link.target);
        let mut report = EmbedReport {
            link: written.to_string(),
            path: path.clone(),
            status: "expanded",
            depth: self.stack.len(),
            notes: None,
        };
        let outcome = match &path {
            None => Err("not_found"),
            Some(_) if self.expanded >= EMBED_MAX_COUNT => Err("too_many"),
            Some(path) => {
                self.expanded += 1;
                match bases::render(vault, path, link.heading.as_deref(), from) {
                    Ok(view) if view.text.chars().count() > self.limit => Err("too_large"),
                    Ok(view) => {
                        report.notes = Some(view.notes);
                        Ok(view.text)
                    }
                    Err(status) => Err(status),
                }
            }
        };
        let shown = match outcome {
            Ok(text) => text,
            Err(status) => {
                report.status = status;
                marked(written, status)
            }
        };
        self.reports.push(report);
        shown
    }

    /// The text of note `target` that `link` embeds: the whole body, the
    /// section under the heading, or the block with the id; embeds in it
    /// expanded in turn.
    fn embedded_text(&mut self, vault: &Vault, target: usize, link: &Link) -> Option<String> {
        let note = vault.note(target);
        let blocks: Vec<&Block> = if let Some(id) = &link.block {
            let found = note
                .blocks
                .iter()
                .find(|b| has_block_id(note.block_text(b), id))?;
            vec![found]
        } else if let Some(heading) = &link.heading {
            let wanted = fold(heading.rsplit('#').next().unwrap_or(heading));
            let start = note.blocks.iter().position(|b| {
                b.heading
                    .and_then(|h| note.headings.get(h))
                    .is_some_and(|h| fold(&h.text) == wanted)
            })?;
            note.blocks[start..section_end(&note, start)]
                .iter()
                .collect()
        } else {
            note.blocks.iter().collect()
        };
        let mut parts: Vec<String> = Vec::new();
        for block in blocks {
            if block.kind == BlockKind::Rule {
                continue;
            }
            let mut text = String::new();
            let mut cursor = block.range.start;
            for inner in links_in(&note, block).filter(|l| l.kind == LinkKind::Embed) {
                if let Some(shown) = self.expand(vault, &note, inner) {
                    text.push_str(&note.body[cursor..inner.range.start]);
                    text.push_str(&shown);
                    cursor = inner.range.end;
                }
            }
            text.push_str(&note.body[cursor..block.range.end]);
            if let Some(id) = &link.block
                && block.kind == BlockKind::List
                && let Some(line) = text.lines().find(|l| has_block_id(l, id))
            {
                // A block id in a list names one item: that line alone.
                let item = line.trim_start();
                let item = ["- ", "* ", "+ "]
                    .iter()
                    .find_map(|marker| item.strip_prefix(marker))
                    .unwrap_or(item);
                text = item.to_string();
            }
            let text = match block.kind {
                BlockKind::Code => text,
                _ => reader_text(&text),
            };
            if !text.trim().is_empty() {
                parts.push(text);
            }
        }
        Some(parts.join("\n\n"))
    }
}

/// The links of `note` inside `block`, in order. A note's links are sorted
/// by where they start, so they are found by binary search: a scan of every
/// link for every block was quadratic in a note of linked paragraphs.
fn links_in<'n>(note: &'n Note, block: &Block) -> impl Iterator<Item = &'n Link> {
    let first = note
        .links
        .partition_point(|l| l.range.start < block.range.start);
    let range = block.range.clone();
    note.links[first..]
        .iter()
        .take_while(move |l| l.range.start < range.end)
        .filter(move |l| l.range.end <= range.end)
}

/// Whether what stands before `range` on its line only opens the line
/// ([`is_line_lead`]), and whether only blanks follow it there. It looks a
/// short way back: a line's opening marks are few, and a scan to the start
/// of a long line for each of its embeds was quadratic.
fn place_on_line(text: &str, range: &std::ops::Range<usize>) -> (bool, bool) {
    const LEAD_BYTES: usize = 64;
    let mut from = range.start.saturating_sub(LEAD_BYTES);
    while !text.is_char_boundary(from) {
        from -= 1;
    }
    let window = &text[from..range.start];
    let lead = match window.rfind('\n') {
        Some(at) => is_line_lead(&window[at + 1..]),
        None => from == 0 && is_line_lead(window),
    };
    let alone_after = text[range.end..]
        .trim_start_matches([' ', '\t'])
        .chars()
        .next()
        .is_none_or(|c| c == '\n' || c == '\r');
    (lead, alone_after)
}

/// Whether the text before an embed on its line only opens the line (blanks,
/// a list marker, a quote's `>`): the embed then stands alone.
fn is_line_lead(before: &str) -> bool {
    before.split_whitespace().all(|mark| {
        let number = mark.trim_end_matches(['.', ')']);
        matches!(mark, "-" | "*" | "+" | ">")
            || (!number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// True when a line of `text` ends with the block id `^id`.
fn has_block_id(text: &str, id: &str) -> bool {
    let marker = format!("^{id}");
    text.lines().any(|line| {
        let line = line.trim_end();
        line.strip_suffix(marker.as_str())
            .is_some_and(|before| before.is_empty() || before.ends_with([' ', '\t']))
    })
}

/// An embed left unexpanded as the pack prints it: the link and why. Past
/// a page's 16th expansion the link alone: a marker on each of dozens of
/// embeds said the same thing again and again (JSON still reports each).
fn marked(written: &str, status: &str) -> String {
    if status == "too_many" {
        written.to_string()
    } else {
        format!("{written} {}", embed_marker(status))
    }
}

/// What follows an embed that stays a link.
pub(crate) fn embed_marker(status: &str) -> String {
    let why = match status {
        "not_found" => "not found",
        "no_such_section" => "no such heading or block",
        "cycle" => "it embeds itself",
        "too_deep" => "nested too deep",
        "too_large" => "too large",
        "unreadable" => "not a Bases file ctxpack can read",
        "no_such_view" => "no such view",
        "unsupported_filter" => "filters ctxpack cannot evaluate",
        "too_many_notes" => "too many notes to evaluate",
        _ => "too many embeds",
    };
    format!("_(embed not expanded: {why})_")
}

/// A compressed body, block by block, and what it would add to the pack
/// state.
#[derive(Clone, Debug)]
pub(crate) struct CompressedBody {
    pub blocks: Vec<OutBlock>,
    pub text: String,
    /// Pages named by `_(content also in …)_` markers, one per replaced block.
    pub duplicates_of: Vec<String>,
    /// What became of each `![[note]]` embed in the body, in order.
    pub embeds: Vec<EmbedReport>,
}

impl CompressedBody {
    /// A body made of `blocks`, joined with blank lines.
    pub(crate) fn from_blocks(blocks: Vec<OutBlock>, duplicates_of: Vec<String>) -> CompressedBody {
        let text = blocks
            .iter()
            .map(|b| b.text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
            .trim()
            .to_string();
        CompressedBody {
            blocks,
            text,
            duplicates_of,
            embeds: Vec::new(),
        }
    }
}

impl PackState {
    /// Records the links a body shows, not its blocks.
    pub(crate) fn commit_links(&mut self, body: &CompressedBody) {
        for block in &body.blocks {
            self.shown_links.extend(block.links.iter().cloned());
        }
    }

    pub(crate) fn commit(&mut self, body: &CompressedBody, page: &str) {
        for block in &body.blocks {
            self.shown_links.extend(block.links.iter().cloned());
            if let Some(fingerprint) = &block.fingerprint {
                self.dedup.insert(fingerprint, page);
            }
        }
    }
}

/// The key under which a link counts as already shown.
pub(crate) fn link_key(vault: &Vault, from: &Note, link: &Link) -> String {
    let heading = link.heading.as_deref().map(fold).unwrap_or_default();
    match vault.resolve(&from.meta.path, link) {
        Some(idx) => format!("{idx}#{heading}"),
        None => format!("?{}#{heading}", fold(&link.target)),
    }
}

/// What stands in place of a block another page of the pack shows.
pub(crate) fn duplicate_marker(other: &str) -> String {
    format!("_(content also in [[{other}]])_")
}

/// The key of a page itself, as its `## [[page]]` header shows it.
pub(crate) fn page_key(idx: usize) -> String {
    format!("{idx}#")
}

/// Compresses the body of note `idx`; `None` when nothing is left.
/// `summary_line` is the summary its page block shows: a lead paragraph
/// that says the same is left out.
pub(crate) fn compress(
    vault: &Vault,
    idx: usize,
    mode: BodyMode,
    state: &PackState,
    summary_line: &str,
) -> Option<CompressedBody> {
    let note = &*vault.note(idx);
    let selected = select_blocks(note, mode);
    let properties = match mode {
        BodyMode::SummaryOnly => None,
        _ => properties_block(vault, note, state.dated),
    };
    if selected.is_empty() && properties.is_none() {
        return None;
    }
    let mut out: Vec<OutBlock> = properties.into_iter().collect();
    let mut duplicates_of = Vec::new();
    let mut local_shown: HashSet<String> = HashSet::new();
    let mut skip_until: Option<usize> = None;
    let mut summary_skipped = false;
    let mut embeds = Embeds::new(idx, state.embed_limit);

    for &block_idx in &selected {
        if skip_until.is_some_and(|end| block_idx < end) {
            continue;
        }
        let block = &note.blocks[block_idx];
        let text = note.block_text(block);
        if let Some(heading) = block.heading.and_then(|h| note.headings.get(h)) {
            let folded = fold(&heading.text);
            if block_idx == 0 && heading.level == 1 && folded == fold(&note.meta.title) {
                continue;
            }
            if SOURCES_HEADINGS.contains(&folded.as_str()) {
                let end = section_end(note, block_idx);
                skip_until = Some(end);
                let names = source_names(note, &note.blocks[block_idx + 1..end]);
                if !names.is_empty() {
                    out.push(OutBlock {
                        level: Some(heading.level),
                        is_heading: false,
                        is_content: false,
                        text: format!("Sources: {}", names.join("; ")),
                        fingerprint: None,
                        links: Vec::new(),
                    });
                }
                continue;
            }
            out.push(OutBlock {
                level: Some(heading.level),
                is_heading: true,
                is_content: false,
                text: heading_line(text, heading),
                fingerprint: None,
                links: Vec::new(),
            });
            continue;
        }
        if block.kind == BlockKind::Rule || (block.kind == BlockKind::List && is_anchor_list(text))
        {
            continue;
        }
        if !summary_skipped
            && block.kind == BlockKind::Paragraph
            && note.meta.summary_source == SummarySource::FirstParagraph
            && collapse_whitespace(&crate::parse::reader::links_as_words(text)) == summary_line
        {
            summary_skipped = true;
            continue;
        }
        let mut fingerprint = None;
        if is_dedup_kind(block.kind)
            && let Some(print) = Fingerprint::of(text)
        {
            if let Some(other) = state.dedup.find(&print) {
                let marker = duplicate_marker(other);
                if out.last().is_none_or(|last| last.text != marker) {
                    let mut block = OutBlock::content(marker);
                    block.is_content = false;
                    out.push(block);
                }
                duplicates_of.push(other.to_string());
                continue;
            }
            fingerprint = Some(print);
        }
        let mut links = Vec::new();
        let rewritten = rewrite_links(
            vault,
            note,
            block,
            state,
            &mut local_shown,
            &mut links,
            &mut embeds,
        );
        // Code is kept exactly; everything else as a reader sees it.
        let rewritten = match block.kind {
            BlockKind::Code => rewritten,
            _ => reader_text(&rewritten),
        };
        if rewritten.trim().is_empty() {
            continue;
        }
        let mut block = OutBlock::content(rewritten);
        block.fingerprint = fingerprint;
        block.links = links;
        out.push(block);
    }

    let kept = drop_empty_headings(out);
    let mut body = CompressedBody::from_blocks(kept, duplicates_of);
    body.embeds = embeds.reports;
    (!body.text.is_empty()).then_some(body)
}

/// A heading as a reader sees it: inline HTML (`<span id=…>`) and links to
/// anchors on the same page are markup for a browser, so a heading holding
/// either is printed from its text. Other headings stay as written.
fn heading_line(text: &str, heading: &Heading) -> String {
    let atx = text.trim_start().starts_with('#');
    if atx && (text.contains('<') || text.contains("](#")) {
        format!(
            "{} {}",
            "#".repeat(usize::from(heading.level)),
            heading.text
        )
    } else {
        text.to_string()
    }
}

/// A table of contents: a list whose every item is only links to anchors
/// on the same page (`* [Install](#install)`). It tells a model nothing
/// the headings do not, so it is left out.
fn is_anchor_list(text: &str) -> bool {
    let mut items = 0;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let item = line.strip_prefix(['*', '-', '+']).or_else(|| {
            let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            (digits > 0)
                .then(|| line[digits..].strip_prefix(['.', ')']))
                .flatten()
        });
        let Some(item) = item else { return false };
        if !only_anchor_links(item.trim()) {
            return false;
        }
        items += 1;
    }
    items >= 2
}

/// Whether `text` is one or more `[label](#anchor)` links and nothing else
/// but spaces.
fn only_anchor_links(mut text: &str) -> bool {
    let mut links = 0;
    while !text.is_empty() {
        let Some(after) = text.strip_prefix('[') else {
            return false;
        };
        let Some(close) = after.find("](#") else {
            return false;
        };
        let Some(end) = after[close + 3..].find(')') else {
            return false;
        };
        text = after[close + 3 + end + 1..].trim_start();
        links += 1;
    }
    links > 0
}

/// A note's other properties, one `key: value` line each, leading its
/// body. Only notes without a `title:` field show them: obsidian-wiki
/// pages (which have one) keep the seed's exact pages, their fields being
/// the summary block's. Fields the privacy policy reads are never shown.
fn properties_block(vault: &Vault, note: &Note, dated: bool) -> Option<OutBlock> {
    let lines: Vec<String> = shown_property_lines(vault, note, dated).collect();
    (!lines.is_empty()).then(|| OutBlock::content(lines.join("\n")))
}

/// The `key: value` lines of the properties a page shows (none for a page
/// with a `title:` field; never a field the privacy policy reads, nor a
/// picture, nor the editor's time stamps unless `dated`): for the pack's
/// properties block and a search's snippet alike.
pub(crate) fn shown_property_lines<'a>(
    vault: &'a Vault,
    note: &'a Note,
    dated: bool,
) -> impl DoubleEndedIterator<Item = String> + 'a {
    use crate::parse::properties::{is_picture, is_time_stamp};
    let shown = note.meta.title_source != TitleSource::Frontmatter;
    note.properties
        .iter()
        .filter(move |(key, value)| {
            shown
                && !vault.policy().is_policy_field(key)
                && !is_picture(key, value)
                && (dated || !is_time_stamp(key))
        })
        .map(|(key, value)| format!("{key}: {value}"))
}

/// Indices of the blocks a mode starts from, in document order.
fn select_blocks(note: &Note, mode: BodyMode) -> Vec<usize> {
    match mode {
        BodyMode::SummaryOnly => Vec::new(),
        BodyMode::Full => (0..note.blocks.len()).collect(),
        BodyMode::Excerpt => {
            let mut selected = Vec::new();
            if let Some(lead) = note
                .blocks
                .iter()
                .position(|b| b.kind == BlockKind::Paragraph)
            {
                selected.push(lead);
            }
            if let Some(key) = note.blocks.iter().position(|b| {
                b.kind == BlockKind::Heading
                    && b.heading
                        .and_then(|h| note.headings.get(h))
                        .is_some_and(|h| KEY_IDEAS_HEADINGS.contains(&fold(&h.text).as_str()))
            }) {
                // `selected` holds at most the lead paragraph here.
                let lead = selected.first().copied();
                selected.extend((key..section_end(note, key)).filter(|&idx| Some(idx) != lead));
            }
            selected.sort_unstable();
            selected
        }
    }
}

/// The block index where the section opened by heading block `start` ends.
fn section_end(note: &Note, start: usize) -> usize {
    match note.blocks[start].heading {
        Some(heading) => {
            let end = note.heading_span(heading).end;
            start + note.blocks[start..].partition_point(|b| b.range.start < end)
        }
        None => note.blocks.len(),
    }
}

fn is_dedup_kind(kind: BlockKind) -> bool {
    matches!(
        kind,
        BlockKind::Paragraph
            | BlockKind::List
            | BlockKind::Quote
            | BlockKind::Table
            | BlockKind::Code
    )
}

/// The names listed in a Sources section: one per list item or line, links
/// reduced to their text.
fn source_names(note: &Note, blocks: &[Block]) -> Vec<String> {
    let mut names = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for block in blocks {
        if block.kind == BlockKind::Heading {
            continue;
        }
        for line in note.block_text(block).lines() {
            let line = line.trim();
            let line = ["- ", "* ", "+ "]
                .iter()
                .find_map(|marker| line.strip_prefix(marker))
                .unwrap_or(line);
            let line = strip_ordered_marker(line);
            let name = collapse_whitespace(&plain_inline(line));
            if !name.is_empty() && seen.insert(name.clone()) {
                names.push(name);
            }
        }
    }
    names
}

fn strip_ordered_marker(line: &str) -> &str {
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 {
        let rest = &line[digits..];
        if let Some(rest) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return rest;
        }
    }
    line
}

/// Replaces `[[target|alias]]` and `[text](url)` with their visible text.
pub(crate) fn plain_inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("![[").or_else(|| rest.strip_prefix("[["))
            && let Some(close) = after.find("]]")
        {
            let inner = &after[..close];
            let shown = match inner.split_once('|') {
                Some((_, alias)) => alias,
                None => inner.split('#').next().unwrap_or(inner),
            };
            out.push_str(shown.trim());
            rest = &after[close + 2..];
            continue;
        }
        if let Some(after) = rest.strip_prefix('[')
            && let Some(close) = after.find("](")
            && let Some(end) = after[close + 2..].find(')')
        {
            out.push_str(&after[..close]);
            rest = &after[close + 2 + end + 1..];
            continue;
        }
        let ch = rest.chars().next().unwrap_or(' ');
        out.push(ch);
        rest = &rest[ch.len_utf8()..];
    }
    out
}

/// The block's text with wikilinks already shown turned into plain text;
/// the keys of the links it shows first are added to `links`.
fn rewrite_links(
    vault: &Vault,
    note: &Note,
    block: &Block,
    state: &PackState,
    local_shown: &mut HashSet<String>,
    links: &mut Vec<String>,
    embeds: &mut Embeds,
) -> String {
    let mut out = String::new();
    let mut cursor = block.range.start;
    for link in links_in(note, block) {
        if link.kind == LinkKind::Markdown {
            // A Markdown link to one of the vault's notes reads as the pack's
            // other links do: `[[path|label]]` the first time, its label
            // after; a relative path means nothing outside the vault.
            if block.kind == BlockKind::Code {
                continue;
            }
            let Some(target) = vault.resolve(&note.meta.path, link) else {
                continue;
            };
            let written = &note.body[link.range.clone()];
            let label = written
                .strip_prefix('[')
                .and_then(|rest| rest.rfind("](").map(|close| rest[..close].trim()))
                .unwrap_or_default();
            let key = link_key(vault, note, link);
            out.push_str(&note.body[cursor..link.range.start]);
            cursor = link.range.end;
            if state.shown_links.contains(&key) || local_shown.contains(&key) {
                out.push_str(if label.is_empty() {
                    &vault.metas[target].title
                } else {
                    label
                });
            } else {
                local_shown.insert(key.clone());
                links.push(key);
                out.push_str(&wikilink_to(vault, target, link.heading.as_deref(), label));
            }
            continue;
        }
        if link.kind == LinkKind::Embed {
            // Code blocks show embeds as written.
            if block.kind != BlockKind::Code
                && let Some(shown) = embeds.expand(vault, note, link)
            {
                out.push_str(&note.body[cursor..link.range.start]);
                cursor = link.range.end;
                let (lead, alone_after) = place_on_line(&note.body, &link.range);
                // One line (a block, a sentence) reads well in its sentence.
                let blocks =
                    !shown.contains("_(embed not expanded:") && shown.trim().contains('\n');
                if blocks && (!lead || !alone_after) {
                    // An embed of paragraphs among words is shown as Obsidian
                    // shows it, as a block of its own: the paragraph breaks
                    // around it (spliced in, its heading and paragraphs ran
                    // into the sentence).
                    let kept = out.trim_end_matches([' ', '\t']).len();
                    out.truncate(kept);
                    if !lead {
                        out.push_str("\n\n");
                    }
                    out.push_str(shown.trim());
                    if !alone_after {
                        out.push_str("\n\n");
                        let rest = &note.body[cursor..];
                        cursor += rest.len() - rest.trim_start_matches([' ', '\t']).len();
                    }
                } else {
                    out.push_str(&shown);
                }
            }
            continue;
        }
        // An aliased link to a note the pack cannot show reads as its alias,
        // as Obsidian shows it. Notes with a `title:` field (obsidian-wiki
        // pages) keep the seed's links.
        if link.alias.is_some()
            && note.meta.title_source != TitleSource::Frontmatter
            && let Some(members) = &state.members
            && vault
                .resolve(&note.meta.path, link)
                .is_none_or(|target| !members.contains(&target))
        {
            out.push_str(&note.body[cursor..link.range.start]);
            out.push_str(&link.display_text());
            cursor = link.range.end;
            continue;
        }
        let key = link_key(vault, note, link);
        if state.shown_links.contains(&key) || local_shown.contains(&key) {
            out.push_str(&note.body[cursor..link.range.start]);
            out.push_str(&shown_as_text(vault, note, link));
            cursor = link.range.end;
        } else {
            local_shown.insert(key.clone());
            links.push(key);
        }
    }
    out.push_str(&note.body[cursor..block.range.end]);
    out
}

/// A block of compressed output.
#[derive(Clone, Debug)]
pub(crate) struct OutBlock {
    /// The section level this block opens or stands in for (headings and
    /// the Sources line); `None` for ordinary content.
    pub level: Option<u8>,
    pub is_heading: bool,
    /// Text of the note itself (not a heading, marker or Sources line).
    pub is_content: bool,
    pub text: String,
    /// The fingerprint this block adds to the pack's de-duplication index.
    pub fingerprint: Option<Fingerprint>,
    /// The keys of the links this block is the first to show.
    pub links: Vec<String>,
}

impl OutBlock {
    pub(crate) fn content(text: String) -> OutBlock {
        OutBlock {
            level: None,
            is_heading: false,
            is_content: true,
            text,
            fingerprint: None,
            links: Vec::new(),
        }
    }
}

/// `[[path#heading|label]]` for note `target`, as the pack writes a link:
/// the path without `.md`, the label left out when it says the same.
fn wikilink_to(vault: &Vault, target: usize, heading: Option<&str>, label: &str) -> String {
    let path = &vault.metas[target].path;
    let mut link = format!("[[{}", path.strip_suffix(".md").unwrap_or(path));
    if let Some(heading) = heading {
        link.push('#');
        link.push_str(heading);
    }
    let shown = link[2..].to_string();
    let named = |name: &str| fold(name) == fold(label);
    if !label.is_empty()
        && !named(&shown)
        && !named(&vault.metas[target].title)
        && !named(shown.rsplit('/').next().unwrap_or(&shown))
    {
        link.push('|');
        link.push_str(label);
    }
    link.push_str("]]");
    link
}

/// The plain text for a link already shown: its alias, else the title of
/// the page it names (and the heading), else the target as written.
fn shown_as_text(vault: &Vault, note: &Note, link: &Link) -> String {
    if link.alias.is_some() {
        return link.display_text();
    }
    match vault.resolve(&note.meta.path, link) {
        Some(idx) => match &link.heading {
            Some(heading) => format!("{} > {heading}", vault.metas[idx].title),
            None => vault.metas[idx].title.clone(),
        },
        None => link.display_text(),
    }
}

/// Keeps a heading only when some content follows it before the next
/// heading (or Sources line) of the same or a higher level.
fn drop_empty_headings(blocks: Vec<OutBlock>) -> Vec<OutBlock> {
    let mut kept = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        if block.is_heading
            && let Some(level) = block.level
        {
            let has_content = blocks[i + 1..]
                .iter()
                .take_while(|next| next.level.is_none_or(|l| l > level))
                .any(|next| !next.is_heading);
            if !has_content {
                continue;
            }
        }
        kept.push(block.clone());
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_embed_s_place_on_its_line_is_read_near_it() {
        let text = "Intro.\n- ![[a]]\n> ![[b]] and more\n";
        let at = |needle: &str| {
            let start = text.find(needle).unwrap();
            start..start + needle.len()
        };
        assert_eq!(place_on_line(text, &at("![[a]]")), (true, true));
        assert_eq!(place_on_line(text, &at("![[b]]")), (true, false));
        // A long line of embeds: each is read near it, not from the line's
        // start (quadratic in the embeds of a line).
        let line = "word ".to_string() + &"![[a]] ".repeat(100_000);
        let last = line.rfind("![[a]]").unwrap();
        assert_eq!(place_on_line(&line, &(last..last + 6)), (false, true));
    }

    #[test]
    fn each_block_finds_exactly_its_links() {
        let body: String = (0..3_000)
            .map(|i| format!("P{i} [[a{i}]] and ![[b{i}]] [x](c{i}.md)\n\n- [[d{i}]]\n\n"))
            .collect();
        let (note, _) = crate::parse::parse_note("n.md", &body, None);
        assert_eq!(note.blocks.len(), 6_000);
        for block in &note.blocks {
            let found: Vec<&Link> = links_in(&note, block).collect();
            let scanned: Vec<&Link> = note
                .links
                .iter()
                .filter(|l| l.range.start >= block.range.start && l.range.end <= block.range.end)
                .collect();
            assert_eq!(found, scanned);
        }
        let last = &note.blocks[5_998];
        let targets: Vec<&str> = links_in(&note, last).map(|l| l.target.as_str()).collect();
        assert_eq!(targets, ["a2999", "b2999", "c2999"]);
    }

    fn compressed(body: &str) -> String {
        let vault = Vault::from_texts("/v".into(), &[("n.md".to_string(), body.to_string())]);
        let state = PackState::default();
        compress(&vault, 0, BodyMode::Full, &state, "")
            .map(|b| b.text)
            .unwrap_or_default()
    }

    #[test]
    fn headings_with_html_or_anchor_links_print_their_text() {
        assert_eq!(
            compressed(
                "## <span id=\"arch\">Docker 架构</span>\n\nText.\n\n### [镜像](#dk_image)\n\nMore.\n\n## Plain [[link]] `code`\n\nEnd.\n"
            ),
            "## Docker 架构\n\nText.\n\n### 镜像\n\nMore.\n\n## Plain [[link]] `code`\n\nEnd."
        );
    }

    #[test]
    fn markdown_links_to_notes_read_as_the_packs_links() {
        let vault = Vault::from_texts(
            "/v".into(),
            &[
                (
                    "Hardware/Keyboard.md".to_string(),
                    "See [机械键盘](Mech_Note.md) and [the JDK](../Java/Java_Note.md#jdk), \
                     again [机械键盘](Mech_Note.md), [gone](Nowhere.md), [site](https://x.org) \
                     and `[code](Mech_Note.md)`.\n"
                        .to_string(),
                ),
                (
                    "Hardware/Mech_Note.md".to_string(),
                    "Switches.\n".to_string(),
                ),
                (
                    "Java/Java_Note.md".to_string(),
                    "# Java\n\n## JDK\n\nKit.\n".to_string(),
                ),
            ],
        );
        let idx = vault
            .metas
            .iter()
            .position(|m| m.path == "Hardware/Keyboard.md")
            .unwrap();
        let text = compress(&vault, idx, BodyMode::Full, &PackState::default(), "")
            .unwrap()
            .text;
        assert_eq!(
            text,
            "See [[Hardware/Mech_Note|机械键盘]] and [[Java/Java_Note#jdk|the JDK]], again 机械键盘, \
             [gone](Nowhere.md), [site](https://x.org) and `[code](Mech_Note.md)`."
        );
    }

    #[test]
    fn tables_of_contents_are_left_out_with_their_empty_heading() {
        let body = "## 目录\n\n* [Docker 介绍](#dk_introduction)\n  * [安装](#install) [配置](#config)\n\n## Use\n\n- [a link](https://x.org)\n- [anchor](#a)\n\nText.\n";
        assert_eq!(
            compressed(body),
            "## Use\n\n- [a link](https://x.org)\n- anchor\n\nText."
        );
        assert!(is_anchor_list("1. [one](#one)\n2) [two](#two)"));
        assert!(!is_anchor_list("- [one](#one)"));
        assert!(!is_anchor_list("- [one](#one) and words\n- [two](#two)"));
    }

    #[test]
    fn plain_inline_keeps_visible_text() {
        assert_eq!(
            plain_inline("[[a|Alpha]], [[b#h]], [site](https://x.org) and ![[c]]"),
            "Alpha, b, site and c"
        );
    }

    #[test]
    fn empty_headings_are_dropped_but_parents_of_content_stay() {
        let heading = |level, text: &str| OutBlock {
            level: Some(level),
            is_heading: true,
            is_content: false,
            text: text.to_string(),
            fingerprint: None,
            links: Vec::new(),
        };
        let blocks = vec![
            heading(2, "## Empty"),
            heading(2, "## Parent"),
            heading(3, "### Child"),
            OutBlock::content("text".to_string()),
            heading(2, "## Before sources"),
            OutBlock {
                level: Some(2),
                is_heading: false,
                is_content: false,
                text: "Sources: a".to_string(),
                fingerprint: None,
                links: Vec::new(),
            },
            heading(2, "## Trailing"),
        ];
        let kept: Vec<String> = drop_empty_headings(blocks)
            .into_iter()
            .map(|b| b.text)
            .collect();
        assert_eq!(kept, ["## Parent", "### Child", "text", "Sources: a"]);
    }
}
