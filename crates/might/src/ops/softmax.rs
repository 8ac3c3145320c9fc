//! softmax / log_softmax along a dim: one fused, numerically stable pass per row (max, then
//! exp-sum, then normalise), and fused backward kernels.

use crate::backend::cpu::threads;
use crate::backend::cpu::CpuStorage as S;
use crate::shape::normalize_dim;
use crate::{Result, Tensor};
use rayon::prelude::*;

fn rows_mut<T: Send>(out: &mut [T], n: usize, f: impl Fn(&mut [T]) + Sync + Send) {
    if n == 0 {
        return;
    }
    if threads::parallel(out.len()) {
        threads::install(|| out.par_chunks_mut(n).for_each(&f));
    } else {
        out.chunks_mut(n).for_each(f);
    }
}

macro_rules! softmax_rows {
    ($t:ty, $data:expr, $n:expr, $log:expr) => {{
        let mut out: Vec<$t> = $data;
        rows_mut(&mut out, $n, |r| {
            let m = r.iter().fold(<$t>::NEG_INFINITY, |a, &b| a.max(b));
            let m = if m.is_finite() { m } else { 0.0 };
            let mut s: $t = 0.0;
            for x in r.iter_mut() {
                *x -= m;
                s += x.exp();
            }
            if $log {
                let ls = s.ln();
                r.iter_mut().for_each(|x| *x -= ls);
            } else {
                let inv = 1.0 / s;
                r.iter_mut().for_each(|x| *x = x.exp() * inv);
            }
        });
        out
    }};
}

macro_rules! softmax_back_rows {
    ($t:ty, $g:expr, $y:expr, $n:expr, $log:expr) => {{
        let y: &[$t] = $y;
        let mut out: Vec<$t> = $g;
        let n = $n;
        let f = |(r, yr): (&mut [$t], &[$t])| {
            if $log {
                // dx = g - exp(y) * sum(g)
                let s: $t = r.iter().sum();
                for (x, &yv) in r.iter_mut().zip(yr) {
                    *x -= yv.exp() * s;
                }
            } else {
                // dx = y * (g - sum(g * y))
                let s: $t = r.iter().zip(yr).map(|(a, b)| a * b).sum();
                for (x, &yv) in r.iter_mut().zip(yr) {
                    *x = yv * (*x - s);
                }
            }
        };
        if n > 0 {
            if threads::parallel(out.len()) {
                threads::install(|| out.par_chunks_mut(n).zip(y.par_chunks(n)).for_each(f));
            } else {
                out.chunks_mut(n).zip(y.chunks(n)).for_each(f);
            }
        }
        out
    }};
}

impl Tensor {
    /// Move `dim` last and make contiguous (a view when `dim` is already last).
    fn dim_last(&self, d: usize) -> Result<Tensor> {
        let r = self.rank();
        if d + 1 == r {
            self.contiguous()
        } else {
            self.transpose(d as isize, -1)?.contiguous()
        }
    }

    #[track_caller]
    fn softmax_impl(&self, dim: isize, log: bool) -> Result<Tensor> {
        let op = if log { "log_softmax" } else { "softmax" };
        self.check_float(op)?;
        if self.rank() == 0 {
            return self.unsqueeze(0)?.softmax_impl(0, log)?.squeeze(0);
        }
        let d = normalize_dim(op, dim, self.rank())?;
        let x = self.detach().dim_last(d)?;
        let n = x.dims()[x.rank() - 1];
        let s = x.storage();
        let out = match s.cpu() {
            S::F32(v) => S::F32(softmax_rows!(
                f32,
                v[x.storage_offset()..x.storage_offset() + x.numel()].to_vec(),
                n,
                log
            )),
            S::F64(v) => S::F64(softmax_rows!(
                f64,
                v[x.storage_offset()..x.storage_offset() + x.numel()].to_vec(),
                n,
                log
            )),
            _ => {
                drop(s);
                let dt = self.dtype();
                return self
                    .to_dtype(crate::DType::F32)?
                    .softmax_impl(dim, log)?
                    .to_dtype(dt);
            }
        };
        drop(s);
        let mut y = Tensor::from_cpu(out, x.shape());
        if d + 1 != self.rank() {
            y = y.transpose(d as isize, -1)?;
        }
        let yd = y.detach();
        Ok(y.record(
            if log {
                "LogSoftmaxBackward"
            } else {
                "SoftmaxBackward"
            },
            &[self],
            move || Box::new(move |g| Ok(vec![Some(softmax_backward(g, &yd, d, log)?)])),
        ))
    }

    /// Softmax along `dim`.
    #[track_caller]
    pub fn softmax(&self, dim: isize) -> Result<Tensor> {
        self.softmax_impl(dim, false)
    }

    /// Log-softmax along `dim` (more accurate than `softmax().log()`).
    #[track_caller]
    pub fn log_softmax(&self, dim: isize) -> Result<Tensor> {
        self.softmax_impl(dim, true)
    }
}

/// Fused backward of softmax/log_softmax given the output `y`.
fn softmax_backward(g: &Tensor, y: &Tensor, d: usize, log: bool) -> Result<Tensor> {
    let r = y.rank();
    let (g2, y2) = (g.dim_last(d)?, y.dim_last(d)?);
    let n = y2.dims()[r - 1];
    let (sg, sy) = (g2.storage(), y2.storage());
    let (go, yo) = (g2.storage_offset(), y2.storage_offset());
    let len = y2.numel();
    let out = match (sg.cpu(), sy.cpu()) {
        (S::F32(gv), S::F32(yv)) => S::F32(softmax_back_rows!(
            f32,
            gv[go..go + len].to_vec(),
            &yv[yo..yo + len],
            n,
            log
        )),
        (S::F64(gv), S::F64(yv)) => S::F64(softmax_back_rows!(
            f64,
            gv[go..go + len].to_vec(),
            &yv[yo..yo + len],
            n,
            log
        )),
        _ => {
            return Err(crate::Error::dtype(
                "softmax_backward",
                format!("unsupported dtype {}", y.dtype()),
            ))
        }
    };
    drop((sg, sy));
    let out = Tensor::from_cpu(out, y2.shape());
    if d + 1 != r {
        out.transpose(d as isize, -1)
    } else {
        Ok(out)
    }
}
