//! A note's frontmatter properties as a reader sees them in Obsidian's
//! properties view: one line each, links shown as the names they point
//! to, lists joined.

use yaml_serde::{Mapping, Value};

use crate::text::{collapse_whitespace, truncate_chars};

/// At most this many properties are kept per note.
pub(crate) const MAX_PROPERTIES: usize = 12;
/// A property's shown value is cut to this many characters.
pub(crate) const MAX_VALUE_CHARS: usize = 200;
/// A list property shows at most this many items.
const MAX_LIST_ITEMS: usize = 20;
/// Nested lists deeper than this are not shown (`[[x]]` unquoted in YAML
/// is a list inside a list).
const MAX_DEPTH: usize = 3;

/// Fields a pack already shows in its own lines (title, tags, summary,
/// tier) or that only style Obsidian's view.
const SHOWN_ELSEWHERE: &[&str] = &[
    "title",
    "aliases",
    "alias",
    "tags",
    "tag",
    "summary",
    "tier",
    "cssclasses",
    "cssclass",
];

/// The non-empty properties of `fields`, in frontmatter order, as
/// `(key, shown value)`; nested mappings are left out.
pub(crate) fn properties(fields: &Mapping) -> Vec<(String, String)> {
    shown_properties(fields)
        .map(|(key, _, shown)| (key, shown))
        .collect()
}

/// The properties [`properties`] shows, with their values as written.
fn shown_properties(fields: &Mapping) -> impl Iterator<Item = (String, &Value, String)> {
    fields
        .iter()
        .filter_map(|(key, value)| {
            let key = key_text(key)?;
            if SHOWN_ELSEWHERE.iter().any(|k| k.eq_ignore_ascii_case(&key)) {
                return None;
            }
            Some((key, value, shown_value(value)?))
        })
        .take(MAX_PROPERTIES)
}

/// The notes the shown properties link to, as `(index in [`properties`],
/// target)`: each `[[target]]` in a string value (Obsidian writes a link
/// in a property quoted; unquoted, YAML reads `[[x]]` as a nested list,
/// which Obsidian does not show as a link). Embeds (`![[…]]`) are not links.
pub(crate) fn property_links(fields: &Mapping) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    for (idx, (_, value, _)) in shown_properties(fields).enumerate() {
        let mut texts = Vec::new();
        strings(value, 0, &mut texts);
        for text in texts {
            let mut rest = text;
            while let Some(start) = rest.find("[[") {
                let Some(len) = rest[start + 2..].find("]]") else {
                    break;
                };
                let inner = &rest[start + 2..start + 2 + len];
                let embed = rest[..start].ends_with('!');
                rest = &rest[start + 2 + len + 2..];
                let target = inner.split(['|', '#']).next().unwrap_or_default().trim();
                let target = target.strip_suffix(".md").unwrap_or(target);
                if !embed && !target.is_empty() && links.len() < MAX_PROPERTY_LINKS {
                    links.push((idx, target.to_string()));
                }
            }
        }
    }
    links
}

/// At most this many property links are kept per note.
const MAX_PROPERTY_LINKS: usize = 64;

/// The string scalars of `value`, flattening lists as [`collect`] does.
fn strings<'a>(value: &'a Value, depth: usize, out: &mut Vec<&'a str>) {
    if depth > MAX_DEPTH || out.len() > MAX_LIST_ITEMS {
        return;
    }
    match value {
        Value::Sequence(seq) => seq.iter().for_each(|item| strings(item, depth + 1, out)),
        Value::Tagged(tagged) => strings(&tagged.value, depth, out),
        Value::String(text) => out.push(text),
        _ => {}
    }
}

fn key_text(key: &Value) -> Option<String> {
    let text = match key {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => return None,
    };
    let text = collapse_whitespace(&text.replace(|c: char| c.is_control(), " "));
    (!text.is_empty()).then(|| truncate_chars(&text, 60))
}

