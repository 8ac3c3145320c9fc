//! The backend interface on the CPU: each primitive matches the dtype of its buffers once and
//! hands plain slices to the kernels of this folder.

use super::arith::Arith;
use super::elementwise::{assign_map, binary_map, copy_contiguous, ternary_map, unary_map};
use super::matmul::{matmul as gemm_matmul, matmul_bias as gemm_matmul_bias};
use super::reduce::{reduce, ArgExt, Fold, Sum};
use super::strided::RowPlan;
use super::unary_ops::{self, float_zip, FloatExt};
use super::{
    attention, conv as k, fused, loss, optim, pool, pooling as kp, softmax as ks, CpuDType,
    CpuStorage as S,
};
use crate::backend::{
    AttnGeom, BackendDevice, BackendStorage, BinaryOp, CeTarget, CmpOp, ConvGeom, OptimUpdate,
    PoolGeom, ReduceOp, UnaryOp,
};
use crate::tensor::random::Generator;
use crate::{with_cpu, DType, Device, Error, Layout, MatmulPrecision, Result, WithDType};
use half::{bf16, f16};

/// The CPU as a [`BackendDevice`] (there is one: threads are a process setting).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuDevice;

impl BackendDevice for CpuDevice {
    type Storage = S;
    fn zeros(&self, dtype: DType, n: usize) -> Result<S> {
        S::zeros(dtype, n)
    }
    fn storage_from_f64(&self, dtype: DType, values: &mut dyn Iterator<Item = f64>) -> Result<S> {
        Ok(S::from_f64_iter(dtype, values))
    }
    fn storage_from_vec<T: WithDType>(&self, data: Vec<T>) -> Result<S> {
        Ok(T::wrap(data))
    }
    fn num_threads(&self) -> usize {
        super::threads::get_num_threads()
    }
    fn set_num_threads(&self, n: usize) {
        super::threads::set_num_threads(n)
    }
    fn matmul_precision(&self) -> MatmulPrecision {
        crate::precision::get_float32_matmul_precision()
    }
    fn set_matmul_precision(&self, p: MatmulPrecision) {
        crate::precision::set_float32_matmul_precision(p)
    }
    fn cached_bytes(&self) -> usize {
        pool::cached_bytes()
    }
    fn set_cache_limit(&self, bytes: usize) {
        pool::set_cache_limit(bytes)
    }
    fn empty_cache(&self) {
        pool::empty_cache()
    }
    fn storage_from_u8_images(
        &self,
        samples: &[&[u8]],
        channels: usize,
        scale: &[f32],
        shift: &[f32],
    ) -> Result<S> {
        Ok(S::F32(super::images::u8_images_affine(
            samples, channels, scale, shift,
        )))
    }
    fn rand_uniform(
        &self,
        dtype: DType,
        n: usize,
        low: f64,
        high: f64,
        g: &mut Generator,
    ) -> Result<S> {
        Ok(if dtype == DType::F64 {
            S::F64((0..n).map(|_| low + (high - low) * g.next_f64()).collect())
        } else {
            let v = (0..n).map(|_| low + (high - low) * g.next_f32() as f64);
            S::from_f64_iter(dtype, v)
        })
    }
    fn rand_normal(
        &self,
        dtype: DType,
        n: usize,
        mean: f64,
        std: f64,
        g: &mut Generator,
    ) -> Result<S> {
        Ok(S::from_f64_iter(
            dtype,
            (0..n).map(|_| mean + std * g.next_normal()),
        ))
    }
}

/// `$f(dense slice, ..)` of an f32 or f64 buffer, wrapped back in the same dtype; other
/// dtypes are an error naming `$op`.
macro_rules! float_dense {
    ($op:expr, $s:expr, $l:expr, |$v:ident| $call:expr) => {
        Ok(match $s {
            S::F32(v) => {
                let $v = dense(v, $l);
                S::F32($call)
            }
            S::F64(v) => {
                let $v = dense(v, $l);
                S::F64($call)
            }
            s => return Err(unsupported($op, s)),
        })
    };
}

/// Dispatch `$call` with `$f = <T as Arith>::$m` over the dtype of two buffers.
macro_rules! dispatch_arith {
    ($op:expr, $a:expr, $b:expr, $m:ident, |$u:ident, $v:ident, $f:ident| $call:expr) => {
        match ($a, $b) {
            (S::F32($u), S::F32($v)) => {
                let $f = <f32 as Arith>::$m;
                S::F32($call)
            }
            (S::F64($u), S::F64($v)) => {
                let $f = <f64 as Arith>::$m;
                S::F64($call)
            }
            (S::F16($u), S::F16($v)) => {
                let $f = <f16 as Arith>::$m;
                S::F16($call)
            }
            (S::BF16($u), S::BF16($v)) => {
                let $f = <bf16 as Arith>::$m;
                S::BF16($call)
            }
            (S::I64($u), S::I64($v)) => {
                let $f = <i64 as Arith>::$m;
                S::I64($call)
            }
            (S::U8($u), S::U8($v)) => {
                let $f = <u8 as Arith>::$m;
                S::U8($call)
            }
            (S::Bool(_), S::Bool(_)) => {
                return Err(Error::dtype(
                    $op,
                    "arithmetic is not defined for bool tensors",
                ))
            }
            (a, b) => return Err(mismatch($op, a, b)),
        }
    };
}

