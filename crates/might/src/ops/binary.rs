//! Binary ops with NumPy broadcasting, comparisons, `where`, and the in-place variants.
//! Allocating (`add`) and in-place (`add_`) forms share the same scalar function (`Arith`).

use crate::backend::cpu::elementwise::{assign_map, binary_map, ternary_map};
use crate::backend::cpu::CpuStorage as S;
use crate::ops::unary::FloatExt;
use crate::shape::broadcast_shapes;
use crate::{zip_float, DType, Error, ErrorKind, Result, Shape, Tensor};
use half::{bf16, f16};

/// Element arithmetic, one definition per type: floats IEEE, integers wrapping (like PyTorch),
/// integer division by zero gives 0 instead of trapping.
pub trait Arith: Copy {
    fn add(a: Self, b: Self) -> Self;
    fn sub(a: Self, b: Self) -> Self;
    fn mul(a: Self, b: Self) -> Self;
    fn div(a: Self, b: Self) -> Self;
    fn pow(a: Self, b: Self) -> Self;
    fn max(a: Self, b: Self) -> Self;
    fn min(a: Self, b: Self) -> Self;
}

macro_rules! arith_float {
    ($t:ty) => {
        impl Arith for $t {
            #[inline(always)]
            fn add(a: $t, b: $t) -> $t {
                a + b
            }
            #[inline(always)]
            fn sub(a: $t, b: $t) -> $t {
                a - b
            }
            #[inline(always)]
            fn mul(a: $t, b: $t) -> $t {
                a * b
            }
            #[inline(always)]
            fn div(a: $t, b: $t) -> $t {
                a / b
            }
            #[inline(always)]
            fn pow(a: $t, b: $t) -> $t {
                a.powf(b)
            }
            #[inline(always)]
            fn max(a: $t, b: $t) -> $t {
                if a.is_nan() || a > b {
                    a
                } else {
                    b
                }
            }
            #[inline(always)]
            fn min(a: $t, b: $t) -> $t {
                if a.is_nan() || a < b {
                    a
                } else {
                    b
                }
            }
        }
    };
}
arith_float!(f32);
arith_float!(f64);

macro_rules! arith_int {
    ($t:ty) => {
        impl Arith for $t {
            #[inline(always)]
            fn add(a: $t, b: $t) -> $t {
                a.wrapping_add(b)
            }
            #[inline(always)]
            fn sub(a: $t, b: $t) -> $t {
                a.wrapping_sub(b)
            }
            #[inline(always)]
            fn mul(a: $t, b: $t) -> $t {
                a.wrapping_mul(b)
            }
            #[inline(always)]
            fn div(a: $t, b: $t) -> $t {
                if b == 0 {
                    0
                } else {
                    a.wrapping_div(b)
                }
            }
            #[inline(always)]
            fn pow(a: $t, b: $t) -> $t {
                a.wrapping_pow(b.clamp(0 as $t, 64 as $t) as u32)
            }
            #[inline(always)]
            fn max(a: $t, b: $t) -> $t {
                a.max(b)
            }
            #[inline(always)]
            fn min(a: $t, b: $t) -> $t {
                a.min(b)
            }
        }
    };
}
arith_int!(i64);
arith_int!(u8);

macro_rules! arith_half {
    ($t:ty) => {
        impl Arith for $t {
            #[inline(always)]
            fn add(a: $t, b: $t) -> $t {
                <$t>::from_f32(a.to_f32() + b.to_f32())
            }
            #[inline(always)]
            fn sub(a: $t, b: $t) -> $t {
                <$t>::from_f32(a.to_f32() - b.to_f32())
            }
            #[inline(always)]
            fn mul(a: $t, b: $t) -> $t {
                <$t>::from_f32(a.to_f32() * b.to_f32())
            }
            #[inline(always)]
            fn div(a: $t, b: $t) -> $t {
                <$t>::from_f32(a.to_f32() / b.to_f32())
            }
            #[inline(always)]
            fn pow(a: $t, b: $t) -> $t {
                <$t>::from_f32(a.to_f32().powf(b.to_f32()))
            }
            #[inline(always)]
            fn max(a: $t, b: $t) -> $t {
                if a.is_nan() || a > b {
                    a
                } else {
                    b
                }
            }
            #[inline(always)]
            fn min(a: $t, b: $t) -> $t {
                if a.is_nan() || a < b {
                    a
                } else {
                    b
                }
            }
        }
    };
}
arith_half!(f16);
arith_half!(bf16);

