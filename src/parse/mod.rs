//! Parsing one note: frontmatter, derived fields and the body's structure.
//!
//! Parsing never fails: a note always comes back, with a list of problems.

pub(crate) mod base;
pub(crate) mod canvas;
pub(crate) mod frontmatter;
pub(crate) mod link_lists;
pub(crate) mod markdown;
pub(crate) mod properties;
pub(crate) mod reader;
pub(crate) mod yaml;

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};

use crate::note::{Note, NoteMeta, SummarySource, Tier, TitleSource, UpdatedSource};
use crate::text::{collapse_whitespace, truncate_chars};

/// Fallback summaries are cut to this many characters.
pub(crate) const SUMMARY_FALLBACK_CHARS: usize = 400;

/// Parses a note's text. `path` is relative to the vault, `/`-separated.
pub fn parse_note(path: &str, text: &str, mtime: Option<DateTime<Utc>>) -> (Note, Vec<String>) {
    parse_note_with_fields(path, text, mtime, None)
}

/// [`parse_note`], with `fields` (when given) standing for what the
/// frontmatter block says.
pub(crate) fn parse_note_with_fields(
    path: &str,
    text: &str,
    mtime: Option<DateTime<Utc>>,
    fields: Option<yaml_serde::Mapping>,
) -> (Note, Vec<String>) {
    let mut problems = Vec::new();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let split = frontmatter::split(text);
    problems.extend(split.problem);
    let fields = match fields
        .map(Ok)
        .or_else(|| split.yaml.map(frontmatter::parse))
    {
        Some(Ok(fields)) => fields,
        Some(Err(problem)) => {
            problems.push(problem.to_string());
            yaml_serde::Mapping::new()
        }
        None => yaml_serde::Mapping::new(),
    };
    let body = split.body.to_string();
    let analysis = markdown::analyze(&body);

    let field = |key: &str| frontmatter::get(&fields, key);
    let field_text = |key: &str| field(key).and_then(frontmatter::scalar);

    let stem = path.rsplit('/').next().unwrap_or(path);
    let stem = stem
        .strip_suffix(".md")
        .or_else(|| stem.strip_suffix(".canvas"))
        .unwrap_or(stem);
    // Obsidian calls a note without `title:` by its file name (what links
    // resolve to); a differing first H1 stays searchable as a heading.
    let (title, title_source) = match field_text("title") {
        Some(title) => (collapse_whitespace(&title), TitleSource::Frontmatter),
        None => (stem.to_string(), TitleSource::FileName),
    };

    let aliases = field("aliases")
        .or_else(|| field("alias"))
        .map(|v| frontmatter::list(v, &[',']))
        .unwrap_or_default();

    let mut tags: Vec<String> = Vec::new();
    // Each tag once, compared as `eq_ignore_ascii_case` does: one lookup a
    // tag, not a scan of every earlier one.
    let mut seen_tags: rustc_hash::FxHashSet<String> = rustc_hash::FxHashSet::default();
    let frontmatter_tags = field("tags")
        .or_else(|| field("tag"))
        .map(|v| frontmatter::list(v, &[',', ' ']))
        .unwrap_or_default();
    for tag in frontmatter_tags.iter().chain(&analysis.inline_tags) {
        let tag = tag.trim_start_matches('#');
        if !tag.is_empty() && seen_tags.insert(tag.to_ascii_lowercase()) {
            tags.push(tag.to_string());
        }
    }

    let tier = match field_text("tier") {
        None => Tier::Supporting,
        Some(text) => Tier::parse(&text).unwrap_or_else(|| {
            problems.push(format!("unknown tier '{text}'; treated as supporting"));
            Tier::Supporting
        }),
    };

    let (summary, summary_source) =
        match field_text("summary").or_else(|| field_text("description")) {
            Some(summary) => (collapse_whitespace(&summary), SummarySource::Frontmatter),
            // The note's first paragraph that a reader sees words in:
            // badges, images without alt text and embeds alone do not count,
            // nor does a lead-in to what follows ("To delete an image:"). A
            // note with no lead (`# Title`, then sections) is summarised by
            // its first section's words, and a note of sections with no
            // paragraph at all (link lists, tables) by its sections' names:
            // an entry with no words said nothing of the note.
            None => {
                // The lead ends at the first heading under the title.
                let lead_end = analysis
                    .blocks
                    .iter()
                    .position(|b| {
                        b.kind == markdown::BlockKind::Heading
                            && b.heading
                                .and_then(|h| analysis.headings.get(h))
                                .is_none_or(|h| h.level > 1)
                    })
                    .unwrap_or(analysis.blocks.len());
                // What the note opens with, in its lead.
                let lead_paragraph = analysis.blocks[..lead_end]
                    .iter()
                    .filter(|b| b.kind == markdown::BlockKind::Paragraph)
                    .filter(|b| !is_links_only(&body[b.range.clone()]))
                    .map(|b| reader::reader_text(&body[b.range.clone()]))
                    .find(|text| has_prose(text) && !is_lead_in(text));
                // Else the first words any block says: a section's paragraph,
                // or a list's items (a daily note, meeting notes).
                let first_words = || {
                    analysis.blocks.iter().find_map(|b| {
                        let text = &body[b.range.clone()];
                        match b.kind {
                            markdown::BlockKind::Paragraph if !is_links_only(text) => {
                                let text = reader::reader_text(text);
                                (has_prose(&text) && !is_lead_in(&text) && says_something(&text))
                                    .then(|| {
                                        let text = collapse_whitespace(&text);
                                        let first = crate::text::first_sentence(
                                            &text,
                                            crate::pack::SHORT_SUMMARY_CHARS,
                                        );
                                        (first, SummarySource::Section)
                                    })
                            }
                            markdown::BlockKind::List => {
                                list_summary(text, true).map(|items| (items, SummarySource::List))
                            }
                            _ => None,
                        }
                    })
                };
                // Else a list of short items (`Milk`, `Eggs`).
                let short_items = || {
                    analysis
                        .blocks
                        .iter()
                        .filter(|b| b.kind == markdown::BlockKind::List)
                        .find_map(|b| list_summary(&body[b.range.clone()], false))
                        .map(|items| (items, SummarySource::List))
                };
                match lead_paragraph {
                    Some(text) => (
                        truncate_chars(&collapse_whitespace(&text), SUMMARY_FALLBACK_CHARS),
                        SummarySource::FirstParagraph,
                    ),
                    None => match first_words().or_else(short_items) {
                        Some(found) => found,
                        None => match section_names(&analysis.headings) {
                            Some(names) => (
                                truncate_chars(&names, crate::pack::SHORT_SUMMARY_CHARS),
                                SummarySource::Sections,
                            ),
                            None => match linked_properties(&fields) {
                                Some(said) => (
                                    truncate_chars(&said, crate::pack::SHORT_SUMMARY_CHARS),
                                    SummarySource::Properties,
                                ),
                                None => (String::new(), SummarySource::None),
                            },
                        },
                    },
                }
            }
        };

    let summary = reader::links_as_words(&summary);

    let mut dated = |names: &[&str]| -> Option<DateTime<Utc>> {
        names.iter().find_map(|name| {
            let (key, raw) = frontmatter::get_loosely(&fields, name)
                .and_then(|(key, value)| Some((key, frontmatter::scalar(value)?)))?;
            let parsed = parse_datetime(&raw);
            if parsed.is_none() {
                problems.push(format!("'{key}: {raw}' is not a date; ignored"));
            }
            parsed
        })
    };
    // A note's own dates come before the file's time, which a checkout,
    // a sync or a copy resets.
    let path_date = daily_date(path);
    let (updated, updated_source) = if let Some(date) = dated(UPDATED_KEYS) {
        (Some(date), UpdatedSource::Updated)
    } else if let Some(date) =
        dated(CREATED_KEYS).or_else(|| path_date.as_deref().and_then(parse_datetime))
    {
        (Some(date), UpdatedSource::Created)
    } else if let Some(mtime) = mtime {
        (Some(mtime), UpdatedSource::FileMtime)
    } else {
        (None, UpdatedSource::Unknown)
    };

    let daily = path_date.or_else(|| {
        field_text("date")
            .and_then(|d| parse_datetime(&d))
            .map(|d| d.format("%Y-%m-%d").to_string())
    });
    let note = Note {
        meta: NoteMeta {
            path: path.to_string(),
            title,
            title_source,
            aliases,
            tags,
            summary,
            summary_source,
            tier,
            updated: updated.map(|d| d.timestamp()),
            updated_source,
            daily,
            link_lists: link_lists::link_list_percent(&body, &analysis.blocks),
        },
        properties: properties::properties(&fields),
        frontmatter: with_inline_fields(fields.clone(), &analysis.inline_fields),
        headings: analysis.headings,
        blocks: analysis.blocks,
        links: analysis.links,
        body,
        redactions: Vec::new(),
    };
    (note, problems)
}

