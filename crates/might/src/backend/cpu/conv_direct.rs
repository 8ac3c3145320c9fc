//! Direct convolution for stride-1, undilated convolutions, in the [`Wide`] position layout.
//!
//! In the wide layout a conv is a sum of shifted rows: with the input planes copied (and
//! zero-padded) into one buffer `xp`, output `o` at wide position `pos` is
//! `sum_k w[o][k] * xp[off[k] + pos]`, `off[k] = c * plane + ki * Wp + kj` for patch element
//! `k = (c, ki, kj)`. [`shifted_products`] computes that straight from `xp`: a register tile of
//! [`RF`] outputs by `W` positions, one broadcast weight and one contiguous load per patch
//! element. No column matrix is built and nothing is packed, which on MNIST-sized layers (a
//! few channels, planes of 13x13 or 28x28) is most of the cost of im2col + GEMM.
//!
//! The backward pass reuses it: the input gradient is the same sum with input and output
//! channels swapped and the shifts negated ([`grad_input`]); the weight gradient is a dot
//! product of each output-gradient row with each shifted input row ([`grad_weight`]).
//!
//! The loops run over fixed-size arrays that LLVM compiles 8 lanes wide with fused
//! multiply-adds in an AVX2+FMA build, chosen at run time.

use super::conv::{ConvFloat, ConvGeom};
#[cfg(any(target_arch = "x86", target_arch = "x86_64", target_arch = "wasm32"))]
use super::simd;

/// The "wide" numbering of output positions: `(oy, ox)` is `oy * Wp + ox` over the padded
/// input width `Wp` instead of `oy * OW + ox`, so patch element `(c, ki, kj)` reads the
/// contiguous run `xp[c][ki * Wp + kj..][..len]` of the padded input for all positions at once,
/// `len = (OH - 1) * Wp + OW`. The `Wp - OW` positions after every output row but the last are
/// not outputs: the kernels compute them too, the forward pass drops them and the backward pass
/// gives them a zero output gradient.
///
/// A strided convolution (forward only) reads its input in phases: with stride `(sh, sw)`, the
/// padded plane is split into `sh * sw` phase planes, phase `(a, b)` holding the elements at
/// `(i * sh + a, j * sw + b)`, each `ceil(Hp / sh) x ceil(Wp / sw)`. Patch element
/// `(c, ki, kj)` then reads phase `(ki % sh, kj % sw)` of channel `c` shifted by
/// `(ki / sh, kj / sw)`: again a contiguous run, `Wp` now the phase width.
#[derive(Clone, Copy, Debug)]
pub(super) struct Wide {
    /// Height and width of a (phase) plane of the padded input.
    hp: usize,
    wp: usize,
    /// The stride: phases per channel `sh * sw`.
    sh: usize,
    sw: usize,
    /// Wide positions per sample.
    pub len: usize,
}

impl Wide {
    /// The wide layout of `g`, when it applies and wastes at most a quarter of the work.
    pub(super) fn of(g: &ConvGeom) -> Option<Wide> {
        let [sh, sw] = g.stride;
        if sh == 0 || sw == 0 || sh > 4 || sw > 4 || g.dilation != [1, 1] || g.oh == 0 || g.ow == 0
        {
            return None;
        }
        if g.kh == 1 && g.kw == 1 && g.padding == [0, 0] {
            // pointwise: the input (or a strided view of it) is already the column matrix
            return None;
        }
        let (hp, wp) = (g.h + 2 * g.padding[0], g.w + 2 * g.padding[1]);
        let (hp, wp) = (hp.div_ceil(sh), wp.div_ceil(sw));
        let len = (g.oh - 1) * wp + g.ow;
        (4 * len <= 5 * g.p()).then_some(Wide {
            hp,
            wp,
            sh,
            sw,
            len,
        })
    }

    /// Whether the convolution has stride 1 (one phase): the backward kernels need it.
    pub(super) fn unit_stride(&self) -> bool {
        self.sh == 1 && self.sw == 1
    }

    /// Elements of one channel of the padded input copy: its phase planes.
    pub(super) fn chan(&self) -> usize {
        self.sh * self.sw * self.plane()
    }

    /// Padded input width: the row stride of wide positions.
    pub(super) fn wp(&self) -> usize {
        self.wp
    }

    /// Elements of one padded input plane.
    pub(super) fn plane(&self) -> usize {
        self.hp * self.wp
    }

    /// Copy the wide row `src` (`len` elements, row stride `Wp`) into the dense output plane
    /// `dst` (`OH * OW`), adding `bias`, then applying a fused ReLU when `relu`.
    #[inline(always)]
    pub(super) fn unwiden<T: ConvFloat>(
        &self,
        g: &ConvGeom,
        src: &[T],
        dst: &mut [T],
        bias: T,
        relu: bool,
    ) {
        for (d, s) in dst.chunks_exact_mut(g.ow).zip(src.chunks(self.wp)) {
            if relu {
                map_row(d, s, s, |v, _| relu_of(v + bias));
            } else {
                map_row(d, s, s, |v, _| v + bias);
            }
        }
    }