/// [`dispatch_arith`] for every arithmetic operator; the gradient-weight operators are
/// handled by the caller.
macro_rules! dispatch_binop {
    ($op:expr, $a:expr, $b:expr, |$u:ident, $v:ident, $f:ident| $call:expr) => {
        match $op {
            BinaryOp::Add => dispatch_arith!($op.name(), $a, $b, add, |$u, $v, $f| $call),
            BinaryOp::Sub => dispatch_arith!($op.name(), $a, $b, sub, |$u, $v, $f| $call),
            BinaryOp::Mul => dispatch_arith!($op.name(), $a, $b, mul, |$u, $v, $f| $call),
            BinaryOp::Div => dispatch_arith!($op.name(), $a, $b, div, |$u, $v, $f| $call),
            BinaryOp::Pow => dispatch_arith!($op.name(), $a, $b, pow, |$u, $v, $f| $call),
            BinaryOp::Maximum => dispatch_arith!($op.name(), $a, $b, max, |$u, $v, $f| $call),
            BinaryOp::Minimum => dispatch_arith!($op.name(), $a, $b, min, |$u, $v, $f| $call),
            _ => unreachable!("handled by the caller"),
        }
    };
}

#[track_caller]
fn mismatch(op: &str, a: &S, b: &S) -> Error {
    Error::dtype(op, format!("dtypes differ: {} vs {}", a.dtype(), b.dtype()))
}

#[track_caller]
fn unsupported(op: &str, s: &S) -> Error {
    Error::dtype(op, format!("not supported for dtype {}", s.dtype()))
}

/// The dense elements of a contiguous layout.
fn dense<'a, T>(v: &'a [T], l: &Layout) -> &'a [T] {
    &v[l.offset()..l.offset() + l.numel()]
}

fn convert<T: WithDType + Sync>(v: &[T], l: &Layout, to: DType) -> S {
    match to {
        DType::F32 => S::F32(unary_map(v, l, |x| x.to_f64() as f32)),
        DType::F64 => S::F64(unary_map(v, l, |x| x.to_f64())),
        DType::F16 => S::F16(unary_map(v, l, |x| f16::from_f64(x.to_f64()))),
        DType::BF16 => S::BF16(unary_map(v, l, |x| bf16::from_f64(x.to_f64()))),
        DType::I64 => S::I64(unary_map(v, l, |x| x.to_f64() as i64)),
        DType::U8 => S::U8(unary_map(v, l, |x| x.to_f64() as i64 as u8)),
        DType::Bool => S::Bool(unary_map(v, l, |x| x.to_f64() != 0.0)),
    }
}

impl BackendStorage for S {
    fn len(&self) -> usize {
        S::len(self)
    }
    fn touched(&self) {
        self.forget_packings();
    }
    fn dtype(&self) -> DType {
        S::dtype(self)
    }
    fn device(&self) -> Device {
        Device::Cpu
    }

    fn to_vec<T: WithDType>(&self, layout: &Layout) -> Result<Vec<T>> {
        let data = T::slice(self).ok_or_else(|| {
            Error::dtype(
                "to_vec",
                format!("tensor has dtype {}, asked for {}", self.dtype(), T::DTYPE),
            )
        })?;
        Ok(copy_contiguous(data, layout))
    }
    fn to_f64_vec(&self, layout: &Layout) -> Result<Vec<f64>> {
        Ok(with_cpu!(self, v => unary_map(v, layout, WithDType::to_f64)))
    }

    fn copy_contiguous(&self, layout: &Layout) -> Result<S> {
        Ok(with_cpu!(self, v => CpuDType::wrap(copy_contiguous(v, layout))))
    }
    fn to_dtype(&self, l: &Layout, dtype: DType) -> Result<S> {
        Ok(match (self, dtype) {
            // direct paths that avoid f64 round trips on hot conversions
            (S::F16(v), DType::F32) => S::F32(unary_map(v, l, |x| x.to_f32())),
            (S::BF16(v), DType::F32) => S::F32(unary_map(v, l, |x| x.to_f32())),
            (S::F32(v), DType::F16) => S::F16(unary_map(v, l, f16::from_f32)),
            (S::F32(v), DType::BF16) => S::BF16(unary_map(v, l, bf16::from_f32)),
            (S::U8(v), DType::F32) => S::F32(unary_map(v, l, |x| x as f32)),
            (s, _) => with_cpu!(s, v => convert(v, l, dtype)),
        })
    }
    fn assign(&mut self, dl: &Layout, src: &S, sl: &Layout) -> Result<()> {
        if self.dtype() != src.dtype() {
            return Err(mismatch("copy_", self, src));
        }
        with_cpu!(self, u => {
            let v = CpuDType::slice(src).expect("dtype checked");
            assign_map(u, dl, v, sl, |_, y| y)
        });
        Ok(())
    }

