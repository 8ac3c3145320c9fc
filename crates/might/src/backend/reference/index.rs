//! Indexing kernels of the reference backend: index_select / index_add along the middle dim
//! of `[outer, n, inner]`, and gather / scatter_add along one dim (indices checked by the op).

use super::elementwise::{mismatch, unsupported};
use super::{offsets, round, RefStorage as S};
use crate::{DType, Layout, Result};

/// The storage offsets of the elements `index_dims` addresses through `strides` with the
/// gathered dim's stride zeroed: what `ids[i] * strides[dim]` is added to.
fn bases(index_dims: &[usize], strides: &[usize], dim: usize, offset: usize) -> Vec<usize> {
    let mut st = strides.to_vec();
    st[dim] = 0;
    offsets(&Layout::new(index_dims.to_vec().into(), st, offset))
}

/// The dtypes that can be added into in place (f32, f64, int64).
fn addable(op: &str, s: &S) -> Result<()> {
    match s.dtype() {
        DType::F32 | DType::F64 | DType::I64 => Ok(()),
        _ => Err(unsupported(op, s)),
    }
}

/// `dst[i] += src[j]` (same dtype, f32/f64 rounded, int64 wrapping).
fn add_at(dst: &mut S, i: usize, src: &S, j: usize) {
    let dt = dst.dtype();
    let v = round(dt, dst.get(i) + src.get(j));
    dst.set(i, v, dst.get_i(i).wrapping_add(src.get_i(j)));
}

pub(super) fn index_select(s: &S, l: &Layout, ids: &[usize], [outer, n, inner]: [usize; 3]) -> S {
    let mut offs = Vec::with_capacity(outer * ids.len() * inner);
    for o in 0..outer {
        for &i in ids {
            let st = l.offset() + (o * n + i) * inner;
            offs.extend(st..st + inner);
        }
    }
    s.select(&offs)
}

pub(super) fn index_add(
    dst: &mut S,
    ids: &[usize],
    src: &S,
    sl: &Layout,
    [outer, n, inner]: [usize; 3],
) -> Result<()> {
    addable("index_add", dst)?;
    if src.dtype() != dst.dtype() {
        return Err(mismatch("index_add", dst, src));
    }
    let so = offsets(sl);
    for o in 0..outer {
        for (j, &i) in ids.iter().enumerate() {
            for k in 0..inner {
                add_at(
                    dst,
                    (o * n + i) * inner + k,
                    src,
                    so[(o * ids.len() + j) * inner + k],
                );
            }
        }
    }
    Ok(())
}

pub(super) fn gather(s: &S, l: &Layout, ids: &[usize], index_dims: &[usize], dim: usize) -> S {
    let st = l.strides()[dim];
    let b = bases(index_dims, l.strides(), dim, l.offset());
    let offs: Vec<usize> = b.iter().zip(ids).map(|(&o, &i)| o + i * st).collect();
    s.select(&offs)
}

pub(super) fn scatter_add(
    dst: &mut S,
    l: &Layout,
    ids: &[usize],
    index_dims: &[usize],
    src: &S,
    sl: &Layout,
    dim: usize,
) -> Result<()> {
    addable("scatter_add", dst)?;
    if src.dtype() != dst.dtype() {
        return Err(mismatch("scatter_add", dst, src));
    }
    let st = l.strides()[dim];
    let b = bases(index_dims, l.strides(), dim, l.offset());
    let so = offsets(&Layout::new(
        index_dims.to_vec().into(),
        sl.strides().to_vec(),
        sl.offset(),
    ));
    for ((&o, &i), &j) in b.iter().zip(ids).zip(&so) {
        add_at(dst, o + i * st, src, j);
    }
    Ok(())
}
