//! Query-aware excerpts: when a body does not fit, the sentences and blocks
//! most relevant to the query are kept, in document order, with `[…]` where
//! text was left out.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use crate::pack::compress::{CompressedBody, OutBlock, duplicate_marker};
use crate::text::starts_sentence;

/// Scores a piece of text for the query (0 when it shares no term).
pub(crate) type Scorer = dyn Fn(&str) -> f64 + Send + Sync;

pub(crate) const OMITTED: &str = "[…]";

/// A sentence (or line, or whole block) of a compressed body.
struct Piece {
    block: usize,
    range: Range<usize>,
    score: f64,
    /// Wordless ([`is_wordless`]).
    filler: bool,
}

/// A compressed body cut into pieces, each scored for the query.
pub(crate) struct Pieces<'a> {
    body: &'a CompressedBody,
    pieces: Vec<Piece>,
    /// The pieces of each block (pieces are in block order).
    by_block: Vec<Range<usize>>,
    /// The pieces each piece is taken with (itself alone, or its unit).
    units: Vec<Range<usize>>,
    /// How many pieces with words come before each piece (and, last, in
    /// all): whether a gap holds words is one subtraction.
    words_before: Vec<usize>,
}

/// A block introduced by a lead-in line is one unit with it only up to
/// this many bytes: a longer list or code block is cut piece by piece, as
/// any other.
const UNIT_MAX_BYTES: usize = 1500;