    /// Write the wide row `dst` (`margin + len` elements and more): `margin` zeros, the dense
    /// plane `src` (`OH * OW`) in wide positions with zeros in the gaps, zeros to the end.
    /// With `relu_y` (the plane's output of a fused ReLU), `src` passes only where it is
    /// positive: the ReLU's backward on the way.
    #[inline(always)]
    pub(super) fn widen<T: ConvFloat>(
        &self,
        g: &ConvGeom,
        src: &[T],
        relu_y: Option<&[T]>,
        dst: &mut [T],
        margin: usize,
    ) {
        dst.fill(T::zero());
        let rows = dst[margin..].chunks_mut(self.wp);
        match relu_y {
            None => {
                for (s, d) in src.chunks_exact(g.ow).zip(rows) {
                    copy_row(&mut d[..g.ow], s);
                }
            }
            Some(y) => {
                for ((s, y), d) in src.chunks_exact(g.ow).zip(y.chunks_exact(g.ow)).zip(rows) {
                    map_row(&mut d[..g.ow], s, y, relu_grad);
                }
            }
        }
    }
}

/// The fused ReLU, as `Tensor::relu` computes it (NaN gives 0): the conv and BatchNorm
/// epilogues.
#[inline(always)]
pub(crate) fn relu_of<T: num_traits::Float>(v: T) -> T {
    if v > T::zero() {
        v
    } else {
        T::zero()
    }
}

/// The ReLU's backward: the gradient `g` passes where the output `y` is positive.
#[inline(always)]
pub(super) fn relu_grad<T: ConvFloat>(g: T, y: T) -> T {
    if y > T::zero() {
        g
    } else {
        T::zero()
    }
}

/// `dst.copy_from_slice(src)` for the short rows of small images (11 to 28 elements), in
/// [`map_row`]'s fixed 8-element moves: a `memcpy` call per row cost more than the copy (LLVM
/// turns plain element loops into such calls too).
#[inline(always)]
fn copy_row<T: Copy>(dst: &mut [T], src: &[T]) {
    map_row(dst, src, src, |x, _| x)
}

/// `dst[i] = f(a[i], b[i])` over a short row (11 to 28 elements on small images), in fixed
/// 8-element steps, the last one overlapping the one before (`f` is pure, so the overlap
/// writes the same values twice): an element loop over such rows ran 4 lanes wide plus a
/// scalar tail behind run-time overlap checks (the masked-ReLU widening was ~7 % of a small
/// CNN's epoch).
#[inline(always)]
pub(super) fn map_row<T: Copy>(dst: &mut [T], a: &[T], b: &[T], f: impl Fn(T, T) -> T) {
    const C: usize = 8;
    let n = dst.len();
    let (a, b) = (&a[..n], &b[..n]);
    if n < C {
        for ((d, &x), &y) in dst.iter_mut().zip(a).zip(b) {
            *d = f(x, y);
        }
        return;
    }
    let mut i = 0;
    loop {
        let j = i.min(n - C);
        let x: [T; C] = a[j..j + C].try_into().expect("C elements");
        let y: [T; C] = b[j..j + C].try_into().expect("C elements");
        let r: [T; C] = std::array::from_fn(|l| f(x[l], y[l]));
        dst[j..j + C].copy_from_slice(&r);
        if j + C >= n {
            return;
        }
        i += C;
    }
}

/// Output rows per register tile of the weight gradient.
const R: usize = 4;
/// Output rows per register tile of [`shifted_products`] (the packed weight blocks): with two
/// AVX-512 vectors of positions, 16 independent accumulators, enough to keep both FMA units of
/// a core busy through the FMA latency (4 rows, 8 accumulators, ran at half of the FMA peak of
/// a Xeon with two AVX-512 FMA units: 110 against 138 GFLOP/s on ResNet-18's 3x3 64-channel
/// layer; 8 rows of three vectors measured 111, the 24 accumulators' tile no longer compiled to
/// registers alone); 8 rows of one vector in the AVX2 and baseline builds, which have 16
/// registers.
pub(super) const RF: usize = 8;
/// Positions per register tile: one vector of f32 (AVX2, and the baseline build) or two
/// (AVX-512, the rest of the row too).
const V2: usize = 8;
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
const V5: usize = 32;
/// The AVX-512 build's tail tiles: two vectors as well. A one-vector tail (16) compiled to
/// accumulators kept in memory, gathered and scattered along the 8 rows on every step: 15 ms
/// instead of 1.6 for the Winograd products of a 256-channel layer at 14x14, whose rows are
/// 16 positions long. The wider tail computes up to 16 spare positions per row, which the
/// buffers (rounded up to [`SPAN`]) already hold.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
const V5T: usize = 32;
/// What positions are rounded up to, for buffer rows and the slack past the last input row:
/// a multiple of the one-vector tile widths.
const SPAN: usize = 32;
/// Lanes of the weight-gradient dot products, AVX2 or AVX-512, and patch elements per
/// weight-gradient tile.
const L2: usize = 8;
const L5: usize = 16;
const T3: usize = 3;

