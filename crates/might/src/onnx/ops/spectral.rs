//! Fourier transforms: DFT (opsets 17 and 20: forward, inverse, one-sided and its inverse)
//! STFT and MelWeightMatrix. Direct O(n²) sums on the host in `f64`: exact to rounding for the short signals
//! models transform, and no FFT plan to keep.

use super::{axis, opt, req, Node, OpFn};
use crate::onnx::value::{dtype_of, ints, Value};
use crate::{Result, Shape, Tensor};
use std::f64::consts::PI;

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "DFT" => dft,
        "STFT" => stft,
        "MelWeightMatrix" => mel_weight_matrix,
        _ => return None,
    })
}

/// The complex DFT of `x` at `n` points (zero-padded or truncated); `inverse` conjugates the
/// kernel and divides by `n`.
fn transform(x: &[(f64, f64)], n: usize, inverse: bool, bins: usize) -> Vec<(f64, f64)> {
    let sign = if inverse { 1.0 } else { -1.0 };
    let m = x.len().min(n);
    (0..bins)
        .map(|k| {
            let (mut re, mut im) = (0.0, 0.0);
            for (t, &(a, b)) in x[..m].iter().enumerate() {
                let ang = sign * 2.0 * PI * ((k * t) % n) as f64 / n as f64;
                let (s, c) = ang.sin_cos();
                re += a * c - b * s;
                im += a * s + b * c;
            }
            if inverse {
                (re / n as f64, im / n as f64)
            } else {
                (re, im)
            }
        })
        .collect()
}

/// The real signal whose one-sided spectrum is `x` (`n` points), as numpy's irfft.
fn inverse_real(x: &[(f64, f64)], n: usize) -> Vec<f64> {
    let at = |j: usize| x.get(j).copied().unwrap_or((0.0, 0.0));
    let full: Vec<(f64, f64)> = (0..n)
        .map(|j| {
            if j <= n / 2 {
                at(j)
            } else {
                let (a, b) = at(n - j);
                (a, -b)
            }
        })
        .collect();
    transform(&full, n, true, n)
        .into_iter()
        .map(|c| c.0)
        .collect()
}

fn dft(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let d = x.dims().to_vec();
    let r = d.len();
    if r < 2 || !(d[r - 1] == 1 || d[r - 1] == 2) {
        return Err(n.err(format!("input {d:?}: expected [..., signal, 1 or 2]")));
    }
    let ax = if n.opset >= 20 {
        match opt(ins, 2) {
            Some(a) => ints(a)?.first().copied().unwrap_or(-2),
            None => -2,
        }
    } else {
        n.i("axis", 1)
    };
    let a = axis(n, ax, r)?;
    if a == r - 1 {
        return Err(n.err("the transform axis cannot be the real/imaginary axis"));
    }
    let inverse = n.i("inverse", 0) != 0;
    let onesided = n.i("onesided", 0) != 0;
    let len = d[a];
    let nfft = match opt(ins, 1) {
        Some(v) => {
            let l = ints(v)?.first().copied().unwrap_or(0);
            if l <= 0 {
                return Err(n.err(format!("dft_length {l} must be positive")));
            }
            l as usize
        }
        None if inverse && onesided => 2 * len.saturating_sub(1),
        None => len,
    };
    if nfft == 0 {
        return Err(n.err("empty transform"));
    }
    let (bins, comps) = match (inverse, onesided) {
        (false, true) => (nfft / 2 + 1, 2),
        (true, true) => (nfft, 1),
        _ => (nfft, 2),
    };
    let mut od = d.clone();
    od[a] = bins;
    od[r - 1] = comps;
    crate::limits::check_alloc("DFT", &Shape::from(od.clone()), x.tensor.dtype())?;
    let xv = x.tensor.to_f64_vec();
    let c = d[r - 1];
    let outer: usize = d[..a].iter().product();
    let inner: usize = d[a + 1..r - 1].iter().product();
    let mut out = vec![0.0; od.iter().product()];
    for o in 0..outer {
        for i in 0..inner {
            let sig: Vec<(f64, f64)> = (0..len)
                .map(|t| {
                    let base = ((o * len + t) * inner + i) * c;
                    (xv[base], if c == 2 { xv[base + 1] } else { 0.0 })
                })
                .collect();
            let put = |out: &mut Vec<f64>, k: usize, v: &[f64]| {
                let base = ((o * bins + k) * inner + i) * comps;
                out[base..base + comps].copy_from_slice(v);
            };
            if inverse && onesided {
                for (k, v) in inverse_real(&sig, nfft).into_iter().enumerate() {
                    put(&mut out, k, &[v]);
                }
            } else {
                for (k, (re, im)) in transform(&sig, nfft, inverse, bins).into_iter().enumerate() {
                    put(&mut out, k, &[re, im]);
                }
            }
        }
    }
    let t = Tensor::from_vec(out, od)?
        .to_dtype(x.tensor.dtype())?
        .to_device(x.tensor.device())?;
    Ok(vec![Value::typed(t, x.elem)])
}

