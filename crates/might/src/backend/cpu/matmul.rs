//! Matrix products through the `gemm` crate, which takes arbitrary row/column strides: transposed
//! or sliced operands are multiplied in place, never copied.

use super::strided::RowPlan;
use super::{bgemm, sgemm, threads};
use crate::Layout;
use gemm::Parallelism;
use half::f16;

/// Element types the `gemm` crate multiplies natively.
pub trait GemmDType: Copy + Send + Sync + Default + std::ops::Add<Output = Self> + 'static {
    const ZERO: Self;
    const ONE: Self;
}
impl GemmDType for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
}
impl GemmDType for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
}
impl GemmDType for f16 {
    const ZERO: Self = f16::ZERO;
    const ONE: Self = f16::ONE;
}

/// Work (m*n*k) above which one product is split across threads.
const GEMM_PAR_WORK: usize = 64 * 64 * 64;

#[derive(Clone, Copy)]
struct Operand {
    off: usize,
    rs: usize,
    cs: usize,
}

/// dst[m, n] (dense, row-major, at `dst`) = lhs[m, k] @ rhs[k, n] (+ `bias[n]` on every row),
/// on `threads` threads.
#[allow(clippy::too_many_arguments)]
fn gemm_one<T: GemmDType>(
    (m, n, k): (usize, usize, usize),
    dst: &mut [T],
    lhs: &[T],
    a: Operand,
    rhs: &[T],
    b: Operand,
    threads: usize,
    bias: Option<&[T]>,
) {
    debug_assert_eq!(dst.len(), m * n);
    if m == 0 || n == 0 {
        return;
    }
    if let Some(bias) = bias {
        assert_eq!(bias.len(), n, "matmul: bias length");
    }
    if k == 0 {
        for row in dst.chunks_exact_mut(n) {
            match bias {
                Some(bias) => row.copy_from_slice(bias),
                None => row.fill(T::ZERO),
            }
        }
        return;
    }
    // bounds: the largest element each operand reaches must be inside its slice
    let a_end = a.off + (m - 1) * a.rs + (k - 1) * a.cs;
    let b_end = b.off + (k - 1) * b.rs + (n - 1) * b.cs;
    assert!(
        a_end < lhs.len() && b_end < rhs.len(),
        "matmul: operand out of bounds"
    );
    // bf16 operands (`MatmulPrecision::Medium`) are chosen for the whole product, so every
    // block of it, on whichever thread, rounds the same way
    let bf16 = is_f32::<T>() && bgemm::suits(m, n, k);
    let own = own_kernel::<T>((m, n, k), a, b, bf16);
    // `x[m, k] @ W[n, k]^T` with few rows (a linear layer on a small batch): the gemm crate
    // runs it ~10-70 % faster as `W @ x^T` into a row-major [n, m] (AVX2 gemm 0.18: m = 16 / 64
    // at k = 784: 49 -> 84 and 79 -> 86-97 GFLOP/s; no gain at m >= 512, where the transposing
    // copy would cost as much). The copy is m * n elements against 2 * m * n * k flops.
    if own == Own::Crate && m < n && m <= 256 && a.cs == 1 && b.rs == 1 && b.cs != 1 {
        let mut t = vec![T::ZERO; m * n];
        let wa = Operand {
            off: b.off,
            rs: b.cs,
            cs: b.rs,
        };
        let xb = Operand {
            off: a.off,
            rs: a.cs,
            cs: a.rs,
        };
        gemm_one((n, m, k), &mut t, rhs, wa, lhs, xb, threads, None);
        for (j, row) in t.chunks_exact(m).enumerate() {
            let bj = bias.map_or(T::ZERO, |b| b[j]);
            for (i, &v) in row.iter().enumerate() {
                dst[i * n + j] = v + bj;
            }
        }
        return;
    }
    let tile = Tile {
        dst: dst.as_mut_ptr(),
        ldd: n,
        lhs: lhs.as_ptr(),
        a,
        rhs: rhs.as_ptr(),
        b,
        k,
        bias: bias.map_or(std::ptr::null(), |b| b.as_ptr()),
        bf16,
    };
    // (not where the dot kernel takes the whole product: it needs the whole inner dimension)
    if threads >= 2 && k >= 512 && m * n <= 128 * k && own != Own::Dot {
        return split_inner(&tile, (m, n, k), dst, threads);
    }
    let parts = threads.min(if n >= m {
        n.div_ceil(32)
    } else {
        m.div_ceil(32)
    });
    if parts <= 1 {
        // SAFETY: the whole product, checked in bounds above; `dst` is a fresh `&mut`.
        unsafe { tile.run(0..m, 0..n) };
        return;
    }
    // Split the output into one block per thread, each an independent single-threaded
    // product. Measured against the gemm crate's own threading: as fast on square sizes and
    // 1.5x faster on the thin shapes of small models (e.g. [64, 784] @ [784, 128]), whose
    // k-loop it does not split. Cut across the longer side: every block re-packs the operand
    // it shares with the others, and that one is the smaller.
    // (columns in whole 16-float vectors for the outer kernel: one masked tail per block)
    let (len, align) = if n < m {
        (m, 16)
    } else if own == Own::Outer {
        (n, 16)
    } else {
        (n, 8)
    };
    let step = len.div_ceil(parts).div_ceil(align) * align;
    let tile = &tile;
    // SAFETY (both calls): the blocks are disjoint ranges of rows or columns of `dst`, inside
    // [0, m) x [0, n); the operands are only read.
    let run = move |i: usize| unsafe {
        let r = i * step..((i + 1) * step).min(len);
        if n >= m {
            tile.run(0..m, r)
        } else {
            tile.run(r, 0..n)
        }
    };
    super::team::run(threads, len.div_ceil(step), &run);
}

