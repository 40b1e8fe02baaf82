//! The analysed note: what both stores derive from a note's text, and must
//! derive identically for their rankings to agree. The analyzer and a
//! query's terms, the texts indexed for a note and its sections, the order
//! of hits, the chunks a note is embedded as, a note's links and their resolution into the link table and
//! backlinks, and the reading of one file under the privacy policy.
//!
//! Nothing here knows where an index lives: `index/` (tantivy) and
//! `store/postgres/` (PostgreSQL) both call these functions, and neither
//! imports the other.

pub(crate) mod analyzer;
mod chunks;
mod dates;
mod hits;
mod links;
mod parts;
mod read;
mod terms;

pub(crate) use chunks::chunk_texts;
pub(crate) use chunks::pieces as text_pieces;
#[cfg(test)]
pub(crate) use chunks::{CHUNK_CHARS, MAX_NOTE_CHUNKS, pieces};
pub(crate) use dates::{DateSources, mark_shared_file_times};
pub(crate) use hits::order_hits;
pub(crate) use links::{
    BACKLINKS_KEPT, LinkEntry, backlink_sentences, first_backlinks, resolve_links,
};
pub(crate) use links::{RawLink, raw_links};
pub(crate) use parts::{
    FIELD_REPEATS, PARTS_VERSION, body_blocks, note_parts_before_body, note_text_parts,
    property_text, section_spans, section_texts,
};
pub(crate) use read::FileEntry;
pub(crate) use read::{Pending, read_and_parse, walk_diagnostics};
pub(crate) use terms::{QUESTION_WORDS, query_terms, visit_terms};
