//! Convolution kernels on dense, row-major (NCHW) buffers (pooling: `pooling.rs`).
//!
//! Undilated convolutions (the common 3x3 "same" and "valid" layers; strided ones forward only)
//! run as direct shifted-row products ([`super::conv_direct`]), 1.5-2x faster than unrolling
//! on MNIST-sized layers. Every other convolution is im2col + GEMM: for each sample and group, the input
//! patches are unrolled into a `[C/groups * kh * kw, OH * OW]` matrix (into a buffer reused
//! across the samples a thread handles) and multiplied by the `[O/groups, C/groups * kh * kw]`
//! weight matrix. Backward uses the same two matrices: `grad_weight += grad_out @ col^T`, and
//! `grad_input = col2im(W^T @ grad_out)`. A 1x1 kernel with stride 1 and no padding skips the
//! unrolling: the input plane already is the column matrix.
//!
//! Work is split over the batch: each thread takes a contiguous run of samples, so every thread
//! writes a disjoint slice of the output and needs a single column buffer.
//!
//! The callers (`ops::conv`) have checked the shapes; the kernels only `assert!` what their own
//! memory safety depends on.

use super::conv_direct::{add_lanes, relu_grad, relu_of, Grads, Plan, LANES};
use super::im2col::{col2im, im2col};
use super::matmul::GemmDType;
use super::rows::row_sum;
use super::threads;
use gemm::Parallelism;
use std::ops::AddAssign;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Float types the conv/pool kernels run on (f32, f64).
pub trait ConvFloat: GemmDType + num_traits::Float + AddAssign + std::fmt::Debug {
    /// Run `f` on a per-thread scratch buffer of `len` elements (contents unspecified). Reusing
    /// it saves a fresh multi-megabyte allocation per conv call, which glibc serves with
    /// `mmap` and pays for again in page faults and zeroing.
    fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [Self]) -> R) -> R;

    /// A vectorised 2x2 max pool of one plane, if this type has one (see
    /// [`super::max_pool_simd::plane_f32`]); false leaves the plane to the scalar loop.
    fn max_pool_2x2_plane(
        _xp: &[Self],
        _w: usize,
        _vp: &mut [Self],
        _ip: &mut [i64],
        _ow: usize,
    ) -> bool {
        false
    }

    /// The same buffer as `f32`s when `Self` is `f32`: the kernels written for f32 vectors
    /// only ([`super::conv_blocked`]) take it from here.
    fn as_f32(_s: &[Self]) -> Option<&[f32]> {
        None
    }

    /// [`ConvFloat::as_f32`] for a buffer to write.
    fn as_f32_mut(_s: &mut [Self]) -> Option<&mut [f32]> {
        None
    }
}

macro_rules! conv_float {
    ($t:ty $(, $name:ident = $f:path)? $(; $($extra:tt)*)?) => {
        impl ConvFloat for $t {
            $($($extra)*)?

            $(fn $name(
                xp: &[Self],
                w: usize,
                vp: &mut [Self],
                ip: &mut [i64],
                ow: usize,
            ) -> bool {
                $f(xp, w, vp, ip, ow)
            })?

            fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [Self]) -> R) -> R {
                thread_local! {
                    static BUF: std::cell::RefCell<Vec<$t>> = const { std::cell::RefCell::new(Vec::new()) };
                }
                BUF.with(|b| match b.try_borrow_mut() {
                    Ok(mut v) => {
                        if v.len() < len {
                            // Free a block of this size first: glibc serves large blocks with
                            // mmap until one is freed, then raises its mmap threshold to that
                            // size. A scratch buffer that is never freed would otherwise leave
                            // every conv output of the same size to fresh (faulting) pages.
                            let probe = Vec::<$t>::with_capacity(len);
                            drop(std::hint::black_box(probe));
                            *v = vec![0.0; len];
                        }
                        f(&mut v[..len])
                    }
                    // re-entered on this thread (never in practice): use a fresh buffer
                    Err(_) => f(&mut vec![0.0; len]),
                })
            }
        }
    };
}
conv_float!(f32, max_pool_2x2_plane = super::max_pool_simd::plane_f32;
    fn as_f32(s: &[f32]) -> Option<&[f32]> {
        Some(s)
    }
    fn as_f32_mut(s: &mut [f32]) -> Option<&mut [f32]> {
        Some(s)
    }
);
conv_float!(f64);

