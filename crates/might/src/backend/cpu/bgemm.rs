//! f32 matrix products with bfloat16 operands and f32 sums, for
//! [`MatmulPrecision::Medium`](crate::MatmulPrecision) on CPUs with AVX512-BF16.
//!
//! `vdpbf16ps` multiplies 16 lanes of bf16 *pairs* and adds both products to 16 f32 sums: twice
//! the multiply-adds of an f32 FMA for the same issue slot (this Zen 4: PyTorch's own bf16
//! matmul runs 195 GFLOP/s at one thread against 88-102 in f32). So the inner dimension is
//! walked two steps at a time, and both operands are packed as 32-bit *pairs*
//! `(x[.., 2p], x[.., 2p + 1])`, rounded to bf16 on the way (round to nearest even, as
//! `vcvtneps2bf16` does; it reads subnormal inputs as zero).
//!
//! The loops are the classic BLIS ones. For each block of `NC` columns and `KC` inner pairs,
//! `b` is packed into panels of 64 columns, `[p][64]` pairs each (the rows of the microkernel's
//! four vector loads); then for each block of `MC` rows, `a` is packed row by row, `[i][p]`
//! pairs (each a broadcast). The microkernel adds a `6 x 64` block of the output: per pair
//! step 4 vector loads, 6 broadcasts and 24 `vdpbf16ps` into 24 registers.
//!
//! Packing reads each operand along its contiguous direction where it has one. An `a` with
//! contiguous rows (every layer's input) already holds its pairs side by side: converting is
//! all. A row-major `b` (a layer's input gradient `g @ W`) is converted two rows at a time and
//! their words interleaved into pairs in registers. The transposing layouts, a column-major
//! `a` (the weight gradient's `gᵀ`) and a transposed `b` (the forward's `Wᵀ`), are converted
//! along their contiguous direction into 16 x 16 blocks of pairs that are transposed in
//! registers (storing them one pair at a time made the weight gradient `[384, 1024] @
//! [1024, 128]` run at 128 instead of 181 GFLOP/s, and an MLP's `x @ Wᵀ` at 71 instead of
//! 147). Other strides go element by element.

use super::sgemm::View;

/// The smallest products worth rounding (measured at one thread against the f32 path, `m x k
/// x n`: `64 x 32 x 64` 3.8 against 4.9 us, `64 x 64 x 64` 5.3 against 8.4, `128 x 64 x 128` 16
/// against 25; behind at `64 x 32 x 32`, 3.4 against 2.8, and at `64 x 128 x 10`, 8.6 against
/// 5.5, where 54 of the 64 columns the microkernel computes are padding).
const MIN_K: usize = 32;
const MIN_N: usize = 16;
const MIN_WORK: usize = 64 * 64 * 32;

/// Whether the bf16 kernel runs f32 products on this CPU (AVX512-F, -BW and -BF16).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::atomic::{AtomicU8, Ordering};
        static HAS: AtomicU8 = AtomicU8::new(0);
        match HAS.load(Ordering::Relaxed) {
            0 => {
                let has = is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512bf16");
                HAS.store(1 + has as u8, Ordering::Relaxed);
                has
            }
            h => h == 2,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether [`gemm`] runs an `[m, k] @ [k, n]` f32 product at the process's matmul precision.
pub fn suits(m: usize, n: usize, k: usize) -> bool {
    k >= MIN_K
        && n >= MIN_N
        && m * n * k >= MIN_WORK
        && crate::get_float32_matmul_precision() == crate::MatmulPrecision::Medium
        && available()
}

/// `x` rounded to bfloat16 the way `vcvtneps2bf16` rounds it (nearest even; subnormals read
/// as zero; NaN stays NaN), as bits. The reference for the tests and the scalar packing.
pub fn round_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        ((b >> 16) | 0x40) as u16
    } else if b & 0x7f80_0000 == 0 {
        (b >> 16) as u16 & 0x8000
    } else {
        ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
    }
}

