//! Views and shape ops: O(1), share storage, differentiable.

use crate::shape::{normalize_dim, normalize_insert_dim};
use crate::{Error, ErrorKind, Layout, Result, Shape, Tensor};

/// Resolve a shape that may contain one `-1` (`reshape(&[-1, 4])`).
pub trait ShapeSpec {
    fn resolve(&self, op: &str, numel: usize) -> Result<Shape>;
}

impl<S: Into<Shape> + Clone> ShapeSpec for S {
    fn resolve(&self, _op: &str, _numel: usize) -> Result<Shape> {
        Ok(self.clone().into())
    }
}

/// A shape with an inferred dimension, written `Infer(&[-1, 28 * 28])`.
#[derive(Clone, Copy, Debug)]
pub struct Infer<'a>(pub &'a [isize]);

impl ShapeSpec for Infer<'_> {
    #[track_caller]
    fn resolve(&self, op: &str, numel: usize) -> Result<Shape> {
        let mut infer = None;
        let mut known = 1usize;
        for (i, &d) in self.0.iter().enumerate() {
            if d == -1 {
                if infer.is_some() {
                    return Err(Error::shape(op, "only one dimension can be -1"));
                }
                infer = Some(i);
            } else if d < 0 {
                return Err(Error::shape(op, format!("invalid dimension {d}")));
            } else {
                known *= d as usize;
            }
        }
        let mut dims: Vec<usize> = self.0.iter().map(|&d| d.max(0) as usize).collect();
        if let Some(i) = infer {
            if known == 0 || !numel.is_multiple_of(known) {
                return Err(Error::shape(
                    op,
                    format!("shape {:?} is invalid for input of size {numel}", self.0),
                ));
            }
            dims[i] = numel / known;
        }
        Ok(Shape(dims))
    }
}

impl Tensor {
    /// A differentiable view with a new layout; `back` maps the output grad to the input grad.
    fn view_op(
        &self,
        name: &'static str,
        layout: Layout,
        back: impl Fn(&Tensor) -> Result<Tensor> + Send + Sync + 'static,
    ) -> Tensor {
        self.with_layout(layout).record(name, &[self], || {
            Box::new(move |g| Ok(vec![Some(back(g)?)]))
        })
    }

    /// Reshape without copying; an error if the layout cannot be viewed that way.
    #[track_caller]
    pub fn view(&self, shape: impl ShapeSpec) -> Result<Tensor> {
        let shape = shape.resolve("view", self.numel())?;
        self.check_numel("view", &shape)?;
        let Some(layout) = self.layout().view(&shape) else {
            return Err(Error::new(
                ErrorKind::Layout,
                "view",
                format!(
                    "view size {shape} is not compatible with input of shape {} and strides {:?}; \
                     call .contiguous() first or use .reshape()",
                    self.shape(),
                    self.strides()
                ),
            ));
        };
        let in_shape = self.shape().clone();
        Ok(self.view_op("ViewBackward", layout, move |g| g.reshape(&in_shape)))
    }

    /// Reshape, copying only when the layout cannot be viewed with the new shape.
    #[track_caller]
    pub fn reshape(&self, shape: impl ShapeSpec) -> Result<Tensor> {
        let shape = shape.resolve("reshape", self.numel())?;
        self.check_numel("reshape", &shape)?;
        if self.layout().view(&shape).is_some() {
            self.view(shape)
        } else {
            self.contiguous()?.view(shape)
        }
    }

    #[track_caller]
    fn check_numel(&self, op: &str, shape: &Shape) -> Result<()> {
        if shape.checked_numel() != Some(self.numel()) {
            return Err(Error::shape(
                op,
                format!(
                    "shape {shape} is invalid for input of shape {} ({} elements)",
                    self.shape(),
                    self.numel()
                ),
            ));
        }
        Ok(())
    }

    /// Flatten dims `start..=end` into one.
    #[track_caller]
    pub fn flatten(&self, start: isize, end: isize) -> Result<Tensor> {
        if self.rank() == 0 {
            return self.reshape([1]);
        }
        let s = normalize_dim("flatten", start, self.rank())?;
        let e = normalize_dim("flatten", end, self.rank())?;
        if s > e {
            return Err(Error::index(
                "flatten",
                format!("start dim {start} comes after end dim {end}"),
            ));
        }
        let d = self.dims();
        let mut new: Vec<usize> = d[..s].to_vec();
        new.push(d[s..=e].iter().product());
        new.extend_from_slice(&d[e + 1..]);
        self.reshape(new)
    }

