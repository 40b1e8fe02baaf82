//! What the PostgreSQL store keeps of a note's text for BM25: the terms of
//! its note-level text and of each section, counted exactly as tantivy
//! counts them for the embedded index (the same analyzer over the same
//! parts, tokens longer than tantivy's limit dropped), and the posting
//! lists that join them, compactly encoded.

use rustc_hash::FxHashMap;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::query::Bm25Weight;
use tantivy::tokenizer::{MAX_TOKEN_LEN, TextAnalyzer, TokenStream};

use crate::analysis::analyzer::is_clean_cut;
use crate::analysis::{FIELD_REPEATS, body_blocks, note_parts_before_body, section_spans};
use crate::note::Note;

/// Term frequencies of one text field of one document.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldTerms {
    /// Tokens in the field: tantivy's field norm, before its one-byte
    /// encoding.
    pub tokens: u32,
    /// `(index into the note's dictionary, frequency)`, sorted by index.
    pub terms: Vec<(u32, u32)>,
}

impl FieldTerms {
    /// The field norm as tantivy stores it: one byte on a log scale.
    pub fn norm_id(&self) -> u8 {
        FieldNormReader::fieldnorm_to_id(self.tokens)
    }

    /// The frequency of the dictionary's term `index` in this field.
    pub fn tf(&self, index: u32) -> u32 {
        self.terms
            .binary_search_by_key(&index, |&(at, _)| at)
            .map_or(0, |at| self.terms[at].1)
    }
}

/// One section's two fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SectionTerms {
    pub heading: FieldTerms,
    pub body: FieldTerms,
}

/// Everything BM25 needs of one note.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NoteTerms {
    /// Every distinct term of the note, sorted: the fields name terms by
    /// their place here.
    pub dictionary: Vec<String>,
    pub text: FieldTerms,
    pub sections: Vec<SectionTerms>,
}

/// A note's totals for BM25's average field lengths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoteCounts {
    pub sections: i64,
    pub text_tokens: i64,
    pub heading_tokens: i64,
    pub body_tokens: i64,
}

/// One note's share of one term's row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Contribution {
    /// Frequency in the note-level text (0: not there).
    pub tf: u32,
    /// Sections whose heading holds the term.
    pub headings: u32,
    /// Sections whose body holds the term.
    pub bodies: u32,
}

/// Counts the fields of one note, every term interned once.
struct Counter<'a> {
    analyzer: &'a mut TextAnalyzer,
    ids: FxHashMap<String, u32>,
    /// The distinct term ids of the field being counted.
    seen: Vec<u32>,
    /// Each term's frequency in the field being counted (zero between
    /// fields).
    counts: Vec<u32>,
}

impl Counter<'_> {
    /// Appends the ids of `text`'s terms to `ids`, and their byte spans to
    /// `spans` when asked. Ids are provisional (order of first appearance)
    /// until [`Counter::finish`]; tokens longer than tantivy's limit are
    /// dropped, as its indexer drops them.
    fn analyse(&mut self, text: &str, ids: &mut Vec<u32>, mut spans: Option<&mut Vec<usize>>) {
        let mut stream = self.analyzer.token_stream(text);
        while stream.advance() {
            let token = stream.token();
            if token.text.len() > MAX_TOKEN_LEN {
                continue;
            }
            let id = match self.ids.get(token.text.as_str()) {
                Some(&id) => id,
                None => {
                    let id = self.ids.len() as u32;
                    self.ids.insert(token.text.clone(), id);
                    id
                }
            };
            ids.push(id);
            if let Some(spans) = spans.as_deref_mut() {
                spans.push(token.offset_from);
            }
        }
    }

    /// Counts one field made of `values` (term ids, with how many times
    /// the document repeats the value) the way tantivy's indexer does: a
    /// repeated value counts its tokens once per repeat.
    fn field(&mut self, values: &[(&[u32], u32)]) -> FieldTerms {
        self.seen.clear();
        self.counts.resize(self.ids.len(), 0);
        let mut tokens = 0u32;
        for &(ids, repeats) in values {
            tokens += ids.len() as u32 * repeats;
            for &id in ids {
                let count = &mut self.counts[id as usize];
                if *count == 0 {
                    self.seen.push(id);
                }
                *count += repeats;
            }
        }
        // Only the distinct terms are sorted; the counts are left zeroed.
        self.seen.sort_unstable();
        let terms = self
            .seen
            .iter()
            .map(|&id| (id, std::mem::take(&mut self.counts[id as usize])))
            .collect();
        FieldTerms { tokens, terms }
    }

    /// The ids of `text`'s terms.
    fn ids_of(&mut self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        self.analyse(text, &mut ids, None);
        ids
    }

    /// Sorts the dictionary and renumbers the fields' terms by it.
    fn finish(self, mut text: FieldTerms, mut sections: Vec<SectionTerms>) -> NoteTerms {
        // Sorted by the first eight bytes as a number before the whole term:
        // the same byte order, with most comparisons settled in a register.
        let mut dictionary: Vec<(u64, String, u32)> = self
            .ids
            .into_iter()
            .map(|(term, id)| (byte_prefix(&term), term, id))
            .collect();
        dictionary.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let mut place = vec![0u32; dictionary.len()];
        for (at, (_, _, id)) in dictionary.iter().enumerate() {
            place[*id as usize] = at as u32;
        }
        let renumber = |field: &mut FieldTerms| {
            for (id, _) in &mut field.terms {
                *id = place[*id as usize];
            }
            field.terms.sort_unstable();
        };
        renumber(&mut text);
        for section in &mut sections {
            renumber(&mut section.heading);
            renumber(&mut section.body);
        }
        NoteTerms {
            dictionary: dictionary.into_iter().map(|(_, term, _)| term).collect(),
            text,
            sections,
        }
    }
}

