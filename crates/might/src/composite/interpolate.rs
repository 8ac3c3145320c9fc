//! Resizing (`torch.nn.functional.interpolate`): nearest, nearest-exact, linear, bilinear and
//! bicubic. Every mode is separable, so each spatial axis is resized on its own: an output
//! position reads `K` source positions (1 for nearest, 2 for linear, 4 for cubic) with fixed
//! weights, computed on the host from PyTorch's index formulas, and the axis becomes
//! `sum_k index_select(axis, idx_k) * w_k`. The backward pass is the primitives' own.

use crate::{Error, Result, Tensor};

/// PyTorch's bicubic coefficient (`A` of Keys' cubic convolution).
const CUBIC_A: f64 = -0.75;

/// Source taps of one axis: `idx[k][o]` and `w[k][o]` for tap `k` of output position `o`.
struct Taps {
    idx: Vec<Vec<i64>>,
    w: Vec<Vec<f64>>,
}

impl Taps {
    fn with_taps(k: usize, output: usize) -> Taps {
        Taps {
            idx: (0..k).map(|_| Vec::with_capacity(output)).collect(),
            w: (0..k).map(|_| Vec::with_capacity(output)).collect(),
        }
    }
}

/// `1 / scale` when a scale factor was given, else `in / out` (PyTorch's
/// `compute_scales_value`).
fn scale_value(scale: Option<f64>, input: usize, output: usize) -> f64 {
    match scale {
        Some(s) if s > 0.0 => 1.0 / s,
        _ => input as f64 / output as f64,
    }
}

/// PyTorch's `area_pixel_compute_scale`: the source step per output step.
fn area_scale(input: usize, output: usize, align_corners: bool, scale: Option<f64>) -> f64 {
    if align_corners {
        if output > 1 {
            (input as f64 - 1.0) / (output as f64 - 1.0)
        } else {
            0.0
        }
    } else {
        scale_value(scale, input, output)
    }
}

/// PyTorch's `area_pixel_compute_source_index`: the real source coordinate of output `o`.
fn source_coord(scale: f64, o: usize, align_corners: bool, cubic: bool) -> f64 {
    if align_corners {
        scale * o as f64
    } else {
        let s = scale * (o as f64 + 0.5) - 0.5;
        if !cubic && s < 0.0 {
            0.0
        } else {
            s
        }
    }
}

/// PyTorch's `guard_index_and_lambda`: the integer part (at most `input - 1`) and the
/// fraction clamped to [0, 1].
fn guard(real: f64, input: usize) -> (i64, f64) {
    let i = (real.floor() as i64).min(input as i64 - 1);
    (i, (real - i as f64).clamp(0.0, 1.0))
}

fn cubic1(x: f64) -> f64 {
    ((CUBIC_A + 2.0) * x - (CUBIC_A + 3.0)) * x * x + 1.0
}

fn cubic2(x: f64) -> f64 {
    ((CUBIC_A * x - 5.0 * CUBIC_A) * x + 8.0 * CUBIC_A) * x - 4.0 * CUBIC_A
}

fn taps(mode: &str, input: usize, output: usize, scale: Option<f64>, align_corners: bool) -> Taps {
    let last = input as i64 - 1;
    match mode {
        "nearest" | "nearest-exact" => {
            // PyTorch computes the nearest scale in f32; match its rounding
            let s = scale_value(scale, input, output) as f32;
            let idx = (0..output)
                .map(|o| {
                    let i = if mode == "nearest" {
                        if output == input {
                            o as i64
                        } else if output == 2 * input {
                            (o / 2) as i64
                        } else {
                            (o as f32 * s).floor() as i64
                        }
                    } else {
                        (((o as f64 + 0.5) * s as f64) as f32).floor() as i64
                    };
                    i.min(last)
                })
                .collect();
            Taps {
                idx: vec![idx],
                w: vec![vec![1.0; output]],
            }
        }
        "linear" | "bilinear" => {
            let s = area_scale(input, output, align_corners, scale);
            let mut t = Taps::with_taps(2, output);
            for o in 0..output {
                let (i0, l1) = guard(source_coord(s, o, align_corners, false), input);
                let i1 = if i0 < last { i0 + 1 } else { i0 };
                t.idx[0].push(i0);
                t.idx[1].push(i1);
                t.w[0].push(1.0 - l1);
                t.w[1].push(l1);
            }
            t
        }
        // bicubic
        _ => {
            let s = area_scale(input, output, align_corners, scale);
            let mut t = Taps::with_taps(4, output);
            for o in 0..output {
                let (i, x) = guard(source_coord(s, o, align_corners, true), input);
                let w = [cubic2(x + 1.0), cubic1(x), cubic1(1.0 - x), cubic2(2.0 - x)];
                for (k, wk) in w.into_iter().enumerate() {
                    t.idx[k].push((i - 1 + k as i64).clamp(0, last));
                    t.w[k].push(wk);
                }
            }
            t
        }
    }
}

