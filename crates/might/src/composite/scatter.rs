//! Writing a source into chosen positions along a dim: `scatter` (replace) and
//! `scatter_reduce` (sum / prod / mean / amax / amin of everything sent to a position).
//!
//! Where each source element goes is worked out on the host from the int64 index (as
//! `gather`'s index is). The values never leave their device: the sources are picked with
//! `index_select` into one padded row per written position, reduced along the row with the
//! ordinary reductions, and put in place with `where_`. The backward passes are therefore
//! those of the primitives, which gives PyTorch's rules: the gradient of a sum goes to every
//! contributor, of a mean divided by the count, of a product through `prod`'s (exact at zeros),
//! and of `amax` / `amin` split evenly between the contributors equal to the result.

use super::index_on;
use crate::limits::check_alloc;
use crate::shape::normalize_dim;
use crate::{DType, Error, Result, Tensor};

/// Where the elements of `index` send their source elements.
struct Plan {
    /// For each element of `index` (row-major), its flat destination in `self`.
    dest: Vec<usize>,
    /// The used part of the source (`src` cut to `index`'s shape), flattened: element `p` of
    /// `index` sends element `p` of this.
    src: Tensor,
}

#[track_caller]
fn plan(op: &str, this: &Tensor, d: usize, index: &Tensor, src: &Tensor) -> Result<Plan> {
    if index.dtype() != DType::I64 {
        return Err(Error::dtype(
            op,
            format!("index must be int64, got {}", index.dtype()),
        ));
    }
    this.check_same_dtype(op, src)?;
    let r = this.rank();
    let fits = index.rank() == r
        && src.rank() == r
        && (0..r).all(|i| {
            index.dims()[i] <= src.dims()[i] && (i == d || index.dims()[i] <= this.dims()[i])
        });
    if !fits {
        return Err(Error::shape(
            op,
            format!(
                "index shape {} must fit src shape {} and, except along dim {d}, self shape {}",
                index.shape(),
                src.shape(),
                this.shape()
            ),
        ));
    }
    let ids = index.to_vec::<i64>()?;
    let n = this.dims()[d] as i64;
    let strides = this.shape().contiguous_strides();
    let mut coord = vec![0usize; r];
    let mut dest = Vec::with_capacity(ids.len());
    for &v in &ids {
        let j = if v < 0 { v + n } else { v };
        if j < 0 || j >= n {
            return Err(Error::index(
                op,
                format!(
                    "index {v} is out of bounds for dim {d} of size {n} (shape {})",
                    this.shape()
                ),
            ));
        }
        let mut at = 0;
        for k in 0..r {
            at += if k == d { j as usize } else { coord[k] } * strides[k];
        }
        dest.push(at);
        // next row-major coordinate of index
        for k in (0..r).rev() {
            coord[k] += 1;
            if coord[k] < index.dims()[k] {
                break;
            }
            coord[k] = 0;
        }
    }
    let mut used = src.clone();
    for (k, &len) in index.dims().iter().enumerate() {
        used = used.narrow(k as isize, 0, len)?;
    }
    let src = used.contiguous()?.reshape([ids.len()])?;
    Ok(Plan { dest, src })
}

/// The reductions `scatter_reduce` knows, by their PyTorch names.
#[derive(Clone, Copy, PartialEq)]
enum Reduce {
    Sum,
    Prod,
    Mean,
    Amax,
    Amin,
}

impl Tensor {
    /// `torch.scatter(self, dim, index, src)`: a copy of `self` with
    /// `out[index[i][j]][j] = src[i][j]` (for `dim = 0`; likewise for any dim). `index` is int64
    /// with the rank of `self`, no larger than `src` and (off `dim`) than `self`. When an
    /// index repeats, the last source element written wins.
    #[track_caller]
    pub fn scatter(&self, dim: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        let d = normalize_dim("scatter", dim, self.rank())?;
        let plan = plan("scatter", self, d, index, src)?;
        if plan.dest.is_empty() {
            return self.deep_clone();
        }
        let mut pos = vec![-1i64; self.numel()];
        for (p, &t) in plan.dest.iter().enumerate() {
            pos[t] = p as i64;
        }
        let mask: Vec<bool> = pos.iter().map(|&p| p >= 0).collect();
        let mask = Tensor::from_vec(mask, self.shape())?.to_device(self.device())?;
        let pick = index_on(self, pos.into_iter().map(|p| p.max(0)).collect())?;
        let picked = plan.src.index_select(0, &pick)?.reshape(self.shape())?;
        Tensor::where_(&mask, &picked, self)
    }

