//! Padding (`torch.nn.functional.pad`): constant, reflect, replicate and circular modes, with
//! negative amounts cropping. Constant padding is `narrow` + `cat` with filled blocks; the other
//! modes pick source rows with one `index_select` per padded dim, so the backward pass is the
//! primitives' own (an `index_add` that sums the gradient of every copy of a border element).

use crate::{Error, Result, Tensor};

/// The source position that padded position `p` (relative to the source's start, negative in
/// the leading pad) reads in the index-based modes, for a source of length `len`.
fn source_index(mode: &str, p: i64, len: i64) -> i64 {
    match mode {
        "reflect" => {
            if len == 1 {
                return 0;
            }
            let period = 2 * (len - 1);
            let m = p.rem_euclid(period);
            if m < len {
                m
            } else {
                period - m
            }
        }
        "replicate" => p.clamp(0, len - 1),
        // circular
        _ => p.rem_euclid(len),
    }
}

impl Tensor {
    /// `torch.nn.functional.pad(self, pads, mode, value)`. `pads` holds (before, after) pairs
    /// starting from the last dim: `[left, right]` pads the last dim, `[left, right, top,
    /// bottom]` the last two. A negative amount crops. `mode` is `"constant"` (fill with
    /// `value`), `"reflect"` (mirror without repeating the edge; each pad less than the dim),
    /// `"replicate"` (repeat the edge) or `"circular"` (wrap around; each pad at most the
    /// dim). `value` is used by constant mode only. Unlike PyTorch, the non-constant modes pad
    /// any number of trailing dims. Differentiable.
    #[track_caller]
    pub fn pad(&self, pads: &[i64], mode: &str, value: f64) -> Result<Tensor> {
        let op = "pad";
        if !matches!(mode, "constant" | "reflect" | "replicate" | "circular") {
            return Err(Error::invalid(
                op,
                format!(
                    "mode must be constant, reflect, replicate or circular, got {mode:?} \
                     (input {})",
                    self.shape()
                ),
            ));
        }
        let r = self.rank();
        if !pads.len().is_multiple_of(2) || pads.len() / 2 > r {
            return Err(Error::shape(
                op,
                format!(
                    "pads {pads:?} must be (before, after) pairs for at most {r} dims of input {}",
                    self.shape()
                ),
            ));
        }
        // validate everything before allocating anything
        let mut out_dims = self.dims().to_vec();
        for (k, pair) in pads.chunks(2).enumerate() {
            let d = r - 1 - k;
            let (b, e, len) = (pair[0], pair[1], self.dims()[d] as i64);
            let out = len.checked_add(b).and_then(|v| v.checked_add(e));
            let bad = |why: &str| {
                Err(Error::invalid(
                    op,
                    format!(
                        "{mode} pads ({b}, {e}) for dim {d} of input {}: {why}",
                        self.shape()
                    ),
                ))
            };
            let Some(out) = out.filter(|&o| o >= 0) else {
                return bad("the padded size would be negative");
            };
            if mode != "constant" && (b > 0 || e > 0) {
                let kept = len - (-b).max(0) - (-e).max(0);
                match mode {
                    "reflect" if b >= len || e >= len => {
                        return bad("reflect padding must be less than the dim's size")
                    }
                    "circular" if b > len || e > len || kept <= 0 => {
                        return bad("circular padding may wrap around at most once")
                    }
                    _ if len == 0 => return bad("cannot pad an empty dim in this mode"),
                    _ => {}
                }
            }
            out_dims[d] = out as usize;
        }
        crate::limits::check_alloc(op, &out_dims.clone().into(), self.dtype())?;
        let mut t = self.clone();
        for (k, pair) in pads.chunks(2).enumerate() {
            let d = r - 1 - k;
            let (b, e) = (pair[0], pair[1]);
            if b == 0 && e == 0 {
                continue;
            }
            t = if mode == "constant" {
                pad_constant(&t, d, b, e, value)?
            } else {
                pad_indexed(&t, d, b, e, mode)?
            };
        }
        Ok(t)
    }
}

/// Crop the negative sides with `narrow`, then `cat` filled blocks onto the positive ones.
fn pad_constant(t: &Tensor, d: usize, b: i64, e: i64, value: f64) -> Result<Tensor> {
    let len = t.dims()[d] as i64;
    let (cb, ce) = ((-b).max(0), (-e).max(0));
    let mut t = t.clone();
    if cb + ce > 0 {
        let keep = (len - cb - ce).max(0) as usize;
        let start = (cb as usize).min(len as usize);
        t = t.narrow(d as isize, start, keep)?;
    }
    let block = |m: i64| -> Result<Tensor> {
        let mut dims = t.dims().to_vec();
        dims[d] = m as usize;
        Tensor::full_on(dims, value, t.dtype(), t.device())
    };
    let mut parts = Vec::with_capacity(3);
    if b > 0 {
        parts.push(block(b)?);
    }
    parts.push(t.clone());
    if e > 0 {
        parts.push(block(e)?);
    }
    if parts.len() == 1 {
        return Ok(t);
    }
    Tensor::cat(&parts, d as isize)
}

/// Reflect and replicate read the source at `j - b` folded back into the original dim, as
/// PyTorch's kernels do even when the other side crops; circular crops first and wraps around
/// what is left (PyTorch's `_pad_circular`).
fn pad_indexed(t: &Tensor, d: usize, b: i64, e: i64, mode: &str) -> Result<Tensor> {
    let mut src = t.clone();
    let mut len = t.dims()[d] as i64;
    let (mut b, mut e) = (b, e);
    if mode == "circular" {
        let (cb, ce) = ((-b).max(0), (-e).max(0));
        if cb + ce > 0 {
            src = src.narrow(d as isize, cb as usize, (len - cb - ce) as usize)?;
            len -= cb + ce;
        }
        (b, e) = (b.max(0), e.max(0));
    }
    let out = len + b + e;
    let idx: Vec<i64> = (0..out).map(|j| source_index(mode, j - b, len)).collect();
    let idx = Tensor::from_vec(idx, [out as usize])?.to_device(src.device())?;
    src.index_select(d as isize, &idx)
}
