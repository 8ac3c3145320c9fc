//! Accuracy of the vectorised f32 functions against f64 libm, and bit-equality of the
//! AVX2-dispatched and plain loops.

use super::*;
use crate::backend::cpu::simd;

/// Error of `y` in units of the last place of the correctly rounded f32 of `r` (subnormal
/// spacing below `f32::MIN_POSITIVE`). Non-finite references must be matched exactly.
fn ulps(y: f32, r: f64) -> f64 {
    if r.is_nan() {
        return if y.is_nan() { 0.0 } else { f64::INFINITY };
    }
    let rf = r as f32;
    if rf.is_infinite() || y.is_infinite() || y.is_nan() {
        return if y == rf { 0.0 } else { f64::INFINITY };
    }
    (y as f64 - r).abs() / ulp_of(r)
}

/// The spacing of f32 values at magnitude `|r|`.
fn ulp_of(r: f64) -> f64 {
    let e = if r == 0.0 {
        -126
    } else {
        (r.abs().log2().floor() as i32).clamp(-126, 127)
    };
    2f64.powi(e - 23)
}

/// Inputs: every 1021st f32 bit pattern (all magnitudes and signs), a dense linear sweep of
/// `lo..hi`, and the special values.
fn inputs(lo: f32, hi: f32, n: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..=u32::MAX / 1021)
        .map(|i| f32::from_bits(i * 1021))
        .collect();
    v.extend((0..=n).map(|i| lo + (hi - lo) * (i as f32 / n as f32)));
    v.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::from_bits(1),
        -f32::from_bits(1),
        f32::MAX,
        f32::MIN,
        f32::EPSILON,
        1e-30,
        -1e-30,
        1.0,
        -1.0,
        0.5,
        -0.5,
    ]);
    v
}

/// Largest ulp error of `f` against `reference` over `xs` (and the worst input).
fn max_ulps(xs: &[f32], f: impl Fn(f32) -> f32, reference: impl Fn(f64) -> f64) -> (f64, f32) {
    let mut worst = (0.0, 0.0);
    for &x in xs {
        let e = ulps(f(x), reference(x as f64));
        assert!(
            e.is_finite(),
            "x = {x:e}: got {:e}, want {:e}",
            f(x),
            reference(x as f64)
        );
        if e > worst.0 {
            worst = (e, x);
        }
    }
    worst
}

fn gelu64(x: f64) -> f64 {
    x * 0.5 * libm::erfc(-x * std::f64::consts::FRAC_1_SQRT_2)
}

#[test]
#[cfg_attr(miri, ignore = "safe code: billions of evaluations")]
fn exp_within_1_ulp_everywhere() {
    // -104..89 covers overflow, the normal range and gradual underflow to 0
    let xs = inputs(-104.0, 89.0, 3_000_000);
    let (e, at) = max_ulps(&xs, exp, f64::exp);
    println!("exp: max {e:.3} ulp at {at:e}");
    assert!(e <= 1.0, "exp: {e} ulp at {at:e}");
    assert_eq!(exp(f32::INFINITY), f32::INFINITY);
    assert_eq!(exp(f32::NEG_INFINITY), 0.0);
    assert_eq!(exp(89.0), f32::INFINITY);
    assert_eq!(exp(-104.0), 0.0);
    assert!(exp(f32::NAN).is_nan() && exp(-f32::NAN).is_nan());
    assert_eq!(exp(0.0), 1.0);
    assert_eq!(exp(-0.0), 1.0);
    // largest finite result, and results near the smallest subnormal (2^-149 ≈ e^-103.28)
    for x in [88.72283f32, -103.2, -103.9, -87.4] {
        assert_eq!(
            exp(x).to_bits(),
            ((x as f64).exp() as f32).to_bits(),
            "exp({x})"
        );
    }
}

#[test]
#[cfg_attr(miri, ignore = "safe code: billions of evaluations")]
fn sigmoid_within_2_5_ulp_everywhere() {
    let xs = inputs(-110.0, 20.0, 2_000_000);
    let (e, at) = max_ulps(&xs, sigmoid, |x| 1.0 / (1.0 + (-x).exp()));
    println!("sigmoid: max {e:.3} ulp at {at:e}");
    assert!(e <= 2.5, "sigmoid: {e} ulp at {at:e}");
    assert_eq!(sigmoid(f32::INFINITY), 1.0);
    assert_eq!(sigmoid(f32::NEG_INFINITY), 0.0);
    assert_eq!(sigmoid(0.0), 0.5);
    assert_eq!(sigmoid(-0.0), 0.5);
    assert!(sigmoid(f32::NAN).is_nan());
    // relative accuracy far out on the left tail (≈ e^x)
    assert!(ulps(sigmoid(-90.0), 1.0 / (1.0 + 90f64.exp())) <= 1.0);
}