/// `dst[m, n] = a[m, k] @ b[k, n]` (`+=` when `add`), plus `bias[n]` on every row unless
/// `bias` is null, with bf16-rounded operands and f32 sums, single-threaded, `dst` with
/// contiguous rows (`dst.cs == 1`). (The bias is added in the last step, from registers: no
/// pass over `dst` to fill it in first.)
///
/// # Safety
/// [`available`] must hold; every element `a[i, p]`, `b[p, j]`, `dst[i, j]` for `i < m`,
/// `j < n`, `p < k` must be valid at its strides, a non-null `bias` must hold `n` floats, and
/// no other thread may read or write that part of `dst` meanwhile.
pub unsafe fn gemm(
    (m, n, k): (usize, usize, usize),
    dst: View<*mut f32>,
    a: View<*const f32>,
    b: View<*const f32>,
    add: bool,
    bias: *const f32,
) {
    debug_assert_eq!(dst.cs, 1);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract (`available` checked the CPU features).
    unsafe {
        imp::run((m, n, k), dst, a, b, add, bias)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (m, n, k, dst, a, b, add, bias);
        unreachable!("bgemm::gemm: AVX512-BF16 only")
    }
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::{round_bf16, View};
    use std::arch::x86_64::*;
    use std::cell::RefCell;

    /// Output rows and 16-lane column vectors of one microkernel call.
    const MR: usize = 6;
    const NV: usize = 4;
    const NR: usize = 16 * NV;
    /// Inner pairs per packed block (512 inner steps; a 64-column panel of `b` is
    /// `KC * NR * 4` = 64 KiB, read from L2 once per 6 rows).
    const KC: usize = 256;
    /// Rows per packed block of `a` (`MC * KC * 4` = 96 KiB, in L2 beside `b`'s block).
    const MC: usize = 96;
    /// Columns per packed block of `b` (`NC * KC * 4` = 512 KiB).
    const NC: usize = 512;

    /// 64-byte aligned storage for the packed blocks.
    #[derive(Clone, Copy)]
    #[repr(C, align(64))]
    struct Line([u32; 16]);

    thread_local! {
        /// This thread's packed `a` and `b` blocks, kept between calls.
        static PACKED: RefCell<(Vec<Line>, Vec<Line>)> = const { RefCell::new((Vec::new(), Vec::new())) };
    }

    fn lines(v: &mut Vec<Line>, words: usize) -> *mut u32 {
        let n = words.div_ceil(16);
        if v.len() < n {
            v.resize(n, Line([0; 16]));
        }
        v.as_mut_ptr() as *mut u32
    }

    /// See [`super::gemm`].
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    pub(super) unsafe fn run(
        (m, n, k): (usize, usize, usize),
        dst: View<*mut f32>,
        a: View<*const f32>,
        b: View<*const f32>,
        add: bool,
        bias: *const f32,
    ) {
        if m == 0 || n == 0 {
            return;
        }
        let pairs = k.div_ceil(2);
        PACKED.with(|cell| {
            let (abuf, bbuf) = &mut *cell.borrow_mut();
            let ap = lines(abuf, MC * KC);
            let bp = lines(bbuf, NC.min(n.next_multiple_of(NR)) * KC);
            for j0 in (0..n).step_by(NC) {
                let nc = NC.min(n - j0);
                for p0 in (0..pairs).step_by(KC) {
                    let kc = KC.min(pairs - p0);
                    // SAFETY (all calls below): the blocks lie inside the product (caller's
                    // contract); the buffers hold `MC * KC` and `nc` rounded up to panels
                    // times `KC` pairs.
                    unsafe { pack_b(b, (p0, kc), (j0, nc), k, bp) };
                    for i0 in (0..m).step_by(MC) {
                        let mc = MC.min(m - i0);
                        // SAFETY: rows `i0..i0 + mc` of `a` are inside it; `ap` holds `MC * KC`.
                        unsafe { pack_a(a, (i0, mc), (p0, kc), k, ap) };
                        for q in 0..nc.div_ceil(NR) {
                            let cols = NR.min(nc - q * NR);
                            let panel = bp.add(q * NR * kc);
                            for r0 in (0..mc).step_by(MR) {
                                let c = dst.ptr.add((i0 + r0) * dst.rs + j0 + q * NR);
                                let tile = Tile {
                                    kc,
                                    a: ap.add(r0 * kc),
                                    b: panel,
                                    c,
                                    ldc: dst.rs,
                                    cols,
                                    load: add || p0 > 0,
                                    // once, with the last block of the sum
                                    bias: if bias.is_null() || p0 + kc < pairs {
                                        std::ptr::null()
                                    } else {
                                        bias.add(j0 + q * NR)
                                    },
                                };
                                // SAFETY: the tile's rows and columns are inside `dst` and
                                // its packed rows and panel inside the buffers just packed.
                                unsafe {
                                    match MR.min(mc - r0) {
                                        6 => tile.run::<6>(),
                                        5 => tile.run::<5>(),
                                        4 => tile.run::<4>(),
                                        3 => tile.run::<3>(),
                                        2 => tile.run::<2>(),
                                        _ => tile.run::<1>(),
                                    }
                                }
                            }
                        }
                    }
                }
            }
        })
    }

    /// One microkernel call: `c[R, cols] (+)= a[R rows of kc pairs] · b[kc pairs, 64]`.
    struct Tile {
        kc: usize,
        /// Packed rows of `a`, `kc` pairs apart.
        a: *const u32,
        /// A packed panel of `b`: `kc` rows of 64 pairs.
        b: *const u32,
        c: *mut f32,
        ldc: usize,
        cols: usize,
        /// Add to `c`'s values (else overwrite them).
        load: bool,
        /// Null, or `cols` values to add to every row.
        bias: *const f32,
    }

    impl Tile {
        /// # Safety
        /// `a` holds `R * kc` pairs, `b` `kc * 64`; `c` has `R` rows of `cols` valid floats.
        #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
        #[inline]
        unsafe fn run<const R: usize>(&self) {
            let mask = |v: usize| -> __mmask16 {
                let left = self.cols.saturating_sub(v * 16).min(16);
                ((1u32 << left) - 1) as __mmask16
            };
            let masks = [mask(0), mask(1), mask(2), mask(3)];
            let mut acc = [[_mm512_setzero_ps(); NV]; R];
            for p in 0..self.kc {
                // SAFETY: inside the panel and the packed rows (the caller's contract).
                unsafe {
                    let bp = self.b.add(p * NR);
                    let bv: [__m512bh; NV] =
                        std::array::from_fn(|v| bh(_mm512_load_si512(bp.add(16 * v) as *const _)));
                    for (r, row) in acc.iter_mut().enumerate() {
                        let av = bh(_mm512_set1_epi32(*self.a.add(r * self.kc + p) as i32));
                        for v in 0..NV {
                            row[v] = _mm512_dpbf16_ps(row[v], av, bv[v]);
                        }
                    }
                }
            }
            for v in 0..NV {
                if masks[v] == 0 {
                    continue;
                }
                // SAFETY: the bias holds `cols` values (masked).
                let bias = (!self.bias.is_null())
                    .then(|| unsafe { _mm512_maskz_loadu_ps(masks[v], self.bias.add(16 * v)) });
                for (r, row) in acc.iter().enumerate() {
                    // SAFETY: row `r`, the vector's columns below `cols` (masked).
                    unsafe {
                        let c = self.c.add(r * self.ldc + 16 * v);
                        let mut sum = row[v];
                        if let Some(b) = bias {
                            sum = _mm512_add_ps(sum, b);
                        }
                        if self.load {
                            sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(masks[v], c));
                        }
                        _mm512_mask_storeu_ps(c, masks[v], sum);
                    }
                }
            }
        }
    }

    #[inline(always)]
    fn bh(v: __m512i) -> __m512bh {
        // SAFETY: both are 512 bits of plain lanes.
        unsafe { std::mem::transmute::<__m512i, __m512bh>(v) }
    }

    /// The first `len.min(32)` floats at `src`, rounded: 16 pairs in their own order (zero
    /// past `len`).
    ///
    /// # Safety
    /// `src[..len.min(32)]` valid.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    #[inline]
    unsafe fn pairs_of(src: *const f32, len: usize) -> __m512i {
        // SAFETY: the masked loads stop at `len` (the caller's contract).
        let both = unsafe {
            _mm512_cvtne2ps_pbh(
                _mm512_maskz_loadu_ps(mask16(len.saturating_sub(16)), src.add(16)),
                _mm512_maskz_loadu_ps(mask16(len), src),
            )
        };
        // SAFETY: both are 512 bits of plain lanes.
        unsafe { std::mem::transmute::<__m512bh, __m512i>(both) }
    }

    /// Two rows of 16 floats rounded and interleaved into 16 pairs `(lo[j], hi[j])`.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    #[inline]
    fn interleave(lo: __m512, hi: __m512) -> __m512i {
        // [lo0..lo15, hi0..hi15] as bf16, then word j of lo next to word j of hi
        let both = _mm512_cvtne2ps_pbh(hi, lo);
        let idx = _mm512_set_epi16(
            31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20,
            4, 19, 3, 18, 2, 17, 1, 16, 0,
        );
        // SAFETY: both are 512 bits of plain lanes.
        _mm512_permutexvar_epi16(idx, unsafe {
            std::mem::transmute::<__m512bh, __m512i>(both)
        })
    }

    /// The pair `(x[r, 2p], x[r, 2p + 1])` (zero past the inner dimension `k`), rounded.
    ///
    /// # Safety
    /// `x[r, 2p]` valid; `x[r, 2p + 1]` too when `2p + 1 < k`.
    #[inline]
    unsafe fn pair(x: View<*const f32>, r: usize, p: usize, k: usize, cols_are_k: bool) -> u32 {
        let at = |q: usize| {
            if q >= k {
                0.0
            } else if cols_are_k {
                // SAFETY: the caller's contract.
                unsafe { *x.ptr.add(r * x.rs + q * x.cs) }
            } else {
                unsafe { *x.ptr.add(q * x.rs + r * x.cs) }
            }
        };
        round_bf16(at(2 * p)) as u32 | (round_bf16(at(2 * p + 1)) as u32) << 16
    }

    /// Pack rows `i0..i0 + mc`, pairs `p0..p0 + kc` of `a` as `mc` rows of `kc` pairs.
    ///
    /// # Safety
    /// The block lies inside `a[m, k]`; `out` holds `mc * kc` pairs.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    unsafe fn pack_a(
        a: View<*const f32>,
        (i0, mc): (usize, usize),
        (p0, kc): (usize, usize),
        k: usize,
        out: *mut u32,
    ) {
        let k0 = 2 * p0;
        let kn = (2 * kc).min(k - k0);
        // SAFETY (all): inside the block (the caller's contract); masked loads stop at `kn`.
        unsafe {
            if a.cs == 1 {
                // rows contiguous along k: the pairs are already side by side
                for i in 0..mc {
                    let src = a.ptr.add((i0 + i) * a.rs + k0);
                    let dst = out.add(i * kc);
                    for s in (0..kn).step_by(32) {
                        // the next row: its lines are a page or more away, where the
                        // hardware prefetcher would only start after missing a few
                        _mm_prefetch::<_MM_HINT_T0>(src.add(a.rs + s) as *const i8);
                        _mm_prefetch::<_MM_HINT_T0>(src.add(a.rs + s + 16) as *const i8);
                        let v = pairs_of(src.add(s), kn - s);
                        let words = ((kn - s).min(32)).div_ceil(2);
                        _mm512_mask_storeu_epi32(dst.add(s / 2) as *mut _, mask16(words), v);
                    }
                }
            } else if a.rs == 1 {
                // columns contiguous: two columns of 16 rows make their 16 pairs, 16 such
                // vectors (16 pairs of 16 rows) are transposed into 16 rows of 16 pairs
                for i in (0..mc).step_by(16) {
                    let rows = (mc - i).min(16);
                    let mk = mask16(rows);
                    for p in (0..kc).step_by(16) {
                        let mut t = [_mm512_setzero_si512(); 16];
                        for (d, v) in t.iter_mut().enumerate().take((kc - p).min(16)) {
                            let (c0, c1) = (k0 + 2 * (p + d), k0 + 2 * (p + d) + 1);
                            let lo = _mm512_maskz_loadu_ps(mk, a.ptr.add(c0 * a.cs + i0 + i));
                            let hi = if c1 < k {
                                _mm512_maskz_loadu_ps(mk, a.ptr.add(c1 * a.cs + i0 + i))
                            } else {
                                _mm512_setzero_ps()
                            };
                            *v = interleave(lo, hi);
                        }
                        transpose16(&mut t);
                        let words = mask16(kc - p);
                        for (r, v) in t.iter().enumerate().take(rows) {
                            _mm512_mask_storeu_epi32(
                                out.add((i + r) * kc + p) as *mut _,
                                words,
                                *v,
                            );
                        }
                    }
                }
            } else {
                for i in 0..mc {
                    for p in 0..kc {
                        *out.add(i * kc + p) = pair(a, i0 + i, p0 + p, k, true);
                    }
                }
            }
        }
    }

    /// Pack pairs `p0..p0 + kc`, columns `j0..j0 + nc` of `b` as panels of 64 columns, each
    /// `kc` rows of 64 pairs (columns past `nc` zero).
    ///
    /// # Safety
    /// The block lies inside `b[k, n]`; `out` holds `nc` rounded up to 64, times `kc` pairs.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    unsafe fn pack_b(
        b: View<*const f32>,
        (p0, kc): (usize, usize),
        (j0, nc): (usize, usize),
        k: usize,
        out: *mut u32,
    ) {
        let k0 = 2 * p0;
        // SAFETY (all): inside the block (the caller's contract); masked loads stop at `nc`.
        unsafe {
            for q in 0..nc.div_ceil(NR) {
                let panel = out.add(q * NR * kc);
                let cols = NR.min(nc - q * NR);
                let jq = j0 + q * NR;
                if b.cs == 1 {
                    // rows contiguous along n: two rows, 16 columns at a time
                    for p in 0..kc {
                        let (r0, r1) = (k0 + 2 * p, k0 + 2 * p + 1);
                        for v in 0..NV {
                            let mk = mask16(cols.saturating_sub(16 * v));
                            let lo = _mm512_maskz_loadu_ps(mk, b.ptr.add(r0 * b.rs + jq + 16 * v));
                            let hi = if r1 < k {
                                _mm512_maskz_loadu_ps(mk, b.ptr.add(r1 * b.rs + jq + 16 * v))
                            } else {
                                _mm512_setzero_ps()
                            };
                            let at = panel.add(p * NR + 16 * v) as *mut _;
                            _mm512_store_si512(at, interleave(lo, hi));
                        }
                    }
                } else if b.rs == 1 {
                    // columns contiguous along k: each column's 16 pairs come out side by
                    // side; 16 columns of them are transposed into 16 panel rows
                    for j in (0..NR).step_by(16) {
                        for p in (0..kc).step_by(16) {
                            let kn = (2 * kc).min(k - k0).saturating_sub(2 * p);
                            let mut t = [_mm512_setzero_si512(); 16];
                            for (c, v) in t.iter_mut().enumerate() {
                                if j + c >= cols {
                                    break;
                                }
                                let src = b.ptr.add((jq + j + c) * b.cs + k0 + 2 * p);
                                *v = pairs_of(src, kn);
                            }
                            transpose16(&mut t);
                            for (d, v) in t.iter().enumerate().take((kc - p).min(16)) {
                                _mm512_store_si512(panel.add((p + d) * NR + j) as *mut _, *v);
                            }
                        }
                    }
                } else {
                    if cols < NR {
                        for p in 0..kc {
                            std::ptr::write_bytes(panel.add(p * NR + cols), 0, NR - cols);
                        }
                    }
                    for j in 0..cols {
                        for p in 0..kc {
                            *panel.add(p * NR + j) = pair(b, jq + j, p0 + p, k, false);
                        }
                    }
                }
            }
        }
    }

    /// Transpose a 16 x 16 block of 32-bit words held as 16 rows.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn transpose16(r: &mut [__m512i; 16]) {
        // within 128-bit lanes: 2 x 2 blocks of words, then of word pairs, so that u[4g + c]
        // holds, in lane L, word 4L + c of rows 4g..4g + 4
        let mut t = [_mm512_setzero_si512(); 16];
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
        }
        let mut u = [_mm512_setzero_si512(); 16];
        for g in 0..4 {
            let (t0, t1, t2, t3) = (t[4 * g], t[4 * g + 1], t[4 * g + 2], t[4 * g + 3]);
            u[4 * g] = _mm512_unpacklo_epi64(t0, t2);
            u[4 * g + 1] = _mm512_unpackhi_epi64(t0, t2);
            u[4 * g + 2] = _mm512_unpacklo_epi64(t1, t3);
            u[4 * g + 3] = _mm512_unpackhi_epi64(t1, t3);
        }
        // across lanes: row 4L + c gathers lane L of u[c], u[4 + c], u[8 + c], u[12 + c]
        for c in 0..4 {
            let v0 = _mm512_shuffle_i32x4::<0x88>(u[c], u[4 + c]);
            let w0 = _mm512_shuffle_i32x4::<0xDD>(u[c], u[4 + c]);
            let v1 = _mm512_shuffle_i32x4::<0x88>(u[8 + c], u[12 + c]);
            let w1 = _mm512_shuffle_i32x4::<0xDD>(u[8 + c], u[12 + c]);
            r[c] = _mm512_shuffle_i32x4::<0x88>(v0, v1);
            r[4 + c] = _mm512_shuffle_i32x4::<0x88>(w0, w1);
            r[8 + c] = _mm512_shuffle_i32x4::<0xDD>(v0, v1);
            r[12 + c] = _mm512_shuffle_i32x4::<0xDD>(w0, w1);
        }
    }

    /// The first `n.min(16)` lanes.
    #[inline(always)]
    fn mask16(n: usize) -> __mmask16 {
        ((1u32 << n.min(16)) - 1) as __mmask16
    }
}

