//! Direct convolution with output channels in the vector lanes (f32 forward, AVX-512): the
//! kernel onnxruntime runs ResNet's 3x3 layers on, for the layers the other paths serve
//! worst: strided ones (whose input the position-vectorised kernels must split into phases or
//! unroll), small maps (7x7, 14x14: few positions to fill a vector with) and the 7x7 stem.
//!
//! A register tile holds `NB` vectors of 16 output channels at `Q` output positions of one
//! row (`NB * Q = 28` of the 32 registers). For each input channel `c` and tap `(ki, kj)`, it
//! loads the `NB` weight vectors `w[o0..o0 + 16 NB][c][ki][kj]` (packed contiguous, once per
//! layer: [`Packed`]) and adds them times each position's input value, broadcast from the
//! zero-padded input. A position's input address is a constant offset from its row's, so a
//! stride costs nothing and no lane is wasted on positions that are not outputs. Bias and
//! ReLU apply to whole vectors; the finished tile is scattered into the `[O, OH, OW]` output
//! (one vector holds one position of 16 channel planes).
//!
//! Measured on ResNet-18's layers at batch 1, one thread (Xeon, AVX-512): see
//! [`MIN_POSITIONS`].

use super::conv::ConvGeom;
use super::packed_cache;
use super::threads;
use std::sync::Arc;

/// Lanes of an AVX-512 vector: output channels per weight vector.
const L: usize = 16;
/// Lanes of an AVX2 vector (the tiles in [`super::conv_blocked_avx2`]).
pub(super) const AVX2_LANES: usize = 8;

/// The vector instructions a kernel runs on: AVX-512 (16 lanes, 32 registers) or AVX2 + FMA
/// (8 lanes, 16 registers: [`super::conv_blocked_avx2`]).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) enum Isa {
    Avx512,
    Avx2,
}

impl Isa {
    /// Output channels per weight vector.
    fn lanes(self) -> usize {
        match self {
            Isa::Avx512 => L,
            Isa::Avx2 => AVX2_LANES,
        }
    }
}

/// The widest kernel this CPU runs, if any.
#[cfg(target_arch = "x86_64")]
fn isa() -> Option<Isa> {
    match super::simd::level() {
        2 => Some(Isa::Avx512),
        1 => Some(Isa::Avx2),
        _ => None,
    }
}
#[cfg(not(target_arch = "x86_64"))]
fn isa() -> Option<Isa> {
    None
}

/// Fewest output positions (over the batch) a layer needs to run here: each weight vector
/// must serve enough positions. Inside ResNet-18 at batch 1 (one thread), with the packing
/// served unchecked (a vouched, unwritten buffer: see [`packed_cache`]): the 7x7 stem (12,544
/// positions), the 3x3/2 64-128 layer (784) and the 196-position 256-channel layers run here
/// faster than on the other paths (the 3x3 ones 1.19-1.22 ms against 1.43-1.46 with im2col +
/// `gemm`). The 49-position 512-channel ones lost while each output row streamed the block's
/// 1.2 MB of packed weights again; since tiles share weight chunks ([`GROUP`]) they win too
/// (1.65-1.82 ms against 2.0 with im2col + `gemm`; the 1x1/2 downsample 0.14 against 0.18).
const MIN_POSITIONS: usize = 49;

/// Tiles that share each chunk of weights (see `avx::tiles`): their saved accumulators,
/// 8 x 28 vectors (14 KB), stay in L1 beside the chunk (8 KB) and the next one.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) const GROUP: usize = 8;

/// The register tile for `g`: (`NB` channel vectors, `Q` columns).
fn shape(g: &ConvGeom, isa: Isa) -> (usize, usize) {
    match isa {
        Isa::Avx512 if g.ow >= 14 => (2, 14),
        Isa::Avx512 => (4, 7),
        Isa::Avx2 => (2, 6),
    }
}

