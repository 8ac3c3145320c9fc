//! softmax / log_softmax kernels over contiguous rows: one fused, numerically stable pass per
//! row (max, then exp-sum, then normalise), and the fused backward.

use super::fused::{map_blocks, rows_per_task, Real};
use super::rows::{row_dot, row_max, row_sum};
use super::unary_ops::FloatExt;
use super::{pool, simd, threads};
use num_traits::Float;

/// Sum of `exp(r[i] - m)` without storing the exponentials: they go through a small stack
/// buffer so the `exp` loop vectorises.
#[inline(always)]
pub(crate) fn exp_sum<T: Float + FloatExt>(r: &[T], m: T) -> T {
    let mut buf = [T::zero(); 64];
    let mut s = T::zero();
    for c in r.chunks(64) {
        let b = &mut buf[..c.len()];
        for (e, &v) in b.iter_mut().zip(c) {
            *e = (v - m).exp_();
        }
        s = s + row_sum(b, |e| e);
    }
    s
}

/// `f(out_row, other_row)` for each pair of `n`-element rows of `out` and `other` (rows in
/// parallel when large), the rows of one task inside [`simd::run`].
fn paired_rows<T: Send + Sync>(
    out: &mut [T],
    other: &[T],
    n: usize,
    f: impl Fn(&mut [T], &[T]) + Sync,
) {
    if n == 0 || out.is_empty() {
        return;
    }
    let block = n * 4096usize.div_ceil(n);
    let run = |start: usize, o: &mut [T]| {
        simd::run(
            #[inline(always)]
            || {
                let ob = &other[start..start + o.len()];
                // a plain loop with a direct call, so `f` inlines into the SIMD build
                for (r, orow) in o.chunks_mut(n).zip(ob.chunks(n)) {
                    f(r, orow)
                }
            },
        )
    };
    if threads::parallel(out.len()) {
        threads::for_each_chunk(out, block, |i, o| run(i * block, o));
    } else {
        run(0, out);
    }
}

/// softmax / log_softmax of the rows of `n` elements of `x`, into a new buffer: max, then the
/// exponentials written straight to the output (no copy of the input first), then normalise.
pub(crate) fn softmax_rows<T: Float + FloatExt + Send + Sync + Default + 'static>(
    x: &[T],
    n: usize,
    log: bool,
) -> Vec<T> {
    // every element is written below
    let mut out = pool::output::<T>(x.len());
    paired_rows(
        &mut out,
        x,
        n,
        #[inline(always)]
        |r, xr| {
            let m = row_max(xr);
            let m = if m.is_finite() { m } else { T::zero() };
            if log {
                let ls = exp_sum(xr, m).ln();
                for (y, &v) in r.iter_mut().zip(xr) {
                    *y = (v - m) - ls;
                }
            } else {
                for (y, &v) in r.iter_mut().zip(xr) {
                    *y = (v - m).exp_();
                }
                let inv = T::one() / row_sum(r, |e| e);
                for y in r.iter_mut() {
                    *y = *y * inv;
                }
            }
        },
    );
    out
}

/// Backward of [`softmax_rows`] given the output `y`, overwriting the gradient `g` rows.
pub(crate) fn softmax_back_rows<T: Float + FloatExt + Send + Sync>(
    mut out: Vec<T>,
    y: &[T],
    n: usize,
    log: bool,
) -> Vec<T> {
    // each row of `out` holds the incoming gradient and becomes the input gradient
    paired_rows(
        &mut out,
        y,
        n,
        #[inline(always)]
        |r, yr| {
            if log {
                // dx = g - exp(y) * sum(g)
                let s = row_sum(r, |v| v);
                for (x, &yv) in r.iter_mut().zip(yr) {
                    *x = *x - yv.exp_() * s;
                }
            } else {
                // dx = y * (g - sum(g * y))
                let s = row_dot(r, yr);
                for (x, &yv) in r.iter_mut().zip(yr) {
                    *x = yv * (*x - s);
                }
            }
        },
    );
    out
}

/// Forward of the causal softmax (`ops::attention::causal_softmax`) on contiguous rows of `s` keys; row `r` is query
/// `r % t`, which sees keys `0..=query + offset`.
pub(crate) fn causal_softmax_fwd<T: Real>(
    x: &[T],
    t: usize,
    s: usize,
    scale: T,
    offset: usize,
) -> Vec<T> {
    let rows = x.len() / s;
    // masked (future) positions stay zero
    let mut y = pool::zeroed::<T>(x.len());
    let rpt = rows_per_task(s, rows);
    map_blocks(&mut y, rpt * s, |bi, yb| {
        simd::run(
            #[inline(always)]
            || {
                for (r, yr) in yb.chunks_mut(s).enumerate() {
                    let row = bi * rpt + r;
                    let valid = ((row % t) + offset + 1).min(s);
                    let (xr, yr) = (&x[row * s..row * s + valid], &mut yr[..valid]);
                    let m = row_max(xr) * scale;
                    let m = if m.is_finite() { m } else { T::f(0.0) };
                    for (o, &v) in yr.iter_mut().zip(xr) {
                        *o = (v * scale - m).exp_();
                    }
                    let inv = T::f(1.0) / row_sum(yr, |e| e);
                    for o in yr.iter_mut() {
                        *o = *o * inv;
                    }
                }
            },
        )
    });
    y
}

/// Backward of the causal softmax: `dx = scale·y·(g - Σ g·y)` on the visible keys, 0 elsewhere.
pub(crate) fn causal_softmax_bwd<T: Real>(
    g: &[T],
    y: &[T],
    t: usize,
    s: usize,
    scale: T,
    offset: usize,
) -> Vec<T> {
    let rows = y.len() / s;
    let mut dx = pool::zeroed::<T>(y.len());
    let rpt = rows_per_task(s, rows);
    map_blocks(&mut dx, rpt * s, |bi, db| {
        simd::run(
            #[inline(always)]
            || {
                for (r, dr) in db.chunks_mut(s).enumerate() {
                    let row = bi * rpt + r;
                    let valid = ((row % t) + offset + 1).min(s);
                    let (gr, yr) = (&g[row * s..row * s + valid], &y[row * s..row * s + valid]);
                    let dot = row_dot(gr, yr);
                    for ((o, &gv), &yv) in dr[..valid].iter_mut().zip(gr).zip(yr) {
                        *o = scale * yv * (gv - dot);
                    }
                }
            },
        )
    });
    dx
}