/// The frontmatter plus the body's Dataview inline fields (`key:: value`),
/// each under a key the frontmatter does not already have: usable as
/// fields (by the privacy rules too), while the body keeps them as text.
fn with_inline_fields(
    mut fields: yaml_serde::Mapping,
    inline: &[(String, String)],
) -> yaml_serde::Mapping {
    use yaml_serde::Value;
    // As Dataview reads them, a key given more than once (in the
    // frontmatter, inline) holds every value given: a list. So no earlier
    // `private:: false`, or an empty `private:` property, hides a later
    // `private:: true`.
    for (key, value) in inline {
        let value = Value::String(value.clone());
        match fields.get_mut(Value::String(key.clone())) {
            None => {
                fields.insert(Value::String(key.clone()), value);
            }
            Some(existing @ Value::Null) => *existing = value,
            Some(Value::Sequence(items)) => items.push(value),
            Some(existing) => {
                let first = std::mem::replace(existing, Value::Null);
                *existing = Value::Sequence(vec![first, value]);
            }
        }
    }
    fields
}

/// The `YYYY-MM-DD` date that starts the file name or a folder name.
fn daily_date(path: &str) -> Option<String> {
    let path = path.strip_suffix(".md").unwrap_or(path);
    path.rsplit('/').find_map(|segment| {
        let date = segment.get(..10)?;
        let bytes = date.as_bytes();
        let shaped = bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        });
        let ends = segment[10..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_ascii_digit());
        (shaped && ends && NaiveDate::parse_from_str(date, "%Y-%m-%d").is_ok())
            .then(|| date.to_string())
    })
}

