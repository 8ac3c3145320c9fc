//! `Resize` (and the older `Upsample`): nearest, linear and cubic interpolation with every
//! coordinate transformation, antialiasing, `exclude_outside` and aspect-ratio policies.
//!
//! Separable, one axis at a time, as the ONNX reference does: for each output position the
//! host computes the taps (input indices) and their weights; the device gathers each tap with
//! `index_select` and sums the weighted copies.

use super::{opt, req, same, Node, OpFn};
use crate::onnx::value::{ints, Value};
use crate::{DType, Result, Tensor};

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Resize" => resize,
        "Upsample" => upsample,
        _ => return None,
    })
}

/// A non-empty optional input.
fn given(ins: &[Option<Value>], i: usize) -> Option<&Value> {
    opt(ins, i).filter(|v| v.tensor.numel() > 0)
}

fn upsample(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let scales: Vec<f64> = match given(ins, 1) {
        Some(s) => s.tensor.to_f64_vec(),
        None => n
            .floats("scales")
            .unwrap_or_default()
            .iter()
            .map(|&v| v as f64)
            .collect(),
    };
    let mode = n.s("mode", "nearest");
    let mode = if mode == "bilinear" {
        "linear".to_string()
    } else {
        mode
    };
    let cfg = Cfg {
        mode,
        coord: "asymmetric".into(),
        nearest: "floor".into(),
        a: -0.75,
        exclude: false,
        extrap: 0.0,
        antialias: false,
    };
    let sizes: Vec<usize> = x
        .dims()
        .iter()
        .zip(&scales)
        .map(|(&d, &s)| (d as f64 * s) as usize)
        .collect();
    run(
        n,
        x,
        scales,
        sizes,
        (0..x.dims().len()).collect(),
        None,
        &cfg,
    )
}

struct Cfg {
    mode: String,
    coord: String,
    nearest: String,
    a: f64,
    exclude: bool,
    extrap: f64,
    antialias: bool,
}

