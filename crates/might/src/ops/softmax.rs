//! softmax / log_softmax along a dim: one fused, numerically stable pass per row (max, then
//! exp-sum, then normalise), and fused backward kernels.

use crate::backend::cpu::rows::{row_dot, row_max, row_sum};
use crate::backend::cpu::CpuStorage as S;
use crate::backend::cpu::{pool, simd, threads};
use crate::ops::unary::FloatExt;
use crate::shape::normalize_dim;
use crate::{Result, Tensor};
use num_traits::Float;

/// Sum of `exp(r[i] - m)` without storing the exponentials: they go through a small stack
/// buffer so the `exp` loop vectorises.
#[inline(always)]
pub(crate) fn exp_sum<T: Float + FloatExt>(r: &[T], m: T) -> T {
    let mut buf = [T::zero(); 64];
    let mut s = T::zero();
    for c in r.chunks(64) {
        let b = &mut buf[..c.len()];
        for (e, &v) in b.iter_mut().zip(c) {
            *e = (v - m).exp_();
        }
        s = s + row_sum(b, |e| e);
    }
    s
}

/// `f(out_row, other_row)` for each pair of `n`-element rows of `out` and `other` (rows in
/// parallel when large), the rows of one task inside [`simd::run`].
fn paired_rows<T: Send + Sync>(
    out: &mut [T],
    other: &[T],
    n: usize,
    f: impl Fn(&mut [T], &[T]) + Sync,
) {
    if n == 0 || out.is_empty() {
        return;
    }
    let block = n * 4096usize.div_ceil(n);
    let run = |start: usize, o: &mut [T]| {
        simd::run(
            #[inline(always)]
            || {
                let ob = &other[start..start + o.len()];
                // a plain loop with a direct call, so `f` inlines into the SIMD build
                for (r, orow) in o.chunks_mut(n).zip(ob.chunks(n)) {
                    f(r, orow)
                }
            },
        )
    };
    if threads::parallel(out.len()) {
        threads::for_each_chunk(out, block, |i, o| run(i * block, o));
    } else {
        run(0, out);
    }
}

/// softmax / log_softmax of the rows of `n` elements of `x`, into a new buffer: max, then the
/// exponentials written straight to the output (no copy of the input first), then normalise.
fn softmax_rows<T: Float + FloatExt + Send + Sync + Default + 'static>(
    x: &[T],
    n: usize,
    log: bool,
) -> Vec<T> {
    // every element is written below
    let mut out = pool::output::<T>(x.len());
    paired_rows(
        &mut out,
        x,
        n,
        #[inline(always)]
        |r, xr| {
            let m = row_max(xr);
            let m = if m.is_finite() { m } else { T::zero() };
            if log {
                let ls = exp_sum(xr, m).ln();
                for (y, &v) in r.iter_mut().zip(xr) {
                    *y = (v - m) - ls;
                }
            } else {
                for (y, &v) in r.iter_mut().zip(xr) {
                    *y = (v - m).exp_();
                }
                let inv = T::one() / row_sum(r, |e| e);
                for y in r.iter_mut() {
                    *y = *y * inv;
                }
            }
        },
    );
    out
}

/// Backward of [`softmax_rows`] given the output `y`, overwriting the gradient `g` rows.
fn softmax_back_rows<T: Float + FloatExt + Send + Sync>(
    mut out: Vec<T>,
    y: &[T],
    n: usize,
    log: bool,
) -> Vec<T> {
    // each row of `out` holds the incoming gradient and becomes the input gradient
    paired_rows(
        &mut out,
        y,
        n,
        #[inline(always)]
        |r, yr| {
            if log {
                // dx = g - exp(y) * sum(g)
                let s = row_sum(r, |v| v);
                for (x, &yv) in r.iter_mut().zip(yr) {
                    *x = *x - yv.exp_() * s;
                }
            } else {
                // dx = y * (g - sum(g * y))
                let s = row_dot(r, yr);
                for (x, &yv) in r.iter_mut().zip(yr) {
                    *x = yv * (*x - s);
                }
            }
        },
    );
    out
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
            S::F32(v) => S::F32(softmax_rows(
                &v[x.storage_offset()..x.storage_offset() + x.numel()],
                n,
                log,
            )),
            S::F64(v) => S::F64(softmax_rows(
                &v[x.storage_offset()..x.storage_offset() + x.numel()],
                n,
                log,
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
        (S::F32(gv), S::F32(yv)) => S::F32(softmax_back_rows(
            pool::copied(&gv[go..go + len]),
            &yv[yo..yo + len],
            n,
            log,
        )),
        (S::F64(gv), S::F64(yv)) => S::F64(softmax_back_rows(
            pool::copied(&gv[go..go + len]),
            &yv[yo..yo + len],
            n,
            log,
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
