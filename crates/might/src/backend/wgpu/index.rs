//! Indexing on the GPU: index_select / gather read through uploaded indices; index_add /
//! scatter_add give each destination element one thread that sums its sources in order (the
//! host groups the sources by destination), so the sums are deterministic and need no atomics.

use super::{wgsl, Meta, WgpuStorage as S, FIRST_SLOT};
use crate::backend::walk::offsets;
use crate::{DType, Error, Layout, Result};

/// `ids` uploaded as 32-bit words (the op checked them against the indexed dim).
fn upload(like: &S, op: &str, ids: impl Iterator<Item = usize>) -> Result<S> {
    let w: Vec<u32> = ids
        .map(|i| u32::try_from(i).map_err(|_| Error::invalid(op, "index past 2^32 on the GPU")))
        .collect::<Result<_>>()?;
    // kernels read the table as u32 words; tagged u8 (a 32-bit word on the GPU) so that no
    // host shadow is kept, as for an int64 tensor
    S::from_words(like.ordinal, op, DType::U8, w)
}

/// Run `body` (after the entry) with `x` (read), `ids` (read, u32) and `out` (read_write).
fn launch(
    op: &str,
    key: &str,
    body: &str,
    (x, ids, out): (&S, &S, &S),
    p: &Meta,
    n: usize,
) -> Result<()> {
    let (tx, to) = (wgsl::ty(x.dtype), wgsl::ty(out.dtype));
    let src = || {
        format!(
            "{}@group(0) @binding(1) var<storage, read> x: array<{tx}>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<{to}>;
{}{body}}}
",
            wgsl::PRELUDE,
            super::ENTRY
        )
    };
    x.ctx().launch(
        op,
        &format!("{key}|{tx}|{to}"),
        src,
        p.words(),
        &[x.raw(), ids.raw(), out.raw()],
        super::groups(n),
    )
}

/// Slices along the middle dim of a contiguous `[outer, n, inner]` view picked by `ids`.
pub(super) fn index_select(
    s: &S,
    l: &Layout,
    ids: &[usize],
    [outer, n, inner]: [usize; 3],
) -> Result<S> {
    let total = outer * ids.len() * inner;
    let out = s.new_like("index_select", s.dtype, total)?;
    if total == 0 {
        return Ok(out);
    }
    let idb = upload(s, "index_select", ids.iter().copied())?;
    let mut p = Meta::new(total, FIRST_SLOT + 4);
    p.set(2, n)
        .set(3, inner)
        .set(4, ids.len())
        .set(5, l.offset());
    let body = "
    let k = i % slot(3u);
    let j = (i / slot(3u)) % slot(4u);
    let o = i / (slot(3u) * slot(4u));
    out[i] = x[slot(5u) + (o * slot(2u) + ids[j]) * slot(3u) + k];
";
    launch(
        "index_select",
        "index_select",
        body,
        (s, &idb, &out),
        &p,
        total,
    )?;
    Ok(out)
}

/// `out[..i..] = s[..ids[..i..]..]` along `dim`.
pub(super) fn gather(
    s: &S,
    l: &Layout,
    ids: &[usize],
    index_dims: &[usize],
    dim: usize,
) -> Result<S> {
    let total: usize = index_dims.iter().product();
    let out = s.new_like("gather", s.dtype, total)?;
    if total == 0 {
        return Ok(out);
    }
    let idb = upload(s, "gather", ids.iter().copied())?;
    let mut st = l.strides().to_vec();
    let step = st[dim];
    st[dim] = 0;
    let mut p = Meta::new(total, FIRST_SLOT + 2);
    p.layout(2, &Layout::new(index_dims.to_vec().into(), st, l.offset()))
        .set(3, step);
    let body = "    out[i] = x[loc(slot(2u), i) + ids[i] * slot(3u)];\n";
    launch("gather", "gather", body, (s, &idb, &out), &p, total)?;
    Ok(out)
}

