//! Branchless f32 transcendental functions written so LLVM vectorises a loop over them.
//!
//! Why: libm's scalar `expf`/`erff` are calls LLVM cannot vectorise, which made `exp`, `gelu`
//! and `softmax` several times slower than memory bandwidth allows. Everything here is plain
//! mul/add/compare/select and integer bit tricks (no calls, no data-dependent branches), so a
//! loop over these functions becomes SIMD code: SSE2 in the baseline build, 8-wide AVX2 when a
//! kernel runs through [`super::simd`]. No `mul_add`: results must not depend on whether FMA is
//! available (the dispatched and the plain loop agree bit for bit).
//!
//! The polynomial and rational coefficients are minimax fits made for this file (iteratively
//! reweighted least squares against a 40-digit reference). Accuracy, measured against f64 libm
//! by the tests below: `exp` < 1 ulp, `sigmoid` ≤ 2.5 ulp, `tanh` ≤ 1.5 ulp over the whole f32
//! range including subnormal results; `gelu` ≤ 4 ulp for x ≥ 0 and ≤ 8 ulp for x < 0, where
//! `gelu(x) = x·Φ(x)` is tiny: it keeps relative accuracy down to the underflow threshold
//! (PyTorch's `x·(1 + erf(x/√2))/2` cancels to 0 there); `gelu_grad` ≤ 5 ulp of its larger
//! term `max(Φ(x), |x|·φ(x))`.
//! f64 kernels keep using libm: f64 is for gradient checks, where accuracy comes first.

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// `ln 2 = LN2_HI + LN2_LO`; `LN2_HI` has 9 significant bits, so `n · LN2_HI` is exact for
/// every `|n| ≤ 150` the range reduction produces (Cody–Waite splitting).
const LN2_HI: f32 = 355.0 / 512.0;
const LN2_LO: f32 = -2.121_944_4e-4;
/// `1.5 · 2^23`: adding it rounds a float of magnitude < 2^22 to an integer (ties to even),
/// and that integer can be read back from the low mantissa bits.
const SHIFTER: f32 = 12_582_912.0;
/// Above this `exp` overflows (`ln(f32::MAX) ≈ 88.72`); clamping here keeps `n ≤ 128`.
const EXP_HI: f32 = 89.0;
/// Below this `exp` rounds to 0 (`exp(-104) < 2^-150`); clamping here keeps `n ≥ -150`.
const EXP_LO: f32 = -104.0;

/// `e^r = 1 + r + r²·q(r)` on `|r| ≤ ln2/2`, relative error 3.1e-9.
const EXP_Q: [f32; 5] = [
    0.499_999_94,
    0.166_665_21,
    0.041_668_39,
    0.008_368_731,
    0.001_381_457_1,
];

/// `tanh x = x + x³·p(x²)` on `|x| < TANH_CUT`, relative error 4.4e-9.
const TANH_CUT: f32 = 0.625;
const TANH_P: [f32; 5] = [
    -0.333_332_8,
    0.133_314_42,
    -0.053_739_7,
    0.020_639_041,
    -0.005_704_934,
];

/// `Φ(-u)·e^{u²/2} = P(u)/Q(u)` on `0 ≤ u ≤ 20`, relative error 1.7e-10 (a scaled Mills
/// ratio: smooth, and all coefficients positive, so evaluation does not cancel; rounding in
/// its f32 evaluation, up to about 6·2^-24, is what dominates gelu's error).
const MILLS_P: [f32; 6] = [
    0.5,
    0.516_967_2,
    0.259_053_26,
    0.074_933_454,
    0.012_469_429_5,
    9.769_509e-4,
];
const MILLS_Q: [f32; 7] = [
    1.0,
    1.831_818_9,
    1.479_686_9,
    0.680_536_9,
    0.190_282_66,
    0.031_256_124,
    0.002_448_853_8,
];
/// Past this `e^{-u²/2}` is 0 in f32; clamping keeps the rational fit in its range.
const MILLS_MAX: f32 = 20.0;
const FRAC_1_SQRT_2PI: f32 = 0.398_942_3;

/// `if c { a } else { b }` on floats; written as a select so it compiles to a blend.
#[inline(always)]
fn sel(c: bool, a: f32, b: f32) -> f32 {
    if c {
        a
    } else {
        b
    }
}

/// `e^(a + b)` for a small tail `b` (|b| ≲ 0.1): `a` drives the range reduction and `b` is
/// added to the reduced argument, so `a + b` never has to be rounded to one f32.
#[inline(always)]
fn exp_tail(a: f32, b: f32) -> f32 {
    // Clamp with comparisons (not f32::min/max) so NaN passes through.
    let a = sel(a > EXP_HI, EXP_HI, a);
    let a = sel(a < EXP_LO, EXP_LO, a);
    let t = a * LOG2E + SHIFTER;
    let n = t - SHIFTER; // round(a · log2 e), ties to even
    let r = ((a - n * LN2_HI) + b) - n * LN2_LO;
    let q = EXP_Q[0] + r * (EXP_Q[1] + r * (EXP_Q[2] + r * (EXP_Q[3] + r * EXP_Q[4])));
    let p = 1.0 + (r + r * r * q);
    // 2^n as two factors 2^n1 · 2^n2 (each a normal float for n in [-150, 128]): the first
    // product is exact, the second rounds once, also into the subnormal range.
    let ni = (t.to_bits() as i32).wrapping_sub(SHIFTER.to_bits() as i32);
    let n1 = ni >> 1;
    let n2 = ni.wrapping_sub(n1);
    let s1 = f32::from_bits((n1.wrapping_add(127) as u32) << 23);
    let s2 = f32::from_bits((n2.wrapping_add(127) as u32) << 23);
    p * s1 * s2
}

