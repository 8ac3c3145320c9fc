//! Convolution and pooling kernels on dense, row-major (NCHW) buffers.
//!
//! Convolution is im2col + GEMM: for each sample and group, the input patches are unrolled into
//! a `[C/groups * kh * kw, OH * OW]` matrix (into a buffer reused across the samples a thread
//! handles) and multiplied by the `[O/groups, C/groups * kh * kw]` weight matrix. Backward uses
//! the same two matrices: `grad_weight += grad_out @ col^T`, and `grad_input = col2im(W^T @
//! grad_out)`. A 1x1 kernel with stride 1 and no padding skips the unrolling: the input plane
//! already is the column matrix.
//!
//! Work is split over the batch: each thread takes a contiguous run of samples, so every thread
//! writes a disjoint slice of the output and needs a single column buffer.
//!
//! The callers (`ops::conv`) have checked the shapes; the kernels only `assert!` what their own
//! memory safety depends on.

use super::matmul::GemmDType;
use super::threads;
use gemm::Parallelism;
use rayon::prelude::*;
use std::ops::AddAssign;

/// Float types the conv/pool kernels run on (f32, f64).
pub trait ConvFloat: GemmDType + num_traits::Float + AddAssign + std::fmt::Debug {}
impl ConvFloat for f32 {}
impl ConvFloat for f64 {}

/// Multiply-adds below which a conv stays on the calling thread.
const CONV_PAR_WORK: usize = 1 << 16;

/// Everything about one conv2d call, in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvGeom {
    /// Batch size, input channels, input height and width.
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    /// Output channels and kernel height and width.
    pub o: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
    /// Output height and width.
    pub oh: usize,
    pub ow: usize,
}

impl ConvGeom {
    /// Input channels per group.
    fn cg(&self) -> usize {
        self.c / self.groups
    }
    /// Output channels per group.
    fn og(&self) -> usize {
        self.o / self.groups
    }
    /// Rows of the column matrix: the length of one unrolled patch.
    fn klen(&self) -> usize {
        self.cg() * self.kh * self.kw
    }
    /// Output positions per channel (columns of the column matrix).
    fn p(&self) -> usize {
        self.oh * self.ow
    }
    fn hw(&self) -> usize {
        self.h * self.w
    }
    /// The input plane is the column matrix: no unrolling needed.
    fn pointwise(&self) -> bool {
        self.kh == 1 && self.kw == 1 && self.stride == [1, 1] && self.padding == [0, 0]
    }
    /// Multiply-adds of the forward pass.
    fn work(&self) -> usize {
        self.n * self.o * self.p() * self.klen()
    }
}

/// Output length of a conv/pool along one axis; `None` when the (dilated) kernel does not fit
/// in the padded input. `stride` must be > 0.
pub fn out_len(
    input: usize,
    kernel: usize,
    stride: usize,
    pad: usize,
    dil: usize,
) -> Option<usize> {
    let span = dil * (kernel.max(1) - 1) + 1;
    let padded = input + 2 * pad;
    (padded >= span).then(|| (padded - span) / stride + 1)
}

