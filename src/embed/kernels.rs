//! The arithmetic of a BERT forward pass on the CPU: matrix products through
//! the `gemm` crate (which picks its kernels for the CPU at run time), and
//! the elementwise steps (softmax, layer norm, GELU) written as plain loops
//! that the compiler vectorises. They are `#[inline(always)]` so that a
//! caller compiled for AVX2 (see `bert::Bert::embed`) gets the wide code.
//! The elementwise steps serve the 4-bit XLM-R encoder (`e5`) too, which
//! is in every build; the `gemm` products only in the `bert` feature's.

/// A strided view of a row-major matrix inside a slice.
#[cfg(feature = "bert")]
#[derive(Clone, Copy)]
pub(super) struct View<'a> {
    pub data: &'a [f32],
    pub row_stride: usize,
    pub col_stride: usize,
}

#[cfg(feature = "bert")]
impl<'a> View<'a> {
    pub(super) fn rows(data: &'a [f32], row_stride: usize) -> View<'a> {
        View {
            data,
            row_stride,
            col_stride: 1,
        }
    }

    /// The transpose of a row-major matrix held in `data`.
    pub(super) fn transposed(data: &'a [f32], row_stride: usize) -> View<'a> {
        View {
            data,
            row_stride: 1,
            col_stride: row_stride,
        }
    }

    fn check(&self, rows: usize, cols: usize) {
        let last = (rows.max(1) - 1) * self.row_stride + (cols.max(1) - 1) * self.col_stride;
        assert!(
            rows == 0 || cols == 0 || last < self.data.len(),
            "view out of bounds"
        );
    }
}

/// `dst (m×n, row stride dst_stride) = scale · lhs (m×k) · rhs (k×n)`, plus
/// what `dst` held when `accumulate`. One thread: callers parallelise over
/// texts, which scales better than splitting small products.
#[cfg(feature = "bert")]
#[allow(clippy::too_many_arguments)]
pub(super) fn matmul(
    (m, n, k): (usize, usize, usize),
    dst: &mut [f32],
    dst_stride: usize,
    accumulate: bool,
    lhs: View,
    rhs: View,
    scale: f32,
) {
    lhs.check(m, k);
    rhs.check(k, n);
    View::rows(dst, dst_stride).check(m, n);
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: the three checks above keep every index the product touches
    // inside its slice, and `dst` is borrowed mutably apart from the inputs.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            dst_stride as isize,
            accumulate,
            lhs.data.as_ptr(),
            lhs.col_stride as isize,
            lhs.row_stride as isize,
            rhs.data.as_ptr(),
            rhs.col_stride as isize,
            rhs.row_stride as isize,
            1.0,
            scale,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// A sum in eight lanes, so that it vectorises.
#[inline(always)]
fn sum(xs: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let chunks = xs.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().sum();
    for chunk in chunks {
        for (lane, x) in lanes.iter_mut().zip(chunk) {
            *lane += x;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// `e^x` to a relative error of about 1e-7 · (4 + |x|): ample for softmax
/// and GELU. Integer and float arithmetic only, so it vectorises where
/// `f32::exp` does not.
#[inline(always)]
pub(super) fn exp(x: f32) -> f32 {
    // Adding 1.5 · 2^23 rounds to an integer, which then sits in the low
    // bits of the sum: the power of two without a float-to-int conversion.
    const ROUND: f32 = 12_582_912.0;
    let t = x.clamp(-87.0, 88.0) * std::f32::consts::LOG2_E;
    let shifted = t + ROUND;
    let whole = shifted - ROUND;
    let f = t - whole;
    // 2^f for |f| ≤ ½: Taylor series of e^(f·ln 2) to the sixth power.
    let p = 1.0
        + f * (std::f32::consts::LN_2
            + f * (0.240_226_5
                + f * (0.055_504_11
                    + f * (0.009_618_129 + f * (0.001_333_355_8 + f * 0.000_154_035_3)))));
    let power = shifted.to_bits().wrapping_sub(ROUND.to_bits()) << 23;
    f32::from_bits(p.to_bits().wrapping_add(power))
}

/// The error function (Abramowitz and Stegun 7.1.26, error below 1.5e-7).
#[inline(always)]
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152_1 + t * 1.061_405_4))));
    (1.0 - poly * exp(-a * a)).copysign(x)
}

/// GELU with the exact (erf) curve, as BERT's `gelu`.
#[inline(always)]
pub(super) fn gelu(xs: &mut [f32]) {
    for x in xs {
        *x = 0.5 * *x * (1.0 + erf(*x * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// GELU with the tanh curve.
#[cfg(feature = "bert")]
#[inline(always)]
pub(super) fn gelu_tanh(xs: &mut [f32]) {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    for x in xs {
        let u = SQRT_2_OVER_PI * (*x + 0.044_715 * *x * *x * *x);
        let tanh = 1.0 - 2.0 / (1.0 + exp(2.0 * u));
        *x = 0.5 * *x * (1.0 + tanh);
    }
}

#[cfg(feature = "bert")]
#[inline(always)]
pub(super) fn relu(xs: &mut [f32]) {
    for x in xs {
        *x = x.max(0.0);
    }
}

/// Softmax over each row of `width` values.
#[inline(always)]
pub(super) fn softmax_rows(xs: &mut [f32], width: usize) {
    for row in xs.chunks_exact_mut(width) {
        let mut lanes = [f32::NEG_INFINITY; 8];
        for chunk in row.chunks(8) {
            for (lane, &x) in lanes.iter_mut().zip(chunk) {
                if x > *lane {
                    *lane = x;
                }
            }
        }
        let max = lanes
            .iter()
            .fold(f32::NEG_INFINITY, |a, &b| if b > a { b } else { a });
        for x in row.iter_mut() {
            *x = exp(*x - max);
        }
        let scale = 1.0 / sum(row);
        for x in row.iter_mut() {
            *x *= scale;
        }
    }
}

/// Layer normalisation of each row of `weight.len()` values.
#[inline(always)]
pub(super) fn layer_norm_rows(xs: &mut [f32], weight: &[f32], bias: &[f32], eps: f32) {
    let width = weight.len();
    for row in xs.chunks_exact_mut(width) {
        let mean = sum(row) / width as f32;
        for x in row.iter_mut() {
            *x -= mean;
        }
        let mut lanes = [0f32; 8];
        for chunk in row.chunks(8) {
            for (lane, x) in lanes.iter_mut().zip(chunk) {
                *lane += x * x;
            }
        }
        let variance = lanes.iter().sum::<f32>() / width as f32;
        let inverse = 1.0 / (variance + eps).sqrt();
        for ((x, w), b) in row.iter_mut().zip(weight).zip(bias) {
            *x = *x * inverse * w + b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_matches_the_standard_library() {
        for i in -8000..8000 {
            let x = i as f32 / 100.0;
            let (fast, exact) = (exp(x), x.exp());
            assert!(
                // Rounding `x · log2 e` in f32 costs precision as |x| grows.
                ((fast - exact) / exact).abs() < 4e-7 + 1e-7 * x.abs(),
                "{x}: {fast} vs {exact}"
            );
        }
        assert_eq!(exp(-1000.0), exp(-87.0));
    }

    #[test]
    fn gelu_matches_the_erf_definition() {
        let mut xs: Vec<f32> = (-600..600).map(|i| i as f32 / 100.0).collect();
        let expected: Vec<f64> = xs
            .iter()
            .map(|&x| {
                let x = x as f64;
                // erf by its Maclaurin series, exact enough for |x| ≤ 6/√2.
                let z = x / std::f64::consts::SQRT_2;
                let (mut term, mut erf, mut n) = (z, 0.0, 0.0);
                while term.abs() > 1e-17 || n < 5.0 {
                    erf += term / (2.0 * n + 1.0);
                    n += 1.0;
                    term *= -z * z / n;
                }
                0.5 * x * (1.0 + erf * 2.0 / std::f64::consts::PI.sqrt())
            })
            .collect();
        gelu(&mut xs);
        for (got, want) in xs.iter().zip(&expected) {
            assert!((*got as f64 - want).abs() < 2e-6, "{got} vs {want}");
        }
    }

    #[test]
    fn softmax_and_layer_norm_rows() {
        let mut xs = vec![1.0, 2.0, 3.0, 0.0, 0.0, 0.0];
        softmax_rows(&mut xs, 3);
        let total = 1.0 + 1f32.exp() + 2f32.exp();
        let want = [1.0 / total, 1f32.exp() / total, 2f32.exp() / total];
        for (got, want) in xs.iter().zip(want.iter().chain(&[1.0 / 3.0; 3])) {
            assert!((got - want).abs() < 1e-6);
        }
        let mut ys = vec![1.0, 3.0];
        layer_norm_rows(&mut ys, &[2.0, 2.0], &[0.5, 0.5], 0.0);
        assert_eq!(ys, vec![-1.5, 2.5]);
    }

    #[cfg(feature = "bert")]
    #[test]
    fn strided_products_match_a_plain_loop() {
        // lhs 2×3, rhs as the transpose of a 4×3 row-major matrix.
        let lhs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let rhs: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
        let mut dst = vec![1.0; 8];
        matmul(
            (2, 4, 3),
            &mut dst,
            4,
            true,
            View::rows(&lhs, 3),
            View::transposed(&rhs, 3),
            2.0,
        );
        for i in 0..2 {
            for j in 0..4 {
                let dot: f32 = (0..3).map(|k| lhs[i * 3 + k] * rhs[j * 3 + k]).sum();
                assert_eq!(dst[i * 4 + j], 1.0 + 2.0 * dot);
            }
        }
    }
}
