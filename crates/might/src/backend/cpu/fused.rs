//! Fused CPU kernels: LayerNorm and BatchNorm forward/backward (one pass per row or plane)
//! and the row helpers the attention and loss kernels share.
// Row kernels index several parallel slices with one column index.
#![allow(clippy::needless_range_loop)]

use super::conv_direct::relu_of;
use super::rows::{row_sum, row_sum2};
use super::{pool, simd, threads, CpuDType};
use crate::{Error, Result, Tensor};
use num_traits::Float;

/// Float element types the fused kernels run natively (others compute through f32).
pub(crate) trait Real:
    Float
    + CpuDType
    + Send
    + Sync
    + std::iter::Sum
    + crate::backend::cpu::unary_ops::FloatExt
    + crate::backend::cpu::wsum::Wsum
{
    /// As f64 (named to avoid the clash between `WithDType` and `ToPrimitive`).
    fn d(self) -> f64 {
        crate::WithDType::to_f64(self)
    }
    /// From f64.
    fn f(v: f64) -> Self {
        crate::WithDType::from_f64(v)
    }
}
impl Real for f32 {}
impl Real for f64 {}

/// Run `f` on the elements of `t` in logical (row-major) order without copying when `t` is
/// already contiguous.
pub(crate) fn with_slice<T: CpuDType, R>(t: &Tensor, f: impl FnOnce(&[T]) -> R) -> Result<R> {
    let t = t.detach().contiguous()?;
    let s = t.storage();
    let data = T::slice(s.cpu()?).ok_or_else(|| {
        Error::dtype(
            "nn kernel",
            format!("expected {}, got {} {}", T::DTYPE, t.dtype(), t.shape()),
        )
    })?;
    let off = t.storage_offset();
    Ok(f(&data[off..off + t.numel()]))
}

/// Rows per parallel task so each task has a few thousand elements.
pub(crate) fn rows_per_task(n: usize, rows: usize) -> usize {
    let target = 4096usize.div_ceil(n.max(1)).max(1);
    let tasks = threads::get_num_threads().max(1) * 4;
    target.max(rows.div_ceil(tasks)).max(1)
}

/// Map blocks of `block * n` output elements in parallel (when large enough), each returning
/// a value; the values come back in block order.
pub(crate) fn map_blocks<T: Send, R: Send>(
    out: &mut [T],
    block: usize,
    f: impl Fn(usize, &mut [T]) -> R + Sync + Send,
) -> Vec<R> {
    if out.is_empty() {
        return vec![];
    }
    if threads::parallel(out.len()) {
        threads::map_chunks(out, block, f)
    } else {
        out.chunks_mut(block)
            .enumerate()
            .map(|(i, c)| f(i, c))
            .collect()
    }
}

/// LayerNorm forward over rows of length `n`: returns `(y, mean, rstd)`; statistics are
/// accumulated in f64.
pub(crate) fn layer_norm_fwd<T: Real>(
    x: &[T],
    w: Option<&[T]>,
    b: Option<&[T]>,
    n: usize,
    eps: f64,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    let rows = x.len() / n;
    let mut y = pool::output::<T>(x.len());
    let rpt = rows_per_task(n, rows);
    let stats = map_blocks(&mut y, rpt * n, |bi, yb| {
        simd::run(
            #[inline(always)]
            || {
                let mut st = Vec::with_capacity(yb.len() / n);
                for (r, yr) in yb.chunks_mut(n).enumerate() {
                    let row = bi * rpt + r;
                    let xr = &x[row * n..(row + 1) * n];
                    let mean = sum_f64(xr, |v| v) / n as f64;
                    let var = sum_f64(xr, |v| (v - mean) * (v - mean)) / n as f64;
                    let rstd = 1.0 / (var + eps).sqrt();
                    let (m, rs) = (T::f(mean), T::f(rstd));
                    let xh = |v: T| (v - m) * rs;
                    // one loop per affine case: a test per element kept it scalar (~1.3 ns
                    // per element, 10x the vector loop)
                    match (w, b) {
                        (Some(w), Some(b)) => {
                            for (((y, &v), &wj), &bj) in yr.iter_mut().zip(xr).zip(w).zip(b) {
                                *y = xh(v) * wj + bj;
                            }
                        }
                        (Some(w), None) => {
                            for ((y, &v), &wj) in yr.iter_mut().zip(xr).zip(w) {
                                *y = xh(v) * wj;
                            }
                        }
                        (None, Some(b)) => {
                            for ((y, &v), &bj) in yr.iter_mut().zip(xr).zip(b) {
                                *y = xh(v) + bj;
                            }
                        }
                        (None, None) => {
                            for (y, &v) in yr.iter_mut().zip(xr) {
                                *y = xh(v);
                            }
                        }
                    }
                    st.push((m, rs));
                }
                st
            },
        )
    });
    let (mean, rstd) = stats.into_iter().flatten().unzip();
    (y, mean, rstd)
}