/// STFT: `signal [B, L, 1|2]`, `frame_step`, optional `window [W]` and `frame_length`; out
/// `[B, frames, bins, 2]` with `frames = (L - W) / step + 1`.
fn stft(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let d = x.dims().to_vec();
    if d.len() != 3 || !(d[2] == 1 || d[2] == 2) {
        return Err(n.err(format!("signal {d:?}: expected [batch, length, 1 or 2]")));
    }
    let step = ints(req(n, ins, 1)?)?.first().copied().unwrap_or(0);
    if step <= 0 {
        return Err(n.err(format!("frame_step {step} must be positive")));
    }
    let window = opt(ins, 2).map(|w| w.tensor.to_f64_vec());
    let flen = match opt(ins, 3) {
        Some(v) => ints(v)?.first().copied().unwrap_or(0),
        None => window.as_ref().map_or(0, |w| w.len() as i64),
    };
    if flen <= 0 || flen as usize > d[1] {
        return Err(n.err(format!(
            "frame length {flen} for a signal of length {}",
            d[1]
        )));
    }
    let flen = flen as usize;
    let window = window.unwrap_or_else(|| vec![1.0; flen]);
    if window.len() != flen {
        return Err(n.err(format!(
            "window of {} for frame length {flen}",
            window.len()
        )));
    }
    let onesided = n.i("onesided", 1) != 0;
    let frames = (d[1] - flen) / step as usize + 1;
    let bins = if onesided { flen / 2 + 1 } else { flen };
    let od = vec![d[0], frames, bins, 2];
    crate::limits::check_alloc("STFT", &Shape::from(od.clone()), x.tensor.dtype())?;
    let xv = x.tensor.to_f64_vec();
    let c = d[2];
    let mut out = Vec::with_capacity(od.iter().product());
    for b in 0..d[0] {
        for f in 0..frames {
            let sig: Vec<(f64, f64)> = (0..flen)
                .map(|t| {
                    let base = (b * d[1] + f * step as usize + t) * c;
                    let w = window[t];
                    (xv[base] * w, if c == 2 { xv[base + 1] * w } else { 0.0 })
                })
                .collect();
            for (re, im) in transform(&sig, flen, false, bins) {
                out.extend([re, im]);
            }
        }
    }
    let t = Tensor::from_vec(out, od)?
        .to_dtype(x.tensor.dtype())?
        .to_device(x.tensor.device())?;
    Ok(vec![Value::typed(t, x.elem)])
}

/// MelWeightMatrix: `[dft_length/2 + 1, num_mel_bins]` triangular filters evenly spaced on the
/// mel scale between the edge frequencies. The edges and the mel step are computed in `f32`
/// and the bin positions in `f64`, as the ONNX reference does, so the integer bins agree.
fn mel_weight_matrix(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let first = |i: usize| -> Result<f64> {
        req(n, ins, i)?
            .tensor
            .to_f64_vec()
            .first()
            .copied()
            .ok_or_else(|| n.err(format!("input {i} is empty")))
    };
    let (bins, dft_len, rate) = (first(0)? as i64, first(1)? as i64, first(2)? as i64);
    let (lo, hi) = (first(3)? as f32, first(4)? as f32);
    if bins <= 0 || dft_len <= 0 || rate <= 0 {
        return Err(n.err(format!(
            "num_mel_bins {bins}, dft_length {dft_len} and sample_rate {rate} must be positive"
        )));
    }
    let spec = (dft_len / 2 + 1) as usize;
    let bins = bins as usize;
    let e = n.i("output_datatype", 1) as i32;
    let dt = dtype_of(e).ok_or_else(|| n.err("unsupported output_datatype"))?;
    crate::limits::check_alloc("MelWeightMatrix", &Shape::from(vec![spec, bins]), dt)?;
    let ln10 = std::f32::consts::LN_10;
    let lo_mel = 2595.0f32 * (lo / 700.0).ln_1p() / ln10;
    let hi_mel = 2595.0f32 * (hi / 700.0).ln_1p() / ln10;
    let step = (hi_mel - lo_mel) / (bins + 2) as f32;
    let fb: Vec<i64> = (0..bins + 2)
        .map(|k| {
            let mel = k as f64 * step as f64 + lo_mel as f64;
            let hz = 700.0 * (mel / 2595.0 * std::f64::consts::LN_10).exp_m1();
            ((dft_len + 1) as f64 * hz / rate as f64).floor() as i64
        })
        .collect();
    let mut out = vec![0.0f64; spec * bins];
    let mut set = |j: i64, i: usize, v: f64| -> Result<()> {
        if j < 0 || j as usize >= spec {
            return Err(n.err(format!(
                "mel bin edge {j} outside the {spec} spectrogram bins"
            )));
        }
        out[j as usize * bins + i] = v;
        Ok(())
    };
    for i in 0..bins {
        let (l, c, h) = (fb[i], fb[i + 1], fb[i + 2]);
        if c == l {
            set(c, i, 1.0)?;
        } else {
            for j in l..=c {
                set(j, i, (j - l) as f64 / (c - l) as f64)?;
            }
        }
        if h > c {
            for j in c..h {
                set(j, i, (h - j) as f64 / (h - c) as f64)?;
            }
        }
    }
    let dev = req(n, ins, 0)?.tensor.device();
    let t = Tensor::from_vec(out, vec![spec, bins])?
        .to_dtype(dt)?
        .to_device(dev)?;
    Ok(vec![Value::typed(t, e)])
}