/// True when a paragraph only introduces what follows it: it ends in a
/// colon (`方式 1：`, `Run this:`).
/// Whether a paragraph under a section can speak for a note with no lead:
/// a sentence, not a label (`本地安装`) or a lone link.
fn says_something(text: &str) -> bool {
    text.trim().chars().count() >= 12
}

/// Whether a paragraph or list item, as written, is links and nothing
/// else (a bookmark, a contents entry, `[A](#a) [B](#b)`): its words are
/// other pages' titles. Read before the reader's view, which shows a long
/// link by its label alone.
pub(crate) fn is_links_only(raw: &str) -> bool {
    // A block id after the links (`[网络](#network) ^dee618`) is no word.
    let raw = match raw.trim_end().rsplit_once(" ^") {
        Some((before, id))
            if !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') =>
        {
            before
        }
        _ => raw,
    };
    let mut rest = raw;
    let mut outside = String::new();
    let mut links = 0;
    while let Some(open) = rest.find('[') {
        outside.push_str(&rest[..open]);
        let from = &rest[open..];
        let end = match from.strip_prefix("[[") {
            Some(inner) => inner.find("]]").map(|end| 2 + end + 2),
            None => from
                .find("](")
                .and_then(|mid| from[mid + 2..].find(')').map(|end| mid + 2 + end + 1)),
        };
        match end {
            Some(end) => {
                links += 1;
                rest = &from[end..];
            }
            None => {
                rest = from;
                break;
            }
        }
    }
    outside.push_str(rest);
    links > 0 && !outside.chars().any(char::is_alphanumeric)
}

/// A list's top-level items that have words, joined (`A · B · C`) up to a
/// short summary's length; none when no item has words (a list of links,
/// of images), or, when `sentence` is asked for, when no item says
/// something on its own.
fn list_summary(list: &str, sentence: bool) -> Option<String> {
    let mut items: Vec<String> = Vec::new();
    let indent = |line: &str| line.len() - line.trim_start().len();
    let base = list
        .lines()
        .find(|line| !line.trim().is_empty())
        .map_or(0, indent);
    // Whether the lines read last belong to a top-level item (not to an
    // item nested under it, whose next lines are its own).
    let mut in_top_item = false;
    for line in list.lines() {
        let trimmed = line.trim_start();
        match list_item_text(trimmed) {
            Some(item) if indent(line) <= base => {
                items.push(item.to_string());
                in_top_item = true;
            }
            Some(_) => in_top_item = false,
            // An item's next line.
            None => {
                if in_top_item
                    && indent(line) > base
                    && let Some(last) = items.last_mut()
                {
                    last.push('\n');
                    last.push_str(trimmed);
                }
            }
        }
    }
    let items: Vec<String> = items
        .iter()
        // Not links alone, nor an item holding code (a command to run).
        .filter(|item| !is_links_only(item) && !item.contains("```") && !item.contains("~~~"))
        .map(|item| collapse_whitespace(&reader::reader_text(item)))
        .filter(|item| has_prose(item) && !is_lead_in(item))
        .collect();
    // One short item (`Milk`) says little; one sentence or a few items do.
    let enough = if sentence {
        items.iter().any(|item| says_something(item))
    } else {
        items.len() >= 2
    };
    if !enough {
        return None;
    }
    let limit = crate::pack::SHORT_SUMMARY_CHARS;
    // The first item's first sentence, unless that says too little alone
    // (`什么？`): then the item, cut.
    let first = crate::text::first_sentence(&items[0], limit);
    let mut summary = if says_something(&first) || first == items[0] {
        first
    } else {
        truncate_chars(&items[0], limit)
    };
    for item in &items[1..] {
        if summary.ends_with('…') || summary.chars().count() + 3 + item.chars().count() > limit {
            break;
        }
        summary.push_str(" · ");
        summary.push_str(item);
    }
    Some(summary)
}

/// The text of a list item's first line (`- x`, `* x`, `+ x`, `1. x`,
/// `1) x`, a task's box left out), or `None` for a line that starts none.
fn list_item_text(line: &str) -> Option<&str> {
    let rest = if let Some(rest) = line.strip_prefix(['-', '*', '+']) {
        rest
    } else {
        let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 || digits > 9 {
            return None;
        }
        line[digits..].strip_prefix(['.', ')'])?
    };
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let rest = rest.trim_start();
    let rest = ["[ ] ", "[x] ", "[X] "]
        .iter()
        .find_map(|task| rest.strip_prefix(task))
        .unwrap_or(rest);
    Some(rest)
}