/// Partial sums kept by the row reductions below.
const LANES: usize = 8;

/// `Σ f(x)` over a row, in f64, in [`LANES`] interleaved partial sums: it vectorises, where
/// one running sum is a serial chain of dependent adds (LayerNorm spent ~2.7 ns per element
/// in it).
#[inline(always)]
fn sum_f64<T: Real>(r: &[T], f: impl Fn(f64) -> f64) -> f64 {
    let mut acc = [0.0f64; LANES];
    let mut it = r.chunks_exact(LANES);
    for c in &mut it {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += f(v.d());
        }
    }
    let tail = it.remainder().iter().fold(0.0, |a, &v| a + f(v.d()));
    acc.iter().fold(tail, |a, &v| a + v)
}

/// LayerNorm backward: `(dx, dw, db)` from the output grad `g`, the input `x` and the saved
/// per-row `mean`, `rstd`.
///
/// With `x̂ = (x - μ)·rstd` and `ĝ = g·w`: `dx = rstd·(ĝ - mean(ĝ) - x̂·mean(ĝ·x̂))`,
/// `dw = Σ_rows g·x̂`, `db = Σ_rows g`.
pub(crate) fn layer_norm_bwd<T: Real>(
    g: &[T],
    x: &[T],
    w: Option<&[T]>,
    mean: &[T],
    rstd: &[T],
    n: usize,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    let rows = x.len() / n;
    let mut dx = pool::output::<T>(x.len());
    let rpt = rows_per_task(n, rows);
    let inv_n = T::f(1.0 / n as f64);
    // no affine weight: multiply by ones (one code path, vectorised either way)
    let ones;
    let wv: &[T] = match w {
        Some(w) => w,
        None => {
            ones = vec![T::f(1.0); n];
            &ones
        }
    };
    let partial = map_blocks(&mut dx, rpt * n, |bi, dxb| {
        simd::run(
            #[inline(always)]
            || {
                let mut dw = vec![T::f(0.0); n];
                let mut db = vec![T::f(0.0); n];
                for (r, dr) in dxb.chunks_mut(n).enumerate() {
                    let row = bi * rpt + r;
                    let (xr, gr) = (&x[row * n..(row + 1) * n], &g[row * n..(row + 1) * n]);
                    let (m, rs) = (mean[row], rstd[row]);
                    // Σ gh and Σ gh·xh in V interleaved partial sums (one running sum is a
                    // chain of dependent adds that the CPU cannot overlap)
                    const V: usize = 16;
                    let mut s1 = [T::f(0.0); V];
                    let mut s2 = [T::f(0.0); V];
                    let (mut xc, mut gc) = (xr.chunks_exact(V), gr.chunks_exact(V));
                    let mut wc = wv.chunks_exact(V);
                    let (mut dwc, mut dbc) = (dw.chunks_exact_mut(V), db.chunks_exact_mut(V));
                    // whole V-wide chunks (one vector each), then the rest into lane 0
                    for ((((xv, gv), wj), dwv), dbv) in (&mut xc)
                        .zip(&mut gc)
                        .zip(&mut wc)
                        .zip(&mut dwc)
                        .zip(&mut dbc)
                    {
                        for l in 0..V {
                            let xh = (xv[l] - m) * rs;
                            let gh = gv[l] * wj[l];
                            s1[l] = s1[l] + gh;
                            s2[l] = s2[l] + gh * xh;
                            dwv[l] = dwv[l] + gv[l] * xh;
                            dbv[l] = dbv[l] + gv[l];
                        }
                    }
                    let rest = xc
                        .remainder()
                        .iter()
                        .zip(gc.remainder())
                        .zip(wc.remainder());
                    let rest_out = dwc.into_remainder().iter_mut().zip(dbc.into_remainder());
                    for (((&xv, &gv), &wj), (dwv, dbv)) in rest.zip(rest_out) {
                        let xh = (xv - m) * rs;
                        s1[0] = s1[0] + gv * wj;
                        s2[0] = s2[0] + gv * wj * xh;
                        *dwv = *dwv + gv * xh;
                        *dbv = *dbv + gv;
                    }
                    let total = |s: [T; V]| s.iter().fold(T::f(0.0), |a, &v| a + v);
                    let (s1, s2) = (total(s1) * inv_n, total(s2) * inv_n);
                    for (((d, &xv), &gv), &wj) in dr.iter_mut().zip(xr).zip(gr).zip(wv) {
                        let xh = (xv - m) * rs;
                        *d = rs * (gv * wj - s1 - xh * s2);
                    }
                }
                (dw, db)
            },
        )
    });
    let mut dw = vec![T::f(0.0); n];
    let mut db = vec![T::f(0.0); n];
    for (pw, pb) in partial {
        for j in 0..n {
            dw[j] = dw[j] + pw[j];
            db[j] = db[j] + pb[j];
        }
    }
    (dx, dw, db)
}

