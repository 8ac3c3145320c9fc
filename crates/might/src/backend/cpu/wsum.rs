//! Weighted sums of rows: `out[i][c] = Σ_r w[i][r] · m[r][c]`, a small matrix product whose
//! operands are read in place, at any strides, without packing. The fused attention kernels
//! run all their products through it (a few dozen rows each, where a GEMM library's packing
//! and dispatch cost as much as the arithmetic).
//!
//! The AVX-512 build holds a block of up to 4 output rows x 64 columns in 16 registers; every
//! step of the sum is one row of `m` (up to 4 loads) and 4 broadcast weights, 16 FMAs. Other
//! CPUs and f64 run [`generic`], one output row at a time.

use num_traits::Float;

/// Where an operand's element `(i, j)` sits: `i * rs + j * cs` (`cs` is 1 for `m` and `out`).
#[derive(Clone, Copy, Debug)]
pub struct Strides {
    pub rs: usize,
    pub cs: usize,
}

/// Index of the last element a `rows x cols` operand at these strides touches.
fn last(rows: usize, cols: usize, st: Strides) -> usize {
    (rows - 1) * st.rs + (cols - 1) * st.cs
}

/// Element types [`weighted_sums`] runs: f32 has an AVX-512 kernel, f64 the generic loop.
pub trait Wsum: Float + Send + Sync + 'static {
    /// The kernel for this type (see [`weighted_sums`]); bounds already checked.
    #[doc(hidden)]
    fn kernel(
        out: &mut [Self],
        ors: usize,
        w: &[Self],
        ws: Strides,
        m: &[Self],
        mrs: usize,
        dims: (usize, usize, usize),
    ) {
        generic(out, ors, w, ws, m, mrs, dims)
    }

    /// The transpose for this type (see [`transpose_padded`]); bounds already checked.
    #[doc(hidden)]
    fn transpose(dst: &mut [Self], pad: usize, src: &[Self], rs: usize, rows: usize, cols: usize) {
        transpose_generic(dst, pad, src, rs, rows, cols)
    }
}

impl Wsum for f64 {}

impl Wsum for f32 {
    fn kernel(
        out: &mut [f32],
        ors: usize,
        w: &[f32],
        ws: Strides,
        m: &[f32],
        mrs: usize,
        dims: (usize, usize, usize),
    ) {
        #[cfg(target_arch = "x86_64")]
        if super::simd::level() >= 2 {
            // SAFETY: AVX-512F is present (level 2) and `weighted_sums` checked that every
            // element the kernel touches lies inside `out`, `w` and `m`.
            unsafe { imp::run(out.as_mut_ptr(), ors, w.as_ptr(), ws, m.as_ptr(), mrs, dims) };
            return;
        }
        generic(out, ors, w, ws, m, mrs, dims)
    }

    fn transpose(dst: &mut [f32], pad: usize, src: &[f32], rs: usize, rows: usize, cols: usize) {
        #[cfg(target_arch = "x86_64")]
        if super::simd::level() >= 2 {
            // SAFETY: AVX-512F is present; `transpose_padded` checked the bounds, including
            // whole 16-wide destination rows (`pad` is a multiple of 16).
            unsafe { imp::transpose(dst.as_mut_ptr(), pad, src.as_ptr(), rs, rows, cols) };
            return;
        }
        transpose_generic(dst, pad, src, rs, rows, cols)
    }
}

/// Element by element, for f64 and CPUs without AVX-512.
fn transpose_generic<T: Copy>(
    dst: &mut [T],
    pad: usize,
    src: &[T],
    rs: usize,
    rows: usize,
    cols: usize,
) {
    for (e, d) in dst.chunks_exact_mut(pad).take(cols).enumerate() {
        for (j, o) in d[..rows].iter_mut().enumerate() {
            *o = src[j * rs + e];
        }
    }
}