/// `dst[d] += Σ src[s]` over `pairs` of (destination, source) storage offsets: the pairs are
/// grouped by destination on the host (CSR: the destinations, where each one's sources start,
/// the sources), then one thread per destination adds its sources in their original order.
fn add_pairs(op: &str, dst: &S, src: &S, pairs: Vec<(usize, usize)>) -> Result<()> {
    if !matches!(dst.dtype, DType::F32 | DType::I64) {
        return Err(Error::dtype(
            op,
            format!("not supported for dtype {} on the GPU", dst.dtype),
        ));
    }
    if src.dtype != dst.dtype {
        return Err(Error::dtype(
            op,
            format!("dtypes differ: {} vs {}", dst.dtype, src.dtype),
        ));
    }
    if pairs.is_empty() {
        return Ok(());
    }
    let mut pairs = pairs;
    pairs.sort_by_key(|&(d, _)| d); // stable: sources keep their order
    let (mut dsts, mut starts, mut srcs) = (vec![], vec![], Vec::with_capacity(pairs.len()));
    for (k, &(d, s)) in pairs.iter().enumerate() {
        if dsts.last() != Some(&d) {
            dsts.push(d);
            starts.push(k);
        }
        srcs.push(s);
    }
    starts.push(pairs.len());
    let n = dsts.len();
    // one table: [dsts.., starts.., srcs..]
    let table = dsts.iter().chain(&starts).chain(&srcs).copied();
    let tb = upload(dst, op, table)?;
    // a source in the destination's own buffer is read from a copy
    let copied;
    let src = if src.raw() == dst.raw() {
        copied = super::elementwise::copy(src, &Layout::contiguous(vec![src.len]))?;
        &copied
    } else {
        src
    };
    let mut p = Meta::new(n, FIRST_SLOT + 1);
    p.set(2, n);
    let t = wgsl::ty(dst.dtype);
    let body = format!(
        "    let d = ids[i];
    var acc: {t} = out[d];
    for (var k = ids[slot(2u) + i]; k < ids[slot(2u) + i + 1u]; k = k + 1u) {{
        acc = acc + x[ids[2u * slot(2u) + 1u + k]];
    }}
    out[d] = acc;
"
    );
    launch(op, "add_pairs", &body, (src, &tb, dst), &p, n)
}

/// `dst[o, ids[j], k] += src[o, j, k]`, `dst` a contiguous `[outer, n, inner]`.
pub(super) fn index_add(
    dst: &S,
    ids: &[usize],
    src: &S,
    sl: &Layout,
    [outer, n, inner]: [usize; 3],
) -> Result<()> {
    let so = offsets(sl);
    let mut pairs = Vec::with_capacity(so.len());
    for o in 0..outer {
        for (j, &i) in ids.iter().enumerate() {
            for k in 0..inner {
                pairs.push(((o * n + i) * inner + k, so[(o * ids.len() + j) * inner + k]));
            }
        }
    }
    add_pairs("index_add", dst, src, pairs)
}

/// `dst[..ids[..i..]..] += src[..i..]` along `dim` (`l` is dst's layout).
pub(super) fn scatter_add(
    dst: &S,
    l: &Layout,
    ids: &[usize],
    index_dims: &[usize],
    src: &S,
    sl: &Layout,
    dim: usize,
) -> Result<()> {
    let mut st = l.strides().to_vec();
    let step = st[dim];
    st[dim] = 0;
    let bases = offsets(&Layout::new(index_dims.to_vec().into(), st, l.offset()));
    let so = offsets(&Layout::new(
        index_dims.to_vec().into(),
        sl.strides().to_vec(),
        sl.offset(),
    ));
    let pairs = bases
        .iter()
        .zip(ids)
        .zip(&so)
        .map(|((&b, &i), &s)| (b + i * step, s))
        .collect();
    add_pairs("scatter_add", dst, src, pairs)
}