/// Training-mode BatchNorm statistics of `x` (`[N, C, S]` dense, `S` the flattened spatial
/// dims): per-channel mean and biased variance, accumulated in f64 (two passes, so a large
/// mean does not cancel the variance).
pub(crate) fn batch_norm_stats<T: Real>(x: &[T], c: usize, s: usize) -> (Vec<f64>, Vec<f64>) {
    let n = x.len() / (c * s).max(1);
    let count = (n * s).max(1) as f64;
    let plane = |i: usize, ch: usize| &x[(i * c + ch) * s..(i * c + ch + 1) * s];
    // Two passes (mean, then squared deviations from it: no cancellation), each plane summed
    // in the lanes of `row_sum` and the planes' sums in f64. A single f64 running sum per
    // element was latency-bound: ~4 cycles an element, 12 % of a BatchNorm CNN's step.
    let chan = |ch: usize| {
        simd::run(
            #[inline(always)]
            move || {
                // plain loops: an iterator's `sum` is a std function LLVM compiles on its
                // own, for baseline x86-64, with `row_sum` inlined into it
                let mut sum = 0.0f64;
                for i in 0..n {
                    sum += row_sum(plane(i, ch), |v| v).d();
                }
                let mean = sum / count;
                let mt = T::f(mean);
                let mut sq = 0.0f64;
                for i in 0..n {
                    sq += row_sum(plane(i, ch), |v| (v - mt) * (v - mt)).d();
                }
                (mean, sq / count)
            },
        )
    };
    let st: Vec<(f64, f64)> = if threads::parallel(x.len()) {
        threads::map(c, chan)
    } else {
        (0..c).map(chan).collect()
    };
    st.into_iter().unzip()
}

/// `y = x·scale[ch] + shift[ch]` over `[N, C, S]` planes, through a ReLU when `relu`.
pub(crate) fn channel_affine<T: Real>(
    x: &[T],
    scale: &[T],
    shift: &[T],
    s: usize,
    relu: bool,
) -> Vec<T> {
    let mut y = pool::output::<T>(x.len());
    let s = s.max(1);
    let ppt = rows_per_task(s, x.len() / s);
    #[inline(always)]
    fn planes<T: Real>(
        (x, y, s, ppt, bi): (&[T], &mut [T], usize, usize, usize),
        (scale, shift): (&[T], &[T]),
        act: impl Fn(T) -> T + Copy,
    ) {
        let c = scale.len();
        for (k, yp) in y.chunks_mut(s).enumerate() {
            let plane = bi * ppt + k;
            let (a, b) = (scale[plane % c], shift[plane % c]);
            for (d, &v) in yp.iter_mut().zip(&x[plane * s..]) {
                *d = act(v * a + b);
            }
        }
    }
    map_blocks(&mut y, ppt * s, |bi, yb| {
        simd::run(
            #[inline(always)]
            || {
                let args = (x, yb, s, ppt, bi);
                if relu {
                    planes(args, (scale, shift), relu_of);
                } else {
                    planes(args, (scale, shift), |v| v);
                }
            },
        )
    });
    y
}