/// Multiply-adds below which a conv stays on the calling thread.
const CONV_PAR_WORK: usize = 1 << 16;

pub use crate::backend::geom::ConvGeom;

impl ConvGeom {
    /// Input channels per group.
    pub(super) fn cg(&self) -> usize {
        self.c / self.groups
    }
    /// Output channels per group.
    pub(super) fn og(&self) -> usize {
        self.o / self.groups
    }
    /// Rows of the column matrix: the length of one unrolled patch.
    pub(super) fn klen(&self) -> usize {
        self.cg() * self.kh * self.kw
    }
    /// Output positions per channel (columns of the column matrix).
    pub(super) fn p(&self) -> usize {
        self.oh * self.ow
    }
    pub(super) fn hw(&self) -> usize {
        self.h * self.w
    }
    /// The input plane is the column matrix: no unrolling needed.
    pub(super) fn pointwise(&self) -> bool {
        self.kh == 1 && self.kw == 1 && self.stride == [1, 1] && self.padding == [0, 0]
    }
    /// Multiply-adds of the forward pass.
    pub(super) fn work(&self) -> usize {
        self.n * self.o * self.p() * self.klen()
    }
}

/// `dst[m, n] (+)= lhs[m, k] @ rhs[k, n]` for strided operands starting at element 0 of their
/// slices; `dst` is dense with row stride `n`.
#[allow(clippy::too_many_arguments)]
fn gemm_into<T: ConvFloat>(
    (m, n, k): (usize, usize, usize),
    dst: &mut [T],
    accumulate: bool,
    lhs: &[T],
    (lrs, lcs): (usize, usize),
    rhs: &[T],
    (rrs, rcs): (usize, usize),
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            dst[..m * n].fill(T::zero());
        }
        return;
    }
    assert!(dst.len() >= m * n, "conv gemm: dst out of bounds");
    assert!(
        (m - 1) * lrs + (k - 1) * lcs < lhs.len() && (k - 1) * rrs + (n - 1) * rcs < rhs.len(),
        "conv gemm: operand out of bounds"
    );
    // SAFETY: the largest element each operand reaches lies inside its slice (checked above,
    // strides are non-negative), `dst` holds at least m*n elements addressed with row stride n
    // and column stride 1, and `dst` is a `&mut` borrow so it cannot alias `lhs` or `rhs`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            lhs.as_ptr(),
            lcs as isize,
            lrs as isize,
            rhs.as_ptr(),
            rcs as isize,
            rrs as isize,
            T::one(),
            T::one(),
            false,
            false,
            false,
            Parallelism::None,
        )
    }
}

/// Elements of column matrix worth unrolling at once: a GEMM over fewer than a few hundred
/// columns is dominated by its packing overhead, one over a buffer much larger than the L2
/// cache pays for the trip to memory.
const COL_TARGET: usize = 1 << 13;

/// How many samples each parallel task takes (the whole batch when one thread is enough).
/// One task per thread (four each, taken as threads come free, measured no faster on the
/// small CNN at 2 threads).
fn samples_per_task(g: &ConvGeom) -> usize {
    let nt = threads::get_num_threads();
    if nt > 1 && g.n > 1 && g.work() >= CONV_PAR_WORK {
        g.n.div_ceil(nt)
    } else {
        g.n.max(1)
    }
}

/// How many samples of a run of `run` share one column matrix `[klen, chunk * OH * OW]`, so
/// that tiny per-sample GEMMs (MNIST-sized planes, few channels) become one larger GEMM.
fn chunk_samples(g: &ConvGeom, run: usize) -> usize {
    (COL_TARGET / (g.klen() * g.p()).max(1)).clamp(1, run.max(1))
}

