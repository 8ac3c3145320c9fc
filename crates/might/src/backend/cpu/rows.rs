//! Row reductions with independent lanes (max, sum of f(x), dot product): shared by the
//! softmax, attention, loss and conv kernels. A fixed-width accumulator array vectorises where
//! a single running value cannot (each add would wait for the previous one).

use num_traits::Float;

/// Independent accumulators in the row reductions: a fixed-width array the compiler keeps in
/// vector registers, where a single running `f32` sum could not be vectorised. 32 = two
/// AVX-512 or four AVX2 registers, so consecutive adds do not wait on each other's latency
/// (8, one AVX2 register, made softmax over rows of 1024 ~5 % slower).
const LANES: usize = 32;

/// A shorter width for what is left after the `LANES`-wide chunks, so rows shorter than
/// `LANES` (causal attention rows, a few dozen classes) still run vectorised.
const TAIL: usize = 8;

/// Largest element of a row, ignoring NaN (a NaN still poisons the row through `exp`).
#[inline(always)]
pub fn row_max<T: Float>(r: &[T]) -> T {
    let max = |a: T, v: T| if v > a { v } else { a };
    let mut acc = [T::neg_infinity(); LANES];
    let mut it = r.chunks_exact(LANES);
    for c in &mut it {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = max(*a, v);
        }
    }
    let mut it8 = it.remainder().chunks_exact(TAIL);
    for c in &mut it8 {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = max(*a, v);
        }
    }
    let m = it8
        .remainder()
        .iter()
        .fold(T::neg_infinity(), |a, &v| max(a, v));
    acc.iter().fold(m, |a, &v| max(a, v))
}

/// Sum of `f(r[i])` over a row, in `LANES` interleaved partial sums.
#[inline(always)]
pub fn row_sum<T: Float>(r: &[T], f: impl Fn(T) -> T) -> T {
    let mut acc = [T::zero(); LANES];
    let mut it = r.chunks_exact(LANES);
    for c in &mut it {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = *a + f(v);
        }
    }
    let mut it8 = it.remainder().chunks_exact(TAIL);
    for c in &mut it8 {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = *a + f(v);
        }
    }
    let s = it8.remainder().iter().fold(T::zero(), |a, &v| a + f(v));
    acc.iter().fold(s, |a, &v| a + v)
}

/// `Σ a[i]·b[i]` in `LANES` interleaved partial sums.
#[inline(always)]
pub fn row_dot<T: Float>(a: &[T], b: &[T]) -> T {
    row_sum2(a, b, |x, y| x * y)
}

/// Sum of `f(a[i], b[i])` over two rows (the shorter one's length), in `LANES` interleaved
/// partial sums.
#[inline(always)]
pub fn row_sum2<T: Float>(a: &[T], b: &[T], f: impl Fn(T, T) -> T) -> T {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [T::zero(); LANES];
    let (mut ac, mut bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    for (x, y) in (&mut ac).zip(&mut bc) {
        for ((s, &x), &y) in acc.iter_mut().zip(x).zip(y) {
            *s = *s + f(x, y);
        }
    }
    let (mut a8, mut b8) = (
        ac.remainder().chunks_exact(TAIL),
        bc.remainder().chunks_exact(TAIL),
    );
    for (x, y) in (&mut a8).zip(&mut b8) {
        for ((s, &x), &y) in acc.iter_mut().zip(x).zip(y) {
            *s = *s + f(x, y);
        }
    }
    let tail = a8
        .remainder()
        .iter()
        .zip(b8.remainder())
        .fold(T::zero(), |s, (&x, &y)| s + f(x, y));
    acc.iter().fold(tail, |s, &v| s + v)
}