impl<'a> Pieces<'a> {
    pub(crate) fn of(body: &'a CompressedBody, scorer: &Scorer) -> Pieces<'a> {
        let mut pieces: Vec<Piece> = Vec::new();
        let mut by_block: Vec<Range<usize>> = Vec::with_capacity(body.blocks.len());
        for (block, out) in body.blocks.iter().enumerate() {
            let first = pieces.len();
            if out.is_content {
                for range in split_pieces(&out.text) {
                    let text = &out.text[range.clone()];
                    let filler = is_wordless(text) || is_callout_type(text);
                    let score = if filler { 0.0 } else { scorer(text) };
                    pieces.push(Piece {
                        block,
                        range,
                        score,
                        filler,
                    });
                }
            }
            by_block.push(first..pieces.len());
        }
        let mut units: Vec<Range<usize>> = (0..pieces.len()).map(|i| i..i + 1).collect();
        // A lead-in ("To delete an image:") and the block it introduces
        // are one unit, scored as one text: the answer under a lead-in is
        // never dropped while the lead-in stays, and a short block that
        // answers the question in commands outranks a long one that only
        // repeats its words.
        for block in 1..body.blocks.len() {
            let (lead, next) = (&by_block[block - 1], &by_block[block]);
            if lead.is_empty() || next.is_empty() {
                continue;
            }
            let lead_in = lead.end - 1;
            let lead_text = &body.blocks[block - 1].text[pieces[lead_in].range.clone()];
            let introduced = &body.blocks[block].text;
            if !lead_text.trim_end().ends_with([':', '：'])
                || !is_introduced_block(introduced)
                || introduced.len() > UNIT_MAX_BYTES
            {
                continue;
            }
            let unit = lead_in..next.end;
            let text = format!("{lead_text}\n{introduced}");
            let score = damped(scorer(&text), &text);
            for piece in unit.clone() {
                pieces[piece].score = score;
                units[piece] = unit.clone();
            }
        }
        // A block kept whole (a table, a code block) is damped by its
        // length as a unit is, and a line that is mostly a link scores
        // below one that says something: neither a long table nor a list
        // of link titles outranks a short block that answers.
        for (i, piece) in pieces.iter_mut().enumerate() {
            if units[i].len() > 1 {
                continue;
            }
            let text = &body.blocks[piece.block].text[piece.range.clone()];
            if is_introduced_block(text) {
                piece.score = damped(piece.score, text);
            }
            let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
            let links = text
                .lines()
                .filter(|l| crate::parse::link_lists::is_link_line(l))
                .count();
            if 2 * links > lines {
                piece.score *= LINK_LINE_FACTOR;
            }
        }
        let mut words_before = Vec::with_capacity(pieces.len() + 1);
        let mut words = 0;
        for piece in &pieces {
            words_before.push(words);
            words += usize::from(!piece.filler);
        }
        words_before.push(words);
        Pieces {
            body,
            pieces,
            by_block,
            units,
            words_before,
        }
    }

    /// How many pieces of `range` have words.
    fn words_in(&self, range: Range<usize>) -> usize {
        self.words_before[range.end] - self.words_before[range.start.min(range.end)]
    }

    /// The pieces taken together with `piece` (in order, `piece` among
    /// them): a lead-in line and the block it introduces, else itself.
    pub(crate) fn unit(&self, piece: usize) -> Range<usize> {
        self.units[piece].clone()
    }

    pub(crate) fn len(&self) -> usize {
        self.pieces.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    pub(crate) fn score(&self, piece: usize) -> f64 {
        self.pieces[piece].score
    }

    /// Whether a piece has no word: never chosen, shown between chosen
    /// pieces, never standing for a gap.
    pub(crate) fn is_filler(&self, piece: usize) -> bool {
        self.pieces[piece].filler
    }

    pub(crate) fn text(&self, piece: usize) -> &'a str {
        let piece = &self.pieces[piece];
        &self.body.blocks[piece.block].text[piece.range.clone()]
    }

    /// The block a piece belongs to.
    pub(crate) fn block(&self, piece: usize) -> usize {
        self.pieces[piece].block
    }

    /// Whether `piece` is the first of the page or of a section: no
    /// content between it and the heading before it.
    pub(crate) fn opens_section(&self, piece: usize) -> bool {
        if piece == 0 {
            return true;
        }
        let (block, before) = (self.pieces[piece].block, self.pieces[piece - 1].block);
        block != before
            && self.body.blocks[before + 1..block]
                .iter()
                .any(|b| b.is_heading)
    }

    /// The chosen pieces in document order, with the headings of the
    /// sections they are in, `[…]` wherever content was left out, and a
    /// marker in place of each block that `duplicates` (by block) says
    /// another page shows.
    pub(crate) fn render(
        &self,
        chosen: &BTreeSet<usize>,
        duplicates: &BTreeMap<usize, String>,
    ) -> CompressedBody {
        render(self, chosen, duplicates, false)
    }

    /// Like [`Pieces::render`] for a page with every piece chosen or
    /// shown elsewhere: its Sources lines stay too.
    pub(crate) fn render_whole(
        &self,
        chosen: &BTreeSet<usize>,
        duplicates: &BTreeMap<usize, String>,
    ) -> CompressedBody {
        render(self, chosen, duplicates, true)
    }
}

/// A table, list or code block (alone or with its lead-in) longer than
/// this many tokens (chars4) is scored below its matches: the more it
/// says, the less likely the one line needed is what matched.
const LONG_UNIT_TOKENS: usize = 100;

/// What a line that is mostly a link scores, as a share of its matches:
/// its words are a title for a page elsewhere.
const LINK_LINE_FACTOR: f64 = 0.5;

/// `score` damped by the length of `text` past [`LONG_UNIT_TOKENS`]: by
/// the square root of the ratio, so a unit four times as long as the
/// limit keeps half its score.
fn damped(score: f64, text: &str) -> f64 {
    let tokens = crate::tokens::Tokenizer::Chars4.count(text);
    if tokens <= LONG_UNIT_TOKENS {
        return score;
    }
    score * (LONG_UNIT_TOKENS as f64 / tokens as f64).sqrt()
}

/// Whether a block is one a lead-in line introduces: code, a list or a
/// table.
fn is_introduced_block(text: &str) -> bool {
    let first = text.lines().next().unwrap_or_default();
    let trimmed = first.trim_start();
    trimmed.starts_with("```")
        || trimmed.starts_with("~~~")
        || trimmed.starts_with('|')
        || first.starts_with("    ")
        || trimmed.starts_with(['-', '*', '+']) && trimmed[1..].starts_with(' ')
        || {
            let digits = trimmed.len()
                - trimmed
                    .trim_start_matches(|c: char| c.is_ascii_digit())
                    .len();
            digits > 0 && trimmed[digits..].starts_with(['.', ')'])
        }
}

/// Splits a block into pieces: lines, then sentences within long lines.
/// Code blocks (or blocks holding one, such as a quote) and tables stay whole.
fn split_pieces(text: &str) -> Vec<Range<usize>> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('|') || text.contains("```") || text.contains("~~~") {
        return std::iter::once(0..text.len()).collect();
    }
    let mut pieces = Vec::new();
    let markup = crate::text::markup_spans(text);
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let line_end = line_start + line.len();
        let mut start = line_start;
        let bytes = text.as_bytes();
        for (offset, ch) in text[line_start..line_end].char_indices() {
            let end = line_start + offset + ch.len_utf8();
            let ends_sentence = match ch {
                '。' | '！' | '？' => !crate::text::in_markup(&markup, line_start + offset),
                '.' | '!' | '?' if !crate::text::in_markup(&markup, end - 1) => {
                    (end >= line_end
                        || (bytes.get(end).is_some_and(|b| *b == b' ')
                            && starts_sentence(&text[end..line_end])))
                        && !is_item_number(&text[start..end])
                        && !ends_with_an_initial(&text[start..end])
                }
                _ => false,
            };
            if ends_sentence && !text[start..end].trim().is_empty() {
                pieces.push(start..end);
                start = end;
            }
        }
        if !text[start..line_end].trim().is_empty() {
            pieces.push(start..line_end);
        }
        line_start = line_end;
    }
    let trimmed = pieces
        .into_iter()
        .map(|r| {
            let piece = &text[r.clone()];
            let lead = piece.len() - piece.trim_start().len();
            let tail = piece.len() - piece.trim_end().len();
            r.start + lead..r.end - tail
        })
        .filter(|r| !r.is_empty());
    // Punctuation left alone after a sentence on its line (the `」`
    // closing a quotation) goes with that sentence: alone, it was cheap
    // filler that printed as a stray `」`.
    let mut merged: Vec<Range<usize>> = Vec::new();
    for range in trimmed {
        match merged.last_mut() {
            Some(last)
                if !text[last.end..range.start].contains('\n')
                    && is_wordless(&text[range.clone()]) =>
            {
                last.end = range.end;
            }
            _ => merged.push(range),
        }
    }
    merged
}

