//! What a note says to an embedding model: its chunks. Both stores embed
//! exactly these texts, so their vectors, and so their semantic rankings,
//! agree.

use crate::note::Note;

/// The most characters of a section one chunk embeds (static models average
/// over tokens, so more text mostly dilutes; a transformer reads 512 tokens).
pub(crate) const CHUNK_CHARS: usize = 2_000;

/// The texts a note is embedded as: its title with a differing first
/// heading, aliases, tags and summary, then each section's text under its
/// note title and heading path (said once: a first heading that repeats the
/// title is left out of the path, and the heading line out of the text). A
/// section longer than [`CHUNK_CHARS`] is embedded as consecutive pieces,
/// each under the same path, so no part of a long note goes unembedded; a
/// note yields at most [`MAX_NOTE_CHUNKS`] chunks.
pub(crate) fn chunk_texts(note: &Note) -> Vec<String> {
    let meta = &note.meta;
    let mut head = meta.title.clone();
    let heading = note.heading_title().map(str::to_string);
    for extra in heading.iter().chain(&meta.aliases).chain(&meta.tags) {
        head.push_str(" · ");
        head.push_str(extra);
    }
    if !meta.summary.is_empty() {
        head.push('\n');
        head.push_str(&meta.summary);
    }
    let mut chunks = vec![head];
    let title = crate::text::fold(&meta.title);
    for section in note.sections() {
        if chunks.len() == MAX_NOTE_CHUNKS {
            break;
        }
        let start = section.heading.map_or(section.range.start, |h| {
            note.headings[h]
                .range
                .end
                .clamp(section.range.start, section.range.end)
        });
        let text = note.body[start..section.range.end].trim();
        let mut label = meta.title.clone();
        if let Some(heading) = section.heading {
            let path = note.heading_path(heading);
            let repeats_title = path.first().is_some_and(|h| crate::text::fold(h) == title);
            for step in &path[usize::from(repeats_title)..] {
                label.push_str(" > ");
                label.push_str(step);
            }
        }
        if text.is_empty() {
            // A heading with nothing under it still says something, unless
            // it is the title or the headings below it carry it in their paths.
            let has_child = section.heading.is_some_and(|h| {
                note.headings
                    .get(h + 1)
                    .is_some_and(|next| next.level > note.headings[h].level)
            });
            if label.len() > meta.title.len() && !has_child {
                chunks.push(label);
            }
            continue;
        }
        for piece in pieces(text, CHUNK_CHARS) {
            if chunks.len() == MAX_NOTE_CHUNKS {
                return chunks;
            }
            let mut chunk = String::with_capacity(label.len() + 1 + piece.len());
            chunk.push_str(&label);
            chunk.push('\n');
            chunk.push_str(piece);
            // A short note's only section can say just what its title
            // line says (the summary is its first paragraph).
            if chunk != chunks[0] {
                chunks.push(chunk);
            }
        }
    }
    chunks
}

/// The most chunks one note is embedded as (a hostile or enormous note
/// must not cost hours of a transformer's time): 256 chunks of up to
/// [`CHUNK_CHARS`] characters, about half a million characters.
pub(crate) const MAX_NOTE_CHUNKS: usize = 256;

/// `text` cut into consecutive pieces of at most `max_chars` characters,
/// each ended, within its second half, after its last paragraph, else line,
/// else sentence, else word (a run without any is cut at the limit).
pub(crate) fn pieces(text: &str, max_chars: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while let Some((limit, _)) = rest.char_indices().nth(max_chars) {
        let half = rest.char_indices().nth(max_chars / 2).map_or(0, |(i, _)| i);
        let cut = best_cut(&rest[half..limit])
            .map(|cut| half + cut)
            .filter(|&cut| cut > 0)
            .unwrap_or(limit);
        let (piece, next) = rest.split_at(cut);
        out.push(piece.trim_end());
        rest = next.trim_start();
    }
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// Where a piece had best end in `tail`: at its last paragraph break, else
/// line break, else sentence end, else space.
fn best_cut(tail: &str) -> Option<usize> {
    let sentence_end = || {
        tail.char_indices()
            .rev()
            .find(|&(i, c)| {
                matches!(c, '。' | '！' | '？')
                    || (matches!(c, '.' | '!' | '?')
                        && tail[i + 1..].starts_with(char::is_whitespace))
            })
            .map(|(i, c)| i + c.len_utf8())
    };
    tail.rfind("\n\n")
        .or_else(|| tail.rfind('\n'))
        .or_else(sentence_end)
        .or_else(|| tail.rfind(char::is_whitespace))
}