/// conv2d forward. `x`: `[N, C, H, W]`, `w`: `[O, C/groups, kh, kw]`, `bias`: `[O]`, all dense.
/// Returns the dense `[N, O, OH, OW]` output, plus `residual` (dense, the output's shape)
/// when given, through a ReLU when `relu` (fused: the output is written once; the Winograd,
/// blocked and one-sample GEMM paths add the residual as they write, the others in one pass
/// after).
///
/// Each task unrolls a chunk of samples into one column matrix `[klen, chunk * P]` and runs a
/// single GEMM per group, then copies the `[O/groups, chunk * P]` product into the NCHW output
/// adding the bias on the way. A chunk of one sample multiplies straight into the output.
pub fn conv2d_forward<T: ConvFloat>(
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    g: &ConvGeom,
    relu: bool,
    residual: Option<&[T]>,
) -> Vec<T> {
    let (p, klen, og, chw, cghw) = (g.p(), g.klen(), g.og(), g.c * g.hw(), g.cg() * g.hw());
    assert!(
        x.len() == g.n * chw
            && w.len() == g.o * klen
            && residual.is_none_or(|r| r.len() == g.n * g.o * p),
        "conv2d: buffer sizes"
    );
    // every element is written: by the GEMM, or by the copy out of `tmp`
    let mut out = super::pool::output::<T>(g.n * g.o * p);
    if out.is_empty() {
        return out;
    }
    if g.groups == g.c && g.o == g.c {
        depthwise(x, w, bias, g, relu && residual.is_none(), &mut out);
        add_residual(&mut out, residual, relu);
        return out;
    }
    if super::winograd::suits::<T>(g) {
        super::winograd::forward(x, w, bias, g, (relu, residual), &mut out);
        return out;
    }
    if super::conv_blocked::suits(g) {
        let (b32, r32) = (bias.map(T::as_f32), residual.map(T::as_f32));
        if let (Some(x), Some(w), Some(o), None | Some(Some(_)), None | Some(Some(_))) = (
            T::as_f32(x),
            T::as_f32(w),
            T::as_f32_mut(&mut out),
            b32,
            r32,
        ) {
            super::conv_blocked::forward(x, w, b32.flatten(), g, (relu, r32.flatten()), o);
            return out;
        }
    }
    let plan = Plan::new(g, w, false);
    // One run of samples: `xs` holds its inputs, `os` its outputs.
    // One sample on several threads: the GEMM's output rows split between them (below).
    let nt = threads::get_num_threads();
    let split_rows = nt > 1 && g.n < nt && g.work() >= CONV_PAR_WORK && og >= 2 * nt;
    // the residual of the outputs `os`, which start at element `at`
    let res_of = |at: usize, os: &[T]| residual.map(|r| &r[at..at + os.len()]);
    let run = |xs: &[T], os: &mut [T], rs: Option<&[T]>, split: bool| {
        if let Some(plan) = &plan {
            return T::with_scratch(plan.forward_scratch(), |buf| {
                for (xs, os) in xs.chunks_exact(chw).zip(os.chunks_exact_mut(g.o * p)) {
                    for grp in 0..g.groups {
                        let b = bias.map(|b| &b[grp * og..(grp + 1) * og]);
                        let xg = &xs[grp * cghw..(grp + 1) * cghw];
                        let og_out = &mut os[grp * og * p..(grp + 1) * og * p];
                        plan.forward(grp, xg, b, og_out, buf, relu && residual.is_none());
                    }
                }
            });
        }
        let cnt = xs.len() / chw.max(1);
        let nb = chunk_samples(g, cnt);
        let direct = g.pointwise() && nb == 1;
        let col_len = if direct { 0 } else { klen * nb * p };
        let tmp_len = if nb > 1 { og * nb * p } else { 0 };
        T::with_scratch(col_len + tmp_len, |buf| {
            let (col, tmp) = buf.split_at_mut(col_len);
            for s0 in (0..cnt).step_by(nb) {
                let m = nb.min(cnt - s0);
                let ld = m * p;
                let xc = &xs[s0 * chw..(s0 + m) * chw];
                let oc = &mut os[s0 * g.o * p..(s0 + m) * g.o * p];
                for grp in 0..g.groups {
                    let cols: &[T] = if direct {
                        &xc[grp * cghw..(grp + 1) * cghw]
                    } else {
                        for s in 0..m {
                            let xg = &xc[s * chw + grp * cghw..s * chw + (grp + 1) * cghw];
                            im2col(xg, g, &mut col[s * p..], ld);
                        }
                        col
                    };
                    let wg = &w[grp * og * klen..(grp + 1) * og * klen];
                    if m == 1 {
                        let dst = &mut oc[grp * og * p..(grp + 1) * og * p];
                        let rg = rs.map(|r| &r[(s0 * g.o + grp * og) * p..][..og * p]);
                        let acc = bias.is_some() || rg.is_some();
                        // rows [r0, r0 + rows) of the product, their bias and residual first
                        let rows_of = |r0: usize, d: &mut [T]| {
                            let rows = d.len() / p;
                            if let Some(r) = rg {
                                d.copy_from_slice(&r[r0 * p..][..d.len()]);
                            }
                            if let Some(b) = bias {
                                for (row, &bv) in d.chunks_exact_mut(p).zip(&b[grp * og + r0..]) {
                                    match rg {
                                        Some(_) => row.iter_mut().for_each(|v| *v += bv),
                                        None => row.fill(bv),
                                    }
                                }
                            }
                            let wr = &wg[r0 * klen..(r0 + rows) * klen];
                            gemm_into((rows, p, klen), d, acc, wr, (klen, 1), cols, (ld, 1));
                        };
                        if split {
                            let rows = og.div_ceil(nt);
                            threads::for_each_chunk(dst, rows * p, |i, d| rows_of(i * rows, d));
                        } else {
                            rows_of(0, dst);
                        }
                        continue;
                    }
                    gemm_into((og, ld, klen), tmp, false, wg, (klen, 1), cols, (ld, 1));
                    for (o, trow) in tmp.chunks_exact(ld).take(og).enumerate() {
                        let bv = bias.map_or(T::zero(), |b| b[grp * og + o]);
                        for (s, src) in trow.chunks_exact(p).enumerate() {
                            let at = ((s0 + s) * g.o + grp * og + o) * p;
                            let d = &mut oc[(s * g.o + grp * og + o) * p..][..p];
                            for (d, &v) in d.iter_mut().zip(src) {
                                *d = v + bv;
                            }
                            if let Some(r) = rs {
                                d.iter_mut().zip(&r[at..at + p]).for_each(|(d, &r)| *d += r);
                            }
                        }
                    }
                }
            }
        })
    };
    // the direct path hands out single samples (the team gives each thread blocks of them
    // as it comes free); the GEMM path wants runs of samples for larger products
    let per = match plan {
        Some(_) if samples_per_task(g) < g.n => 1,
        _ => samples_per_task(g),
    };
    if per >= g.n {
        run(x, &mut out, residual, split_rows);
    } else {
        threads::for_each_chunk(&mut out, per * g.o * p, |i, os| {
            let s = i * per * chw;
            let rs = res_of(i * per * g.o * p, os);
            run(&x[s..(s + per * chw).min(x.len())], os, rs, false)
        });
    }
    if plan.is_some() {
        add_residual(&mut out, residual, relu);
    } else if relu {
        out.iter_mut().for_each(|v| *v = relu_of(*v));
    }
    out
}

