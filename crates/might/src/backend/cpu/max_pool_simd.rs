//! The 2x2, stride-2 max pool of f32 planes with AVX-512 (sixteen outputs per step, the last
//! one masked) or AVX2 (eight per step, the last one overlapping).
//!
//! Why by hand: the pool after each conv of a small CNN was ~15 % of its training step in the
//! scalar loop (four compares, NaN tests and an index per output, ~12 cycles), and LLVM does
//! not vectorise the stride-2 window reads. Same rule as the scalar scan, applied in the same
//! order: row-major, a later candidate replaces the best only if larger, or NaN where the best
//! is not (first maximum wins, first NaN wins).

/// Pool one `[H, W]` plane `xp` into `vp` (`[OH, OW]`, `2 * OH <= H`, `2 * OW <= W`) and the
/// plane-relative indices `ip`. Returns false, touching nothing, when this CPU or shape has no
/// vector path (no AVX2; with AVX2 only, fewer than 4 outputs a row; indices beyond i32).
/// With AVX2 only, rows of 4 to 7 outputs (the second pool of an MNIST CNN: 11 or 14 wide)
/// take a four-lane version of the same steps. One call per plane, not per row: at 13 outputs
/// a row the call and its checks cost as much as the pooling.
pub fn plane_f32(xp: &[f32], w: usize, vp: &mut [f32], ip: &mut [i64], ow: usize) -> bool {
    let oh = vp.len().checked_div(ow).unwrap_or(0);
    let fits = ow >= 1
        && vp.len() == oh * ow
        && ip.len() == vp.len()
        && 2 * ow <= w
        && xp.len() >= 2 * oh * w
        && xp.len() < i32::MAX as usize;
    let level = level();
    if !fits || level == 0 || (level == 1 && ow < 4) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the CPU has AVX-512F (level 2) or AVX2 (level 1, with `ow >= 4`); every row
        // pair `2oy, 2oy + 1` lies in `xp` (`2 * oh * w <= xp.len()`) and holds `2 * ow <= w`
        // elements, each output row has `ow` slots in `vp` and `ip`, and indices stay below
        // `xp.len() < i32::MAX`: the contract of `plane512` and of `plane` (`row` for 8 or
        // more outputs, `row4` for 4 or more).
        unsafe {
            if level >= 2 {
                imp::plane512(xp, w, vp, ip, ow)
            } else {
                imp::plane(xp, w, vp, ip, ow)
            }
        };
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The values (no indices: inference) of a max pool whose windows are 3 wide at stride 2
/// across (ResNet's and most CNNs' stem pool, 3x3/2), any window down, one `[H, W]` plane `xp`
/// into `vp` (`[OH, OW]`). Returns false, touching nothing, without AVX2 or for another
/// shape. Each output row takes its window's input rows' elementwise maximum into a row
/// padded with `-inf`, then every 16 (AVX2: 8) outputs are the maximum of that row's even,
/// odd and next even elements (two-register permutes). NaN wins (any NaN in a window gives
/// NaN). The general separable path took 0.53 ms for ResNet-18's (64 planes of 112x112), this
/// ~0.1; on AVX2 (Zen 3) 0.8 against ~0.2.
pub fn plane_k3s2_f32(xp: &[f32], g: &crate::backend::geom::PoolGeom, vp: &mut [f32]) -> bool {
    let (h, w, oh, ow, pw) = (g.h, g.w, g.oh, g.ow, g.padding[1]);
    let fits = g.kernel[1] == 3
        && g.stride[1] == 2
        && pw <= 2
        && ow >= 1
        && oh >= 1
        && xp.len() == h * w
        && vp.len() == oh * ow
        // every window has a column inside the row
        && 2 * (ow - 1) < w + pw;
    let level = level();
    if !fits || level < 1 {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // the padded row: `pw` of -inf, the row's maxima, -inf up to where the last step of
        // 16 outputs reads (element `2 * (16 * steps) + 2` and the vector after it)
        let steps = ow.div_ceil(16);
        let len = (pw + w).max(32 * steps + 18) + 16;
        let mut row = vec![f32::NEG_INFINITY; len];
        for (oy, out) in vp.chunks_exact_mut(ow).enumerate() {
            let (y0, y1, _) = crate::backend::geom::PoolGeom::window(
                oy,
                g.kernel[0],
                g.stride[0],
                g.padding[0],
                h,
            );
            if y1 <= y0 {
                out.fill(f32::NEG_INFINITY);
                continue;
            }
            let rows = &xp[y0 * w..y1 * w];
            // the next output row's two new input rows, asked for while this one runs
            let ahead = (y1 + 2).min(h);
            super::prefetch::prefetch(&xp[y1.min(ahead) * w..ahead * w]);
            // SAFETY: AVX-512F is available at level 2, AVX2 at 1; `rows` holds whole rows of
            // `w`, `row[pw..pw + w]` and the reads up to `32 * steps + 34 <= len` lie inside
            // `row`, and `out` holds `ow` outputs: the contract of `k3s2_row` (and of
            // `k3s2_row8`, whose reads end at `16 * ow.div_ceil(8) + 18` at most).
            unsafe {
                match level {
                    2 => imp::k3s2_row(rows, w, &mut row, pw, out),
                    _ => imp::k3s2_row8(rows, w, &mut row, pw, out),
                }
            }
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Lowered by tests to run the AVX2 build on a machine that has AVX-512.
#[cfg(test)]
pub(super) static MAX_LEVEL: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(2);

/// The build to run: [`super::simd::level`], capped in tests.
fn level() -> u8 {
    let l = super::simd::level();
    #[cfg(test)]
    let l = l.min(MAX_LEVEL.load(std::sync::atomic::Ordering::Relaxed));
    l
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use std::arch::x86_64::*;

    /// `(even, odd)` elements of the 16 floats `lo ++ hi`, each in order.
    #[inline(always)]
    unsafe fn deinterleave(lo: __m256, hi: __m256) -> (__m256, __m256) {
        // SAFETY: register-only AVX2 operations; the caller runs with AVX2 enabled.
        unsafe {
            // [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6], then 64-bit lanes 0 2 1 3
            let even = _mm256_shuffle_ps::<0b10_00_10_00>(lo, hi);
            let odd = _mm256_shuffle_ps::<0b11_01_11_01>(lo, hi);
            let fix = |v: __m256| {
                _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(v)))
            };
            (fix(even), fix(odd))
        }
    }

    /// The scan's step: `(y, iy)` replaces `(x, ix)` where y > x, or y is NaN and x is not.
    #[inline(always)]
    unsafe fn pick(x: __m256, ix: __m256i, y: __m256, iy: __m256i) -> (__m256, __m256i) {
        // SAFETY: register-only AVX operations; the caller runs with AVX2 enabled.
        unsafe {
            let gt = _mm256_cmp_ps::<_CMP_GT_OQ>(y, x);
            let y_nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(y, y);
            let x_num = _mm256_cmp_ps::<_CMP_ORD_Q>(x, x);
            let take = _mm256_or_ps(gt, _mm256_and_ps(y_nan, x_num));
            let i = _mm256_blendv_ps(_mm256_castsi256_ps(ix), _mm256_castsi256_ps(iy), take);
            (_mm256_blendv_ps(x, y, take), _mm256_castps_si256(i))
        }
    }

    /// [`pick`] on four lanes.
    #[inline(always)]
    unsafe fn pick4(x: __m128, ix: __m128i, y: __m128, iy: __m128i) -> (__m128, __m128i) {
        // SAFETY: register-only SSE4.1 operations; the caller runs with AVX2 enabled.
        unsafe {
            let gt = _mm_cmpgt_ps(y, x);
            let take = _mm_or_ps(gt, _mm_and_ps(_mm_cmpunord_ps(y, y), _mm_cmpord_ps(x, x)));
            let i = _mm_blendv_ps(_mm_castsi128_ps(ix), _mm_castsi128_ps(iy), take);
            (_mm_blendv_ps(x, y, take), _mm_castps_si128(i))
        }
    }

    /// The scan's step on sixteen lanes: where `y > x`, or `y` is NaN and `x` is not, `(y, iy)`
    /// replaces `(x, ix)`.
    #[inline(always)]
    unsafe fn pick16(x: __m512, ix: __m512i, y: __m512, iy: __m512i) -> (__m512, __m512i) {
        // SAFETY: register-only AVX-512F operations; the caller runs with AVX-512F enabled.
        unsafe {
            let gt = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(y, x);
            let y_nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(y, y);
            let x_num = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(x, x);
            let take = gt | (y_nan & x_num);
            (
                _mm512_mask_blend_ps(take, x, y),
                _mm512_mask_blend_epi32(take, ix, iy),
            )
        }
    }

    /// The mask of the first `n` lanes (all 16 from `n = 16` on).
    #[inline(always)]
    fn tail_mask(n: usize) -> __mmask16 {
        ((1u32 << n.min(16)) - 1) as __mmask16
    }

    /// The larger of `a` and `b`, NaN where either is.
    #[inline(always)]
    unsafe fn max_nan(a: __m512, b: __m512) -> __m512 {
        // SAFETY: register-only AVX-512F operations; the caller runs with AVX-512F enabled.
        unsafe {
            // `max` gives `b` where either is NaN: right unless only `a` is
            _mm512_mask_blend_ps(
                _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, a),
                _mm512_max_ps(a, b),
                a,
            )
        }
    }

    /// One output row of [`super::plane_k3s2_f32`]: `rows` (the window's input rows, `w`
    /// each) reduced into `row[pw..pw + w]`, then `out[j] = max(row[2j], row[2j + 1],
    /// row[2j + 2])`.
    ///
    /// # Safety
    /// AVX-512F; `rows` is non-empty and a whole number of rows; `pw + w <= row.len()`;
    /// `32 * out.len().div_ceil(16) + 34 <= row.len()`; `row` is `-inf` outside
    /// `pw..pw + w`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn k3s2_row(
        rows: &[f32],
        w: usize,
        row: &mut [f32],
        pw: usize,
        out: &mut [f32],
    ) {
        let n = rows.len() / w;
        let dst = &mut row[pw..pw + w];
        for x in (0..w).step_by(16) {
            let m = tail_mask(w - x);
            // SAFETY: lanes masked to `x + i < w`: inside each input row and inside `dst`.
            unsafe {
                let mut v = _mm512_maskz_loadu_ps(m, rows.as_ptr().add(x));
                for r in 1..n {
                    v = max_nan(v, _mm512_maskz_loadu_ps(m, rows.as_ptr().add(r * w + x)));
                }
                _mm512_mask_storeu_ps(dst.as_mut_ptr().add(x), m, v);
            }
        }
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
        let ow = out.len();
        for j in (0..ow).step_by(16) {
            let m = tail_mask(ow - j);
            // SAFETY: reads `row[2j .. 2j + 34]` (`2j + 34 <= 32 * steps + 34 <= len`);
            // writes lanes `j + i < ow` of `out`.
            unsafe {
                let p = row.as_ptr().add(2 * j);
                let (lo, hi) = (_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)));
                let (lo2, hi2) = (_mm512_loadu_ps(p.add(2)), _mm512_loadu_ps(p.add(18)));
                let e = _mm512_permutex2var_ps(lo, even, hi);
                let o = _mm512_permutex2var_ps(lo, odd, hi);
                let e2 = _mm512_permutex2var_ps(lo2, even, hi2);
                let v = max_nan(max_nan(e, o), e2);
                _mm512_mask_storeu_ps(out.as_mut_ptr().add(j), m, v);
            }
        }
    }

    /// The larger of `a` and `b`, NaN where either is (8 lanes).
    #[inline(always)]
    unsafe fn max_nan8(a: __m256, b: __m256) -> __m256 {
        // SAFETY: register-only AVX operations; the caller runs with AVX2 enabled.
        unsafe {
            // `max` gives `b` where either is NaN: right unless only `a` is
            _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps::<_CMP_UNORD_Q>(a, a))
        }
    }

    /// The mask of the first `n` lanes of 8 (all from `n = 8` on), for masked loads/stores.
    #[inline(always)]
    unsafe fn tail_mask8(n: usize) -> __m256i {
        // SAFETY: register-only AVX2 operations; the caller runs with AVX2 enabled.
        unsafe {
            _mm256_cmpgt_epi32(
                _mm256_set1_epi32(n.min(8) as i32),
                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
            )
        }
    }

    /// [`k3s2_row`] on AVX2: 8 outputs a step.
    ///
    /// # Safety
    /// AVX2; `rows` is non-empty and a whole number of rows; `pw + w <= row.len()`;
    /// `16 * out.len().div_ceil(8) + 18 <= row.len()`; `row` is `-inf` outside `pw..pw + w`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn k3s2_row8(
        rows: &[f32],
        w: usize,
        row: &mut [f32],
        pw: usize,
        out: &mut [f32],
    ) {
        let n = rows.len() / w;
        let dst = &mut row[pw..pw + w];
        for x in (0..w).step_by(8) {
            // SAFETY: lanes masked to `x + i < w`: inside each input row and inside `dst`.
            unsafe {
                let m = tail_mask8(w - x);
                let mut v = _mm256_maskload_ps(rows.as_ptr().add(x), m);
                for r in 1..n {
                    v = max_nan8(v, _mm256_maskload_ps(rows.as_ptr().add(r * w + x), m));
                }
                _mm256_maskstore_ps(dst.as_mut_ptr().add(x), m, v);
            }
        }
        let ow = out.len();
        for j in (0..ow).step_by(8) {
            // SAFETY: reads `row[2j .. 2j + 18]` (`2j + 18 <= 16 * steps + 18 <= len`);
            // writes lanes `j + i < ow` of `out`.
            unsafe {
                let p = row.as_ptr().add(2 * j);
                let (e, o) = deinterleave(_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)));
                let (e2, _) = deinterleave(_mm256_loadu_ps(p.add(2)), _mm256_loadu_ps(p.add(10)));
                let v = max_nan8(max_nan8(e, o), e2);
                _mm256_maskstore_ps(out.as_mut_ptr().add(j), tail_mask8(ow - j), v);
            }
        }
    }

    /// Every row pair of a plane with AVX-512: sixteen outputs per step from 32 inputs of each
    /// row, split into even and odd columns by one two-register permute; the last step of a
    /// row loads and stores under a mask (rows of 13 or 5 outputs take one step).
    ///
    /// # Safety
    /// AVX-512F must be available; the contract of [`super::plane_f32`] holds.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn plane512(xp: &[f32], w: usize, vp: &mut [f32], ip: &mut [i64], ow: usize) {
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
        let one = _mm512_set1_epi32(1);
        let down = _mm512_set1_epi32(w as i32);
        for oy in 0..vp.len() / ow {
            let first = 2 * oy * w;
            let mut ox = 0;
            while ox < ow {
                let n = (ow - ox).min(16);
                let (lo, hi) = (tail_mask(2 * n), tail_mask((2 * n).saturating_sub(16)));
                // SAFETY: the masked loads read r0/r1[2ox .. 2ox + 2n] with 2ox + 2n <= 2 * ow
                // <= w, inside rows 2oy and 2oy + 1 of `xp` (masked-off lanes are neither read
                // nor faulted on, so the pointers to them are formed with `wrapping_add`); the
                // masked stores write vp/ip[oy * ow + ox ..][..n] with ox + n <= ow.
                unsafe {
                    let p0 = xp.as_ptr().add(first + 2 * ox);
                    let p1 = p0.add(w);
                    let (l0, h0) = (
                        _mm512_maskz_loadu_ps(lo, p0),
                        _mm512_maskz_loadu_ps(hi, p0.wrapping_add(16)),
                    );
                    let (l1, h1) = (
                        _mm512_maskz_loadu_ps(lo, p1),
                        _mm512_maskz_loadu_ps(hi, p1.wrapping_add(16)),
                    );
                    let a = _mm512_permutex2var_ps(l0, even, h0);
                    let b = _mm512_permutex2var_ps(l0, odd, h0);
                    let c = _mm512_permutex2var_ps(l1, even, h1);
                    let d = _mm512_permutex2var_ps(l1, odd, h1);
                    let ia = _mm512_add_epi32(_mm512_set1_epi32((first + 2 * ox) as i32), even);
                    let ic = _mm512_add_epi32(ia, down);
                    let (v, i) = pick16(a, ia, b, _mm512_add_epi32(ia, one));
                    let (v, i) = pick16(v, i, c, ic);
                    let (v, i) = pick16(v, i, d, _mm512_add_epi32(ic, one));
                    let at = oy * ow + ox;
                    let m = tail_mask(n);
                    _mm512_mask_storeu_ps(vp.as_mut_ptr().add(at), m, v);
                    let q = ip.as_mut_ptr().add(at);
                    let lo8 = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(i));
                    let hi8 = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64::<1>(i));
                    _mm512_mask_storeu_epi64(q, m as __mmask8, lo8);
                    _mm512_mask_storeu_epi64(q.wrapping_add(8), (m >> 8) as __mmask8, hi8);
                }
                ox += 16;
            }
        }
    }

    /// Every row pair of a plane with AVX2 (see [`super::plane_f32`], which checks the
    /// contract).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn plane(xp: &[f32], w: usize, vp: &mut [f32], ip: &mut [i64], ow: usize) {
        for (oy, (vrow, irow)) in vp
            .chunks_exact_mut(ow)
            .zip(ip.chunks_exact_mut(ow))
            .enumerate()
        {
            let r0 = &xp[2 * oy * w..2 * oy * w + 2 * ow];
            let r1 = &xp[(2 * oy + 1) * w..(2 * oy + 1) * w + 2 * ow];
            // SAFETY: AVX2 is enabled here; the rows and outputs are as `row`/`row4` require
            // (checked by `plane_f32`).
            unsafe {
                if ow >= 8 {
                    row(r0, r1, 2 * oy * w, w, vrow, irow)
                } else {
                    row4(r0, r1, 2 * oy * w, w, vrow, irow)
                }
            }
        }
    }

    /// [`row`] four outputs per step, for rows of 4 to 7 outputs.
    ///
    /// # Safety
    /// AVX2 must be available; `vrow.len() == irow.len() >= 4`; `r0` and `r1` hold at least
    /// `2 * vrow.len()` elements; every index `first + w + 2 * vrow.len()` fits in i32.
    #[target_feature(enable = "avx2")]
    unsafe fn row4(
        r0: &[f32],
        r1: &[f32],
        first: usize,
        w: usize,
        vrow: &mut [f32],
        irow: &mut [i64],
    ) {
        let ow = vrow.len();
        let lanes = _mm_setr_epi32(0, 2, 4, 6);
        let one = _mm_set1_epi32(1);
        let down = _mm_set1_epi32(w as i32);
        let mut ox = 0;
        loop {
            let o = ox.min(ow - 4);
            // SAFETY: reads r0/r1[2o .. 2o + 8] with 2o + 8 <= 2 * ow <= their lengths;
            // writes vrow[o .. o + 4] and irow[o .. o + 4] with o + 4 <= ow.
            unsafe {
                let (p0, p1) = (r0.as_ptr().add(2 * o), r1.as_ptr().add(2 * o));
                let (l0, h0) = (_mm_loadu_ps(p0), _mm_loadu_ps(p0.add(4)));
                let (l1, h1) = (_mm_loadu_ps(p1), _mm_loadu_ps(p1.add(4)));
                // even / odd elements of each 8-float run, in order
                let a = _mm_shuffle_ps::<0b10_00_10_00>(l0, h0);
                let b = _mm_shuffle_ps::<0b11_01_11_01>(l0, h0);
                let c = _mm_shuffle_ps::<0b10_00_10_00>(l1, h1);
                let d = _mm_shuffle_ps::<0b11_01_11_01>(l1, h1);
                let ia = _mm_add_epi32(_mm_set1_epi32((first + 2 * o) as i32), lanes);
                let ic = _mm_add_epi32(ia, down);
                let (v, i) = pick4(a, ia, b, _mm_add_epi32(ia, one));
                let (v, i) = pick4(v, i, c, ic);
                let (v, i) = pick4(v, i, d, _mm_add_epi32(ic, one));
                _mm_storeu_ps(vrow.as_mut_ptr().add(o), v);
                let ip = irow.as_mut_ptr().add(o) as *mut __m128i;
                _mm_storeu_si128(ip, _mm_cvtepi32_epi64(i));
                _mm_storeu_si128(ip.add(1), _mm_cvtepi32_epi64(_mm_unpackhi_epi64(i, i)));
            }
            if o + 4 >= ow {
                return;
            }
            ox += 4;
        }
    }

    /// # Safety
    /// AVX2 must be available; `vrow.len() == irow.len() >= 8`; `r0` and `r1` hold at least
    /// `2 * vrow.len()` elements; every index `first + w + 2 * vrow.len()` fits in i32.
    #[target_feature(enable = "avx2")]
    unsafe fn row(
        r0: &[f32],
        r1: &[f32],
        first: usize,
        w: usize,
        vrow: &mut [f32],
        irow: &mut [i64],
    ) {
        let ow = vrow.len();
        let lanes = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
        let one = _mm256_set1_epi32(1);
        let down = _mm256_set1_epi32(w as i32);
        let mut ox = 0;
        loop {
            // the last step is moved back to end at `ow` (it recomputes a few outputs)
            let o = ox.min(ow - 8);
            // SAFETY: reads r0/r1[2o .. 2o + 16] with 2o + 16 <= 2 * ow <= their lengths;
            // writes vrow[o .. o + 8] and irow[o .. o + 8] with o + 8 <= ow.
            unsafe {
                let (p0, p1) = (r0.as_ptr().add(2 * o), r1.as_ptr().add(2 * o));
                let (a, b) = deinterleave(_mm256_loadu_ps(p0), _mm256_loadu_ps(p0.add(8)));
                let (c, d) = deinterleave(_mm256_loadu_ps(p1), _mm256_loadu_ps(p1.add(8)));
                let ia = _mm256_add_epi32(_mm256_set1_epi32((first + 2 * o) as i32), lanes);
                let ic = _mm256_add_epi32(ia, down);
                let (v, i) = pick(a, ia, b, _mm256_add_epi32(ia, one));
                let (v, i) = pick(v, i, c, ic);
                let (v, i) = pick(v, i, d, _mm256_add_epi32(ic, one));
                _mm256_storeu_ps(vrow.as_mut_ptr().add(o), v);
                let ip = irow.as_mut_ptr().add(o) as *mut __m256i;
                _mm256_storeu_si256(ip, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(i)));
                let hi = _mm256_extracti128_si256::<1>(i);
                _mm256_storeu_si256(ip.add(1), _mm256_cvtepi32_epi64(hi));
            }
            if o + 8 >= ow {
                return;
            }
            ox += 8;
        }
    }
}
