//! Elementwise kernels: map one, two or three strided inputs into a fresh contiguous output, or
//! update a strided output in place. The per-element function is passed in, so allocating and
//! in-place variants of an op share the same arithmetic.
//!
//! The function is `Copy` and each SIMD loop moves in its own copy (callers write `move`
//! closures, so factors are captured by value): a closure reached through a reference had its
//! captured values reloaded every element, since LLVM could not prove the output stores leave
//! them alone, and the loop stayed scalar (`mul_scalar`, `clamp`, `affine_`: 6-12x slower
//! than `relu`).

use super::strided::RowPlan;
use super::{pool, simd, threads};
use crate::Layout;
use std::sync::Mutex;

/// Elements per parallel task of the contiguous fast paths.
const PAR_CHUNK: usize = 1 << 14;

/// Run `kernel(offset, chunk)` over `out` in chunks of [`PAR_CHUNK`] (in parallel when
/// large), each chunk inside [`simd::run`] so the kernel's loop is compiled 8-wide on AVX2.
fn for_chunks<U: Send>(out: &mut [U], kernel: impl Fn(usize, &mut [U]) + Sync) {
    if threads::parallel(out.len()) {
        threads::for_each_chunk(out, PAR_CHUNK, |i, c| kernel(i * PAR_CHUNK, c));
    } else {
        kernel(0, out);
    }
}

/// Fill a contiguous `out` (of the plan's shape) row by row, in parallel when large.
fn fill_rows<U: Send, const N: usize>(
    out: &mut [U],
    plan: &RowPlan<N>,
    base: [usize; N],
    row: impl Fn(&mut [U], [usize; N]) + Sync,
) {
    let len = plan.len;
    if len == 0 || plan.rows == 0 {
        return;
    }
    if plan.rows == 1 && threads::parallel(len) {
        // one long row: cut it into chunks, each operand's offset advanced by its stride
        let inner = plan.inner;
        threads::for_each_chunk(out, PAR_CHUNK, |c, chunk| {
            row(
                chunk,
                std::array::from_fn(|k| base[k] + c * PAR_CHUNK * inner[k]),
            )
        });
        return;
    }
    if threads::parallel(out.len()) && plan.rows > 1 {
        let chunk_rows = plan.rows.div_ceil(threads::get_num_threads() * 4).max(1);
        threads::for_each_chunk(out, chunk_rows * len, |c, chunk| {
            let r0 = c * chunk_rows;
            let r1 = (r0 + chunk_rows).min(plan.rows);
            let mut i = 0;
            plan.for_each_row(base, r0..r1, |o| {
                row(&mut chunk[i..i + len], o);
                i += len;
            });
        });
    } else {
        let mut i = 0;
        plan.for_each_row(base, 0..plan.rows, |o| {
            row(&mut out[i..i + len], o);
            i += len;
        });
    }
}

/// `out[i] = f(src[i])` for a strided `src`.
pub fn unary_map<T, U, F>(src: &[T], layout: &Layout, f: F) -> Vec<U>
where
    T: Copy + Sync,
    U: Copy + Send + Sync + Default + 'static,
    F: Fn(T) -> U + Sync + Copy,
{
    if let Some((a, b)) = layout.contiguous_range() {
        let s = &src[a..b];
        let mut out = pool::output::<U>(s.len());
        for_chunks(&mut out, |off, o| {
            let s = &s[off..off + o.len()];
            simd::run(
                #[inline(always)]
                move || {
                    for (y, &x) in o.iter_mut().zip(s) {
                        *y = f(x);
                    }
                },
            )
        });
        return out;
    }
    let plan = RowPlan::new(layout.dims(), [layout.strides()]);
    let mut out = pool::output::<U>(layout.numel());
    let st = plan.inner[0];
    fill_rows(&mut out, &plan, [layout.offset()], |o, [s0]| {
        if st == 1 {
            let n = o.len();
            for (y, &x) in o.iter_mut().zip(&src[s0..s0 + n]) {
                *y = f(x);
            }
        } else {
            for (j, y) in o.iter_mut().enumerate() {
                *y = f(src[s0 + j * st]);
            }
        }
    });
    out
}

