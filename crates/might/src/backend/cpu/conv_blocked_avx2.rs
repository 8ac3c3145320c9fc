//! The blocked convolution's register tiles on AVX2 + FMA: 8 output channels per vector and
//! 16 registers, for the x86-64 CPUs without AVX-512 (AMD before Zen 4, most laptops). The
//! scheme is [`super::conv_blocked`]'s: weight vectors packed once per layer, each input value
//! broadcast and multiplied into every channel vector of its position, tiles in groups that
//! share chunks of weights from L1.
//!
//! The tile is `NB` channel vectors at `Q` consecutive positions of the output plane (rows
//! wrap), `NB * Q` accumulators out of 16 registers. A finished tile goes out through an 8x8 transpose per 8 positions
//! (channel rows, stored with masked stores), adding the residual where there is one.

use super::conv::ConvGeom;
use super::conv_blocked::{AVX2_LANES as L, GROUP};
use std::arch::x86_64::*;

/// Every tile of one channel block: `NB` vectors of channels at `Q` consecutive positions of
/// the output plane, stride `S`. The last tile is moved back to end on the plane's end (it
/// computes some positions twice, writing equal values). `wb`: the block's packed weights (`[c][ki][kj][NB * 8]`).
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
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
            && Q <= 2 * L
            && p >= Q
            && xp.len() >= g.c * hp * wp
            && (g.oh - 1) * S + g.kh <= hp
            && (g.ow - 1) * S + g.kw <= wp
            && wb.len() >= klen * NB * L
            && (wb.as_ptr() as usize).is_multiple_of(32)
            && chans >= 1
            && chans <= NB * L
            && out.len() == chans * p
            && bias.is_none_or(|b| b.len() == chans)
            && residual.is_none_or(|r| r.len() == out.len()),
        "conv2d blocked (AVX2): tile bounds"
    );
    let bias: [__m256; NB] = std::array::from_fn(|b| {
        let mut v = [0.0f32; L];
        if let Some(bv) = bias {
            for (i, d) in v.iter_mut().enumerate() {
                *d = bv.get(b * L + i).copied().unwrap_or(0.0);
            }
        }
        // SAFETY: `v` holds 8 floats.
        unsafe { _mm256_loadu_ps(v.as_ptr()) }
    });
    let zero = _mm256_setzero_ps();
    let (x0, w0, o0) = (xp.as_ptr(), wb.as_ptr(), out.as_mut_ptr());
    // with a residual, the ReLU waits until it is added (in `store_rows`)
    let (r0, relu_now) = (residual.map(|r| r.as_ptr()), relu && residual.is_none());
    let per_c = g.kh * g.kw;
    // channels per chunk of ~8 KB of weights (128 steps of two channel vectors)
    let chunk = (2048 / (NB * L)).div_ceil(per_c).min(g.c);
    let count = p.div_ceil(Q);
    // Tile `i`: `Q` consecutive positions of the output plane (the last moved back to end on
    // it), which may span rows: each position's input offset from its channel's padded rows.
    // (Tiles that stayed in one row, 7 wide to fit ResNet's 7 x 7 to 112 x 112 maps, needed
    // 14 accumulators + 2 weights + 1 broadcast = 17 registers, and LLVM kept two in memory:
    // the 14 x 14 layers ran at half speed.)
    let first = |i: usize| (i * Q).min(p - Q);
    let offsets = |i: usize| -> [usize; Q] {
        let p0 = first(i);
        std::array::from_fn(|q| ((p0 + q) / g.ow) * S * wp + ((p0 + q) % g.ow) * S)
    };
    // each tap's offset from its position's first input element, in weight order
    let taps: Vec<usize> = (0..per_c).map(|k| k / g.kw * wp + k % g.kw).collect();
    let mut saved = [[[zero; Q]; NB]; GROUP];
    // floats from a weight to its place in the next chunk
    let wstep = chunk * per_c * NB * L;
    for t0 in (0..count).step_by(GROUP) {
        let group = GROUP.min(count - t0);
        for c0 in (0..g.c).step_by(chunk) {
            let c1 = (c0 + chunk).min(g.c);
            for (t, slot) in saved.iter_mut().enumerate().take(group) {
                let off = offsets(t0 + t);
                // the next tile's rows of this chunk are fetched while this one computes
                let next = (t + 1 < group).then(|| {
                    let n = offsets(t0 + t + 1);
                    (n[0], n[Q - 1] + g.kw - 1)
                });
                let mut acc: [[__m256; Q]; NB] = match c0 {
                    0 => std::array::from_fn(|b| [bias[b]; Q]),
                    _ => *slot,
                };
                // SAFETY: channel `c0 < C`'s weights start `c0 * KH * KW` groups of `NB`
                // vectors into the block (asserted length).
                let mut wk = unsafe { w0.add(c0 * per_c * NB * L) };
                for c in c0..c1 {
                    let plane = c * hp * wp;
                    if let Some((a, b)) = next {
                        for ki in 0..g.kh {
                            let row = plane + ki * wp;
                            // (a prefetch is a hint: it never faults or writes)
                            _mm_prefetch::<_MM_HINT_T0>(x0.wrapping_add(row + a) as *const i8);
                            _mm_prefetch::<_MM_HINT_T0>(x0.wrapping_add(row + b) as *const i8);
                        }
                    }
                    if t == 0 {
                        // the group's first tile asks for the next chunk's weights
                        for f in (0..per_c * NB * L).step_by(16) {
                            let at = wk.wrapping_add(wstep + f) as *const i8;
                            _mm_prefetch::<_MM_HINT_T0>(at);
                        }
                    }
                    // SAFETY: position `q`'s input rows start at row `y * S` of channel
                    // `c < C`, column `x * S`: inside `xp`.
                    let xr: [*const f32; Q] =
                        std::array::from_fn(|q| unsafe { x0.add(plane + off[q]) });
                    for &tap in &taps {
                        // SAFETY: `wk` walks the block's `klen` groups of `NB` aligned
                        // vectors (asserted length and alignment).
                        let wv: [__m256; NB] =
                            std::array::from_fn(|b| unsafe { _mm256_load_ps(wk.add(b * L)) });
                        wk = unsafe { wk.add(NB * L) };
                        for (q, &x) in xr.iter().enumerate() {
                            // SAFETY: tap `(ki, kj)` of position `(y, x)` reads row `y * S +
                            // ki <= (OH - 1) * S + KH - 1 < Hp`, column `x * S + kj <= (OW -
                            // 1) * S + KW - 1 < Wp`: inside `xp` (asserted).
                            let v = unsafe { _mm256_broadcast_ss(&*x.add(tap)) };
                            for (a, &w) in acc.iter_mut().zip(&wv) {
                                a[q] = _mm256_fmadd_ps(w, v, a[q]);
                            }
                        }
                    }
                }
                if c1 < g.c {
                    *slot = acc;
                    continue;
                }
                // The tile goes out through a buffer: read straight from `acc` by the
                // transposes, the accumulators would be kept in memory through the whole
                // product loop (as the AVX-512 kernel's were).
                let mut rows = [[zero; 2 * L]; NB];
                for (r, a) in rows.iter_mut().zip(&acc) {
                    for (d, &v) in r.iter_mut().zip(a) {
                        *d = if relu_now { _mm256_max_ps(v, zero) } else { v };
                    }
                }
                let rows = std::hint::black_box(&rows);
                let at = first(t0 + t);
                // the residual's tile is where the output's is (same shape)
                let res = r0.map(|r| (unsafe { r.add(at) }, relu));
                // SAFETY: AVX2 (this function's feature); channel `b * 8 + i < chans`'s `Q`
                // positions from `at` lie in its plane (`first` keeps `at + Q <= P`).
                unsafe { store_rows::<NB, Q>(rows, chans, o0.add(at), res, p) };
            }
        }
    }
}

