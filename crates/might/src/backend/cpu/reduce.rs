//! Reductions over any set of dims of a strided tensor.
//!
//! The output is contiguous over the kept dims. Two loop shapes cover the cases that matter:
//! - reduced dims innermost ("row" reductions: softmax, mean over features): each output walks
//!   its reduced block with a `RowPlan`, contiguous rows use a 32-lane accumulator;
//! - reduced dims outermost on a contiguous tensor (bias gradients, batch sums): whole rows are
//!   folded into the output vector, a vectorisable loop.

use super::simd;
use super::strided::RowPlan;
use super::threads;
use crate::Layout;

/// Combines two partial accumulators of one output.
pub type Merge<A> = fn(A, A) -> A;

/// How to fold elements into an accumulator. `idx` is the position of the element in the
/// flattened reduced block (the index along the dim for single-dim reductions).
pub trait Reducer<T>: Sync {
    type Acc: Copy + Send + Sync;
    fn init(&self) -> Self::Acc;
    fn step(&self, acc: Self::Acc, x: T, idx: usize) -> Self::Acc;
    /// Fold a contiguous run starting at block position `idx0`. Override to vectorise.
    #[inline]
    fn row(&self, mut acc: Self::Acc, xs: &[T], idx0: usize) -> Self::Acc
    where
        T: Copy,
    {
        for (j, &x) in xs.iter().enumerate() {
            acc = self.step(acc, x, idx0 + j);
        }
        acc
    }
    /// How to combine two partial results of one output, if the reducer can (lets a full
    /// reduction split across threads). `None` (the default): it folds sequentially only.
    fn merge(&self) -> Option<Merge<Self::Acc>> {
        None
    }
}

/// Reduce over the dims flagged in `reduced`; returns one accumulator per kept position.
pub fn reduce<T, R>(src: &[T], layout: &Layout, reduced: &[bool], r: &R) -> Vec<R::Acc>
where
    T: Copy + Sync,
    R: Reducer<T>,
{
    let dims = layout.dims();
    let strides = layout.strides();
    let (mut kd, mut ks, mut rd, mut rs) = (vec![], vec![], vec![], vec![]);
    for i in 0..dims.len() {
        if reduced[i] {
            rd.push(dims[i]);
            rs.push(strides[i]);
        } else {
            kd.push(dims[i]);
            ks.push(strides[i]);
        }
    }
    let n_out: usize = kd.iter().product();
    let n_red: usize = rd.iter().product();

    // Leading-dims fast path: contiguous input, every reduced dim before every kept dim.
    let first_kept = reduced.iter().position(|&b| !b).unwrap_or(dims.len());
    let leading = reduced[first_kept..].iter().all(|&b| !b);
    if leading && layout.is_contiguous() && n_out > 1 && n_red > 1 {
        let base = &src[layout.offset()..layout.offset() + layout.numel()];
        // (in the widest SIMD build: a linear layer's bias gradient, [1024, 128] -> [128],
        // ran 2-3x slower in the baseline one)
        let fold_cols = |out: &mut [R::Acc], j0: usize| {
            simd::run(
                #[inline(always)]
                || {
                    for (i, row) in base.chunks_exact(n_out).enumerate() {
                        let n = out.len();
                        for (y, &x) in out.iter_mut().zip(&row[j0..j0 + n]) {
                            *y = r.step(*y, x, i);
                        }
                    }
                },
            )
        };
        let mut out = vec![r.init(); n_out];
        if threads::parallel(layout.numel()) && n_out >= 64 {
            let chunk = n_out.div_ceil(threads::get_num_threads()).max(16);
            threads::for_each_chunk(&mut out, chunk, |c, o| fold_cols(o, c * chunk));
        } else {
            fold_cols(&mut out, 0);
        }
        return out;
    }

    // One output over a large contiguous block (`sum_all`): split the block across threads
    // when the reducer can merge partial results.
    if let Some(merge) = r.merge() {
        if n_out == 1 && layout.is_contiguous() && threads::parallel(layout.numel()) {
            let base = &src[layout.offset()..layout.offset() + layout.numel()];
            let chunk = base.len().div_ceil(threads::get_num_threads() * 4);
            let parts = threads::map(base.len().div_ceil(chunk), |i| {
                let c = &base[i * chunk..((i + 1) * chunk).min(base.len())];
                r.row(r.init(), c, i * chunk)
            });
            return vec![parts.into_iter().fold(r.init(), merge)];
        }
    }

    let inner = RowPlan::new(&rd, [&rs]);
    let fold_one = |base: usize| -> R::Acc {
        let mut acc = r.init();
        let mut idx = 0;
        let st = inner.inner[0];
        inner.for_each_row([base], 0..inner.rows, |[o]| {
            if st == 1 {
                acc = r.row(acc, &src[o..o + inner.len], idx);
            } else {
                for j in 0..inner.len {
                    acc = r.step(acc, src[o + j * st], idx + j);
                }
            }
            idx += inner.len;
        });
        acc
    };
    let outer = RowPlan::new(&kd, [&ks]);
    let mut bases = Vec::with_capacity(n_out);
    outer.for_each_offset([layout.offset()], |[o]| bases.push(o));
    if n_out == 0 {
        return vec![];
    }
    if threads::parallel(layout.numel()) && n_out > 1 {
        // a few outputs per task: one task each would cost more in hand-outs than a small
        // reduction takes
        let per = n_out.div_ceil(threads::get_num_threads() * 8);
        let parts = threads::map(n_out.div_ceil(per), |c| {
            let b = &bases[c * per..((c + 1) * per).min(n_out)];
            b.iter().map(|&b| fold_one(b)).collect::<Vec<_>>()
        });
        parts.concat()
    } else {
        bases.iter().map(|&b| fold_one(b)).collect()
    }
}