/// Weights laid out for [`shifted_products`]: for each block of [`RF`] output rows, for each
/// patch element `k`, the `RF` weights `w[o][k]` side by side (rows past the end are zero).
pub(super) struct Packed<T> {
    data: Vec<T>,
    klen: usize,
}

impl<T: ConvFloat> Packed<T> {
    /// Pack `rows x klen` weights given element-wise by `get(row, k)`.
    pub(super) fn new(rows: usize, klen: usize, get: impl Fn(usize, usize) -> T) -> Self {
        let blocks = rows.div_ceil(RF);
        let mut data = vec![T::zero(); blocks * klen * RF];
        for (b, blk) in data.chunks_exact_mut(klen * RF).enumerate() {
            for (k, ws) in blk.chunks_exact_mut(RF).enumerate() {
                for (r, w) in ws.iter_mut().enumerate() {
                    if b * RF + r < rows {
                        *w = get(b * RF + r, k);
                    }
                }
            }
        }
        Packed { data, klen }
    }

    /// Zero weights for `rows` output rows (rounded up to whole blocks) of `klen` elements,
    /// for a caller that fills [`Self::data_mut`] in the packed layout itself.
    pub(super) fn zeroed(rows: usize, klen: usize) -> Self {
        let data = vec![T::zero(); rows.div_ceil(RF) * klen * RF];
        Packed { data, klen }
    }

    /// The packed weights: blocks of [`RF`] rows, each `[klen][RF]`.
    pub(super) fn data_mut(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// Output rows, rounded up to whole tiles.
    pub(super) fn rows(&self) -> usize {
        self.data.len() / self.klen.max(1)
    }
}

/// [`shifted_tiles`] compiled for AVX2+FMA and for AVX-512. (A closure through
/// [`simd::run`] would not do: these loops are too large for LLVM to inline the closure, and
/// out of line it compiles for baseline SSE2.)
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "avx2,fma")]
unsafe fn shifted_tiles_avx2<T: ConvFloat>(
    x: &[T],
    off: &[usize],
    w: &Packed<T>,
    out: &mut [T],
    ldo: usize,
    len: usize,
) {
    shifted_tiles::<T, true, V2, V2>(x, off, w, out, ldo, len)
}

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn shifted_tiles_avx512<T: ConvFloat>(
    x: &[T],
    off: &[usize],
    w: &Packed<T>,
    out: &mut [T],
    ldo: usize,
    len: usize,
) {
    shifted_tiles::<T, true, V5, V5T>(x, off, w, out, ldo, len)
}

/// [`weight_tiles`] compiled for AVX2+FMA and for AVX-512.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "avx2,fma")]
unsafe fn weight_tiles_avx2<T: ConvFloat>(
    gy: &[T],
    ldg: usize,
    rows: usize,
    x: &[T],
    off: &[usize],
    gw: &mut [T],
    len: usize,
) {
    weight_tiles::<T, true, L2>(gy, ldg, rows, x, off, gw, len)
}

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn weight_tiles_avx512<T: ConvFloat>(
    gy: &[T],
    ldg: usize,
    rows: usize,
    x: &[T],
    off: &[usize],
    gw: &mut [T],
    len: usize,
) {
    weight_tiles::<T, true, L5>(gy, ldg, rows, x, off, gw, len)
}

/// Lowered by tests to run every build on a machine that has the wider ones.
#[cfg(test)]
static MAX_LEVEL: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(2);

/// The build to run: [`simd::level`], capped in tests.
#[cfg(any(target_arch = "x86", target_arch = "x86_64", target_arch = "wasm32"))]
fn level() -> u8 {
    let l = simd::level();
    #[cfg(test)]
    let l = l.min(MAX_LEVEL.load(std::sync::atomic::Ordering::Relaxed));
    l
}

/// `N` elements of `s` from `at` on, without a bounds check (the kernels check their whole
/// reach once, before their loops).
///
/// # Safety
/// `at + N <= s.len()`.
#[inline(always)]
unsafe fn load<T: Copy, const N: usize>(s: &[T], at: usize) -> [T; N] {
    debug_assert!(at + N <= s.len());
    // SAFETY: the caller guarantees the N elements lie inside `s`; an unaligned read needs
    // no alignment.
    unsafe { std::ptr::read_unaligned(s.as_ptr().add(at) as *const [T; N]) }
}

