//! Indexing and joining: index_select, gather, scatter_add, index_add, cat, stack, one_hot,
//! embedding, tril/triu.

use crate::shape::normalize_dim;
use crate::{DType, Error, Result, Shape, Tensor};

/// Read an int64 index tensor, checking every value is in `0..bound` (negatives wrap once).
#[track_caller]
fn read_indices(op: &str, idx: &Tensor, bound: usize) -> Result<Vec<usize>> {
    if idx.dtype() != DType::I64 {
        return Err(Error::dtype(
            op,
            format!("indices must be int64, got {}", idx.dtype()),
        ));
    }
    idx.to_vec::<i64>()?
        .into_iter()
        .map(|i| {
            let j = if i < 0 {
                i as i128 + bound as i128
            } else {
                i as i128
            };
            if j < 0 || j >= bound as i128 {
                Err(Error::index(
                    op,
                    format!("index {i} is out of bounds for size {bound}"),
                ))
            } else {
                Ok(j as usize)
            }
        })
        .collect()
}

impl Tensor {
    /// Rows (slices along `dim`) picked by a 1-D int64 `index`.
    #[track_caller]
    pub fn index_select(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        let d = normalize_dim("index_select", dim, self.rank())?;
        if index.rank() > 1 {
            return Err(Error::shape(
                "index_select",
                format!("index must be 1-D, got shape {}", index.shape()),
            ));
        }
        let n = self.dims()[d];
        let ids = read_indices("index_select", index, n)?;
        let x = self.contiguous()?.detach();
        let outer: usize = x.dims()[..d].iter().product();
        let inner: usize = x.dims()[d + 1..].iter().product();
        let mut shape = x.dims().to_vec();
        shape[d] = ids.len();
        let out = x
            .storage()
            .index_select(x.layout(), &ids, [outer, n, inner]);
        let out = Tensor::from_result(out, shape)?;
        let (in_shape, idx) = (self.shape().clone(), index.clone());
        Ok(out.record("IndexSelectBackward", &[self], move || {
            Box::new(move |g| {
                let z = Tensor::zeros_on(&in_shape, g.dtype(), g.device())?;
                Ok(vec![Some(z.index_add(d as isize, &idx, g)?)])
            })
        }))
    }

    /// `out = self.clone(); out.select(dim, index[j]) += src.select(dim, j)` (differentiable).
    #[track_caller]
    pub fn index_add(&self, dim: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        let d = normalize_dim("index_add", dim, self.rank())?;
        self.check_same_dtype("index_add", src)?;
        let n = self.dims()[d];
        let ids = read_indices("index_add", index, n)?;
        let mut expect = self.dims().to_vec();
        expect[d] = ids.len();
        if src.dims() != expect.as_slice() {
            return Err(Error::shape(
                "index_add",
                format!(
                    "source shape {} does not match {:?} (self {}, {} indices)",
                    src.shape(),
                    expect,
                    self.shape(),
                    ids.len()
                ),
            ));
        }
        let out = self.detach().deep_clone()?;
        let sc = src.contiguous()?.detach();
        let outer: usize = self.dims()[..d].iter().product();
        let inner: usize = self.dims()[d + 1..].iter().product();
        if !matches!(self.dtype(), DType::F32 | DType::F64 | DType::I64) {
            return Err(Error::dtype(
                "index_add",
                format!("not supported for {}", self.dtype()),
            ));
        }
        out.storage_mut()
            .index_add_inplace(&ids, &sc.storage(), sc.layout(), [outer, n, inner])?;
        let idx = index.clone();
        Ok(out.record("IndexAddBackward", &[self, src], move || {
            Box::new(move |g| {
                Ok(vec![
                    Some(g.clone()),
                    Some(g.index_select(d as isize, &idx)?),
                ])
            })
        }))
    }