/// `out += residual`, then a ReLU when `relu` (a path that could not add it as it wrote).
fn add_residual<T: ConvFloat>(out: &mut [T], residual: Option<&[T]>, relu: bool) {
    let Some(r) = residual else { return };
    for (o, &r) in out.iter_mut().zip(r) {
        *o = if relu { relu_of(*o + r) } else { *o + r };
    }
}

/// Depthwise convolution (one filter per channel, MobileNet's 3x3 and 5x5 layers): a GEMM per
/// channel would have a single output row, all packing overhead. Each output row is a sum of
/// `kh * kw` scaled input rows, each over the output columns whose tap lands inside the input
/// (no bounds check in the inner loop, which vectorises at stride 1). Planes are split between
/// threads.
fn depthwise<T: ConvFloat>(
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    g: &ConvGeom,
    relu: bool,
    out: &mut [T],
) {
    let (hw, p, taps) = (g.hw(), g.p(), g.kh * g.kw);
    assert!(
        x.len() == g.n * g.c * hw && w.len() == g.c * taps && out.len() == g.n * g.c * p,
        "depthwise: buffer sizes"
    );
    let [sy, sx] = g.stride;
    let [py, px] = g.padding;
    let [dy, dx] = g.dilation;
    // output columns [lo, hi) whose tap at kernel column kj reads inside the input row
    let cols = |kj: usize| -> (usize, usize) {
        let off = kj * dx;
        let lo = if px > off { (px - off).div_ceil(sx) } else { 0 };
        let hi = if g.w + px > off {
            ((g.w + px - off - 1) / sx + 1).min(g.ow)
        } else {
            0
        };
        (lo.min(hi), hi)
    };
    let plane = |i: usize, o: &mut [T]| {
        let c = i % g.c;
        let xp = &x[i * hw..(i + 1) * hw];
        let wk = &w[c * taps..(c + 1) * taps];
        let b = bias.map_or(T::zero(), |b| b[c]);
        if g.dilation == [1, 1] {
            super::simd::run(
                #[inline(always)]
                || depthwise_wide(xp, wk, b, g, relu, o),
            );
            return;
        }
        for (oy, orow) in o.chunks_exact_mut(g.ow).enumerate() {
            orow.fill(b);
            for ki in 0..g.kh {
                let iy = (oy * sy + ki * dy) as isize - py as isize;
                if iy < 0 || iy >= g.h as isize {
                    continue;
                }
                let xrow = &xp[iy as usize * g.w..(iy as usize + 1) * g.w];
                for kj in 0..g.kw {
                    let (lo, hi) = cols(kj);
                    let wv = wk[ki * g.kw + kj];
                    // ix = ox * sx + kj * dx - px, inside [0, W) for ox in [lo, hi)
                    let start = lo * sx + kj * dx - px;
                    if sx == 1 {
                        for (d, &v) in orow[lo..hi].iter_mut().zip(&xrow[start..start + (hi - lo)])
                        {
                            *d += wv * v;
                        }
                    } else {
                        for (d, &v) in orow[lo..hi]
                            .iter_mut()
                            .zip(xrow[start..].iter().step_by(sx))
                        {
                            *d += wv * v;
                        }
                    }
                }
            }
            if relu {
                orow.iter_mut().for_each(|v| *v = relu_of(*v));
            }
        }
    };
    if threads::get_num_threads() > 1 && g.work() >= CONV_PAR_WORK {
        let per = (g.n * g.c).div_ceil(threads::get_num_threads() * 4).max(1);
        threads::for_each_chunk(out, per * p, |t, o| {
            for (k, op) in o.chunks_exact_mut(p).enumerate() {
                plane(t * per + k, op);
            }
        });
    } else {
        for (i, op) in out.chunks_exact_mut(p).enumerate() {
            plane(i, op);
        }
    }
}