/// `a * b + c`, as one fused multiply-add in the AVX2 and AVX-512 builds (`FUSED`; twice the
/// arithmetic per instruction) and as a multiply then an add elsewhere, where `mul_add` would
/// be a library call. The two builds may differ in the last bit, as the GEMM's do.
#[inline(always)]
fn madd<T: ConvFloat, const FUSED: bool>(a: T, b: T, c: T) -> T {
    if FUSED {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// Positions rounded up to whole tiles: the row length of [`shifted_products`]' output and the
/// slack its input needs past the last shifted row.
pub(super) fn tiled(len: usize) -> usize {
    len.div_ceil(SPAN) * SPAN
}

/// `out[o][pos] = sum_k w[o][k] * x[off[k] + pos]` for every packed row `o` (`w.rows()`, a
/// multiple of [`RF`]) and `pos < tiled(len)`; row `o` of `out` starts at `o * ldo`.
pub(super) fn shifted_products<T: ConvFloat>(
    x: &[T],
    off: &[usize],
    w: &Packed<T>,
    out: &mut [T],
    ldo: usize,
    len: usize,
) {
    let (klen, span) = (off.len(), tiled(len));
    assert_eq!(klen, w.klen, "conv: packed weights");
    let reach = off.iter().max().map_or(0, |&m| m + span);
    assert!(
        x.len() >= reach && ldo >= span && out.len() >= w.rows() * ldo,
        "conv: direct kernel bounds"
    );
    if klen == 0 {
        return out.fill(T::zero());
    }
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    match level() {
        // SAFETY: level 2 means the CPU supports AVX-512F, AVX2 and FMA.
        2 => return unsafe { shifted_tiles_avx512(x, off, w, out, ldo, len) },
        // SAFETY: level 1 means the CPU supports AVX2 and FMA.
        1 => return unsafe { shifted_tiles_avx2(x, off, w, out, ldo, len) },
        _ => {}
    }
    #[cfg(target_arch = "wasm32")]
    if level() == 1 {
        return shifted_tiles_simd128(x, off, w, out, ldo, len);
    }
    shifted_tiles::<T, false, V2, V2>(x, off, w, out, ldo, len)
}

/// [`shifted_tiles`] compiled for WebAssembly's simd128 (4 lanes; no fused multiply-add).
#[cfg(target_arch = "wasm32")]
#[target_feature(enable = "simd128")]
fn shifted_tiles_simd128<T: ConvFloat>(
    x: &[T],
    off: &[usize],
    w: &Packed<T>,
    out: &mut [T],
    ldo: usize,
    len: usize,
) {
    shifted_tiles::<T, false, V2, V2>(x, off, w, out, ldo, len)
}

/// The loops of [`shifted_products`], inlined into each build: tiles `W` positions wide, then
/// tiles `WT` wide (a divisor of [`SPAN`]) for what is left of the row.
#[inline(always)]
fn shifted_tiles<T: ConvFloat, const FUSED: bool, const W: usize, const WT: usize>(
    x: &[T],
    off: &[usize],
    w: &Packed<T>,
    out: &mut [T],
    ldo: usize,
    len: usize,
) {
    let (klen, span) = (off.len(), len.div_ceil(WT) * WT);
    let main = span / W * W;
    let blocks = w.data.chunks_exact(klen * RF);
    for (i, (wb, ob)) in blocks.zip(out.chunks_mut(RF * ldo)).enumerate() {
        // the next block's weights, asked for while this one runs: read once per call (the
        // Winograd banks of a 128-channel layer, 2.4 MB, come from L3), they cross a page
        // every 4 KB, where the hardware prefetcher stops
        if let Some(next) = w.data.get((i + 1) * klen * RF..(i + 2) * klen * RF) {
            super::prefetch::prefetch(next);
        }
        for p0 in (0..main).step_by(W) {
            tile::<T, FUSED, W>(x, off, wb, ob, ldo, p0);
        }
        for p0 in (main..span).step_by(WT) {
            tile::<T, FUSED, WT>(x, off, wb, ob, ldo, p0);
        }
    }
}

/// One register tile: [`RF`] output rows by `W` positions from `p0`, summed over every patch
/// element (the caller keeps `p0 + W` within `tiled(len)`).
#[inline(always)]
fn tile<T: ConvFloat, const FUSED: bool, const W: usize>(
    x: &[T],
    off: &[usize],
    wb: &[T],
    ob: &mut [T],
    ldo: usize,
    p0: usize,
) {
    let mut acc = [[T::zero(); W]; RF];
    for (&o, ws) in off.iter().zip(wb.chunks_exact(RF)) {
        // SAFETY: o + p0 + W <= max(off) + tiled(len) <= x.len(), asserted by
        // `shifted_products`
        let xs: [T; W] = unsafe { load(x, o + p0) };
        for (a, &wv) in acc.iter_mut().zip(ws) {
            for (a, &xv) in a.iter_mut().zip(&xs) {
                *a = madd::<T, FUSED>(wv, xv, *a);
            }
        }
    }
    for (r, a) in acc.iter().enumerate() {
        ob[r * ldo + p0..r * ldo + p0 + W].copy_from_slice(a);
    }
}

/// Lane partial sums of the weight gradient: `gw[o][k] = sum_l lanes[(o * klen + k) * LANES + l]`.
/// Kept apart over all the samples a thread handles and summed once at the end, since a
/// horizontal sum per sample would cost more than the products on MNIST-sized planes.
pub(super) const LANES: usize = L5;

/// Sum weight-gradient lane partials (see [`LANES`]) into `gw`.
pub(super) fn add_lanes<T: ConvFloat>(lanes: &[T], gw: &mut [T]) {
    for (g, l) in gw.iter_mut().zip(lanes.chunks_exact(LANES)) {
        *g += l.iter().fold(T::zero(), |s, &v| s + v);
    }
}

/// `gw[o][k] += sum_{pos < len} gy[o * ldg + pos] * x[off[k] + pos]` for `o < rows`, in lane
/// partials: `gw` holds [`LANES`] elements per `(o, k)`. `gy` rows
/// must hold zeros from `len` up to `tiled(len)`, and `x` must reach `max(off) + tiled(len)`.
pub(super) fn grad_weight<T: ConvFloat>(
    gy: &[T],
    ldg: usize,
    rows: usize,
    x: &[T],
    off: &[usize],
    gw: &mut [T],
    len: usize,
) {
    // every build's reach: it rounds `len` up to its lanes, which divide SPAN
    let (klen, span) = (off.len(), tiled(len));
    let reach = off.iter().max().map_or(0, |&m| m + span);
    assert!(
        x.len() >= reach
            && gw.len() >= rows * klen * LANES
            && (rows == 0 || gy.len() >= (rows - 1) * ldg + span),
        "conv: direct weight-gradient bounds"
    );
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    match level() {
        // SAFETY: level 2 means the CPU supports AVX-512F, AVX2 and FMA.
        2 => return unsafe { weight_tiles_avx512(gy, ldg, rows, x, off, gw, len) },
        // SAFETY: level 1 means the CPU supports AVX2 and FMA.
        1 => return unsafe { weight_tiles_avx2(gy, ldg, rows, x, off, gw, len) },
        _ => {}
    }
    #[cfg(target_arch = "wasm32")]
    if level() == 1 {
        return weight_tiles_simd128(gy, ldg, rows, x, off, gw, len);
    }
    weight_tiles::<T, false, L2>(gy, ldg, rows, x, off, gw, len)
}

/// [`weight_tiles`] compiled for WebAssembly's simd128.
#[cfg(target_arch = "wasm32")]
#[target_feature(enable = "simd128")]
fn weight_tiles_simd128<T: ConvFloat>(
    gy: &[T],
    ldg: usize,
    rows: usize,
    x: &[T],
    off: &[usize],
    gw: &mut [T],
    len: usize,
) {
    weight_tiles::<T, false, L2>(gy, ldg, rows, x, off, gw, len)
}

/// The loops of [`grad_weight`] with `LL` lanes (at most [`LANES`]), inlined into each build.
#[inline(always)]
fn weight_tiles<T: ConvFloat, const FUSED: bool, const LL: usize>(
    gy: &[T],
    ldg: usize,
    rows: usize,
    x: &[T],
    off: &[usize],
    gw: &mut [T],
    len: usize,
) {
    let (klen, span) = (off.len(), len.div_ceil(LL) * LL);
    for o0 in (0..rows).step_by(R) {
        let nr = R.min(rows - o0);
        for k0 in (0..klen).step_by(T3) {
            let nk = T3.min(klen - k0);
            // short tiles repeat their last row / element; only the real ones are stored
            let ks: [usize; T3] = std::array::from_fn(|j| off[k0 + j.min(nk - 1)]);
            let os: [usize; R] = std::array::from_fn(|r| (o0 + r.min(nr - 1)) * ldg);
            let mut acc = [[[T::zero(); LL]; T3]; R];
            for p in (0..span).step_by(LL) {
                // SAFETY: k + p + LL <= max(off) + tiled(len) <= x.len(), asserted by the
                // caller
                let xs: [[T; LL]; T3] = ks.map(|k| unsafe { load(x, k + p) });
                for (a, &orow) in acc.iter_mut().zip(&os) {
                    // SAFETY: orow + p + LL <= (rows - 1) * ldg + tiled(len) <= gy.len(),
                    // asserted by the caller
                    let g: [T; LL] = unsafe { load(gy, orow + p) };
                    for (a, xv) in a.iter_mut().zip(&xs) {
                        for l in 0..LL {
                            a[l] = madd::<T, FUSED>(g[l], xv[l], a[l]);
                        }
                    }
                }
            }
            for (r, a) in acc.iter().enumerate().take(nr) {
                for (j, a) in a.iter().enumerate().take(nk) {
                    let at = ((o0 + r) * klen + k0 + j) * LANES;
                    for (g, &v) in gw[at..at + LL].iter_mut().zip(a) {
                        *g += v;
                    }
                }
            }
        }
    }
}

/// Where each patch element of one group reads, relative to a wide position, in an input
/// buffer holding `cg` channels of `stride` elements: `c * stride + ki * Wp + kj` at stride 1,
/// in phase `(ki % sh, kj % sw)` shifted by `(ki / sh, kj / sw)` otherwise (see [`Wide`]).
pub(super) fn offsets(g: &ConvGeom, wd: &Wide, stride: usize) -> Vec<usize> {
    let mut off = Vec::with_capacity(g.klen());
    for c in 0..g.cg() {
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                let phase = (ki % wd.sh) * wd.sw + kj % wd.sw;
                off.push(c * stride + phase * wd.plane() + (ki / wd.sh) * wd.wp() + kj / wd.sw);
            }
        }
    }
    off
}

