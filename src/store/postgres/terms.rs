//! What the PostgreSQL store keeps of a note's text for BM25: the terms of
//! its note-level text and of each section, counted exactly as tantivy
//! counts them for the embedded index (the same analyzer over the same
//! parts, tokens longer than tantivy's limit dropped), and the posting
//! lists that join them, compactly encoded.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use tantivy::fieldnorm::FieldNormReader;
use tantivy::query::Bm25Weight;
use tantivy::tokenizer::{MAX_TOKEN_LEN, TextAnalyzer, TokenStream};

use crate::index::{FIELD_REPEATS, note_text_parts, section_texts};
use crate::note::Note;

/// Term frequencies of one text field of one document, sorted by term.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldTerms {
    /// Tokens in the field: tantivy's field norm, before its one-byte
    /// encoding.
    pub tokens: u32,
    pub terms: Vec<(String, u32)>,
}

impl FieldTerms {
    /// The field norm as tantivy stores it: one byte on a log scale.
    pub fn norm_id(&self) -> u8 {
        FieldNormReader::fieldnorm_to_id(self.tokens)
    }

    pub fn tf(&self, term: &str) -> u32 {
        self.terms
            .binary_search_by(|(t, _)| t.as_str().cmp(term))
            .map_or(0, |at| self.terms[at].1)
    }
}

/// One section's two fields.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectionTerms {
    pub heading: FieldTerms,
    pub body: FieldTerms,
}

/// Everything BM25 needs of one note.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoteTerms {
    pub text: FieldTerms,
    pub sections: Vec<SectionTerms>,
}

/// Counts `values` (the values of one field of one document, each with how
/// many times the document repeats it) the way tantivy's indexer does: a
/// repeated value counts its tokens once per repeat.
fn count(analyzer: &mut TextAnalyzer, values: &[(&str, u32)]) -> FieldTerms {
    let mut counts: HashMap<String, u32> = HashMap::new();
    let mut tokens = 0u32;
    for &(value, repeats) in values {
        let mut stream = analyzer.token_stream(value);
        while stream.advance() {
            let token = stream.token();
            if token.text.len() > MAX_TOKEN_LEN {
                continue;
            }
            tokens += repeats;
            match counts.get_mut(token.text.as_str()) {
                Some(count) => *count += repeats,
                None => {
                    counts.insert(token.text.clone(), repeats);
                }
            }
        }
    }
    let mut terms: Vec<(String, u32)> = counts.into_iter().collect();
    terms.sort_unstable();
    FieldTerms { tokens, terms }
}

impl NoteTerms {
    pub fn of(analyzer: &mut TextAnalyzer, note: &Note) -> NoteTerms {
        let parts = note_text_parts(note);
        let values: Vec<(&str, u32)> = parts
            .iter()
            .zip(FIELD_REPEATS)
            .filter(|(part, _)| !part.is_empty())
            .map(|(part, (_, repeats))| (part.as_str(), repeats as u32))
            .collect();
        let text = count(analyzer, &values);
        let sections = section_texts(note)
            .into_iter()
            .map(|(heading, body)| SectionTerms {
                heading: heading
                    .as_deref()
                    .map(|h| count(analyzer, &[(h, 1)]))
                    .unwrap_or_default(),
                body: count(analyzer, &[(body, 1)]),
            })
            .collect();
        NoteTerms { text, sections }
    }

    pub fn heading_tokens(&self) -> u64 {
        self.sections
            .iter()
            .map(|s| u64::from(s.heading.tokens))
            .sum()
    }

    pub fn body_tokens(&self) -> u64 {
        self.sections.iter().map(|s| u64::from(s.body.tokens)).sum()
    }
}

/// A term's posting list over notes: `(note id, term frequency)` sorted by
/// id, stored as delta-encoded LEB128 pairs.
pub fn encode_postings(postings: &[(u32, u32)]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(postings.len() * 3);
    let mut previous = 0u32;
    for &(id, tf) in postings {
        write_varint(&mut bytes, id - previous);
        write_varint(&mut bytes, tf);
        previous = id;
    }
    bytes
}

/// The inverse of [`encode_postings`]; `None` for bytes it did not write.
pub fn decode_postings(mut bytes: &[u8]) -> Option<Vec<(u32, u32)>> {
    let mut postings = Vec::with_capacity(bytes.len() / 3);
    let mut id = 0u32;
    while !bytes.is_empty() {
        id = id.checked_add(read_varint(&mut bytes)?)?;
        let tf = read_varint(&mut bytes)?;
        postings.push((id, tf));
    }
    Some(postings)
}

fn write_varint(bytes: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        bytes.push((value as u8) | 0x80);
        value >>= 7;
    }
    bytes.push(value as u8);
}

fn read_varint(bytes: &mut &[u8]) -> Option<u32> {
    let mut value = 0u32;
    for shift in (0..35).step_by(7) {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u32::from(byte & 0x7f).checked_shl(shift)?;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

/// tantivy's BM25 weight of one term in a field: the same function, so
/// both stores score identically.
pub fn bm25_weight(doc_freq: u64, docs: u64, total_tokens: u64, boost: f32) -> Bm25Weight {
    let docs = docs.max(1);
    let average = total_tokens as f32 / docs as f32;
    Bm25Weight::for_one_term(doc_freq.min(docs), docs, average).boost_by(boost)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postings_round_trip_and_reject_garbage() {
        let postings = vec![(0, 1), (5, 300), (70_000, 2), (u32::MAX, u32::MAX)];
        assert_eq!(decode_postings(&encode_postings(&postings)), Some(postings));
        assert_eq!(decode_postings(&[0x80]), None);
        assert_eq!(decode_postings(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]), None);
        assert_eq!(decode_postings(&[]), Some(Vec::new()));
    }

    #[test]
    fn terms_are_counted_as_tantivy_counts_them() {
        let (note, _) = crate::parse::parse_note(
            "a.md",
            "---\ntitle: Raft\ntags: [consensus]\n---\nRaft elects a leader.\n\n## Log\n\nThe leader replicates the log.\n",
            None,
        );
        let terms = NoteTerms::of(&mut crate::index::analyzer::analyzer(), &note);
        // The title counts three times, the tag twice.
        assert_eq!(terms.text.tf("raft"), 4);
        assert_eq!(terms.text.tf("consensus"), 2);
        assert_eq!(terms.sections.len(), 2);
        assert_eq!(
            terms.sections[1].heading.terms,
            vec![("log".to_string(), 1)]
        );
        assert_eq!(terms.sections[1].body.tf("leader"), 1);
    }
}