/// The properties that link to notes, as `categories: People · type:
/// Musicians`: what a note of embeds and properties alone (a person, a
/// place, a book in a Bases vault) says of itself.
fn linked_properties(fields: &yaml_serde::Mapping) -> Option<String> {
    let shown = properties::properties(fields);
    let mut linked: Vec<usize> = properties::property_links(fields)
        .into_iter()
        .map(|(index, _)| index)
        .collect();
    linked.dedup();
    let said: Vec<String> = linked
        .into_iter()
        .filter_map(|index| shown.get(index))
        .filter(|(key, value)| !properties::is_stamp_or_picture(key, value))
        .take(3)
        .map(|(key, value)| format!("{key}: {}", reader::links_as_words(value)))
        .collect();
    (!said.is_empty()).then(|| said.join(" · "))
}

/// `Sections: A · B · C`, the names of a note's sections under its title
/// (none when it has fewer than two: one name says little). Sections at
/// the title's level count too when the note does not open with a title
/// (`## Books`, then `# Clippings`).
fn section_names(headings: &[markdown::Heading]) -> Option<String> {
    let below_title = headings.iter().map(|h| h.level).filter(|&l| l > 1).min()?;
    let opens_with_title = headings.first().is_some_and(|h| h.level == 1);
    let names: Vec<String> = headings
        .iter()
        .filter(|h| h.level == below_title || (!opens_with_title && h.level == 1))
        .map(|h| reader::reader_text(&h.text))
        .filter(|name| !name.trim().is_empty())
        .collect();
    (names.len() >= 2).then(|| format!("Sections: {}", names.join(" · ")))
}

fn is_lead_in(paragraph: &str) -> bool {
    paragraph.trim_end().ends_with([':', '：'])
}

/// True when a paragraph says something beyond embedding other files.
fn has_prose(paragraph: &str) -> bool {
    let mut rest = paragraph;
    while let Some(start) = rest.find("![[") {
        if rest[..start].chars().any(char::is_alphanumeric) {
            return true;
        }
        match rest[start..].find("]]") {
            Some(end) => rest = &rest[start + end + 2..],
            None => return true,
        }
    }
    rest.chars().any(char::is_alphanumeric)
}

/// Reads the date forms found in frontmatter: RFC 3339, `YYYY-MM-DD`,
/// `YYYY-MM-DD HH:MM[:SS]` and `YYYY-MM-DDTHH:MM[:SS]` (taken as UTC).
/// The properties a note's last change is read from, in this order (keys
/// compared as [`frontmatter::get_loosely`] does): what Obsidian plugins
/// write (`updated`, the Linter's `date modified`), static site
/// generators (`lastmod`) and exports (`last edited time`); `date` last,
/// as it is as often a day of writing or publishing.
const UPDATED_KEYS: &[&str] = &[
    "updated",
    "modified",
    "date modified",
    "last modified",
    "lastmod",
    "updated at",
    "modified at",
    "last edited time",
    "date",
];
/// The properties a note's creation is read from, when no change is given.
const CREATED_KEYS: &[&str] = &[
    "created",
    "date created",
    "created at",
    "creation date",
    // Web Clipper templates: the day the page was clipped into the vault.
    "clipped",
    "date clipped",
];

/// The names of the week's days, which some date formats lead with.
const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// A date written out in words as plugins and exports write them
/// (`Thursday, March 7th 2024, 10:15:02 am`, the Obsidian Linter's
/// default; `March 7, 2024 10:15 AM`, Notion's), in the numeric form
/// [`parse_datetime`] reads: the weekday and ordinal suffixes left out.
fn words_to_numeric(text: &str) -> Option<DateTime<Utc>> {
    let mut rest = text.trim();
    if let Some((first, after)) = rest.split_once(',')
        && WEEKDAYS.contains(&first.trim().to_ascii_lowercase().as_str())
    {
        rest = after.trim_start();
    }
    // `7th` -> `7`, only right after the day's digits.
    let mut cleaned = String::with_capacity(rest.len());
    let bytes = rest.as_bytes();
    let mut at = 0;
    while at < rest.len() {
        let suffix = &rest[at..];
        let after_digit = at > 0 && bytes[at - 1].is_ascii_digit();
        let ordinal = ["st", "nd", "rd", "th"].iter().find(|s| {
            suffix.len() >= 2
                && suffix.as_bytes()[..2].eq_ignore_ascii_case(s.as_bytes())
                && !suffix
                    .as_bytes()
                    .get(2)
                    .is_some_and(u8::is_ascii_alphanumeric)
        });
        match ordinal {
            Some(_) if after_digit => at += 2,
            _ => {
                let ch = suffix.chars().next()?;
                cleaned.push(ch);
                at += ch.len_utf8();
            }
        }
    }
    for format in [
        "%B %d %Y, %I:%M:%S %p",
        "%B %d %Y, %I:%M %p",
        "%B %d, %Y %I:%M:%S %p",
        "%B %d, %Y %I:%M %p",
        "%B %d, %Y, %I:%M %p",
        "%B %d %Y %H:%M",
        "%B %d, %Y %H:%M",
    ] {
        if let Ok(date) = NaiveDateTime::parse_from_str(&cleaned, format) {
            return Some(date.and_utc());
        }
    }
    for format in ["%B %d %Y", "%B %d, %Y", "%d %B %Y"] {
        if let Ok(date) = NaiveDate::parse_from_str(&cleaned, format) {
            return date.and_hms_opt(0, 0, 0).map(|d| d.and_utc());
        }
    }
    None
}

