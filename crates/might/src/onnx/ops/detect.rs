//! Object-detection operators: NonMaxSuppression and RoiAlign. Data-dependent output sizes and
//! greedy loops, so it runs on the host; the inputs are a few thousand boxes at most.

use super::{opt, req, Node, OpFn};
use crate::onnx::value::{ints, Value};
use crate::{Result, Tensor};

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "NonMaxSuppression" => nms,
        "RoiAlign" => roi_align,
        _ => return None,
    })
}

/// A box as (y1, x1, y2, x2) with y1 <= y2, x1 <= x2.
fn corners(b: &[f64], center: bool) -> [f64; 4] {
    if center {
        let (xc, yc, w, h) = (b[0], b[1], b[2], b[3]);
        [yc - h / 2.0, xc - w / 2.0, yc + h / 2.0, xc + w / 2.0]
    } else {
        [
            b[0].min(b[2]),
            b[1].min(b[3]),
            b[0].max(b[2]),
            b[1].max(b[3]),
        ]
    }
}

fn iou(a: &[f64; 4], b: &[f64; 4]) -> f64 {
    let ih = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let iw = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = ih * iw;
    let area = |r: &[f64; 4]| (r[2] - r[0]) * (r[3] - r[1]);
    let union = area(a) + area(b) - inter;
    if inter <= 0.0 || union <= 0.0 {
        0.0
    } else {
        inter / union
    }
}

/// NonMaxSuppression: per batch and class, keep boxes by descending score, dropping any whose
/// IoU with a kept box exceeds `iou_threshold`; out `[k, 3]` of (batch, class, box).
fn nms(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (boxes, scores) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let (bd, sd) = (boxes.dims().to_vec(), scores.dims().to_vec());
    if bd.len() != 3 || bd[2] != 4 || sd.len() != 3 || sd[0] != bd[0] || sd[2] != bd[1] {
        return Err(n.err(format!(
            "boxes {bd:?} and scores {sd:?}: expected [B, S, 4] and [B, C, S]"
        )));
    }
    let max_out = match opt(ins, 2) {
        Some(v) => ints(v)?.first().copied().unwrap_or(0).max(0) as usize,
        None => 0,
    };
    let scalar = |i: usize| opt(ins, i).and_then(|v| v.tensor.to_f64_vec().first().copied());
    let iou_t = scalar(3).unwrap_or(0.0);
    let score_t = scalar(4);
    let center = n.i("center_point_box", 0) != 0;
    let (nb, nc, ns) = (sd[0], sd[1], sd[2]);
    let bv = boxes.tensor.to_f64_vec();
    let sv = scores.tensor.to_f64_vec();
    let mut out: Vec<i64> = Vec::new();
    for b in 0..nb {
        let bx: Vec<[f64; 4]> = (0..ns)
            .map(|s| corners(&bv[(b * ns + s) * 4..(b * ns + s + 1) * 4], center))
            .collect();
        for c in 0..nc {
            let sc = &sv[(b * nc + c) * ns..(b * nc + c + 1) * ns];
            let mut cand: Vec<usize> = (0..ns)
                .filter(|&s| score_t.is_none_or(|t| sc[s] > t))
                .collect();
            // stable: equal scores keep box order
            cand.sort_by(|&i, &j| sc[j].total_cmp(&sc[i]));
            let mut kept: Vec<usize> = Vec::new();
            for s in cand {
                if kept.len() >= max_out {
                    break;
                }
                if kept.iter().all(|&k| iou(&bx[k], &bx[s]) <= iou_t) {
                    kept.push(s);
                }
            }
            for s in kept {
                out.extend([b as i64, c as i64, s as i64]);
            }
        }
    }
    let k = out.len() / 3;
    let t = Tensor::from_vec(out, vec![k, 3])?.to_device(boxes.tensor.device())?;
    Ok(vec![Value::new(t)])
}

/// Bilinear taps (flat position, weight) of point (y, x) in an `h`×`w` plane, as the
/// reference RoiAlign computes them (points just outside clamp to the border; far outside: none).
fn taps(y: f64, x: f64, h: usize, w: usize) -> [(usize, f64); 4] {
    let (hf, wf) = (h as f64, w as f64);
    if y < -1.0 || y > hf || x < -1.0 || x > wf {
        return [(0, 0.0); 4];
    }
    let (mut y, mut x) = (y.max(0.0), x.max(0.0));
    let (mut yl, mut xl) = (y as usize, x as usize);
    let (yh, xh);
    if yl >= h - 1 {
        yl = h - 1;
        yh = yl;
        y = yl as f64;
    } else {
        yh = yl + 1;
    }
    if xl >= w - 1 {
        xl = w - 1;
        xh = xl;
        x = xl as f64;
    } else {
        xh = xl + 1;
    }
    let (ly, lx) = (y - yl as f64, x - xl as f64);
    let (hy, hx) = (1.0 - ly, 1.0 - lx);
    [
        (yl * w + xl, hy * hx),
        (yl * w + xh, hy * lx),
        (yh * w + xl, ly * hx),
        (yh * w + xh, ly * lx),
    ]
}