/// A product with a long inner dimension and a small output (the weight gradient `gᵀ @ x`
/// of a transformer layer, `[128, 1024] @ [1024, 128]`) split along the inner dimension: each
/// thread multiplies one slice of it into its own output, then the partial outputs are
/// added. Splitting the output instead made every thread pack the whole shared operand and
/// scaled worse (2 threads, that shape: ~155 against 170-245 us; a small GPT step 42.5 ->
/// 40.8 ms).
fn split_inner<T: GemmDType>(
    tile: &Tile<T>,
    (m, n, k): (usize, usize, usize),
    dst: &mut [T],
    threads: usize,
) {
    let parts = threads;
    let step = k.div_ceil(parts);
    // every element of each partial output is written by its product
    let mut partial = super::pool::output::<T>((parts - 1) * m * n);
    let tiles: Vec<Tile<T>> = (0..parts)
        .map(|i| {
            let k0 = (i * step).min(k);
            Tile {
                dst: if i == 0 {
                    dst.as_mut_ptr()
                } else {
                    // SAFETY: part i >= 1 owns `partial[(i - 1) * m * n..][..m * n]`.
                    unsafe { partial.as_mut_ptr().add((i - 1) * m * n) }
                },
                a: Operand {
                    off: tile.a.off + k0 * tile.a.cs,
                    ..tile.a
                },
                b: Operand {
                    off: tile.b.off + k0 * tile.b.rs,
                    ..tile.b
                },
                k: step.min(k - k0),
                // part 0 writes `dst` (with the bias); the partial outputs are plain products
                bias: if i == 0 { tile.bias } else { std::ptr::null() },
                ..*tile
            }
        })
        .collect();
    let tiles = &tiles;
    let run = move |i: usize| {
        let t = &tiles[i];
        if t.k == 0 {
            // SAFETY: this part's output block, `m * n` elements, is its own.
            let d = unsafe { std::slice::from_raw_parts_mut(t.dst, m * n) };
            for (j, v) in d.iter_mut().enumerate() {
                // SAFETY: a non-null bias holds `n` values (`gemm_one` checked)
                *v = if t.bias.is_null() {
                    T::ZERO
                } else {
                    unsafe { *t.bias.add(j % n) }
                };
            }
        } else {
            // SAFETY: the whole `[m, n]` block of this part's own output; its inner slice
            // `k0..k0 + k` lies inside the operands checked by `gemm_one`.
            unsafe { t.run(0..m, 0..n) };
        }
    };
    super::team::run(threads, parts, &run);
    for p in partial.chunks_exact(m * n) {
        for (d, &v) in dst.iter_mut().zip(p) {
            *d = *d + v;
        }
    }
}

