//! Binary ops with NumPy broadcasting, comparisons, `where`, and the in-place variants.
//! Allocating (`add`) and in-place (`add_`) forms are the same named [`BinaryOp`].

use crate::backend::{BinaryOp, CmpOp as Cmp};
use crate::shape::broadcast_shapes;
use crate::{DType, Error, ErrorKind, Result, Shape, Tensor};

impl Tensor {
    /// Forward of a broadcasting arithmetic op (no autograd).
    #[track_caller]
    fn binary_forward(&self, rhs: &Tensor, op: BinaryOp) -> Result<(Tensor, Shape)> {
        let name = op.name();
        self.check_same_dtype(name, rhs)?;
        let shape = broadcast_shapes(name, self.shape(), rhs.shape())?;
        crate::limits::check_alloc(name, &shape, self.dtype())?;
        let ll = self.layout().broadcast_as(name, &shape)?;
        let rl = rhs.layout().broadcast_as(name, &shape)?;
        let out = self.storage().binary(&ll, &rhs.storage(), &rl, op);
        Ok((Tensor::from_result(out, shape.clone())?, shape))
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
            _ => "BinaryBackward",
        };
        Ok(out.record(name, &[self, rhs], move || {
            Box::new(move |g| {
                let (ga, gb) = match op {
                    BinaryOp::Add => (g.clone(), g.clone()),
                    BinaryOp::Sub => (g.clone(), g.neg()?),
                    BinaryOp::Mul => (g.mul(&b)?, g.mul(&a)?),
                    // -(g·y) is (-g)·y bit for bit
                    BinaryOp::Div => (g.div(&b)?, g.mul(&y)?.neg()?.div(&b)?),
                    BinaryOp::Pow => {
                        let ga = g.mul(&b)?.mul(&a.pow(&b.sub_scalar(1.0)?)?)?;
                        let gb = g.mul(&y)?.mul(&a.log()?)?;
                        (ga, gb)
                    }
                    BinaryOp::Maximum | BinaryOp::Minimum => {
                        // the larger (smaller) input takes the gradient; ties split it evenly
                        let w = if op == BinaryOp::Maximum {
                            BinaryOp::MaximumGradWeight
                        } else {
                            BinaryOp::MinimumGradWeight
                        };
                        a.check_float(op.name())?;
                        let (wa, _) = a.binary_forward(&b, w)?;
                        let ga = g.mul(&wa)?;
                        let gb = g.sub(&ga)?;
                        (ga, gb)
                    }
                    _ => unreachable!("no autograd for gradient-weight ops"),
                };
                Ok(vec![
                    Some(ga.sum_to(a.shape())?),
                    Some(gb.sum_to(b.shape())?),
                ])
            })
        }))
    }

    /// `max(x, 0) - x·y + ln(1 + e^-|x|)` elementwise for logits `self` and targets `rhs`
    /// (broadcast together), not recorded: the loss records its own backward.
    #[track_caller]
    pub(crate) fn bce_with_logits_elementwise(&self, rhs: &Tensor) -> Result<Tensor> {
        self.check_float("binary_cross_entropy_with_logits")?;
        Ok(self.binary_forward(rhs, BinaryOp::BceWithLogits)?.0)
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
        self.storage_mut().binary_inplace(&dl, &b, &rl, op)?;
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
        let done = self
            .storage_mut()
            .add_scaled_inplace(&dl, &other.storage(), &ol, alpha)?;
        if !done {
            self.add_(&other.mul_scalar(alpha)?)?;
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
        self.storage_mut().assign(&dl, &src.storage(), &sl)?;
        Ok(self)
    }

    /// Fill with a value, in place.
    #[track_caller]
    pub fn fill_(&self, value: f64) -> Result<&Tensor> {
        let v = Tensor::full_on((), value, self.dtype(), self.device())?;
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
        if !self.storage_mut().affine_inplace(&dl, mul, add)? {
            let r = self.detach().affine(mul, add)?;
            self.copy_(&r)?;
        }
        Ok(self)
    }

    // ---- comparisons, where, masked_fill ----

    #[track_caller]
    fn compare(&self, rhs: &Tensor, name: &str, op: Cmp) -> Result<Tensor> {
        self.check_same_dtype(name, rhs)?;
        let shape = broadcast_shapes(name, self.shape(), rhs.shape())?;
        crate::limits::check_alloc(name, &shape, DType::Bool)?;
        let ll = self.layout().broadcast_as(name, &shape)?;
        let rl = rhs.layout().broadcast_as(name, &shape)?;
        let out = self.storage().cmp(&ll, &rhs.storage(), &rl, op);
        Tensor::from_result(out, shape)
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
        self.eq(&Tensor::full_on((), v, self.dtype(), self.device())?)
    }
    #[track_caller]
    pub fn ne_scalar(&self, v: f64) -> Result<Tensor> {
        self.ne(&Tensor::full_on((), v, self.dtype(), self.device())?)
    }
    #[track_caller]
    pub fn lt_scalar(&self, v: f64) -> Result<Tensor> {
        self.lt(&Tensor::full_on((), v, self.dtype(), self.device())?)
    }
    #[track_caller]
    pub fn le_scalar(&self, v: f64) -> Result<Tensor> {
        self.le(&Tensor::full_on((), v, self.dtype(), self.device())?)
    }
    #[track_caller]
    pub fn gt_scalar(&self, v: f64) -> Result<Tensor> {
        self.gt(&Tensor::full_on((), v, self.dtype(), self.device())?)
    }
    #[track_caller]
    pub fn ge_scalar(&self, v: f64) -> Result<Tensor> {
        self.ge(&Tensor::full_on((), v, self.dtype(), self.device())?)
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
        crate::limits::check_alloc("where", &shape, a.dtype())?;
        let cl = cond.layout().broadcast_as("where", &shape)?;
        let al = a.layout().broadcast_as("where", &shape)?;
        let bl = b.layout().broadcast_as("where", &shape)?;
        let out = cond
            .storage()
            .where_cond(&cl, &a.storage(), &al, &b.storage(), &bl);
        let out = Tensor::from_result(out, shape)?;
        let (c, ashape, bshape) = (cond.clone(), a.shape().clone(), b.shape().clone());
        Ok(out.record("WhereBackward", &[a, b], move || {
            Box::new(move |g| {
                let z = Tensor::zeros_on((), g.dtype(), g.device())?;
                let ga = Tensor::where_(&c, g, &z)?.sum_to(&ashape)?;
                let gb = Tensor::where_(&c, &z, g)?.sum_to(&bshape)?;
                Ok(vec![Some(ga), Some(gb)])
            })
        }))
    }

    /// `value` where `mask` is true, else `self`.
    #[track_caller]
    pub fn masked_fill(&self, mask: &Tensor, value: f64) -> Result<Tensor> {
        let v = Tensor::full_on((), value, self.dtype(), self.device())?;
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
        self.eq(&Tensor::scalar(false).to_device(self.device())?)
    }
}