/// One channel of [`depthwise`] (undilated), as `kh * kw` long multiply-adds over the whole
/// plane instead of short ones per output row: the input, zero-padded, is dealt into its
/// `sy * sx` stride phases (`phase[a][b][r][c] = padded[r * sy + a][c * sx + b]`), all `wq`
/// columns wide, so that every tap `(ki, kj)` reads one phase shifted by
/// `(ki / sy) * wq + kj / sx` for every output at once, in a "wide" output `oh x wq` whose
/// columns past `ow` are computed and dropped. MobileNet-v3's 5x5 depthwise layers on
/// 14x14 planes took 0.79 ms a layer with the row loops (their per-row overhead dominated
/// 14-wide rows), this ~10x less.
#[inline(always)]
fn depthwise_wide<T: ConvFloat>(
    xp: &[T],
    wk: &[T],
    bias: T,
    g: &ConvGeom,
    relu: bool,
    o: &mut [T],
) {
    let ([sy, sx], [py, px], [kh, kw]) = (g.stride, g.padding, [g.kh, g.kw]);
    let wq = g.ow + (kw - 1) / sx + 1;
    let plen = (g.oh + (kh - 1) / sy + 1) * wq;
    let wide = g.oh * wq;
    // a fresh buffer, not `with_scratch`: through its closure the loops below left the SIMD
    // build (MobileNet's depthwise layers 40 % slower)
    let mut scratch = vec![T::zero(); sy * sx * plen + wide];
    let (ph, acc) = scratch.split_at_mut(sy * sx * plen);
    for (a, b) in (0..sy).flat_map(|a| (0..sx).map(move |b| (a, b))) {
        let dst = &mut ph[(a * sx + b) * plen..][..plen];
        for (r, row) in dst.chunks_exact_mut(wq).enumerate() {
            let iy = (r * sy + a) as isize - py as isize;
            if iy < 0 || iy >= g.h as isize {
                continue;
            }
            let xrow = &xp[iy as usize * g.w..][..g.w];
            for (col, d) in row.iter_mut().enumerate() {
                let ix = (col * sx + b) as isize - px as isize;
                if ix >= 0 && (ix as usize) < g.w {
                    *d = xrow[ix as usize];
                }
            }
        }
    }
    acc.fill(bias);
    for ki in 0..kh {
        for kj in 0..kw {
            let (a, b) = (ki % sy, kj % sx);
            let src = &ph[(a * sx + b) * plen + (ki / sy) * wq + kj / sx..][..wide];
            let wv = wk[ki * kw + kj];
            for (d, &v) in acc.iter_mut().zip(src) {
                *d += wv * v;
            }
        }
    }
    for (orow, arow) in o.chunks_exact_mut(g.ow).zip(acc.chunks_exact(wq)) {
        for (d, &v) in orow.iter_mut().zip(arow) {
            *d = if relu { relu_of(v) } else { v };
        }
    }
}

