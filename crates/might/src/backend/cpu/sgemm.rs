//! Our own f32 products for AVX-512 CPUs, in the two layouts where they beat the `gemm`
//! crate because nothing needs packing.
//!
//! [`dot`]: a linear layer's forward `x @ Wᵀ` on a small batch with a long inner dimension (an
//! MNIST MLP's `[64, 784] @ [784, 128]`). Both operands are contiguous along the inner
//! dimension, and each output is a dot product of two contiguous rows. The crate first packs
//! both into its panel layout on every call, which at 64 rows costs ~10 % (96 GFLOP/s at one
//! thread against ~116 of FMA peak; this kernel: 103). A `4 x 4` block of outputs accumulates
//! in 16 registers of 16 partial sums (per 16-float step: 4 + 4 loads, 16 FMAs), summed across
//! lanes once at the end. Column blocks outside row blocks, so the four `W` rows stay in L1.
//! Where it loses (measured, one thread): at `k = 128` the final sums across lanes are a third
//! of the work (70 against 111 GFLOP/s at `1024 x 128 x 384`), and with many rows the crate's
//! packing pays off (93 against 103 at `1024 x 512 x 128`).
//!
//! [`outer`]: a linear layer's weight gradient `gᵀ @ x` on a small batch (the MLP's
//! `[128, 64] @ [64, 784]`). Columns of `gᵀ` and rows of `x` are contiguous, so a `4 x 64`
//! output block is a sum of outer products: per inner step four broadcasts of `gᵀ`, four
//! vector loads of `x` and 16 FMAs into 16 registers, no sums across lanes. Measured against
//! the crate, one thread, `m x k x n`: `128 x 64 x 784` 105 vs 99 GFLOP/s, `64 x 64 x 784` 104
//! vs 93, `128 x 256 x 512` 106 vs 103; two threads (the output split by columns), `128 x 64
//! x 784` 147-169 vs 89-90 (the crate gains nothing from the second thread there). Even at
//! `k = 384`, behind from `k = 512` (`384 x 512 x 128`: 102 vs 107; `k = 1024`: 82-91 vs
//! 104-109), where the `k x 64` panel of `x` no longer stays near the core and the crate's
//! packing pays for itself.

/// Shortest inner dimension the dot kernel takes.
const MIN_K: usize = 512;
/// Largest output (`m * n`) it takes.
const MAX_MN: usize = 16 * 1024;
/// Output rows and columns one microkernel call produces.
#[cfg(target_arch = "x86_64")]
const DR: usize = 4;
#[cfg(target_arch = "x86_64")]
const DC: usize = 4;

/// A matrix operand: base pointer and element strides (rows, columns).
#[derive(Clone, Copy, Debug)]
pub struct View<P> {
    pub ptr: P,
    pub rs: usize,
    pub cs: usize,
}

/// Whether [`dot`] runs an f32 `[m, k] @ [k, n]` product whose operands have these (row,
/// column) strides: AVX-512F, `a` with contiguous rows, `b` with contiguous columns, a long
/// inner dimension and a small output.
pub fn suits(m: usize, n: usize, k: usize, a: (usize, usize), b: (usize, usize)) -> bool {
    a.1 == 1
        && b.0 == 1
        && k >= MIN_K
        && m * n <= MAX_MN
        && m > 0
        && n > 0
        && super::simd::level() >= 2
}

/// `dst[m, n] = a[m, k] @ b[k, n]` (`+=` when `add`), single-threaded.
///
/// # Safety
/// [`suits`] must hold for these sizes and strides; every element `a[i, p]`, `b[p, j]`,
/// `dst[i, j]` for `i < m`, `j < n`, `p < k` must be valid at its strides, and no other
/// thread may read or write that part of `dst` meanwhile.
pub unsafe fn dot(
    (m, n, k): (usize, usize, usize),
    dst: View<*mut f32>,
    a: View<*const f32>,
    b: View<*const f32>,
    add: bool,
) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract (`suits` checked AVX-512F).
    unsafe {
        imp::run((m, n, k), dst, a, b, add)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (m, n, k, dst, a, b, add);
        unreachable!("sgemm::dot: AVX-512 only")
    }
}