/// Training-mode BatchNorm backward over `[N, C, S]`: `(dx, dw, db)` from the output grad `g`,
/// the input `x`, the batch `mean`/`rstd` and the scale `w` (1 when absent).
///
/// With `x̂ = (x - μ)·rstd` and `M = N·S`: `db = Σ g`, `dw = Σ g·x̂`,
/// `dx = w·rstd·(g - db/M - x̂·dw/M)`.
///
/// `relu`: the forward ran through a ReLU with this `(scale, shift)` ([`channel_affine`]);
/// `g` is the gradient of the ReLU's output, let through where `x·scale + shift > 0`, which
/// is recomputed here with the same operations (so the same rounding) as the forward's.
pub(crate) fn batch_norm_bwd<T: Real>(
    g: &[T],
    x: &[T],
    w: Option<&[T]>,
    (mean, rstd): (&[f64], &[f64]),
    s: usize,
    relu: Option<(&[T], &[T])>,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    let c = mean.len();
    let n = x.len() / (c * s).max(1);
    let count = (n * s).max(1) as f64;
    /// Channel `ch`'s ReLU gate on its output gradient.
    #[inline(always)]
    fn gate<T: Real>((sc, sh): (&[T], &[T]), ch: usize) -> impl Fn(T, T) -> T + Copy {
        let (a, b) = (sc[ch], sh[ch]);
        move |gv: T, xv: T| {
            if xv * a + b > T::f(0.0) {
                gv
            } else {
                T::f(0.0)
            }
        }
    }
    #[inline(always)]
    fn chan_sums<T: Real>(
        (g, x, c, s, n): (&[T], &[T], usize, usize, usize),
        ch: usize,
        mt: T,
        gate: impl Fn(T, T) -> T + Copy,
    ) -> (f64, f64) {
        let (mut sg, mut sgx) = (0.0f64, 0.0f64);
        for i in 0..n {
            let r = (i * c + ch) * s..(i * c + ch + 1) * s;
            let (gp, xp) = (&g[r.clone()], &x[r]);
            // each plane in lanes (`row_sum2`), the planes' sums in f64
            sg += row_sum2(gp, xp, gate).d();
            sgx += row_sum2(gp, xp, move |gv, xv| gate(gv, xv) * (xv - mt)).d();
        }
        (sg, sgx)
    }
    let chan = |ch: usize| {
        simd::run(
            #[inline(always)]
            move || {
                let (mt, args) = (T::f(mean[ch]), (g, x, c, s, n));
                let (sg, sgx) = match relu {
                    Some(ab) => chan_sums(args, ch, mt, gate(ab, ch)),
                    None => chan_sums(args, ch, mt, |gv, _| gv),
                };
                (sg, sgx * rstd[ch])
            },
        )
    };
    let sums: Vec<(f64, f64)> = if threads::parallel(x.len()) {
        threads::map(c, chan)
    } else {
        (0..c).map(chan).collect()
    };
    let mut dx = pool::output::<T>(x.len());
    let s = s.max(1);
    let ppt = rows_per_task(s, x.len() / s);
    #[inline(always)]
    fn dx_plane<T: Real>(
        (dp, gp, xp): (&mut [T], &[T], &[T]),
        (kt, mt, rst, mg, mgx): (T, T, T, T, T),
        gate: impl Fn(T, T) -> T + Copy,
    ) {
        for ((d, &gv), &xv) in dp.iter_mut().zip(gp).zip(xp) {
            let xh = (xv - mt) * rst;
            *d = kt * (gate(gv, xv) - mg - xh * mgx);
        }
    }
    map_blocks(&mut dx, ppt * s, |bi, db| {
        simd::run(
            #[inline(always)]
            || {
                for (k, dp) in db.chunks_mut(s).enumerate() {
                    let plane = bi * ppt + k;
                    let ch = plane % c;
                    let (sg, sgx) = sums[ch];
                    let k = w.map_or(1.0, |w| w[ch].d()) * rstd[ch];
                    let consts = (
                        T::f(k),
                        T::f(mean[ch]),
                        T::f(rstd[ch]),
                        T::f(sg / count),
                        T::f(sgx / count),
                    );
                    let (gp, xp) = (&g[plane * s..][..dp.len()], &x[plane * s..][..dp.len()]);
                    match relu {
                        Some(ab) => dx_plane((dp, gp, xp), consts, gate(ab, ch)),
                        None => dx_plane((dp, gp, xp), consts, |gv, _| gv),
                    }
                }
            },
        )
    });
    let dw = sums.iter().map(|&(_, b)| T::f(b)).collect();
    let db = sums.iter().map(|&(a, _)| T::f(a)).collect();
    (dx, dw, db)
}
