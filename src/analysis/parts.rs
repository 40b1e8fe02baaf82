//! What of a note is indexed, part by part: the note-level text with its
//! repeats, and the sections. Both stores index exactly these texts, so
//! their terms and statistics agree.

use crate::note::Note;
use crate::parse::markdown::BlockKind;

/// How many times each part of a note is repeated in the note-level text
/// field. Repetition weights term frequencies before BM25 saturates them,
/// under one IDF and one length norm (an approximation of BM25F), so a
/// title match counts most without a title-only field's inflated IDF.
///
/// Property values (`author: [[Kevin Kelly]]` as `Kevin Kelly`) count twice,
/// as tags do: they are what a note is about, chosen by its writer.
/// Measured (SciFact train nDCG@10, whose notes' one property is `id`):
/// 0.7036 without them, 0.7034 once, 0.7040 twice; CMRC 0.9834 in all
/// three. On kepano's vault twice ranks *The Machine Stops* first for
/// "E. M. Forster" (once, *Blade Runner*'s cover URL won on the letters).
pub(crate) const FIELD_REPEATS: [(&str, usize); 7] = [
    ("title", 3),
    ("aliases", 3),
    ("tags", 2),
    ("summary", 1),
    ("headings", 2),
    ("properties", PROPERTY_REPEATS),
    ("body", 1),
];

/// How many times property values are repeated (see [`FIELD_REPEATS`]).
pub(crate) const PROPERTY_REPEATS: usize = 2;

/// Changes whenever the texts indexed for a note, or what is read of it,
/// change (1: property values; 2: dates under more keys and in words; 3:
/// `<<` merge keys merged, which may make a note private; 4: a private
/// section ends only at a heading that starts a line with `#`, more
/// headings name one, and a title taken from a file name is redacted; 5:
/// tags wrapped in marks or inline HTML, bracketed inline fields, numbers
/// with a zero fraction read as their value, summaries of notes without a
/// lead, daily notes named with ordinal days, and a `tags:` string's tags
/// as filter values; 6: summaries from lists, an image's alt text that
/// only names its file not read, `clipped:` dates; 7: Markdown links to
/// the vault's own notes are not link lines, a summary's links read as
/// words, tags after brackets, quotes and underscores, and a yes-or-no
/// flag that reads as neither makes a note private; 9: a rule for a no
/// (`ai: false`) hides every value but a yes, a flag is read without its
/// quotes, link brackets or closing stop, a canvas card is read by itself
/// for what makes it private, a private tag is read in a `tags:` value of
/// any shape, a `Private` heading with emoji or an attribute is private,
/// a token glued to a word or typed in full-width letters is found, and
/// more ways of writing a password
/// or a Dataview secret are redacted): it is part of the
/// policy's fingerprint, so every store re-analyses its notes when a new
/// version reads them otherwise.
pub(crate) const PARTS_VERSION: u32 = 9;

/// The note-level text, part by part in [`FIELD_REPEATS`] order: what
/// every store indexes for a note, each part repeated as that table says.
pub(crate) fn note_text_parts(note: &Note) -> [String; 7] {
    let [title, aliases, tags, summary, headings, properties] = note_parts_before_body(note);
    let body: Vec<&str> = body_blocks(note).map(|b| note.block_text(b)).collect();
    [
        title,
        aliases,
        tags,
        summary,
        headings,
        properties,
        body.join("\n\n"),
    ]
}

/// The parts of [`note_text_parts`] before the body.
pub(crate) fn note_parts_before_body(note: &Note) -> [String; 6] {
    let meta = &note.meta;
    let title_key = crate::text::fold(&meta.title);
    let headings: Vec<&str> = note
        .headings
        .iter()
        .filter(|h| !(h.level == 1 && crate::text::fold(&h.text) == title_key))
        .map(|h| h.text.as_str())
        .collect();
    // A summary taken from the first paragraph is already in the body.
    let summary = match meta.summary_source {
        crate::note::SummarySource::Frontmatter => meta.summary.clone(),
        _ => String::new(),
    };
    [
        meta.title.clone(),
        meta.aliases.join("\n"),
        meta.tags.join("\n"),
        summary,
        headings.join("\n"),
        property_text(note),
    ]
}

