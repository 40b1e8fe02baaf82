//! The Markdown shapes the assembler reads: documents split into frontmatter
//! and `##` sections, outlines of groups and unit entries, and headings
//! nested under the pack's own.

use yaml_serde::{Mapping, Value};

use super::error::ProjectError;
use crate::parse::frontmatter;

/// A document: frontmatter fields and its `##` sections in order.
#[derive(Clone, Debug, Default)]
pub(super) struct Doc {
    pub fields: Mapping,
    pub sections: Vec<(String, String)>,
}

impl Doc {
    pub(super) fn parse(path: &str, text: &str) -> Result<Doc, ProjectError> {
        let split = frontmatter::split(text);
        let fields = match split.yaml {
            Some(yaml) => frontmatter::parse(yaml).map_err(|err| ProjectError::Frontmatter {
                path: path.to_string(),
                error: err.to_string(),
            })?,
            None => Mapping::new(),
        };
        let (_, sections) = split_sections(split.body, 2);
        Ok(Doc { fields, sections })
    }

    pub(super) fn scalar(&self, key: &str) -> Option<String> {
        frontmatter::get(&self.fields, key).and_then(frontmatter::scalar)
    }

    pub(super) fn list(&self, key: &str) -> Vec<String> {
        frontmatter::get(&self.fields, key)
            .map(|value| frontmatter::list(value, LIST_SEPARATORS))
            .unwrap_or_default()
    }
}

/// Separators of list values written as one line (`甲、乙`, `a, b`).
pub(super) const LIST_SEPARATORS: &[char] = &['、', ',', '，', ';', '；'];

/// A frontmatter value as one line of text.
pub(super) fn value_text(value: &Value, separator: &str) -> String {
    match value {
        Value::Sequence(_) => frontmatter::list(value, LIST_SEPARATORS).join(separator),
        other => frontmatter::scalar(other).unwrap_or_default(),
    }
}

/// Splits `body` at headings of exactly `level` (outside code fences):
/// the text before the first one, then `(heading text, section text)`.
pub(super) fn split_sections(body: &str, level: usize) -> (String, Vec<(String, String)>) {
    let mut preamble = String::new();
    let mut sections: Vec<(String, String)> = Vec::new();
    for (line, heading) in section_lines(body, level) {
        if let Some(title) = heading {
            sections.push((title.to_string(), String::new()));
            continue;
        }
        match sections.last_mut() {
            Some((_, text)) => text.push_str(line),
            None => preamble.push_str(line),
        }
    }
    let tidy = |text: &str| text.trim_matches('\n').to_string();
    (
        tidy(&preamble),
        sections
            .into_iter()
            .map(|(title, text)| (title, tidy(&text)))
            .collect(),
    )
}

/// `body`'s lines, each with its heading text when it opens a section of
/// exactly `level` (outside code fences).
fn section_lines(body: &str, level: usize) -> impl Iterator<Item = (&str, Option<&str>)> {
    let marker = "#".repeat(level);
    let mut fence: Option<&str> = None;
    body.split_inclusive('\n').map(move |line| {
        let trimmed = line.trim_end();
        let mut heading = None;
        if let Some(open) = fence {
            if trimmed.trim_start().starts_with(open) {
                fence = None;
            }
        } else if trimmed.trim_start().starts_with("```") {
            fence = Some("```");
        } else if trimmed.trim_start().starts_with("~~~") {
            fence = Some("~~~");
        } else {
            heading = heading_text(trimmed, &marker);
        }
        (line, heading)
    })
}

/// The note `text` with the bodies of the `##` sections `hide` picks (by
/// heading and text, as [`Doc::parse`] reads them) taken out, their
/// headings kept, so that a field is still seen to be there; `None` when
/// it picks none.
pub(super) fn without_section_bodies(
    text: &str,
    hide: impl Fn(&str, &str) -> bool,
) -> Option<String> {
    let body = frontmatter::split(text).body;
    let head = text.strip_suffix(body)?;
    let (_, sections) = split_sections(body, 2);
    let hidden: Vec<bool> = sections
        .iter()
        .map(|(title, text)| hide(title, text))
        .collect();
    if !hidden.contains(&true) {
        return None;
    }
    let mut kept = String::from(head);
    let mut section: Option<usize> = None;
    for (line, heading) in section_lines(body, 2) {
        if heading.is_some() {
            section = Some(section.map_or(0, |i| i + 1));
            kept.push_str(line);
        } else if !section.is_some_and(|i| hidden[i]) {
            kept.push_str(line);
        }
    }
    Some(kept)
}

fn heading_text<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    // Up to three spaces may open a heading, as CommonMark (and Obsidian) read it.
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = line[indent..].strip_prefix(marker)?;
    if rest.starts_with('#') {
        return None;
    }
    let title = rest.strip_prefix(' ').or_else(|| rest.strip_prefix('\t'))?;
    Some(title.trim().trim_end_matches('#').trim())
}

/// Demotes the headings of `text` so the shallowest becomes `depth + 1`
/// (at most 6), dropping a leading `#` title line, so embedded documents
/// nest under the pack's own headings.
pub(super) fn nest(text: &str, depth: usize) -> String {
    let mut body = text;
    if let Some(first) = body.lines().next()
        && heading_level(first) == Some(1)
    {
        body = body[first.len()..].trim_start_matches('\n');
    }
    let shallowest = body.lines().filter_map(heading_level).min();
    let Some(shallowest) = shallowest else {
        return body.trim_end().to_string();
    };
    let shift = (depth + 1).saturating_sub(shallowest);
    let mut out = String::with_capacity(body.len() + 16);
    let mut in_fence = false;
    for line in body.split_inclusive('\n') {
        if line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~") {
            in_fence = !in_fence;
        }
        match heading_level(line.trim_end()) {
            Some(level) if !in_fence => {
                let new_level = (level + shift).min(6);
                out.push_str(&"#".repeat(new_level));
                out.push_str(&line[level..]);
            }
            _ => out.push_str(line),
        }
    }
    out.trim_end().to_string()
}