    /// `torch.scatter_reduce(self, dim, index, src, reduce, include_self)`: a copy of `self`
    /// where each position that `index` names becomes the reduction of the source elements
    /// sent to it, together with its own value when `include_self`. `reduce` is one of
    /// `"sum"`, `"prod"`, `"mean"`, `"amax"`, `"amin"`; positions nothing is sent to keep their
    /// value. Integer means round down, as in torch. Differentiable for every reduction (see
    /// the module notes for the rules). Sum and mean take one `scatter_add`; prod, amax and
    /// amin gather a row as wide as the most repeated destination for every written position,
    /// so a very uneven index can be refused (an `Err`, checked before allocating).
    #[track_caller]
    pub fn scatter_reduce(
        &self,
        dim: isize,
        index: &Tensor,
        src: &Tensor,
        reduce: &str,
        include_self: bool,
    ) -> Result<Tensor> {
        let op = "scatter_reduce";
        let red = match reduce {
            "sum" => Reduce::Sum,
            "prod" => Reduce::Prod,
            "mean" => Reduce::Mean,
            "amax" => Reduce::Amax,
            "amin" => Reduce::Amin,
            _ => {
                return Err(Error::invalid(
                    op,
                    format!("reduce must be sum, prod, mean, amax or amin, got {reduce:?}"),
                ))
            }
        };
        let d = normalize_dim(op, dim, self.rank())?;
        let plan = plan(op, self, d, index, src)?;
        if plan.dest.is_empty() {
            return self.deep_clone();
        }
        // contributors of each written position, in order: itself first when included
        let numel = self.numel();
        let s = plan.dest.len();
        let mut count = vec![0usize; numel];
        for &t in &plan.dest {
            count[t] += 1;
        }
        let mut row_of = vec![-1i64; numel];
        let mut starts = Vec::new();
        for (t, &c) in count.iter().enumerate() {
            if c > 0 {
                row_of[t] = starts.len() as i64;
                starts.push(t);
            }
        }
        if matches!(red, Reduce::Sum | Reduce::Mean)
            && matches!(self.dtype(), DType::F32 | DType::F64 | DType::I64)
        {
            return self.scatter_sum_or_mean(d, index, src, red, include_self, &count);
        }
        let rows = starts.len();
        let width = count.iter().max().copied().unwrap_or(0) + include_self as usize;
        check_alloc(op, &crate::Shape(vec![rows, width]), self.dtype())?;
        let mut table: Vec<Vec<i64>> = starts
            .iter()
            .map(|&t| {
                let mut v = Vec::with_capacity(width);
                if include_self {
                    // self's elements follow the sources in the joined values below
                    v.push((s + t) as i64);
                }
                v
            })
            .collect();
        for (p, &t) in plan.dest.iter().enumerate() {
            table[row_of[t] as usize].push(p as i64);
        }
        let mut ids = Vec::with_capacity(rows * width);
        let mut valid = Vec::with_capacity(rows * width);
        let mut counts = Vec::with_capacity(rows);
        for row in &table {
            counts.push(row.len() as f64);
            for k in 0..width {
                // pad with the row's first contributor: harmless for amax / amin, and masked
                // out of the others
                ids.push(*row.get(k).unwrap_or(&row[0]));
                valid.push(k < row.len());
            }
        }
        // prod / amax need a dtype the reductions support; the result is cast back
        let work = match self.dtype() {
            DType::F16 | DType::BF16 => DType::F32,
            DType::U8 | DType::Bool => DType::I64,
            t => t,
        };
        let flat = self.reshape([numel])?;
        let values = Tensor::cat(&[plan.src.clone(), flat], 0)?.to_dtype(work)?;
        let g = values
            .index_select(0, &index_on(self, ids)?)?
            .reshape([rows, width])?;
        let valid = Tensor::from_vec(valid, [rows, width])?.to_device(self.device())?;
        let zero = Tensor::zeros_on((), work, self.device())?;
        let r = match red {
            Reduce::Sum => Tensor::where_(&valid, &g, &zero)?.sum(1, false)?,
            Reduce::Prod => {
                let one = Tensor::ones_on((), work, self.device())?;
                Tensor::where_(&valid, &g, &one)?.prod(1, false)?
            }
            Reduce::Mean => {
                let sum = Tensor::where_(&valid, &g, &zero)?.sum(1, false)?;
                if work.is_float() {
                    // through the host in f64: a GPU holds no f64
                    let n = Tensor::from_vec(counts, [rows])?.to_dtype(work)?;
                    sum.div(&n.to_device(self.device())?)?
                } else {
                    floor_div_host(&sum, &counts)?
                }
            }
            Reduce::Amax | Reduce::Amin => {
                let (m, _) = if red == Reduce::Amax {
                    g.detach().max(1, true)?
                } else {
                    g.detach().min(1, true)?
                };
                if work.is_float() {
                    // the mean of the contributors equal to the extreme: its value, with the
                    // gradient split evenly between them (NaN stays NaN: no element equals it)
                    let ties = Tensor::where_(&valid, &g.eq(&m)?, &valid)?;
                    let n = ties.to_dtype(work)?.sum(1, false)?;
                    Tensor::where_(&ties, &g, &zero)?.sum(1, false)?.div(&n)?
                } else {
                    m.squeeze(1)?
                }
            }
        };
        let r = r.to_dtype(self.dtype())?;
        let written: Vec<bool> = row_of.iter().map(|&k| k >= 0).collect();
        let written = Tensor::from_vec(written, self.shape())?.to_device(self.device())?;
        let back = index_on(self, row_of.into_iter().map(|k| k.max(0)).collect())?;
        let placed = r.index_select(0, &back)?.reshape(self.shape())?;
        Tensor::where_(&written, &placed, self)
    }
    /// `scatter_reduce` for sum and mean where `scatter_add` takes the dtype: one pass, linear
    /// in the sizes however the index repeats (`count[t]`: how many sources go to `t`).
    #[track_caller]
    fn scatter_sum_or_mean(
        &self,
        d: usize,
        index: &Tensor,
        src: &Tensor,
        red: Reduce,
        include_self: bool,
        count: &[usize],
    ) -> Result<Tensor> {
        let dev = self.device();
        let written: Vec<bool> = count.iter().map(|&c| c > 0).collect();
        let written = Tensor::from_vec(written, self.shape())?.to_device(dev)?;
        let mut acc = Tensor::zeros_on(self.shape(), self.dtype(), dev)?
            .scatter_add(d as isize, index, src)?;
        if include_self {
            acc = acc.add(self)?;
        }
        if red == Reduce::Mean {
            // unwritten positions divide by 1 (they keep self's value below anyway)
            let n: Vec<f64> = count
                .iter()
                .map(|&c| (c + include_self as usize).max(1) as f64)
                .collect();
            acc = if self.dtype().is_float() {
                // through the host in f64: a GPU holds no f64
                let n = Tensor::from_vec(n, self.shape())?.to_dtype(self.dtype())?;
                acc.div(&n.to_device(dev)?)?
            } else {
                floor_div_host(&acc, &n)?
            };
        }
        Tensor::where_(&written, &acc, self)
    }
}

/// `floor(t / n)` elementwise for an integer tensor `t` (on any device) and divisors `n >= 1`
/// given on the host: the integer mean, which rounds down as torch's does. Computed on the
/// host, since integer division has no tensor op (and a GPU holds no f64 to go through).
#[track_caller]
fn floor_div_host(t: &Tensor, n: &[f64]) -> Result<Tensor> {
    let v = t.to_dtype(DType::I64)?.to_vec::<i64>()?;
    let q: Vec<i64> = v
        .iter()
        .zip(n)
        .map(|(&a, &n)| a.div_euclid((n as i64).max(1)))
        .collect();
    Tensor::from_vec(q, t.dims())?
        .to_dtype(t.dtype())?
        .to_device(t.device())
}
