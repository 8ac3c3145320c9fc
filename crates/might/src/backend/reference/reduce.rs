//! Reductions of the reference backend (sum, prod, all/any, arg max/min) and the row-wise
//! softmax: for each output, one sequential loop over its reduced elements, accumulated in
//! f64 (int64 in wrapping i64).

use super::elementwise::{mismatch, unsupported};
use super::{offsets, round, Buf, RefStorage as S};
use crate::backend::ReduceOp;
use crate::{DType, Error, Layout, Result};

/// For each output position (the kept dims, row-major), the storage offsets of the elements
/// it reduces, in order.
fn groups(l: &Layout, mask: &[bool]) -> (Vec<usize>, Vec<usize>) {
    let (kept, red) = crate::backend::walk::split(l, mask);
    (offsets(&kept), offsets(&red))
}

pub(super) fn reduce(s: &S, l: &Layout, mask: &[bool], op: ReduceOp) -> Result<S> {
    let (kept, red) = groups(l, mask);
    let dt = s.dtype();
    let fold_i = |init: i64, f: fn(i64, i64) -> i64| -> Vec<i64> {
        kept.iter()
            .map(|&b| red.iter().fold(init, |a, &r| f(a, s.get_i(b + r))))
            .collect()
    };
    let fold_f = |init: f64, f: fn(f64, f64) -> f64| -> Vec<f64> {
        kept.iter()
            .map(|&b| red.iter().fold(init, |a, &r| f(a, s.get(b + r))))
            .collect()
    };
    match op {
        ReduceOp::Sum => Ok(match dt {
            // ints, u8 and bool sum into int64 (like PyTorch)
            DType::I64 | DType::U8 | DType::Bool => S::i64(fold_i(0, i64::wrapping_add)),
            _ => S::from_vals(dt, fold_f(0.0, |a, x| a + x), round),
        }),
        ReduceOp::Prod => Ok(match dt {
            DType::F32 | DType::F64 => S::from_vals(dt, fold_f(1.0, |a, x| a * x), round),
            DType::I64 => S::i64(fold_i(1, i64::wrapping_mul)),
            _ => return Err(unsupported("prod", s)),
        }),
        ReduceOp::All | ReduceOp::Any => {
            if dt != DType::Bool {
                return Err(Error::dtype("all/any", "expected a bool tensor"));
            }
            let v = if op == ReduceOp::Any {
                fold_f(0.0, |a, x| a.max(x))
            } else {
                fold_f(1.0, |a, x| a.min(x))
            };
            Ok(S::f(dt, v))
        }
    }
}

/// Values and int64 indices of the first maximum (or minimum) of each reduced group; NaN
/// wins (the first one), like PyTorch.
pub(super) fn arg_reduce(s: &S, l: &Layout, mask: &[bool], max: bool) -> Result<(S, S)> {
    let (kept, red) = groups(l, mask);
    let mut at = Vec::with_capacity(kept.len());
    for &b in &kept {
        let mut best: Option<usize> = None;
        for (j, &r) in red.iter().enumerate() {
            let better = match best {
                None => true,
                Some(k) => match &s.buf {
                    Buf::I(v) => {
                        let (x, y) = (v[b + r], v[b + red[k]]);
                        (max && x > y) || (!max && x < y)
                    }
                    Buf::F(v) => {
                        let (x, y) = (v[b + r], v[b + red[k]]);
                        !y.is_nan() && (x.is_nan() || (max && x > y) || (!max && x < y))
                    }
                },
            };
            if better {
                best = Some(j);
            }
        }
        at.push(best);
    }
    let offs: Vec<usize> = kept
        .iter()
        .zip(&at)
        .map(|(&b, a)| b + a.map_or(0, |j| red[j]))
        .collect();
    let vals = if red.is_empty() {
        // no elements: the default value, like the CPU backend
        S::from_vals(s.dtype(), vec![0.0; kept.len()], round)
    } else {
        s.select(&offs)
    };
    let idx = at.iter().map(|a| a.unwrap_or(0) as i64).collect();
    Ok((vals, S::i64(idx)))
}

/// softmax / log_softmax of each contiguous row of `n` (f32 and f64; `None` for the
/// dtypes the op computes through f32).
pub(super) fn softmax_rows(s: &S, l: &Layout, n: usize, log: bool) -> Option<S> {
    let dt = s.dtype();
    if !matches!(dt, DType::F32 | DType::F64) {
        return None;
    }
    let x = s.gather_f(l);
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(n.max(1)) {
        // the largest element ignoring NaN (a NaN still poisons the row through `exp`)
        let m = row
            .iter()
            .fold(f64::NEG_INFINITY, |a, &v| if v > a { v } else { a });
        let m = if m.is_finite() { m } else { 0.0 };
        let sum: f64 = row.iter().map(|&v| (v - m).exp()).sum();
        if log {
            out.extend(row.iter().map(|&v| (v - m) - sum.ln()));
        } else {
            let inv = 1.0 / sum;
            out.extend(row.iter().map(|&v| (v - m).exp() * inv));
        }
    }
    Some(S::from_vals(dt, out, round))
}

/// The softmax backward from the output gradient `g` and the output `y` (rows of `n`).
pub(super) fn softmax_backward_rows(
    g: &S,
    gl: &Layout,
    y: &S,
    yl: &Layout,
    n: usize,
    log: bool,
) -> Result<S> {
    let dt = g.dtype();
    if !matches!(dt, DType::F32 | DType::F64) {
        return Err(unsupported("softmax_backward", g));
    }
    if y.dtype() != dt {
        return Err(mismatch("softmax_backward", g, y));
    }
    let (gv, yv) = (g.gather_f(gl), y.gather_f(yl));
    let mut out = Vec::with_capacity(gv.len());
    for (gr, yr) in gv.chunks(n.max(1)).zip(yv.chunks(n.max(1))) {
        if log {
            // dx = g - exp(y) * sum(g)
            let s: f64 = gr.iter().sum();
            out.extend(gr.iter().zip(yr).map(|(&g, &y)| g - y.exp() * s));
        } else {
            // dx = y * (g - sum(g * y))
            let s: f64 = gr.iter().zip(yr).map(|(&g, &y)| g * y).sum();
            out.extend(gr.iter().zip(yr).map(|(&g, &y)| y * (g - s)));
        }
    }
    Ok(S::from_vals(dt, out, round))
}
