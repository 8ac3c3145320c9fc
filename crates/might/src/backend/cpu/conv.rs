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
use super::rows::row_sum;
use super::threads;
use gemm::Parallelism;
use std::ops::AddAssign;
use std::sync::Mutex;

/// Float types the conv/pool kernels run on (f32, f64).
pub trait ConvFloat: GemmDType + num_traits::Float + AddAssign + std::fmt::Debug {
    /// Run `f` on a per-thread scratch buffer of `len` elements (contents unspecified). Reusing
    /// it saves a fresh multi-megabyte allocation per conv call, which glibc serves with
    /// `mmap` and pays for again in page faults and zeroing.
    fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [Self]) -> R) -> R;

    /// A vectorised 2x2 max pool of one row pair, if this type has one (see
    /// [`super::max_pool_avx2::row_f32`]); false leaves the row to the scalar loop.
    fn max_pool_2x2_row(
        _r0: &[Self],
        _r1: &[Self],
        _first: usize,
        _w: usize,
        _vrow: &mut [Self],
        _irow: &mut [i64],
    ) -> bool {
        false
    }
}

macro_rules! conv_float {
    ($t:ty $(, $name:ident = $f:path)?) => {
        impl ConvFloat for $t {
            $(fn $name(
                r0: &[Self],
                r1: &[Self],
                first: usize,
                w: usize,
                vrow: &mut [Self],
                irow: &mut [i64],
            ) -> bool {
                $f(r0, r1, first, w, vrow, irow)
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
conv_float!(f32, max_pool_2x2_row = super::max_pool_avx2::row_f32);
conv_float!(f64);

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

/// Unroll the patches of one group of one sample (`x`: `[C/groups, H, W]`) into the columns
/// `0..OH * OW` of the `C/groups * kh * kw` rows of `col`, row `r` starting at `r * ld`; zeros
/// where a patch reads padding. `ld > OH * OW` lets several samples share one column matrix.
fn im2col<T: ConvFloat>(x: &[T], g: &ConvGeom, col: &mut [T], ld: usize) {
    let (p, hw) = (g.p(), g.hw());
    let ([sh, sw], [ph, pw], [dh, dw]) = (g.stride, g.padding, g.dilation);
    let mut rows = col.chunks_mut(ld);
    for plane in x.chunks_exact(hw).take(g.cg()) {
        for ki in 0..g.kh {
            let (y_lo, y_hi) = valid_range(g.oh, g.h, sh, ph, ki * dh);
            for kj in 0..g.kw {
                let row = &mut rows.next().expect("im2col: column buffer too small")[..p];
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

/// The adjoint of [`im2col`]: add every entry of `col` (row `r` at `r * ld`) back into the
/// input position it was read from (`gx`: `[C/groups, H, W]`, accumulated into).
fn col2im<T: ConvFloat>(col: &[T], g: &ConvGeom, gx: &mut [T], ld: usize) {
    let (p, hw) = (g.p(), g.hw());
    let ([sh, sw], [ph, pw], [dh, dw]) = (g.stride, g.padding, g.dilation);
    let mut rows = col.chunks(ld);
    for plane in gx.chunks_exact_mut(hw).take(g.cg()) {
        for ki in 0..g.kh {
            let (y_lo, y_hi) = valid_range(g.oh, g.h, sh, ph, ki * dh);
            for kj in 0..g.kw {
                let row = &rows.next().expect("col2im: column buffer too small")[..p];
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

/// Elements of column matrix worth unrolling at once: a GEMM over fewer than a few hundred
/// columns is dominated by its packing overhead, one over a buffer much larger than the L2
/// cache pays for the trip to memory.
const COL_TARGET: usize = 1 << 13;

/// How many samples each parallel task takes (the whole batch when one thread is enough).
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
/// Returns the dense `[N, O, OH, OW]` output.
///
/// Each task unrolls a chunk of samples into one column matrix `[klen, chunk * P]` and runs a
/// single GEMM per group, then copies the `[O/groups, chunk * P]` product into the NCHW output
/// adding the bias on the way. A chunk of one sample multiplies straight into the output.
pub fn conv2d_forward<T: ConvFloat>(x: &[T], w: &[T], bias: Option<&[T]>, g: &ConvGeom) -> Vec<T> {
    let (p, klen, og, chw, cghw) = (g.p(), g.klen(), g.og(), g.c * g.hw(), g.cg() * g.hw());
    assert!(
        x.len() == g.n * chw && w.len() == g.o * klen,
        "conv2d: buffer sizes"
    );
    // every element is written: by the GEMM, or by the copy out of `tmp`
    let mut out = super::pool::output::<T>(g.n * g.o * p);
    if out.is_empty() {
        return out;
    }
    // One run of samples: `xs` holds its inputs, `os` its outputs.
    let run = |xs: &[T], os: &mut [T]| {
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
                        if let Some(b) = bias {
                            for (row, &bv) in dst.chunks_exact_mut(p).zip(&b[grp * og..]) {
                                row.fill(bv);
                            }
                        }
                        let acc = bias.is_some();
                        gemm_into((og, p, klen), dst, acc, wg, (klen, 1), cols, (ld, 1));
                        continue;
                    }
                    gemm_into((og, ld, klen), tmp, false, wg, (klen, 1), cols, (ld, 1));
                    for (o, trow) in tmp.chunks_exact(ld).take(og).enumerate() {
                        let bv = bias.map_or(T::zero(), |b| b[grp * og + o]);
                        for (s, src) in trow.chunks_exact(p).enumerate() {
                            let d = &mut oc[(s * g.o + grp * og + o) * p..][..p];
                            for (d, &v) in d.iter_mut().zip(src) {
                                *d = v + bv;
                            }
                        }
                    }
                }
            }
        })
    };
    let per = samples_per_task(g);
    if per >= g.n {
        run(x, &mut out);
    } else {
        threads::for_each_chunk(&mut out, per * g.o * p, |i, os| {
            let s = i * per * chw;
            run(&x[s..(s + per * chw).min(x.len())], os)
        });
    }
    out
}

/// What [`conv2d_backward`] returns: the gradients of input, weight and bias, each when asked.
pub type ConvGrads<T> = (Option<Vec<T>>, Option<Vec<T>>, Option<Vec<T>>);

/// conv2d backward: the gradients of the input (`need_x`), of the weight (`need_w`) and of the
/// bias (`need_b`) given the dense output gradient `gy` (`[N, O, OH, OW]`).
///
/// Chunks of samples are handled as in the forward pass: the chunk's output gradient is
/// gathered into one `[O, chunk * P]` matrix (summing the bias gradient on the way), then
/// `grad_w += gy @ col^T` and `grad_col = W^T @ gy` are one GEMM each per group, and col2im
/// scatters `grad_col` back to the images.
pub fn conv2d_backward<T: ConvFloat>(
    x: &[T],
    w: &[T],
    gy: &[T],
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
        threads::for_each_chunk(out, out_len, |j, o| {
            f(&input[j * in_len..(j + 1) * in_len], o)
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
    // every output is written (each window holds at least one element)
    let mut vals = super::pool::output::<T>(g.planes * ohw);
    let mut idx = vec![0i64; g.planes * ohw];
    if hw == 0 || ohw == 0 {
        return (vals, idx);
    }
    let (rows, cols) = g.windows();
    let pair = g.kernel == [2, 2] && g.stride == [2, 2] && g.padding == [0, 0];
    let plane = |((vp, ip), xp): ((&mut [T], &mut [i64]), &[T])| {
        if pair {
            return max_pool_2x2(xp, vp, ip, g);
        }
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
        let planes: Vec<Mutex<_>> = vals
            .chunks_mut(ohw)
            .zip(idx.chunks_mut(ohw))
            .map(Mutex::new)
            .collect();
        threads::run(planes.len(), |j| {
            let (vp, ip) = &mut *planes[j].lock().unwrap();
            plane(((vp, ip), &x[j * hw..(j + 1) * hw]))
        });
    } else {
        vals.chunks_mut(ohw)
            .zip(idx.chunks_mut(ohw))
            .zip(x.chunks(hw))
            .for_each(plane);
    }
    (vals, idx)
}

/// The common 2x2, stride 2 max pool of one plane without window tables: the same scan order
/// (row-major, first maximum wins, NaN wins) as the general loop.
fn max_pool_2x2<T: ConvFloat>(xp: &[T], vp: &mut [T], ip: &mut [i64], g: &PoolGeom) {
    let w = g.w;
    for oy in 0..g.oh {
        let r0 = &xp[2 * oy * w..2 * oy * w + w];
        let r1 = &xp[(2 * oy + 1) * w..(2 * oy + 2) * w];
        let vrow = &mut vp[oy * g.ow..(oy + 1) * g.ow];
        let irow = &mut ip[oy * g.ow..(oy + 1) * g.ow];
        if T::max_pool_2x2_row(r0, r1, 2 * oy * w, w, vrow, irow) {
            continue;
        }
        for ox in 0..g.ow {
            let c = 2 * ox;
            let cand = [
                (r0[c], c),
                (r0[c + 1], c + 1),
                (r1[c], w + c),
                (r1[c + 1], w + c + 1),
            ];
            let (mut best, mut at) = cand[0];
            if !best.is_nan() {
                for &(v, i) in &cand[1..] {
                    if v > best || v.is_nan() {
                        (best, at) = (v, i);
                        if v.is_nan() {
                            break;
                        }
                    }
                }
            }
            vrow[ox] = best;
            irow[ox] = (2 * oy * w + at) as i64;
        }
    }
}

/// Max pooling backward: each output gradient goes to the input element its maximum came from.
pub fn max_pool2d_backward<T: ConvFloat>(gy: &[T], idx: &[i64], g: &PoolGeom) -> Vec<T> {
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    assert!(
        gy.len() == g.planes * ohw && idx.len() == gy.len(),
        "max_pool2d_backward"
    );
    let mut gx = super::pool::zeroed::<T>(g.planes * hw);
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
        threads::for_each_chunk(&mut gx, hw, |j, xp| {
            let r = j * ohw..(j + 1) * ohw;
            plane((xp, (&gy[r.clone()], &idx[r])))
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
    let mut out = super::pool::zeroed::<T>(g.planes * ohw);
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
    let mut gx = super::pool::zeroed::<T>(g.planes * hw);
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
    let mut out = super::pool::zeroed::<T>(planes * oh * ow);
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
    let mut gx = super::pool::zeroed::<T>(planes * h * w);
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
    fn max_pool_2x2_path_matches_general_scan() {
        // values with ties and NaNs: the 2x2/stride-2 path must give the sequential
        // scan's answer (first maximum, first NaN), values and indices
        let vals = [
            1.0f32,
            1.0,
            0.5,
            f32::NAN,
            -2.0,
            3.0,
            3.0,
            0.0,
            f32::NAN,
            f32::NAN,
        ];
        let mut g = crate::Generator::new(3);
        // rows of 4 outputs (scalar), 13 (a vector step and an overlapping last one),
        // 8 (exactly one vector step) and 17 with an odd row length
        for (h, w) in [(6, 8), (4, 26), (2, 16), (6, 35)] {
            for trial in 0..50 {
                let x: Vec<f32> = (0..2 * h * w)
                    .map(|_| vals[g.below(vals.len() as u64) as usize])
                    .collect();
                let geom = PoolGeom {
                    planes: 2,
                    h,
                    w,
                    oh: h / 2,
                    ow: w / 2,
                    kernel: [2, 2],
                    stride: [2, 2],
                    padding: [0, 0],
                };
                let (fv, fi) = max_pool2d_forward(&x, &geom);
                // reference: sequential scan, first maximum wins, first NaN wins
                for p in 0..2 {
                    for oy in 0..h / 2 {
                        for ox in 0..w / 2 {
                            let mut best = (f32::NEG_INFINITY, 2 * oy * w + 2 * ox);
                            'win: for iy in 2 * oy..2 * oy + 2 {
                                for ix in 2 * ox..2 * ox + 2 {
                                    let v = x[p * h * w + iy * w + ix];
                                    if v > best.0 || v.is_nan() {
                                        best = (v, iy * w + ix);
                                        if v.is_nan() {
                                            break 'win;
                                        }
                                    }
                                }
                            }
                            let o = p * (h / 2) * (w / 2) + oy * (w / 2) + ox;
                            assert_eq!(fi[o], best.1 as i64, "trial {trial} index at {o}");
                            assert!(
                                fv[o] == best.0 || (fv[o].is_nan() && best.0.is_nan()),
                                "trial {trial} value at {o}"
                            );
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
        im2col(&x, &g, &mut col, g.p());
        let mut gx = vec![0.0; x.len()];
        col2im(&c, &g, &mut gx, g.p());
        let a: f64 = col.iter().zip(&c).map(|(a, b)| a * b).sum();
        let b: f64 = x.iter().zip(&gx).map(|(a, b)| a * b).sum();
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}
