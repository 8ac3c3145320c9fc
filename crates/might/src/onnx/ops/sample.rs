//! Spatial resampling operators: GridSample (with AffineGrid, which builds its grids) and
//! Col2Im (the inverse of an im2col unfold) and DeformConv (a convolution whose taps sample
//! the input bilinearly at learned offsets). N-dimensional, computed on the host in `f64`:
//! they appear once per model (spatial transformers, STN heads), not in hot loops.

use super::{req, Node, OpFn};
use crate::onnx::value::{ints, Value};
use crate::{Result, Shape, Tensor};

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "GridSample" => grid_sample,
        "AffineGrid" => affine_grid,
        "Col2Im" => col2im,
        "DeformConv" => deform_conv,
        _ => return None,
    })
}

/// A host-computed output with `like`'s dtype, device and ONNX type.
fn out_like(v: Vec<f64>, dims: Vec<usize>, like: &Value) -> Result<Vec<Value>> {
    let t = Tensor::from_vec(v, dims)?
        .to_dtype(like.tensor.dtype())?
        .to_device(like.tensor.device())?;
    Ok(vec![Value::typed(t, like.elem)])
}

/// Keys' cubic convolution weights (alpha = -0.75) for fractional offset `t`.
fn cubic(t: f64) -> [f64; 4] {
    let a = -0.75;
    let w = |x: f64| {
        let x = x.abs();
        if x <= 1.0 {
            ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        } else if x < 2.0 {
            ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        } else {
            0.0
        }
    };
    [w(t + 1.0), w(t), w(1.0 - t), w(2.0 - t)]
}

/// Reflect `x` into `[lo, hi]` by folding at the borders.
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let rng = hi - lo;
    if rng <= 0.0 {
        return lo;
    }
    if x < lo {
        let dx = lo - x;
        let n = (dx / rng) as i64;
        let r = dx - n as f64 * rng;
        if n % 2 == 0 {
            lo + r
        } else {
            hi - r
        }
    } else if x > hi {
        let dx = x - hi;
        let n = (dx / rng) as i64;
        let r = dx - n as f64 * rng;
        if n % 2 == 0 {
            hi - r
        } else {
            lo + r
        }
    } else {
        x
    }
}