    /// Swap two dims.
    #[track_caller]
    pub fn transpose(&self, d0: isize, d1: isize) -> Result<Tensor> {
        let a = self.layout().dim("transpose", d0)?;
        let b = self.layout().dim("transpose", d1)?;
        let l = self.layout().transpose(a, b);
        Ok(self.view_op("TransposeBackward", l, move |g| {
            g.transpose(a as isize, b as isize)
        }))
    }

    /// Transpose of a matrix (a no-op on 0-d and 1-d tensors, as in PyTorch).
    #[track_caller]
    pub fn t(&self) -> Result<Tensor> {
        match self.rank() {
            0 | 1 => Ok(self.clone()),
            2 => self.transpose(0, 1),
            r => Err(Error::shape(
                "t",
                format!(
                    "expects a tensor with <= 2 dims, got {r} (shape {})",
                    self.shape()
                ),
            )),
        }
    }

    /// Reorder dims.
    #[track_caller]
    pub fn permute(&self, dims: &[isize]) -> Result<Tensor> {
        let r = self.rank();
        if dims.len() != r {
            return Err(Error::shape(
                "permute",
                format!(
                    "got {} dims {dims:?} for a tensor of shape {}",
                    dims.len(),
                    self.shape()
                ),
            ));
        }
        let mut p = Vec::with_capacity(r);
        let mut seen = vec![false; r];
        for &d in dims {
            let d = normalize_dim("permute", d, r)?;
            if seen[d] {
                return Err(Error::index("permute", format!("repeated dim in {dims:?}")));
            }
            seen[d] = true;
            p.push(d);
        }
        let mut inv = vec![0isize; r];
        for (i, &d) in p.iter().enumerate() {
            inv[d] = i as isize;
        }
        let l = self.layout().permute(&p);
        Ok(self.view_op("PermuteBackward", l, move |g| g.permute(&inv)))
    }

    /// `len` elements of `dim` starting at `start`.
    #[track_caller]
    pub fn narrow(&self, dim: isize, start: usize, len: usize) -> Result<Tensor> {
        let d = self.layout().dim("narrow", dim)?;
        match start.checked_add(len) {
            Some(end) if end <= self.dims()[d] => self.slice(dim, start as isize, end as isize, 1),
            _ => Err(Error::index(
                "narrow",
                format!(
                    "start {start} + length {len} exceeds dim {d} of size {} (shape {})",
                    self.dims()[d],
                    self.shape()
                ),
            )),
        }
    }

    /// Python-style slice `start:end:step` along `dim` (negative start/end count from the end,
    /// out-of-range bounds are clamped as in Python; step must be positive).
    #[track_caller]
    pub fn slice(&self, dim: isize, start: isize, end: isize, step: usize) -> Result<Tensor> {
        let d = self.layout().dim("slice", dim)?;
        if step == 0 {
            return Err(Error::invalid("slice", "step must be positive"));
        }
        let n = self.dims()[d] as isize;
        let clamp = |i: isize| if i < 0 { (i + n).max(0) } else { i.min(n) } as usize;
        let (s, e) = (clamp(start), clamp(end));
        let e = e.max(s);
        let l = self.layout().slice(d, s, e, step);
        let in_shape = self.shape().clone();
        Ok(self.view_op("SliceBackward", l, move |g| {
            let z = Tensor::zeros_on(&in_shape, g.dtype(), g.device())?;
            let zl = z.layout().slice(d, s, e, step);
            z.with_layout(zl).copy_(g)?;
            Ok(z)
        }))
    }