/// One group's weights and read offsets for the direct kernels, prepared once per call.
pub(super) struct GroupPlan<T> {
    /// `w[o][k]` for the forward pass.
    fwd: Packed<T>,
    /// `w[o][c, t]` as `[c][o, t]`, for the input gradient (when asked).
    bwd: Option<Packed<T>>,
}

/// Everything the direct kernels need for one conv call.
pub(super) struct Plan<T> {
    g: ConvGeom,
    wd: Wide,
    groups: Vec<GroupPlan<T>>,
    /// Forward offsets into the padded input copy.
    off_x: Vec<usize>,
    /// Input-gradient offsets into the shifted output-gradient copy.
    off_g: Vec<usize>,
}

impl<T: ConvFloat> Plan<T> {
    /// The plan of `g` with weights `w` (`[O, C/groups, kh, kw]`); `None` when the direct
    /// kernels do not apply (not stride 1 and undilated, or too wasteful a wide layout).
    pub(super) fn new(g: &ConvGeom, w: &[T], need_grad_input: bool) -> Option<Self> {
        // Past 64 input channels of 3x3 (a patch of 576), im2col + GEMM is faster: measured on
        // ResNet-18's layers at batch 1, 119 against 101 GFLOP/s at 128 channels and 105
        // against 59 at 512; at 64 channels the direct kernels still win (107 against 98).
        if g.klen() > 576 {
            return None;
        }
        let wd = Wide::of(g)?;
        if g.c == 0 || (need_grad_input && !wd.unit_stride()) {
            return None;
        }
        // Strided, the phases pay on a few input channels (ResNet's 7x7/2 stem on RGB: 68
        // against 118 GFLOP/s), not on many, whose phase planes crowd the cache (its 3x3/2
        // layer at 64 channels: 71 against ~105 with im2col + GEMM).
        if !wd.unit_stride() && g.cg() > 8 {
            return None;
        }
        let (og, klen, taps) = (g.og(), g.klen(), g.kh * g.kw);
        let groups = (0..g.groups)
            .map(|grp| {
                let wg = &w[grp * og * klen..(grp + 1) * og * klen];
                GroupPlan {
                    fwd: Packed::new(og, klen, |o, k| wg[o * klen + k]),
                    bwd: need_grad_input.then(|| {
                        Packed::new(g.cg(), og * taps, |c, k| {
                            wg[(k / taps) * klen + c * taps + k % taps]
                        })
                    }),
                }
            })
            .collect();
        let off_x = offsets(g, &wd, wd.chan());
        let (gl, m) = (Self::g_row(g, &wd), Self::margin(g, &wd));
        let mut off_g = Vec::with_capacity(og * taps);
        for o in 0..og {
            for ki in 0..g.kh {
                for kj in 0..g.kw {
                    off_g.push(o * gl + m - (ki * wd.wp() + kj));
                }
            }
        }
        Some(Plan {
            g: *g,
            wd,
            groups,
            off_x,
            off_g,
        })
    }

