//! Geometry of convolutions and pools: plain numbers every backend's kernels agree on.

/// Everything about one conv2d call, in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvGeom {
    /// Batch size, input channels, input height and width.
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    /// Output channels and kernel height and width.
    pub o: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
    /// Output height and width.
    pub oh: usize,
    pub ow: usize,
}

/// Geometry of a 2-D pooling over `planes` independent `[H, W]` planes (N * C of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolGeom {
    pub planes: usize,
    pub h: usize,
    pub w: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub oh: usize,
    pub ow: usize,
}

/// Output length of a conv/pool along one axis; `None` when the (dilated) kernel does not fit
/// in the padded input. `stride` must be > 0.
pub fn out_len(
    input: usize,
    kernel: usize,
    stride: usize,
    pad: usize,
    dil: usize,
) -> Option<usize> {
    // (sizes too large to add up: no output, like a kernel larger than the input)
    let span = dil.checked_mul(kernel.max(1) - 1)?.checked_add(1)?;
    let padded = pad.checked_mul(2)?.checked_add(input)?;
    (padded >= span).then(|| (padded - span) / stride + 1)
}

/// Where the (batch, head) pairs of one fused attention `softmax(scale · q kᵀ) v` live in their
/// buffers: `groups` groups of `per_group` pairs (the heads of one batch entry side by side),
/// pair `i`'s `[rows, cols]` matrix of operand `j` starting at element `offsets[j][i]` with row
/// stride `row_strides[j]` and contiguous rows. A backend writes the output `[groups, l,
/// per_group, dv]` (merging the heads after it is a free reshape) and the gradients
/// `[groups, rows, per_group, cols]` each, or, when `packed`, one `[groups, l, 3, per_group,
/// d]` buffer: the gradient of the packed `[.., L, 3·H·D]` projection q, k and v are thirds of.
#[derive(Clone, Debug, PartialEq)]
pub struct AttnGeom {
    /// Queries, keys, key dim and value dim of one pair.
    pub l: usize,
    pub s: usize,
    pub d: usize,
    pub dv: usize,
    /// `Some(o)`: query `i` sees keys `0..=i + o` (causal); `None`: every key.
    pub causal: Option<usize>,
    pub scale: f64,
    pub groups: usize,
    pub per_group: usize,
    pub offsets: [Vec<usize>; 3],
    pub row_strides: [usize; 3],
    pub packed: bool,
    /// Per group, the keys that may be attended (`[groups, s]`; `None`: all). A masked key's
    /// score gets the dtype's lowest value added, so a row with every key masked averages
    /// them all (as transformers does) instead of giving NaN.
    pub key_keep: Option<Vec<bool>>,
}