/// GridSample (opsets 16 and 20): sample `X [N, C, D…]` at the normalized points of
/// `grid [N, O…, r]` (coordinates innermost-axis first) with nearest, (bi/tri)linear or
/// cubic interpolation and zeros/border/reflection padding.
fn grid_sample(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, grid) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let xd = x.dims().to_vec();
    let gd = grid.dims().to_vec();
    let r = xd.len().saturating_sub(2);
    if r == 0 || gd.len() != r + 2 || gd[0] != xd[0] || gd[r + 1] != r {
        return Err(n.err(format!(
            "input {xd:?} and grid {gd:?}: expected [N, C, D…] and [N, O…, {r}]"
        )));
    }
    let mode = match n.s("mode", "linear").as_str() {
        "linear" | "bilinear" => 1,
        "nearest" => 0,
        "cubic" | "bicubic" => 2,
        m => return Err(n.err(format!("mode '{m}' is not supported"))),
    };
    let pad = n.s("padding_mode", "zeros");
    if !matches!(pad.as_str(), "zeros" | "border" | "reflection") {
        return Err(n.err(format!("padding_mode '{pad}' is not supported")));
    }
    let align = n.i("align_corners", 0) != 0;
    if xd[2..].contains(&0) {
        return Err(n.err(format!("input {xd:?} has an empty spatial axis")));
    }
    let (nb, c) = (xd[0], xd[1]);
    let sp = &xd[2..];
    let opts: Vec<usize> = gd[1..=r].to_vec();
    let npts: usize = opts.iter().product();
    let plane: usize = sp.iter().product();
    let mut odims = vec![nb, c];
    odims.extend(&opts);
    crate::limits::check_alloc("GridSample", &Shape::from(odims.clone()), x.tensor.dtype())?;
    let xv = x.tensor.to_f64_vec();
    let gv = grid.tensor.to_f64_vec();
    let strides = Shape::from(sp.to_vec()).contiguous_strides();
    let mut out = vec![0.0; nb * c * npts];
    for b in 0..nb {
        for p in 0..npts {
            let g = &gv[(b * npts + p) * r..(b * npts + p + 1) * r];
            // per spatial axis: (index, weight) taps; None marks a zero-padded tap
            let mut taps: Vec<Vec<(Option<usize>, f64)>> = Vec::with_capacity(r);
            for d in 0..r {
                let len = sp[d] as f64;
                let v = g[r - 1 - d] as f32;
                let mut xc = if align {
                    (v + 1.0) / 2.0 * (len as f32 - 1.0)
                } else {
                    ((v + 1.0) * len as f32 - 1.0) / 2.0
                } as f64;
                if mode == 0 {
                    xc = (xc as f32).round_ties_even() as f64;
                }
                let (lo, hi) = if align {
                    (0.0, len - 1.0)
                } else {
                    (-0.5, len - 0.5)
                };
                if xc < lo || xc > hi {
                    if pad == "border" {
                        xc = xc.clamp(0.0, len - 1.0);
                    } else if pad == "reflection" {
                        xc = reflect(xc, lo, hi);
                    }
                }
                let pixel = |i: i64| -> Option<usize> {
                    let l = sp[d] as i64;
                    match pad.as_str() {
                        "zeros" => (0..l).contains(&i).then_some(i as usize),
                        "border" => Some(i.clamp(0, l - 1) as usize),
                        _ => Some((reflect(i as f64, lo, hi) as i64).clamp(0, l - 1) as usize),
                    }
                };
                let t = match mode {
                    0 => vec![(pixel(xc as i64), 1.0)],
                    1 => {
                        let i0 = xc.floor();
                        let f = xc - i0;
                        vec![(pixel(i0 as i64), 1.0 - f), (pixel(i0 as i64 + 1), f)]
                    }
                    _ => {
                        let i0 = xc.floor();
                        let w = cubic(xc - i0);
                        (0..4)
                            .map(|k| (pixel(i0 as i64 - 1 + k as i64), w[k]))
                            .collect()
                    }
                };
                taps.push(t);
            }
            for ch in 0..c {
                let base = (b * c + ch) * plane;
                let mut sum = 0.0;
                let mut idx = vec![0usize; r];
                'outer: loop {
                    let mut w = 1.0;
                    let mut off = Some(0usize);
                    for d in 0..r {
                        let (i, wt) = taps[d][idx[d]];
                        w *= wt;
                        off = match (off, i) {
                            (Some(o), Some(i)) => Some(o + i * strides[d]),
                            _ => None,
                        };
                    }
                    if let Some(o) = off {
                        sum += w * xv[base + o];
                    }
                    let mut d = r;
                    loop {
                        if d == 0 {
                            break 'outer;
                        }
                        d -= 1;
                        idx[d] += 1;
                        if idx[d] < taps[d].len() {
                            break;
                        }
                        idx[d] = 0;
                    }
                }
                out[(b * c + ch) * npts + p] = sum;
            }
        }
    }
    out_like(out, odims, x)
}

/// AffineGrid: the sampling grid `[N, D…, r]` that affine matrices `theta [N, r, r+1]` map a
/// regular normalized grid of `size = [N, C, D…]` to.
fn affine_grid(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (theta, size) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let size = ints(size)?;
    let td = theta.dims().to_vec();
    let r = size.len().saturating_sub(2);
    if !(r == 2 || r == 3)
        || td.len() != 3
        || td[1] != r
        || td[2] != r + 1
        || size[0] as usize != td[0]
    {
        return Err(n.err(format!(
            "theta {td:?} and size {size:?}: expected [N, r, r+1] and [N, C, D…] with r = 2 or 3"
        )));
    }
    if size.iter().any(|&s| s < 0) {
        return Err(n.err(format!("negative size {size:?}")));
    }
    let align = n.i("align_corners", 0) != 0;
    let sp: Vec<usize> = size[2..].iter().map(|&s| s as usize).collect();
    let nb = td[0];
    let npts: usize = sp.iter().product();
    let mut odims = vec![nb];
    odims.extend(&sp);
    odims.push(r);
    crate::limits::check_alloc(
        "AffineGrid",
        &Shape::from(odims.clone()),
        theta.tensor.dtype(),
    )?;
    let base = |i: usize, l: usize| -> f64 {
        if align {
            if l <= 1 {
                0.0
            } else {
                -1.0 + 2.0 * i as f64 / (l - 1) as f64
            }
        } else {
            (2.0 * i as f64 + 1.0) / l as f64 - 1.0
        }
    };
    let th = theta.tensor.to_f64_vec();
    let strides = Shape::from(sp.clone()).contiguous_strides();
    let mut out = Vec::with_capacity(nb * npts * r);
    for b in 0..nb {
        let m = &th[b * r * (r + 1)..(b + 1) * r * (r + 1)];
        for p in 0..npts {
            // the point in (x, y[, z]) order: innermost axis first, then 1
            let mut v: Vec<f64> = (0..r)
                .map(|k| {
                    let d = r - 1 - k;
                    base((p / strides[d]) % sp[d], sp[d])
                })
                .collect();
            v.push(1.0);
            for row in 0..r {
                out.push((0..=r).map(|k| m[row * (r + 1) + k] * v[k]).sum());
            }
        }
    }
    out_like(out, odims, theta)
}