pub fn parse_datetime(text: &str) -> Option<DateTime<Utc>> {
    let text = text.trim().trim_matches(['"', '\'']);
    if let Ok(date) = DateTime::parse_from_rfc3339(text) {
        return Some(date.with_timezone(&Utc));
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%d, %H:%M:%S",
        "%Y-%m-%d, %H:%M",
        "%Y/%m/%d %H:%M:%S",
        "%Y/%m/%d %H:%M",
    ] {
        if let Ok(date) = NaiveDateTime::parse_from_str(text, format) {
            return Some(date.and_utc());
        }
    }
    for format in ["%Y-%m-%d", "%Y/%m/%d", "%Y.%m.%d"] {
        if let Ok(date) = NaiveDate::parse_from_str(text, format) {
            return date.and_hms_opt(0, 0, 0).map(|d| d.and_utc());
        }
    }
    if text.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return words_to_numeric(text);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derives_title_tier_summary_and_updated() {
        let text = "---\ntitle: >-\n  Folded\n  title\ntier: CORE\ntags: [a, '#b']\n\
                    updated: 2026-05-14\n---\n# Heading title\n\nLead paragraph #inline.\n";
        let (note, problems) = parse_note("concepts/x.md", text, None);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(note.meta.title, "Folded title");
        assert_eq!(note.meta.tier, Tier::Core);
        assert_eq!(note.meta.tags, ["a", "b", "inline"]);
        assert_eq!(note.meta.summary, "Lead paragraph #inline.");
        assert_eq!(note.meta.summary_source, SummarySource::FirstParagraph);
        assert_eq!(note.meta.updated_source, UpdatedSource::Updated);
        assert_eq!(note.meta.stem(), "x");
    }

    #[test]
    fn tags_are_kept_once_in_first_seen_case_however_many() {
        let text = "---\ntags: [Rust, ai, rust]\n---\nText #rust #AI #new #Ünï #ünï\n";
        let (note, _) = parse_note("x.md", text, None);
        // ASCII case folds; other letters' case does not (as before).
        assert_eq!(note.meta.tags, ["Rust", "ai", "new", "Ünï", "ünï"]);
        let many: String = (0..20_000).map(|i| format!("#t{i} #T{i} ")).collect();
        let (note, _) = parse_note("y.md", &format!("---\ntags: [t5, x]\n---\n{many}"), None);
        assert_eq!(note.meta.tags.len(), 20_001);
        assert_eq!(note.meta.tags[..3], ["t5", "x", "t0"]);
        assert_eq!(note.meta.tags[20_000], "t19999");
    }

    #[test]
    fn sections_follow_headings() {
        let (note, _) = parse_note(
            "x.md",
            "Intro.\n\n# A\n\none\n\n## B\n\ntwo\n```\n# not a heading\n```\n",
            None,
        );
        let sections: Vec<_> = note
            .sections()
            .iter()
            .map(|s| (s.heading, note.body[s.range.clone()].trim().to_string()))
            .collect();
        assert_eq!(
            sections,
            [
                (None, "Intro.".to_string()),
                (Some(0), "# A\n\none".to_string()),
                (
                    Some(1),
                    "## B\n\ntwo\n```\n# not a heading\n```".to_string()
                ),
            ]
        );
        assert_eq!(note.heading_path(1), ["A", "B"]);
    }

    #[test]
    fn a_note_has_at_most_max_sections_the_last_holding_the_rest() {
        use crate::note::MAX_SECTIONS;
        let body: String = (0..MAX_SECTIONS + 5)
            .map(|i| format!("# h{i}\n\nword{i}\n"))
            .collect();
        for preamble in ["", "Intro.\n\n"] {
            let text = format!("{preamble}{body}");
            let (note, _) = parse_note("x.md", &text, None);
            let sections = note.sections();
            assert_eq!(sections.len(), MAX_SECTIONS);
            let last = sections.last().unwrap();
            assert_eq!(last.range.end, note.body.len());
            let rest = &note.body[last.range.clone()];
            let kept = MAX_SECTIONS - usize::from(!preamble.is_empty()) - 1;
            assert!(rest.starts_with(&format!("# h{kept}\n")), "{}", &rest[..20]);
            assert!(rest.ends_with(&format!("word{}\n", MAX_SECTIONS + 4)));
            // Sections still tile the body after the preamble.
            for pair in sections.windows(2) {
                assert_eq!(pair[0].range.end, pair[1].range.start);
            }
        }
        // At the bound, nothing changes.
        let text: String = (0..MAX_SECTIONS).map(|i| format!("# h{i}\n")).collect();
        let (note, _) = parse_note("x.md", &text, None);
        let sections = note.sections();
        assert_eq!(sections.len(), MAX_SECTIONS);
        assert_eq!(
            &note.body[sections[MAX_SECTIONS - 1].range.clone()],
            format!("# h{}\n", MAX_SECTIONS - 1)
        );
    }

    #[test]
    fn without_a_title_field_the_file_name_is_the_title() {
        let (note, _) = parse_note("a/Raft elections.md", "# Overview\n\ntext\n", None);
        assert_eq!(
            (note.meta.title.as_str(), note.meta.title_source),
            ("Raft elections", TitleSource::FileName)
        );
        assert_eq!(note.heading_title(), Some("Overview"));
        let (note, _) = parse_note("a/b.md", "text only\n", None);
        assert_eq!(
            (
                note.meta.title.as_str(),
                note.meta.title_source,
                note.heading_title()
            ),
            ("b", TitleSource::FileName, None)
        );
        let (note, _) = parse_note("a/b.md", "---\ntitle: Field\n---\n# Heading\n", None);
        assert_eq!(
            (note.meta.title.as_str(), note.meta.title_source),
            ("Field", TitleSource::Frontmatter)
        );
        // An H1 that only repeats the file name adds nothing.
        let (note, _) = parse_note("a/Raft.md", "# raft\n\ntext\n", None);
        assert_eq!(note.heading_title(), None);
    }

    #[test]
    fn summary_comes_from_a_field_else_the_leads_first_sentence() {
        let summary = |text: &str| parse_note("n.md", text, None).0.meta.summary;
        assert_eq!(
            summary("---\ndescription: What it is.\n---\nLead.\n"),
            "What it is."
        );
        // Shown alone, a summary's links are their words.
        assert_eq!(
            summary(
                "An idea is [[Composability|composable]], see [[Raft#Log]], [JDK](../Java_Note.md#jdk) and [集合](#集合).\n"
            ),
            "An idea is composable, see [[Raft#Log]], JDK and 集合."
        );
        assert_eq!(
            summary("---\nsummary: \"On [[Evergreen notes|evergreen]] notes\"\n---\n"),
            "On evergreen notes"
        );
        assert_eq!(
            summary("# Title\n\n方式 1：\n\nThe real lead.\n\n## Later\n\nLater text.\n"),
            "The real lead."
        );
        // With no lead, the first section speaks for the note, briefly;
        // with no paragraph at all, the sections' names do.
        assert_eq!(
            summary("## Quotes\n\nA remark worth keeping.\n"),
            "A remark worth keeping."
        );
        // Not a label or a lone link, and not one section's name.
        assert_eq!(summary("# T\n\n## Install\n\n本地安装\n"), "");
        assert_eq!(
            summary("# T\n\n## Plugins\n\n[Common plugins](Editors.md#plugins)\n"),
            ""
        );
        assert_eq!(
            summary(
                "# T\n\n## Overview\n\nBeta widgets help with gardening in spring. They also prune roses.\n"
            ),
            "Beta widgets help with gardening in spring."
        );
        assert_eq!(
            summary("# T\n\n## Agent\n\n- [[a]]\n\n## Related\n\n- [[b]]\n"),
            "Sections: Agent · Related"
        );
        assert_eq!(summary("Run this:\n\n```\nx\n```\n"), "");
    }

    #[test]
    fn dates_come_from_properties_then_the_daily_name_then_the_file() {
        let mtime = parse_datetime("2026-03-03");
        let dated = |path: &str, text: &str| {
            let note = parse_note(path, text, mtime).0.meta;
            (note.updated, note.updated_source)
        };
        let day = |d: &str| parse_datetime(d).map(|d| d.timestamp());
        assert_eq!(
            dated(
                "n.md",
                "---\ndate: 2025-01-02\ncreated: 2024-01-01\n---\nx\n"
            ),
            (day("2025-01-02"), UpdatedSource::Updated)
        );
        assert_eq!(
            dated(
                "n.md",
                "---\nmodified: 2025-05-05\ndate: 2025-01-02\n---\nx\n"
            ),
            (day("2025-05-05"), UpdatedSource::Updated)
        );
        assert_eq!(
            dated("journal/2025-02-03.md", "x\n"),
            (day("2025-02-03"), UpdatedSource::Created)
        );
        assert_eq!(
            dated("n.md", "x\n"),
            (day("2026-03-03"), UpdatedSource::FileMtime)
        );
    }

    #[test]
    fn dates_are_read_under_the_keys_and_in_the_words_plugins_and_exports_use() {
        let dated = |text: &str| {
            let (note, problems) = parse_note("n.md", text, parse_datetime("2026-03-03"));
            (
                note.meta
                    .updated
                    .and_then(|s| DateTime::from_timestamp(s, 0)),
                note.meta.updated_source,
                problems,
            )
        };
        let at = |text: &str| parse_datetime(text);
        // The Obsidian Linter's keys and default format.
        assert_eq!(
            dated(
                "---\ndate created: Monday, January 1st 2024, 9:00:00 am\n\
                 date modified: Thursday, March 7th 2024, 10:15:02 pm\n---\nx\n"
            ),
            (at("2024-03-07T22:15:02"), UpdatedSource::Updated, vec![])
        );
        assert_eq!(
            dated("---\nDate Created: Saturday, February 22nd 2025, 12:05:00 am\n---\nx\n"),
            (at("2025-02-22T00:05:00"), UpdatedSource::Created, vec![])
        );
        // Notion's export, Hugo's key, snake and camel case.
        assert_eq!(
            dated("---\nLast Edited Time: March 7, 2024 10:15 AM\n---\nx\n").0,
            at("2024-03-07T10:15")
        );
        assert_eq!(
            dated("---\nlastmod: 2024-03-07\n---\nx\n").0,
            at("2024-03-07")
        );
        assert_eq!(
            dated("---\ndate_created: 2023-01-01\ncreatedAt: 2022-01-01\n---\nx\n").0,
            at("2023-01-01")
        );
        assert_eq!(
            dated("---\nmodifiedAt: 2021-12-31 23:59\n---\nx\n").0,
            at("2021-12-31T23:59")
        );
        // A change comes before a creation, whichever is written first.
        assert_eq!(
            dated("---\ncreated: 2020-01-01\nlast_modified: 2021-06-01\n---\nx\n").0,
            at("2021-06-01")
        );
        // What is not a date is said, and the next key is read.
        assert_eq!(
            dated("---\ndate modified: someday\ncreated: 2020-01-01\n---\nx\n"),
            (
                at("2020-01-01"),
                UpdatedSource::Created,
                vec!["'date modified: someday' is not a date; ignored".to_string()]
            )
        );
        for text in [
            "Sunday",
            "Sunday,",
            "1st",
            "March 32nd 2024",
            "th",
            "Friday, 7th",
            "März 7, 2024",
        ] {
            assert_eq!(at(text), None, "{text}");
        }
    }

    #[test]
    fn summary_fallback_skips_embed_only_paragraphs() {
        let (note, _) = parse_note("x.md", "![[a.base]] ![[b.png]]\n\nReal words here.\n", None);
        assert_eq!(note.meta.summary, "Real words here.");
    }

    #[test]
    fn summary_starts_at_the_first_paragraph_a_reader_sees() {
        let text = "[![ci](https://img.shields.io/badge/ci-ok-green)](https://ci.example.org/x)\n\n\
                    ![](cover.png)\n\nThe plugin syncs [notes](https://example.org/docs/plugins/sync/overview.html). ^intro\n";
        let (note, _) = parse_note("x.md", text, None);
        assert_eq!(note.meta.summary, "The plugin syncs notes.");
        assert_eq!(note.meta.summary_source, SummarySource::FirstParagraph);
    }

    /// A note of bullets (a daily note, meeting notes) is summarised by its
    /// first items; a contents list of links, a lone link and an image
    /// named by its file say nothing of the note.
    #[test]
    fn a_note_of_embeds_is_summarised_by_its_sections_or_its_linked_properties() {
        let summary = |text: &str| {
            let (note, _) = parse_note("x.md", text, None);
            (note.meta.summary, note.meta.summary_source)
        };
        // Sections at the title's level count when no title opens the note.
        assert_eq!(
            summary("## Books\n\n![[Books.base#Author]]\n\n# Clippings\n\n![[Clippings.base]]\n"),
            (
                "Sections: Books · Clippings".to_string(),
                SummarySource::Sections
            )
        );
        assert_eq!(
            summary(
                "---\ncategories:\n  - \"[[People]]\"\ntype:\n  - \"[[Musicians]]\"\ncreated: 2023-09-13\n---\n## Albums\n\n![[Albums.base#Artist]]\n"
            ),
            (
                "categories: People · type: Musicians".to_string(),
                SummarySource::Properties
            )
        );
        assert_eq!(
            summary("---\nrating: 7\n---\n## Albums\n\n![[Albums.base]]\n"),
            (String::new(), SummarySource::None)
        );
    }

    #[test]
    fn summaries_come_from_lists_never_from_links_or_file_names() {
        let summary = |text: &str| {
            let (note, _) = parse_note("x.md", text, None);
            (note.meta.summary, note.meta.summary_source)
        };
        assert_eq!(
            summary(
                "![[Daily.base]]\n\n## Notes\n\n- Met Steph about the garden project.\n  - nested detail\n- Fixed the tap.\n"
            ),
            (
                "Met Steph about the garden project. · Fixed the tap.".to_string(),
                SummarySource::List
            )
        );
        assert_eq!(
            summary("- [ ] Raised beds along the fence\n- [x] Budget around 400 euros\n"),
            (
                "Raised beds along the fence · Budget around 400 euros".to_string(),
                SummarySource::List
            )
        );
        // Short items count only when nothing else says a word.
        assert_eq!(
            summary("- Milk\n- Eggs\n"),
            ("Milk · Eggs".to_string(), SummarySource::List)
        );
        assert_eq!(
            summary(
                "## 目录\n\n* [JDK](#jdk)\n* [Maven](#maven)\n\n## JDK\n\nThe JDK is installed from the vendor's archive.\n"
            ),
            (
                "The JDK is installed from the vendor's archive.".to_string(),
                SummarySource::Section
            )
        );
        assert_eq!(
            summary("[Python简史 - Vamei](https://example.org/p)\n\n## A\n\nx\n\n## B\n"),
            ("Sections: A · B".to_string(), SummarySource::Sections)
        );
        // Links alone, however long their addresses, are passed over; so
        // are contents entries, lead-in labels and items holding code.
        assert_eq!(
            summary(
                "## Links\n\n- [A very interesting article on gardens](https://example.com/articles/2024/a-very-interesting-article)\n- [Another one](https://example.com/articles/2024/another-very-interesting-one)\n\n## More\n"
            ),
            (
                "Sections: Links · More".to_string(),
                SummarySource::Sections
            )
        );
        assert_eq!(
            summary(
                "- [JDK 安装与配置](#jdk) [Maven 的安装步骤](#maven)\n- [网络](#network) ^dee618\n- **向暂存区添加新修改**:\n- Run the installer:\n  ```bash\n  ./install.sh\n  ```\n\n## A\n\n## B\n"
            ),
            ("Sections: A · B".to_string(), SummarySource::Sections)
        );
        // A nested item's next line is its own, not its parent's.
        assert_eq!(
            summary("- Planned the Kyoto itinerary for spring.\n  - Fushimi Inari\n    at dawn\n"),
            (
                "Planned the Kyoto itinerary for spring.".to_string(),
                SummarySource::List
            )
        );
        assert_eq!(
            summary(
                "![image-20191102214024405](x.assets/image-20191102214024405.png)\n\nThe operator ++ increments.\n"
            ),
            (
                "The operator ++ increments.".to_string(),
                SummarySource::FirstParagraph
            )
        );
    }

    #[test]
    fn a_clipped_date_dates_a_clipping() {
        let (note, problems) = parse_note("c.md", "---\nclipped: 2023-11-18\n---\nText.\n", None);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(note.meta.updated_source, UpdatedSource::Created);
        assert_eq!(
            note.meta.updated,
            Some(
                chrono::TimeZone::with_ymd_and_hms(&Utc, 2023, 11, 18, 0, 0, 0)
                    .unwrap()
                    .timestamp()
            )
        );
    }

    #[test]
    fn inline_fields_count_as_fields_and_a_key_given_twice_holds_both() {
        // As Dataview reads them: a key in the frontmatter and inline, or
        // inline twice, is a list of every value; an empty property takes
        // the inline value.
        let text =
            "---\nrating: 5\nstate:\n---\nrating:: 2\nstatus:: draft\nstate:: done\n\nBody.\n";
        let (note, _) = parse_note("x.md", text, None);
        let get =
            |key: &str| frontmatter::get(&note.frontmatter, key).and_then(frontmatter::scalar);
        let rating = frontmatter::get(&note.frontmatter, "rating").unwrap();
        assert_eq!(
            frontmatter::list(rating, &[]),
            ["5".to_string(), "2".to_string()]
        );
        assert_eq!(get("status").as_deref(), Some("draft"));
        assert_eq!(get("state").as_deref(), Some("done"));
        assert!(note.body.contains("status:: draft"));
    }

    #[test]
    fn broken_yaml_keeps_the_body() {
        let (note, problems) = parse_note("x.md", "---\ntitle: [oops\n---\n# Body title\n", None);
        assert_eq!(note.meta.title, "x");
        assert_eq!(note.heading_title(), Some("Body title"));
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("broken YAML"));
    }

    #[test]
    fn unknown_tier_is_supporting_with_a_problem() {
        let (note, problems) = parse_note("x.md", "---\ntier: gold\n---\n", None);
        assert_eq!(note.meta.tier, Tier::Supporting);
        assert_eq!(problems, ["unknown tier 'gold'; treated as supporting"]);
    }

    #[test]
    fn daily_notes_by_name_folder_or_field() {
        assert_eq!(
            daily_date("Daily/2026-05-14.md").as_deref(),
            Some("2026-05-14")
        );
        assert_eq!(
            daily_date("2026-05-14 Thursday.md").as_deref(),
            Some("2026-05-14")
        );
        assert_eq!(
            daily_date("journal/2026-05-14/notes.md").as_deref(),
            Some("2026-05-14")
        );
        assert_eq!(daily_date("notes/2026-13-01.md"), None);
        assert_eq!(daily_date("notes/20260514.md"), None);
        let (note, _) = parse_note("log.md", "---\ndate: 2026-02-03\n---\nx\n", None);
        assert_eq!(note.meta.daily.as_deref(), Some("2026-02-03"));
    }

    #[test]
    fn dates_in_common_forms() {
        assert!(parse_datetime("2026-05-14").is_some());
        assert!(parse_datetime("2026-05-14T10:20:30Z").is_some());
        assert!(parse_datetime("2026-05-14 10:20").is_some());
        assert!(parse_datetime("2023-01-30, 9:18:41").is_some());
        assert!(parse_datetime("yesterday").is_none());
    }
}