    /// `out[i][j][k] = self[i][index[i][j][k]][k]` for `dim = 1` (and likewise for any dim).
    #[track_caller]
    pub fn gather(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        let d = normalize_dim("gather", dim, self.rank())?;
        self.check_index_shape("gather", d, index)?;
        let ids = read_indices("gather", index, self.dims()[d])?;
        let out = self.storage().gather(self.layout(), &ids, index.dims(), d);
        let out = Tensor::from_result(out, index.shape())?;
        let (in_shape, idx) = (self.shape().clone(), index.clone());
        Ok(out.record("GatherBackward", &[self], move || {
            Box::new(move |g| {
                let z = Tensor::zeros_on(&in_shape, g.dtype(), g.device())?;
                Ok(vec![Some(z.scatter_add(d as isize, &idx, g)?)])
            })
        }))
    }

    #[track_caller]
    fn check_index_shape(&self, op: &str, d: usize, index: &Tensor) -> Result<()> {
        if index.rank() != self.rank()
            || index
                .dims()
                .iter()
                .zip(self.dims())
                .enumerate()
                .any(|(i, (&a, &b))| i != d && a > b)
        {
            return Err(Error::shape(
                op,
                format!(
                    "index shape {} does not fit self shape {} along dim {d}",
                    index.shape(),
                    self.shape()
                ),
            ));
        }
        Ok(())
    }

    /// `out = self.clone(); out[i][index[i][j]] += src[i][j]` (dim 1 shown), differentiable.
    #[track_caller]
    pub fn scatter_add(&self, dim: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        let d = normalize_dim("scatter_add", dim, self.rank())?;
        self.check_index_shape("scatter_add", d, index)?;
        self.check_same_dtype("scatter_add", src)?;
        if src.rank() != index.rank() || src.dims().iter().zip(index.dims()).any(|(&a, &b)| a < b) {
            return Err(Error::shape(
                "scatter_add",
                format!(
                    "src shape {} is smaller than index shape {}",
                    src.shape(),
                    index.shape()
                ),
            ));
        }
        let ids = read_indices("scatter_add", index, self.dims()[d])?;
        let out = self.detach().deep_clone()?;
        if !matches!(self.dtype(), DType::F32 | DType::F64 | DType::I64) {
            return Err(Error::dtype(
                "scatter_add",
                format!("not supported for {}", self.dtype()),
            ));
        }
        let ol = out.layout().clone();
        out.storage_mut().scatter_add_inplace(
            &ol,
            &ids,
            index.dims(),
            &src.storage(),
            src.layout(),
            d,
        )?;
        let idx = index.clone();
        let src_shape = src.shape().clone();
        Ok(out.record("ScatterAddBackward", &[self, src], move || {
            Box::new(move |g| {
                let gs = g.gather(d as isize, &idx)?;
                let gs = if gs.shape() == &src_shape {
                    gs
                } else {
                    let z = Tensor::zeros_on(&src_shape, g.dtype(), g.device())?;
                    let mut l = z.layout().clone();
                    for (i, &n) in idx.dims().iter().enumerate() {
                        l = l.slice(i, 0, n, 1);
                    }
                    z.with_layout(l).copy_(&gs)?;
                    z
                };
                Ok(vec![Some(g.clone()), Some(gs)])
            })
        }))
    }

    /// Concatenate along an existing dim.
    #[track_caller]
    pub fn cat(tensors: &[Tensor], dim: isize) -> Result<Tensor> {
        let Some(first) = tensors.first() else {
            return Err(Error::invalid(
                "cat",
                "expected a non-empty list of tensors",
            ));
        };
        let d = normalize_dim("cat", dim, first.rank())?;
        let mut total = 0;
        for t in tensors {
            first.check_same_dtype("cat", t)?;
            if t.rank() != first.rank()
                || t.dims()
                    .iter()
                    .zip(first.dims())
                    .enumerate()
                    .any(|(i, (&a, &b))| i != d && a != b)
            {
                return Err(Error::shape(
                    "cat",
                    format!(
                        "shapes differ outside dim {d}: {} vs {}",
                        first.shape(),
                        t.shape()
                    ),
                ));
            }
            total += t.dims()[d];
        }
        let mut shape = first.dims().to_vec();
        shape[d] = total;
        let out = Tensor::zeros_on(shape, first.dtype(), first.device())?;
        let mut start = 0;
        let mut sizes = vec![];
        for t in tensors {
            let n = t.dims()[d];
            let view = out.layout().slice(d, start, start + n, 1);
            out.storage_mut().assign(&view, &t.storage(), t.layout())?;
            start += n;
            sizes.push(n);
        }
        let refs: Vec<&Tensor> = tensors.iter().collect();
        Ok(out.record("CatBackward", &refs, move || {
            Box::new(move |g| {
                let mut s = 0;
                sizes
                    .iter()
                    .map(|&n| {
                        let r = g.narrow(d as isize, s, n).map(Some);
                        s += n;
                        r
                    })
                    .collect()
            })
        }))
    }

