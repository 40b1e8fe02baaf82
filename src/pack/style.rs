//! Output styles: the same selection of pages printed as markdown (the
//! seed's layout, the default), XML, plain text, JSON, or through a user's
//! template, always within the budget.
//!
//! The packer measures the markdown layout. Another layout is printed from
//! the pages the packer chose; when that text is over the budget, the pages
//! are chosen again under a budget smaller by the excess (a few rounds), and
//! if it is still over, pages are dropped from the end until it fits. The
//! `Actual` figure printed is the count of the whole printed text.

use std::fmt::Write as _;
use std::str::FromStr;
use std::sync::Arc;

use serde::Serialize;

use super::template::{PackTemplate, TemplateError};
use super::{Pack, PackedPage, fixed_point, render};
use crate::tokens::Tokenizer;

/// A built-in layout of the printed pack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Style {
    /// The seed's markdown, byte for byte.
    #[default]
    Markdown,
    /// A `<documents>` root, one `<document>` per page.
    Xml,
    /// Text without markup of ours (note bodies are printed as written).
    Plain,
    /// One JSON document: the header facts and a list of documents.
    Json,
}

impl Style {
    pub const ALL: [Style; 4] = [Style::Markdown, Style::Xml, Style::Plain, Style::Json];

    pub fn name(self) -> &'static str {
        match self {
            Style::Markdown => "markdown",
            Style::Xml => "xml",
            Style::Plain => "plain",
            Style::Json => "json",
        }
    }
}

impl FromStr for Style {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Style::ALL
            .into_iter()
            .find(|style| style.name() == s)
            .ok_or_else(|| format!("unknown style '{s}' (expected markdown, xml, plain or json)"))
    }
}

/// How a pack is printed: a built-in style or a user's template.
#[derive(Clone, Debug)]
pub enum Shape {
    Style(Style),
    Template(Arc<PackTemplate>),
}

impl Default for Shape {
    fn default() -> Self {
        Shape::Style(Style::Markdown)
    }
}

impl Shape {
    /// The printed text of `pack` with `actual` as its size.
    pub fn render(&self, pack: &Pack, actual: usize) -> Result<String, TemplateError> {
        match self {
            Shape::Style(Style::Markdown) => Ok(pack.bundle.clone()),
            Shape::Style(Style::Xml) => Ok(xml(pack, actual)),
            Shape::Style(Style::Plain) => Ok(plain(pack, actual)),
            Shape::Style(Style::Json) => Ok(json(pack, actual)),
            Shape::Template(template) => template.render(pack, actual),
        }
    }

    /// Tokens set aside before the pages are chosen: a template's own text
    /// is printed whatever the pages are.
    fn reserve(&self, tokenizer: Tokenizer) -> usize {
        match self {
            Shape::Template(template) => tokenizer.count(template.source()),
            Shape::Style(_) => 0,
        }
    }
}

/// Rounds of choosing the pages again under a smaller budget before pages
/// are dropped one by one.
const REFITS: usize = 4;

/// Builds the pack printed in `shape` within `budget`: `build(b)` packs the
/// markdown layout within `b` tokens. An error is a template's.
pub(crate) fn shape_pack(
    shape: &Shape,
    budget: usize,
    tokenizer: Tokenizer,
    redact: &dyn Fn(&str) -> Option<String>,
    mut build: impl FnMut(usize) -> Pack,
) -> Result<Pack, TemplateError> {
    if matches!(shape, Shape::Style(Style::Markdown)) {
        return Ok(build(budget));
    }
    // The pages are chosen under a smaller budget, but the pack prints the
    // budget it was asked to keep.
    let mut build = |inner: usize| {
        let mut pack = build(inner);
        pack.budget = budget;
        pack
    };
    let mut inner = budget.saturating_sub(shape.reserve(tokenizer)).max(1);
    let mut pack = build(inner);
    for round in 0.. {
        let (text, actual) = print(shape, &pack, tokenizer, redact)?;
        if actual <= budget {
            return Ok(finish(pack, text, actual, budget));
        }
        if round + 1 == REFITS || inner == 1 {
            break;
        }
        inner = inner.saturating_sub(actual - budget).max(1);
        pack = build(inner);
    }
    // Still over: the last pages go, dailies first, then pages by rank.
    loop {
        if pack.dailies.pop().is_some() {
            pack.dailies_dropped += 1;
        } else if pack.pages.pop().is_some() {
            pack.pages_dropped += 1;
        } else {
            break;
        }
        let (text, actual) = print(shape, &pack, tokenizer, redact)?;
        if actual <= budget {
            return Ok(finish(pack, text, actual, budget));
        }
    }
    // Not even the header fits: nothing is printed, as in markdown.
    pack.pages.clear();
    pack.dailies.clear();
    Ok(finish(pack, String::new(), 0, budget))
}