/// Sum with a 32-lane accumulator on contiguous rows (vectorised, and more accurate than a
/// single running sum).
pub struct Sum;

/// Rows at least this long (past the L2 cache) are summed as four streams read side by side:
/// one sequential stream per core left memory bandwidth unused (sum of 16 M f32, AVX-512 EPYC,
/// medians of noisy runs: ~20 -> 26-30 GB/s at one thread, ~35 -> 37-55 GB/s at two; PyTorch
/// 24-25 / 36-39).
const STREAMS_FROM: usize = 1 << 18;

macro_rules! float_sum {
    ($t:ty) => {
        impl Reducer<$t> for Sum {
            type Acc = $t;
            fn init(&self) -> $t {
                0.0
            }
            #[inline(always)]
            fn step(&self, acc: $t, x: $t, _: usize) -> $t {
                acc + x
            }
            /// 32 independent lanes (four 8-wide vectors, so the adds are not latency-bound),
            /// run through the AVX2 dispatch; a row past [`STREAMS_FROM`] as four streams.
            #[inline]
            fn row(&self, acc: $t, xs: &[$t], _: usize) -> $t {
                simd::run(
                    #[inline(always)]
                    || {
                        let mut lanes = [0.0 as $t; 32];
                        let mut xs = xs;
                        if xs.len() >= STREAMS_FROM {
                            // four quarters read side by side, each into its own lanes
                            let q = xs.len() / 4 / 32 * 32;
                            let (a, rest) = xs.split_at(q);
                            let (b, rest) = rest.split_at(q);
                            let (c, rest) = rest.split_at(q);
                            let (d, rest) = rest.split_at(q);
                            let mut acc4 = [[0.0 as $t; 16]; 4];
                            for i in (0..q).step_by(16) {
                                for (s, part) in [a, b, c, d].iter().enumerate() {
                                    let v = &part[i..i + 16];
                                    for k in 0..16 {
                                        acc4[s][k] += v[k];
                                    }
                                }
                            }
                            for k in 0..16 {
                                lanes[k] = (acc4[0][k] + acc4[1][k]) + (acc4[2][k] + acc4[3][k]);
                            }
                            xs = rest;
                        }
                        let chunks = xs.chunks_exact(32);
                        let tail = chunks.remainder();
                        for c in chunks {
                            for k in 0..32 {
                                lanes[k] += c[k];
                            }
                        }
                        let mut s = acc;
                        for l in lanes {
                            s += l;
                        }
                        for &x in tail {
                            s += x;
                        }
                        s
                    },
                )
            }
            fn merge(&self) -> Option<Merge<$t>> {
                Some(|a, b| a + b)
            }
        }
    };
}
float_sum!(f32);
float_sum!(f64);

impl Reducer<i64> for Sum {
    type Acc = i64;
    fn init(&self) -> i64 {
        0
    }
    fn step(&self, acc: i64, x: i64, _: usize) -> i64 {
        acc.wrapping_add(x)
    }
}

/// Generic fold from a closure (prod, all, any...).
pub struct Fold<A, F> {
    pub init: A,
    pub f: F,
}

impl<T, A: Copy + Send + Sync, F: Fn(A, T) -> A + Sync> Reducer<T> for Fold<A, F> {
    type Acc = A;
    fn init(&self) -> A {
        self.init
    }
    #[inline(always)]
    fn step(&self, acc: A, x: T, _: usize) -> A {
        (self.f)(acc, x)
    }
}

/// Max or min with the index of the first extreme element. NaN wins (as in PyTorch).
pub struct ArgExt {
    pub max: bool,
}

impl<T: Copy + PartialOrd + Send + Sync> Reducer<T> for ArgExt
where
    Option<T>: Copy,
{
    type Acc = (Option<T>, usize);
    fn init(&self) -> Self::Acc {
        (None, 0)
    }
    #[inline(always)]
    fn step(&self, acc: Self::Acc, x: T, idx: usize) -> Self::Acc {
        match acc.0 {
            None => (Some(x), idx),
            Some(best) => {
                #[allow(clippy::eq_op)]
                let x_nan = x != x;
                #[allow(clippy::eq_op)]
                let best_nan = best != best;
                if best_nan {
                    acc
                } else if x_nan || (self.max && x > best) || (!self.max && x < best) {
                    (Some(x), idx)
                } else {
                    acc
                }
            }
        }
    }
}
