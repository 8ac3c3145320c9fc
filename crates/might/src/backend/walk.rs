//! The host-side walk over a layout that backends use to build index tables.

use crate::Layout;

/// Storage offsets of the elements `l` selects, in logical (row-major) order.
pub(crate) fn offsets(l: &Layout) -> Vec<usize> {
    let (dims, st, n) = (l.dims(), l.strides(), l.numel());
    let (mut out, mut idx, mut off) = (Vec::with_capacity(n), vec![0; dims.len()], l.offset());
    for _ in 0..n {
        out.push(off);
        for d in (0..dims.len()).rev() {
            idx[d] += 1;
            off += st[d];
            if idx[d] < dims[d] {
                break;
            }
            off -= st[d] * dims[d];
            idx[d] = 0;
        }
    }
    out
}

/// `l` split into its kept dims (with the offset) and the dims `mask` marks for reduction
/// (offset 0): a reduced element sits at `offset(kept, o) + offset(reduced, j)`.
pub(crate) fn split(l: &Layout, mask: &[bool]) -> (Layout, Layout) {
    let (mut kd, mut ks, mut rd, mut rs) = (vec![], vec![], vec![], vec![]);
    for (i, (&d, &s)) in l.dims().iter().zip(l.strides()).enumerate() {
        if mask[i] {
            rd.push(d);
            rs.push(s);
        } else {
            kd.push(d);
            ks.push(s);
        }
    }
    (
        Layout::new(kd.into(), ks, l.offset()),
        Layout::new(rd.into(), rs, 0),
    )
}
