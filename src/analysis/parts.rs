//! What of a note is indexed, part by part: the note-level text with its
//! repeats, and the sections. Both stores index exactly these texts, so
//! their terms and statistics agree.

use crate::note::Note;
use crate::parse::markdown::BlockKind;

/// How many times each part of a note is repeated in the note-level text
/// field. Repetition weights term frequencies before BM25 saturates them,
/// under one IDF and one length norm (an approximation of BM25F), so a
/// title match counts most without a title-only field's inflated IDF.
pub const FIELD_REPEATS: [(&str, usize); 6] = [
    ("title", 3),
    ("aliases", 3),
    ("tags", 2),
    ("summary", 1),
    ("headings", 2),
    ("body", 1),
];

/// The note-level text, part by part in [`FIELD_REPEATS`] order: what
/// every store indexes for a note, each part repeated as that table says.
pub fn note_text_parts(note: &Note) -> [String; 6] {
    let [title, aliases, tags, summary, headings] = note_parts_before_body(note);
    let body: Vec<&str> = body_blocks(note).map(|b| note.block_text(b)).collect();
    [title, aliases, tags, summary, headings, body.join("\n\n")]
}

/// The parts of [`note_text_parts`] before the body.
pub fn note_parts_before_body(note: &Note) -> [String; 5] {
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
    ]
}

/// The blocks whose text makes the body part of the note-level text.
pub fn body_blocks(note: &Note) -> impl Iterator<Item = &crate::parse::markdown::Block> {
    note.blocks.iter().filter(|b| b.kind != BlockKind::Heading)
}

/// Each section's heading path (`A > B`, if it has a heading) and text.
pub fn section_texts(note: &Note) -> Vec<(Option<String>, &str)> {
    section_spans(note)
        .into_iter()
        .map(|(heading, range)| (heading, &note.body[range]))
        .collect()
}

/// Each section's heading path and the span of its text in the body.
pub fn section_spans(note: &Note) -> Vec<(Option<String>, std::ops::Range<usize>)> {
    note.sections()
        .into_iter()
        .map(|section| {
            let heading = section.heading.map(|h| note.heading_path(h).join(" > "));
            (heading, section.range)
        })
        .collect()
}