/// A callout's first line when it names only its type (`> [!tip]`,
/// `> [!info]-`): alone, an empty shell.
fn is_callout_type(text: &str) -> bool {
    let rest = text.trim_start_matches(['>', ' ', '\t']);
    text.starts_with('>')
        && rest
            .strip_prefix("[!")
            .and_then(|r| r.split_once(']'))
            .is_some_and(|(kind, after)| {
                !kind.contains(char::is_whitespace)
                    && after.trim_start_matches(['+', '-']).trim().is_empty()
            })
}

/// A piece with no letter or digit: a quote's empty `>` line, a row of
/// dashes. Never offered alone; printed only between pieces that are.
fn is_wordless(text: &str) -> bool {
    !text.chars().any(char::is_alphanumeric)
}

/// Whether `text` ends with a capital letter standing alone and its dot,
/// an initial (`E. M. Forster`, `K. N. King`): not a sentence's end.
fn ends_with_an_initial(text: &str) -> bool {
    let mut chars = text.strip_suffix('.').unwrap_or(text).chars().rev();
    chars.next().is_some_and(char::is_uppercase)
        && chars
            .next()
            .is_none_or(|c| c.is_whitespace() || c == '(' || c == '.')
}

/// Whether `text` is a list item's number and its dot (`2.`, `  10.`):
/// not a sentence of its own.
fn is_item_number(text: &str) -> bool {
    let Some(digits) = text.trim_start().strip_suffix('.') else {
        return false;
    };
    let digits = digits.trim_start_matches(['>', ' ']);
    !digits.is_empty() && digits.len() <= 9 && digits.bytes().all(|b| b.is_ascii_digit())
}