    /// Zeros before the output gradient in its shifted copy: the largest patch shift.
    fn margin(g: &ConvGeom, wd: &Wide) -> usize {
        (g.kh - 1) * wd.wp() + g.kw - 1
    }

    /// Row length of the shifted output-gradient copy: the margin, then a whole padded plane
    /// of input-gradient positions.
    fn g_row(g: &ConvGeom, wd: &Wide) -> usize {
        Self::margin(g, wd) + tiled(wd.plane())
    }

    /// Length of the padded input copy: the planes and the slack a last tile reads.
    fn xp_len(&self) -> usize {
        self.g.cg() * self.wd.chan() + SPAN
    }

    /// Scratch elements [`Self::forward`] needs.
    pub(super) fn forward_scratch(&self) -> usize {
        self.xp_len() + self.groups[0].fwd.rows() * tiled(self.wd.len)
    }

    /// Scratch elements [`Self::backward`] needs.
    pub(super) fn backward_scratch(&self) -> usize {
        let gxp = self.groups[0].bwd.as_ref().map_or(0, |p| p.rows()) * tiled(self.wd.plane());
        self.g.og() * Self::g_row(&self.g, &self.wd) + self.xp_len() + gxp
    }

    /// Copy one group's input planes (`[C/groups, H, W]`) into `xp`, zero-padded (and split
    /// into phases when strided).
    #[inline(always)]
    fn pad_input(&self, x: &[T], xp: &mut [T]) {
        let (g, wd) = (&self.g, &self.wd);
        let [ph, pw] = g.padding;
        if ph == 0 && pw == 0 && wd.unit_stride() {
            // unpadded: the planes are already laid out as the kernels read them
            let n = g.cg() * g.hw();
            xp[..n].copy_from_slice(&x[..n]);
            return xp[n..].fill(T::zero());
        }
        xp.fill(T::zero());
        if wd.unit_stride() {
            for c in 0..g.cg() {
                for iy in 0..g.h {
                    let d = c * wd.plane() + (iy + ph) * wd.wp() + pw;
                    let s = c * g.hw() + iy * g.w;
                    copy_row(&mut xp[d..d + g.w], &x[s..s + g.w]);
                }
            }
            return;
        }
        let (sh, sw) = (wd.sh, wd.sw);
        for c in 0..g.cg() {
            for iy in 0..g.h {
                let (r, src) = (iy + ph, &x[c * g.hw() + iy * g.w..][..g.w]);
                for b in 0..sw {
                    // input columns ix with (ix + pw) % sw == b, at phase column (ix + pw) / sw
                    let ix0 = (b + sw - pw % sw) % sw;
                    let row = c * wd.chan() + ((r % sh) * sw + b) * wd.plane() + (r / sh) * wd.wp();
                    for (j, &v) in src.iter().skip(ix0).step_by(sw).enumerate() {
                        xp[row + (ix0 + pw) / sw + j] = v;
                    }
                }
            }
        }
    }