    fn unary(&self, l: &Layout, op: UnaryOp) -> Result<S> {
        unary_ops::forward(self, l, op)
    }
    fn unary_backward(&self, gl: &Layout, saved: &S, sl: &Layout, op: UnaryOp) -> Result<S> {
        unary_ops::backward(self, gl, saved, sl, op)
    }
    fn unary_with_grad(&self, l: &Layout, op: UnaryOp) -> Result<Option<(S, S)>> {
        Ok(unary_ops::with_grad(self, l, op))
    }
    fn binary(&self, ll: &Layout, rhs: &S, rl: &Layout, op: BinaryOp) -> Result<S> {
        Ok(match op {
            BinaryOp::MaximumGradWeight | BinaryOp::MinimumGradWeight => {
                let sgn = if op == BinaryOp::MaximumGradWeight {
                    1.0
                } else {
                    -1.0
                };
                float_zip!("maximum", self, ll, rhs, rl, |a, b| {
                    let d = (a - b) * a.k(sgn);
                    if d > 0.0 {
                        1.0
                    } else if d < 0.0 {
                        0.0
                    } else {
                        0.5
                    }
                })
            }
            BinaryOp::BceWithLogits => float_zip!(op.name(), self, ll, rhs, rl, |x, y| {
                let m = if x > 0.0 { x } else { 0.0 };
                m - x * y + (-x.abs()).exp().ln_1p()
            }),
            _ => dispatch_binop!(op, self, rhs, |u, v, f| binary_map(u, ll, v, rl, f)),
        })
    }
    fn binary_inplace(&mut self, dl: &Layout, rhs: &S, rl: &Layout, op: BinaryOp) -> Result<()> {
        if !matches!(
            op,
            BinaryOp::Add
                | BinaryOp::Sub
                | BinaryOp::Mul
                | BinaryOp::Div
                | BinaryOp::Pow
                | BinaryOp::Maximum
                | BinaryOp::Minimum
        ) {
            return Err(Error::invalid(op.name(), "has no in-place form"));
        }
        let _ = dispatch_binop!(op, &mut *self, rhs, |u, v, f| {
            assign_map(u, dl, v, rl, f);
            Vec::new()
        });
        Ok(())
    }
    fn add_scaled_inplace(
        &mut self,
        dl: &Layout,
        rhs: &S,
        rl: &Layout,
        alpha: f64,
    ) -> Result<bool> {
        match (self, rhs) {
            (S::F32(u), S::F32(v)) => {
                let al = alpha as f32;
                assign_map(u, dl, v, rl, move |x, y| x + al * y)
            }
            (S::F64(u), S::F64(v)) => assign_map(u, dl, v, rl, move |x, y| x + alpha * y),
            _ => return Ok(false),
        }
        Ok(true)
    }
    fn affine_inplace(&mut self, dl: &Layout, mul: f64, add: f64) -> Result<bool> {
        // the second operand is a broadcast zero (one loop shape for all in-place maps)
        let ol = Layout::contiguous(()).broadcast_as("affine_", dl.shape())?;
        match self {
            S::F32(u) => {
                let (m, c) = (mul as f32, add as f32);
                assign_map(u, dl, &[0f32], &ol, move |x, _| x * m + c)
            }
            S::F64(u) => assign_map(u, dl, &[0f64], &ol, move |x, _| x * mul + add),
            _ => return Ok(false),
        }
        Ok(true)
    }
    fn cmp(&self, ll: &Layout, rhs: &S, rl: &Layout, op: CmpOp) -> Result<S> {
        // One loop per operator with the comparison written out, so it vectorises (through a
        // function pointer on `Ordering` it ran ~40x slower than `relu`). The IEEE operators
        // make NaN compare false to everything, so `ne` is true.
        macro_rules! cmp {
            ($u:expr, $v:expr) => {
                match op {
                    CmpOp::Eq => binary_map($u, ll, $v, rl, |x, y| x == y),
                    CmpOp::Ne => binary_map($u, ll, $v, rl, |x, y| x != y),
                    CmpOp::Lt => binary_map($u, ll, $v, rl, |x, y| x < y),
                    CmpOp::Le => binary_map($u, ll, $v, rl, |x, y| x <= y),
                    CmpOp::Gt => binary_map($u, ll, $v, rl, |x, y| x > y),
                    CmpOp::Ge => binary_map($u, ll, $v, rl, |x, y| x >= y),
                }
            };
        }
        Ok(S::Bool(match (self, rhs) {
            (S::F32(u), S::F32(v)) => cmp!(u, v),
            (S::F64(u), S::F64(v)) => cmp!(u, v),
            (S::F16(u), S::F16(v)) => cmp!(u, v),
            (S::BF16(u), S::BF16(v)) => cmp!(u, v),
            (S::I64(u), S::I64(v)) => cmp!(u, v),
            (S::U8(u), S::U8(v)) => cmp!(u, v),
            (S::Bool(u), S::Bool(v)) => cmp!(u, v),
            (a, b) => return Err(mismatch("compare", a, b)),
        }))
    }
    fn where_cond(&self, cl: &Layout, a: &S, al: &Layout, b: &S, bl: &Layout) -> Result<S> {
        let S::Bool(c) = self else {
            return Err(Error::dtype("where", "condition must be bool"));
        };
        Ok(with_cpu!(a, u => {
            let v = CpuDType::slice(b).ok_or_else(|| mismatch("where", a, b))?;
            CpuDType::wrap(ternary_map(c, cl, u, al, v, bl, |c, x, y| if c { x } else { y }))
        }))
    }