/// `e^x`. NaN propagates, `+inf → inf`, `-inf → 0`, overflow to `inf` and gradual underflow
/// through the subnormals like libm.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // `x + -0.0 == x` for every x, so LLVM drops the tail add.
    exp_tail(x, -0.0)
}

/// Logistic sigmoid `1 / (1 + e^-x)`, computed as `e^-|x|`-based quotient so it keeps relative
/// accuracy for negative x (where it is ≈ e^x, down into the subnormals).
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    let e = exp(-x.abs());
    let num = sel(x < 0.0, e, 1.0);
    num / (1.0 + e)
}

/// Hyperbolic tangent: an odd polynomial below |x| = 0.625 (exact for tiny and subnormal x,
/// keeps the sign of ±0), `1 - 2/(e^{2|x|} + 1)` above.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let z = x * x;
    let p = TANH_P[0] + z * (TANH_P[1] + z * (TANH_P[2] + z * (TANH_P[3] + z * TANH_P[4])));
    // copysign: keeps tanh(-0) = -0 (the correction term's zero may be +0)
    let small = (x + x * z * p).copysign(x);
    let ax = x.abs();
    let big = (1.0 - 2.0 / (exp(2.0 * ax) + 1.0)).copysign(x);
    sel(ax < TANH_CUT, small, big)
}

/// `(e^{-x²/2}, Φ(-|x|)·e^{x²/2})`: the Gaussian factor and the scaled tail, whose product
/// is `Φ(-|x|)` with relative accuracy. `x²/2` is formed exactly by splitting `|x|` into a
/// 12-bit head and a tail, otherwise its rounding alone would cost `x²/2` ulps.
#[inline(always)]
fn gauss_tail(x: f32) -> (f32, f32) {
    let u = x.abs();
    let u = sel(u > MILLS_MAX, MILLS_MAX, u);
    let uh = f32::from_bits(u.to_bits() & 0xffff_f000);
    let ul = u - uh;
    // u² = uh² + ul·(u + uh), with uh² exact (≤ 24 significant bits)
    let e = exp_tail(-0.5 * (uh * uh), -0.5 * (ul * (u + uh)));
    let num = MILLS_P[0]
        + u * (MILLS_P[1]
            + u * (MILLS_P[2] + u * (MILLS_P[3] + u * (MILLS_P[4] + u * MILLS_P[5]))));
    let den = MILLS_Q[0]
        + u * (MILLS_Q[1]
            + u * (MILLS_Q[2]
                + u * (MILLS_Q[3] + u * (MILLS_Q[4] + u * (MILLS_Q[5] + u * MILLS_Q[6])))));
    (e, num / den)
}

/// The error function. Near 0 (|x| < 0.5) its odd Taylor series to x¹³ (relative error below
/// 1e-8 there); beyond, `1 - 2·Φ(-|x|·√2)` from the Gaussian tail that [`gelu`] uses, with
/// the sign put back.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let z = x * x;
    // 2/√π · (x - x³/3 + x⁵/10 - x⁷/42 + x⁹/216 - x¹¹/1320 + x¹³/9360)
    let series = x
        * std::f32::consts::FRAC_2_SQRT_PI
        * (1.0
            + z * (-1.0 / 3.0
                + z * (0.1
                    + z * (-1.0 / 42.0 + z * (1.0 / 216.0 + z * (-1.0 / 1320.0 + z / 9360.0))))));
    let (e, g) = gauss_tail(x * std::f32::consts::SQRT_2);
    let tail = (1.0 - 2.0 * (e * g)).copysign(x);
    sel(x.abs() < 0.5, series, tail)
}

/// GELU, exact form `x·Φ(x)` (PyTorch's default `approximate='none'`). For x < 0 it is
/// `x·e^{-x²/2}·g(|x|)`, relative-accurate however small; `gelu(-inf)` is NaN like PyTorch.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    let (e, g) = gauss_tail(x);
    gelu_from(x, e, g)
}

/// Derivative of [`gelu`]: `Φ(x) + x·φ(x)`.
#[inline(always)]
pub fn gelu_grad(x: f32) -> f32 {
    let (e, g) = gauss_tail(x);
    gelu_grad_from(x, e, g)
}

/// `(gelu(x), gelu_grad(x))` from one evaluation of the Gaussian factor and tail, bit for
/// bit what the two functions return (training keeps the derivative from the forward pass).
#[inline(always)]
pub fn gelu_and_grad(x: f32) -> (f32, f32) {
    let (e, g) = gauss_tail(x);
    (gelu_from(x, e, g), gelu_grad_from(x, e, g))
}

#[inline(always)]
fn gelu_from(x: f32, e: f32, g: f32) -> f32 {
    let neg = (x * g) * e;
    let pos = x * (1.0 - e * g);
    sel(x < 0.0, neg, pos)
}

#[inline(always)]
fn gelu_grad_from(x: f32, e: f32, g: f32) -> f32 {
    let xp = x * FRAC_1_SQRT_2PI;
    let neg = e * (g + xp);
    let pos = 1.0 + e * (xp - g);
    sel(x < 0.0, neg, pos)
}

#[cfg(test)]
#[path = "vmath_tests.rs"]
mod tests;
