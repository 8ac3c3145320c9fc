//! Our own f32 product for AVX-512 CPUs in the one case where it beats the `gemm` crate: a
//! linear layer's forward `x @ Wᵀ` on a small batch with a long inner dimension (an MNIST
//! MLP's `[64, 784] @ [784, 128]`).
//!
//! Why: there both operands are contiguous along the inner dimension, and each output is a
//! dot product of two contiguous rows. The crate first packs both into its panel layout on
//! every call, which at 64 rows costs ~10 % (96 GFLOP/s at one thread against ~116 of FMA
//! peak; this kernel: 103). Nothing is packed here: a `4 x 4` block of outputs accumulates in
//! 16 registers of 16 partial sums (per 16-float step: 4 + 4 loads, 16 FMAs), summed across
//! lanes once at the end. Column blocks outside row blocks, so the four `W` rows stay in L1.
//!
//! Where it loses (measured, one thread, AVX-512 EPYC): at `k = 128` the final sums across
//! lanes are a third of the work (70 against 111 GFLOP/s at `1024 x 128 x 384`), and with
//! many rows the crate's packing pays off (93 against 103 at `1024 x 512 x 128`). A kernel
//! for the other layouts (right operand with contiguous rows, no packing) was measured too
//! and was no faster than the crate on the MLP and transformer products, so it was dropped.

/// Shortest inner dimension the dot kernel takes.
const MIN_K: usize = 512;
/// Largest output (`m * n`) it takes.
const MAX_MN: usize = 16 * 1024;
/// Output rows and columns one microkernel call produces.
const DR: usize = 4;
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

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::{View, DC, DR};
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
            let ldd = n + 3;
            let b_kn: Vec<f32> = (0..k * n).map(|i| b[(i % n) * k + i / n]).collect();
            let want = reference(&a, &b_kn, (m, n, k));
            // overwrite, then add to an output holding 1.5 everywhere (padding stays NaN)
            for add in [false, true] {
                let start = if add { 1.5 } else { f32::NAN };
                let mut c: Vec<f32> = (0..m * ldd)
                    .map(|i| if i % ldd < n { start } else { f32::NAN })
                    .collect();
                // SAFETY: AVX-512F checked; `a` is [m, k] and `b` = [n, k] read as its
                // transpose [k, n] (row stride 1, column stride k); `c` has m rows of
                // `ldd >= n`.
                unsafe {
                    dot(
                        (m, n, k),
                        View {
                            ptr: c.as_mut_ptr(),
                            rs: ldd,
                            cs: 1,
                        },
                        View {
                            ptr: a.as_ptr(),
                            rs: k,
                            cs: 1,
                        },
                        View {
                            ptr: b.as_ptr(),
                            rs: 1,
                            cs: k,
                        },
                        add,
                    )
                };
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
    }
}