/// Which of our own AVX-512 kernels runs this block of a product instead of the `gemm`
/// crate (f32 only, the layouts and sizes each kernel's `suits` names).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Own {
    Crate,
    /// [`sgemm::dot`]: rows of `a` and columns of `b` contiguous, long inner dimension.
    Dot,
    /// [`sgemm::outer`]: columns of `a` and rows of `b` contiguous, short inner dimension.
    Outer,
    /// [`bgemm::gemm`]: bf16 operands, f32 sums, at `MatmulPrecision::Medium` (any layout;
    /// chosen per product, not per block).
    Bf16,
}

fn is_f32<T: 'static>() -> bool {
    std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
}

/// The kernel for a product or a block of one; `bf16`: the product rounds its operands.
fn own_kernel<T: 'static>(
    (m, n, k): (usize, usize, usize),
    a: Operand,
    b: Operand,
    bf16: bool,
) -> Own {
    if bf16 {
        Own::Bf16
    } else if !is_f32::<T>() {
        Own::Crate
    } else if sgemm::suits(m, n, k, (a.rs, a.cs), (b.rs, b.cs)) {
        Own::Dot
    } else if sgemm::suits_outer(m, n, k, (a.rs, a.cs), (b.rs, b.cs)) {
        Own::Outer
    } else {
        Own::Crate
    }
}

/// One product as raw parts, so disjoint blocks of the output can run on different threads.
#[derive(Clone, Copy)]
struct Tile<T> {
    dst: *mut T,
    /// Row stride of `dst`.
    ldd: usize,
    lhs: *const T,
    a: Operand,
    rhs: *const T,
    b: Operand,
    k: usize,
    /// Null, or `n` values added to every output row (written into the block first, then
    /// the product adds to it: the block is warm in this thread's cache).
    bias: *const T,
    /// Run every block through [`bgemm`] (decided once for the whole product).
    bf16: bool,
}

// SAFETY: a `Tile` is only shared while its owner (`gemm_one`) holds `&mut` to the output and
// `&` to the operands; the threads write disjoint output blocks.
unsafe impl<T: Send> Send for Tile<T> {}
unsafe impl<T: Sync> Sync for Tile<T> {}