#[test]
#[cfg_attr(miri, ignore = "safe code: billions of evaluations")]
fn tanh_within_1_5_ulp_everywhere() {
    let mut xs = inputs(-10.0, 10.0, 2_000_000);
    xs.extend((0..=1_000_000).map(|i| -1.0 + 2.0 * (i as f32 / 1e6)));
    let (e, at) = max_ulps(&xs, tanh, f64::tanh);
    println!("tanh: max {e:.3} ulp at {at:e}");
    assert!(e <= 1.5, "tanh: {e} ulp at {at:e}");
    assert_eq!(tanh(f32::INFINITY), 1.0);
    assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
    assert_eq!(tanh(0.0).to_bits(), 0.0f32.to_bits());
    assert_eq!(tanh(-0.0).to_bits(), (-0.0f32).to_bits());
    assert_eq!(tanh(1e-30), 1e-30);
    assert_eq!(tanh(-f32::from_bits(1)), -f32::from_bits(1));
    assert!(tanh(f32::NAN).is_nan());
}

#[test]
#[cfg_attr(miri, ignore = "safe code: billions of evaluations")]
fn gelu_within_4_ulp_for_positive_x_and_8_ulp_for_negative_x() {
    // -15..10: from gelu underflowing to 0 to gelu(x) = x
    let xs = inputs(-15.0, 10.0, 3_000_000);
    let (head, tail): (Vec<f32>, Vec<f32>) = xs
        .iter()
        .filter(|&&x| x != f32::NEG_INFINITY)
        .partition(|&&x| x.is_nan() || x >= 0.0);
    let (e, at) = max_ulps(&head, gelu, gelu64);
    println!("gelu, x >= 0: max {e:.3} ulp at {at:e}");
    assert!(e <= 4.0, "gelu: {e} ulp at {at:e}");
    // relative accuracy all the way down to where gelu underflows (PyTorch's
    // `x·(1 + erf(x/√2))/2` loses it to cancellation: gelu(-10) comes out 0, not -7.7e-23)
    let (e, at) = max_ulps(&tail, gelu, gelu64);
    println!("gelu, x < 0: max {e:.3} ulp at {at:e}");
    assert!(e <= 8.0, "gelu: {e} ulp at {at:e}");
    // PyTorch's values at the ends
    assert!(gelu(f32::NEG_INFINITY).is_nan());
    assert_eq!(gelu(f32::INFINITY), f32::INFINITY);
    assert!(gelu(f32::NAN).is_nan());
    assert_eq!(gelu(0.0), 0.0);
}

#[test]
#[cfg_attr(miri, ignore = "safe code: billions of evaluations")]
fn gelu_grad_within_5_ulp_of_its_terms() {
    let xs = inputs(-15.0, 10.0, 3_000_000);
    let mut worst = (0.0, 0.0f32);
    for &x in xs.iter().filter(|x| x.is_finite()) {
        let xd = x as f64;
        let cdf = 0.5 * libm::erfc(-xd * std::f64::consts::FRAC_1_SQRT_2);
        let xpdf = xd * (-0.5 * xd * xd).exp() / (2.0 * std::f64::consts::PI).sqrt();
        let err = (gelu_grad(x) as f64 - (cdf + xpdf)).abs();
        if x < -13.0 {
            // e^{-x²/2} is (nearly) subnormal here: its absolute error counts
            let tol = 4.0 * ulp_of(cdf.abs().max(xpdf.abs())) + 8.0 * 2f64.powi(-149);
            assert!(err <= tol, "gelu_grad({x:e}) off by {err:e}");
            continue;
        }
        // in ulps of the larger term: at the derivative's zero (x ≈ -0.75) no f32 evaluation
        // of `Φ + xφ` can be relatively accurate, the sum cancels
        let e = err / ulp_of(cdf.abs().max(xpdf.abs()));
        if e > worst.0 {
            worst = (e, x);
        }
    }
    println!("gelu_grad: max {:.3} ulp at {:e}", worst.0, worst.1);
    assert!(
        worst.0 <= 5.0,
        "gelu_grad: {} ulp at {:e}",
        worst.0,
        worst.1
    );
    assert!(gelu_grad(f32::NAN).is_nan());
    assert_eq!(gelu_grad(0.0), 0.5);
    assert_eq!(gelu_grad(30.0), 1.0);
    assert_eq!(gelu_grad(-30.0), 0.0);
}