/// Resize `x` along `axis` with the given taps.
fn along_axis(x: &Tensor, axis: usize, t: &Taps) -> Result<Tensor> {
    let out = t.idx[0].len();
    let mut wshape = vec![1; x.rank()];
    wshape[axis] = out;
    let mut acc: Option<Tensor> = None;
    for (idx, w) in t.idx.iter().zip(&t.w) {
        let it = Tensor::from_vec(idx.clone(), [out])?.to_device(x.device())?;
        let picked = x.index_select(axis as isize, &it)?;
        let term = if w.iter().all(|&v| v == 1.0) {
            picked
        } else {
            let wt = Tensor::from_vec(w.clone(), wshape.clone())?
                .to_dtype(x.dtype())?
                .to_device(x.device())?;
            picked.mul(&wt)?
        };
        acc = Some(match acc {
            None => term,
            Some(a) => a.add(&term)?,
        });
    }
    Ok(acc.expect("at least one tap"))
}

impl Tensor {
    /// `torch.nn.functional.interpolate` over the spatial dims of `[N, C, *spatial]`. Give
    /// exactly one of `size` (the output spatial size) and `scale_factor` (output =
    /// `floor(input * scale)`, and the scale itself drives the coordinate mapping, as PyTorch
    /// does with `recompute_scale_factor=None`); either may hold one value for all spatial
    /// dims. `mode`: `"nearest"` (PyTorch's legacy `floor(o * in / out)`), `"nearest-exact"`,
    /// `"linear"` (3-D input), `"bilinear"` (4-D), `"bicubic"` (4-D, `A = -0.75`, borders
    /// clamped). `align_corners` is for the linear and cubic modes only (default false).
    /// Differentiable (not in the integer source positions).
    #[track_caller]
    pub fn interpolate(
        &self,
        size: Option<&[usize]>,
        scale_factor: Option<&[f64]>,
        mode: &str,
        align_corners: Option<bool>,
    ) -> Result<Tensor> {
        let op = "interpolate";
        let r = self.rank();
        let spatial = r.saturating_sub(2);
        let want_rank = match mode {
            "nearest" | "nearest-exact" => None,
            "linear" => Some(3),
            "bilinear" | "bicubic" => Some(4),
            _ => {
                return Err(Error::invalid(
                    op,
                    format!(
                        "mode must be nearest, nearest-exact, linear, bilinear or bicubic, got \
                         {mode:?} (input {})",
                        self.shape()
                    ),
                ))
            }
        };
        if want_rank.is_some_and(|w| w != r) || !(1..=3).contains(&spatial) {
            return Err(Error::shape(
                op,
                format!(
                    "{mode} mode needs a {}-D input [N, C, ...], got {}",
                    want_rank.map_or("3-D to 5".to_string(), |w| w.to_string()),
                    self.shape()
                ),
            ));
        }
        if align_corners.is_some() && want_rank.is_none() {
            return Err(Error::invalid(
                op,
                format!(
                    "align_corners can only be set with linear, bilinear or bicubic, not {mode}"
                ),
            ));
        }
        if !self.dtype().is_float() {
            return Err(Error::dtype(
                op,
                format!("input must be a float tensor, got {}", self.dtype()),
            ));
        }
        let in_sp = &self.dims()[2..];
        let per_dim = |n: usize, what: &str| -> Result<()> {
            if n == 1 || n == spatial {
                Ok(())
            } else {
                Err(Error::shape(
                    op,
                    format!(
                        "{what} has {n} values for {spatial} spatial dims of {}",
                        self.shape()
                    ),
                ))
            }
        };
        let (out_sp, scales): (Vec<usize>, Vec<Option<f64>>) = match (size, scale_factor) {
            (Some(s), None) => {
                per_dim(s.len(), "size")?;
                (
                    (0..spatial).map(|i| s[i.min(s.len() - 1)]).collect(),
                    vec![None; spatial],
                )
            }
            (None, Some(f)) => {
                per_dim(f.len(), "scale_factor")?;
                let f: Vec<f64> = (0..spatial).map(|i| f[i.min(f.len() - 1)]).collect();
                if f.iter().any(|v| !v.is_finite() || *v <= 0.0) {
                    return Err(Error::invalid(
                        op,
                        format!("scale_factor must be positive and finite, got {f:?}"),
                    ));
                }
                let out = in_sp
                    .iter()
                    .zip(&f)
                    .map(|(&i, &s)| (i as f64 * s).floor().min(usize::MAX as f64) as usize)
                    .collect();
                (out, f.into_iter().map(Some).collect())
            }
            _ => {
                return Err(Error::invalid(
                    op,
                    "give exactly one of size and scale_factor",
                ))
            }
        };
        if out_sp.contains(&0) || in_sp.contains(&0) {
            return Err(Error::shape(
                op,
                format!(
                    "input and output sizes must be positive: input {}, output {out_sp:?}",
                    self.shape()
                ),
            ));
        }
        let mut out_dims = self.dims().to_vec();
        out_dims[2..].copy_from_slice(&out_sp);
        crate::limits::check_alloc(op, &out_dims.into(), self.dtype())?;
        let ac = align_corners.unwrap_or(false);
        let mut y = self.clone();
        for i in 0..spatial {
            let t = taps(mode, in_sp[i], out_sp[i], scales[i], ac);
            y = along_axis(&y, 2 + i, &t)?;
        }
        Ok(y)
    }
}