/// A value as one line: `None` when empty or not shown.
pub(crate) fn shown_value(value: &Value) -> Option<String> {
    let mut items = Vec::new();
    collect(value, 0, &mut items);
    if items.is_empty() {
        return None;
    }
    let more = items.len() > MAX_LIST_ITEMS;
    items.truncate(MAX_LIST_ITEMS);
    let mut joined = items.join(", ");
    if more {
        joined.push_str(", …");
    }
    Some(truncate_chars(&joined, MAX_VALUE_CHARS))
}

/// The scalar texts of `value`, flattening lists.
pub(crate) fn collect(value: &Value, depth: usize, items: &mut Vec<String>) {
    if depth > MAX_DEPTH || items.len() > MAX_LIST_ITEMS {
        return;
    }
    match value {
        Value::Sequence(seq) => {
            // A redacted secret reads `[REDACTED:kind]`, which YAML takes
            // for a one-item list.
            if let [Value::String(s)] = seq.as_slice()
                && s.starts_with("REDACTED:")
            {
                items.push(format!("[{s}]"));
                return;
            }
            for item in seq {
                collect(item, depth + 1, items);
            }
        }
        Value::Tagged(tagged) => collect(&tagged.value, depth, items),
        Value::Mapping(_) | Value::Null => {}
        other => {
            if let Some(text) = crate::parse::frontmatter::scalar(other) {
                let text =
                    collapse_whitespace(&links_as_names(&text).replace(char::is_control, " "));
                if !text.is_empty() {
                    items.push(text);
                }
            }
        }
    }
}