/// A finished tile (`rows[b][q]`: block `b`'s 8 channel lanes at position `q`, ReLU applied
/// unless `res`) written as channel rows of `Q` positions, `p` apart from `at`: an 8x8
/// transpose per 8 positions, then masked stores. With `res` (its rows where the output's are,
/// and whether a ReLU follows), each row adds its residual row first.
///
/// # Safety
/// AVX2; for every channel `c < chans`, the `Q` floats from `at + c * p` lie inside the output
/// (and from `res` in the residual).
#[inline(always)]
unsafe fn store_rows<const NB: usize, const Q: usize>(
    rows: &[[__m256; 2 * L]; NB],
    chans: usize,
    at: *mut f32,
    res: Option<(*const f32, bool)>,
    p: usize,
) {
    for (h, q0) in (0..Q).step_by(L).enumerate() {
        let n = (Q - q0).min(L);
        // SAFETY: AVX2 (caller).
        let mask = unsafe {
            _mm256_cmpgt_epi32(
                _mm256_set1_epi32(n as i32),
                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
            )
        };
        for (b, r) in rows.iter().enumerate() {
            let r: [__m256; L] = std::array::from_fn(|q| r[h * L + q]);
            // SAFETY: AVX2 (caller).
            let cols = unsafe { transpose(r) };
            for (i, &c) in cols.iter().enumerate().take(chans.saturating_sub(b * L)) {
                let off = (b * L + i) * p + q0;
                // SAFETY: channel `b * 8 + i < chans`, its positions `q0..q0 + n` from `at`
                // (and `res`) are inside its plane (caller); the mask keeps the store to them.
                unsafe {
                    let c = match res {
                        Some((r, relu)) => {
                            let v = _mm256_add_ps(c, _mm256_maskload_ps(r.add(off), mask));
                            if relu {
                                _mm256_max_ps(v, _mm256_setzero_ps())
                            } else {
                                v
                            }
                        }
                        None => c,
                    };
                    _mm256_maskstore_ps(at.add(off), mask, c);
                }
            }
        }
    }
}

/// `out[c]` lane `q` = `r[q]` lane `c`: pairs of 32-bit elements, then of 64-bit ones, then
/// the 128-bit halves.
///
/// # Safety
/// AVX2.
#[inline(always)]
unsafe fn transpose(r: [__m256; L]) -> [__m256; L] {
    let t: [__m256; L] = std::array::from_fn(|i| {
        let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
        if i % 2 == 0 {
            _mm256_unpacklo_ps(a, b)
        } else {
            _mm256_unpackhi_ps(a, b)
        }
    });
    // u[4g + j]: columns j and 4 + j of rows 4g..4g + 4, in each 128-bit half
    let u: [__m256; L] = std::array::from_fn(|i| {
        let (g, j) = (i / 4, i % 4);
        let (a, b) = (t[4 * g + j / 2], t[4 * g + 2 + j / 2]);
        if j % 2 == 0 {
            _mm256_shuffle_ps::<0b01_00_01_00>(a, b)
        } else {
            _mm256_shuffle_ps::<0b11_10_11_10>(a, b)
        }
    });
    std::array::from_fn(|c| {
        let j = c % 4;
        if c < 4 {
            _mm256_permute2f128_ps::<0x20>(u[j], u[4 + j])
        } else {
            _mm256_permute2f128_ps::<0x31>(u[j], u[4 + j])
        }
    })
}