/// Col2Im: sum the columns `[N, C·∏block, L]` of an unfold back into `[N, C, image…]`.
fn col2im(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let img = ints(req(n, ins, 1)?)?;
    let blk = ints(req(n, ins, 2)?)?;
    let r = img.len();
    let xd = x.dims().to_vec();
    if r == 0 || blk.len() != r || xd.len() != 3 || img.iter().chain(&blk).any(|&v| v <= 0) {
        return Err(n.err(format!(
            "input {xd:?}, image_shape {img:?}, block_shape {blk:?}"
        )));
    }
    let dil = n.ints("dilations").unwrap_or_else(|| vec![1; r]);
    let strides = n.ints("strides").unwrap_or_else(|| vec![1; r]);
    let pads = n.ints("pads").unwrap_or_else(|| vec![0; 2 * r]);
    if dil.len() != r || strides.len() != r || pads.len() != 2 * r {
        return Err(n.err("dilations, strides and pads must match the image rank"));
    }
    if dil.iter().chain(&strides).any(|&v| v <= 0) {
        return Err(n.err("dilations and strides must be positive"));
    }
    let kprod: i64 = blk.iter().product();
    if xd[1] as i64 % kprod != 0 {
        return Err(n.err(format!("{} channels not a multiple of {kprod}", xd[1])));
    }
    let c = xd[1] / kprod as usize;
    // blocks along each axis
    let mut nblk = Vec::with_capacity(r);
    for d in 0..r {
        let eff = dil[d] * (blk[d] - 1) + 1;
        let cnt = (img[d] + pads[d] + pads[d + r] - eff) / strides[d].max(1) + 1;
        nblk.push(cnt.max(0) as usize);
    }
    if nblk.iter().product::<usize>() != xd[2] {
        return Err(n.err(format!("{} columns, {:?} blocks expected", xd[2], nblk)));
    }
    let imgu: Vec<usize> = img.iter().map(|&v| v as usize).collect();
    let mut odims = vec![xd[0], c];
    odims.extend(&imgu);
    crate::limits::check_alloc("Col2Im", &Shape::from(odims.clone()), x.tensor.dtype())?;
    let plane: usize = imgu.iter().product();
    let blku: Vec<usize> = blk.iter().map(|&v| v as usize).collect();
    let ks = Shape::from(blku.clone()).contiguous_strides();
    let ls = Shape::from(nblk.clone()).contiguous_strides();
    let is = Shape::from(imgu.clone()).contiguous_strides();
    let xv = x.tensor.to_f64_vec();
    let kp = kprod as usize;
    let l = xd[2];
    let mut out = vec![0.0; xd[0] * c * plane];
    for b in 0..xd[0] {
        for ch in 0..c {
            for k in 0..kp {
                for li in 0..l {
                    let mut off = 0usize;
                    let mut inside = true;
                    for d in 0..r {
                        let kk = (k / ks[d]) % blku[d];
                        let bb = (li / ls[d]) % nblk[d];
                        let pos = bb as i64 * strides[d] + kk as i64 * dil[d] - pads[d];
                        if pos < 0 || pos >= img[d] {
                            inside = false;
                            break;
                        }
                        off += pos as usize * is[d];
                    }
                    if inside {
                        out[(b * c + ch) * plane + off] += xv[((b * xd[1]) + ch * kp + k) * l + li];
                    }
                }
            }
        }
    }
    out_like(out, odims, x)
}

/// Bilinear sample of plane `p` (`h`×`w`) at pixel coordinates (y, x), zero outside.
fn bilinear_zero(p: &[f64], h: usize, w: usize, y: f64, x: f64) -> f64 {
    let (y0, x0) = (y.floor(), x.floor());
    let (fy, fx) = (y - y0, x - x0);
    let at = |yy: f64, xx: f64| -> f64 {
        if yy < 0.0 || xx < 0.0 || yy >= h as f64 || xx >= w as f64 {
            0.0
        } else {
            p[yy as usize * w + xx as usize]
        }
    };
    (1.0 - fy) * ((1.0 - fx) * at(y0, x0) + fx * at(y0, x0 + 1.0))
        + fy * ((1.0 - fx) * at(y0 + 1.0, x0) + fx * at(y0 + 1.0, x0 + 1.0))
}

