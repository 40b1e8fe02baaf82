//! Rendering items into segments, and fitting segments to a budget by
//! degrading items in the budget order (L3, then L2, then L1; never L0).

use super::doc::{first_sentence, nest};
use super::recipe::{Keep, Labels, Layer};
use super::sources::Item;
use crate::tokens::Tokenizer;

/// The order layers are printed in within a segment.
pub(super) const RENDER_ORDER: [Layer; 4] = [Layer::L2, Layer::L1, Layer::L3, Layer::L0];

/// How an item appears in the pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Form {
    Full,
    Summary,
    /// Only this many characters of its text, at the end it keeps.
    Truncated(usize),
    Dropped,
}

impl Form {
    pub(super) fn name(self) -> &'static str {
        match self {
            Form::Full => "full",
            Form::Summary => "summary",
            Form::Truncated(_) => "truncated",
            Form::Dropped => "dropped",
        }
    }
}

/// Heading depth of the text inside an item (`####` is the entity).
const ITEM_DEPTH: usize = 4;
/// The longest summary kept of a summarised item.
const SUMMARY_CHARS: usize = 80;
/// Below this many characters a truncated item is dropped instead.
const MIN_TRUNCATED_CHARS: usize = 40;

/// A list of items printed under one `#` heading.
pub(super) struct Segment<'a> {
    pub items: Vec<&'a Item>,
    pub forms: Vec<Form>,
}

impl<'a> Segment<'a> {
    pub(super) fn new(mut items: Vec<&'a Item>, source_order: &[String]) -> Segment<'a> {
        let layer_rank = |layer: Layer| RENDER_ORDER.iter().position(|l| *l == layer);
        let source_rank = |source: &str| source_order.iter().position(|s| s == source);
        // A stable sort keeps each source's own item order.
        items.sort_by_key(|item| (layer_rank(item.layer), source_rank(&item.source)));
        let forms = vec![Form::Full; items.len()];
        Segment { items, forms }
    }

    /// The rendered text: layer, source and entity headings, then items.
    pub(super) fn render(&self, labels: &Labels) -> String {
        let mut out = String::new();
        for piece in self.pieces(labels) {
            out.push_str(&piece.text(self, labels));
        }
        out
    }

    fn pieces(&self, _labels: &Labels) -> Vec<Piece> {
        let mut pieces = Vec::new();
        let mut last: Option<(Layer, &str, Option<&str>)> = None;
        for (i, item) in self.items.iter().enumerate() {
            if self.forms[i] == Form::Dropped {
                continue;
            }
            let here = (item.layer, item.source.as_str(), item.group.as_deref());
            let (layer_changed, source_changed, group_changed) = match last {
                None => (true, true, true),
                Some((layer, source, group)) => (
                    layer != here.0,
                    layer != here.0 || source != here.1,
                    layer != here.0 || source != here.1 || group != here.2,
                ),
            };
            if layer_changed {
                pieces.push(Piece::Layer(item.layer));
            }
            if source_changed {
                pieces.push(Piece::Source(i));
            }
            if group_changed && item.group.is_some() {
                pieces.push(Piece::Group(i));
            }
            pieces.push(Piece::Item(i));
            last = Some(here);
        }
        pieces
    }

    /// The additive measure of the rendered segment.
    pub(super) fn measure(
        &self,
        labels: &Labels,
        tokenizer: Tokenizer,
        cache: &mut MeasureCache,
    ) -> usize {
        self.pieces(labels)
            .iter()
            .map(|piece| match piece {
                Piece::Item(i) => cache.item(self.items[*i], self.forms[*i], tokenizer),
                other => tokenizer.measure(&other.text(self, labels)),
            })
            .sum()
    }

    /// Degrades items until the segment measures at most `capacity`;
    /// false when even every degradable item gone is not enough.
    pub(super) fn fit(
        &mut self,
        capacity: usize,
        labels: &Labels,
        tokenizer: Tokenizer,
        cache: &mut MeasureCache,
    ) -> bool {
        if self.measure(labels, tokenizer, cache) <= capacity {
            return true;
        }
        for layer in [Layer::L3, Layer::L2] {
            for summarise in [true, false] {
                for i in self.degrade_order(layer) {
                    let next = if summarise {
                        if self.forms[i] != Form::Full || !has_summary(self.items[i]) {
                            continue;
                        }
                        Form::Summary
                    } else {
                        Form::Dropped
                    };
                    self.forms[i] = next;
                    if self.measure(labels, tokenizer, cache) <= capacity {
                        return true;
                    }
                }
            }
        }
        for i in self.degrade_order(Layer::L1) {
            let chars = self.items[i].text.chars().count();
            let mut keep = chars;
            loop {
                let over = self
                    .measure(labels, tokenizer, cache)
                    .saturating_sub(capacity);
                if over == 0 {
                    return true;
                }
                let current = cache.item(self.items[i], self.forms[i], tokenizer).max(1);
                let share = current.saturating_sub(over) as f64 / current as f64;
                keep = ((keep as f64 * share * 0.97) as usize).min(keep.saturating_sub(1));
                if keep < MIN_TRUNCATED_CHARS {
                    self.forms[i] = Form::Dropped;
                    break;
                }
                self.forms[i] = Form::Truncated(keep);
            }
            if self.measure(labels, tokenizer, cache) <= capacity {
                return true;
            }
        }
        self.measure(labels, tokenizer, cache) <= capacity
    }

    /// Items of `layer`, lowest priority first.
    fn degrade_order(&self, layer: Layer) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.items.len())
            .filter(|&i| self.items[i].layer == layer)
            .collect();
        order.sort_by_key(|&i| (self.items[i].priority, i));
        order
    }
}

