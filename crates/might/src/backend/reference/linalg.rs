//! Matrix products and 2-D convolutions of the reference backend: the textbook loops (three
//! nested loops per matrix, seven per convolution), summed in f64 and rounded once.

use super::elementwise::mismatch;
use super::{offsets, round, RefStorage as S};
use crate::backend::ConvGeom;
use crate::{DType, Error, Layout, Result};

/// Batched `[.., m, k] @ [.., k, n]` (both layouts broadcast to the full batch dims).
pub(super) fn matmul(a: &S, al: &Layout, b: &S, bl: &Layout) -> Result<S> {
    let dt = a.dtype();
    if dt != b.dtype() {
        return Err(mismatch("matmul", a, b));
    }
    if !dt.is_float() {
        return Err(Error::dtype(
            "matmul",
            format!("not supported for dtype {dt} (use a float dtype)"),
        ));
    }
    let r = al.dims().len();
    let (m, k, n) = (al.dims()[r - 2], al.dims()[r - 1], bl.dims()[r - 1]);
    let batch = |l: &Layout| {
        let d = l.dims()[..r - 2].to_vec();
        offsets(&Layout::new(
            d.into(),
            l.strides()[..r - 2].to_vec(),
            l.offset(),
        ))
    };
    let (ab, bb) = (batch(al), batch(bl));
    let (sa, sb) = (al.strides(), bl.strides());
    let mut out = Vec::with_capacity(ab.len() * m * n);
    for (&oa, &ob) in ab.iter().zip(&bb) {
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0;
                for p in 0..k {
                    let x = a.get(oa + i * sa[r - 2] + p * sa[r - 1]);
                    let y = b.get(ob + p * sb[r - 2] + j * sb[r - 1]);
                    acc += x * y;
                }
                out.push(acc);
            }
        }
    }
    Ok(S::from_vals(dt, out, round))
}

/// The f32/f64 operands of a convolution, checked; returns the dtype.
fn conv_dtype(op: &str, x: &S, w: &S) -> Result<DType> {
    if x.dtype() != w.dtype() {
        return Err(mismatch(op, x, w));
    }
    match x.dtype() {
        d @ (DType::F32 | DType::F64) => Ok(d),
        d => Err(Error::dtype(op, format!("not supported for dtype {d}"))),
    }
}

/// The input position `o·stride + k·dilation - pad` along one axis, if inside `[0, len)`.
fn at(o: usize, k: usize, g: &ConvGeom, axis: usize, len: usize) -> Option<usize> {
    let p = (o * g.stride[axis] + k * g.dilation[axis]) as isize - g.padding[axis] as isize;
    (p >= 0 && (p as usize) < len).then_some(p as usize)
}

/// Calls `f(x index, w index, y index)` for every multiply-add of the convolution, in
/// the NCHW / `[O, C/groups, kh, kw]` layouts (all relative to the operands' starts).
fn each_tap(g: &ConvGeom, mut f: impl FnMut(usize, usize, usize)) {
    let (cg, og) = (g.c / g.groups, g.o / g.groups);
    for b in 0..g.n {
        for oc in 0..g.o {
            let grp = oc / og;
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    let yi = ((b * g.o + oc) * g.oh + oy) * g.ow + ox;
                    for ci in 0..cg {
                        let c = grp * cg + ci;
                        for ky in 0..g.kh {
                            let Some(iy) = at(oy, ky, g, 0, g.h) else {
                                continue;
                            };
                            for kx in 0..g.kw {
                                let Some(ix) = at(ox, kx, g, 1, g.w) else {
                                    continue;
                                };
                                let xi = ((b * g.c + c) * g.h + iy) * g.w + ix;
                                let wi = ((oc * cg + ci) * g.kh + ky) * g.kw + kx;
                                f(xi, wi, yi);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `conv2d(x, w) + bias`, through a ReLU when `relu` (contiguous operands).
pub(super) fn conv2d(
    x: (&S, &Layout),
    w: (&S, &Layout),
    bias: Option<(&S, &Layout)>,
    g: &ConvGeom,
    relu: bool,
) -> Result<S> {
    let dt = conv_dtype("conv2d", x.0, w.0)?;
    let (xv, wv) = (x.0.gather_f(x.1), w.0.gather_f(w.1));
    let plane = g.oh * g.ow;
    let mut y = vec![0.0; g.n * g.o * plane];
    if let Some((b, bl)) = bias {
        if b.dtype() != dt {
            return Err(mismatch("conv2d", x.0, b));
        }
        let bv = b.gather_f(bl);
        for (i, v) in y.iter_mut().enumerate() {
            *v = bv[i / plane % g.o];
        }
    }
    each_tap(g, |xi, wi, yi| y[yi] += xv[xi] * wv[wi]);
    if relu {
        y.iter_mut()
            .for_each(|v| *v = if *v > 0.0 { *v } else { 0.0 });
    }
    Ok(S::from_vals(dt, y, round))
}

/// Gradients of input, weight and bias (each when asked) from the output gradient `gy`;
/// `y` is the forward output when it went through a ReLU (the gradient passes where `y > 0`).
#[allow(clippy::too_many_arguments)]
pub(super) fn conv2d_backward(
    x: (&S, &Layout),
    w: (&S, &Layout),
    gy: (&S, &Layout),
    y: Option<(&S, &Layout)>,
    g: &ConvGeom,
    [need_x, need_w, need_b]: [bool; 3],
) -> Result<[Option<S>; 3]> {
    let dt = conv_dtype("conv2d_backward", x.0, w.0)?;
    if gy.0.dtype() != dt {
        return Err(Error::dtype(
            "conv2d_backward",
            format!("gradient dtype {} does not match the input", gy.0.dtype()),
        ));
    }
    let (xv, wv) = (x.0.gather_f(x.1), w.0.gather_f(w.1));
    let mut gv = gy.0.gather_f(gy.1);
    if let Some((ys, yl)) = y {
        for (gi, yi) in gv.iter_mut().zip(ys.gather_f(yl)) {
            if yi <= 0.0 || yi.is_nan() {
                *gi = 0.0;
            }
        }
    }
    let (mut gx, mut gw) = (vec![0.0; xv.len()], vec![0.0; wv.len()]);
    each_tap(g, |xi, wi, yi| {
        gx[xi] += gv[yi] * wv[wi];
        gw[wi] += gv[yi] * xv[xi];
    });
    let plane = g.oh * g.ow;
    let mut gb = vec![0.0; g.o];
    for (i, v) in gv.iter().enumerate() {
        gb[i / plane.max(1) % g.o.max(1)] += v;
    }
    let wrap = |need: bool, v: Vec<f64>| need.then(|| S::from_vals(dt, v, round));
    Ok([wrap(need_x, gx), wrap(need_w, gw), wrap(need_b, gb)])
}