    /// Stack along a new dim.
    #[track_caller]
    pub fn stack(tensors: &[Tensor], dim: isize) -> Result<Tensor> {
        let Some(first) = tensors.first() else {
            return Err(Error::invalid(
                "stack",
                "expected a non-empty list of tensors",
            ));
        };
        for t in tensors {
            if t.shape() != first.shape() {
                return Err(Error::shape(
                    "stack",
                    format!("all shapes must match: {} vs {}", first.shape(), t.shape()),
                ));
            }
        }
        let us = tensors
            .iter()
            .map(|t| t.unsqueeze(dim))
            .collect::<Result<Vec<_>>>()?;
        Tensor::cat(&us, dim)
    }

    /// One-hot encoding of int64 class indices: shape `[.., num_classes]`, int64.
    #[track_caller]
    pub fn one_hot(&self, num_classes: usize) -> Result<Tensor> {
        let ids = read_indices("one_hot", self, num_classes)?;
        let mut shape = self.dims().to_vec();
        shape.push(num_classes);
        crate::limits::check_alloc("one_hot", &Shape(shape.clone()), DType::I64)?;
        let mut v = vec![0i64; ids.len() * num_classes];
        for (r, &i) in ids.iter().enumerate() {
            v[r * num_classes + i] = 1;
        }
        Tensor::from_vec(v, shape)?.to_device(self.device())
    }

    /// Embedding lookup: rows of `weight` ([num, dim]) for each id in `ids` (any shape, int64).
    #[track_caller]
    pub fn embedding(ids: &Tensor, weight: &Tensor) -> Result<Tensor> {
        if weight.rank() != 2 {
            return Err(Error::shape(
                "embedding",
                format!("weight must be 2-D, got {}", weight.shape()),
            ));
        }
        let flat = ids.flatten(0, -1)?;
        let rows = weight.index_select(0, &flat)?;
        let mut shape = ids.dims().to_vec();
        shape.push(weight.dims()[1]);
        rows.reshape(Shape(shape))
    }

    /// Lower triangle of the last two dims (elements with `j - i <= diagonal`), rest zero.
    #[track_caller]
    pub fn tril(&self, diagonal: i64) -> Result<Tensor> {
        self.tri("tril", diagonal, true)
    }

    /// Upper triangle of the last two dims (elements with `j - i >= diagonal`), rest zero.
    #[track_caller]
    pub fn triu(&self, diagonal: i64) -> Result<Tensor> {
        self.tri("triu", diagonal, false)
    }

    #[track_caller]
    fn tri(&self, op: &str, k: i64, lower: bool) -> Result<Tensor> {
        if self.rank() < 2 {
            return Err(Error::shape(
                op,
                format!("needs at least 2 dims, got {}", self.shape()),
            ));
        }
        let (n, m) = (self.dims()[self.rank() - 2], self.dims()[self.rank() - 1]);
        let mask = Tensor::tri_mask(n, m, k, lower)?.to_device(self.device())?;
        let z = Tensor::zeros_on((), self.dtype(), self.device())?;
        Tensor::where_(&mask, self, &z)
    }

    /// Bool `[n, m]` mask, true where `j - i <= k` (lower) or `j - i >= k` (upper).
    pub fn tri_mask(n: usize, m: usize, k: i64, lower: bool) -> Result<Tensor> {
        crate::limits::check_alloc("tri_mask", &Shape(vec![n, m]), DType::Bool)?;
        let v: Vec<bool> = (0..n * m)
            .map(|p| {
                let (i, j) = ((p / m) as i64, (p % m) as i64);
                if lower {
                    j - i <= k
                } else {
                    j - i >= k
                }
            })
            .collect();
        Tensor::from_vec(v, [n, m])
    }
}
