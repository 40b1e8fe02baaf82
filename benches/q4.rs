//! The multilingual-e5 encoder's products, in process: our 4-bit weights
//! × int8 activations kernel against the same weights dequantized to f32
//! (a register-tiled AVX2 FMA kernel written here for the comparison, six
//! tokens × sixteen rows per step), on the model's largest shape
//! (1536 × 384), for a query's 17 tokens and a batch's 1,200, on one
//! thread. Prints milliseconds, GMAC/s and the memory each layout takes
//! for the model's 12 layers. Run with `cargo bench --bench q4`.

use std::time::Instant;

use ctxpack::internals::q4::{self, Q4Matrix, Quantized};

const ROWS: usize = 1536;
const COLS: usize = 384;
/// Weights in the model's 12 layers (four 384² and two 1536 × 384).
const LAYER_WEIGHTS: usize = 12 * (4 * 384 * 384 + 2 * 1536 * 384);

fn main() {
    let mut state = 0x2545_f491_u32;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state
    };
    let mut bytes = Vec::new();
    for _ in 0..ROWS * COLS / q4::BLOCK {
        let scale = half::f16::from_f32((next() % 1000) as f32 / 20_000.0 + 0.001);
        bytes.extend_from_slice(&scale.to_bits().to_le_bytes());
        bytes.extend((0..16).map(|_| next() as u8));
    }
    let w = Q4Matrix {
        bytes: &bytes,
        rows: ROWS,
        cols: COLS,
    };
    let mut dequantized = vec![0f32; ROWS * COLS];
    for (r, row) in dequantized.chunks_exact_mut(COLS).enumerate() {
        w.dequantize_row(r, row);
    }
    let packed = f32_kernel::pack(&dequantized, ROWS, COLS);
    println!(
        "12 layers' weights: 4-bit {:.1} MB, f32 {:.1} MB",
        (LAYER_WEIGHTS / q4::BLOCK * q4::BLOCK_BYTES) as f64 / 1e6,
        (LAYER_WEIGHTS * 4) as f64 / 1e6
    );
    let bias = vec![0f32; ROWS];
    for tokens in [17, 1200] {
        let x: Vec<f32> = (0..tokens * COLS)
            .map(|_| (next() % 2000) as f32 / 1000.0 - 1.0)
            .collect();
        let mut a = Quantized::default();
        let mut y = vec![0f32; tokens * ROWS];
        let int8 = best_of(tokens, || {
            a.quantize(&x, COLS);
            q4::matmul(w, &bias, &a, &mut y, false);
        });
        let mut z = vec![0f32; tokens * ROWS];
        let float = if q4::avx2() {
            // SAFETY: the CPU has AVX2 and FMA.
            best_of(tokens, || unsafe {
                f32_kernel::matmul(&packed, ROWS, COLS, &x, tokens, &mut z)
            })
        } else {
            f64::NAN
        };
        let macs = (tokens * ROWS * COLS) as f64;
        println!(
            "{tokens} tokens: 4-bit × int8 {:.3} ms ({:.1} GMAC/s, quantization included); \
             f32 {:.3} ms ({:.1} GMAC/s)",
            int8 * 1e3,
            macs / int8 / 1e9,
            float * 1e3,
            macs / float / 1e9
        );
    }
}

/// The fastest of several runs of `f`, in seconds.
fn best_of(tokens: usize, mut f: impl FnMut()) -> f64 {
    let reps = if tokens < 100 { 100 } else { 3 };
    (0..5)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..reps {
                f();
            }
            started.elapsed().as_secs_f64() / reps as f64
        })
        .fold(f64::INFINITY, f64::min)
}

mod f32_kernel {
    /// `w` (`rows × cols`, rows a multiple of 16) as column-major panels
    /// of sixteen rows.
    pub fn pack(w: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        let mut packed = vec![0f32; rows * cols];
        for panel in 0..rows / 16 {
            for k in 0..cols {
                for i in 0..16 {
                    packed[(panel * cols + k) * 16 + i] = w[(panel * 16 + i) * cols + k];
                }
            }
        }
        packed
    }

    /// `y (tokens × rows) = x · wᵀ`.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn matmul(
        packed: &[f32],
        rows: usize,
        cols: usize,
        x: &[f32],
        tokens: usize,
        y: &mut [f32],
    ) {
        use std::arch::x86_64::*;
        const TOKENS: usize = 6;
        assert!(packed.len() == rows * cols && x.len() == tokens * cols);
        assert!(y.len() == tokens * rows && rows.is_multiple_of(16));
        for panel in 0..rows / 16 {
            let weights = &packed[panel * cols * 16..][..cols * 16];
            for first in (0..tokens).step_by(TOKENS) {
                let count = TOKENS.min(tokens - first);
                let mut acc = [[_mm256_setzero_ps(); 2]; TOKENS];
                for k in 0..cols {
                    // SAFETY: the asserts keep every access inside the slices.
                    unsafe {
                        let w0 = _mm256_loadu_ps(weights.as_ptr().add(k * 16));
                        let w1 = _mm256_loadu_ps(weights.as_ptr().add(k * 16 + 8));
                        for (t, acc) in acc.iter_mut().enumerate().take(count) {
                            let v = _mm256_set1_ps(*x.get_unchecked((first + t) * cols + k));
                            acc[0] = _mm256_fmadd_ps(v, w0, acc[0]);
                            acc[1] = _mm256_fmadd_ps(v, w1, acc[1]);
                        }
                    }
                }
                for (t, acc) in acc.iter().enumerate().take(count) {
                    let out = &mut y[(first + t) * rows + panel * 16..][..16];
                    // SAFETY: `out` holds sixteen floats.
                    unsafe {
                        _mm256_storeu_ps(out.as_mut_ptr(), acc[0]);
                        _mm256_storeu_ps(out.as_mut_ptr().add(8), acc[1]);
                    }
                }
            }
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub unsafe fn matmul(_: &[f32], _: usize, _: usize, _: &[f32], _: usize, _: &mut [f32]) {}
}