/// The output indices `o` in `[lo, hi)` whose input index `o * stride + off - pad` falls inside
/// `[0, len)`; outside that range a patch element reads padding. Lets the inner loops run
/// without a bounds test per element.
fn valid_range(out: usize, len: usize, stride: usize, pad: usize, off: usize) -> (usize, usize) {
    let lo = if pad > off {
        (pad - off).div_ceil(stride)
    } else {
        0
    };
    let hi = if len + pad > off {
        ((len + pad - off - 1) / stride + 1).min(out)
    } else {
        0
    };
    (lo.min(hi), hi)
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

/// Unroll the patches of one group of one sample (`x`: `[C/groups, H, W]`) into `col`
/// (`[C/groups * kh * kw, OH * OW]`), zeros where a patch reads padding.
fn im2col<T: ConvFloat>(x: &[T], g: &ConvGeom, col: &mut [T]) {
    let (p, hw) = (g.p(), g.hw());
    let ([sh, sw], [ph, pw], [dh, dw]) = (g.stride, g.padding, g.dilation);
    let mut rows = col.chunks_exact_mut(p);
    for plane in x.chunks_exact(hw).take(g.cg()) {
        for ki in 0..g.kh {
            let (y_lo, y_hi) = valid_range(g.oh, g.h, sh, ph, ki * dh);
            for kj in 0..g.kw {
                let row = rows.next().expect("im2col: column buffer too small");
                let (x_lo, x_hi) = valid_range(g.ow, g.w, sw, pw, kj * dw);
                row[..y_lo * g.ow].fill(T::zero());
                row[y_hi * g.ow..].fill(T::zero());
                for oy in y_lo..y_hi {
                    let iy = oy * sh + ki * dh - ph;
                    let src = &plane[iy * g.w..(iy + 1) * g.w];
                    let dst = &mut row[oy * g.ow..(oy + 1) * g.ow];
                    dst[..x_lo].fill(T::zero());
                    dst[x_hi..].fill(T::zero());
                    if x_lo == x_hi {
                        continue;
                    }
                    // first input column read by this kernel column
                    let ix0 = x_lo * sw + kj * dw - pw;
                    let dst = &mut dst[x_lo..x_hi];
                    if sw == 1 {
                        dst.copy_from_slice(&src[ix0..ix0 + dst.len()]);
                    } else {
                        for (d, &s) in dst.iter_mut().zip(src[ix0..].iter().step_by(sw)) {
                            *d = s;
                        }
                    }
                }
            }
        }
    }
}

/// The adjoint of [`im2col`]: add every entry of `col` back into the input position it was read
/// from (`gx`: `[C/groups, H, W]`, accumulated into).
fn col2im<T: ConvFloat>(col: &[T], g: &ConvGeom, gx: &mut [T]) {
    let (p, hw) = (g.p(), g.hw());
    let ([sh, sw], [ph, pw], [dh, dw]) = (g.stride, g.padding, g.dilation);
    let mut rows = col.chunks_exact(p);
    for plane in gx.chunks_exact_mut(hw).take(g.cg()) {
        for ki in 0..g.kh {
            let (y_lo, y_hi) = valid_range(g.oh, g.h, sh, ph, ki * dh);
            for kj in 0..g.kw {
                let row = rows.next().expect("col2im: column buffer too small");
                let (x_lo, x_hi) = valid_range(g.ow, g.w, sw, pw, kj * dw);
                if x_lo == x_hi {
                    continue;
                }
                let ix0 = x_lo * sw + kj * dw - pw;
                for oy in y_lo..y_hi {
                    let iy = oy * sh + ki * dh - ph;
                    let dst = &mut plane[iy * g.w..(iy + 1) * g.w];
                    let src = &row[oy * g.ow + x_lo..oy * g.ow + x_hi];
                    if sw == 1 {
                        for (d, &s) in dst[ix0..ix0 + src.len()].iter_mut().zip(src) {
                            *d += s;
                        }
                    } else {
                        for (d, &s) in dst[ix0..].iter_mut().step_by(sw).zip(src) {
                            *d += s;
                        }
                    }
                }
            }
        }
    }
}

/// How many samples each parallel task takes (the whole batch when one thread is enough).
fn samples_per_task(g: &ConvGeom) -> usize {
    let nt = threads::get_num_threads();
    if nt > 1 && g.n > 1 && g.work() >= CONV_PAR_WORK {
        g.n.div_ceil(nt)
    } else {
        g.n.max(1)
    }
}

/// conv2d forward. `x`: `[N, C, H, W]`, `w`: `[O, C/groups, kh, kw]`, `bias`: `[O]`, all dense.
/// Returns the dense `[N, O, OH, OW]` output.
pub fn conv2d_forward<T: ConvFloat>(x: &[T], w: &[T], bias: Option<&[T]>, g: &ConvGeom) -> Vec<T> {
    let (p, klen, og, chw) = (g.p(), g.klen(), g.og(), g.c * g.hw());
    assert!(
        x.len() == g.n * chw && w.len() == g.o * klen,
        "conv2d: buffer sizes"
    );
    let mut out = vec![T::zero(); g.n * g.o * p];
    if out.is_empty() {
        return out;
    }
    // One run of samples: `xs` holds its inputs, `os` its outputs.
    let run = |xs: &[T], os: &mut [T]| {
        let mut col = if g.pointwise() {
            Vec::new()
        } else {
            vec![T::zero(); klen * p]
        };
        for (xn, on) in xs.chunks_exact(chw).zip(os.chunks_exact_mut(g.o * p)) {
            if let Some(b) = bias {
                for (row, &bv) in on.chunks_exact_mut(p).zip(b) {
                    row.fill(bv);
                }
            }
            for grp in 0..g.groups {
                let xg = &xn[grp * g.cg() * g.hw()..(grp + 1) * g.cg() * g.hw()];
                let cols: &[T] = if g.pointwise() {
                    xg
                } else {
                    im2col(xg, g, &mut col);
                    &col
                };
                let wg = &w[grp * og * klen..(grp + 1) * og * klen];
                let dst = &mut on[grp * og * p..(grp + 1) * og * p];
                gemm_into(
                    (og, p, klen),
                    dst,
                    bias.is_some(),
                    wg,
                    (klen, 1),
                    cols,
                    (p, 1),
                );
            }
        }
    };
    let per = samples_per_task(g);
    if per >= g.n {
        run(x, &mut out);
    } else {
        threads::install(|| {
            out.par_chunks_mut(per * g.o * p)
                .zip(x.par_chunks(per * chw))
                .for_each(|(os, xs)| run(xs, os))
        });
    }
    out
}

/// conv2d backward: the gradients of the input (`need_x`) and of the weight (`need_w`) given
/// the dense output gradient `gy` (`[N, O, OH, OW]`). The bias gradient is a plain sum of `gy`
/// and is left to the caller.
pub fn conv2d_backward<T: ConvFloat>(
    x: &[T],
    w: &[T],
    gy: &[T],
    g: &ConvGeom,
    need_x: bool,
    need_w: bool,
) -> (Option<Vec<T>>, Option<Vec<T>>) {
    let (p, klen, og, chw, ohw) = (g.p(), g.klen(), g.og(), g.c * g.hw(), g.o * g.p());
    assert!(
        x.len() == g.n * chw && w.len() == g.o * klen && gy.len() == g.n * ohw,
        "conv2d_backward: buffer sizes"
    );
    // One run of `count` samples starting at sample `s0`: adds its part of grad_input into
    // `gx` (the run's own slice) and its part of grad_weight into `gw` (a per-task partial sum).
    let run = |s0: usize, count: usize, mut gx: Option<&mut [T]>, mut gw: Option<&mut [T]>| {
        let mut col = if g.pointwise() {
            Vec::new()
        } else {
            vec![T::zero(); klen * p]
        };
        for s in s0..s0 + count {
            let xn = &x[s * chw..(s + 1) * chw];
            let gyn = &gy[s * ohw..(s + 1) * ohw];
            for grp in 0..g.groups {
                let xr = grp * g.cg() * g.hw()..(grp + 1) * g.cg() * g.hw();
                let wg = &w[grp * og * klen..(grp + 1) * og * klen];
                let gyg = &gyn[grp * og * p..(grp + 1) * og * p];
                if let Some(gw) = gw.as_deref_mut() {
                    // grad_w[og, klen] += grad_y[og, p] @ col^T[p, klen]
                    let cols: &[T] = if g.pointwise() {
                        &xn[xr.clone()]
                    } else {
                        im2col(&xn[xr.clone()], g, &mut col);
                        &col
                    };
                    let gwg = &mut gw[grp * og * klen..(grp + 1) * og * klen];
                    gemm_into((og, klen, p), gwg, true, gyg, (p, 1), cols, (1, p));
                }
                if let Some(gx) = gx.as_deref_mut() {
                    // grad_col[klen, p] = W^T[klen, og] @ grad_y[og, p], then back to the image
                    let gxg = &mut gx[(s - s0) * chw..][xr];
                    if g.pointwise() {
                        gemm_into((klen, p, og), gxg, false, wg, (1, klen), gyg, (p, 1));
                    } else {
                        gemm_into((klen, p, og), &mut col, false, wg, (1, klen), gyg, (p, 1));
                        col2im(&col, g, gxg);
                    }
                }
            }
        }
    };

    let per = samples_per_task(g);
    let mut gx = need_x.then(|| vec![T::zero(); g.n * chw]);
    let ntasks = g.n.div_ceil(per.max(1));
    let partials: Vec<Option<Vec<T>>> = if ntasks <= 1 {
        let mut gw = need_w.then(|| vec![T::zero(); g.o * klen]);
        run(0, g.n, gx.as_deref_mut(), gw.as_deref_mut());
        vec![gw]
    } else {
        let task = |i: usize, gxc: Option<&mut [T]>| {
            let mut gw = need_w.then(|| vec![T::zero(); g.o * klen]);
            run(i * per, per.min(g.n - i * per), gxc, gw.as_deref_mut());
            gw
        };
        threads::install(|| match gx.as_deref_mut() {
            Some(gx) => gx
                .par_chunks_mut(per * chw)
                .enumerate()
                .map(|(i, c)| task(i, Some(c)))
                .collect(),
            None => (0..ntasks).into_par_iter().map(|i| task(i, None)).collect(),
        })
    };
    let gw = need_w.then(|| {
        let mut it = partials.into_iter().flatten();
        let mut acc = it.next().unwrap_or_else(|| vec![T::zero(); g.o * klen]);
        for part in it {
            acc.iter_mut().zip(&part).for_each(|(a, &b)| *a += b);
        }
        acc
    });
    (gx, gw)
}

/// Geometry of a 2-D pooling over `planes` independent `[H, W]` planes (N * C of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolGeom {
    pub planes: usize,
    pub h: usize,
    pub w: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub oh: usize,
    pub ow: usize,
}