    fn reduce(&self, l: &Layout, mask: &[bool], op: ReduceOp) -> Result<S> {
        match op {
            ReduceOp::Sum => Ok(match self {
                S::F32(v) => S::F32(reduce(v, l, mask, &Sum)),
                S::F64(v) => S::F64(reduce(v, l, mask, &Sum)),
                S::F16(v) => {
                    let r = Fold {
                        init: 0f32,
                        f: |a: f32, x: f16| a + x.to_f32(),
                    };
                    S::F16(
                        reduce(v, l, mask, &r)
                            .into_iter()
                            .map(f16::from_f32)
                            .collect(),
                    )
                }
                S::BF16(v) => {
                    let r = Fold {
                        init: 0f32,
                        f: |a: f32, x: bf16| a + x.to_f32(),
                    };
                    S::BF16(
                        reduce(v, l, mask, &r)
                            .into_iter()
                            .map(bf16::from_f32)
                            .collect(),
                    )
                }
                S::I64(v) => S::I64(reduce(v, l, mask, &Sum)),
                S::U8(v) => S::I64(reduce(
                    v,
                    l,
                    mask,
                    &Fold {
                        init: 0i64,
                        f: |a: i64, x: u8| a + x as i64,
                    },
                )),
                S::Bool(v) => S::I64(reduce(
                    v,
                    l,
                    mask,
                    &Fold {
                        init: 0i64,
                        f: |a: i64, x: bool| a + x as i64,
                    },
                )),
            }),
            ReduceOp::Prod => {
                macro_rules! prod {
                    ($v:expr, $one:expr, $f:expr) => {
                        reduce($v, l, mask, &Fold { init: $one, f: $f })
                    };
                }
                Ok(match self {
                    S::F32(v) => S::F32(prod!(v, 1f32, |a: f32, x: f32| a * x)),
                    S::F64(v) => S::F64(prod!(v, 1f64, |a: f64, x: f64| a * x)),
                    S::I64(v) => S::I64(prod!(v, 1i64, |a: i64, x: i64| a.wrapping_mul(x))),
                    s => return Err(unsupported("prod", s)),
                })
            }
            ReduceOp::All | ReduceOp::Any => {
                let S::Bool(v) = self else {
                    return Err(Error::dtype("all/any", "expected a bool tensor"));
                };
                Ok(S::Bool(if op == ReduceOp::Any {
                    reduce(
                        v,
                        l,
                        mask,
                        &Fold {
                            init: false,
                            f: |a: bool, x: bool| a | x,
                        },
                    )
                } else {
                    reduce(
                        v,
                        l,
                        mask,
                        &Fold {
                            init: true,
                            f: |a: bool, x: bool| a & x,
                        },
                    )
                }))
            }
        }
    }
    fn arg_reduce(&self, l: &Layout, mask: &[bool], max: bool) -> Result<(S, S)> {
        let r = ArgExt { max };
        macro_rules! go {
            ($v:expr, $w:ident) => {{
                let acc = reduce($v, l, mask, &r);
                let idx: Vec<i64> = acc.iter().map(|a| a.1 as i64).collect();
                (
                    S::$w(acc.into_iter().map(|a| a.0.unwrap_or_default()).collect()),
                    S::I64(idx),
                )
            }};
        }
        Ok(match self {
            S::F32(v) => go!(v, F32),
            S::F64(v) => go!(v, F64),
            S::F16(v) => go!(v, F16),
            S::BF16(v) => go!(v, BF16),
            S::I64(v) => go!(v, I64),
            S::U8(v) => go!(v, U8),
            S::Bool(v) => go!(v, Bool),
        })
    }
    fn softmax_rows(&self, l: &Layout, n: usize, log: bool) -> Result<Option<S>> {
        Ok(match self {
            S::F32(v) => Some(S::F32(ks::softmax_rows(dense(v, l), n, log))),
            S::F64(v) => Some(S::F64(ks::softmax_rows(dense(v, l), n, log))),
            _ => None,
        })
    }
    fn softmax_backward_rows(
        &self,
        gl: &Layout,
        y: &S,
        yl: &Layout,
        n: usize,
        log: bool,
    ) -> Result<S> {
        Ok(match (self, y) {
            (S::F32(gv), S::F32(yv)) => S::F32(ks::softmax_back_rows(
                pool::copied(dense(gv, gl)),
                dense(yv, yl),
                n,
                log,
            )),
            (S::F64(gv), S::F64(yv)) => S::F64(ks::softmax_back_rows(
                pool::copied(dense(gv, gl)),
                dense(yv, yl),
                n,
                log,
            )),
            (g, _) => return Err(unsupported("softmax_backward", g)),
        })
    }