/// The text and its count, with the count printed in it (the fixed point
/// of "count the text that contains this number").
fn print(
    shape: &Shape,
    pack: &Pack,
    tokenizer: Tokenizer,
    redact: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, usize), TemplateError> {
    // Secrets are looked for once more in the text as printed, and counted
    // as replaced.
    let render = |a: usize| {
        shape
            .render(pack, a)
            .map(|text| redact(&text).unwrap_or(text))
    };
    let mut failure = None;
    let actual = fixed_point(|a| match render(a) {
        Ok(text) => tokenizer.count(&text),
        Err(error) => {
            failure.get_or_insert(error);
            0
        }
    });
    if let Some(error) = failure {
        return Err(error);
    }
    let text = render(actual)?;
    let counted = tokenizer.count(&text);
    Ok((text, counted))
}

fn finish(mut pack: Pack, text: String, actual: usize, budget: usize) -> Pack {
    pack.bundle = text;
    pack.actual = actual;
    pack.budget = budget;
    // The styled pack's own size decides (outside obsidian-wiki vaults).
    pack.warnings
        .retain(|w| w != render::LARGE_PACK_WARNING && !w.starts_with("This pack is large ("));
    pack.warnings.extend(crate::pack::large_warning(&pack));
    pack
}

/// The markdown pack with the secrets `redact` finds in its printed text
/// replaced and its header's budget and count made true again, or
/// `Err(excess)` when the replacements took it past `budget` (pack again
/// under a budget smaller by that much).
pub(crate) fn redact_printed(
    mut pack: Pack,
    budget: usize,
    redact: impl Fn(&str) -> Option<String>,
) -> Result<Pack, usize> {
    let redacted = redact(&pack.bundle);
    if redacted.is_none() && pack.budget == budget {
        return Ok(pack);
    }
    let text = redacted.unwrap_or_else(|| pack.bundle.clone());
    if text.is_empty() {
        pack.budget = budget;
        return Ok(pack);
    }
    let counter = pack.counter;
    let actual = fixed_point(|a| counter.count(&with_header_counts(&text, budget, a)));
    if actual > budget {
        return Err(actual - budget);
    }
    pack.bundle = with_header_counts(&text, budget, actual);
    pack.actual = actual;
    pack.budget = budget;
    Ok(pack)
}

/// `text` with its `# Budget:` header line saying `budget` and `actual`.
fn with_header_counts(text: &str, budget: usize, actual: usize) -> String {
    let Some(start) = text
        .match_indices("# Budget: ")
        .map(|(at, _)| at)
        .find(|&at| at == 0 || text.as_bytes()[at - 1] == b'\n')
    else {
        return text.to_string();
    };
    let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let Some(pages) = text[start..end].find("| Pages: ") else {
        return text.to_string();
    };
    format!(
        "{}# Budget: {budget} tokens | Actual: {actual} tokens {}{}",
        &text[..start],
        &text[start + pages..end],
        &text[end..]
    )
}

/// The pack's title line, as the markdown header words it.
pub(crate) fn title(pack: &Pack) -> String {
    match &pack.topic {
        Some(topic) => format!("Context Pack: {topic}"),
        None => format!(
            "Context Pack: Recent Activity (last {} pages)",
            pack.pages.len()
        ),
    }
}

/// The message of a pack with nothing to show, if it is one.
fn empty_message(pack: &Pack) -> Option<&'static str> {
    (pack.candidates == 0 && pack.pages.is_empty() && pack.dailies.is_empty())
        .then(|| render::empty_text_of(pack))
}

/// Pages, then the recent dailies, in the order printed.
fn documents(pack: &Pack) -> impl Iterator<Item = &PackedPage> {
    pack.pages.iter().chain(&pack.dailies)
}

/// Text made safe for XML content and attribute values: markup characters
/// escaped, and characters XML 1.0 forbids replaced by U+FFFD (a note may
/// hold control characters; a parser would reject the whole pack).
pub(crate) fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