impl<T: GemmDType> Tile<T> {
    /// dst[rows, cols] = lhs[rows, :] @ rhs[:, cols] (+ bias[cols]), single-threaded.
    ///
    /// # Safety
    /// `rows` x `cols` must lie inside the product checked by `gemm_one`, and no other thread
    /// may touch that block of `dst` meanwhile.
    unsafe fn run(&self, rows: std::ops::Range<usize>, cols: std::ops::Range<usize>) {
        let (a, b) = (self.a, self.b);
        let own = own_kernel::<T>((rows.len(), cols.len(), self.k), a, b, self.bf16);
        // (the bf16 kernel adds the bias itself, from registers)
        let acc = !self.bias.is_null() && own != Own::Bf16;
        if acc {
            for i in rows.clone() {
                // SAFETY: row `i`, columns `cols` of `dst` are this block's (caller's
                // contract); the bias holds `n >= cols.end` values.
                unsafe {
                    let d = self.dst.add(i * self.ldd + cols.start);
                    std::ptr::copy_nonoverlapping(self.bias.add(cols.start), d, cols.len());
                }
            }
        }
        if own != Own::Crate {
            let f = |p: *const T| p as *const f32;
            let dst = sgemm::View {
                ptr: self.dst.add(rows.start * self.ldd + cols.start) as *mut f32,
                rs: self.ldd,
                cs: 1,
            };
            let lhs = sgemm::View {
                ptr: f(self.lhs.add(a.off + rows.start * a.rs)),
                rs: a.rs,
                cs: a.cs,
            };
            let rhs = sgemm::View {
                ptr: f(self.rhs.add(b.off + cols.start * b.cs)),
                rs: b.rs,
                cs: b.cs,
            };
            let size = (rows.len(), cols.len(), self.k);
            // SAFETY: `T` is f32 and the kernel's `suits` holds (`own_kernel`); `dst` has
            // contiguous rows; the block's elements are the ones `gemm` would touch below
            // (caller's contract).
            unsafe {
                match own {
                    Own::Dot => sgemm::dot(size, dst, lhs, rhs, acc),
                    Own::Outer => sgemm::outer(size, dst, lhs, rhs, acc),
                    _ => bgemm::gemm(
                        size,
                        dst,
                        lhs,
                        rhs,
                        false,
                        if self.bias.is_null() {
                            std::ptr::null()
                        } else {
                            self.bias.add(cols.start) as *const f32
                        },
                    ),
                }
            }
            return;
        }
        // SAFETY: caller's contract; gemm reads lhs/rhs through (rs, cs) within the checked
        // bounds and writes only dst[rows, cols] (row stride `ldd`, column stride 1).
        unsafe {
            gemm::gemm(
                rows.len(),
                cols.len(),
                self.k,
                self.dst.add(rows.start * self.ldd + cols.start),
                1,
                self.ldd as isize,
                acc,
                self.lhs.add(a.off + rows.start * a.rs),
                a.cs as isize,
                a.rs as isize,
                self.rhs.add(b.off + cols.start * b.cs),
                b.cs as isize,
                b.rs as isize,
                if acc { T::ONE } else { T::ZERO },
                T::ONE,
                false,
                false,
                false,
                Parallelism::None,
            )
        }
    }
}

/// Batched product. `ll` is `[batch.., m, k]` and `rl` is `[batch.., k, n]`, both already
/// broadcast to the same batch dims. Returns the contiguous `[batch.., m, n]` result.
pub fn matmul<T: GemmDType>(lhs: &[T], ll: &Layout, rhs: &[T], rl: &Layout) -> Vec<T> {
    matmul_into(lhs, ll, rhs, rl, None)
}

/// [`matmul`] plus `bias` (`n` values) added to every row, in the product itself: each thread
/// sets its block of the output to the bias and the GEMM adds to it, so a linear layer's bias
/// costs no pass of its own over the output (a separate broadcast add read and wrote all of
/// it again: 3.7 ms of a 70 ms char-GPT step).
pub fn matmul_bias<T: GemmDType>(
    lhs: &[T],
    ll: &Layout,
    rhs: &[T],
    rl: &Layout,
    bias: &[T],
) -> Vec<T> {
    matmul_into(lhs, ll, rhs, rl, Some(bias))
}