    fn matmul(&self, l: &Layout, rhs: &S, rl: &Layout) -> Result<S> {
        Ok(match (self, rhs) {
            (S::F32(u), S::F32(v)) => S::F32(gemm_matmul(u, l, v, rl)),
            (S::F64(u), S::F64(v)) => S::F64(gemm_matmul(u, l, v, rl)),
            (S::F16(u), S::F16(v)) => S::F16(gemm_matmul(u, l, v, rl)),
            (S::BF16(_), S::BF16(_)) => {
                // bf16: accumulate in f32
                let (a, b) = (self.to_dtype(l, DType::F32)?, rhs.to_dtype(rl, DType::F32)?);
                let (la, lb) = (
                    Layout::contiguous(l.shape()),
                    Layout::contiguous(rl.shape()),
                );
                let out = a.matmul(&la, &b, &lb)?;
                let lo = Layout::contiguous([out.len()]);
                out.to_dtype(&lo, DType::BF16)?
            }
            (a, b) if a.dtype() != b.dtype() => return Err(mismatch("matmul", a, b)),
            (a, _) => {
                return Err(Error::dtype(
                    "matmul",
                    format!("not supported for dtype {} (use a float dtype)", a.dtype()),
                ))
            }
        })
    }
    fn matmul_bias(
        &self,
        l: &Layout,
        rhs: &S,
        rl: &Layout,
        bias: &S,
        bl: &Layout,
    ) -> Result<Option<S>> {
        let Some((b0, b1)) = bl.contiguous_range() else {
            return Ok(None);
        };
        Ok(Some(match (self, rhs, bias) {
            (S::F32(u), S::F32(v), S::F32(w)) => S::F32(gemm_matmul_bias(u, l, v, rl, &w[b0..b1])),
            (S::F64(u), S::F64(v), S::F64(w)) => S::F64(gemm_matmul_bias(u, l, v, rl, &w[b0..b1])),
            (S::F16(u), S::F16(v), S::F16(w)) => S::F16(gemm_matmul_bias(u, l, v, rl, &w[b0..b1])),
            _ => return Ok(None),
        }))
    }

    fn conv2d(
        &self,
        l: &Layout,
        w: &S,
        wl: &Layout,
        bias: Option<(&S, &Layout)>,
        geom: &ConvGeom,
        relu: bool,
    ) -> Result<S> {
        conv2d_with(self, l, (w, wl), bias, None, geom, relu)
    }
    fn conv2d_add(
        &self,
        l: &Layout,
        w: &S,
        wl: &Layout,
        bias: Option<(&S, &Layout)>,
        residual: (&S, &Layout),
        geom: &ConvGeom,
        relu: bool,
    ) -> Result<Option<S>> {
        conv2d_with(self, l, (w, wl), bias, Some(residual), geom, relu).map(Some)
    }
    fn conv2d_backward(
        &self,
        l: &Layout,
        w: &S,
        wl: &Layout,
        g: &S,
        gl: &Layout,
        y: Option<(&S, &Layout)>,
        geom: &ConvGeom,
        [need_x, need_w, need_b]: [bool; 3],
    ) -> Result<[Option<S>; 3]> {
        macro_rules! back {
            ($var:ident, $xv:expr, $wv:expr, $gv:expr) => {{
                let yv = match y {
                    Some((S::$var(v), yl)) => Some(dense(v, yl)),
                    Some((b, _)) => return Err(mismatch("conv2d_backward", self, b)),
                    None => None,
                };
                let (gx, gw, gb) = k::conv2d_backward(
                    dense($xv, l),
                    dense($wv, wl),
                    dense($gv, gl),
                    yv,
                    geom,
                    need_x,
                    need_w,
                    need_b,
                );
                [gx.map(S::$var), gw.map(S::$var), gb.map(S::$var)]
            }};
        }
        Ok(match (self, w, g) {
            (S::F32(xv), S::F32(wv), S::F32(gv)) => back!(F32, xv, wv, gv),
            (S::F64(xv), S::F64(wv), S::F64(gv)) => back!(F64, xv, wv, gv),
            (_, _, g) => {
                return Err(Error::dtype(
                    "conv2d_backward",
                    format!("gradient dtype {} does not match the input", g.dtype()),
                ))
            }
        })
    }
    fn max_pool2d(&self, l: &Layout, geom: &PoolGeom) -> Result<(S, S)> {
        Ok(match self {
            S::F32(v) => {
                let (o, i) = kp::max_pool2d_forward(dense(v, l), geom);
                (S::F32(o), S::I64(i))
            }
            S::F64(v) => {
                let (o, i) = kp::max_pool2d_forward(dense(v, l), geom);
                (S::F64(o), S::I64(i))
            }
            s => return Err(unsupported("max_pool2d", s)),
        })
    }
    fn max_pool2d_values(&self, l: &Layout, geom: &PoolGeom) -> Result<S> {
        float_dense!("max_pool2d", self, l, |x| kp::max_pool2d_values(x, geom))
    }
    fn max_pool2d_backward(&self, l: &Layout, idx: &S, il: &Layout, geom: &PoolGeom) -> Result<S> {
        let S::I64(iv) = idx else {
            return Err(unsupported("max_pool2d_backward", idx));
        };
        let iv = dense(iv, il);
        float_dense!("max_pool2d_backward", self, l, |g| kp::max_pool2d_backward(
            g, iv, geom
        ))
    }
    fn avg_pool2d(&self, l: &Layout, geom: &PoolGeom) -> Result<S> {
        float_dense!("avg_pool2d", self, l, |x| kp::avg_pool2d_forward(x, geom))
    }
    fn avg_pool2d_backward(&self, l: &Layout, geom: &PoolGeom) -> Result<S> {
        float_dense!("avg_pool2d_backward", self, l, |g| kp::avg_pool2d_backward(
            g, geom
        ))
    }
    fn adaptive_avg_pool2d(
        &self,
        l: &Layout,
        planes: usize,
        hw: [usize; 2],
        out: [usize; 2],
    ) -> Result<S> {
        float_dense!("adaptive_avg_pool2d", self, l, |x| {
            kp::adaptive_avg_pool2d_forward(x, planes, hw, out)
        })
    }
    fn adaptive_avg_pool2d_backward(
        &self,
        l: &Layout,
        planes: usize,
        hw: [usize; 2],
        out: [usize; 2],
    ) -> Result<S> {
        float_dense!("adaptive_avg_pool2d_backward", self, l, |g| {
            kp::adaptive_avg_pool2d_backward(g, planes, hw, out)
        })
    }