impl PoolGeom {
    /// Window along one axis for output index `o`: `[start, end)` clipped to the input, plus
    /// the unclipped length (inside the padded input) used by `count_include_pad`.
    #[inline]
    fn window(o: usize, k: usize, s: usize, pad: usize, len: usize) -> (usize, usize, usize) {
        let start = (o * s) as isize - pad as isize;
        let end = (start + k as isize).min((len + pad) as isize);
        let full = (end - start) as usize;
        (start.max(0) as usize, (end.max(0) as usize).min(len), full)
    }
}

/// Run `f(plane_index, in_plane, out_plane)` over all planes, in parallel when large.
fn for_planes<T: Send + Sync, U: Send>(
    input: &[T],
    in_len: usize,
    out: &mut [U],
    out_len: usize,
    work: usize,
    f: impl Fn(&[T], &mut [U]) + Sync + Send,
) {
    if in_len == 0 || out_len == 0 {
        return;
    }
    if threads::parallel(work) {
        threads::install(|| {
            out.par_chunks_mut(out_len)
                .zip(input.par_chunks(in_len))
                .for_each(|(o, i)| f(i, o))
        });
    } else {
        out.chunks_mut(out_len)
            .zip(input.chunks(in_len))
            .for_each(|(o, i)| f(i, o));
    }
}