fn resize(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let r = x.dims().len();
    // opset 10: (X, scales)
    let (roi, scales, sizes) = if n.opset < 11 {
        (None, given(ins, 1), None)
    } else {
        (given(ins, 1), given(ins, 2), given(ins, 3))
    };
    let axes: Vec<usize> = match n.ints("axes") {
        Some(a) => a
            .iter()
            .map(|&a| super::axis(n, a, r))
            .collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    let cfg = Cfg {
        mode: n.s("mode", "nearest"),
        coord: n.s(
            "coordinate_transformation_mode",
            if n.opset < 11 {
                "asymmetric"
            } else {
                "half_pixel"
            },
        ),
        nearest: n.s(
            "nearest_mode",
            if n.opset < 11 {
                "floor"
            } else {
                "round_prefer_floor"
            },
        ),
        a: n.f("cubic_coeff_a", -0.75) as f64,
        exclude: n.i("exclude_outside", 0) != 0,
        extrap: n.f("extrapolation_value", 0.0) as f64,
        antialias: n.i("antialias", 0) != 0,
    };
    let mut scale = vec![1.0; r];
    let mut size: Vec<usize> = x.dims().to_vec();
    match (sizes, scales) {
        (Some(sz), _) => {
            let sz = ints(sz)?;
            if sz.len() != axes.len() {
                return Err(n.err(format!("{} sizes for {} axes", sz.len(), axes.len())));
            }
            for (k, &a) in axes.iter().enumerate() {
                size[a] = sz[k].max(0) as usize;
                scale[a] = size[a] as f64 / x.dims()[a] as f64;
            }
            let policy = n.s("keep_aspect_ratio_policy", "stretch");
            if policy != "stretch" {
                let pick = axes.iter().map(|&a| scale[a]);
                let s = if policy == "not_larger" {
                    pick.fold(f64::INFINITY, f64::min)
                } else {
                    pick.fold(f64::NEG_INFINITY, f64::max)
                };
                for &a in &axes {
                    scale[a] = s;
                    size[a] = (s * x.dims()[a] as f64 + 0.5) as usize;
                }
            }
        }
        (None, Some(sc)) => {
            let sc = sc.tensor.to_f64_vec();
            if sc.len() != axes.len() {
                return Err(n.err(format!("{} scales for {} axes", sc.len(), axes.len())));
            }
            for (k, &a) in axes.iter().enumerate() {
                if sc[k] <= 0.0 {
                    return Err(n.err(format!("scale {}", sc[k])));
                }
                scale[a] = sc[k];
                size[a] = (sc[k] * x.dims()[a] as f64) as usize;
            }
        }
        (None, None) => return Err(n.err("needs scales or sizes")),
    }
    crate::limits::check_alloc(
        "Resize",
        &crate::Shape::from(size.clone()),
        x.tensor.dtype(),
    )?;
    let roi = match roi {
        Some(v) => {
            let v = v.tensor.to_f64_vec();
            let mut full = vec![0.0; r];
            full.extend(vec![1.0; r]);
            for (k, &a) in axes.iter().enumerate() {
                full[a] = v[k];
                full[r + a] = *v.get(axes.len() + k).unwrap_or(&1.0);
            }
            Some(full)
        }
        None => None,
    };
    run(n, x, scale, size, axes, roi, &cfg)
}

fn run(
    n: &Node,
    x: &Value,
    scale: Vec<f64>,
    size: Vec<usize>,
    axes: Vec<usize>,
    roi: Option<Vec<f64>>,
    cfg: &Cfg,
) -> Result<Vec<Value>> {
    let r = x.dims().len();
    let dt = x.tensor.dtype();
    let mut t = x.tensor.to_dtype(DType::F64)?;
    for &a in &axes {
        let axis_roi = roi.as_ref().map(|v| (v[a], v[a + r]));
        let identity = (scale[a] - 1.0).abs() < 1e-12
            && size[a] == t.dims()[a]
            && axis_roi.is_none_or(|(s, e)| s == 0.0 && e == 1.0);
        if identity {
            continue;
        }
        t = along_axis(n, &t, a, scale[a], size[a], axis_roi, cfg)?;
    }
    let y = if dt.is_float() {
        t.to_dtype(dt)?
    } else {
        // integers saturate to their range
        let (lo, hi) = if dt == DType::U8 {
            (0.0, 255.0)
        } else {
            (i64::MIN as f64, i64::MAX as f64)
        };
        t.round()?.clamp(Some(lo), Some(hi))?.to_dtype(dt)?
    };
    same(y, x)
}

fn coeffs(cfg: &Cfg, ratio: f64, scale: f64) -> Vec<f64> {
    match cfg.mode.as_str() {
        "nearest" => {
            if ratio.fract() == 0.0 {
                return vec![0.0, 1.0];
            }
            let up = match cfg.nearest.as_str() {
                "round_prefer_ceil" => ratio >= 0.5,
                "floor" => false,
                "ceil" => true,
                _ => ratio > 0.5,
            };
            vec![(!up) as u8 as f64, up as u8 as f64]
        }
        "cubic" if cfg.antialias => {
            let s = scale.min(1.0);
            let a = cfg.a;
            let f = |x: f64| {
                let x = x.abs();
                if x <= 1.0 {
                    (a + 2.0) * x.powi(3) - (a + 3.0) * x * x + 1.0
                } else if x < 2.0 {
                    a * x.powi(3) - 5.0 * a * x * x + 8.0 * a * x - 4.0 * a
                } else {
                    0.0
                }
            };
            let start = (-2.0 / s).floor() as i64 + 1;
            let c: Vec<f64> = (start..2 - start)
                .map(|i| f(s * (i as f64 - ratio)))
                .collect();
            let sum: f64 = c.iter().sum();
            c.iter().map(|v| v / sum).collect()
        }
        "cubic" => {
            let (a, t) = (cfg.a, ratio);
            vec![
                ((a * (t + 1.0) - 5.0 * a) * (t + 1.0) + 8.0 * a) * (t + 1.0) - 4.0 * a,
                ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0,
                ((a + 2.0) * (1.0 - t) - (a + 3.0)) * (1.0 - t) * (1.0 - t) + 1.0,
                ((a * (2.0 - t) - 5.0 * a) * (2.0 - t) + 8.0 * a) * (2.0 - t) - 4.0 * a,
            ]
        }
        _ if cfg.antialias => {
            let s = scale.min(1.0);
            let start = (-1.0 / s).floor() as i64 + 1;
            let c: Vec<f64> = (start..start + 2 - 2 * start)
                .map(|i| (1.0 - ((i as f64 - ratio) * s).abs()).clamp(0.0, 1.0))
                .collect();
            let sum: f64 = c.iter().sum();
            c.iter().map(|v| v / sum).collect()
        }
        _ => vec![1.0 - ratio, ratio],
    }
}

fn along_axis(
    n: &Node,
    t: &Tensor,
    a: usize,
    scale: f64,
    out: usize,
    roi: Option<(f64, f64)>,
    cfg: &Cfg,
) -> Result<Tensor> {
    let inw = t.dims()[a];
    if out == 0 || inw == 0 {
        let mut d = t.dims().to_vec();
        d[a] = out;
        return Tensor::zeros_on(d, t.dtype(), t.device());
    }
    let outw = scale * inw as f64;
    let mut taps: Vec<Vec<i64>> = Vec::with_capacity(out);
    let mut weights: Vec<Vec<f64>> = Vec::with_capacity(out);
    let mut extrapolated = vec![false; out];
    for (y, ext) in extrapolated.iter_mut().enumerate() {
        let yf = y as f64;
        let x = match cfg.coord.as_str() {
            "align_corners" => {
                if outw == 1.0 {
                    0.0
                } else {
                    yf * (inw as f64 - 1.0) / (outw - 1.0)
                }
            }
            "asymmetric" => yf / scale,
            "tf_crop_and_resize" => {
                let (s, e) = roi.ok_or_else(|| n.err("tf_crop_and_resize needs roi"))?;
                let x = if outw == 1.0 {
                    (e - s) * (inw as f64 - 1.0) / 2.0
                } else {
                    yf * (e - s) * (inw as f64 - 1.0) / (outw - 1.0)
                };
                let x = x + s * (inw as f64 - 1.0);
                *ext = x < 0.0 || x > inw as f64 - 1.0;
                x
            }
            "pytorch_half_pixel" => {
                if outw == 1.0 {
                    -0.5
                } else {
                    (yf + 0.5) / scale - 0.5
                }
            }
            "half_pixel_symmetric" => {
                let adj = out as f64 / outw;
                let center = inw as f64 / 2.0;
                center * (1.0 - adj) + (yf + 0.5) / scale - 0.5
            }
            "half_pixel" => (yf + 0.5) / scale - 0.5,
            m => return Err(n.err(format!("coordinate_transformation_mode '{m}'"))),
        };
        let xi = x.floor();
        let ratio = if x == xi { 1.0 } else { x - xi };
        let mut c = coeffs(cfg, ratio, scale);
        let k = c.len();
        // the k indices closest to x (ties to the smaller), as the reference picks them
        let pad = k.div_ceil(2) as f64;
        let xp = x + pad;
        let p = xp.floor();
        let frac = xp - p;
        let off = if k.is_multiple_of(2) {
            if frac == 0.0 {
                -((k / 2) as i64)
            } else {
                -((k / 2) as i64) + 1
            }
        } else {
            let base = -(((k - 1) / 2) as i64);
            if frac <= 0.5 {
                base
            } else {
                base + 1
            }
        };
        let start = p as i64 + off - pad as i64;
        let idx: Vec<i64> = (0..k as i64).map(|j| start + j).collect();
        if cfg.exclude {
            for (w, &i) in c.iter_mut().zip(&idx) {
                if i < 0 || i >= inw as i64 {
                    *w = 0.0;
                }
            }
            let s: f64 = c.iter().sum();
            let s = if s == 0.0 { 1.0 } else { s };
            c.iter_mut().for_each(|w| *w /= s);
        }
        taps.push(idx.iter().map(|&i| i.clamp(0, inw as i64 - 1)).collect());
        weights.push(c);
    }
    let k = weights[0].len();
    let dev = t.device();
    let mut shape = vec![1; t.dims().len()];
    shape[a] = out;
    let mut acc: Option<Tensor> = None;
    for j in 0..k {
        let w: Vec<f64> = weights
            .iter()
            .map(|c| c.get(j).copied().unwrap_or(0.0))
            .collect();
        if w.iter().all(|&v| v == 0.0) {
            continue;
        }
        let idx: Vec<i64> = taps
            .iter()
            .map(|ix| ix.get(j).copied().unwrap_or(0))
            .collect();
        let picked = t.index_select(a as isize, &Tensor::from_vec(idx, [out])?.to_device(dev)?)?;
        let term = picked.mul(&Tensor::from_vec(w, shape.clone())?.to_device(dev)?)?;
        acc = Some(match acc {
            Some(s) => s.add(&term)?,
            None => term,
        });
    }
    let mut y = match acc {
        Some(y) => y,
        None => {
            let mut d = t.dims().to_vec();
            d[a] = out;
            Tensor::zeros_on(d, t.dtype(), dev)?
        }
    };
    if extrapolated.iter().any(|&e| e) {
        let m = Tensor::from_vec(extrapolated, shape)?.to_device(dev)?;
        y = Tensor::where_(&m, &Tensor::full_on((), cfg.extrap, y.dtype(), dev)?, &y)?;
    }
    Ok(y)
}