    fn layer_norm(
        &self,
        l: &Layout,
        w: Option<(&S, &Layout)>,
        b: Option<(&S, &Layout)>,
        n: usize,
        eps: f64,
    ) -> Result<Option<[S; 3]>> {
        fn go<T: fused::Real>(
            x: &[T],
            w: Option<(&S, &Layout)>,
            b: Option<(&S, &Layout)>,
            n: usize,
            eps: f64,
        ) -> Option<[S; 3]> {
            fn slice<'a, T: fused::Real>(p: Option<(&'a S, &Layout)>) -> Option<Option<&'a [T]>> {
                match p {
                    Some((s, l)) => Some(Some(dense(T::slice(s)?, l))),
                    None => Some(None),
                }
            }
            // a weight or bias of another dtype: the op's checks make this unreachable
            let (w, b) = (slice::<T>(w)?, slice::<T>(b)?);
            let (y, mean, rstd) = fused::layer_norm_fwd(x, w, b, n, eps);
            Some([T::wrap(y), T::wrap(mean), T::wrap(rstd)])
        }
        Ok(match self {
            S::F32(v) => go(dense(v, l), w, b, n, eps),
            S::F64(v) => go(dense(v, l), w, b, n, eps),
            _ => None,
        })
    }
    fn layer_norm_backward(
        &self,
        gl: &Layout,
        (x, xl): (&S, &Layout),
        w: Option<(&S, &Layout)>,
        mean: &S,
        rstd: &S,
        n: usize,
    ) -> Result<[S; 3]> {
        fn go<T: fused::Real>(
            g: &[T],
            (x, xl): (&S, &Layout),
            w: Option<(&S, &Layout)>,
            mean: &S,
            rstd: &S,
            n: usize,
        ) -> Option<[S; 3]> {
            let x = dense(T::slice(x)?, xl);
            let w = match w {
                Some((s, l)) => Some(dense(T::slice(s)?, l)),
                None => None,
            };
            let (dx, dw, db) = fused::layer_norm_bwd(g, x, w, T::slice(mean)?, T::slice(rstd)?, n);
            Some([T::wrap(dx), T::wrap(dw), T::wrap(db)])
        }
        let r = match self {
            S::F32(v) => go(dense(v, gl), (x, xl), w, mean, rstd, n),
            S::F64(v) => go(dense(v, gl), (x, xl), w, mean, rstd, n),
            _ => None,
        };
        r.ok_or_else(|| mismatch("layer_norm_backward", self, x))
    }

    fn cross_entropy(
        &self,
        l: &Layout,
        c: usize,
        target: CeTarget<'_>,
        probs: Option<(&S, &Layout)>,
        eps: f64,
        cw: Option<&[f64]>,
    ) -> Result<Option<(Vec<f64>, S)>> {
        fn go<T: fused::Real>(
            x: &[T],
            c: usize,
            target: CeTarget<'_>,
            probs: Option<(&S, &Layout)>,
            eps: f64,
            cw: Option<&[f64]>,
        ) -> Option<(Vec<f64>, S)> {
            let probs = match probs {
                Some((p, pl)) => Some(dense(T::slice(p)?, pl)),
                None => None,
            };
            let (losses, lse) = loss::ce_forward(x, c, &target, probs, eps, cw);
            Some((losses, T::wrap(lse)))
        }
        Ok(match self {
            S::F32(v) => go(dense(v, l), c, target, probs, eps, cw),
            S::F64(v) => go(dense(v, l), c, target, probs, eps, cw),
            _ => None,
        })
    }
    fn cross_entropy_backward(
        &self,
        l: &Layout,
        lse: &S,
        c: usize,
        target: CeTarget<'_>,
        probs: Option<(&S, &Layout)>,
        eps: f64,
        cw: Option<&[f64]>,
        scale: &[f64],
    ) -> Result<S> {
        #[allow(clippy::too_many_arguments)]
        fn go<T: fused::Real>(
            x: &[T],
            lse: &S,
            c: usize,
            target: CeTarget<'_>,
            probs: Option<(&S, &Layout)>,
            eps: f64,
            cw: Option<&[f64]>,
            scale: &[f64],
        ) -> Option<S> {
            let probs = match probs {
                Some((p, pl)) => Some(dense(T::slice(p)?, pl)),
                None => None,
            };
            let sc = |r: usize| if scale.len() == 1 { scale[0] } else { scale[r] };
            let dx = loss::ce_backward(x, T::slice(lse)?, c, &target, probs, eps, cw, &sc);
            Some(T::wrap(dx))
        }
        let r = match self {
            S::F32(v) => go(dense(v, l), lse, c, target, probs, eps, cw, scale),
            S::F64(v) => go(dense(v, l), lse, c, target, probs, eps, cw, scale),
            _ => None,
        };
        r.ok_or_else(|| mismatch("cross_entropy_backward", self, lse))
    }
    fn causal_softmax(
        &self,
        l: &Layout,
        t: usize,
        s: usize,
        scale: f64,
        offset: usize,
    ) -> Result<Option<S>> {
        Ok(match self {
            S::F32(v) => Some(S::F32(ks::causal_softmax_fwd(
                dense(v, l),
                t,
                s,
                f32::from_f64(scale),
                offset,
            ))),
            S::F64(v) => Some(S::F64(ks::causal_softmax_fwd(
                dense(v, l),
                t,
                s,
                scale,
                offset,
            ))),
            _ => None,
        })
    }
    fn causal_softmax_backward(
        &self,
        gl: &Layout,
        y: &S,
        yl: &Layout,
        t: usize,
        s: usize,
        scale: f64,
        offset: usize,
    ) -> Result<S> {
        Ok(match (self, y) {
            (S::F32(g), S::F32(y)) => S::F32(ks::causal_softmax_bwd(
                dense(g, gl),
                dense(y, yl),
                t,
                s,
                f32::from_f64(scale),
                offset,
            )),
            (S::F64(g), S::F64(y)) => S::F64(ks::causal_softmax_bwd(
                dense(g, gl),
                dense(y, yl),
                t,
                s,
                scale,
                offset,
            )),
            (g, _) => return Err(unsupported("causal_softmax_backward", g)),
        })
    }
    fn attention(&self, k: &S, v: &S, geom: &AttnGeom) -> Result<Option<(S, S)>> {
        Ok(attention::forward_storage(self, k, v, geom))
    }
    fn attention_backward(
        &self,
        k: &S,
        v: &S,
        saved: &S,
        dy: &S,
        dy_offsets: &[usize],
        dy_row_stride: usize,
        geom: &AttnGeom,
    ) -> Result<Vec<S>> {
        attention::backward_storage((self, k, v), saved, (dy, dy_offsets, dy_row_stride), geom)
    }

    fn optimizer_update(
        &mut self,
        l: &Layout,
        (g, gl): (&S, &Layout),
        state: &mut [&mut S],
        update: &OptimUpdate,
    ) -> Result<bool> {
        fn go<T: optim::Real>(
            p: &mut [T],
            g: &[T],
            state: &mut [&mut S],
            update: &OptimUpdate,
        ) -> bool {
            let mut bufs = Vec::with_capacity(state.len());
            for b in state.iter_mut() {
                match T::slice_mut(b) {
                    Some(b) if b.len() == p.len() => bufs.push(b),
                    _ => return false,
                }
            }
            optim::update(p, g, bufs, update);
            true
        }
        let (Some((p0, p1)), Some((g0, g1))) = (l.contiguous_range(), gl.contiguous_range()) else {
            return Ok(false);
        };
        Ok(match (self, g) {
            (S::F32(p), S::F32(g)) => go(&mut p[p0..p1], &g[g0..g1], state, update),
            (S::F64(p), S::F64(g)) => go(&mut p[p0..p1], &g[g0..g1], state, update),
            _ => false,
        })
    }

    fn batch_norm_stats(&self, l: &Layout, c: usize, s: usize) -> Result<Option<[Vec<f64>; 2]>> {
        Ok(match self {
            S::F32(v) => {
                let (m, var) = fused::batch_norm_stats(dense(v, l), c, s);
                Some([m, var])
            }
            S::F64(v) => {
                let (m, var) = fused::batch_norm_stats(dense(v, l), c, s);
                Some([m, var])
            }
            _ => None,
        })
    }
    fn channel_affine(
        &self,
        l: &Layout,
        scale: &S,
        shift: &S,
        s: usize,
        relu: bool,
    ) -> Result<Option<S>> {
        Ok(match (self, scale, shift) {
            (S::F32(x), S::F32(a), S::F32(b)) => {
                Some(S::F32(fused::channel_affine(dense(x, l), a, b, s, relu)))
            }
            (S::F64(x), S::F64(a), S::F64(b)) => {
                Some(S::F64(fused::channel_affine(dense(x, l), a, b, s, relu)))
            }
            _ => None,
        })
    }
    fn batch_norm_backward(
        &self,
        gl: &Layout,
        (x, xl): (&S, &Layout),
        w: Option<&S>,
        stats: (&[f64], &[f64]),
        s: usize,
        gate: Option<(&S, &S)>,
    ) -> Result<[S; 3]> {
        fn go<T: fused::Real>(
            g: &[T],
            (x, xl): (&S, &Layout),
            w: Option<&S>,
            stats: (&[f64], &[f64]),
            s: usize,
            gate: Option<(&S, &S)>,
        ) -> Option<[S; 3]> {
            let x = dense(T::slice(x)?, xl);
            let w = match w {
                Some(w) => Some(T::slice(w)?),
                None => None,
            };
            let gate = match gate {
                Some((a, b)) => Some((T::slice(a)?, T::slice(b)?)),
                None => None,
            };
            let (dx, dw, db) = fused::batch_norm_bwd(g, x, w, stats, s, gate);
            Some([T::wrap(dx), T::wrap(dw), T::wrap(db)])
        }
        let r = match self {
            S::F32(v) => go(dense(v, gl), (x, xl), w, stats, s, gate),
            S::F64(v) => go(dense(v, gl), (x, xl), w, stats, s, gate),
            _ => None,
        };
        r.ok_or_else(|| mismatch("batch_norm_backward", self, x))
    }
    fn norm_part(&self, l: &Layout, p: f64) -> Result<Option<f64>> {
        Ok(super::norm::norm_part(self, l, p))
    }

    fn index_select(&self, l: &Layout, ids: &[usize], [outer, n, inner]: [usize; 3]) -> Result<S> {
        Ok(with_cpu!(self, v => {
            let v = dense(v, l);
            let mut out = Vec::with_capacity(outer * ids.len() * inner);
            for o in 0..outer {
                for &i in ids {
                    let st = (o * n + i) * inner;
                    out.extend_from_slice(&v[st..st + inner]);
                }
            }
            CpuDType::wrap(out)
        }))
    }
    fn index_add_inplace(
        &mut self,
        ids: &[usize],
        src: &S,
        sl: &Layout,
        [outer, n, inner]: [usize; 3],
    ) -> Result<()> {
        fn kernel<T: Copy + std::ops::Add<Output = T>>(
            out: &mut [T],
            src: &[T],
            ids: &[usize],
            [outer, n, inner]: [usize; 3],
        ) {
            for o in 0..outer {
                for (j, &i) in ids.iter().enumerate() {
                    let dst = (o * n + i) * inner;
                    let s = (o * ids.len() + j) * inner;
                    for k in 0..inner {
                        out[dst + k] = out[dst + k] + src[s + k];
                    }
                }
            }
        }
        let dims = [outer, n, inner];
        match (self, src) {
            (S::F32(ov), S::F32(sv)) => kernel(ov, dense(sv, sl), ids, dims),
            (S::F64(ov), S::F64(sv)) => kernel(ov, dense(sv, sl), ids, dims),
            (S::I64(ov), S::I64(sv)) => kernel(ov, dense(sv, sl), ids, dims),
            (o, _) => return Err(unsupported("index_add", o)),
        }
        Ok(())
    }
    fn gather(&self, l: &Layout, ids: &[usize], index_dims: &[usize], d: usize) -> Result<S> {
        let xs = l.strides();
        let mut xs_nd = xs.to_vec();
        xs_nd[d] = 0;
        let plan = RowPlan::new(index_dims, [&xs_nd]);
        let mut offs = Vec::with_capacity(ids.len());
        plan.for_each_offset([l.offset()], |[o]| offs.push(o));
        Ok(with_cpu!(self, v => CpuDType::wrap(
            offs.iter().zip(ids).map(|(&o, &i)| v[o + i * xs[d]]).collect::<Vec<_>>())))
    }
    fn scatter_add_inplace(
        &mut self,
        l: &Layout,
        ids: &[usize],
        index_dims: &[usize],
        src: &S,
        sl: &Layout,
        d: usize,
    ) -> Result<()> {
        let os = l.strides().to_vec();
        let mut os_nd = os.clone();
        os_nd[d] = 0;
        let plan = RowPlan::new(index_dims, [&os_nd, sl.strides()]);
        let mut offs = Vec::with_capacity(ids.len());
        plan.for_each_offset([l.offset(), sl.offset()], |o| offs.push(o));
        macro_rules! go {
            ($ov:expr, $sv:expr) => {
                for (&[oo, so], &i) in offs.iter().zip(ids) {
                    $ov[oo + i * os[d]] += $sv[so];
                }
            };
        }
        match (self, src) {
            (S::F32(ov), S::F32(sv)) => go!(ov, sv),
            (S::F64(ov), S::F64(sv)) => go!(ov, sv),
            (S::I64(ov), S::I64(sv)) => go!(ov, sv),
            (o, _) => return Err(unsupported("scatter_add", o)),
        }
        Ok(())
    }
}