/// Longest inner dimension [`outer`] takes (measured crossover with the crate: see the
/// module doc).
const OUTER_MAX_K: usize = 256;
/// Output rows and 16-float column vectors one [`outer`] microkernel call produces.
#[cfg(target_arch = "x86_64")]
const OR: usize = 4;
#[cfg(target_arch = "x86_64")]
const OV: usize = 4;

/// Whether [`outer`] runs an f32 `[m, k] @ [k, n]` product whose operands have these (row,
/// column) strides: AVX-512F, `a` with contiguous columns and `b` with contiguous rows (the
/// weight gradient `gᵀ @ x` of a linear layer), a short inner dimension.
pub fn suits_outer(m: usize, n: usize, k: usize, a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 == 1
        && b.1 == 1
        && (1..=OUTER_MAX_K).contains(&k)
        && m > 0
        && n > 0
        && super::simd::level() >= 2
}

/// `dst[m, n] = a[m, k] @ b[k, n]` (`+=` when `add`), single-threaded, `dst` with contiguous
/// rows (`dst.cs == 1`).
///
/// # Safety
/// [`suits_outer`] must hold for these sizes and strides and `dst.cs` must be 1; every
/// element `a[i, p]`, `b[p, j]`, `dst[i, j]` for `i < m`, `j < n`, `p < k` must be valid at
/// its strides, and no other thread may read or write that part of `dst` meanwhile.
pub unsafe fn outer(
    (m, n, k): (usize, usize, usize),
    dst: View<*mut f32>,
    a: View<*const f32>,
    b: View<*const f32>,
    add: bool,
) {
    debug_assert_eq!(dst.cs, 1);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract (`suits_outer` checked AVX-512F).
    unsafe {
        imp::run_outer((m, n, k), dst, a, b, add)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (m, n, k, dst, a, b, add);
        unreachable!("sgemm::outer: AVX-512 only")
    }
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::{View, DC, DR, OR, OV};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn run(
        (m, n, k): (usize, usize, usize),
        dst: View<*mut f32>,
        a: View<*const f32>,
        b: View<*const f32>,
        add: bool,
    ) {
        for j0 in (0..n).step_by(DC) {
            let c = DC.min(n - j0);
            for i0 in (0..m).step_by(DR) {
                let r = DR.min(m - i0);
                // SAFETY: the caller's contract covers rows i0..i0 + r of `a`, columns
                // j0..j0 + c of `b` and that block of `dst`.
                unsafe {
                    let av = View {
                        ptr: a.ptr.add(i0 * a.rs),
                        ..a
                    };
                    let bv = View {
                        ptr: b.ptr.add(j0 * b.cs),
                        ..b
                    };
                    let d = View {
                        ptr: dst.ptr.add(i0 * dst.rs + j0 * dst.cs),
                        ..dst
                    };
                    macro_rules! by_size {
                        ($($r:literal),*) => {
                            match (r, c) {
                                $(
                                    ($r, 4) => block::<$r, 4>(k, av, bv, d, add),
                                    ($r, 3) => block::<$r, 3>(k, av, bv, d, add),
                                    ($r, 2) => block::<$r, 2>(k, av, bv, d, add),
                                    ($r, _) => block::<$r, 1>(k, av, bv, d, add),
                                )*
                                _ => unreachable!("block sizes are 1..=4"),
                            }
                        };
                    }
                    by_size!(4, 3, 2, 1);
                }
            }
        }
    }

    pub(super) unsafe fn run_outer(
        (m, n, k): (usize, usize, usize),
        dst: View<*mut f32>,
        a: View<*const f32>,
        b: View<*const f32>,
        add: bool,
    ) {
        // Column blocks outside row blocks: the `k x 64` panel of `b` stays in L1 while the
        // row blocks of `a` stream past it.
        for j0 in (0..n).step_by(16 * OV) {
            let c = (16 * OV).min(n - j0);
            let tail = c % 16;
            let last: __mmask16 = if tail == 0 {
                0xffff
            } else {
                (1u16 << tail) - 1
            };
            for i0 in (0..m).step_by(OR) {
                let r = OR.min(m - i0);
                // SAFETY: the caller's contract covers rows i0..i0 + r of `a`, columns
                // j0..j0 + c of `b` and that block of `dst`.
                unsafe {
                    let ap = a.ptr.add(i0);
                    let bp = b.ptr.add(j0);
                    let d = dst.ptr.add(i0 * dst.rs + j0);
                    let args = (k, ap, a.cs, bp, b.rs, d, dst.rs, last, add);
                    macro_rules! by_size {
                        ($($r:literal),*) => {
                            match (r, c.div_ceil(16)) {
                                $(
                                    ($r, 4) => outer_block::<$r, 4>(args),
                                    ($r, 3) => outer_block::<$r, 3>(args),
                                    ($r, 2) => outer_block::<$r, 2>(args),
                                    ($r, _) => outer_block::<$r, 1>(args),
                                )*
                                _ => unreachable!("block sizes are 1..=4"),
                            }
                        };
                    }
                    by_size!(4, 3, 2, 1);
                }
            }
        }
    }

    type OuterArgs = (
        usize,
        *const f32,
        usize,
        *const f32,
        usize,
        *mut f32,
        usize,
        __mmask16,
        bool,
    );

    /// `dst[0..R, 0..16 V]` (`+=` when `add`) = `a[0..R, 0..k] @ b[0..k, 0..16 V]`, `a` read
    /// down its contiguous columns (stride `lda` between them), `b` along its contiguous rows
    /// (stride `ldb`); the last vector of each row masked by `last`. Per inner step: `V`
    /// vector loads of `b`, `R` broadcasts of `a`, `R V` FMAs into registers. Not inlined,
    /// for the reason [`block`] gives.
    #[target_feature(enable = "avx512f")]
    #[inline(never)]
    unsafe fn outer_block<const R: usize, const V: usize>(
        (k, a, lda, b, ldb, dst, ldd, last, add): OuterArgs,
    ) {
        // SAFETY: the loads read `a[0..R, p]` and `b[p, 0..16 V]` (the last vector masked to
        // the block's columns) for `p < k`; stores touch `dst[0..R, ..]` under the same
        // mask; all valid per the caller.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); V]; R];
            for p in 0..k {
                let (ap, bp) = (a.add(p * lda), b.add(p * ldb));
                let mut bv = [_mm512_setzero_ps(); V];
                for (v, x) in bv.iter_mut().enumerate() {
                    *x = if v + 1 < V {
                        _mm512_loadu_ps(bp.add(16 * v))
                    } else {
                        _mm512_maskz_loadu_ps(last, bp.add(16 * v))
                    };
                }
                for (i, row) in acc.iter_mut().enumerate() {
                    let ai = _mm512_set1_ps(*ap.add(i));
                    for (s, &x) in row.iter_mut().zip(&bv) {
                        *s = _mm512_fmadd_ps(ai, x, *s);
                    }
                }
            }
            for (i, row) in acc.iter().enumerate() {
                for (v, &s) in row.iter().enumerate() {
                    let d = dst.add(i * ldd + 16 * v);
                    let mask = if v + 1 < V { 0xffff } else { last };
                    let s = if add {
                        _mm512_add_ps(_mm512_maskz_loadu_ps(mask, d), s)
                    } else {
                        s
                    };
                    _mm512_mask_storeu_ps(d, mask, s);
                }
            }
        }
    }

    /// `dst[0..R, 0..C]` (`+=` when `add`) = dot products of `R` contiguous rows of `a` with `C` contiguous
    /// columns of `b`, each `k` long (the last `k % 16` through masked loads). Not inlined:
    /// one function per block size keeps every accumulator in a register (inlined into the
    /// dispatch, LLVM spilled them).
    #[target_feature(enable = "avx512f")]
    #[inline(never)]
    unsafe fn block<const R: usize, const C: usize>(
        k: usize,
        a: View<*const f32>,
        b: View<*const f32>,
        dst: View<*mut f32>,
        add: bool,
    ) {
        // SAFETY: loads stay inside the first `k` elements of each row of `a` and column of
        // `b` (the tail is masked); stores touch `dst[0..R, 0..C]`; all valid per the caller.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); C]; R];
            // R row vectors live, then one column vector at a time: 16 + 4 + 1 registers
            let mut step = |p: usize, mask: __mmask16| {
                let mut x = [_mm512_setzero_ps(); R];
                for (i, v) in x.iter_mut().enumerate() {
                    *v = _mm512_maskz_loadu_ps(mask, a.ptr.add(i * a.rs + p));
                }
                for j in 0..C {
                    let v = _mm512_maskz_loadu_ps(mask, b.ptr.add(j * b.cs + p));
                    for (row, &xi) in acc.iter_mut().zip(&x) {
                        row[j] = _mm512_fmadd_ps(xi, v, row[j]);
                    }
                }
            };
            let mut p = 0;
            while p + 16 <= k {
                step(p, 0xffff);
                p += 16;
            }
            if p < k {
                step(p, ((1u32 << (k - p)) - 1) as __mmask16);
            }
            for (i, row) in acc.iter().enumerate() {
                if C == 4 && dst.cs == 1 {
                    // the four sums across lanes at once: interleave and add pairwise
                    // (13 instructions instead of 4 full reductions, ~32: the MLP forward
                    // `[64, 784] @ [784, 128]` ~5 % faster)
                    let (a, b, c, d) = (row[0], row[1], row[2], row[3]);
                    let x = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
                    let y = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
                    let (xd, yd) = (_mm512_castps_pd(x), _mm512_castps_pd(y));
                    let z = _mm512_add_ps(
                        _mm512_castpd_ps(_mm512_unpacklo_pd(xd, yd)),
                        _mm512_castpd_ps(_mm512_unpackhi_pd(xd, yd)),
                    );
                    let zd = _mm512_castps_pd(z);
                    let h = _mm256_add_ps(
                        _mm256_castpd_ps(_mm512_castpd512_pd256(zd)),
                        _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(zd)),
                    );
                    let q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
                    let p = dst.ptr.add(i * dst.rs);
                    let q = if add {
                        _mm_add_ps(_mm_loadu_ps(p), q)
                    } else {
                        q
                    };
                    _mm_storeu_ps(p, q);
                    continue;
                }
                for (j, &s) in row.iter().enumerate() {
                    let d = dst.ptr.add(i * dst.rs + j * dst.cs);
                    let v = _mm512_reduce_add_ps(s);
                    *d = if add { *d + v } else { v };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::matmul::tests::{pattern, reference};

    /// A kernel's signature ([`dot`], [`outer`]).
    type Kernel =
        unsafe fn((usize, usize, usize), View<*mut f32>, View<*const f32>, View<*const f32>, bool);

    /// Run `kernel` on `a` and `b` (views of buffers that hold every element the product
    /// reads), overwriting then adding to an output of row stride `n + 3` whose padding holds
    /// NaN and must stay untouched, and check it against the f64 product `want`.
    fn check(
        kernel: Kernel,
        (m, n, k): (usize, usize, usize),
        a: View<*const f32>,
        b: View<*const f32>,
        want: &[f64],
    ) {
        let ldd = n + 3;
        // overwrite, then add to an output holding 1.5 everywhere (padding stays NaN)
        for add in [false, true] {
            let start = if add { 1.5 } else { f32::NAN };
            let mut c: Vec<f32> = (0..m * ldd)
                .map(|i| if i % ldd < n { start } else { f32::NAN })
                .collect();
            let dst = View {
                ptr: c.as_mut_ptr(),
                rs: ldd,
                cs: 1,
            };
            // SAFETY: the caller checked the kernel's `suits` and passes operands valid for
            // the whole product; `c` has m rows of `ldd >= n` with unit column stride.
            unsafe { kernel((m, n, k), dst, a, b, add) };
            for i in 0..m {
                for j in 0..ldd {
                    let got = c[i * ldd + j];
                    if j >= n {
                        assert!(got.is_nan(), "{m}x{n}x{k}: padding written at [{i}, {j}]");
                        continue;
                    }
                    let w = want[i * n + j] + if add { 1.5 } else { 0.0 };
                    assert!(
                        (got as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                        "{m}x{n}x{k} add {add} [{i}, {j}]: {got} vs {w}"
                    );
                }
            }
        }
    }

    /// Every block size (rows and columns not multiples of 4), inner dimensions with and
    /// without a masked tail, and an output written with a row stride wider than `n` (the
    /// padding must stay untouched).
    #[test]
    fn dot_matches_reference() {
        if crate::backend::cpu::simd::level() < 2 {
            eprintln!("no AVX-512F here: nothing to test");
            return;
        }
        for &(m, n, k) in &[
            (64, 128, 784),
            (1, 1, 512),
            (5, 7, 513),
            (7, 6, 527),
            (13, 3, 1000),
        ] {
            let a = pattern(m * k, 7, 13, 8.0);
            // `b` stored as [n, k]: the kernel reads it as its transpose
            let b = pattern(n * k, 5, 11, 4.0);
            assert!(suits(m, n, k, (k, 1), (1, k)));
            let b_kn: Vec<f32> = (0..k * n).map(|i| b[(i % n) * k + i / n]).collect();
            let want = reference(&a, &b_kn, (m, n, k));
            // `a` is [m, k]; `b` = [n, k] read as its transpose [k, n] (row stride 1,
            // column stride k)
            let av = View {
                ptr: a.as_ptr(),
                rs: k,
                cs: 1,
            };
            let bv = View {
                ptr: b.as_ptr(),
                rs: 1,
                cs: k,
            };
            check(dot, (m, n, k), av, bv, &want);
        }
    }

    /// Every block size of the outer kernel (rows not a multiple of 4, columns with and
    /// without a partial vector and a partial 64-column block), inner dimensions from 1 to
    /// the longest it takes, strided operands, and an output row stride wider than `n` whose
    /// padding must stay untouched.
    #[test]
    fn outer_matches_reference() {
        if crate::backend::cpu::simd::level() < 2 {
            eprintln!("no AVX-512F here: nothing to test");
            return;
        }
        for &(m, n, k) in &[
            (128, 784, 64),
            (1, 1, 1),
            (5, 17, 3),
            (7, 64, 256),
            (10, 128, 64),
            (3, 100, 31),
            (9, 65, 7),
        ] {
            // `a` stored as [k, lda] (its transpose, with padding), `b` as [k, ldb]
            let (lda, ldb) = (m + 2, n + 5);
            let at = pattern(k * lda, 7, 13, 8.0);
            let b = pattern(k * ldb, 5, 11, 4.0);
            assert!(suits_outer(m, n, k, (1, lda), (ldb, 1)));
            let a_mk: Vec<f32> = (0..m * k).map(|i| at[(i % k) * lda + i / k]).collect();
            let b_kn: Vec<f32> = (0..k * n).map(|i| b[(i / n) * ldb + i % n]).collect();
            let want = reference(&a_mk, &b_kn, (m, n, k));
            // `a[i, p]` = `at[p * lda + i]`, `b[p, j]` = `b[p * ldb + j]`
            let av = View {
                ptr: at.as_ptr(),
                rs: 1,
                cs: lda,
            };
            let bv = View {
                ptr: b.as_ptr(),
                rs: ldb,
                cs: 1,
            };
            check(outer, (m, n, k), av, bv, &want);
        }
    }

    #[test]
    fn suits_only_the_measured_layout() {
        let avx512 = crate::backend::cpu::simd::level() >= 2;
        assert_eq!(suits(64, 128, 784, (784, 1), (1, 784)), avx512);
        // inner dimension too short, output too large, wrong layouts
        assert!(!suits(64, 128, 128, (128, 1), (1, 128)));
        assert!(!suits(1024, 512, 784, (784, 1), (1, 784)));
        assert!(!suits(64, 128, 784, (1, 64), (1, 784)));
        assert!(!suits(64, 128, 784, (784, 1), (128, 1)));
        assert_eq!(suits_outer(128, 784, 64, (1, 128), (784, 1)), avx512);
        // inner dimension too long, wrong layouts
        assert!(!suits_outer(128, 784, 512, (1, 128), (784, 1)));
        assert!(!suits_outer(128, 784, 64, (64, 1), (784, 1)));
        assert!(!suits_outer(128, 784, 64, (1, 128), (1, 64)));
    }
}