/// [`conv2d_backward`] on the direct kernels. Each thread claims samples one at a time as it
/// comes free and keeps its own weight- and bias-gradient sums (in lane partials, summed once
/// at its end), added together when all are done. With one fixed run of samples per thread,
/// a thread that lost its core for a while held up the other for the rest of its run (a
/// third of a 2-thread small-CNN step was spent waiting so).
#[allow(clippy::too_many_arguments)]
fn direct_backward<T: ConvFloat>(
    plan: &Plan<T>,
    x: &[T],
    gy: &[T],
    relu_y: Option<&[T]>,
    g: &ConvGeom,
    gx: Option<&mut [T]>,
    need_w: bool,
    need_b: bool,
) -> (Vec<T>, Vec<T>) {
    let (p, klen, og, chw, ohw) = (g.p(), g.klen(), g.og(), g.c * g.hw(), g.o * g.p());
    let cghw = g.cg() * g.hw();
    let (wlen, blen) = (
        if need_w { g.o * klen } else { 0 },
        if need_b { g.o } else { 0 },
    );
    // each sample's input gradient, locked by the thread that claimed it
    let slots: Option<Vec<Mutex<&mut [T]>>> =
        gx.map(|gx| gx.chunks_mut(chw.max(1)).map(Mutex::new).collect());
    let next = AtomicUsize::new(0);
    let task = |_: usize| -> (Vec<T>, Vec<T>) {
        let (mut gw, mut gb) = (vec![T::zero(); wlen], vec![T::zero(); blen]);
        let lanes = wlen * LANES;
        T::with_scratch(plan.backward_scratch() + lanes, |buf| {
            let (gwl, buf) = buf.split_at_mut(lanes);
            gwl.fill(T::zero());
            loop {
                let s = next.fetch_add(1, Ordering::Relaxed);
                if s >= g.n {
                    break;
                }
                let mut gxs = slots
                    .as_ref()
                    .map(|v| v[s].lock().unwrap_or_else(|e| e.into_inner()));
                let (xs, gys) = (&x[s * chw..(s + 1) * chw], &gy[s * ohw..(s + 1) * ohw]);
                let ys = relu_y.map(|y| &y[s * ohw..(s + 1) * ohw]);
                for grp in 0..g.groups {
                    let at = grp * og * klen * LANES;
                    let grads = Grads {
                        gx: gxs
                            .as_deref_mut()
                            .map(|gx| &mut gx[grp * cghw..(grp + 1) * cghw]),
                        gw: need_w.then(|| &mut gwl[at..at + og * klen * LANES]),
                        gb: need_b.then(|| &mut gb[grp * og..(grp + 1) * og]),
                    };
                    let (xg, gyg) = (&xs[grp * cghw..][..cghw], &gys[grp * og * p..][..og * p]);
                    let yg = ys.map(|y| &y[grp * og * p..][..og * p]);
                    plan.backward(grp, (xg, gyg, yg), grads, buf);
                }
            }
            add_lanes(gwl, &mut gw);
        });
        (gw, gb)
    };
    let nt = threads::get_num_threads();
    let parts = if nt > 1 && g.n > 1 && g.work() >= CONV_PAR_WORK {
        threads::map(nt.min(g.n), task)
    } else {
        vec![task(0)]
    };
    let mut it = parts.into_iter();
    let (mut gw, mut gb) = it.next().expect("at least one task");
    for (w, b) in it {
        gw.iter_mut().zip(&w).for_each(|(a, &v)| *a += v);
        gb.iter_mut().zip(&b).for_each(|(a, &v)| *a += v);
    }
    (gw, gb)
}

