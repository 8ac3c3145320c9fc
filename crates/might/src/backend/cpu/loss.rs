//! The fused cross-entropy kernels: one pass per row computes the log-sum-exp and the loss;
//! the backward writes `scale · (softmax - smoothed target)` directly.
// Row kernels index several parallel slices with one column index.
#![allow(clippy::needless_range_loop)]

use super::fused::{map_blocks, rows_per_task, Real};
use super::rows::row_max;
use super::softmax::exp_sum;
use super::{pool, simd};
use crate::backend::CeTarget as Target;

/// Per-row `(loss, logsumexp)` of a fused log-softmax + NLL.
pub(crate) fn ce_forward<T: Real>(
    x: &[T],
    c: usize,
    target: &Target,
    probs: Option<&[T]>,
    eps: f64,
    cw: Option<&[f64]>,
) -> (Vec<f64>, Vec<T>) {
    let rows = x.len() / c;
    let mut lse = vec![T::f(0.0); rows];
    let rpt = rows_per_task(c, rows);
    let losses = map_blocks(&mut lse, rpt, |bi, lb| {
        simd::run(
            #[inline(always)]
            || ce_forward_block(x, c, target, eps, cw, probs, rpt, bi, lb),
        )
    });
    (losses.into_iter().flatten().collect(), lse)
}

/// [`ce_forward`] of the rows `bi * rpt ..` whose log-sum-exps are `lb`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn ce_forward_block<T: Real>(
    x: &[T],
    c: usize,
    target: &Target,
    eps: f64,
    cw: Option<&[f64]>,
    probs: Option<&[T]>,
    rpt: usize,
    bi: usize,
    lb: &mut [T],
) -> Vec<f64> {
    let mut out = Vec::with_capacity(lb.len());
    for (r, l) in lb.iter_mut().enumerate() {
        let row = bi * rpt + r;
        let xr = &x[row * c..(row + 1) * c];
        let m = row_max(xr);
        let m = if m.is_finite() { m } else { T::f(0.0) };
        let s = exp_sum(xr, m);
        let lsev = m + s.ln();
        *l = lsev;
        let lse64 = lsev.d();
        let loss = match (target, probs) {
            (Target::Index(t), _) => match t[row] {
                None => 0.0,
                Some(k) => {
                    let wk = cw.map_or(1.0, |w| w[k]);
                    let mut loss = (1.0 - eps) * wk * (lse64 - xr[k].d());
                    if eps > 0.0 {
                        let sm: f64 = xr
                            .iter()
                            .enumerate()
                            .map(|(j, v)| cw.map_or(1.0, |w| w[j]) * (lse64 - v.d()))
                            .sum();
                        loss += eps / c as f64 * sm;
                    }
                    loss
                }
            },
            (Target::Prob, Some(p)) => {
                let pr = &p[row * c..(row + 1) * c];
                xr.iter()
                    .zip(pr)
                    .enumerate()
                    .map(|(j, (&v, &q))| {
                        let q = (1.0 - eps) * q.d() + eps / c as f64;
                        cw.map_or(1.0, |w| w[j]) * q * (lse64 - v.d())
                    })
                    .sum::<f64>()
            }
            _ => unreachable!(),
        };
        out.push(loss);
    }
    out
}

/// Gradient rows `scale[row] * (softmax - smoothed target)`, written in one pass.
#[allow(clippy::too_many_arguments)]
pub(crate) fn ce_backward<T: Real>(
    x: &[T],
    lse: &[T],
    c: usize,
    target: &Target,
    probs: Option<&[T]>,
    eps: f64,
    cw: Option<&[f64]>,
    scale: &(dyn Fn(usize) -> f64 + Sync),
) -> Vec<T> {
    let rows = x.len() / c;
    // ignored rows stay zero
    let mut dx = pool::zeroed::<T>(x.len());
    let rpt = rows_per_task(c, rows);
    let keep = T::f(1.0 - eps);
    // class weights (ones when absent), and the smoothing mass each class receives
    let wc: Vec<T> = (0..c).map(|j| T::f(cw.map_or(1.0, |w| w[j]))).collect();
    let uni: Vec<T> = (0..c)
        .map(|j| T::f(eps / c as f64 * cw.map_or(1.0, |w| w[j])))
        .collect();
    let usum: T = uni.iter().copied().sum();
    map_blocks(&mut dx, rpt * c, |bi, db| {
        simd::run(
            #[inline(always)]
            || {
                for (r, dr) in db.chunks_mut(c).enumerate() {
                    let row = bi * rpt + r;
                    let xr = &x[row * c..(row + 1) * c];
                    let s = T::f(scale(row));
                    match (target, probs) {
                        (Target::Index(t), _) => {
                            // d/dx_j = p_j·((1-ε)·w_k + Σ_c ε/C·w_c) - ε/C·w_j - [j = k]·(1-ε)·w_k
                            let Some(k) = t[row] else { continue };
                            let (a, l) = (keep * wc[k] + usum, lse[row]);
                            for ((d, &v), &u) in dr.iter_mut().zip(xr).zip(&uni) {
                                *d = s * ((v - l).exp_() * a - u);
                            }
                            dr[k] = dr[k] - s * keep * wc[k];
                        }
                        (Target::Prob, Some(p)) => {
                            let pr = &p[row * c..(row + 1) * c];
                            // weighted smoothed target w_j·q_j; d/dx_j = p_j·Σ_c w_c·q_c - w_j·q_j
                            let wq = |j: usize| wc[j] * (keep * pr[j] + T::f(eps / c as f64));
                            let total: T = (0..c).map(&wq).sum();
                            let l = lse[row];
                            for (j, (d, &v)) in dr.iter_mut().zip(xr).enumerate() {
                                *d = s * ((v - l).exp_() * total - wq(j));
                            }
                        }
                        _ => unreachable!(),
                    }
                }
            },
        )
    });
    dx
}
