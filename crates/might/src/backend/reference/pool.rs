//! 2-D pooling of the reference backend (max with indices, average with padding counted,
//! adaptive average) over `[planes, H, W]` inputs, one window at a time.

use super::elementwise::unsupported;
use super::{round, RefStorage as S};
use crate::backend::PoolGeom;
use crate::{DType, Layout, Result};

/// The f32/f64 elements of `s[l]`, or the error naming `op`.
fn floats(op: &str, s: &S, l: &Layout) -> Result<Vec<f64>> {
    match s.dtype() {
        DType::F32 | DType::F64 => Ok(s.gather_f(l)),
        _ => Err(unsupported(op, s)),
    }
}

/// The window of output index `o` along one axis: `[start, end)` clipped to the input, and
/// its length inside the padded input (the divisor of a padded average).
fn window(o: usize, k: usize, s: usize, pad: usize, len: usize) -> (usize, usize, usize) {
    let start = (o * s) as isize - pad as isize;
    let end = (start + k as isize).min((len + pad) as isize);
    let full = (end - start) as usize;
    (start.max(0) as usize, (end.max(0) as usize).min(len), full)
}

/// Calls `f(plane, output index, rows, cols, divisor)` for every pooling window.
fn each_window(
    g: &PoolGeom,
    mut f: impl FnMut(usize, usize, (usize, usize), (usize, usize), usize),
) {
    for p in 0..g.planes {
        for oy in 0..g.oh {
            let (y0, y1, fy) = window(oy, g.kernel[0], g.stride[0], g.padding[0], g.h);
            for ox in 0..g.ow {
                let (x0, x1, fx) = window(ox, g.kernel[1], g.stride[1], g.padding[1], g.w);
                let o = (p * g.oh + oy) * g.ow + ox;
                f(p, o, (y0, y1), (x0, x1), fy * fx);
            }
        }
    }
}

/// Max pooling: the maxima and the flat index `iy * W + ix` of each (first maximum in
/// row-major order, NaN wins).
pub(super) fn max_pool2d(s: &S, l: &Layout, g: &PoolGeom) -> Result<(S, S)> {
    let x = floats("max_pool2d", s, l)?;
    let n = g.planes * g.oh * g.ow;
    let (mut vals, mut idx) = (vec![0.0; n], vec![0i64; n]);
    let hw = g.h * g.w;
    each_window(g, |p, o, (y0, y1), (x0, x1), _| {
        let (mut best, mut at) = (f64::NEG_INFINITY, y0 * g.w + x0);
        'win: for iy in y0..y1 {
            for ix in x0..x1 {
                let v = x[p * hw + iy * g.w + ix];
                if v > best || v.is_nan() {
                    (best, at) = (v, iy * g.w + ix);
                    if v.is_nan() {
                        break 'win;
                    }
                }
            }
        }
        vals[o] = best;
        idx[o] = at as i64;
    });
    Ok((S::from_vals(s.dtype(), vals, round), S::i64(idx)))
}

/// Each output gradient goes to the input element its maximum came from.
pub(super) fn max_pool2d_backward(
    gy: &S,
    l: &Layout,
    idx: &S,
    il: &Layout,
    g: &PoolGeom,
) -> Result<S> {
    if idx.dtype() != DType::I64 {
        return Err(unsupported("max_pool2d_backward", idx));
    }
    let gv = floats("max_pool2d_backward", gy, l)?;
    let iv = idx.gather_f(il);
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    let mut gx = vec![0.0; g.planes * hw];
    for (o, (&v, &i)) in gv.iter().zip(&iv).enumerate() {
        gx[o / ohw * hw + i as usize] += v;
    }
    Ok(S::from_vals(gy.dtype(), gx, round))
}

/// Average pooling, `count_include_pad = true`.
pub(super) fn avg_pool2d(s: &S, l: &Layout, g: &PoolGeom) -> Result<S> {
    let x = floats("avg_pool2d", s, l)?;
    let hw = g.h * g.w;
    let mut out = vec![0.0; g.planes * g.oh * g.ow];
    each_window(g, |p, o, (y0, y1), (x0, x1), div| {
        let mut sum = 0.0;
        for iy in y0..y1 {
            for ix in x0..x1 {
                sum += x[p * hw + iy * g.w + ix];
            }
        }
        out[o] = sum / div as f64;
    });
    Ok(S::from_vals(s.dtype(), out, round))
}

/// Each output gradient spread evenly over its window.
pub(super) fn avg_pool2d_backward(gy: &S, l: &Layout, g: &PoolGeom) -> Result<S> {
    let gv = floats("avg_pool2d_backward", gy, l)?;
    let hw = g.h * g.w;
    let mut gx = vec![0.0; g.planes * hw];
    each_window(g, |p, o, (y0, y1), (x0, x1), div| {
        let v = gv[o] / div as f64;
        for iy in y0..y1 {
            for ix in x0..x1 {
                gx[p * hw + iy * g.w + ix] += v;
            }
        }
    });
    Ok(S::from_vals(gy.dtype(), gx, round))
}

/// PyTorch's adaptive window `[floor(o·len/out), ceil((o+1)·len/out))`.
fn adaptive(o: usize, out: usize, len: usize) -> (usize, usize) {
    (o * len / out, ((o + 1) * len).div_ceil(out))
}

/// Adaptive average pooling of `planes` planes of `[h, w]` to `[oh, ow]` (`back`: the
/// backward, spreading each output gradient over its window).
pub(super) fn adaptive_avg_pool2d(
    s: &S,
    l: &Layout,
    planes: usize,
    [h, w]: [usize; 2],
    [oh, ow]: [usize; 2],
    back: bool,
) -> Result<S> {
    let op = if back {
        "adaptive_avg_pool2d_backward"
    } else {
        "adaptive_avg_pool2d"
    };
    let v = floats(op, s, l)?;
    let mut out = vec![
        0.0;
        if back {
            planes * h * w
        } else {
            planes * oh * ow
        }
    ];
    for p in 0..planes {
        for oy in 0..oh {
            let (y0, y1) = adaptive(oy, oh, h);
            for ox in 0..ow {
                let (x0, x1) = adaptive(ox, ow, w);
                let div = ((y1 - y0) * (x1 - x0)) as f64;
                let o = (p * oh + oy) * ow + ox;
                let mut sum = 0.0;
                for iy in y0..y1 {
                    for ix in x0..x1 {
                        let i = (p * h + iy) * w + ix;
                        if back {
                            out[i] += v[o] / div;
                        } else {
                            sum += v[i];
                        }
                    }
                }
                if !back {
                    out[o] = sum / div;
                }
            }
        }
    }
    Ok(S::from_vals(s.dtype(), out, round))
}