/// `dst[e·pad + j] = src[j·rs + e]` for `j < rows`, `e < cols`: the transpose the product
/// `q kᵀ` needs as its `m` operand, rows padded to `pad` (a multiple of 16, at least `rows`).
/// The padding `j` in `rows..pad` is either left alone or set to 0, so callers zero `dst`
/// first. Panics if an operand is too short. The AVX-512 build transposes 16 x 16 tiles in
/// registers: element by element the strided accesses cost a fifth of the attention forward.
pub fn transpose_padded<T: Wsum>(
    dst: &mut [T],
    pad: usize,
    src: &[T],
    rs: usize,
    rows: usize,
    cols: usize,
) {
    if rows == 0 || cols == 0 {
        return;
    }
    let fits = pad.is_multiple_of(16)
        && pad >= rows
        && cols * pad <= dst.len()
        && (rows - 1) * rs + cols <= src.len();
    assert!(
        fits,
        "transpose_padded: operands too short for {rows}x{cols}"
    );
    T::transpose(dst, pad, src, rs, rows, cols)
}

/// `out[i·ors + c] = Σ_{r < k} w[i·ws.rs + r·ws.cs] · m[r·mrs + c]` for `i < rows`, `c < cols`
/// (`dims = (rows, cols, k)`). Panics if an operand is too short for these sizes (a bug in
/// the caller, not an input error).
#[inline]
pub fn weighted_sums<T: Wsum>(
    out: &mut [T],
    ors: usize,
    w: &[T],
    ws: Strides,
    m: &[T],
    mrs: usize,
    dims: (usize, usize, usize),
) {
    let (rows, cols, k) = dims;
    if rows == 0 || cols == 0 {
        return;
    }
    let fits = last(rows, cols, Strides { rs: ors, cs: 1 }) < out.len()
        && (k == 0
            || last(rows, k, ws) < w.len() && last(k, cols, Strides { rs: mrs, cs: 1 }) < m.len());
    assert!(fits, "weighted_sums: operands too short for {dims:?}");
    T::kernel(out, ors, w, ws, m, mrs, dims)
}

