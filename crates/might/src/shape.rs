//! Shapes, dimension arguments and NumPy broadcasting rules.

use crate::{Error, Result};
use std::cell::Cell;
use std::fmt;

/// The size of each dimension of a tensor. `[]` is a scalar.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape(pub(crate) Vec<usize>);

impl Shape {
    pub fn dims(&self) -> &[usize] {
        &self.0
    }
    pub fn rank(&self) -> usize {
        self.0.len()
    }
    /// Number of elements (1 for a scalar).
    pub fn numel(&self) -> usize {
        // (an empty shape may hold dims whose product overflows: it still has no elements)
        self.checked_numel().unwrap_or(usize::MAX)
    }
    /// Strides of a C-contiguous (row-major) tensor of this shape.
    pub fn contiguous_strides(&self) -> Vec<usize> {
        let mut strides = vec![0; self.0.len()];
        let mut acc = 1;
        for (s, &d) in strides.iter_mut().zip(&self.0).rev() {
            *s = acc;
            acc = d.max(1).saturating_mul(acc); // (saturates only for empty tensors)
        }
        strides
    }
    /// Number of elements, or an error if it overflows `usize` (hostile files, silly shapes).
    pub fn checked_numel(&self) -> Option<usize> {
        self.0.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}
impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl From<Vec<usize>> for Shape {
    fn from(v: Vec<usize>) -> Self {
        Shape(v)
    }
}
impl From<&Vec<usize>> for Shape {
    fn from(v: &Vec<usize>) -> Self {
        Shape(v.clone())
    }
}
impl From<&[usize]> for Shape {
    fn from(v: &[usize]) -> Self {
        Shape(v.to_vec())
    }
}
impl<const N: usize> From<[usize; N]> for Shape {
    fn from(v: [usize; N]) -> Self {
        Shape(v.to_vec())
    }
}
impl<const N: usize> From<&[usize; N]> for Shape {
    fn from(v: &[usize; N]) -> Self {
        Shape(v.to_vec())
    }
}
impl From<()> for Shape {
    fn from(_: ()) -> Self {
        Shape(vec![])
    }
}
impl From<usize> for Shape {
    fn from(v: usize) -> Self {
        Shape(vec![v])
    }
}
impl From<&Shape> for Shape {
    fn from(s: &Shape) -> Self {
        s.clone()
    }
}

/// Turn a possibly negative dim (`-1` = last) into an index, or a clear error.
#[track_caller]
pub fn normalize_dim(op: &str, dim: isize, rank: usize) -> Result<usize> {
    let r = rank as isize;
    let d = if dim < 0 { dim + r } else { dim };
    if d < 0 || d >= r.max(0) {
        return Err(Error::index(
            op,
            format!("dim {dim} out of range for a tensor of rank {rank}"),
        ));
    }
    Ok(d as usize)
}

/// Like `normalize_dim` but for insertion points (`unsqueeze`): accepts `rank` itself.
#[track_caller]
pub fn normalize_insert_dim(op: &str, dim: isize, rank: usize) -> Result<usize> {
    normalize_dim(op, dim, rank + 1)
}

thread_local! {
    static STRICT_BROADCAST: Cell<bool> = const { Cell::new(false) };
}

/// Opt-in strict broadcasting: while the guard lives (on this thread), a broadcast that expands
/// *both* operands (`[3,1] + [1,3] -> [3,3]`) is an error. That pattern is the classic silent bug
/// (e.g. `pred[B,1] - target[B]` giving `[B,B]`).
pub struct StrictBroadcastGuard {
    prev: bool,
}

pub fn strict_broadcast() -> StrictBroadcastGuard {
    let prev = STRICT_BROADCAST.with(|c| c.replace(true));
    StrictBroadcastGuard { prev }
}

impl Drop for StrictBroadcastGuard {
    fn drop(&mut self) {
        STRICT_BROADCAST.with(|c| c.set(self.prev));
    }
}

/// NumPy broadcasting of two shapes.
#[track_caller]
pub fn broadcast_shapes(op: &str, a: &Shape, b: &Shape) -> Result<Shape> {
    let (a, b) = (a.dims(), b.dims());
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    let (mut a_expands, mut b_expands) = (false, false);
    for i in 0..rank {
        let da = if i + a.len() >= rank {
            a[i + a.len() - rank]
        } else {
            1
        };
        let db = if i + b.len() >= rank {
            b[i + b.len() - rank]
        } else {
            1
        };
        out[i] = if da == db {
            da
        } else if da == 1 {
            a_expands = true;
            db
        } else if db == 1 {
            b_expands = true;
            da
        } else {
            return Err(Error::shape(
                op,
                format!(
                    "shapes cannot be broadcast: lhs {a:?} vs rhs {b:?} (dim {i}: {da} vs {db})"
                ),
            ));
        };
    }
    if a_expands && b_expands && STRICT_BROADCAST.with(|c| c.get()) {
        return Err(Error::shape(
            op,
            format!(
                "strict broadcasting: lhs {a:?} and rhs {b:?} would both be expanded to {out:?}; \
                 if that is intended, call `broadcast_to`/`expand` on one operand explicitly"
            ),
        ));
    }
    Ok(Shape(out))
}