/// `(out1[i], out2[i]) = f(src[i])` for a contiguous `src`: two results of one evaluation
/// (an activation and its derivative), each into its own buffer.
pub fn unary_map2<T, U, F>(src: &[T], f: F) -> (Vec<U>, Vec<U>)
where
    T: Copy + Sync,
    U: Copy + Send + Sync + Default + 'static,
    F: Fn(T) -> (U, U) + Sync + Copy,
{
    let mut o1 = pool::output::<U>(src.len());
    let mut o2 = pool::output::<U>(src.len());
    let run = |off: usize, y1: &mut [U], y2: &mut [U]| {
        let s = &src[off..off + y1.len()];
        simd::run(
            #[inline(always)]
            move || {
                for ((p, q), &x) in y1.iter_mut().zip(y2.iter_mut()).zip(s) {
                    (*p, *q) = f(x);
                }
            },
        )
    };
    if threads::parallel(src.len()) {
        let pieces: Vec<Mutex<(&mut [U], &mut [U])>> = o1
            .chunks_mut(PAR_CHUNK)
            .zip(o2.chunks_mut(PAR_CHUNK))
            .map(Mutex::new)
            .collect();
        threads::run(pieces.len(), |i| {
            let (p, q) = &mut *pieces[i].lock().unwrap();
            run(i * PAR_CHUNK, p, q)
        });
    } else {
        run(0, &mut o1, &mut o2);
    }
    (o1, o2)
}

/// `out[i] = f(lhs[i], rhs[i])`; both layouts already broadcast to the output shape.
pub fn binary_map<T, U, F>(lhs: &[T], ll: &Layout, rhs: &[T], rl: &Layout, f: F) -> Vec<U>
where
    T: Copy + Sync,
    U: Copy + Send + Sync + Default + 'static,
    F: Fn(T, T) -> U + Sync + Copy,
{
    if let (Some((a0, a1)), Some((b0, b1))) = (ll.contiguous_range(), rl.contiguous_range()) {
        let (l, r) = (&lhs[a0..a1], &rhs[b0..b1]);
        let mut out = pool::output::<U>(l.len());
        for_chunks(&mut out, |off, o| {
            let n = o.len();
            let (l, r) = (&l[off..off + n], &r[off..off + n]);
            simd::run(
                #[inline(always)]
                move || {
                    for ((y, &a), &b) in o.iter_mut().zip(l).zip(r) {
                        *y = f(a, b);
                    }
                },
            )
        });
        return out;
    }
    let plan = RowPlan::new(ll.dims(), [ll.strides(), rl.strides()]);
    let mut out = pool::output::<U>(ll.numel());
    let [sl, sr] = plan.inner;
    fill_rows(
        &mut out,
        &plan,
        [ll.offset(), rl.offset()],
        |o, [l0, r0]| {
            let n = o.len();
            match (sl, sr) {
                (1, 1) => {
                    for ((y, &a), &b) in o.iter_mut().zip(&lhs[l0..l0 + n]).zip(&rhs[r0..r0 + n]) {
                        *y = f(a, b);
                    }
                }
                (1, 0) => {
                    let b = rhs[r0];
                    for (y, &a) in o.iter_mut().zip(&lhs[l0..l0 + n]) {
                        *y = f(a, b);
                    }
                }
                (0, 1) => {
                    let a = lhs[l0];
                    for (y, &b) in o.iter_mut().zip(&rhs[r0..r0 + n]) {
                        *y = f(a, b);
                    }
                }
                _ => {
                    for (j, y) in o.iter_mut().enumerate() {
                        *y = f(lhs[l0 + j * sl], rhs[r0 + j * sr]);
                    }
                }
            }
        },
    );
    out
}