/// Whether `g` runs here: f32 (the caller checks), AVX-512 or AVX2, ungrouped, undilated, stride 1 or
/// 2, output at least 7 wide and 32 channels, a patch long enough for the products to
/// dominate the output scatter, and [`MIN_POSITIONS`].
pub(super) fn suits(g: &ConvGeom) -> bool {
    isa().is_some_and(|isa| {
        fits(g)
            // (AVX2's tiles lose on 1x1 layers: ResNet's strided downsamples 0.25 -> 0.5 ms)
            && (isa == Isa::Avx512 || g.kh * g.kw > 1)
    })
}

/// The geometry a kernel handles (see [`suits`]).
fn fits(g: &ConvGeom) -> bool {
    g.groups == 1
        && g.dilation == [1, 1]
        && (g.stride == [1, 1] || g.stride == [2, 2])
        && g.ow >= 7
        && g.oh >= 1
        && g.o >= 32
        && g.klen() >= 64
        && !g.pointwise()
        && g.n * g.p() >= MIN_POSITIONS
        // offsets of the scatter are i32
        && (g.o * g.p()) < (i32::MAX as usize)
}

/// Weights packed for the kernel: for each block of `width` (`NB` vectors) output channels
/// (the last padded with zero channels), `[c][ki][kj][width]`, 64-byte aligned.
pub(super) struct Packed {
    data: Vec<f32>,
    /// Where the aligned data starts in `data`.
    start: usize,
    /// Elements per block: `klen * nb * 16`.
    block: usize,
}

impl Packed {
    fn new(w: &[f32], o: usize, klen: usize, width: usize) -> Self {
        let blocks = o.div_ceil(width);
        let block = klen * width;
        let mut data = vec![0.0f32; blocks * block + L];
        let start = data.as_ptr().align_offset(64).min(L);
        for (oi, row) in w.chunks_exact(klen).enumerate().take(o) {
            let (b, lane) = (oi / width, oi % width);
            let dst = &mut data[start + b * block + lane..];
            for (k, &v) in row.iter().enumerate() {
                dst[k * width] = v;
            }
        }
        Packed { data, start, block }
    }

    fn block(&self, b: usize) -> &[f32] {
        &self.data[self.start + b * self.block..][..self.block]
    }
}

/// `out[n, o, y, x]` (dense `[N, O, OH, OW]`) of the convolution of `x` (`[N, C, H, W]`) with
/// `w` (`[O, C, KH, KW]`), plus `bias` and `residual` (the output's shape), through a ReLU
/// when `relu`. [`suits`] must hold.
pub(super) fn forward(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    g: &ConvGeom,
    relu: (bool, Option<&[f32]>),
    out: &mut [f32],
) {
    let isa = isa().expect("conv2d blocked: suits() found no kernel");
    forward_on(isa, x, w, bias, g, relu, out)
}