fn matmul_into<T: GemmDType>(
    lhs: &[T],
    ll: &Layout,
    rhs: &[T],
    rl: &Layout,
    bias: Option<&[T]>,
) -> Vec<T> {
    let r = ll.dims().len();
    let (m, k, n) = (ll.dims()[r - 2], ll.dims()[r - 1], rl.dims()[r - 1]);
    let batch_dims = &ll.dims()[..r - 2];
    let nb: usize = batch_dims.iter().product();
    // every element is written by gemm (which does not read the destination unless there
    // is a bias: then each block is first set to it)
    let mut out = super::pool::output::<T>(nb * m * n);
    if out.is_empty() {
        return out;
    }
    let (ls, rs) = (ll.strides(), rl.strides());
    let a0 = Operand {
        off: ll.offset(),
        rs: ls[r - 2],
        cs: ls[r - 1],
    };
    let b0 = Operand {
        off: rl.offset(),
        rs: rs[r - 2],
        cs: rs[r - 1],
    };
    let nthreads = threads::get_num_threads();

    // A shared rhs and a lhs whose batch dims fold into its rows: one big product
    // (the `[B, T, C] @ [C, D]` case of every linear layer).
    let rhs_shared = rs[..r - 2].iter().all(|&s| s == 0);
    if nb > 1 && rhs_shared {
        let mut d: Vec<usize> = batch_dims.to_vec();
        d.push(m);
        let mut st: Vec<usize> = ls[..r - 2].to_vec();
        st.push(a0.rs);
        let p = RowPlan::new(&d, [&st]);
        if p.rows <= 1 {
            let rows = nb * m;
            let a = Operand {
                rs: p.inner[0],
                ..a0
            };
            let t = threads_for(rows * n * k, nthreads);
            gemm_one((rows, n, k), &mut out, lhs, a, rhs, b0, t, bias);
            return out;
        }
    }

    let batch = RowPlan::new(batch_dims, [&ls[..r - 2], &rs[..r - 2]]);
    let mut offs = Vec::with_capacity(nb);
    batch.for_each_offset([a0.off, b0.off], |o| offs.push(o));
    let work = m * n * k;
    if nb > 1 && nthreads > 1 && work * nb >= GEMM_PAR_WORK && work < GEMM_PAR_WORK * 4 {
        // many small products: one thread each
        threads::for_each_chunk(&mut out, m * n, |i, o| {
            let [la, rb] = offs[i];
            let a = Operand { off: la, ..a0 };
            let b = Operand { off: rb, ..b0 };
            gemm_one((m, n, k), o, lhs, a, rhs, b, 1, bias)
        });
    } else {
        let t = threads_for(work, nthreads);
        for (o, &[la, rb]) in out.chunks_mut(m * n).zip(&offs) {
            let a = Operand { off: la, ..a0 };
            let b = Operand { off: rb, ..b0 };
            gemm_one((m, n, k), o, lhs, a, rhs, b, t, bias)
        }
    }
    out
}