/// Clipped `[start, end)` pooling windows along one axis, one per output index.
type Windows = Vec<(usize, usize)>;

impl PoolGeom {
    /// The clipped `[start, end)` windows of every output row and column, computed once per
    /// call instead of once per output element.
    fn windows(&self) -> (Windows, Windows) {
        let axis = |out: usize, a: usize, len: usize| -> Windows {
            (0..out)
                .map(|o| {
                    let (s, e, _) =
                        PoolGeom::window(o, self.kernel[a], self.stride[a], self.padding[a], len);
                    (s, e)
                })
                .collect()
        };
        (axis(self.oh, 0, self.h), axis(self.ow, 1, self.w))
    }
}

/// Max pooling. Returns the maxima and, for each, the flat index (`iy * W + ix`) of the input
/// element it came from (PyTorch's `return_indices`). NaN wins, as in PyTorch.
// the window loop indexes by position: it needs the index itself, not just the element
#[allow(clippy::needless_range_loop)]
pub fn max_pool2d_forward<T: ConvFloat>(x: &[T], g: &PoolGeom) -> (Vec<T>, Vec<i64>) {
    let (hw, ohw, w) = (g.h * g.w, g.oh * g.ow, g.w);
    assert_eq!(x.len(), g.planes * hw, "max_pool2d: buffer size");
    let mut vals = vec![T::zero(); g.planes * ohw];
    let mut idx = vec![0i64; g.planes * ohw];
    if hw == 0 || ohw == 0 {
        return (vals, idx);
    }
    let (rows, cols) = g.windows();
    let plane = |((vp, ip), xp): ((&mut [T], &mut [i64]), &[T])| {
        for (oy, &(y0, y1)) in rows.iter().enumerate() {
            for (ox, &(x0, x1)) in cols.iter().enumerate() {
                // padding never wins: windows always hold a real element (padding <= k/2)
                let (mut best, mut at) = (T::neg_infinity(), y0 * w + x0);
                'win: for iy in y0..y1 {
                    for i in iy * w + x0..iy * w + x1 {
                        let v = xp[i];
                        if v > best || v.is_nan() {
                            (best, at) = (v, i);
                            if v.is_nan() {
                                break 'win;
                            }
                        }
                    }
                }
                vp[oy * g.ow + ox] = best;
                ip[oy * g.ow + ox] = at as i64;
            }
        }
    };
    if threads::parallel(vals.len() * g.kernel[0] * g.kernel[1]) {
        threads::install(|| {
            vals.par_chunks_mut(ohw)
                .zip(idx.par_chunks_mut(ohw))
                .zip(x.par_chunks(hw))
                .for_each(plane)
        });
    } else {
        vals.chunks_mut(ohw)
            .zip(idx.chunks_mut(ohw))
            .zip(x.chunks(hw))
            .for_each(plane);
    }
    (vals, idx)
}

