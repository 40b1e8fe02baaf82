//! A tiny model2vec model (18 pieces, 4 dimensions), a second one whose
//! words point where the tests want, and wheels holding them, written by
//! the tests that import models.

#![allow(dead_code)]

use std::io::Write;

/// A `tokenizer.json` of a Unigram model over `vocab` (`[piece, score]`
/// pairs, `<unk>` second), splitting on whitespace and marking word starts
/// with `\u{2581}`; with `added_tokens` unless it is null.
fn unigram_tokenizer(vocab: Vec<serde_json::Value>, added_tokens: serde_json::Value) -> String {
    let mut tokenizer = serde_json::json!({
        "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"},
            {"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": "always", "split": true}
        ]},
        "model": {"type": "Unigram", "unk_id": 1, "vocab": vocab, "byte_fallback": false}
    });
    if !added_tokens.is_null() {
        tokenizer["added_tokens"] = added_tokens;
    }
    tokenizer.to_string()
}

/// A model2vec model's files: `rows` × `dims` embeddings (`data`, f32
/// little-endian, row by row) and its tokenizer.
fn model_files(
    rows: usize,
    dims: usize,
    data: &[u8],
    tokenizer: String,
) -> [(&'static str, Vec<u8>); 3] {
    let view =
        safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![rows, dims], data)
            .unwrap();
    let tensors = safetensors::serialize([("embeddings", view)], &None).unwrap();
    [
        ("config.json", br#"{"normalize": true}"#.to_vec()),
        ("model.safetensors", tensors),
        ("tokenizer.json", tokenizer.into_bytes()),
    ]
}

/// `config.json`, `model.safetensors` and `tokenizer.json` of the model.
pub fn files() -> [(&'static str, Vec<u8>); 3] {
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
    let vocab: Vec<serde_json::Value> = vocab
        .iter()
        .map(|(piece, score)| serde_json::json!([piece, score]))
        .collect();
    let tokenizer = unigram_tokenizer(vocab, serde_json::json!(null));
    let (rows, dims) = (18usize, 4usize);
    let mut data = Vec::with_capacity(rows * dims * 4);
    for row in 0..rows {
        for d in 0..dims {
            let value = if d == row % dims {
                1.0f32
            } else {
                0.1 * d as f32
            };
            data.extend_from_slice(&value.to_le_bytes());
        }
    }
    model_files(rows, dims, &data, tokenizer)
}

/// The dimensions of [`topic_files`]' model: what its words are about.
pub const TIREDNESS: usize = 0;
pub const PLACES: usize = 1;
pub const GEAR: usize = 2;

/// Words of the topic model, each pointing along one axis.
const TOPIC_WORDS: [(&str, usize); 15] = [
    ("fatigue", TIREDNESS),
    ("tired", TIREDNESS),
    ("weary", TIREDNESS),
    ("drained", TIREDNESS),
    ("exhausted", TIREDNESS),
    ("glycogen", TIREDNESS),
    ("route", PLACES),
    ("city", PLACES),
    ("bridge", PLACES),
    ("streets", PLACES),
    ("crowd", PLACES),
    ("river", PLACES),
    ("shoes", GEAR),
    ("socks", GEAR),
    ("laces", GEAR),
];

/// A second model2vec model (4 dimensions) whose words the tests place:
/// each word of [`TOPIC_WORDS`] is a unit vector along its topic's axis,
/// and every other word is unknown and skipped (its `<unk>` is a special
/// token), so a text's vector is the mean of its topic words. Words that
/// mean the same are close without sharing a letter: "fatigue" and
/// "exhausted", not "marathon", which it does not know.
pub fn topic_files() -> [(&'static str, Vec<u8>); 3] {
    let mut vocab = vec![
        serde_json::json!(["<pad>", 0.0]),
        serde_json::json!(["<unk>", 0.0]),
    ];
    vocab.extend(
        TOPIC_WORDS
            .iter()
            .map(|(word, _)| serde_json::json!([format!("\u{2581}{word}"), -2.0])),
    );
    let tokenizer = unigram_tokenizer(
        vocab,
        serde_json::json!([{"id": 1, "content": "<unk>", "special": true}]),
    );
    let dims = 4usize;
    // `<pad>` and `<unk>` are never read: zero rows.
    let mut data = vec![0u8; 2 * dims * 4];
    for (_, axis) in TOPIC_WORDS {
        for d in 0..dims {
            let value = if d == axis { 1.0f32 } else { 0.0 };
            data.extend_from_slice(&value.to_le_bytes());
        }
    }
    let rows = 2 + TOPIC_WORDS.len();
    model_files(rows, dims, &data, tokenizer)
}

/// A zip of `entries` (name, bytes), stored uncompressed or deflated.
pub fn zip(entries: &[(String, Vec<u8>)], deflated: bool) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let method = if deflated {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    let options = zip::write::SimpleFileOptions::default().compression_method(method);
    for (name, bytes) in entries {
        zip.start_file(name.as_str(), options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// A wheel holding the model in `tiny_model/model/`.
pub fn wheel(deflated: bool) -> Vec<u8> {
    let entries: Vec<(String, Vec<u8>)> = files()
        .into_iter()
        .map(|(name, bytes)| (format!("tiny_model/model/{name}"), bytes))
        .collect();
    zip(&entries, deflated)
}

/// Rewrites, in the local header and the central directory entry of every
/// entry of `zip`, the declared uncompressed size to `size` (a zip64 size
/// when it does not fit 32 bits: the 32-bit fields say 0xFFFFFFFF and a
/// zip64 extra field holds it).
pub fn with_declared_size(zip: &[u8], size: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut local_offsets = std::collections::HashMap::new();
    let mut at = 0;
    let u16_at = |b: &[u8], i: usize| u16::from_le_bytes([b[i], b[i + 1]]) as usize;
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap()) as usize;
    let zip64 = size > u32::MAX as u64 - 1;
    // Local headers and their data, each rewritten with the new size.
    while zip[at..].starts_with(b"PK\x03\x04") {
        let name_len = u16_at(zip, at + 26);
        let extra_len = u16_at(zip, at + 28);
        let compressed = u32_at(zip, at + 18);
        let header_end = at + 30 + name_len + extra_len;
        local_offsets.insert(at, out.len());
        let mut header = zip[at..at + 30 + name_len].to_vec();
        let mut extra = Vec::new();
        if zip64 {
            header[22..26].copy_from_slice(&u32::MAX.to_le_bytes());
            header[18..22].copy_from_slice(&u32::MAX.to_le_bytes());
            extra.extend_from_slice(&1u16.to_le_bytes());
            extra.extend_from_slice(&16u16.to_le_bytes());
            extra.extend_from_slice(&size.to_le_bytes());
            extra.extend_from_slice(&(compressed as u64).to_le_bytes());
        } else {
            header[22..26].copy_from_slice(&(size as u32).to_le_bytes());
        }
        header[28..30].copy_from_slice(&(extra.len() as u16).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&extra);
        out.extend_from_slice(&zip[header_end..header_end + compressed]);
        at = header_end + compressed;
    }
    // The central directory, with the same sizes and the moved offsets.
    let directory_start = out.len();
    let mut entries = 0u16;
    while zip[at..].starts_with(b"PK\x01\x02") {
        let name_len = u16_at(zip, at + 28);
        let extra_len = u16_at(zip, at + 30);
        let comment_len = u16_at(zip, at + 32);
        let compressed = u32_at(zip, at + 20);
        let offset = u32_at(zip, at + 42);
        let mut header = zip[at..at + 46 + name_len].to_vec();
        let mut extra = Vec::new();
        if zip64 {
            header[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
            header[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
            extra.extend_from_slice(&1u16.to_le_bytes());
            extra.extend_from_slice(&16u16.to_le_bytes());
            extra.extend_from_slice(&size.to_le_bytes());
            extra.extend_from_slice(&(compressed as u64).to_le_bytes());
        } else {
            header[24..28].copy_from_slice(&(size as u32).to_le_bytes());
        }
        header[30..32].copy_from_slice(&(extra.len() as u16).to_le_bytes());
        header[32..34].copy_from_slice(&0u16.to_le_bytes());
        header[42..46].copy_from_slice(&(local_offsets[&offset] as u32).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&extra);
        entries += 1;
        at += 46 + name_len + extra_len + comment_len;
    }
    let directory_size = out.len() - directory_start;
    out.extend_from_slice(b"PK\x05\x06");
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&entries.to_le_bytes());
    out.extend_from_slice(&entries.to_le_bytes());
    out.extend_from_slice(&(directory_size as u32).to_le_bytes());
    out.extend_from_slice(&(directory_start as u32).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}