fn xml(pack: &Pack, actual: usize) -> String {
    let mut out = String::from("<documents");
    match &pack.topic {
        Some(topic) => {
            let _ = write!(out, " topic=\"{}\"", xml_escape(topic));
        }
        None => out.push_str(" mode=\"recent\""),
    }
    let _ = writeln!(
        out,
        " generated=\"{}\" budget=\"{}\" actual=\"{actual}\" counter=\"{}\" pages=\"{}\" candidates=\"{}\">",
        xml_escape(&pack.generated),
        pack.budget,
        pack.counter,
        pack.pages.len(),
        pack.candidates
    );
    for line in &pack.preface {
        let _ = writeln!(out, "<notice>{}</notice>", xml_escape(line));
    }
    if let Some(message) = empty_message(pack) {
        let _ = writeln!(out, "<message>{}</message>", xml_escape(message));
    }
    let (open, close) = fence_lines(pack);
    for (i, page) in documents(pack).enumerate() {
        let _ = writeln!(out, "<document index=\"{}\">", i + 1);
        out.push_str(&open);
        let _ = writeln!(out, "<source>{}</source>", xml_escape(&page.path));
        let _ = writeln!(out, "<title>{}</title>", xml_escape(&page.title));
        let _ = writeln!(out, "<tier>{}</tier>", xml_escape(&page.shown.label));
        let _ = writeln!(out, "<tags>{}</tags>", xml_escape(&page.tags.join(", ")));
        if !page.aliases.is_empty() {
            let _ = writeln!(
                out,
                "<aliases>{}</aliases>",
                xml_escape(&page.aliases.join(", "))
            );
        }
        let _ = writeln!(
            out,
            "<summary>{}</summary>",
            xml_escape(&page.shown.summary)
        );
        if let Some(body) = &page.shown.body {
            let _ = writeln!(
                out,
                "<document_content>\n{}\n</document_content>",
                xml_escape(body)
            );
        }
        if !page.backlinks.is_empty() {
            out.push_str("<backlinks>\n");
            for line in &page.backlinks {
                let _ = writeln!(out, "{}", xml_escape(line));
            }
            out.push_str("</backlinks>\n");
        }
        out.push_str(&close);
        out.push_str("</document>\n");
    }
    out.push_str("</documents>\n");
    out
}

fn plain(pack: &Pack, actual: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", title(pack));
    if let Some(message) = empty_message(pack) {
        for line in &pack.preface {
            let _ = writeln!(out, "{line}");
        }
        let _ = write!(out, "\n{message}\n");
        return out;
    }
    let _ = writeln!(out, "Generated: {}", pack.generated);
    let _ = writeln!(
        out,
        "Budget: {} tokens | Actual: {actual} tokens | Pages: {} / {}",
        pack.budget,
        pack.pages.len(),
        pack.candidates
    );
    let _ = writeln!(out, "Methodology: {}", pack.methodology);
    for line in &pack.preface {
        let _ = writeln!(out, "{line}");
    }
    let (open, close) = fence_lines(pack);
    for (i, page) in documents(pack).enumerate() {
        let _ = write!(out, "\n=== {}. {} ===\n", i + 1, page.title);
        out.push_str(&open);
        let _ = writeln!(out, "Source: {}", page.path);
        let _ = writeln!(out, "Tier: {}", page.shown.label);
        if !page.tags.is_empty() {
            let _ = writeln!(out, "Tags: {}", page.tags.join(", "));
        }
        if !page.aliases.is_empty() {
            let _ = writeln!(out, "Aliases: {}", page.aliases.join(", "));
        }
        if !page.shown.summary.is_empty() {
            let _ = writeln!(out, "Summary: {}", page.shown.summary);
        }
        if let Some(body) = &page.shown.body {
            let _ = write!(out, "\n{body}\n");
        }
        if !page.backlinks.is_empty() {
            out.push_str("\nBacklinks:\n");
            for line in &page.backlinks {
                let _ = writeln!(out, "{line}");
            }
        }
        out.push_str(&close);
    }
    out
}

/// The opening and closing lines of a fenced pack's documents (empty
/// strings when it is not fenced).
fn fence_lines(pack: &Pack) -> (String, String) {
    match &pack.fence {
        Some(id) => (render::fence_open(id), render::fence_close(id)),
        None => (String::new(), String::new()),
    }
}

/// `text` between a fenced pack's markers, as one string.
pub(crate) fn fenced(pack: &Pack, text: &str) -> String {
    match &pack.fence {
        Some(id) => format!(
            "{}{text}\n{}",
            render::fence_open(id),
            render::fence_close(id)
        )
        .trim_end_matches('\n')
        .to_string(),
        None => text.to_string(),
    }
}