/// conv2d (plus a residual, when given) of the CPU buffers: dtypes checked, operands dense.
fn conv2d_with(
    x: &S,
    l: &Layout,
    (w, wl): (&S, &Layout),
    bias: Option<(&S, &Layout)>,
    residual: Option<(&S, &Layout)>,
    geom: &ConvGeom,
    relu: bool,
) -> Result<S> {
    macro_rules! go {
        ($var:ident, $xv:expr, $wv:expr) => {{
            let bv = match bias {
                Some((S::$var(v), bl)) => Some(dense(v, bl)),
                Some((b, _)) => return Err(mismatch("conv2d", x, b)),
                None => None,
            };
            let rv = match residual {
                Some((S::$var(v), rl)) => Some(dense(v, rl)),
                Some((r, _)) => return Err(mismatch("conv2d", x, r)),
                None => None,
            };
            // the weights are this live buffer: kept packings of them may be served
            // unchecked until it is written or freed (see `packed_cache`)
            let wd = dense($wv, wl);
            S::$var(super::packed_cache::vouched(wd, || {
                k::conv2d_forward(dense($xv, l), wd, bv, geom, relu, rv)
            }))
        }};
    }
    Ok(match (x, w) {
        (S::F32(xv), S::F32(wv)) => go!(F32, xv, wv),
        (S::F64(xv), S::F64(wv)) => go!(F64, xv, wv),
        (a, b) if a.dtype() != b.dtype() => return Err(mismatch("conv2d", a, b)),
        (a, _) => return Err(unsupported("conv2d", a)),
    })
}