/// [`forward`] on the kernel for `isa`, which the CPU must have (tests run both).
fn forward_on(
    isa: Isa,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    g: &ConvGeom,
    (relu, residual): (bool, Option<&[f32]>),
    out: &mut [f32],
) {
    let (klen, p, chw) = (g.klen(), g.p(), g.c * g.hw());
    assert!(
        fits(g)
            && x.len() == g.n * chw
            && w.len() == g.o * klen
            && out.len() == g.n * g.o * p
            && bias.is_none_or(|b| b.len() == g.o)
            && residual.is_none_or(|r| r.len() == out.len()),
        "conv2d blocked: buffer sizes"
    );
    let (nb, _) = shape(g, isa);
    let width = nb * isa.lanes();
    // (kinds 2.. of the cache: one per packing width)
    let kind = 2 + width as u64;
    let packed: Arc<packed_cache::Entry<f32, Packed>> = packed_cache::get(w, kind, || {
        let p = Packed::new(w, g.o, klen, width);
        let bytes = p.data.len() * 4;
        (p, bytes)
    });
    let packed = &packed.packed;
    let (hp, wp) = (g.h + 2 * g.padding[0], g.w + 2 * g.padding[1]);
    let blocks = g.o.div_ceil(width);
    // strided 1x1 layers (ResNet's downsamples) run at stride 1 on the input's kept positions,
    // gathered first: a tile then reads short dense rows that are in cache, not every other
    // float of rows that are not
    let gather = g.kh == 1 && g.kw == 1 && g.padding == [0, 0] && g.stride != [1, 1];
    let gk = match gather {
        true => ConvGeom {
            h: g.oh,
            w: g.ow,
            stride: [1, 1],
            ..*g
        },
        false => *g,
    };
    // other unpadded layers read the input where it is
    let mut xp = match (gather, g.padding == [0, 0]) {
        (true, _) => vec![0.0f32; g.c * g.p()],
        (false, true) => Vec::new(),
        (false, false) => vec![0.0f32; g.c * hp * wp],
    };
    let parts = threads::get_num_threads().min(blocks).max(1);
    let per = blocks.div_ceil(parts);
    for (s, (xs, os)) in x
        .chunks_exact(chw)
        .zip(out.chunks_exact_mut(g.o * p))
        .enumerate()
    {
        // the zero-padded input (its border stays zero from the allocation)
        let xp: &[f32] = if xp.is_empty() {
            xs
        } else if gather {
            let [sy, sx] = g.stride;
            let rows = xp.chunks_exact_mut(g.ow);
            for (i, d) in rows.enumerate() {
                let (ci, y) = (i / g.oh, i % g.oh);
                let src = &xs[(ci * g.h + y * sy) * g.w..];
                d.iter_mut()
                    .zip(src.iter().step_by(sx))
                    .for_each(|(d, &v)| *d = v);
            }
            &xp
        } else {
            for (ci, plane) in xs.chunks_exact(g.hw()).enumerate() {
                for (y, row) in plane.chunks_exact(g.w).enumerate() {
                    let at = (ci * hp + y + g.padding[0]) * wp + g.padding[1];
                    xp[at..at + g.w].copy_from_slice(row);
                }
            }
            &xp
        };
        // each thread takes a run of channel blocks: disjoint output planes
        threads::for_each_chunk(os, per * width * p, |part, oc| {
            for (k, ob) in oc.chunks_mut(width * p).enumerate() {
                let b0 = (part * per + k) * width;
                let bias = bias.map(|b| &b[b0..(b0 + width).min(g.o)]);
                let res = residual.map(|r| &r[(s * g.o + b0) * p..][..ob.len()]);
                let wb = packed.block(part * per + k);
                run_block(isa, xp, wb, bias, &gk, (relu, res), ob);
            }
        });
    }
}