/// RoiAlign: average (or max) of bilinear samples on a regular grid in each of
/// `output_height`×`output_width` bins of every region `rois [R, 4]` (x1, y1, x2, y2) of image
/// `batch_indices[r]` of `X [N, C, H, W]`.
fn roi_align(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, rois, bi) = (req(n, ins, 0)?, req(n, ins, 1)?, req(n, ins, 2)?);
    let xd = x.dims().to_vec();
    let nr = bi.tensor.numel();
    if xd.len() != 4 || rois.dims() != [nr, 4] || xd[2] == 0 || xd[3] == 0 {
        return Err(n.err(format!(
            "X {xd:?}, rois {:?}, batch_indices {:?}: expected [N, C, H, W], [R, 4], [R]",
            rois.dims(),
            bi.dims()
        )));
    }
    let (c, h, w) = (xd[1], xd[2], xd[3]);
    let (oh, ow) = (n.i("output_height", 1), n.i("output_width", 1));
    if oh <= 0 || ow <= 0 {
        return Err(n.err("output_height and output_width must be positive"));
    }
    let (oh, ow) = (oh as usize, ow as usize);
    let ratio = n.i("sampling_ratio", 0);
    let scale = n.f("spatial_scale", 1.0) as f64;
    let half = n.s("coordinate_transformation_mode", "half_pixel") == "half_pixel";
    let max_mode = n.s("mode", "avg") == "max";
    let od = vec![nr, c, oh, ow];
    crate::limits::check_alloc(
        "RoiAlign",
        &crate::Shape::from(od.clone()),
        x.tensor.dtype(),
    )?;
    let xv = x.tensor.to_f64_vec();
    let rv = rois.tensor.to_f64_vec();
    let bv = ints(bi)?;
    let mut out = vec![0.0; nr * c * oh * ow];
    for r in 0..nr {
        let b = bv[r];
        if b < 0 || b as usize >= xd[0] {
            return Err(n.err(format!("batch index {b} outside the batch of {}", xd[0])));
        }
        let off = if half { 0.5 } else { 0.0 };
        let sw = rv[r * 4] * scale - off;
        let sh = rv[r * 4 + 1] * scale - off;
        let (mut rw, mut rh) = (
            rv[r * 4 + 2] * scale - off - sw,
            rv[r * 4 + 3] * scale - off - sh,
        );
        if !half {
            rw = rw.max(1.0);
            rh = rh.max(1.0);
        }
        let (bh, bw) = (rh / oh as f64, rw / ow as f64);
        let gh = if ratio > 0 {
            ratio as usize
        } else {
            (rh / oh as f64).ceil().max(0.0) as usize
        };
        let gw = if ratio > 0 {
            ratio as usize
        } else {
            (rw / ow as f64).ceil().max(0.0) as usize
        };
        let count = (gh * gw).max(1) as f64;
        for ph in 0..oh {
            for pw in 0..ow {
                let mut pts = Vec::with_capacity(gh * gw);
                for iy in 0..gh {
                    let yy = sh + ph as f64 * bh + (iy as f64 + 0.5) * bh / gh as f64;
                    for ix in 0..gw {
                        let xx = sw + pw as f64 * bw + (ix as f64 + 0.5) * bw / gw as f64;
                        pts.push(taps(yy, xx, h, w));
                    }
                }
                for ch in 0..c {
                    let plane = &xv[(b as usize * c + ch) * h * w..][..h * w];
                    let v = if max_mode {
                        pts.iter()
                            .map(|t| {
                                t.iter()
                                    .map(|&(p, wt)| wt * plane[p])
                                    .fold(f64::NEG_INFINITY, f64::max)
                            })
                            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
                            .unwrap_or(0.0)
                    } else {
                        pts.iter()
                            .map(|t| t.iter().map(|&(p, wt)| wt * plane[p]).sum::<f64>())
                            .sum::<f64>()
                            / count
                    };
                    out[((r * c + ch) * oh + ph) * ow + pw] = v;
                }
            }
        }
    }
    let t = Tensor::from_vec(out, od)?
        .to_dtype(x.tensor.dtype())?
        .to_device(x.tensor.device())?;
    Ok(vec![Value::typed(t, x.elem)])
}