#[derive(Serialize)]
struct JsonPack<'a> {
    title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    topic: Option<&'a str>,
    mode: &'a str,
    generated: &'a str,
    budget: usize,
    actual: usize,
    counter: Tokenizer,
    pages: usize,
    candidates: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'static str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    notices: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    fence: Option<&'a str>,
    documents: Vec<JsonDocument<'a>>,
}

#[derive(Serialize)]
struct JsonDocument<'a> {
    source: &'a str,
    title: &'a str,
    tier: &'a str,
    tags: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    aliases: &'a [String],
    summary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    backlinks: &'a [String],
}

fn json(pack: &Pack, actual: usize) -> String {
    let model = JsonPack {
        title: title(pack),
        topic: pack.topic.as_deref(),
        mode: pack.mode,
        generated: &pack.generated,
        budget: pack.budget,
        actual,
        counter: pack.counter,
        pages: pack.pages.len(),
        candidates: pack.candidates,
        message: empty_message(pack),
        notices: &pack.preface,
        fence: pack.fence.as_deref(),
        // A fenced pack's summaries and contents carry the markers in
        // their strings, as a model reads them.
        documents: documents(pack)
            .map(|page| JsonDocument {
                source: &page.path,
                title: &page.title,
                tier: &page.shown.label,
                tags: &page.tags,
                aliases: &page.aliases,
                summary: fenced(pack, &page.shown.summary),
                content: page.shown.body.as_deref().map(|body| fenced(pack, body)),
                backlinks: &page.backlinks,
            })
            .collect(),
    };
    // Plain data of strings and numbers always serializes.
    let mut text = serde_json::to_string_pretty(&model).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escape_keeps_structure_characters_out() {
        assert_eq!(
            xml_escape("</document> ]]> & \"q\" \u{1}\t"),
            "&lt;/document&gt; ]]&gt; &amp; &quot;q&quot; \u{fffd}\t"
        );
    }

    #[test]
    fn the_printed_pack_is_redacted_with_true_counts_or_refitted() {
        use crate::pack::{PackMode, PackOptions, build_pack};
        let vault = crate::vault::Vault::from_texts(
            "/v".into(),
            &[(
                "raft.md".into(),
                "# Raft\n\nraft leader SLOT quorum\n".into(),
            )],
        );
        let at = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .to_utc();
        let policy = crate::privacy::Policy::default();
        let redact = |text: &str| policy.redact_printed(text);
        for tokenizer in [Tokenizer::Chars4, Tokenizer::O200k] {
            let mut pack = build_pack(
                &vault,
                &PackMode::Topic("raft".into()),
                &PackOptions::new(1000, tokenizer, at),
            );
            let token = "ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL0zX9cV7b";
            pack.bundle = pack.bundle.replace("SLOT", token);
            let redacted = redact_printed(pack.clone(), 1000, redact).unwrap();
            assert!(!redacted.bundle.contains(token));
            assert!(
                redacted
                    .bundle
                    .contains("raft leader [REDACTED:github_token] quorum")
            );
            assert_eq!(redacted.actual, tokenizer.count(&redacted.bundle));
            assert!(
                redacted
                    .bundle
                    .contains(&format!("| Actual: {} tokens |", redacted.actual))
            );
            // A placeholder longer than its secret (in characters; exact
            // counters charge random keys more than placeholders), in a pack
            // at its budget: packed again under a smaller one.
            pack.bundle = pack
                .bundle
                .replace(token, &["AKIA29326ML64LG2TJF8"; 5].join(" "));
            let full = tokenizer.count(&pack.bundle);
            pack.actual = full;
            let refit = redact_printed(pack.clone(), full, redact).map(|p| p.bundle);
            if tokenizer == Tokenizer::Chars4 {
                assert_eq!(refit, Err(10));
            } else {
                assert!(refit.is_ok_and(|text| tokenizer.count(&text) <= full));
            }
            // Nothing to redact: the pack comes back as it was.
            let clean = build_pack(
                &vault,
                &PackMode::Topic("raft".into()),
                &PackOptions::new(1000, tokenizer, at),
            );
            assert_eq!(
                redact_printed(clean.clone(), 1000, redact).unwrap().bundle,
                clean.bundle
            );
        }
    }

    #[test]
    fn styles_parse_by_name() {
        for style in Style::ALL {
            assert_eq!(style.name().parse::<Style>(), Ok(style));
        }
        assert!("html".parse::<Style>().is_err());
    }
}