    /// Forward of group `grp` of one sample: `x` its input planes (`[C/groups, H, W]`), `out`
    /// its output planes (`[O/groups, OH * OW]`), `bias` its biases, then a fused ReLU when
    /// `relu`.
    pub(super) fn forward(
        &self,
        grp: usize,
        x: &[T],
        bias: Option<&[T]>,
        out: &mut [T],
        scratch: &mut [T],
        relu: bool,
    ) {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        match level() {
            // SAFETY: level 2 means the CPU supports AVX-512F, AVX2 and FMA.
            2 => return unsafe { self.forward_avx512(grp, x, bias, out, scratch, relu) },
            // SAFETY: level 1 means the CPU supports AVX2 and FMA.
            1 => return unsafe { self.forward_avx2(grp, x, bias, out, scratch, relu) },
            _ => {}
        }
        #[cfg(target_arch = "wasm32")]
        if level() == 1 {
            return self.forward_simd128(grp, x, bias, out, scratch, relu);
        }
        self.forward_body(grp, x, bias, out, scratch, relu)
    }

    /// Backward of group `grp` of one sample: given its output gradient `gy`
    /// (`[O/groups, OH * OW]`; masked by the output `relu_y` of a fused ReLU, when given),
    /// write the input gradient (`[C/groups, H, W]`, every element) and add to the weight
    /// gradient (`[O/groups, klen]` in lane partials, see [`LANES`]) and the bias gradient
    /// (`[O/groups]`), each when asked in `out`.
    pub(super) fn backward(
        &self,
        grp: usize,
        (x, gy, relu_y): (&[T], &[T], Option<&[T]>),
        out: Grads<'_, T>,
        scratch: &mut [T],
    ) {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        match level() {
            // SAFETY: level 2 means the CPU supports AVX-512F, AVX2 and FMA.
            2 => return unsafe { self.backward_avx512(grp, (x, gy, relu_y), out, scratch) },
            // SAFETY: level 1 means the CPU supports AVX2 and FMA.
            1 => return unsafe { self.backward_avx2(grp, (x, gy, relu_y), out, scratch) },
            _ => {}
        }
        #[cfg(target_arch = "wasm32")]
        if level() == 1 {
            return self.backward_simd128(grp, (x, gy, relu_y), out, scratch);
        }
        self.backward_body(grp, (x, gy, relu_y), out, scratch)
    }

    #[cfg(target_arch = "wasm32")]
    #[target_feature(enable = "simd128")]
    fn forward_simd128(
        &self,
        grp: usize,
        x: &[T],
        bias: Option<&[T]>,
        out: &mut [T],
        scratch: &mut [T],
        relu: bool,
    ) {
        self.forward_body(grp, x, bias, out, scratch, relu)
    }

    #[cfg(target_arch = "wasm32")]
    #[target_feature(enable = "simd128")]
    fn backward_simd128(
        &self,
        grp: usize,
        inputs: (&[T], &[T], Option<&[T]>),
        out: Grads<'_, T>,
        scratch: &mut [T],
    ) {
        self.backward_body(grp, inputs, out, scratch)
    }