/// Threads for one product of `work` multiply-adds: small ones stay on the caller (waking a
/// worker costs more than it saves).
fn threads_for(work: usize, nthreads: usize) -> usize {
    if work >= GEMM_PAR_WORK {
        nthreads
    } else {
        1
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::{DType, Tensor};

    /// `len` test values `((i * mul) % modulo - modulo / 2) / scale`: small, varied, exact.
    pub(crate) fn pattern(len: usize, mul: usize, modulo: usize, scale: f32) -> Vec<f32> {
        (0..len)
            .map(|i| ((i * mul % modulo) as f32 - (modulo / 2) as f32) / scale)
            .collect()
    }

    /// `a @ b` in f64 by the definition (`a: [m, k]`, `b: [k, n]`, both row-major).
    pub(crate) fn reference(a: &[f32], b: &[f32], (m, n, k): (usize, usize, usize)) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                    .sum();
            }
        }
        c
    }

    /// Products with a long inner dimension and a small output, split along the inner
    /// dimension on two threads (an odd `k`, so the slices differ in length), with plain and
    /// transposed operands (the weight-gradient layout `gᵀ @ x`), against f64.
    #[test]
    fn inner_split_matches_reference() {
        let before = crate::get_num_threads();
        let shapes: &[(usize, usize, usize)] = if cfg!(miri) {
            &[(3, 5, 17)] // Miri: the scalar path, at a size it finishes
        } else {
            &[(20, 30, 601), (3, 70, 1024), (65, 128, 515)]
        };
        for &(m, n, k) in shapes {
            let av = pattern(m * k, 7, 23, 8.0);
            let bv = pattern(k * n, 5, 19, 8.0);
            let want = reference(&av, &bv, (m, n, k));
            let a = Tensor::from_vec(av.clone(), [m, k]).unwrap();
            let b = Tensor::from_vec(bv.clone(), [k, n]).unwrap();
            // the same values as transposed views of contiguous [k, m] and [n, k] buffers
            let at = a.t().unwrap().contiguous().unwrap().t().unwrap();
            let bt = b.t().unwrap().contiguous().unwrap().t().unwrap();
            for threads in [1, 2] {
                crate::set_num_threads(threads);
                for (x, y) in [(&a, &b), (&at, &b), (&a, &bt), (&at, &bt)] {
                    let got = x.matmul(y).unwrap().to_dtype(DType::F32).unwrap();
                    let got = got.to_vec::<f32>().unwrap();
                    for (g, w) in got.iter().zip(&want) {
                        assert!(
                            (*g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                            "{m}x{n}x{k} {threads}T: {g} vs {w}"
                        );
                    }
                }
            }
        }
        crate::set_num_threads(before);
    }

    /// Through `Tensor::matmul` (the linear-layer layout `x @ Wᵀ`), on one thread and split
    /// across two (each thread runs the AVX-512 dot kernel, `sgemm`, on a block of columns), against f64.
    #[test]
    fn matmul_of_a_transposed_weight() {
        let (m, n, k) = if cfg!(miri) {
            (3, 7, 20)
        } else {
            (33, 70, 600)
        };
        let xv = pattern(m * k, 7, 19, 16.0);
        let wv = pattern(n * k, 3, 17, 8.0);
        let wt: Vec<f32> = (0..k * n).map(|i| wv[(i % n) * k + i / n]).collect();
        let want = reference(&xv, &wt, (m, n, k));
        let x = Tensor::from_vec(xv, [m, k]).unwrap();
        let w = Tensor::from_vec(wv, [n, k]).unwrap();
        let before = crate::get_num_threads();
        for threads in [1, 2] {
            crate::set_num_threads(threads);
            let y = x.matmul(&w.t().unwrap()).unwrap();
            assert_eq!(y.dims(), &[m, n]);
            let got = y.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (*g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                    "{threads}T: {g} vs {w}"
                );
            }
        }
        crate::set_num_threads(before);
    }

    /// Through `Tensor::matmul` in the weight-gradient layout `gᵀ @ x` (the outer-product
    /// kernel, `sgemm::outer`), on one thread and split by columns across two, against f64.
    #[test]
    fn matmul_of_a_transposed_gradient() {
        let before = crate::get_num_threads();
        let shapes: &[(usize, usize, usize)] = if cfg!(miri) {
            &[(4, 9, 6)]
        } else {
            &[(128, 784, 64), (37, 300, 200), (10, 128, 64)]
        };
        for &(m, n, k) in shapes {
            let gv = pattern(k * m, 7, 19, 16.0);
            let xv = pattern(k * n, 3, 17, 8.0);
            let gt: Vec<f32> = (0..m * k).map(|i| gv[(i % k) * m + i / k]).collect();
            let want = reference(&gt, &xv, (m, n, k));
            let g = Tensor::from_vec(gv, [k, m]).unwrap();
            let x = Tensor::from_vec(xv, [k, n]).unwrap();
            for threads in [1, 2] {
                crate::set_num_threads(threads);
                let y = g.t().unwrap().matmul(&x).unwrap();
                assert_eq!(y.dims(), &[m, n]);
                let got = y.to_vec::<f32>().unwrap();
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (*g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                        "{m}x{n}x{k} {threads}T: {g} vs {w}"
                    );
                }
            }
        }
        crate::set_num_threads(before);
    }
}