/// A text's first eight bytes, big-endian and zero-padded: two texts whose
/// prefixes differ are in the order of their prefixes.
fn byte_prefix(text: &str) -> u64 {
    let mut bytes = [0u8; 8];
    let head = &text.as_bytes()[..text.len().min(8)];
    bytes[..head.len()].copy_from_slice(head);
    u64::from_be_bytes(bytes)
}

impl NoteTerms {
    /// Counts a note's fields. The body is analysed once: the note-level
    /// text's body part and every section take their terms from that one
    /// analysis wherever their edges cut no term (else their own text is
    /// analysed), which gives the same counts as analysing each text.
    pub fn of(analyzer: &mut TextAnalyzer, note: &Note) -> NoteTerms {
        let mut counter = Counter {
            analyzer,
            ids: FxHashMap::default(),
            seen: Vec::new(),
            counts: Vec::new(),
        };
        let mut body_ids = Vec::new();
        let mut body_starts = Vec::new();
        counter.analyse(&note.body, &mut body_ids, Some(&mut body_starts));
        let slice_ids = |counter: &mut Counter, range: std::ops::Range<usize>| -> Vec<u32> {
            if is_clean_cut(&note.body, range.start) && is_clean_cut(&note.body, range.end) {
                let from = body_starts.partition_point(|&start| start < range.start);
                let to = body_starts.partition_point(|&start| start < range.end);
                body_ids[from..to].to_vec()
            } else {
                counter.ids_of(&note.body[range])
            }
        };
        // Every part but the body, which comes last.
        let mut part_ids: Vec<Vec<u32>> = note_parts_before_body(note)
            .iter()
            .map(|part| counter.ids_of(part))
            .collect();
        part_ids.push(
            body_blocks(note)
                .flat_map(|block| slice_ids(&mut counter, block.range.clone()))
                .collect(),
        );
        let values: Vec<(&[u32], u32)> = part_ids
            .iter()
            .zip(FIELD_REPEATS)
            .map(|(ids, (_, repeats))| (ids.as_slice(), repeats as u32))
            .collect();
        let text = counter.field(&values);
        let sections = section_spans(note)
            .into_iter()
            .map(|(heading, range)| {
                let heading = heading.map(|h| counter.ids_of(&h)).unwrap_or_default();
                let body = slice_ids(&mut counter, range);
                SectionTerms {
                    heading: counter.field(&[(&heading, 1)]),
                    body: counter.field(&[(&body, 1)]),
                }
            })
            .collect();
        counter.finish(text, sections)
    }

    /// The place of `term` in the dictionary.
    pub fn index_of(&self, term: &str) -> Option<u32> {
        self.dictionary
            .binary_search_by(|t| t.as_str().cmp(term))
            .ok()
            .map(|at| at as u32)
    }