/// The chosen pieces in document order, with the headings of the sections
/// they are in and `[…]` wherever content was left out.
fn render(
    all: &Pieces,
    chosen: &BTreeSet<usize>,
    duplicates: &BTreeMap<usize, String>,
    whole: bool,
) -> CompressedBody {
    let (body, pieces) = (all.body, &all.pieces);
    let mut blocks: Vec<OutBlock> = Vec::new();
    let mut duplicates_of: Vec<String> = Vec::new();
    // Content left out since the last block shown: before the heading
    // waiting to be shown, and under it. Each gap's `[…]` goes on its side
    // of the heading.
    let mut skipped_content = false;
    let mut skipped_under_heading = false;
    let mut pending_heading: Option<&OutBlock> = None;
    // The chosen pieces are taken in order as the blocks go by (pieces are
    // in block order): a search of the set for every block made each render
    // of a page of many blocks cost a tree search a block.
    let mut chosen_in_order = chosen.iter().copied().peekable();
    let mut kept: Vec<usize> = Vec::new();
    for (index, out) in body.blocks.iter().enumerate() {
        if out.is_heading {
            // A heading none of whose section is shown goes unshown too.
            skipped_content |= skipped_under_heading;
            skipped_under_heading = false;
            pending_heading = Some(out);
            continue;
        }
        if !out.is_content {
            // A Sources line stays when everything before it does.
            if whole && !skipped_content && !skipped_under_heading && !out.text.ends_with(OMITTED) {
                blocks.push(out.clone());
            }
            continue;
        }
        let in_block = all.by_block[index].clone();
        kept.clear();
        while let Some(piece) = chosen_in_order.next_if(|&piece| piece < in_block.end) {
            if piece >= in_block.start {
                kept.push(piece);
            }
        }
        if kept.is_empty() {
            match duplicates.get(&index) {
                Some(other) => {
                    open_block(
                        &mut blocks,
                        pending_heading.take(),
                        std::mem::take(&mut skipped_content),
                        std::mem::take(&mut skipped_under_heading),
                        false,
                    );
                    let marker = duplicate_marker(other);
                    if blocks.last().is_none_or(|last| last.text != marker) {
                        let mut block = OutBlock::content(marker);
                        block.is_content = false;
                        blocks.push(block);
                    }
                    duplicates_of.push(other.clone());
                }
                None if pending_heading.is_some() => skipped_under_heading = true,
                None => skipped_content = true,
            }
            continue;
        }
        let words_in = |range: Range<usize>| all.words_in(range) > 0;
        let (first_kept, last_kept) = (kept[0], kept[kept.len() - 1]);
        open_block(
            &mut blocks,
            pending_heading.take(),
            std::mem::take(&mut skipped_content),
            std::mem::take(&mut skipped_under_heading),
            words_in(in_block.start..first_kept),
        );
        if kept.iter().filter(|&&p| !pieces[p].filler).count() == all.words_in(in_block.clone()) {
            blocks.push(out.clone());
            continue;
        }
        let mut text = String::new();
        // Where the line of the piece at hand starts, found going forward
        // from the last piece's (a search back from each piece to its
        // line's start was quadratic in a one-line note).
        let mut lines = LineStarts::default();
        let mut previous: Option<usize> = None;
        for &i in &kept {
            let piece = &pieces[i];
            match previous {
                None if words_in(in_block.start..i) => {
                    // On a line of its own when what it stands for ends a
                    // line: `[…] > quoted` is no longer a quote. Within a
                    // line, after the line's quote or list marks.
                    match line_marks_before(
                        &out.text,
                        lines.of(&out.text, piece.range.start),
                        piece.range.start,
                    ) {
                        Some(marks) => text.push_str(&format!("{marks}{OMITTED} ")),
                        None => {
                            let gap =
                                &out.text[pieces[in_block.start].range.start..piece.range.start];
                            let next = if gap.contains('\n') { "\n" } else { " " };
                            text.push_str(&format!("{OMITTED}{next}"));
                        }
                    }
                }
                Some(prev) if words_in(prev + 1..i) => {
                    let gap = &out.text[pieces[prev].range.end..piece.range.start];
                    // A paragraph break (a quote's empty `>` line) right
                    // before the piece stays: without it the paragraphs
                    // on either side of the gap read as one.
                    let break_line = (i - 1 > prev && pieces[i - 1].filler)
                        .then(|| &out.text[pieces[i - 1].range.clone()]);
                    match line_marks_before(
                        &out.text,
                        lines.of(&out.text, piece.range.start),
                        piece.range.start,
                    ) {
                        // The piece goes on in a line whose start was left
                        // out: the line keeps its marks (`> […] rest`), or
                        // it would read as the text of the line before.
                        Some(marks) if gap.contains('\n') => {
                            text.push_str(&format!(" {OMITTED}\n{marks}{OMITTED} "));
                        }
                        _ => match break_line {
                            Some(line) if gap.contains('\n') => {
                                text.push_str(&format!(" {OMITTED}\n{line}\n"));
                            }
                            _ => {
                                let next = if gap.contains('\n') { "\n" } else { " " };
                                text.push_str(&format!(" {OMITTED}{next}"));
                            }
                        },
                    }
                }
                Some(prev) => {
                    // Wordless pieces between two chosen ones are shown.
                    for filler in prev + 1..i {
                        let gap =
                            &out.text[pieces[filler - 1].range.end..pieces[filler].range.start];
                        text.push_str(joint(gap));
                        text.push_str(&out.text[pieces[filler].range.clone()]);
                    }
                    let gap = &out.text[pieces[i - 1].range.end..piece.range.start];
                    text.push_str(joint(gap));
                }
                None => {}
            }
            text.push_str(&out.text[piece.range.clone()]);
            previous = Some(i);
        }
        if words_in(last_kept + 1..in_block.end) {
            text.push_str(&format!(" {OMITTED}"));
        }
        blocks.push(OutBlock::content(text));
    }
    if skipped_content || skipped_under_heading {
        push_omitted(&mut blocks);
    }
    let mut out = CompressedBody::from_blocks(blocks, duplicates_of);
    // Embeds were expanded in the body the pieces come from.
    out.embeds = body.embeds.clone();
    out
}