/// What [`conv2d_backward`] returns: the gradients of input, weight and bias, each when asked.
pub type ConvGrads<T> = (Option<Vec<T>>, Option<Vec<T>>, Option<Vec<T>>);

/// conv2d backward: the gradients of the input (`need_x`), of the weight (`need_w`) and of the
/// bias (`need_b`) given the dense output gradient `gy` (`[N, O, OH, OW]`). For a conv with a
/// fused ReLU, `relu_y` is its output: the gradient flows where that is positive.
///
/// Chunks of samples are handled as in the forward pass: the chunk's output gradient is
/// gathered into one `[O, chunk * P]` matrix (summing the bias gradient on the way), then
/// `grad_w += gy @ col^T` and `grad_col = W^T @ gy` are one GEMM each per group, and col2im
/// scatters `grad_col` back to the images.
#[allow(clippy::too_many_arguments)]
pub fn conv2d_backward<T: ConvFloat>(
    x: &[T],
    w: &[T],
    gy: &[T],
    relu_y: Option<&[T]>,
    g: &ConvGeom,
    need_x: bool,
    need_w: bool,
    need_b: bool,
) -> ConvGrads<T> {
    let (p, klen, og, chw, ohw) = (g.p(), g.klen(), g.og(), g.c * g.hw(), g.o * g.p());
    let cghw = g.cg() * g.hw();
    assert!(
        x.len() == g.n * chw && w.len() == g.o * klen && gy.len() == g.n * ohw,
        "conv2d_backward: buffer sizes"
    );
    // Per-task partial sums of the weight gradient (`O * klen`) then the bias gradient (`O`).
    let (wlen, blen) = (
        if need_w { g.o * klen } else { 0 },
        if need_b { g.o } else { 0 },
    );
    if ohw == 0 {
        // no outputs: nothing flows back
        let zeros = |need: bool, len: usize| need.then(|| vec![T::zero(); len]);
        return (
            zeros(need_x, x.len()),
            zeros(need_w, wlen),
            zeros(need_b, blen),
        );
    }
    // the direct backward kernels are for stride 1 (the strided phase layout is forward only)
    let plan = Plan::new(g, w, need_x).filter(|_| g.stride == [1, 1]);
    if let Some(y) = relu_y {
        assert_eq!(y.len(), gy.len(), "conv2d_backward: ReLU output size");
    }
    if let Some(plan) = &plan {
        // the direct kernels apply the ReLU's mask as they read `gy`
        let mut gx = need_x.then(|| super::pool::output::<T>(g.n * chw));
        let acc = direct_backward(plan, x, gy, relu_y, g, gx.as_deref_mut(), need_w, need_b);
        let (gw, gb) = (need_w.then_some(acc.0), need_b.then_some(acc.1));
        return (gx, gw, gb);
    }
    // the GEMM path reads a masked copy
    let masked: Vec<T>;
    let gy = match relu_y {
        Some(y) => {
            masked = gy.iter().zip(y).map(|(&g, &y)| relu_grad(g, y)).collect();
            &masked[..]
        }
        None => gy,
    };
    // One run of `count` samples starting at sample `s0`: writes its part of grad_input into
    // `gx` (the run's own slice) and adds its part of grad_weight/grad_bias into `part`.
    let run = |s0: usize, count: usize, mut gx: Option<&mut [T]>, part: &mut [T]| {
        let (gw, gb) = part.split_at_mut(wlen);
        let nb = chunk_samples(g, count);
        let col_len = klen * nb * p;
        let gyt_len = if nb > 1 { g.o * nb * p } else { 0 };
        T::with_scratch(col_len + gyt_len, |buf| {
            let (col, gyt) = buf.split_at_mut(col_len);
            for c0 in (s0..s0 + count).step_by(nb) {
                let m = nb.min(s0 + count - c0);
                let ld = m * p;
                let xc = &x[c0 * chw..(c0 + m) * chw];
                let gyc = &gy[c0 * ohw..(c0 + m) * ohw];
                // the chunk's output gradient as `[O, m * P]`
                let gym: &[T] = if m == 1 {
                    gyc
                } else {
                    for (s, src) in gyc.chunks_exact(ohw).enumerate() {
                        for (o, row) in src.chunks_exact(p).enumerate() {
                            gyt[o * ld + s * p..o * ld + (s + 1) * p].copy_from_slice(row);
                        }
                    }
                    gyt
                };
                if need_b {
                    for (o, b) in gb.iter_mut().enumerate() {
                        *b += row_sum(&gym[o * ld..(o + 1) * ld], |x| x);
                    }
                }
                for grp in 0..g.groups {
                    let wg = &w[grp * og * klen..(grp + 1) * og * klen];
                    let gyg = &gym[grp * og * ld..(grp + 1) * og * ld];
                    if need_w {
                        // grad_w[og, klen] += grad_y[og, m*P] @ col^T[m*P, klen]
                        for s in 0..m {
                            let xg = &xc[s * chw + grp * cghw..s * chw + (grp + 1) * cghw];
                            im2col(xg, g, &mut col[s * p..], ld);
                        }
                        let gwg = &mut gw[grp * og * klen..(grp + 1) * og * klen];
                        gemm_into((og, klen, ld), gwg, true, gyg, (ld, 1), col, (1, ld));
                    }
                    if let Some(gx) = gx.as_deref_mut() {
                        // grad_col[klen, m*P] = W^T[klen, og] @ grad_y[og, m*P], then to the images
                        let base = (c0 - s0) * chw;
                        if g.pointwise() && m == 1 {
                            let gxg = &mut gx[base + grp * cghw..base + (grp + 1) * cghw];
                            gemm_into((klen, p, og), gxg, false, wg, (1, klen), gyg, (ld, 1));
                            continue;
                        }
                        gemm_into((klen, ld, og), col, false, wg, (1, klen), gyg, (ld, 1));
                        for s in 0..m {
                            let o = base + s * chw + grp * cghw;
                            col2im(&col[s * p..], g, &mut gx[o..o + cghw], ld);
                        }
                    }
                }
            }
        })
    };

    let per = samples_per_task(g);
    // col2im accumulates
    let mut gx = need_x.then(|| super::pool::zeroed::<T>(g.n * chw));
    let ntasks = g.n.div_ceil(per.max(1));
    let partials: Vec<Vec<T>> = if ntasks <= 1 {
        let mut part = vec![T::zero(); wlen + blen];
        run(0, g.n, gx.as_deref_mut(), &mut part);
        vec![part]
    } else {
        let task = |i: usize, gxc: Option<&mut [T]>| {
            let mut part = vec![T::zero(); wlen + blen];
            run(i * per, per.min(g.n - i * per), gxc, &mut part);
            part
        };
        match gx.as_deref_mut() {
            Some(gx) => threads::map_chunks(gx, per * chw, |i, c| task(i, Some(c))),
            None => threads::map(ntasks, |i| task(i, None)),
        }
    };
    let mut it = partials.into_iter();
    let mut acc = it.next().unwrap_or_else(|| vec![T::zero(); wlen + blen]);
    for part in it {
        acc.iter_mut().zip(&part).for_each(|(a, &b)| *a += b);
    }
    let gb = need_b.then(|| acc.split_off(wlen));
    let gw = need_w.then_some(acc);
    (gx, gw, gb)
}