    /// Index `index` along `dim`, removing that dim (`x[:, 3]`); negative counts from the end.
    #[track_caller]
    pub fn select(&self, dim: isize, index: isize) -> Result<Tensor> {
        let d = self.layout().dim("select", dim)?;
        let n = self.dims()[d] as isize;
        let i = if index < 0 { index + n } else { index };
        if i < 0 || i >= n {
            return Err(Error::index(
                "select",
                format!(
                    "index {index} out of range for dim {d} of size {n} (shape {})",
                    self.shape()
                ),
            ));
        }
        let i = i as usize;
        let l = self.layout().select(d, i);
        let in_shape = self.shape().clone();
        Ok(self.view_op("SelectBackward", l, move |g| {
            let z = Tensor::zeros_on(&in_shape, g.dtype(), g.device())?;
            let zl = z.layout().select(d, i);
            z.with_layout(zl).copy_(g)?;
            Ok(z)
        }))
    }

    /// Insert a size-1 dim at `dim`.
    #[track_caller]
    pub fn unsqueeze(&self, dim: isize) -> Result<Tensor> {
        let d = normalize_insert_dim("unsqueeze", dim, self.rank())?;
        let l = self.layout().unsqueeze(d);
        Ok(self.view_op("UnsqueezeBackward", l, move |g| g.squeeze(d as isize)))
    }

    /// Remove `dim` if it has size 1 (a no-op otherwise, as in PyTorch).
    #[track_caller]
    pub fn squeeze(&self, dim: isize) -> Result<Tensor> {
        if self.rank() == 0 {
            return Ok(self.clone());
        }
        let d = self.layout().dim("squeeze", dim)?;
        if self.dims()[d] != 1 {
            return Ok(self.clone());
        }
        let l = self.layout().squeeze(d);
        Ok(self.view_op("SqueezeBackward", l, move |g| g.unsqueeze(d as isize)))
    }

    /// Remove every size-1 dim.
    pub fn squeeze_all(&self) -> Result<Tensor> {
        let dims: Vec<usize> = self.dims().iter().copied().filter(|&d| d != 1).collect();
        self.reshape(dims)
    }

    /// Broadcast to `shape` with stride-0 dims (no copy).
    #[track_caller]
    pub fn broadcast_to(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape = shape.into();
        if &shape == self.shape() {
            return Ok(self.clone());
        }
        let l = self.layout().broadcast_as("broadcast_to", &shape)?;
        let in_shape = self.shape().clone();
        Ok(self.view_op("ExpandBackward", l, move |g| g.sum_to(&in_shape)))
    }

    /// PyTorch `expand`: like `broadcast_to`.
    #[track_caller]
    pub fn expand(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        self.broadcast_to(shape)
    }

    /// Split into `chunks` pieces along `dim` (the last may be smaller).
    #[track_caller]
    pub fn chunk(&self, chunks: usize, dim: isize) -> Result<Vec<Tensor>> {
        if chunks == 0 {
            return Err(Error::invalid("chunk", "chunks must be positive"));
        }
        let d = self.layout().dim("chunk", dim)?;
        let size = self.dims()[d].div_ceil(chunks).max(1);
        self.split(size, dim)
    }

    /// Split into pieces of `size` along `dim` (the last may be smaller).
    #[track_caller]
    pub fn split(&self, size: usize, dim: isize) -> Result<Vec<Tensor>> {
        if size == 0 {
            return Err(Error::invalid("split", "split size must be positive"));
        }
        let d = self.layout().dim("split", dim)?;
        let n = self.dims()[d];
        let mut out = vec![];
        let mut s = 0;
        while s < n {
            let len = size.min(n - s);
            out.push(self.narrow(d as isize, s, len)?);
            s += len;
        }
        if n == 0 {
            out.push(self.clone());
        }
        Ok(out)
    }

    /// A contiguous tensor with the same values (shares storage when already contiguous).
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        crate::limits::check_alloc("contiguous", self.shape(), self.dtype())?;
        let data = self.storage().copy_contiguous(self.layout());
        Ok(
            Tensor::from_result(data, self.shape())?.record("CloneBackward", &[self], || {
                Box::new(|g| Ok(vec![Some(g.clone())]))
            }),
        )
    }

    /// A copy that owns fresh storage (`clone()` in PyTorch; `Clone` here shares).
    pub fn deep_clone(&self) -> Result<Tensor> {
        let data = self.storage().copy_contiguous(self.layout());
        Ok(
            Tensor::from_result(data, self.shape())?.record("CloneBackward", &[self], || {
                Box::new(|g| Ok(vec![Some(g.clone())]))
            }),
        )
    }
}