/// Starts a block shown after what `render` left out: a `[…]` for the
/// content skipped before the waiting heading, the heading, then a `[…]`
/// for the content skipped under it, unless the block's text opens with
/// one (`opens_with_gap`).
fn open_block(
    blocks: &mut Vec<OutBlock>,
    heading: Option<&OutBlock>,
    skipped_before: bool,
    skipped_under: bool,
    opens_with_gap: bool,
) {
    match heading {
        Some(heading) => {
            if skipped_before {
                push_omitted(blocks);
            }
            blocks.push(heading.clone());
            if skipped_under && !opens_with_gap {
                push_omitted(blocks);
            }
        }
        None if skipped_before && !opens_with_gap => push_omitted(blocks),
        None => {}
    }
}

/// The quote, list and task marks opening the line that starts at
/// `line_start` and holds `at`, when `at` is past them (in the middle of
/// the line's text): `> `, `- `, `11. `, `> - [ ] `.
fn line_marks_before(text: &str, line_start: usize, at: usize) -> Option<&str> {
    let line = &text[line_start..at];
    let (marks, rest) = line.split_at(crate::text::line_marks_len(line));
    (!rest.trim().is_empty() && !marks.trim().is_empty()).then_some(marks)
}

/// The start of the line holding a position, for positions asked in
/// increasing order: each byte of the text is searched once.
#[derive(Default)]
struct LineStarts {
    searched: usize,
    start: usize,
}

impl LineStarts {
    fn of(&mut self, text: &str, at: usize) -> usize {
        if at > self.searched {
            if let Some(newline) = memchr::memrchr(b'\n', &text.as_bytes()[self.searched..at]) {
                self.start = self.searched + newline + 1;
            }
            self.searched = at;
        }
        self.start
    }
}