/// One output row at a time, the columns in 16-wide accumulator arrays (vectorised by the
/// caller's SIMD build).
#[inline(always)]
pub fn generic<T: Float>(
    out: &mut [T],
    ors: usize,
    w: &[T],
    ws: Strides,
    m: &[T],
    mrs: usize,
    (rows, cols, k): (usize, usize, usize),
) {
    const W: usize = 16;
    for i in 0..rows {
        let o = &mut out[i * ors..i * ors + cols];
        let mut c = 0;
        while c < cols {
            let t = (cols - c).min(W);
            let mut a = [T::zero(); W];
            for r in 0..k {
                let x = w[i * ws.rs + r * ws.cs];
                let row = &m[r * mrs + c..r * mrs + c + t];
                for (al, &v) in a.iter_mut().zip(row) {
                    *al = *al + x * v;
                }
            }
            o[c..c + t].copy_from_slice(&a[..t]);
            c += t;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::Strides;
    use std::arch::x86_64::*;

    /// Output rows per block.
    const R: usize = 4;
    /// Column vectors per block (64 floats).
    const C: usize = 4;

    /// # Safety
    /// AVX-512F; every element `out[i·ors + c]`, `w[i·ws.rs + r·ws.cs]`, `m[r·mrs + c]` for
    /// `i < rows`, `c < cols`, `r < k` valid, `out` not aliased.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn run(
        out: *mut f32,
        ors: usize,
        w: *const f32,
        ws: Strides,
        m: *const f32,
        mrs: usize,
        (rows, cols, k): (usize, usize, usize),
    ) {
        let mut i = 0;
        while i < rows {
            let r = R.min(rows - i);
            let mut c = 0;
            while c < cols {
                let width = (C * 16).min(cols - c);
                let nv = width.div_ceil(16);
                let tail = width - (nv - 1) * 16;
                let mask = ((1u32 << tail) - 1) as __mmask16;
                // SAFETY: rows i..i + r and columns c..c + width of each operand are inside
                // the caller's ranges.
                unsafe {
                    let o = out.add(i * ors + c);
                    let wb = w.add(i * ws.rs);
                    let mb = m.add(c);
                    macro_rules! go {
                        ($($rr:literal),*) => {
                            match (r, nv) {
                                $(
                                    ($rr, 4) => block::<$rr, 4>(k, o, ors, wb, ws, mb, mrs, mask),
                                    ($rr, 3) => block::<$rr, 3>(k, o, ors, wb, ws, mb, mrs, mask),
                                    ($rr, 2) => block::<$rr, 2>(k, o, ors, wb, ws, mb, mrs, mask),
                                    ($rr, _) => block::<$rr, 1>(k, o, ors, wb, ws, mb, mrs, mask),
                                )*
                                _ => unreachable!("blocks have 1..=4 rows"),
                            }
                        };
                    }
                    go!(4, 3, 2, 1);
                }
                c += width;
            }
            i += r;
        }
    }

    /// # Safety
    /// AVX-512F; `src[j·rs + e]` valid for `j < rows`, `e < cols`; `dst[e·pad + j]` for
    /// `e < cols`, `j < rows` rounded up to 16.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn transpose(
        dst: *mut f32,
        pad: usize,
        src: *const f32,
        rs: usize,
        rows: usize,
        cols: usize,
    ) {
        for j0 in (0..rows).step_by(16) {
            for e0 in (0..cols).step_by(16) {
                let (jn, en) = (16.min(rows - j0), 16.min(cols - e0));
                let mask = ((1u32 << en) - 1) as __mmask16;
                // SAFETY: rows j0..j0 + jn, columns e0..e0 + en of `src`; rows
                // e0..e0 + en of `dst`, columns j0..j0 + 16 (inside the padding).
                unsafe {
                    let mut r = [_mm512_setzero_ps(); 16];
                    for (jj, v) in r.iter_mut().enumerate().take(jn) {
                        *v = _mm512_maskz_loadu_ps(mask, src.add((j0 + jj) * rs + e0));
                    }
                    let t = transpose16(r);
                    for (ee, &v) in t.iter().enumerate().take(en) {
                        _mm512_storeu_ps(dst.add((e0 + ee) * pad + j0), v);
                    }
                }
            }
        }
    }

    /// The 16 x 16 transpose of 16 row vectors: 32-bit then 64-bit interleaves (4 x 4 blocks
    /// inside each 128-bit lane), then two rounds of lane shuffles.
    #[target_feature(enable = "avx512f")]
    fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
        let mut a = [_mm512_setzero_ps(); 16];
        for i in 0..8 {
            a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        // b[4g + c], lane k: column 4k + c of rows 4g..4g + 4
        let mut b = [_mm512_setzero_ps(); 16];
        for g in 0..4 {
            let pd = |v: __m512| _mm512_castps_pd(v);
            let (a0, a1, a2, a3) = (
                pd(a[4 * g]),
                pd(a[4 * g + 1]),
                pd(a[4 * g + 2]),
                pd(a[4 * g + 3]),
            );
            b[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
            b[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
            b[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
            b[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
        }
        let mut out = [_mm512_setzero_ps(); 16];
        for c in 0..4 {
            let t0 = _mm512_shuffle_f32x4::<0x44>(b[c], b[4 + c]);
            let t1 = _mm512_shuffle_f32x4::<0xEE>(b[c], b[4 + c]);
            let t2 = _mm512_shuffle_f32x4::<0x44>(b[8 + c], b[12 + c]);
            let t3 = _mm512_shuffle_f32x4::<0xEE>(b[8 + c], b[12 + c]);
            out[c] = _mm512_shuffle_f32x4::<0x88>(t0, t2);
            out[4 + c] = _mm512_shuffle_f32x4::<0xDD>(t0, t2);
            out[8 + c] = _mm512_shuffle_f32x4::<0x88>(t1, t3);
            out[12 + c] = _mm512_shuffle_f32x4::<0xDD>(t1, t3);
        }
        out
    }

    /// `RR` output rows x `NV` column vectors (the last masked by `mask`). Not inlined: one
    /// function per block shape keeps every accumulator in a register.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    #[inline(never)]
    unsafe fn block<const RR: usize, const NV: usize>(
        k: usize,
        out: *mut f32,
        ors: usize,
        w: *const f32,
        ws: Strides,
        m: *const f32,
        mrs: usize,
        mask: __mmask16,
    ) {
        // SAFETY: per `run`: rows 0..RR, columns 0..16·NV (the last vector masked), steps
        // 0..k of each operand are valid.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); NV]; RR];
            for r in 0..k {
                let mr = m.add(r * mrs);
                let mut v = [_mm512_setzero_ps(); NV];
                for (j, vj) in v.iter_mut().enumerate() {
                    *vj = if j + 1 == NV {
                        _mm512_maskz_loadu_ps(mask, mr.add(16 * j))
                    } else {
                        _mm512_loadu_ps(mr.add(16 * j))
                    };
                }
                let wr = w.add(r * ws.cs);
                for (ii, row) in acc.iter_mut().enumerate() {
                    let x = _mm512_set1_ps(*wr.add(ii * ws.rs));
                    for (a, &vj) in row.iter_mut().zip(&v) {
                        *a = _mm512_fmadd_ps(x, vj, *a);
                    }
                }
            }
            for (ii, row) in acc.iter().enumerate() {
                let o = out.add(ii * ors);
                for (j, &a) in row.iter().enumerate() {
                    if j + 1 == NV {
                        _mm512_mask_storeu_ps(o.add(16 * j), mask, a);
                    } else {
                        _mm512_storeu_ps(o.add(16 * j), a);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block shape (1-4 rows, 1-4 column vectors, masked tails), strided weights (a
    /// column walk, as the attention backward uses), an output row stride wider than the
    /// columns (the gap must stay untouched), against an f64 sum; the generic loop too.
    #[test]
    fn matches_f64_sums_at_every_shape() {
        let val = |i: usize, s: usize| ((i * s + 7) % 23) as f32 / 11.0 - 1.0;
        for &(rows, cols, k) in &[
            (1, 1, 1),
            (3, 17, 5),
            (4, 64, 32),
            (7, 33, 9),
            (9, 70, 64),
            (5, 8, 40),
            (2, 130, 3),
            (6, 16, 0),
        ] {
            // w read as a transposed [k, rows] matrix: element (i, r) at i + r·rows
            let ws = Strides { rs: 1, cs: rows };
            let w: Vec<f32> = (0..rows * k.max(1)).map(|i| val(i, 5)).collect();
            let mrs = cols + 3;
            let m: Vec<f32> = (0..k.max(1) * mrs).map(|i| val(i, 3)).collect();
            let ors = cols + 2;
            for path in 0..2 {
                let mut out = vec![f32::NAN; rows * ors];
                if path == 0 {
                    weighted_sums(&mut out, ors, &w, ws, &m, mrs, (rows, cols, k));
                } else {
                    generic(&mut out, ors, &w, ws, &m, mrs, (rows, cols, k));
                }
                for i in 0..rows {
                    for c in 0..ors {
                        let got = out[i * ors + c];
                        if c >= cols {
                            assert!(got.is_nan(), "{rows}x{cols}x{k}: gap written at {i},{c}");
                            continue;
                        }
                        let want: f64 = (0..k)
                            .map(|r| w[i + r * rows] as f64 * m[r * mrs + c] as f64)
                            .sum();
                        assert!(
                            (got as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                            "path {path} {rows}x{cols}x{k} [{i}, {c}]: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    /// Tiles cut at every edge (rows and columns not multiples of 16), a source row stride
    /// wider than the columns: the transposed values land, the padding stays zero.
    #[test]
    fn transpose_padded_at_every_edge() {
        for &(rows, cols) in &[
            (1usize, 1usize),
            (16, 16),
            (17, 5),
            (64, 32),
            (33, 40),
            (5, 17),
        ] {
            let rs = cols + 3;
            let src: Vec<f32> = (0..rows * rs).map(|i| i as f32).collect();
            let pad = rows.next_multiple_of(16);
            let mut dst = vec![0f32; cols * pad];
            transpose_padded(&mut dst, pad, &src, rs, rows, cols);
            for e in 0..cols {
                for j in 0..pad {
                    let want = if j < rows { src[j * rs + e] } else { 0.0 };
                    assert_eq!(dst[e * pad + j], want, "{rows}x{cols} at [{e}, {j}]");
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "operands too short")]
    fn short_operands_are_caught() {
        let mut out = vec![0f32; 4];
        weighted_sums(
            &mut out,
            4,
            &[1.0; 3],
            Strides { rs: 1, cs: 1 },
            &[1.0; 16],
            4,
            (1, 4, 4),
        );
    }
}