#[cfg(test)]
mod tests {
    use super::{available, gemm, round_bf16, View};

    /// How an `[r, c]` operand lies in memory.
    #[derive(Clone, Copy, Debug)]
    enum Lay {
        RowMajor,
        ColMajor,
        /// Every other element of rows one longer than needed: no contiguous direction.
        Strided,
    }

    /// `x[r, c]` laid out as `lay`: the buffer and its (row, column) strides.
    fn store(x: &[f32], (r, c): (usize, usize), lay: Lay) -> (Vec<f32>, usize, usize) {
        let (rs, cs, len) = match lay {
            Lay::RowMajor => (c, 1, r * c),
            Lay::ColMajor => (1, r, r * c),
            Lay::Strided => (2 * c + 1, 2, r * (2 * c + 1)),
        };
        let mut buf = vec![f32::NAN; len];
        for i in 0..r {
            for j in 0..c {
                buf[i * rs + j * cs] = x[i * c + j];
            }
        }
        (buf, rs, cs)
    }

    /// `len` values spread over [-2, 2) with all 24 bits of mantissa in use (so rounding
    /// to bf16 changes nearly all of them).
    fn values(len: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
            })
            .collect()
    }

    fn widen(h: u16) -> f64 {
        f32::from_bits((h as u32) << 16) as f64
    }

    #[test]
    fn rounding_is_nearest_even_with_subnormals_as_zero() {
        assert_eq!(round_bf16(1.0), 0x3f80);
        // halfway between 1 and the next bf16 (1 + 2^-7): ties to the even 1.0
        assert_eq!(round_bf16(1.0 + 1.0 / 256.0), 0x3f80);
        // halfway between 1 + 2^-7 and 1 + 2^-6: ties to the even 1 + 2^-6
        assert_eq!(round_bf16(1.0 + 3.0 / 256.0), 0x3f82);
        assert_eq!(round_bf16(1.0 + 1.0 / 256.0 + 1e-6), 0x3f81);
        assert_eq!(round_bf16(-7.75), 0xc0f8);
        assert_eq!(round_bf16(f32::MAX), 0x7f80);
        assert_eq!(round_bf16(f32::INFINITY), 0x7f80);
        assert_eq!(round_bf16(1e-39), 0x0000);
        assert_eq!(round_bf16(-1e-39), 0x8000);
        assert!(widen(round_bf16(f32::NAN)).is_nan());
        assert!(widen(round_bf16(f32::from_bits(0x7fff_ffff))).is_nan());
    }

    /// Every packing path (each operand row-major, column-major and strided), odd inner
    /// dimensions, edges of every block (6-row groups, 64-column panels, 96-row, 512-column
    /// and 256-pair blocks), overwriting with a bias and adding: the f64 sum of the
    /// bf16-rounded products.
    #[test]
    fn matches_the_rounded_products() {
        if !available() {
            eprintln!("skipped: no AVX512-BF16 on this CPU");
            return;
        }
        let lays = [Lay::RowMajor, Lay::ColMajor, Lay::Strided];
        let sizes = [
            (13, 70, 37),
            (100, 130, 1100),
            (7, 600, 64),
            (1, 1, 33),
            (6, 64, 2),
            (40, 17, 513),
        ];
        for (case, &(m, n, k)) in sizes.iter().enumerate() {
            let av = values(m * k, 2 * case as u64 + 1);
            let bv = values(k * n, 2 * case as u64 + 2);
            let init = values(m * n, 99);
            let bias = values(n, 98);
            for (la, lb) in lays.iter().flat_map(|&a| lays.map(|b| (a, b))) {
                let (abuf, ars, acs) = store(&av, (m, k), la);
                let (bbuf, brs, bcs) = store(&bv, (k, n), lb);
                for add in [false, true] {
                    let mut c = if add {
                        init.clone()
                    } else {
                        vec![f32::NAN; m * n]
                    };
                    // SAFETY: the buffers hold the operands at these strides; `c` is [m, n].
                    unsafe {
                        gemm(
                            (m, n, k),
                            View {
                                ptr: c.as_mut_ptr(),
                                rs: n,
                                cs: 1,
                            },
                            View {
                                ptr: abuf.as_ptr(),
                                rs: ars,
                                cs: acs,
                            },
                            View {
                                ptr: bbuf.as_ptr(),
                                rs: brs,
                                cs: bcs,
                            },
                            add,
                            if add { std::ptr::null() } else { bias.as_ptr() },
                        )
                    };
                    let mut far = 0.0f64;
                    for i in 0..m {
                        for j in 0..n {
                            let terms = (0..k).map(|p| {
                                let (x, y) = (av[i * k + p], bv[p * n + j]);
                                let r = widen(round_bf16(x)) * widen(round_bf16(y));
                                (r, x as f64 * y as f64)
                            });
                            let (mut want, mut exact, mut mag) = (0.0, 0.0, 0.0);
                            for (r, e) in terms {
                                (want, exact, mag) = (want + r, exact + e, mag + r.abs());
                            }
                            // overwriting adds the bias, adding does not
                            let base = if add { init[i * n + j] } else { bias[j] } as f64;
                            let got = c[i * n + j] as f64;
                            assert!(
                                (got - base - want).abs() <= 1e-6 * (mag + base.abs()) + 1e-6,
                                "{m}x{n}x{k} {la:?} {lb:?} add={add} [{i}, {j}]: {got} vs {}",
                                base + want
                            );
                            far = far.max((got - base - exact).abs() / (mag + 1e-3));
                        }
                    }
                    // the operands really were rounded (an f32 product would sit at `exact`)
                    assert!(k < 4 || far > 1e-4, "{m}x{n}x{k}: not rounded ({far})");
                }
            }
        }
    }
}