/// One block of output channels (`out`: their planes, the last block's maybe fewer than
/// `nb * 16`) of one sample, from the padded input `xp`; `relu` and the residual of `out`.
fn run_block(
    isa: Isa,
    xp: &[f32],
    wb: &[f32],
    bias: Option<&[f32]>,
    g: &ConvGeom,
    relu: (bool, Option<&[f32]>),
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    {
        use super::conv_blocked_avx2 as avx2;
        let s = g.stride[0];
        // SAFETY: `isa` is a kernel this CPU has (`isa()` probed it, or a test that did), all
        // `tiles` requires of the CPU; the buffers' sizes are checked inside.
        unsafe {
            match (isa, shape(g, isa), s) {
                (Isa::Avx512, (2, 14), 1) => avx::tiles::<2, 14, 1>(xp, wb, bias, g, relu, out),
                (Isa::Avx512, (2, 14), _) => avx::tiles::<2, 14, 2>(xp, wb, bias, g, relu, out),
                (Isa::Avx512, _, 1) => avx::tiles::<4, 7, 1>(xp, wb, bias, g, relu, out),
                (Isa::Avx512, _, _) => avx::tiles::<4, 7, 2>(xp, wb, bias, g, relu, out),
                (Isa::Avx2, _, 1) => avx2::tiles::<2, 6, 1>(xp, wb, bias, g, relu, out),
                (Isa::Avx2, _, _) => avx2::tiles::<2, 6, 2>(xp, wb, bias, g, relu, out),
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, xp, wb, bias, g, relu, out);
        unreachable!("conv2d blocked: suits() is false off x86-64");
    }
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use super::{ConvGeom, GROUP, L};
    use std::arch::x86_64::*;

    /// Every tile of one channel block: `NB` vectors of channels at `R x Q` positions,
    /// stride `S`. Tiles past the right or bottom edge are moved back to end on it (they
    /// compute some positions twice, writing equal values).
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tiles<const NB: usize, const Q: usize, const S: usize>(
        xp: &[f32],
        wb: &[f32],
        bias: Option<&[f32]>,
        g: &ConvGeom,
        (relu, residual): (bool, Option<&[f32]>),
        out: &mut [f32],
    ) {
        let (hp, wp) = (g.h + 2 * g.padding[0], g.w + 2 * g.padding[1]);
        let (p, klen) = (g.p(), g.klen());
        let chans = out.len() / p;
        // what the kernel reads and writes: the last tile's farthest input element, the whole
        // block of weights, the last channel's last position
        assert!(
            g.stride == [S, S]
                && g.ow >= Q
                && xp.len() >= g.c * hp * wp
                && (g.oh - 1) * S + g.kh <= hp
                && (g.ow - 1) * S + g.kw <= wp
                && wb.len() >= klen * NB * L
                && (wb.as_ptr() as usize).is_multiple_of(64)
                && chans >= 1
                && chans <= NB * L
                && out.len() == chans * p
                && bias.is_none_or(|b| b.len() == chans)
                && residual.is_none_or(|r| r.len() == out.len()),
            "conv2d blocked: tile bounds"
        );
        let masks: [u16; NB] = std::array::from_fn(|b| {
            let n = chans.saturating_sub(b * L).min(L);
            ((1u32 << n) - 1) as u16
        });
        let bias: [__m512; NB] = std::array::from_fn(|b| match bias {
            // SAFETY: the mask selects the lanes `b * 16 + i < chans`, inside `bias`.
            Some(bv) => unsafe { _mm512_maskz_loadu_ps(masks[b], bv.as_ptr().add(b * L)) },
            None => _mm512_setzero_ps(),
        });
        let lanes = _mm512_mullo_epi32(
            _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
            _mm512_set1_epi32(p as i32),
        );
        let zero = _mm512_setzero_ps();
        let (x0, w0, o0) = (xp.as_ptr(), wb.as_ptr(), out.as_mut_ptr());
        // with a residual, the ReLU waits until it is added (after the tile's transpose)
        let (r0, relu_now) = (residual.map(|r| r.as_ptr()), relu && residual.is_none());
        // floats of one input row a tile reads
        let span = (Q - 1) * S + g.kw;
        // Tiles go in groups of `GROUP`, channels in chunks of ~8 KB of weights: each chunk is
        // read from L2 or L3 once and serves the group's tiles from L1, their accumulators
        // kept in `saved` between chunks. Read whole for every tile, a 256-channel block's
        // 295 KB of weights came from L2 for each tile: the 14 x 14 layers took 1.25 ms,
        // 0.98 with the weights held in L1 (an experiment).
        let per_c = g.kh * g.kw;
        // (~8 KB: 64 steps of two channel vectors, 32 of four)
        let chunk = (128 / NB).div_ceil(per_c).min(g.c);
        let per_row = g.ow.div_ceil(Q);
        let count = g.oh * per_row;
        // tile `i`: its output row and first column
        let tile = |i: usize| (i / per_row, ((i % per_row) * Q).min(g.ow - Q));
        let mut saved = [[[zero; Q]; NB]; GROUP];
        // floats from a weight to its place in the next chunk
        let wstep = chunk * per_c * NB * L;
        for t0 in (0..count).step_by(GROUP) {
            let group = GROUP.min(count - t0);
            for c0 in (0..g.c).step_by(chunk) {
                let c1 = (c0 + chunk).min(g.c);
                for (t, slot) in saved.iter_mut().enumerate().take(group) {
                    let (oy, ox) = tile(t0 + t);
                    // the next tile's rows of this chunk are fetched while this one computes
                    // (each of its short rows is a stream of its own, too many for the
                    // hardware prefetchers; from L3 they starved the strided layers)
                    let next = (t + 1 < group).then(|| {
                        let (ny, nx) = tile(t0 + t + 1);
                        ny * S * wp + nx * S
                    });
                    let mut acc: [[__m512; Q]; NB] = match c0 {
                        0 => std::array::from_fn(|b| [bias[b]; Q]),
                        _ => *slot,
                    };
                    // SAFETY: channel `c0 < C`'s weights start `c0 * KH * KW` groups of
                    // `NB` vectors into the block (asserted length).
                    let mut wk = unsafe { w0.add(c0 * per_c * NB * L) };
                    for c in c0..c1 {
                        for ki in 0..g.kh {
                            if let Some(n) = next {
                                let at = x0.wrapping_add((c * hp + ki) * wp + n) as *const i8;
                                // (a prefetch is a hint: it never faults or writes)
                                _mm_prefetch::<_MM_HINT_T0>(at);
                                _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(64));
                                _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(span * 4 - 4));
                            }
                            // SAFETY: row `oy * S + ki <= (OH - 1) * S + KH - 1 < Hp` of
                            // channel `c < C`: inside `xp` (asserted).
                            let xr = unsafe { x0.add((c * hp + oy * S + ki) * wp + ox * S) };
                            for kj in 0..g.kw {
                                // SAFETY: `wk` walks the block's `klen` groups of `NB`
                                // aligned vectors (asserted length and alignment).
                                let wv: [__m512; NB] = std::array::from_fn(|b| unsafe {
                                    _mm512_load_ps(wk.add(b * L))
                                });
                                if t == 0 {
                                    // the group's first tile asks for the next chunk's
                                    // weights (from L3 on the first group: a block's 295 KB
                                    // cross 72 pages, where the hardware prefetch restarts)
                                    for b in 0..NB {
                                        let at = wk.wrapping_add(wstep + b * L) as *const i8;
                                        _mm_prefetch::<_MM_HINT_T0>(at);
                                    }
                                }
                                wk = unsafe { wk.add(NB * L) };
                                for q in 0..Q {
                                    // SAFETY: column `(ox + q) * S + kj <= (OW - 1) * S +
                                    // KW - 1 < Wp` of that row: inside `xp`.
                                    let v = unsafe { _mm512_set1_ps(*xr.add(q * S + kj)) };
                                    for (a, &w) in acc.iter_mut().zip(&wv) {
                                        a[q] = _mm512_fmadd_ps(w, v, a[q]);
                                    }
                                }
                            }
                        }
                    }
                    if c1 < g.c {
                        *slot = acc;
                        continue;
                    }
                    if Q > 8 {
                        // SAFETY: AVX-512F (this function's feature); `store_rows` writes what
                        // the scatter below would, inside `out`.
                        // The tile goes through a buffer first: read straight from `acc` by the
                        // transposes (loops LLVM does not unroll), the accumulators were kept in
                        // memory through the whole product loop (the stem took 3.3 ms, not 1.0).
                        let mut rows = [_mm512_setzero_ps(); 4 * L];
                        for (b, a) in acc.iter().enumerate() {
                            for (q, &v) in a.iter().enumerate() {
                                rows[b * L + q] = if relu_now { _mm512_max_ps(v, zero) } else { v };
                            }
                        }
                        let rows = std::hint::black_box(&rows);
                        let at = oy * g.ow + ox;
                        // the residual's tile is where the output's is (same shape)
                        let res = r0.map(|r| (unsafe { r.add(at) }, relu));
                        unsafe { store_rows::<NB, Q>(rows, &masks, o0.add(at), res, p) };
                        continue;
                    }
                    for (b, a) in acc.iter().enumerate() {
                        for (q, &v) in a.iter().enumerate() {
                            let v = if relu_now { _mm512_max_ps(v, zero) } else { v };
                            let at = b * L * p + oy * g.ow + ox + q;
                            // SAFETY: lane `i` (masked to channels `b * 16 + i < chans`) reads and
                            // writes position `oy * OW + ox + q < P` of that channel's plane:
                            // inside `out` and the residual (`chans * P` elements each).
                            unsafe {
                                let v = match r0 {
                                    Some(r) => {
                                        let rv = _mm512_mask_i32gather_ps::<4>(
                                            zero,
                                            masks[b],
                                            lanes,
                                            r.add(at),
                                        );
                                        let v = _mm512_add_ps(v, rv);
                                        if relu {
                                            _mm512_max_ps(v, zero)
                                        } else {
                                            v
                                        }
                                    }
                                    None => v,
                                };
                                _mm512_mask_i32scatter_ps::<4>(o0.add(at), masks[b], lanes, v);
                            }
                        }
                    }
                }
            }
        }
    }

    /// A finished tile (`rows[16 b + q]`: block `b`'s 16 channel lanes at position `q`, ReLU
    /// applied unless `res`) written as rows: each block of 16 channel lanes at `Q <= 16`
    /// positions is turned into 16 channel rows of `Q` positions (a 16x16 transpose, 64
    /// shuffles) and stored with plain masked stores, `p` apart from `at`. With `res` (its
    /// rows where the output's are, and whether a ReLU follows), each row adds its residual
    /// row first. Sixteen scatters a block took a
    /// quarter of the 7x7 stem's time (1.36 against 1.02 ms inside ResNet-18).
    ///
    /// # Safety
    /// AVX-512F; for every block `b` and lane `i` set in `masks[b]`, the `Q` floats from
    /// `at + (16 b + i) * p` lie inside the output (and from `res` in the residual).
    #[inline(always)]
    unsafe fn store_rows<const NB: usize, const Q: usize>(
        rows: &[__m512; 4 * L],
        masks: &[u16; NB],
        at: *mut f32,
        res: Option<(*const f32, bool)>,
        p: usize,
    ) {
        let qmask = ((1u32 << Q) - 1) as u16;
        for b in 0..NB {
            let r: [__m512; L] = std::array::from_fn(|q| rows[b * L + q]);
            // SAFETY: AVX-512F (caller).
            let cols = unsafe { transpose(r) };
            for (i, &c) in cols.iter().enumerate() {
                if masks[b] >> i & 1 == 1 {
                    let off = (b * L + i) * p;
                    // SAFETY: lane `i` of block `b` is a channel of `out` (its mask bit), and
                    // its `Q` positions from `at` (and `res`) are inside that channel's plane
                    // (caller).
                    let c = match res {
                        Some((r, relu)) => {
                            let v = unsafe { _mm512_maskz_loadu_ps(qmask, r.add(off)) };
                            let v = _mm512_add_ps(c, v);
                            if relu {
                                _mm512_max_ps(v, _mm512_setzero_ps())
                            } else {
                                v
                            }
                        }
                        None => c,
                    };
                    unsafe { _mm512_mask_storeu_ps(at.add(off), qmask, c) };
                }
            }
        }
    }

    /// `out[c]` lane `q` = `r[q]` lane `c`: pairs of 32-bit elements, then of 64-bit ones,
    /// then a 4x4 transpose of 128-bit lanes.
    ///
    /// # Safety
    /// AVX-512F.
    #[inline(always)]
    unsafe fn transpose(r: [__m512; L]) -> [__m512; L] {
        let pd = _mm512_castps_pd;
        let mut t = [_mm512_setzero_ps(); L];
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        // u[4g + j], 128-bit lane l: column 4l + j of rows 4g..4g + 4
        let mut u = [_mm512_setzero_ps(); L];
        for g in 0..4 {
            let [a, b, c, d] = [t[4 * g], t[4 * g + 1], t[4 * g + 2], t[4 * g + 3]];
            u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(a), pd(c)));
            u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(a), pd(c)));
            u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(b), pd(d)));
            u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(b), pd(d)));
        }
        let mut out = [_mm512_setzero_ps(); L];
        for j in 0..4 {
            let [a, b, c, d] = [u[j], u[4 + j], u[8 + j], u[12 + j]];
            let s0 = _mm512_shuffle_f32x4::<0b01_00_01_00>(a, b);
            let s1 = _mm512_shuffle_f32x4::<0b11_10_11_10>(a, b);
            let s2 = _mm512_shuffle_f32x4::<0b01_00_01_00>(c, d);
            let s3 = _mm512_shuffle_f32x4::<0b11_10_11_10>(c, d);
            out[j] = _mm512_shuffle_f32x4::<0b10_00_10_00>(s0, s2);
            out[4 + j] = _mm512_shuffle_f32x4::<0b11_01_11_01>(s0, s2);
            out[8 + j] = _mm512_shuffle_f32x4::<0b10_00_10_00>(s1, s3);
            out[12 + j] = _mm512_shuffle_f32x4::<0b11_01_11_01>(s1, s3);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::conv_testing::{naive, values};
    use super::*;

    /// `[n, c, h, w]` through `o` filters of `k x k`, `stride`, `pad`.
    fn geom(
        n: usize,
        c: usize,
        o: usize,
        hw: usize,
        k: usize,
        stride: usize,
        pad: usize,
    ) -> ConvGeom {
        let out = (hw + 2 * pad - k) / stride + 1;
        ConvGeom {
            n,
            c,
            h: hw,
            w: hw,
            o,
            kh: k,
            kw: k,
            stride: [stride, stride],
            padding: [pad, pad],
            dilation: [1, 1],
            groups: 1,
            oh: out,
            ow: out,
        }
    }

    /// The kernels this CPU runs (an AVX-512 CPU runs the AVX2 one too).
    fn isas() -> Vec<Isa> {
        match isa() {
            Some(Isa::Avx512) => vec![Isa::Avx512, Isa::Avx2],
            Some(Isa::Avx2) => vec![Isa::Avx2],
            None => vec![],
        }
    }

    /// Largest error relative to the sum of the terms' magnitudes, over every output, on
    /// every kernel; with a residual `res` (added before the ReLU) on every other output.
    fn check(g: &ConvGeom, x: &[f32], w: &[f32], b: Option<&[f32]>, relu: bool, res: bool) {
        // (1x1 layers run here on AVX-512 only; the AVX2 kernel is checked on them anyway)
        assert!(
            suits(g) || g.pointwise() || g.kh * g.kw == 1,
            "{g:?} should run here"
        );
        let zero = vec![0.0; g.o];
        let mut want = naive(x, w, b.unwrap_or(&zero), g, relu && !res);
        let r: Vec<f32> = (0..want.len()).map(|i| (i % 2) as f32 * 0.5).collect();
        if res {
            for (d, &r) in want.iter_mut().zip(&r) {
                *d += r as f64;
                if relu {
                    *d = d.max(0.0);
                }
            }
        }
        let xa: Vec<f32> = x.iter().map(|v| v.abs()).collect();
        let wa: Vec<f32> = w.iter().map(|v| v.abs()).collect();
        let scale = naive(&xa, &wa, &vec![1.0; g.o], g, false);
        for isa in isas() {
            let mut got = vec![f32::NAN; want.len()];
            let r = res.then_some(&r[..]);
            forward_on(isa, x, w, b, g, (relu, r), &mut got);
            for (i, ((&gv, &wv), &s)) in got.iter().zip(&want).zip(&scale).enumerate() {
                let err = (gv as f64 - wv).abs() / s;
                assert!(
                    err < 1e-5,
                    "{isa:?} {g:?} relu {relu} residual {res}: output {i}: {gv} vs {wv} (error {err:e})"
                );
            }
        }
    }

    #[test]
    fn matches_the_definition() {
        if isa().is_none() {
            eprintln!("no AVX2 here: the blocked conv never runs");
            return;
        }
        // stride 1 and 2 at both tile widths; ResNet's 7x7 stem; channels not a multiple of
        // a block (a partial last block, one with a partly empty vector); odd sizes (tiles
        // moved back from the edges); a batch; valid padding
        for (i, g) in [
            geom(1, 16, 64, 20, 3, 1, 1),
            geom(5, 8, 40, 9, 3, 1, 1),
            geom(2, 12, 96, 29, 3, 2, 1),
            geom(1, 3, 32, 40, 7, 2, 3),
            geom(7, 16, 33, 15, 3, 2, 1),
            geom(5, 20, 48, 11, 3, 1, 0),
            geom(8, 8, 130, 7, 3, 1, 1),
            geom(1, 8, 40, 20, 3, 1, 1),
            geom(2, 8, 36, 31, 3, 2, 1),
            geom(1, 64, 48, 28, 1, 2, 0),
            // a 1x1/2 layer on an odd-sized batch (its gathered input)
            geom(4, 64, 40, 15, 1, 2, 0),
            // 49 positions, many weight chunks, one group of tiles, a partial channel block
            geom(1, 64, 48, 7, 3, 1, 1),
        ]
        .iter()
        .enumerate()
        {
            let x = values(g.n * g.c * g.hw(), 1 + i as u64);
            let w = values(g.o * g.klen(), 100 + i as u64);
            let b = values(g.o, 200 + i as u64);
            check(g, &x, &w, Some(&b), false, false);
            check(g, &x, &w, Some(&b), true, false);
            check(g, &x, &w, None, false, false);
            check(g, &x, &w, Some(&b), true, true);
            check(g, &x, &w, None, false, true);
        }
    }

    #[test]
    fn kept_packing_follows_the_weights() {
        if isa().is_none() {
            return;
        }
        // the second call keeps the packing, the third uses it; weights changed in place (an
        // optimizer step) must be packed again
        let g = geom(2, 16, 64, 14, 3, 1, 1);
        let x = values(g.n * g.c * g.hw(), 7);
        let mut w = values(g.o * g.klen(), 8);
        let b = values(g.o, 9);
        for _ in 0..3 {
            check(&g, &x, &w, Some(&b), false, false);
        }
        w[5] += 0.5;
        w[2000] = -w[2000];
        for _ in 0..3 {
            check(&g, &x, &w, Some(&b), false, false);
        }
    }

    #[test]
    fn where_it_runs() {
        // ResNet-18's stem, strided layers, downsamples and 256- and 512-channel layers at
        // batch 1 (its 3x3 64- and 128-channel ones take Winograd first)
        for g in [
            geom(1, 3, 64, 224, 7, 2, 3),
            geom(1, 64, 128, 56, 3, 2, 1),
            geom(1, 128, 256, 28, 3, 2, 1),
            geom(1, 256, 256, 14, 3, 1, 1),
            geom(1, 512, 512, 7, 3, 1, 1),
            geom(1, 256, 512, 14, 3, 2, 1),
        ] {
            assert_eq!(suits(&g), isa().is_some(), "{g:?}");
        }
        // the 1x1/2 downsample: on AVX-512 only
        let down = geom(1, 256, 512, 14, 1, 2, 0);
        assert_eq!(suits(&down), isa() == Some(Isa::Avx512));
        // too few positions for the weights' traffic
        assert!(!suits(&ConvGeom {
            h: 3,
            oh: 3,
            ..geom(1, 512, 512, 7, 3, 1, 1)
        }));
        // pointwise, few channels, dilated, grouped, too narrow an output
        assert!(!suits(&geom(4, 64, 64, 14, 1, 1, 0)));
        assert!(!suits(&geom(4, 64, 16, 14, 3, 1, 1)));
        assert!(!suits(&ConvGeom {
            dilation: [2, 2],
            ..geom(4, 64, 64, 14, 3, 1, 2)
        }));
        assert!(!suits(&ConvGeom {
            groups: 2,
            ..geom(4, 64, 64, 14, 3, 1, 1)
        }));
        assert!(!suits(&geom(64, 64, 64, 5, 3, 1, 1)));
    }
}