    // The copies, masks and sums around the kernels, compiled for each instruction set like
    // the kernels (in the baseline build they were a third of a small-CNN conv's time).

    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn forward_avx512(
        &self,
        grp: usize,
        x: &[T],
        bias: Option<&[T]>,
        out: &mut [T],
        scratch: &mut [T],
        relu: bool,
    ) {
        self.forward_body(grp, x, bias, out, scratch, relu)
    }

    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn forward_avx2(
        &self,
        grp: usize,
        x: &[T],
        bias: Option<&[T]>,
        out: &mut [T],
        scratch: &mut [T],
        relu: bool,
    ) {
        self.forward_body(grp, x, bias, out, scratch, relu)
    }

    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn backward_avx512(
        &self,
        grp: usize,
        inputs: (&[T], &[T], Option<&[T]>),
        out: Grads<'_, T>,
        scratch: &mut [T],
    ) {
        self.backward_body(grp, inputs, out, scratch)
    }

    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn backward_avx2(
        &self,
        grp: usize,
        inputs: (&[T], &[T], Option<&[T]>),
        out: Grads<'_, T>,
        scratch: &mut [T],
    ) {
        self.backward_body(grp, inputs, out, scratch)
    }

    #[inline(always)]
    fn forward_body(
        &self,
        grp: usize,
        x: &[T],
        bias: Option<&[T]>,
        out: &mut [T],
        scratch: &mut [T],
        relu: bool,
    ) {
        let (g, wd) = (&self.g, &self.wd);
        let (xp, tmp) = scratch.split_at_mut(self.xp_len());
        self.pad_input(x, xp);
        let ldo = tiled(wd.len);
        shifted_products(xp, &self.off_x, &self.groups[grp].fwd, tmp, ldo, wd.len);
        for (o, d) in out.chunks_exact_mut(g.p()).enumerate() {
            let b = bias.map_or(T::zero(), |b| b[o]);
            wd.unwiden(g, &tmp[o * ldo..o * ldo + wd.len], d, b, relu);
        }
    }

    #[inline(always)]
    fn backward_body(
        &self,
        grp: usize,
        (x, gy, relu_y): (&[T], &[T], Option<&[T]>),
        Grads { gx, gw, mut gb }: Grads<'_, T>,
        scratch: &mut [T],
    ) {
        let (g, wd) = (&self.g, &self.wd);
        let (gl, m) = (Self::g_row(g, wd), Self::margin(g, wd));
        let (gs, rest) = scratch.split_at_mut(g.og() * gl);
        let (xp, gxp) = rest.split_at_mut(self.xp_len());
        // the output gradient in wide positions, after `m` zeros, zeros in the gaps and after;
        // the bias gradient is its row sums
        for (o, (src, dst)) in gy
            .chunks_exact(g.p())
            .zip(gs.chunks_exact_mut(gl))
            .enumerate()
        {
            let y = relu_y.map(|y| &y[o * g.p()..(o + 1) * g.p()]);
            wd.widen(g, src, y, dst, m);
            if let Some(gb) = gb.as_deref_mut() {
                gb[o] += lane_sum(&dst[m..m + wd.len]);
            }
        }
        if let Some(gw) = gw {
            self.pad_input(x, xp);
            grad_weight(&gs[m..], gl, g.og(), xp, &self.off_x, gw, wd.len);
        }
        if let (Some(gx), Some(wt)) = (gx, &self.groups[grp].bwd) {
            // gxp[c][q] = sum_{o, t} w[o][c, t] * gy_wide[o][q - shift(t)], q over the padded plane
            let ldx = tiled(wd.plane());
            shifted_products(gs, &self.off_g, wt, gxp, ldx, wd.plane());
            let [ph, pw] = g.padding;
            for c in 0..g.cg() {
                for iy in 0..g.h {
                    let s = c * ldx + (iy + ph) * wd.wp() + pw;
                    let d = c * g.hw() + iy * g.w;
                    copy_row(&mut gx[d..d + g.w], &gxp[s..s + g.w]);
                }
            }
        }
    }
}

/// The gradients [`Plan::backward`] writes, each when asked: input (written), weight (lane
/// partials, added to) and bias (added to).
pub(super) struct Grads<'a, T> {
    pub gx: Option<&'a mut [T]>,
    pub gw: Option<&'a mut [T]>,
    pub gb: Option<&'a mut [T]>,
}

/// The sum of `v`, in 16 partial sums (vectorised in the AVX builds).
#[inline(always)]
fn lane_sum<T: ConvFloat>(v: &[T]) -> T {
    let mut acc = [T::zero(); 16];
    let mut it = v.chunks_exact(16);
    for c in &mut it {
        for l in 0..16 {
            acc[l] += c[l];
        }
    }
    let tail = it.remainder().iter().fold(T::zero(), |s, &v| s + v);
    acc.iter().fold(tail, |s, &v| s + v)
}

#[cfg(test)]
#[path = "conv_direct_tests.rs"]
mod tests;