/// The arithmetic binary ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
}

impl BinaryOp {
    fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
        }
    }
}

/// Dispatch `$kernel(a, al, b, bl, T::$method)` over the dtype of two storages.
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
            _ => {
                return Err(Error::dtype(
                    $op,
                    "arithmetic is not defined for bool tensors",
                ))
            }
        }
    };
}

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
        }
    };
}

/// The six comparison operators (`compare` runs one loop per operator).
#[derive(Clone, Copy)]
enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Tensor {
    /// Forward of a broadcasting arithmetic op (no autograd).
    #[track_caller]
    fn binary_forward(&self, rhs: &Tensor, op: BinaryOp) -> Result<(Tensor, Shape)> {
        let name = op.name();
        self.check_same_dtype(name, rhs)?;
        let shape = broadcast_shapes(name, self.shape(), rhs.shape())?;
        let ll = self.layout().broadcast_as(name, &shape)?;
        let rl = rhs.layout().broadcast_as(name, &shape)?;
        let (a, b) = (self.storage(), rhs.storage());
        let out = dispatch_binop!(op, a.cpu(), b.cpu(), |u, v, f| binary_map(
            u, &ll, v, &rl, f
        ));
        drop((a, b));
        Ok((Tensor::from_cpu(out, shape.clone()), shape))
    }

    #[track_caller]
    fn binary(&self, rhs: &Tensor, op: BinaryOp) -> Result<Tensor> {
        let (out, _) = self.binary_forward(rhs, op)?;
        if !(self.requires_grad() || rhs.requires_grad()) {
            return Ok(out);
        }
        let (a, b) = (self.clone(), rhs.clone());
        let y = out.detach();
        let name = match op {
            BinaryOp::Add => "AddBackward",
            BinaryOp::Sub => "SubBackward",
            BinaryOp::Mul => "MulBackward",
            BinaryOp::Div => "DivBackward",
            BinaryOp::Pow => "PowBackward",
            BinaryOp::Maximum => "MaximumBackward",
            BinaryOp::Minimum => "MinimumBackward",
        };
        Ok(out.record(name, &[self, rhs], move || {
            Box::new(move |g| {
                let (ga, gb) = match op {
                    BinaryOp::Add => (g.clone(), g.clone()),
                    BinaryOp::Sub => (g.clone(), g.neg()?),
                    BinaryOp::Mul => (g.mul(&b)?, g.mul(&a)?),
                    BinaryOp::Div => (
                        g.div(&b)?,
                        zip_float!("div", g, &y, |g, y| -g * y)?.div(&b)?,
                    ),
                    BinaryOp::Pow => {
                        let ga = g.mul(&b)?.mul(&a.pow(&b.sub_scalar(1.0)?)?)?;
                        let gb = g.mul(&y)?.mul(&a.log()?)?;
                        (ga, gb)
                    }
                    BinaryOp::Maximum | BinaryOp::Minimum => {
                        // the larger (smaller) input takes the gradient; ties split it evenly
                        let sgn = if op == BinaryOp::Maximum { 1.0 } else { -1.0 };
                        let wa = zip_float!("maximum", &a, &b, |a, b| {
                            let d = (a - b) * a.k(sgn);
                            if d > 0.0 {
                                1.0
                            } else if d < 0.0 {
                                0.0
                            } else {
                                0.5
                            }
                        })?;
                        let ga = g.mul(&wa)?;
                        let gb = g.sub(&ga)?;
                        (ga, gb)
                    }
                };
                Ok(vec![
                    Some(ga.sum_to(a.shape())?),
                    Some(gb.sum_to(b.shape())?),
                ])
            })
        }))
    }

    /// Elementwise `self + rhs` with broadcasting.
    #[track_caller]
    pub fn add(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Add)
    }
    /// Elementwise `self - rhs` with broadcasting.
    #[track_caller]
    pub fn sub(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Sub)
    }
    /// Elementwise `self * rhs` with broadcasting.
    #[track_caller]
    pub fn mul(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Mul)
    }
    /// Elementwise `self / rhs` with broadcasting (integer division truncates; by zero gives 0).
    #[track_caller]
    pub fn div(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Div)
    }
    /// Elementwise `self ^ rhs` with broadcasting.
    #[track_caller]
    pub fn pow(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Pow)
    }
    /// Elementwise maximum (NaN propagates).
    #[track_caller]
    pub fn maximum(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Maximum)
    }
    /// Elementwise minimum (NaN propagates).
    #[track_caller]
    pub fn minimum(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Minimum)
    }

    // ---- in place ----

    #[track_caller]
    fn check_inplace(&self, op: &str) -> Result<()> {
        if crate::autograd::is_grad_enabled() && self.requires_grad() {
            return Err(Error::new(
                ErrorKind::Autograd,
                op,
                "in-place operation on a tensor that requires grad; \
                 do it inside `no_grad()` (as optimizers do) or use the out-of-place op",
            ));
        }
        let l = self.layout();
        if l.dims()
            .iter()
            .zip(l.strides())
            .any(|(&d, &s)| d > 1 && s == 0)
        {
            return Err(Error::new(
                ErrorKind::Layout,
                op,
                format!(
                    "cannot write in place into an expanded tensor (shape {}, strides {:?}); \
                     call .contiguous() first",
                    self.shape(),
                    self.strides()
                ),
            ));
        }
        Ok(())
    }

    #[track_caller]
    fn binary_(&self, rhs: &Tensor, op: BinaryOp) -> Result<&Tensor> {
        let name = op.name();
        self.check_inplace(name)?;
        self.check_same_dtype(name, rhs)?;
        let rhs = if rhs.same_storage(self) {
            rhs.deep_clone()?.detach()
        } else {
            rhs.clone()
        };
        let rl = rhs.layout().broadcast_as(name, self.shape()).map_err(|_| {
            Error::shape(
                name,
                format!(
                    "in-place: rhs {} cannot be broadcast to lhs {}",
                    rhs.shape(),
                    self.shape()
                ),
            )
        })?;
        let dl = self.layout().clone();
        let b = rhs.storage();
        let mut a = self.storage_mut();
        let _ = dispatch_binop!(op, a.cpu_mut(), b.cpu(), |u, v, f| {
            assign_map(u, &dl, v, &rl, f);
            Vec::new()
        });
        Ok(self)
    }

    /// `self += rhs` in place (rhs broadcast to self).
    #[track_caller]
    pub fn add_(&self, rhs: &Tensor) -> Result<&Tensor> {
        self.binary_(rhs, BinaryOp::Add)
    }
    /// `self -= rhs` in place.
    #[track_caller]
    pub fn sub_(&self, rhs: &Tensor) -> Result<&Tensor> {
        self.binary_(rhs, BinaryOp::Sub)
    }
    /// `self *= rhs` in place.
    #[track_caller]
    pub fn mul_(&self, rhs: &Tensor) -> Result<&Tensor> {
        self.binary_(rhs, BinaryOp::Mul)
    }
    /// `self /= rhs` in place.
    #[track_caller]
    pub fn div_(&self, rhs: &Tensor) -> Result<&Tensor> {
        self.binary_(rhs, BinaryOp::Div)
    }

    /// `self += alpha * other` in place (PyTorch `add_(other, alpha=...)`), one pass.
    #[track_caller]
    pub fn add_scaled_(&self, other: &Tensor, alpha: f64) -> Result<&Tensor> {
        self.check_inplace("add_")?;
        self.check_same_dtype("add_", other)?;
        let other = if other.same_storage(self) {
            other.deep_clone()?.detach()
        } else {
            other.clone()
        };
        let ol = other.layout().broadcast_as("add_", self.shape())?;
        let dl = self.layout().clone();
        let b = other.storage();
        let mut a = self.storage_mut();
        match (a.cpu_mut(), b.cpu()) {
            (S::F32(u), S::F32(v)) => {
                let al = alpha as f32;
                assign_map(u, &dl, v, &ol, move |x, y| x + al * y)
            }
            (S::F64(u), S::F64(v)) => assign_map(u, &dl, v, &ol, move |x, y| x + alpha * y),
            _ => {
                drop((a, b));
                return self.add_(&other.mul_scalar(alpha)?);
            }
        }
        Ok(self)
    }

    /// Copy `src` (broadcast) into `self`, in place.
    #[track_caller]
    pub fn copy_(&self, src: &Tensor) -> Result<&Tensor> {
        self.check_inplace("copy_")?;
        let src = if src.dtype() != self.dtype() {
            src.to_dtype(self.dtype())?
        } else {
            src.clone()
        };
        let src = if src.same_storage(self) {
            src.deep_clone()?.detach()
        } else {
            src
        };
        let sl = src.layout().broadcast_as("copy_", self.shape())?;
        let dl = self.layout().clone();
        let b = src.storage();
        let mut a = self.storage_mut();
        crate::with_cpu!(a.cpu_mut(), u => {
            let v = crate::backend::cpu::CpuDType::slice(b.cpu()).expect("same dtype");
            assign_map(u, &dl, v, &sl, |_, y| y)
        });
        Ok(self)
    }

    /// Fill with a value, in place.
    #[track_caller]
    pub fn fill_(&self, value: f64) -> Result<&Tensor> {
        let v = Tensor::full((), value, self.dtype())?;
        self.copy_(&v)
    }

    /// Set to zero, in place.
    #[track_caller]
    pub fn zero_(&self) -> Result<&Tensor> {
        self.fill_(0.0)
    }

    /// `self = self * mul + add`, in place (scalar forms of `mul_`/`add_`).
    #[track_caller]
    pub fn affine_(&self, mul: f64, add: f64) -> Result<&Tensor> {
        self.check_inplace("affine_")?;
        let dl = self.layout().clone();
        let one = Tensor::zeros((), self.dtype())?;
        let ol = one.layout().broadcast_as("affine_", self.shape())?;
        let b = one.storage();
        let mut a = self.storage_mut();
        match (a.cpu_mut(), b.cpu()) {
            (S::F32(u), S::F32(v)) => {
                let (m, c) = (mul as f32, add as f32);
                assign_map(u, &dl, v, &ol, move |x, _| x * m + c)
            }
            (S::F64(u), S::F64(v)) => assign_map(u, &dl, v, &ol, move |x, _| x * mul + add),
            _ => {
                drop((a, b));
                let r = self.detach().affine(mul, add)?;
                return self.copy_(&r);
            }
        }
        Ok(self)
    }

    // ---- comparisons, where, masked_fill ----

    #[track_caller]
    fn compare(&self, rhs: &Tensor, name: &str, op: Cmp) -> Result<Tensor> {
        self.check_same_dtype(name, rhs)?;
        let shape = broadcast_shapes(name, self.shape(), rhs.shape())?;
        let ll = self.layout().broadcast_as(name, &shape)?;
        let rl = rhs.layout().broadcast_as(name, &shape)?;
        let (a, b) = (self.storage(), rhs.storage());
        // One loop per operator with the comparison written out, so it vectorises (through a
        // function pointer on `Ordering` it ran ~40x slower than `relu`). The IEEE operators
        // make NaN compare false to everything, so `ne` is true.
        macro_rules! cmp {
            ($u:expr, $v:expr) => {
                match op {
                    Cmp::Eq => binary_map($u, &ll, $v, &rl, |x, y| x == y),
                    Cmp::Ne => binary_map($u, &ll, $v, &rl, |x, y| x != y),
                    Cmp::Lt => binary_map($u, &ll, $v, &rl, |x, y| x < y),
                    Cmp::Le => binary_map($u, &ll, $v, &rl, |x, y| x <= y),
                    Cmp::Gt => binary_map($u, &ll, $v, &rl, |x, y| x > y),
                    Cmp::Ge => binary_map($u, &ll, $v, &rl, |x, y| x >= y),
                }
            };
        }
        let out = match (a.cpu(), b.cpu()) {
            (S::F32(u), S::F32(v)) => cmp!(u, v),
            (S::F64(u), S::F64(v)) => cmp!(u, v),
            (S::F16(u), S::F16(v)) => cmp!(u, v),
            (S::BF16(u), S::BF16(v)) => cmp!(u, v),
            (S::I64(u), S::I64(v)) => cmp!(u, v),
            (S::U8(u), S::U8(v)) => cmp!(u, v),
            (S::Bool(u), S::Bool(v)) => cmp!(u, v),
            _ => unreachable!(),
        };
        drop((a, b));
        Ok(Tensor::from_cpu(S::Bool(out), shape))
    }

    /// `self == rhs` as a bool mask.
    #[track_caller]
    pub fn eq(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, "eq", Cmp::Eq)
    }
    /// `self != rhs` as a bool mask.
    #[track_caller]
    pub fn ne(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, "ne", Cmp::Ne)
    }
    /// `self < rhs` as a bool mask.
    #[track_caller]
    pub fn lt(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, "lt", Cmp::Lt)
    }
    /// `self <= rhs` as a bool mask.
    #[track_caller]
    pub fn le(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, "le", Cmp::Le)
    }
    /// `self > rhs` as a bool mask.
    #[track_caller]
    pub fn gt(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, "gt", Cmp::Gt)
    }
    /// `self >= rhs` as a bool mask.
    #[track_caller]
    pub fn ge(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, "ge", Cmp::Ge)
    }

    /// Scalar comparisons: `x.gt_scalar(0.0)`.
    #[track_caller]
    pub fn eq_scalar(&self, v: f64) -> Result<Tensor> {
        self.eq(&Tensor::full((), v, self.dtype())?)
    }
    #[track_caller]
    pub fn ne_scalar(&self, v: f64) -> Result<Tensor> {
        self.ne(&Tensor::full((), v, self.dtype())?)
    }
    #[track_caller]
    pub fn lt_scalar(&self, v: f64) -> Result<Tensor> {
        self.lt(&Tensor::full((), v, self.dtype())?)
    }
    #[track_caller]
    pub fn le_scalar(&self, v: f64) -> Result<Tensor> {
        self.le(&Tensor::full((), v, self.dtype())?)
    }
    #[track_caller]
    pub fn gt_scalar(&self, v: f64) -> Result<Tensor> {
        self.gt(&Tensor::full((), v, self.dtype())?)
    }
    #[track_caller]
    pub fn ge_scalar(&self, v: f64) -> Result<Tensor> {
        self.ge(&Tensor::full((), v, self.dtype())?)
    }

    /// `torch.where(cond, a, b)`: elements of `a` where `cond` is true, else of `b`; all three
    /// broadcast together. `cond` must be bool.
    #[track_caller]
    pub fn where_(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        if cond.dtype() != DType::Bool {
            return Err(Error::dtype(
                "where",
                format!("condition must be bool, got {}", cond.dtype()),
            ));
        }
        a.check_same_dtype("where", b)?;
        let shape = broadcast_shapes("where", a.shape(), b.shape())?;
        let shape = broadcast_shapes("where", cond.shape(), &shape)?;
        let cl = cond.layout().broadcast_as("where", &shape)?;
        let al = a.layout().broadcast_as("where", &shape)?;
        let bl = b.layout().broadcast_as("where", &shape)?;
        let (sc, sa, sb) = (cond.storage(), a.storage(), b.storage());
        let S::Bool(c) = sc.cpu() else { unreachable!() };
        let out = crate::with_cpu!(sa.cpu(), u => {
            let v = crate::backend::cpu::CpuDType::slice(sb.cpu()).expect("same dtype");
            crate::backend::cpu::CpuDType::wrap(ternary_map(c, &cl, u, &al, v, &bl, |c, x, y| if c { x } else { y }))
        });
        drop((sc, sa, sb));
        let out = Tensor::from_cpu(out, shape);
        let (c, ashape, bshape) = (cond.clone(), a.shape().clone(), b.shape().clone());
        Ok(out.record("WhereBackward", &[a, b], move || {
            Box::new(move |g| {
                let z = Tensor::zeros((), g.dtype())?;
                let ga = Tensor::where_(&c, g, &z)?.sum_to(&ashape)?;
                let gb = Tensor::where_(&c, &z, g)?.sum_to(&bshape)?;
                Ok(vec![Some(ga), Some(gb)])
            })
        }))
    }

    /// `value` where `mask` is true, else `self`.
    #[track_caller]
    pub fn masked_fill(&self, mask: &Tensor, value: f64) -> Result<Tensor> {
        let v = Tensor::full((), value, self.dtype())?;
        Tensor::where_(mask, &v, self)
    }

    /// Logical not of a bool mask.
    #[track_caller]
    pub fn logical_not(&self) -> Result<Tensor> {
        if self.dtype() != DType::Bool {
            return Err(Error::dtype(
                "logical_not",
                format!("expected bool, got {}", self.dtype()),
            ));
        }
        self.eq(&Tensor::scalar(false))
    }
}