    /// The frequency of `term` in `field` (one of this note's fields).
    pub fn tf(&self, field: &FieldTerms, term: &str) -> u32 {
        self.index_of(term).map_or(0, |index| field.tf(index))
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

    /// What the note adds to the vault's statistics: its totals, and per
    /// distinct term (in dictionary order) its frequency in the note-level
    /// text and how many of its sections' headings and bodies hold it.
    pub fn into_contributions(self) -> (NoteCounts, Vec<(String, Contribution)>) {
        let counts = NoteCounts {
            sections: self.sections.len() as i64,
            text_tokens: i64::from(self.text.tokens),
            heading_tokens: self.heading_tokens() as i64,
            body_tokens: self.body_tokens() as i64,
        };
        let mut shares = vec![Contribution::default(); self.dictionary.len()];
        for &(index, tf) in &self.text.terms {
            shares[index as usize].tf = tf;
        }
        for section in &self.sections {
            for &(index, _) in &section.heading.terms {
                shares[index as usize].headings += 1;
            }
            for &(index, _) in &section.body.terms {
                shares[index as usize].bodies += 1;
            }
        }
        (counts, self.dictionary.into_iter().zip(shares).collect())
    }

    fn fields(&self) -> impl Iterator<Item = &FieldTerms> {
        std::iter::once(&self.text).chain(
            self.sections
                .iter()
                .flat_map(|section| [&section.heading, &section.body]),
        )
    }

    /// The stored form: the dictionary, then each field as delta-coded
    /// dictionary indices with their frequencies (a term repeated in many
    /// sections costs a byte or two per section).
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.dictionary.len() * 10);
        write_varint(&mut bytes, self.dictionary.len() as u32);
        for term in &self.dictionary {
            write_varint(&mut bytes, term.len() as u32);
            bytes.extend_from_slice(term.as_bytes());
        }
        write_varint(&mut bytes, self.sections.len() as u32);
        for field in self.fields() {
            write_varint(&mut bytes, field.tokens);
            write_varint(&mut bytes, field.terms.len() as u32);
            let mut previous = 0u32;
            for &(index, tf) in &field.terms {
                write_varint(&mut bytes, index - previous);
                write_varint(&mut bytes, tf);
                previous = index;
            }
        }
        bytes
    }

    /// The inverse of [`NoteTerms::encode`]; `None` for bytes it did not
    /// write (never a panic, whatever the bytes).
    pub fn decode(mut bytes: &[u8]) -> Option<NoteTerms> {
        let count = read_varint(&mut bytes)? as usize;
        // Each term costs at least one byte: a bigger count is garbage.
        if count > bytes.len() {
            return None;
        }
        let mut dictionary = Vec::with_capacity(count);
        for _ in 0..count {
            let len = read_varint(&mut bytes)? as usize;
            let (term, rest) = bytes.split_at_checked(len)?;
            dictionary.push(std::str::from_utf8(term).ok()?.to_string());
            bytes = rest;
        }
        let sections = read_varint(&mut bytes)? as usize;
        if sections > bytes.len() {
            return None;
        }
        let read_field = |bytes: &mut &[u8]| -> Option<FieldTerms> {
            let tokens = read_varint(bytes)?;
            let len = read_varint(bytes)? as usize;
            if len > bytes.len() {
                return None;
            }
            let mut terms = Vec::with_capacity(len);
            let mut index = 0u32;
            for entry in 0..len {
                let delta = read_varint(bytes)?;
                // Strictly increasing after the first: one entry per term.
                if entry > 0 && delta == 0 {
                    return None;
                }
                index = index.checked_add(delta)?;
                if index as usize >= count {
                    return None;
                }
                terms.push((index, read_varint(bytes)?));
            }
            Some(FieldTerms { tokens, terms })
        };
        let text = read_field(&mut bytes)?;
        let mut parsed = Vec::with_capacity(sections);
        for _ in 0..sections {
            let heading = read_field(&mut bytes)?;
            let body = read_field(&mut bytes)?;
            parsed.push(SectionTerms { heading, body });
        }
        bytes.is_empty().then_some(NoteTerms {
            dictionary,
            text,
            sections: parsed,
        })
    }
}