/// What joins two pieces shown one after the other, for the `gap` between
/// them in the block: a line break, or a space, or nothing (CJK sentences
/// follow each other with no space).
fn joint(gap: &str) -> &'static str {
    if gap.contains('\n') {
        "\n"
    } else if gap.is_empty() {
        ""
    } else {
        " "
    }
}

/// Adds a `[…]` block unless the text before already ends with one.
fn push_omitted(blocks: &mut Vec<OutBlock>) {
    if blocks.last().is_none_or(|b| !b.text.ends_with(OMITTED)) {
        blocks.push(omitted());
    }
}

fn omitted() -> OutBlock {
    let mut block = OutBlock::content(OMITTED.to_string());
    block.is_content = false;
    block
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Tokenizer;

    fn body(texts: &[&str]) -> CompressedBody {
        CompressedBody::from_blocks(
            texts
                .iter()
                .map(|t| {
                    if t.starts_with('#') {
                        let mut b = OutBlock::content(t.to_string());
                        b.is_heading = true;
                        b.is_content = false;
                        b.level = Some(2);
                        b
                    } else {
                        OutBlock::content(t.to_string())
                    }
                })
                .collect(),
            Vec::new(),
        )
    }

    fn scorer(word: &'static str) -> Box<Scorer> {
        Box::new(move |text: &str| if text.contains(word) { 1.0 } else { 0.0 })
    }

    /// The pieces that match, rendered.
    fn matching(body: &CompressedBody, word: &'static str) -> String {
        let pieces = Pieces::of(body, &*scorer(word));
        let chosen: BTreeSet<usize> = (0..pieces.len())
            .filter(|&i| pieces.score(i) > 0.0)
            .collect();
        pieces.render(&chosen, &BTreeMap::new()).text
    }

    #[test]
    fn long_tables_and_link_lines_score_below_a_short_block_that_answers() {
        let row = "| 镜像源 | https://mirror.example.org/docker |\n";
        let table = format!("| 名称 | 地址 |\n|---|---|\n{}", row.repeat(12));
        let b = body(&[
            "删除镜像：",
            "```\ndocker rmi 镜像名\n```",
            &table,
            "- [docker 镜像教程](https://example.org/docker)",
            "- docker 镜像 is the template of a container",
            "Docker images are templates.",
        ]);
        let pieces = Pieces::of(&b, &*scorer("docker"));
        let texts: Vec<&str> = (0..pieces.len()).map(|i| pieces.text(i)).collect();
        assert_eq!(texts[2], table);
        // The lead-in and its short code block: the whole match.
        assert_eq!((pieces.score(0), pieces.score(1)), (1.0, 1.0));
        // 12 rows of 41 characters, 3 of them CJK (+ the head): 168
        // chars4 tokens, so the table keeps sqrt(100 / 168) of its match;
        // its rows are mostly URLs, link lines: half of that.
        assert_eq!(Tokenizer::Chars4.count(&table), 168);
        assert_eq!(pieces.score(2), (100.0 / 168.0_f64).sqrt() * 0.5);
        // A link line keeps half; a line that says something, all.
        assert_eq!(pieces.score(3), 0.5);
        assert_eq!(pieces.score(4), 1.0);
        assert_eq!(pieces.score(5), 0.0);
    }

    #[test]
    fn keeps_matching_sentences_in_order_with_markers() {
        let b = body(&[
            "Intro sentence. Nothing here.",
            "## Details",
            "First fact. The needle is here. Another fact.",
            "Closing words.",
        ]);
        assert_eq!(
            matching(&b, "needle"),
            "[…]\n\n## Details\n\n[…] The needle is here. […]"
        );
    }

    #[test]
    fn whole_blocks_stay_whole_and_cjk_sentences_join_without_spaces() {
        let b = body(&["alpha needle one.", "beta two.", "gamma needle three."]);
        assert_eq!(
            matching(&b, "needle"),
            "alpha needle one.\n\n[…]\n\ngamma needle three."
        );
        let cjk = body(&["第一句。针在这里。针也在这里。最后一句。"]);
        assert_eq!(matching(&cjk, "针"), "[…] 针在这里。针也在这里。 […]");
    }

    #[test]
    fn skipped_list_items_keep_their_lines_and_duplicates_are_marked() {
        let b = body(&["- needle one\n- two\n- needle three", "A copied paragraph."]);
        let pieces = Pieces::of(&b, &*scorer("needle"));
        let chosen: BTreeSet<usize> = [0, 2].into();
        let duplicates: BTreeMap<usize, String> = [(1, "other".to_string())].into();
        assert_eq!(
            pieces.render(&chosen, &duplicates).text,
            "- needle one […]\n- needle three\n\n_(content also in [[other]])_"
        );
    }

    #[test]
    fn a_lead_in_and_the_block_it_introduces_are_one_unit() {
        let b = body(&[
            "Some intro. To delete an image:",
            "```\ndocker rmi name\n```",
            "- a list\n- not introduced",
            "Mirrors:",
            "| mirror | image |\n|---|---|\n| a | b |",
        ]);
        let pieces = Pieces::of(&b, &*scorer("delete"));
        let texts: Vec<&str> = (0..pieces.len()).map(|i| pieces.text(i)).collect();
        assert_eq!(
            texts,
            [
                "Some intro.",
                "To delete an image:",
                "```\ndocker rmi name\n```",
                "- a list",
                "- not introduced",
                "Mirrors:",
                "| mirror | image |\n|---|---|\n| a | b |"
            ]
        );
        assert_eq!(pieces.unit(1), 1..3);
        assert_eq!(pieces.unit(2), 1..3);
        assert_eq!(pieces.unit(0), 0..1);
        assert_eq!(pieces.unit(3), 3..4);
        assert_eq!(pieces.unit(6), 5..7);
        // The unit is scored as one text: the code block scores with the
        // lead-in's words.
        assert_eq!(pieces.score(2), 1.0);
        assert_eq!(pieces.score(0), 0.0);
        let chosen: BTreeSet<usize> = pieces.unit(2).collect();
        assert_eq!(
            pieces.render(&chosen, &BTreeMap::new()).text,
            "[…] To delete an image:\n\n```\ndocker rmi name\n```\n\n[…]"
        );
    }

    #[test]
    fn item_numbers_and_wordless_lines_are_never_pieces_of_their_own() {
        let text = "1. Melt butter. Watch it.\n2. Remove from heat. Cool it.\n10. Bake.";
        let pieces: Vec<&str> = split_pieces(text).into_iter().map(|r| &text[r]).collect();
        assert_eq!(
            pieces,
            [
                "1. Melt butter.",
                "Watch it.",
                "2. Remove from heat.",
                "Cool it.",
                "10. Bake."
            ]
        );
        // A closing quotation mark goes with its sentence; a quote's empty
        // line is a piece without words (a filler).
        let quote = "> [!quote]\n>\n> 「数据库是集合。数据独立。」\n>";
        let pieces: Vec<&str> = split_pieces(quote).into_iter().map(|r| &quote[r]).collect();
        assert_eq!(
            pieces,
            ["> [!quote]", ">", "> 「数据库是集合。", "数据独立。」", ">"]
        );
        let b = body(&[quote, "Other."]);
        let all = Pieces::of(&b, &*scorer("独立"));
        let fillers: Vec<bool> = (0..all.len()).map(|i| all.is_filler(i)).collect();
        // The callout's bare type line is a filler too.
        assert_eq!(fillers, [true, true, false, false, true, false]);
    }

    #[test]
    fn fillers_show_between_chosen_pieces_and_never_stand_for_a_gap() {
        let quote = "> [!quote] Sayings\n>\n> First words here.\n>\n> The needle.\n>";
        let b = body(&[quote]);
        let pieces = Pieces::of(&b, &*scorer("needle"));
        // The last sentence alone: no `> […]` line for the empty lines.
        let chosen: BTreeSet<usize> = [4].into();
        assert_eq!(
            pieces.render(&chosen, &BTreeMap::new()).text,
            "[…]\n> The needle."
        );
        // Two sentences: the empty quote line between them is shown.
        let chosen: BTreeSet<usize> = [2, 4].into();
        assert_eq!(
            pieces.render(&chosen, &BTreeMap::new()).text,
            "[…]\n> First words here.\n>\n> The needle."
        );
        // A gap that ends at a paragraph break keeps the break.
        let two = "> One. Skipped words.\n>\n> The needle.";
        let b2 = body(&[two]);
        let p2 = Pieces::of(&b2, &*scorer("needle"));
        let chosen2: BTreeSet<usize> = [0, 3].into();
        assert_eq!(
            p2.render(&chosen2, &BTreeMap::new()).text,
            "> One. […]\n>\n> The needle."
        );
        // Every piece with words: the block as written.
        let chosen: BTreeSet<usize> = [0, 2, 4].into();
        assert_eq!(pieces.render(&chosen, &BTreeMap::new()).text, quote);
    }

    #[test]
    fn a_block_opening_with_a_gap_marker_stands_for_the_skipped_blocks_before_it() {
        let b = body(&["Skipped paragraph.", "Other words. The needle."]);
        assert_eq!(matching(&b, "needle"), "[…] The needle.");
        // Across a heading both gaps show.
        let b = body(&["Skipped paragraph.", "## Part", "Other words. The needle."]);
        assert_eq!(matching(&b, "needle"), "[…]\n\n## Part\n\n[…] The needle.");
    }

    #[test]
    fn a_line_whose_start_is_left_out_keeps_its_quote_or_list_marks() {
        let steps = "10. Line the tin. Fill it.\n11. Cool it. Remove the beans. Bake.";
        let b = body(&[steps]);
        let pieces = Pieces::of(&b, &*scorer("beans"));
        let chosen: BTreeSet<usize> = [0, 3].into();
        assert_eq!(
            pieces.render(&chosen, &BTreeMap::new()).text,
            "10. Line the tin. […]\n11. […] Remove the beans. […]"
        );
        let quote = "> First words. The needle here.\n> More.";
        let b = body(&[quote]);
        let pieces = Pieces::of(&b, &*scorer("needle"));
        let chosen: BTreeSet<usize> = [1].into();
        assert_eq!(
            pieces.render(&chosen, &BTreeMap::new()).text,
            "> […] The needle here. […]"
        );
    }

    #[test]
    fn a_gap_under_a_heading_is_marked_under_it_and_a_bare_callout_type_is_filler() {
        let b = body(&[
            "Intro words.",
            "## Part",
            "A definition left out.",
            "> [!tip]\n> The needle.",
        ]);
        // Every piece with words taken: the callout as written.
        assert_eq!(
            matching(&b, "needle"),
            "[…]\n\n## Part\n\n[…]\n\n> [!tip]\n> The needle."
        );
        let pieces = Pieces::of(&b, &*scorer("needle"));
        assert!(pieces.is_filler(2) && !pieces.is_filler(3));
        // A callout with a title is a piece like any other.
        let b = body(&["> [!tip] Use source\n> The needle."]);
        let pieces = Pieces::of(&b, &*scorer("needle"));
        assert!(!pieces.is_filler(0));
    }

    #[test]
    fn initials_do_not_end_sentences() {
        let text = "A Passage to India by E. M. Forster. Read it.";
        let pieces: Vec<&str> = split_pieces(text).into_iter().map(|r| &text[r]).collect();
        assert_eq!(pieces, ["A Passage to India by E. M. Forster.", "Read it."]);
    }

    #[test]
    fn sentences_split_on_terminators_and_lines() {
        let text = "One. Two! 三。四\n- item a\n- item b. C\nSee e.g. this and vs. that. End";
        let pieces: Vec<&str> = split_pieces(text).into_iter().map(|r| &text[r]).collect();
        assert_eq!(
            pieces,
            [
                "One.",
                "Two!",
                "三。",
                "四",
                "- item a",
                "- item b.",
                "C",
                "See e.g. this and vs. that.",
                "End"
            ]
        );
    }
}