enum Piece {
    Layer(Layer),
    Source(usize),
    Group(usize),
    Item(usize),
}

impl Piece {
    fn text(&self, segment: &Segment<'_>, labels: &Labels) -> String {
        match self {
            Piece::Layer(layer) => format!("## {layer} · {}\n\n", labels.layer(*layer)),
            Piece::Source(i) => format!("### {}\n\n", segment.items[*i].source_title),
            Piece::Group(i) => format!(
                "#### {}\n\n",
                segment.items[*i].group.as_deref().unwrap_or("")
            ),
            Piece::Item(i) => render_item(segment.items[*i], segment.forms[*i]),
        }
    }
}

fn has_summary(item: &Item) -> bool {
    first_sentence(&item.text, SUMMARY_CHARS).len() + 8 < item.text.len()
}

/// One item as printed in `form`.
pub(super) fn render_item(item: &Item, form: Form) -> String {
    let body = match form {
        Form::Full => nest(&item.text, ITEM_DEPTH),
        Form::Summary => format!("{} […]", first_sentence(&item.text, SUMMARY_CHARS)),
        Form::Truncated(keep) => truncate(&item.text, keep, item.keep),
        Form::Dropped => return String::new(),
    };
    match &item.label {
        Some(label) => format!("**{label}**\n\n{body}\n\n"),
        None => format!("{body}\n\n"),
    }
}

/// `keep` characters of `text` from the end `which` says, cut at a line
/// or sentence boundary where one is near, marked with `[…]`.
fn truncate(text: &str, keep: usize, which: Keep) -> String {
    let chars: Vec<char> = text.chars().collect();
    if keep >= chars.len() {
        return nest(text, ITEM_DEPTH);
    }
    let is_break = |c: char| matches!(c, '\n' | '。' | '！' | '？' | '.' | '!' | '?');
    match which {
        Keep::Tail => {
            let mut start = chars.len() - keep;
            let limit = (start + keep / 4).min(chars.len());
            if let Some(offset) = chars[start..limit].iter().position(|&c| is_break(c)) {
                start += offset + 1;
            }
            let kept: String = chars[start..].iter().collect();
            format!("[…] {}", nest(kept.trim_start(), ITEM_DEPTH))
        }
        Keep::Head => {
            let mut end = keep;
            let floor = keep - keep / 4;
            if let Some(offset) = chars[floor..end].iter().rposition(|&c| is_break(c)) {
                end = floor + offset + 1;
            }
            let kept: String = chars[..end].iter().collect();
            format!("{} […]", nest(kept.trim_end(), ITEM_DEPTH))
        }
    }
}

/// Measures of rendered items, so fitting does not re-count text.
#[derive(Default)]
pub(super) struct MeasureCache {
    entries: std::collections::HashMap<(String, String), usize>,
}

impl MeasureCache {
    fn item(&mut self, item: &Item, form: Form, tokenizer: Tokenizer) -> usize {
        let form_key = match form {
            Form::Truncated(keep) => format!("t{keep}"),
            other => other.name().to_string(),
        };
        *self
            .entries
            .entry((item.key.clone(), form_key))
            .or_insert_with(|| tokenizer.measure(&render_item(item, form)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_the_chosen_end() {
        let text = "第一句。第二句。第三句。第四句。";
        let tail = truncate(text, 7, Keep::Tail);
        assert!(
            tail.starts_with("[…] ") && tail.ends_with("第四句。"),
            "{tail}"
        );
        let head = truncate(text, 7, Keep::Head);
        assert!(
            head.starts_with("第一句。") && head.ends_with(" […]"),
            "{head}"
        );
    }
}