/// Max pooling backward: each output gradient goes to the input element its maximum came from.
pub fn max_pool2d_backward<T: ConvFloat>(gy: &[T], idx: &[i64], g: &PoolGeom) -> Vec<T> {
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    assert!(
        gy.len() == g.planes * ohw && idx.len() == gy.len(),
        "max_pool2d_backward"
    );
    let mut gx = vec![T::zero(); g.planes * hw];
    if hw == 0 || ohw == 0 {
        return gx;
    }
    let plane = |(xp, (gp, ip)): (&mut [T], (&[T], &[i64]))| {
        for (&v, &i) in gp.iter().zip(ip) {
            // indices come from our own forward pass; a bad one is a bug, not user input
            xp[i as usize] += v;
        }
    };
    if threads::parallel(gx.len()) {
        threads::install(|| {
            gx.par_chunks_mut(hw)
                .zip(gy.par_chunks(ohw).zip(idx.par_chunks(ohw)))
                .for_each(plane)
        });
    } else {
        gx.chunks_mut(hw)
            .zip(gy.chunks(ohw).zip(idx.chunks(ohw)))
            .for_each(plane);
    }
    gx
}

/// Average pooling, `count_include_pad = true` (the divisor counts padded positions).
pub fn avg_pool2d_forward<T: ConvFloat>(x: &[T], g: &PoolGeom) -> Vec<T> {
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    assert_eq!(x.len(), g.planes * hw, "avg_pool2d: buffer size");
    let mut out = vec![T::zero(); g.planes * ohw];
    let work = out.len() * g.kernel[0] * g.kernel[1];
    for_planes(x, hw, &mut out, ohw, work, |xp, op| {
        for oy in 0..g.oh {
            let (y0, y1, fy) = PoolGeom::window(oy, g.kernel[0], g.stride[0], g.padding[0], g.h);
            for ox in 0..g.ow {
                let (x0, x1, fx) =
                    PoolGeom::window(ox, g.kernel[1], g.stride[1], g.padding[1], g.w);
                let mut s = T::zero();
                for iy in y0..y1 {
                    for &v in &xp[iy * g.w + x0..iy * g.w + x1] {
                        s += v;
                    }
                }
                op[oy * g.ow + ox] = s / T::from(fy * fx).unwrap();
            }
        }
    });
    out
}

/// Average pooling backward: each output gradient is spread evenly over its window.
pub fn avg_pool2d_backward<T: ConvFloat>(gy: &[T], g: &PoolGeom) -> Vec<T> {
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    assert_eq!(gy.len(), g.planes * ohw, "avg_pool2d_backward: buffer size");
    let mut gx = vec![T::zero(); g.planes * hw];
    let work = gy.len() * g.kernel[0] * g.kernel[1];
    for_planes(gy, ohw, &mut gx, hw, work, |gp, xp| {
        for oy in 0..g.oh {
            let (y0, y1, fy) = PoolGeom::window(oy, g.kernel[0], g.stride[0], g.padding[0], g.h);
            for ox in 0..g.ow {
                let (x0, x1, fx) =
                    PoolGeom::window(ox, g.kernel[1], g.stride[1], g.padding[1], g.w);
                let v = gp[oy * g.ow + ox] / T::from(fy * fx).unwrap();
                for iy in y0..y1 {
                    for d in &mut xp[iy * g.w + x0..iy * g.w + x1] {
                        *d += v;
                    }
                }
            }
        }
    });
    gx
}