/// Bitwise equality of a function's AVX2-dispatched loops ([`simd::run`] and the contiguous
/// `unary_map` fast path) with the plain baseline loop. A macro, not a fn pointer, so the
/// function inlines into the dispatched loop like it does in the real kernels.
macro_rules! check_dispatch {
    ($xs:expr, $name:literal, |$x:ident| $body:expr) => {{
        let xs: &[f32] = $xs;
        let want = plain(xs, |$x| $body);
        let got = simd::run(|| xs.iter().map(|&$x| $body).collect::<Vec<f32>>());
        let layout = crate::Layout::contiguous(vec![xs.len()]);
        let got2 = crate::backend::cpu::elementwise::unary_map(xs, &layout, |$x: f32| $body);
        for ((&w, &a), (&b, &x)) in want.iter().zip(&got).zip(got2.iter().zip(xs)) {
            let same = |u: f32| u.to_bits() == w.to_bits() || (u.is_nan() && w.is_nan());
            assert!(
                same(a) && same(b),
                "{}({x:e}): plain {w:e}, simd {a:e} / {b:e}",
                $name
            );
        }
    }};
}

/// The plain (baseline) loop, kept out of any AVX2 caller.
#[inline(never)]
fn plain(xs: &[f32], f: impl Fn(f32) -> f32) -> Vec<f32> {
    xs.iter().map(|&x| f(x)).collect()
}

#[test]
fn dispatched_loop_matches_plain_loop_bitwise() {
    // Miri checks the dispatch's unsafe code on a short input (no SIMD level runs under Miri)
    let count = if cfg!(miri) { 300 } else { 200_000 };
    println!("AVX2+FMA path available: {}", simd::has_avx2());
    let mut g = crate::Generator::new(7);
    let mut xs: Vec<f32> = (0..count)
        .map(|i| g.next_normal() as f32 * [0.5, 3.0, 20.0, 80.0][i % 4])
        .collect();
    if cfg!(miri) {
        xs.extend([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1e-40,
            -88.0,
            89.0,
        ]);
    } else {
        xs.extend(inputs(-1.0, 1.0, 10).into_iter().step_by(97));
    }
    check_dispatch!(&xs, "exp", |x| exp(x));
    check_dispatch!(&xs, "sigmoid", |x| sigmoid(x));
    check_dispatch!(&xs, "tanh", |x| tanh(x));
    check_dispatch!(&xs, "gelu", |x| gelu(x));
    check_dispatch!(&xs, "gelu_grad", |x| gelu_grad(x));
    check_dispatch!(&xs, "silu", |x| x * sigmoid(x));
    check_dispatch!(&xs, "affine", |x| x * 1.7 + 0.3);
}

#[test]
#[cfg_attr(miri, ignore = "safe code: billions of evaluations")]
fn gelu_and_grad_returns_gelu_and_gelu_grad_bitwise() {
    let mut xs = inputs(-15.0, 10.0, 1_000_000);
    xs.extend([
        0.0,
        -0.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -200.0,
        200.0,
    ]);
    for x in xs {
        let (y, d) = gelu_and_grad(x);
        assert_eq!(y.to_bits(), gelu(x).to_bits(), "gelu({x:e})");
        assert_eq!(d.to_bits(), gelu_grad(x).to_bits(), "gelu_grad({x:e})");
    }
}

#[test]
#[cfg_attr(miri, ignore = "safe code: millions of evaluations")]
fn erf_within_4_ulp_everywhere() {
    let mut xs = inputs(-6.0, 6.0, 2_000_000);
    xs.extend((0..=1_000_000).map(|i| -1.0 + 2.0 * (i as f32 / 1e6)));
    let (e, at) = max_ulps(&xs, erf, libm::erf);
    println!("erf: max {e:.3} ulp at {at:e}");
    assert!(e <= 4.0, "erf: {e} ulp at {at:e}");
    assert_eq!(erf(f32::INFINITY), 1.0);
    assert_eq!(erf(f32::NEG_INFINITY), -1.0);
    assert_eq!(erf(0.0), 0.0);
    assert!(erf(f32::NAN).is_nan());
}
