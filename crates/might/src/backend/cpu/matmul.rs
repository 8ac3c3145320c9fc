//! Matrix products through the `gemm` crate, which takes arbitrary row/column strides: transposed
//! or sliced operands are multiplied in place, never copied.

use super::strided::RowPlan;
use super::threads;
use crate::Layout;
use gemm::Parallelism;
use half::f16;
use rayon::prelude::*;

/// Element types the `gemm` crate multiplies natively.
pub trait GemmDType: Copy + Send + Sync + Default + 'static {
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

/// dst[m, n] (dense, row-major, at `dst`) = lhs[m, k] @ rhs[k, n].
fn gemm_one<T: GemmDType>(
    (m, n, k): (usize, usize, usize),
    dst: &mut [T],
    lhs: &[T],
    a: Operand,
    rhs: &[T],
    b: Operand,
    par: Parallelism,
) {
    debug_assert_eq!(dst.len(), m * n);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        dst.fill(T::ZERO);
        return;
    }
    // bounds: the largest element each operand reaches must be inside its slice
    let a_end = a.off + (m - 1) * a.rs + (k - 1) * a.cs;
    let b_end = b.off + (k - 1) * b.rs + (n - 1) * b.cs;
    assert!(
        a_end < lhs.len() && b_end < rhs.len(),
        "matmul: operand out of bounds"
    );
    // SAFETY: every element addressed by (off, rs, cs) over [m,k] / [k,n] is inside `lhs` /
    // `rhs` (checked just above, strides are non-negative), `dst` holds exactly m*n elements
    // addressed with rs = n, cs = 1, and `dst` does not alias the inputs (it is a fresh `&mut`).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            false,
            lhs.as_ptr().add(a.off),
            a.cs as isize,
            a.rs as isize,
            rhs.as_ptr().add(b.off),
            b.cs as isize,
            b.rs as isize,
            T::ZERO,
            T::ONE,
            false,
            false,
            false,
            par,
        )
    }
}

/// Batched product. `ll` is `[batch.., m, k]` and `rl` is `[batch.., k, n]`, both already
/// broadcast to the same batch dims. Returns the contiguous `[batch.., m, n]` result.
pub fn matmul<T: GemmDType>(lhs: &[T], ll: &Layout, rhs: &[T], rl: &Layout) -> Vec<T> {
    let r = ll.dims().len();
    let (m, k, n) = (ll.dims()[r - 2], ll.dims()[r - 1], rl.dims()[r - 1]);
    let batch_dims = &ll.dims()[..r - 2];
    let nb: usize = batch_dims.iter().product();
    // every element is written by gemm (which does not read the destination)
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
            let par = par_for(rows * n * k, nthreads);
            threads::install(|| gemm_one((rows, n, k), &mut out, lhs, a, rhs, b0, par));
            return out;
        }
    }

    let batch = RowPlan::new(batch_dims, [&ls[..r - 2], &rs[..r - 2]]);
    let mut offs = Vec::with_capacity(nb);
    batch.for_each_offset([a0.off, b0.off], |o| offs.push(o));
    let work = m * n * k;
    if nb > 1 && nthreads > 1 && work * nb >= GEMM_PAR_WORK && work < GEMM_PAR_WORK * 4 {
        // many small products: one thread each
        threads::install(|| {
            out.par_chunks_mut(m * n)
                .zip(offs.par_iter())
                .for_each(|(o, &[la, rb])| {
                    let a = Operand { off: la, ..a0 };
                    let b = Operand { off: rb, ..b0 };
                    gemm_one((m, n, k), o, lhs, a, rhs, b, Parallelism::None)
                })
        });
    } else {
        let par = par_for(work, nthreads);
        threads::install(|| {
            for (o, &[la, rb]) in out.chunks_mut(m * n).zip(&offs) {
                let a = Operand { off: la, ..a0 };
                let b = Operand { off: rb, ..b0 };
                gemm_one((m, n, k), o, lhs, a, rhs, b, par)
            }
        });
    }
    out
}

fn par_for(work: usize, nthreads: usize) -> Parallelism {
    if nthreads > 1 && work >= GEMM_PAR_WORK {
        Parallelism::Rayon(nthreads)
    } else {
        Parallelism::None
    }
}
