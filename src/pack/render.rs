//! The exact text of a pack (seed Step 5).

use crate::note::{NoteMeta, TitleSource};

pub const EMPTY_TOPIC_TEXT: &str =
    "No relevant pages found. Consider running /wiki-ingest to add sources about this topic.";
pub const EMPTY_RECENT_TEXT: &str =
    "No recent pages found. Consider running /wiki-ingest to add sources.";
pub const LARGE_PACK_WARNING: &str = "This pack is large. Consider narrowing your topic or using wiki-query for a targeted answer instead.";

// The seed's texts above name obsidian-wiki's own skills (`/wiki-ingest`,
// `wiki-query`), which only its vaults have; every other vault gets these.
pub const PLAIN_EMPTY_TOPIC_TEXT: &str =
    "No relevant pages found. No note of the vault matches this topic.";
pub const PLAIN_EMPTY_RECENT_TEXT: &str = "No recent pages found. The vault has no notes.";

/// The text of a pack with nothing to show: the seed's in an
/// obsidian-wiki vault (`wiki`), else one naming nothing the user lacks.
pub fn empty_text(topic: bool, wiki: bool) -> &'static str {
    match (topic, wiki) {
        (true, true) => EMPTY_TOPIC_TEXT,
        (false, true) => EMPTY_RECENT_TEXT,
        (true, false) => PLAIN_EMPTY_TOPIC_TEXT,
        (false, false) => PLAIN_EMPTY_RECENT_TEXT,
    }
}

/// The large-pack warning outside obsidian-wiki vaults: about the pack's
/// size, which a large budget alone does not make.
pub fn large_pack_warning(actual: usize) -> String {
    format!("This pack is large ({actual} tokens). Consider narrowing the topic.")
}

/// The four `#` lines that open a pack.
pub struct Header<'a> {
    pub title: &'a str,
    pub generated: &'a str,
    pub budget: usize,
    pub actual: usize,
    pub included: usize,
    pub candidates: usize,
    pub methodology: &'a str,
}

impl Header<'_> {
    pub fn render(&self) -> String {
        format!(
            "# {}\n# Generated: {}\n# Budget: {} tokens | Actual: {} tokens | Pages: {} / {}\n# Methodology: {}\n",
            self.title,
            self.generated,
            self.budget,
            self.actual,
            self.included,
            self.candidates,
            self.methodology
        )
    }
}

/// The first line of a page block: `---` and the page's heading. `label`
/// is the page's tier, or `daily` for a recent daily note.
pub fn page_head(name: &str, label: &str, tokens: usize) -> String {
    format!("---\n## [[{name}]] ({label}, ~{tokens} tokens)\n")
}

/// One backlink entry: the linking note and the sentence around the link.
pub fn backlink_line(name: &str, title: &str, context: &str) -> String {
    let context = crate::text::collapse_whitespace(context);
    let context = context.trim_start_matches(['-', '*', '+', '>', '#', ' ']);
    let context = crate::text::truncate_chars(context, 200);
    if crate::text::fold(title) == crate::text::fold(name.rsplit('/').next().unwrap_or(name)) {
        format!("- [[{name}]]: {context}")
    } else {
        format!("- [[{name}|{title}]]: {context}")
    }
}

/// The rest of a page block: tags, summary and the body, if any, ending
/// in a blank line.
pub fn page_rest(
    note: &NoteMeta,
    summary: &str,
    body: Option<&str>,
    backlinks: &[String],
) -> String {
    let tags = if note.tags.is_empty() {
        "(none)".to_string()
    } else {
        note.tags
            .iter()
            .map(|tag| format!("#{}", tag.split_whitespace().collect::<Vec<_>>().join("-")))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let summary = if summary.is_empty() {
        "(none)"
    } else {
        summary
    };
    // Pages with a `title:` field (obsidian-wiki pages) keep the seed's
    // two lines even when empty; elsewhere an empty line says nothing.
    let wiki_page = note.title_source == TitleSource::Frontmatter;
    let mut rest = String::new();
    if wiki_page || !note.tags.is_empty() {
        rest.push_str(&format!("tags: {tags}\n"));
    }
    if wiki_page || !summary.is_empty() {
        rest.push_str(&format!("summary: {summary}\n"));
    }
    if !rest.is_empty() {
        rest.push('\n');
    }
    if let Some(body) = body {
        rest.push_str(body);
        rest.push_str("\n\n");
    }
    if !backlinks.is_empty() {
        rest.push_str("backlinks:\n");
        for line in backlinks {
            rest.push_str(line);
            rest.push('\n');
        }
        rest.push('\n');
    }
    rest
}

/// The whole text of a pack without pages.
pub fn empty(title: &str, message: &str) -> String {
    format!("# {title}\n\n{message}\n")
}