fn heading_level(line: &str) -> Option<usize> {
    let level = line.bytes().take_while(|&b| b == b'#').count();
    ((1..=6).contains(&level) && line[level..].starts_with([' ', '\t'])).then_some(level)
}

/// An outline: its main line, and groups (volumes) of unit entries.
#[derive(Clone, Debug, Default)]
pub(super) struct Outline {
    pub groups: Vec<Group>,
}

#[derive(Clone, Debug, Default)]
pub(super) struct Group {
    pub title: String,
    /// The group's own text, before its first entry.
    pub overview: String,
    pub entries: Vec<Entry>,
}

#[derive(Clone, Debug, Default)]
pub(super) struct Entry {
    pub number: i64,
    pub title: String,
    /// The entry's text as written (its key lines included).
    pub text: String,
    /// The leading `key：value` lines.
    pub keys: Vec<(String, Vec<String>)>,
}

impl Entry {
    pub(super) fn values(&self, key: &str) -> &[String] {
        self.keys
            .iter()
            .find(|(k, _)| k == key)
            .map_or(&[], |(_, v)| v.as_slice())
    }
}

impl Outline {
    pub(super) fn parse(text: &str) -> Outline {
        let body = frontmatter::split(text).body;
        let (_, groups) = split_sections(body, 2);
        let groups = groups
            .into_iter()
            .map(|(title, text)| {
                let (overview, entries) = split_sections(&text, 3);
                let entries = entries
                    .into_iter()
                    .filter_map(|(title, text)| {
                        let number = first_integer(&title)?;
                        Some(Entry {
                            keys: leading_keys(&text),
                            number,
                            title,
                            text,
                        })
                    })
                    .collect();
                Group {
                    title,
                    overview,
                    entries,
                }
            })
            .collect();
        Outline { groups }
    }

    /// The group holding unit `number`, and the entry.
    pub(super) fn find(&self, number: i64) -> Option<(usize, &Entry)> {
        self.groups.iter().enumerate().find_map(|(g, group)| {
            group
                .entries
                .iter()
                .find(|e| e.number == number)
                .map(|e| (g, e))
        })
    }
}

fn first_integer(text: &str) -> Option<i64> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let digits: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

/// `key：value` lines at the start of an entry (half- or full-width colon).
fn leading_keys(text: &str) -> Vec<(String, Vec<String>)> {
    let mut keys = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            break;
        }
        let Some((key, value)) = line.split_once(['：', ':']) else {
            break;
        };
        let key = key.trim().trim_start_matches(['-', '*']).trim();
        if key.is_empty() || key.chars().count() > 24 {
            break;
        }
        let values = value
            .split(LIST_SEPARATORS)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .collect();
        keys.push((key.to_string(), values));
    }
    keys
}

/// The first sentence of `text` (at most `max_chars`), for summaries.
pub(super) fn first_sentence(text: &str, max_chars: usize) -> String {
    let flat: String = text
        .lines()
        .map(|l| l.trim().trim_start_matches(['-', '*', '#', '>']).trim())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let end = flat
        .char_indices()
        .find(|&(_, c)| matches!(c, '。' | '！' | '？' | '.' | '!' | '?'))
        .map(|(i, c)| i + c.len_utf8());
    let sentence = end.map_or(flat.as_str(), |e| &flat[..e]);
    if sentence.chars().count() <= max_chars {
        sentence.to_string()
    } else {
        let cut: String = sentence.chars().take(max_chars).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_skip_code_fences() {
        let (pre, sections) = split_sections("intro\n## A\nx\n```\n## not\n```\n## B\ny\n", 2);
        assert_eq!(pre, "intro");
        assert_eq!(sections.len(), 2);
        assert_eq!(sections[0], ("A".into(), "x\n```\n## not\n```".into()));
        assert_eq!(sections[1], ("B".into(), "y".into()));
    }

    #[test]
    fn nest_demotes_below_depth_and_drops_the_title() {
        assert_eq!(
            nest("# T\n## a\ntext\n### b\n", 4),
            "##### a\ntext\n###### b"
        );
        assert_eq!(nest("plain", 2), "plain");
    }

    #[test]
    fn outline_entries_with_keys() {
        let o = Outline::parse(
            "# X\n## 主线\n一句。\n## 第一卷\n概要\n### 第12章 雨\n出场：甲、乙\n场景类型: 打斗\n\n细纲\n",
        );
        assert_eq!(o.groups.len(), 2);
        let (g, e) = o.find(12).unwrap();
        assert_eq!((g, e.title.as_str()), (1, "第12章 雨"));
        assert_eq!(e.values("出场"), ["甲", "乙"]);
        assert_eq!(e.values("场景类型"), ["打斗"]);
        assert_eq!(o.groups[1].overview, "概要");
    }

    #[test]
    fn first_sentence_stops_at_terminators() {
        assert_eq!(first_sentence("甲乙。丙丁。", 10), "甲乙。");
        assert_eq!(first_sentence("- abc def", 3), "abc…");
    }
}
