//! Layout: how a tensor's elements sit in its storage (shape + strides in elements + offset).
//! Every view op is a pure function on layouts, so views never copy data.

use crate::shape::{normalize_dim, Shape};
use crate::{Error, Result};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub(crate) shape: Shape,
    pub(crate) strides: Vec<usize>,
    pub(crate) offset: usize,
}

impl Layout {
    pub fn contiguous(shape: impl Into<Shape>) -> Self {
        let shape = shape.into();
        let strides = shape.contiguous_strides();
        Layout {
            shape,
            strides,
            offset: 0,
        }
    }

    pub fn new(shape: Shape, strides: Vec<usize>, offset: usize) -> Self {
        Layout {
            shape,
            strides,
            offset,
        }
    }

    pub fn shape(&self) -> &Shape {
        &self.shape
    }
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }
    pub fn offset(&self) -> usize {
        self.offset
    }
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// Row-major contiguous (size-1 dims may have any stride).
    pub fn is_contiguous(&self) -> bool {
        let mut acc = 1;
        for (&d, &s) in self.dims().iter().zip(&self.strides).rev() {
            if d != 1 && s != acc {
                return false;
            }
            acc *= d;
        }
        true
    }

    /// `Some((start, end))` when the elements form one dense run in storage order.
    pub fn contiguous_range(&self) -> Option<(usize, usize)> {
        if self.is_contiguous() {
            Some((self.offset, self.offset + self.numel()))
        } else {
            None
        }
    }

    /// One past the largest storage index this layout touches (0 when empty).
    pub fn max_extent(&self) -> usize {
        if self.numel() == 0 {
            return 0;
        }
        self.offset
            + self
                .dims()
                .iter()
                .zip(&self.strides)
                .map(|(&d, &s)| (d - 1) * s)
                .sum::<usize>()
            + 1
    }

    pub fn transpose(&self, d0: usize, d1: usize) -> Layout {
        let mut l = self.clone();
        l.shape.0.swap(d0, d1);
        l.strides.swap(d0, d1);
        l
    }

    pub fn permute(&self, dims: &[usize]) -> Layout {
        Layout {
            shape: Shape(dims.iter().map(|&d| self.dims()[d]).collect()),
            strides: dims.iter().map(|&d| self.strides[d]).collect(),
            offset: self.offset,
        }
    }

    /// Elements `start, start+step, ...` below `end` along `dim`.
    pub fn slice(&self, dim: usize, start: usize, end: usize, step: usize) -> Layout {
        let mut l = self.clone();
        let len = if end > start {
            (end - start).div_ceil(step)
        } else {
            0
        };
        l.offset += start * self.strides[dim];
        l.shape.0[dim] = len;
        // (a step past the end leaves one element, whose stride is never used)
        l.strides[dim] = if len > 1 {
            l.strides[dim] * step
        } else {
            l.strides[dim]
        };
        l
    }

    /// Drop `dim`, fixing it at `index`.
    pub fn select(&self, dim: usize, index: usize) -> Layout {
        let mut l = self.clone();
        l.offset += index * self.strides[dim];
        l.shape.0.remove(dim);
        l.strides.remove(dim);
        l
    }

    pub fn unsqueeze(&self, dim: usize) -> Layout {
        let mut l = self.clone();
        let stride = if dim < self.strides.len() {
            self.strides[dim] * self.dims()[dim]
        } else {
            1
        };
        l.shape.0.insert(dim, 1);
        l.strides.insert(dim, stride);
        l
    }

    pub fn squeeze(&self, dim: usize) -> Layout {
        let mut l = self.clone();
        if self.dims()[dim] == 1 {
            l.shape.0.remove(dim);
            l.strides.remove(dim);
        }
        l
    }

    /// View this layout with a broadcast shape (stride 0 for expanded dims).
    #[track_caller]
    pub fn broadcast_as(&self, op: &str, shape: &Shape) -> Result<Layout> {
        let src = self.dims();
        let dst = shape.dims();
        if dst.len() < src.len() {
            return Err(Error::shape(
                op,
                format!("cannot broadcast {src:?} to fewer dims {dst:?}"),
            ));
        }
        let lead = dst.len() - src.len();
        let mut strides = vec![0; dst.len()];
        for i in 0..src.len() {
            let (s, d) = (src[i], dst[lead + i]);
            strides[lead + i] = if s == d {
                self.strides[i]
            } else if s == 1 {
                0
            } else {
                return Err(Error::shape(
                    op,
                    format!("cannot broadcast {src:?} to {dst:?} (dim {i}: {s} vs {d})"),
                ));
            };
        }
        Ok(Layout {
            shape: shape.clone(),
            strides,
            offset: self.offset,
        })
    }

    /// PyTorch's `view` rule: a new shape can reuse these strides when every group of old dims
    /// merged into or split from new dims is itself contiguous. `None` = needs a copy.
    pub fn view(&self, new: &Shape) -> Option<Layout> {
        let old_d = self.dims();
        let old_s = &self.strides;
        let new_d = new.dims();
        if self.numel() == 0 || old_d.is_empty() {
            return Some(Layout {
                shape: new.clone(),
                strides: new.contiguous_strides(),
                offset: self.offset,
            });
        }
        let mut new_s = vec![0usize; new_d.len()];
        // walk old dims from the back, grouping runs that are contiguous with each other
        let mut view_d = new_d.len() as isize - 1;
        let mut chunk_base_stride = *old_s.last().unwrap();
        let mut tensor_numel = 1usize;
        let mut view_numel = 1usize;
        for tensor_d in (0..old_d.len()).rev() {
            tensor_numel *= old_d[tensor_d];
            let end_of_chunk = tensor_d == 0
                || (old_d[tensor_d - 1] != 1
                    && old_s[tensor_d - 1] != tensor_numel * chunk_base_stride);
            if end_of_chunk {
                while view_d >= 0 && (view_numel < tensor_numel || new_d[view_d as usize] == 1) {
                    new_s[view_d as usize] = view_numel * chunk_base_stride;
                    view_numel *= new_d[view_d as usize];
                    view_d -= 1;
                }
                if view_numel != tensor_numel {
                    return None;
                }
                if tensor_d > 0 {
                    chunk_base_stride = old_s[tensor_d - 1];
                    tensor_numel = 1;
                    view_numel = 1;
                }
            }
        }
        if view_d != -1 {
            return None;
        }
        Some(Layout {
            shape: new.clone(),
            strides: new_s,
            offset: self.offset,
        })
    }

    /// Normalise a dim argument against this layout's rank.
    #[track_caller]
    pub fn dim(&self, op: &str, dim: isize) -> Result<usize> {
        normalize_dim(op, dim, self.shape.rank())
    }
}