/// Adaptive window `[floor(o * len / out), ceil((o + 1) * len / out))` (PyTorch's formula).
#[inline]
fn adaptive_window(o: usize, out: usize, len: usize) -> (usize, usize) {
    (o * len / out, ((o + 1) * len).div_ceil(out))
}

/// Adaptive average pooling of `planes` `[h, w]` planes to `[oh, ow]`.
pub fn adaptive_avg_pool2d_forward<T: ConvFloat>(
    x: &[T],
    planes: usize,
    [h, w]: [usize; 2],
    [oh, ow]: [usize; 2],
) -> Vec<T> {
    assert_eq!(x.len(), planes * h * w, "adaptive_avg_pool2d: buffer size");
    let mut out = vec![T::zero(); planes * oh * ow];
    let work = planes * h * w;
    for_planes(x, h * w, &mut out, oh * ow, work, |xp, op| {
        for oy in 0..oh {
            let (y0, y1) = adaptive_window(oy, oh, h);
            for ox in 0..ow {
                let (x0, x1) = adaptive_window(ox, ow, w);
                let mut s = T::zero();
                for iy in y0..y1 {
                    for &v in &xp[iy * w + x0..iy * w + x1] {
                        s += v;
                    }
                }
                op[oy * ow + ox] = s / T::from((y1 - y0) * (x1 - x0)).unwrap();
            }
        }
    });
    out
}

/// Adaptive average pooling backward: each output gradient spread evenly over its window.
pub fn adaptive_avg_pool2d_backward<T: ConvFloat>(
    gy: &[T],
    planes: usize,
    [h, w]: [usize; 2],
    [oh, ow]: [usize; 2],
) -> Vec<T> {
    assert_eq!(gy.len(), planes * oh * ow, "adaptive_avg_pool2d_backward");
    let mut gx = vec![T::zero(); planes * h * w];
    let work = planes * h * w;
    for_planes(gy, oh * ow, &mut gx, h * w, work, |gp, xp| {
        for oy in 0..oh {
            let (y0, y1) = adaptive_window(oy, oh, h);
            for ox in 0..ow {
                let (x0, x1) = adaptive_window(ox, ow, w);
                let v = gp[oy * ow + ox] / T::from((y1 - y0) * (x1 - x0)).unwrap();
                for iy in y0..y1 {
                    for d in &mut xp[iy * w + x0..iy * w + x1] {
                        *d += v;
                    }
                }
            }
        }
    });
    gx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_range_matches_brute_force() {
        for len in 1..7 {
            for stride in 1..4 {
                for pad in 0..3 {
                    for off in 0..6 {
                        let out = 8;
                        let (lo, hi) = valid_range(out, len, stride, pad, off);
                        for o in 0..out {
                            let i = (o * stride + off) as isize - pad as isize;
                            let inside = i >= 0 && (i as usize) < len;
                            assert_eq!(inside, o >= lo && o < hi, "{len} {stride} {pad} {off} {o}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn col2im_is_adjoint_of_im2col() {
        // <im2col(x), c> == <x, col2im(c)> for any x, c
        let g = ConvGeom {
            n: 1,
            c: 2,
            h: 5,
            w: 4,
            o: 1,
            kh: 3,
            kw: 2,
            stride: [2, 1],
            padding: [1, 1],
            dilation: [1, 2],
            groups: 1,
            oh: out_len(5, 3, 2, 1, 1).unwrap(),
            ow: out_len(4, 2, 1, 1, 2).unwrap(),
        };
        let x: Vec<f64> = (0..40).map(|i| (i as f64 * 0.37).sin()).collect();
        let c: Vec<f64> = (0..g.klen() * g.p())
            .map(|i| (i as f64 * 0.11).cos())
            .collect();
        let mut col = vec![0.0; c.len()];
        im2col(&x, &g, &mut col);
        let mut gx = vec![0.0; x.len()];
        col2im(&c, &g, &mut gx);
        let a: f64 = col.iter().zip(&c).map(|(a, b)| a * b).sum();
        let b: f64 = x.iter().zip(&gx).map(|(a, b)| a * b).sum();
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}
