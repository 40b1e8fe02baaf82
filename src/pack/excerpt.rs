//! Query-aware excerpts: when a body does not fit, the sentences and blocks
//! most relevant to the query are kept, in document order, with `[…]` where
//! text was left out.

use std::collections::BTreeSet;
use std::ops::Range;

use crate::pack::compress::{CompressedBody, OutBlock};

/// Scores a piece of text for the query (0 when it shares no term).
pub type Scorer = dyn Fn(&str) -> f64 + Send + Sync;

pub const OMITTED: &str = "[…]";
/// How many candidate pieces are tried per page.
const MAX_PIECES: usize = 400;

/// A sentence (or line, or whole block) of a compressed body.
struct Piece {
    block: usize,
    range: Range<usize>,
    score: f64,
}

/// The most relevant parts of `body` that `fits` accepts, or `None` when
/// no part of it matches the query.
pub fn relevant_excerpt(
    body: &CompressedBody,
    scorer: &Scorer,
    fits: &mut dyn FnMut(&str) -> bool,
) -> Option<CompressedBody> {
    let mut pieces: Vec<Piece> = Vec::new();
    for (block, out) in body.blocks.iter().enumerate() {
        if !out.is_content {
            continue;
        }
        for range in split_pieces(&out.text) {
            let score = scorer(&out.text[range.clone()]);
            pieces.push(Piece {
                block,
                range,
                score,
            });
        }
    }
    let mut order: Vec<usize> = (0..pieces.len())
        .filter(|&i| pieces[i].score > 0.0)
        .collect();
    if order.is_empty() {
        return None;
    }
    order.sort_by(|&a, &b| pieces[b].score.total_cmp(&pieces[a].score).then(a.cmp(&b)));
    order.truncate(MAX_PIECES);

    let mut chosen: BTreeSet<usize> = BTreeSet::new();
    let mut best: Option<CompressedBody> = None;
    for candidate in order {
        chosen.insert(candidate);
        let excerpt = render(body, &pieces, &chosen);
        if fits(&excerpt.text) {
            best = Some(excerpt);
        } else {
            chosen.remove(&candidate);
        }
    }
    best
}

/// Splits a block into pieces: lines, then sentences within long lines.
/// Code blocks and tables stay whole.
fn split_pieces(text: &str) -> Vec<Range<usize>> {
    let trimmed = text.trim_start();
    if trimmed.starts_with("```") || trimmed.starts_with("~~~") || trimmed.starts_with('|') {
        return std::iter::once(0..text.len()).collect();
    }
    let mut pieces = Vec::new();
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let line_end = line_start + line.len();
        let mut start = line_start;
        let bytes = text.as_bytes();
        for (offset, ch) in text[line_start..line_end].char_indices() {
            let end = line_start + offset + ch.len_utf8();
            let ends_sentence = match ch {
                '。' | '！' | '？' => true,
                '.' | '!' | '?' => {
                    end >= line_end
                        || (bytes.get(end).is_some_and(|b| *b == b' ')
                            && starts_sentence(&text[end..line_end]))
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
    pieces
        .into_iter()
        .map(|r| {
            let piece = &text[r.clone()];
            let lead = piece.len() - piece.trim_start().len();
            let tail = piece.len() - piece.trim_end().len();
            r.start + lead..r.end - tail
        })
        .filter(|r| !r.is_empty())
        .collect()
}

/// Whether the text after a full stop and a space starts a new sentence:
/// a capital letter, a digit-free quote or bracket, or CJK — not "e.g. the",
/// "vs. placebo" or "P = .04".
fn starts_sentence(after: &str) -> bool {
    after.trim_start().chars().next().is_none_or(|c| {
        c.is_uppercase() || crate::text::is_cjk(c) || matches!(c, '"' | '“' | '(' | '[')
    })
}

/// The chosen pieces in document order, with the headings of the sections
/// they are in and `[…]` wherever content was left out.
fn render(body: &CompressedBody, pieces: &[Piece], chosen: &BTreeSet<usize>) -> CompressedBody {
    let mut blocks: Vec<OutBlock> = Vec::new();
    let mut skipped_content = false;
    let mut pending_heading: Option<&OutBlock> = None;
    for (index, out) in body.blocks.iter().enumerate() {
        if out.is_heading {
            pending_heading = Some(out);
            continue;
        }
        if !out.is_content {
            continue;
        }
        let in_block: Vec<usize> = (0..pieces.len())
            .filter(|&i| pieces[i].block == index)
            .collect();
        let kept: Vec<usize> = chosen
            .iter()
            .copied()
            .filter(|&i| pieces[i].block == index)
            .collect();
        if kept.is_empty() {
            skipped_content = true;
            continue;
        }
        if skipped_content {
            push_omitted(&mut blocks);
        }
        skipped_content = false;
        if let Some(heading) = pending_heading.take() {
            blocks.push(heading.clone());
        }
        if kept.len() == in_block.len() {
            blocks.push(out.clone());
            continue;
        }
        let mut text = String::new();
        let mut previous: Option<usize> = None;
        for &i in &kept {
            let piece = &pieces[i];
            match previous {
                None if in_block.first() != Some(&i) => text.push_str(&format!("{OMITTED} ")),
                Some(prev) if prev + 1 != i => text.push_str(&format!(" {OMITTED} ")),
                Some(prev) => {
                    let gap = &out.text[pieces[prev].range.end..piece.range.start];
                    text.push_str(if gap.contains('\n') { "\n" } else { " " });
                }
                None => {}
            }
            text.push_str(&out.text[piece.range.clone()]);
            previous = Some(i);
        }
        if in_block.last() != kept.last() {
            text.push_str(&format!(" {OMITTED}"));
        }
        blocks.push(OutBlock::content(text));
    }
    if skipped_content {
        push_omitted(&mut blocks);
    }
    CompressedBody::from_blocks(blocks, Vec::new())
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

    #[test]
    fn keeps_matching_sentences_in_order_with_markers() {
        let b = body(&[
            "Intro sentence. Nothing here.",
            "## Details",
            "First fact. The needle is here. Another fact.",
            "Closing words.",
        ]);
        let excerpt = relevant_excerpt(&b, &*scorer("needle"), &mut |_| true).unwrap();
        assert_eq!(
            excerpt.text,
            "[…]\n\n## Details\n\n[…] The needle is here. […]"
        );
    }

    #[test]
    fn whole_blocks_stay_whole_and_budget_is_respected() {
        let b = body(&["alpha needle one.", "beta two.", "gamma needle three."]);
        let excerpt = relevant_excerpt(&b, &*scorer("needle"), &mut |_| true).unwrap();
        assert_eq!(
            excerpt.text,
            "alpha needle one.\n\n[…]\n\ngamma needle three."
        );
        let short = relevant_excerpt(&b, &*scorer("needle"), &mut |t| t.len() < 30).unwrap();
        assert_eq!(short.text, "alpha needle one.\n\n[…]");
        assert!(relevant_excerpt(&b, &*scorer("absent"), &mut |_| true).is_none());
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