/// DeformConv (2-D): `X [N, C, H, W]`, `W [OC, C/group, kH, kW]`, `offset [N,
/// offset_group·kH·kW·2, oH, oW]`, optional bias and `mask [N, offset_group·kH·kW, oH, oW]`.
fn deform_conv(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, wt, off) = (req(n, ins, 0)?, req(n, ins, 1)?, req(n, ins, 2)?);
    let (bias, mask) = (super::opt(ins, 3), super::opt(ins, 4));
    let (xd, wd, od) = (x.dims().to_vec(), wt.dims().to_vec(), off.dims().to_vec());
    if xd.len() != 4 || wd.len() != 4 || od.len() != 4 || od[0] != xd[0] {
        return Err(n.err(format!(
            "X {xd:?}, W {wd:?}, offset {od:?}: only 2-D deformable convolution is supported"
        )));
    }
    let group = n.i("group", 1).max(1) as usize;
    let og = n.i("offset_group", 1).max(1) as usize;
    let (nb, ic, ih, iw) = (xd[0], xd[1], xd[2], xd[3]);
    let (oc, kh, kw) = (wd[0], wd[2], wd[3]);
    let (oh, ow) = (od[2], od[3]);
    if ic != wd[1] * group || oc % group != 0 || ic % og != 0 || od[1] != og * kh * kw * 2 {
        return Err(n.err(format!(
            "X {xd:?}, W {wd:?}, offset {od:?} disagree (group {group}, offset_group {og})"
        )));
    }
    let dil = n.ints("dilations").unwrap_or_else(|| vec![1, 1]);
    let st = n.ints("strides").unwrap_or_else(|| vec![1, 1]);
    let pads = n.ints("pads").unwrap_or_else(|| vec![0; 4]);
    if dil.len() != 2 || st.len() != 2 || pads.len() != 4 {
        return Err(n.err("dilations, strides and pads must be 2-D"));
    }
    if dil.iter().chain(&st).any(|&v| v <= 0) {
        return Err(n.err("dilations and strides must be positive"));
    }
    if bias.is_some_and(|b| b.tensor.numel() != oc) {
        return Err(n.err(format!("bias must have {oc} values")));
    }
    if let Some(m) = mask {
        if m.dims() != [nb, og * kh * kw, oh, ow] {
            return Err(n.err(format!("mask {:?}", m.dims())));
        }
    }
    let xv = x.tensor.to_f64_vec();
    let wv = wt.tensor.to_f64_vec();
    let ov = off.tensor.to_f64_vec();
    let mv = mask.map(|m| m.tensor.to_f64_vec());
    let bv = bias.map(|b| b.tensor.to_f64_vec());
    let (icg, ocg, icog) = (ic / group, oc / group, ic / og);
    let mut out = vec![0.0; nb * oc * oh * ow];
    for b in 0..nb {
        for o in 0..oc {
            let g = o / ocg;
            for i in 0..oh {
                for j in 0..ow {
                    let mut sum = bv.as_ref().map_or(0.0, |v| v[o]);
                    for c in g * icg..(g + 1) * icg {
                        let ogi = c / icog;
                        let plane = &xv[(b * ic + c) * ih * iw..][..ih * iw];
                        for u in 0..kh {
                            for v in 0..kw {
                                let k = u * kw + v;
                                let oi = |comp: usize| {
                                    ov[(((b * og + ogi) * kh * kw + k) * 2 + comp) * oh * ow
                                        + i * ow
                                        + j]
                                };
                                let y = -pads[0] as f64
                                    + (st[0] as usize * i) as f64
                                    + (u as i64 * dil[0]) as f64
                                    + oi(0);
                                let xx = -pads[1] as f64
                                    + (st[1] as usize * j) as f64
                                    + (v as i64 * dil[1]) as f64
                                    + oi(1);
                                let m = mv.as_ref().map_or(1.0, |mv| {
                                    mv[((b * og + ogi) * kh * kw + k) * oh * ow + i * ow + j]
                                });
                                let wgt = wv[((o * icg + (c - g * icg)) * kh + u) * kw + v];
                                sum += wgt * m * bilinear_zero(plane, ih, iw, y, xx);
                            }
                        }
                    }
                    out[((b * oc + o) * oh + i) * ow + j] = sum;
                }
            }
        }
    }
    out_like(out, vec![nb, oc, oh, ow], x)
}