/// The values of a note's shown properties, one a line, as Obsidian's
/// properties view shows them: lists joined, links as the names they show
/// (`[[People/Kevin Kelly]]` is `Kevin Kelly`), numbers and dates as
/// written. Keys are left out: `author` in every book would make the word
/// match every book. Values the policy reads to decide privacy and bare
/// booleans (`publish: true`) say nothing a reader searches for.
pub(crate) fn property_text(note: &Note) -> String {
    let mut text = String::new();
    for (key, value) in &note.properties {
        if is_policy_key(key) || value == "true" || value == "false" {
            continue;
        }
        let value = without_attachment_noise(value);
        if value.is_empty() {
            continue;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&value);
    }
    text
}

/// File extensions of attachments a property names (`cover:
/// "[[out-of-control.jpg]]"`, a poster's URL).
const ATTACHMENT_EXTENSIONS: &[&str] = &[
    ".jpg", ".jpeg", ".png", ".gif", ".webp", ".svg", ".avif", ".bmp", ".pdf",
];

/// A shown value without what only names a file: an image URL is left
/// out whole (its path is an opaque key: `MV5BNzQz…`), an attachment's name
/// keeps its words but not its extension, so `jpg` does not make every
/// book with a cover alike.
fn without_attachment_noise(value: &str) -> String {
    let items: Vec<&str> = value
        .split(", ")
        .filter_map(|item| {
            let lower = item.to_ascii_lowercase();
            match ATTACHMENT_EXTENSIONS
                .iter()
                .find(|ext| lower.ends_with(*ext))
            {
                None => Some(item),
                Some(_) if lower.starts_with("http://") || lower.starts_with("https://") => None,
                Some(ext) => Some(&item[..item.len() - ext.len()]),
            }
        })
        .filter(|item| !item.is_empty())
        .collect();
    items.join(", ")
}

/// The frontmatter fields the default policy reads to decide privacy: on a
/// note that is not private they only say so (`visibility: public`).
fn is_policy_key(key: &str) -> bool {
    ["private", "visibility", "ai"]
        .iter()
        .any(|field| field.eq_ignore_ascii_case(key.trim()))
}

/// The blocks whose text makes the body part of the note-level text.
pub(crate) fn body_blocks(note: &Note) -> impl Iterator<Item = &crate::parse::markdown::Block> {
    note.blocks.iter().filter(|b| b.kind != BlockKind::Heading)
}

/// Each section's heading path (`A > B`, if it has a heading) and text.
pub(crate) fn section_texts(note: &Note) -> Vec<(Option<String>, &str)> {
    section_spans(note)
        .into_iter()
        .map(|(heading, range)| (heading, &note.body[range]))
        .collect()
}

/// Each section's heading path and the span of its text in the body.
pub(crate) fn section_spans(note: &Note) -> Vec<(Option<String>, std::ops::Range<usize>)> {
    note.sections()
        .into_iter()
        .map(|section| {
            let heading = section.heading.map(|h| note.heading_path(h).join(" > "));
            (heading, section.range)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn property_values_are_indexed_as_shown_without_keys_flags_or_policy_fields() {
        let note = crate::parse::parse_note(
            "Books/Out of Control.md",
            "---\ntitle: Out of Control\nauthor:\n  - \"[[People/Kevin Kelly]]\"\n\
             genre: [\"[[Futurism|futurism]]\", Nonfiction]\nyear: 1992\ncreated: 2023-09-12\n\
             publish: true\nvisibility: public\ntags: [book]\n\
             cover: \"[[out-of-control.JPG]]\"\nposter: https://img.example/MV5B._V1_.jpg\n\
             images: [\"[[a.png]]\", \"[[Plain note]]\"]\n---\nHives.\n",
            None,
        )
        .0;
        assert_eq!(
            property_text(&note),
            "Kevin Kelly\nfuturism, Nonfiction\n1992\n2023-09-12\nout-of-control\na, Plain note"
        );
        let parts = note_text_parts(&note);
        assert_eq!(FIELD_REPEATS[5], ("properties", 2));
        assert_eq!(parts[5], property_text(&note));
        assert_eq!(parts[6], "Hives.");
    }
}