/// `[[folder/Name#h|alias]]` shown as `alias`, `[[folder/Name]]` as `Name`.
pub(crate) fn links_as_names(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[[") {
        let Some(len) = rest[start + 2..].find("]]") else {
            break;
        };
        let inner = &rest[start + 2..start + 2 + len];
        out.push_str(&rest[..start]);
        out.push_str(&link_name(inner));
        rest = &rest[start + 2 + len + 2..];
    }
    out.push_str(rest);
    out
}

/// The name a wikilink's inside `target#heading|alias` is shown as.
pub(crate) fn link_name(inner: &str) -> String {
    if let Some((_, alias)) = inner.split_once('|')
        && !alias.trim().is_empty()
    {
        return alias.trim().to_string();
    }
    let target = inner.split(['|', '#']).next().unwrap_or(inner).trim();
    let name = target.rsplit('/').next().unwrap_or(target);
    name.strip_suffix(".md").unwrap_or(name).to_string()
}

/// When a note was created or last edited, as an editor or a template
/// stamps it on every note, and the pictures of a note (a book's cover, a
/// banner): tokens a model reads nothing from, on every page. A date the
/// note is about (`date:`, `published:`) is neither.
pub(crate) fn is_stamp_or_picture(key: &str, value: &str) -> bool {
    is_time_stamp(key) || is_picture(key, value)
}

/// A property an editor or template stamps with when the note was created
/// or last edited (`created`, `date modified`, `updated_at`, `lastmod`…).
pub(crate) fn is_time_stamp(key: &str) -> bool {
    const STAMPS: &[&str] = &[
        "created",
        "modified",
        "updated",
        "created at",
        "updated at",
        "modified at",
        "date created",
        "date modified",
        "date updated",
        "last modified",
        "last updated",
        "creation date",
        "modification date",
        "ctime",
        "mtime",
        "lastmod",
        "datecreated",
        "datemodified",
        "dateupdated",
        "createdat",
        "updatedat",
        "modifiedat",
    ];
    let key = crate::text::fold(&key.replace(['_', '-'], " "));
    STAMPS.contains(&key.as_str()) || STAMPS.contains(&key.replace(' ', "").as_str())
}

/// A property holding a picture of the note: by its name, or a value
/// naming an image file.
pub(crate) fn is_picture(key: &str, value: &str) -> bool {
    const PICTURES: &[&str] = &[
        "cover",
        "image",
        "banner",
        "thumbnail",
        "poster",
        "icon",
        "avatar",
        "photo",
        "picture",
    ];
    const PICTURE_FILES: &[&str] = &[
        ".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg", ".avif", ".bmp",
    ];
    if PICTURES.contains(&crate::text::fold(key).as_str()) {
        return true;
    }
    let value = value
        .trim()
        .trim_end_matches([']', ')', '"', '\''])
        .to_ascii_lowercase();
    let file = value.split(['?', '#']).next().unwrap_or_default();
    PICTURE_FILES.iter().any(|ext| file.ends_with(ext))
}

#[cfg(test)]
mod tests {

    #[test]
    fn editor_stamps_and_pictures_say_nothing_to_a_reader() {
        for (key, value) in [
            ("created", "2023-08-18 19:44:52"),
            ("Date Modified", "2024-01-01"),
            ("updated_at", "2024-01-01"),
            ("last-modified", "x"),
            ("cover", "https://example.org/x"),
            ("thumbnail", "a"),
            ("poster", "[[film.jpg]]"),
            ("art", "https://m.example.org/images/V1_SX300.jpg?w=1"),
        ] {
            assert!(is_stamp_or_picture(key, value), "{key}: {value}");
        }
        for (key, value) in [
            ("date", "2024-01-01"),
            ("published", "2001"),
            ("author", "[[Kevin Kelly]]"),
            ("url", "https://example.org/post"),
            ("genre", "Jazz"),
        ] {
            assert!(!is_stamp_or_picture(key, value), "{key}: {value}");
        }
    }
    use super::*;

    #[test]
    fn properties_one_line_each_with_links_as_names() {
        let fields = crate::parse::frontmatter::parse(
            "title: T\ntags: [a]\nauthor:\n  - \"[[People/Kevin Kelly]]\"\n\
             genre: [\"[[Futurism|futurism]]\", Nonfiction]\nyear: 1992\nempty:\nblank: ''\n\
             list: []\nnested: {a: 1}\nunquoted: [[Raw]]\nsecret: [REDACTED:aws]\n",
        )
        .unwrap();
        assert_eq!(
            properties(&fields),
            [
                ("author".to_string(), "Kevin Kelly".to_string()),
                ("genre".to_string(), "futurism, Nonfiction".to_string()),
                ("year".to_string(), "1992".to_string()),
                ("unquoted".to_string(), "Raw".to_string()),
                ("secret".to_string(), "[REDACTED:aws]".to_string()),
            ]
        );
    }

    #[test]
    fn quoted_links_in_shown_properties_are_links() {
        let fields = crate::parse::frontmatter::parse(
            "title: T\naliases: [\"[[Not A Property]]\"]\nauthor:\n  - \"[[People/Kevin Kelly|KK]]\"\n\
             genre: [\"[[Futurism#Early]]\", Nonfiction]\nyear: 1992\nunquoted: [[Raw]]\n\
             cover: \"![[cover.png]]\"\nsee: \"[[A]] and [[B.md]] and [[]]\"\n",
        )
        .unwrap();
        let shown = properties(&fields);
        assert_eq!(shown[0].0, "author");
        assert_eq!(shown[4].0, "cover");
        assert_eq!(shown[5].0, "see");
        assert_eq!(
            property_links(&fields),
            [
                (0, "People/Kevin Kelly".to_string()),
                (1, "Futurism".to_string()),
                (5, "A".to_string()),
                (5, "B".to_string()),
            ]
        );
    }

    #[test]
    fn properties_are_bounded() {
        let mut yaml = String::new();
        for i in 0..40 {
            yaml.push_str(&format!("k{i:02}: {}\n", "x".repeat(500)));
        }
        yaml.push_str(&format!("list: [{}]\n", vec!["a"; 100].join(", ")));
        let shown = properties(&crate::parse::frontmatter::parse(&yaml).unwrap());
        assert_eq!(shown.len(), MAX_PROPERTIES);
        assert!(
            shown
                .iter()
                .all(|(_, v)| v.chars().count() <= MAX_VALUE_CHARS)
        );
        let list =
            crate::parse::frontmatter::parse(&format!("list: [{}]\n", vec!["a"; 100].join(", ")))
                .unwrap();
        assert_eq!(
            properties(&list)[0].1,
            format!("{}, …", vec!["a"; MAX_LIST_ITEMS].join(", "))
        );
    }
}