/// A term's posting list over notes: `(note id, term frequency)` sorted by
/// id, stored as delta-encoded LEB128 pairs.
pub(crate) fn encode_postings(postings: &[(u32, u32)]) -> Vec<u8> {
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
pub(crate) fn decode_postings(mut bytes: &[u8]) -> Option<Vec<(u32, u32)>> {
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
pub(crate) fn bm25_weight(doc_freq: u64, docs: u64, total_tokens: u64, boost: f32) -> Bm25Weight {
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
    fn note_terms_round_trip_and_reject_every_damage() {
        let (note, _) = crate::parse::parse_note(
            "a.md",
            "---\ntitle: Raft\ntags: [consensus]\n---\nRaft elects a leader.\n\n## Log\n\nThe leader replicates the log.\n\n## 日志\n\n领导者复制日志。\n",
            None,
        );
        let terms = NoteTerms::of(&mut crate::analysis::analyzer::analyzer(), &note);
        let bytes = terms.encode();
        assert_eq!(NoteTerms::decode(&bytes), Some(terms.clone()));
        assert_eq!(
            NoteTerms::decode(&NoteTerms::default().encode()),
            Some(NoteTerms::default())
        );
        for cut in 0..bytes.len() {
            assert_eq!(NoteTerms::decode(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(NoteTerms::decode(&longer), None);
        for at in 0..bytes.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut damaged = bytes.clone();
                damaged[at] ^= flip;
                // Whatever it decodes to, it decodes without a panic.
                let _ = NoteTerms::decode(&damaged);
            }
        }
    }

    /// Counts every text on its own, as the index's documents hold them:
    /// the reference for the one analysis of the body.
    fn counted_text_by_text(note: &Note) -> NoteTerms {
        let mut analyzer = crate::analysis::analyzer::analyzer();
        let mut counter = Counter {
            analyzer: &mut analyzer,
            ids: FxHashMap::default(),
            seen: Vec::new(),
            counts: Vec::new(),
        };
        let parts: Vec<Vec<u32>> = crate::analysis::note_text_parts(note)
            .iter()
            .map(|part| counter.ids_of(part))
            .collect();
        let values: Vec<(&[u32], u32)> = parts
            .iter()
            .zip(FIELD_REPEATS)
            .map(|(ids, (_, repeats))| (ids.as_slice(), repeats as u32))
            .collect();
        let text = counter.field(&values);
        let sections = crate::analysis::section_texts(note)
            .into_iter()
            .map(|(heading, body)| {
                let heading = heading.map(|h| counter.ids_of(&h)).unwrap_or_default();
                let body = counter.ids_of(body);
                SectionTerms {
                    heading: counter.field(&[(&heading, 1)]),
                    body: counter.field(&[(&body, 1)]),
                }
            })
            .collect();
        counter.finish(text, sections)
    }

    proptest::proptest! {
        #[test]
        fn sorting_by_byte_prefix_first_is_sorting_by_bytes(
            mut texts in proptest::collection::vec("[a-c\\x00é日]{0,11}", 0..40)
        ) {
            texts.sort_unstable();
            texts.dedup();
            let mut keyed: Vec<(u64, &str)> = texts.iter().map(|t| (byte_prefix(t), t.as_str())).collect();
            keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)));
            let keyed: Vec<&str> = keyed.into_iter().map(|(_, t)| t).collect();
            proptest::prop_assert_eq!(keyed, texts.iter().map(String::as_str).collect::<Vec<_>>());
        }
    }

    proptest::proptest! {
        #[test]
        fn one_analysis_of_the_body_counts_as_one_per_text(
            lines in proptest::collection::vec(
                "(# |## |- |> |    |```|)[a-zA-Z0-9 .,é日本語分布式\\[\\]|*_-]{0,30}",
                0..14,
            )
        ) {
            let text = lines.join("\n");
            let (note, _) = crate::parse::parse_note("a.md", &text, None);
            let terms = NoteTerms::of(&mut crate::analysis::analyzer::analyzer(), &note);
            proptest::prop_assert_eq!(terms, counted_text_by_text(&note));
        }
    }

    #[test]
    fn terms_are_counted_as_tantivy_counts_them() {
        let (note, _) = crate::parse::parse_note(
            "a.md",
            "---\ntitle: Raft\ntags: [consensus]\n---\nRaft elects a leader.\n\n## Log\n\nThe leader replicates the log.\n",
            None,
        );
        let terms = NoteTerms::of(&mut crate::analysis::analyzer::analyzer(), &note);
        // The title counts three times, the tag twice.
        assert_eq!(terms.tf(&terms.text, "raft"), 4);
        assert_eq!(terms.tf(&terms.text, "consensus"), 2);
        assert_eq!(terms.sections.len(), 2);
        assert_eq!(
            terms.sections[1].heading.terms,
            vec![(terms.index_of("log").unwrap(), 1)]
        );
        assert_eq!(terms.tf(&terms.sections[1].body, "leader"), 1);
        assert_eq!(terms.tf(&terms.sections[1].body, "raft"), 0);
        let (counts, shares) = terms.clone().into_contributions();
        assert_eq!(counts.sections, 2);
        let share = |term: &str| shares.iter().find(|(t, _)| t == term).unwrap().1;
        assert_eq!(share("leader").bodies, 2);
        assert_eq!(share("log").headings, 1);
        assert_eq!(share("raft").tf, 4);
    }
}