/// `out[i] = f(a[i], b[i], c[i])` (used by `where`); layouts broadcast to the output shape.
pub fn ternary_map<A, B, C, U, F>(
    a: &[A],
    al: &Layout,
    b: &[B],
    bl: &Layout,
    c: &[C],
    cl: &Layout,
    f: F,
) -> Vec<U>
where
    A: Copy + Sync,
    B: Copy + Sync,
    C: Copy + Sync,
    U: Copy + Send + Sync + Default + 'static,
    F: Fn(A, B, C) -> U + Sync + Copy,
{
    let plan = RowPlan::new(al.dims(), [al.strides(), bl.strides(), cl.strides()]);
    let mut out = pool::output::<U>(al.numel());
    let [sa, sb, sc] = plan.inner;
    fill_rows(
        &mut out,
        &plan,
        [al.offset(), bl.offset(), cl.offset()],
        |o, [a0, b0, c0]| {
            // dense rows and a broadcast scalar (`masked_fill`, `where(c, g, 0)`) as straight
            // loops in the SIMD build: the indexed loop ran ~50x slower than `relu`
            let n = o.len();
            simd::run(
                #[inline(always)]
                move || match (sa, sb, sc) {
                    (1, 1, 1) => {
                        let it = o.iter_mut().zip(&a[a0..a0 + n]);
                        for ((y, &x), (&u, &v)) in it.zip(b[b0..b0 + n].iter().zip(&c[c0..c0 + n]))
                        {
                            *y = f(x, u, v);
                        }
                    }
                    (1, 0, 1) => {
                        let u = b[b0];
                        for ((y, &x), &v) in o.iter_mut().zip(&a[a0..a0 + n]).zip(&c[c0..c0 + n]) {
                            *y = f(x, u, v);
                        }
                    }
                    (1, 1, 0) => {
                        let v = c[c0];
                        for ((y, &x), &u) in o.iter_mut().zip(&a[a0..a0 + n]).zip(&b[b0..b0 + n]) {
                            *y = f(x, u, v);
                        }
                    }
                    _ => {
                        for (j, y) in o.iter_mut().enumerate() {
                            *y = f(a[a0 + j * sa], b[b0 + j * sb], c[c0 + j * sc]);
                        }
                    }
                },
            )
        },
    );
    out
}

/// In place: `dst[i] = f(dst[i], src[i])` with `src` broadcast to `dst`'s layout.
/// `dst`'s layout must not overlap itself (checked by the caller).
pub fn assign_map<T, F>(dst: &mut [T], dl: &Layout, src: &[T], sl: &Layout, f: F)
where
    T: Copy + Send + Sync,
    F: Fn(T, T) -> T + Sync + Copy,
{
    if let (Some((a0, a1)), Some((b0, b1))) = (dl.contiguous_range(), sl.contiguous_range()) {
        let (d, s) = (&mut dst[a0..a1], &src[b0..b1]);
        for_chunks(d, |off, d| {
            let s = &s[off..off + d.len()];
            simd::run(
                #[inline(always)]
                move || {
                    for (y, &x) in d.iter_mut().zip(s) {
                        *y = f(*y, x);
                    }
                },
            )
        });
        return;
    }
    if let Some((a0, a1)) = dl.contiguous_range() {
        // A dense `dst` with a broadcast or strided `src` (`x.mul_(&scale)`, `affine_`, a bias
        // added in place): walk `src` row by row in `dst`'s order, in the SIMD build and in
        // parallel like the allocating kernels. (The generic loop below ran these scalar and
        // on one thread: scaling a small GPT's gradients took ~0.6 ms.)
        let d = &mut dst[a0..a1];
        let plan = RowPlan::new(sl.dims(), [sl.strides()]);
        let [ss] = plan.inner;
        let row = |o: &mut [T], s0: usize| {
            simd::run(
                #[inline(always)]
                move || match ss {
                    0 => {
                        let x = src[s0];
                        for y in o.iter_mut() {
                            *y = f(*y, x);
                        }
                    }
                    1 => {
                        let n = o.len();
                        for (y, &x) in o.iter_mut().zip(&src[s0..s0 + n]) {
                            *y = f(*y, x);
                        }
                    }
                    _ => {
                        for (j, y) in o.iter_mut().enumerate() {
                            *y = f(*y, src[s0 + j * ss]);
                        }
                    }
                },
            )
        };
        fill_rows(d, &plan, [sl.offset()], |o, [s0]| row(o, s0));
        return;
    }
    let plan = RowPlan::new(dl.dims(), [dl.strides(), sl.strides()]);
    let [sd, ss] = plan.inner;
    plan.for_each_row([dl.offset(), sl.offset()], 0..plan.rows, |[d0, s0]| {
        if sd == 1 && ss == 1 {
            let n = plan.len;
            for (y, &x) in dst[d0..d0 + n].iter_mut().zip(&src[s0..s0 + n]) {
                *y = f(*y, x);
            }
        } else {
            for j in 0..plan.len {
                let y = &mut dst[d0 + j * sd];
                *y = f(*y, src[s0 + j * ss]);
            }
        }
    });
}

/// Gather a strided view into a new contiguous buffer.
pub fn copy_contiguous<T: Copy + Send + Sync + Default + 'static>(
    src: &[T],
    layout: &Layout,
) -> Vec<T> {
    if let Some((a, b)) = layout.contiguous_range() {
        return pool::copied(&src[a..b]);
    }
    if let Some(out) = super::transpose::transposed_copy(src, layout) {
        return out;
    }
    unary_map(src, layout, |x| x)
}
