//! Pooling beyond the core's `max_pool2d` / `avg_pool2d` / `adaptive_avg_pool2d`: dilation and
//! `ceil_mode` for max pooling, `ceil_mode` and `count_include_pad = false` for average pooling,
//! adaptive max pooling, and the 1-D forms (`torch.nn.functional` names and semantics).
//!
//! Max pooling of any window shape is one scheme: each axis gets a table of the source
//! positions its windows read, `[out, k]`; two `index_select`s gather every window into a
//! trailing dim and `max` picks the value and its offset, which a host-built table turns into
//! PyTorch's flat `iy * W + ix` index. A window position that falls in the padding (or past the
//! input in ceil mode) reads the window's first real position instead, which leaves the max
//! and PyTorch's first-maximum choice unchanged. Average pooling zero-pads and sums each window
//! with a depthwise all-ones `conv2d`, then divides by PyTorch's per-window count. Backward
//! passes are the primitives' own.

use crate::{Error, Result, Tensor};

/// Output length of a sliding window (PyTorch's `pooling_output_shape`): in ceil mode a last,
/// partial window is kept if it starts inside the input or the leading padding.
fn pooled_len(
    len: usize,
    k: usize,
    s: usize,
    p: usize,
    d: usize,
    ceil_mode: bool,
) -> Option<usize> {
    let span = (len + 2 * p).checked_sub(d * (k - 1) + 1)?;
    let mut out = if ceil_mode {
        span.div_ceil(s) + 1
    } else {
        span / s + 1
    };
    if ceil_mode && (out - 1) * s >= len + p {
        out -= 1;
    }
    Some(out)
}

/// Per-axis source table `[out][k]` of a sliding window, with out-of-range positions replaced
/// by the window's first in-range one.
fn window_table(len: usize, out: usize, k: usize, s: usize, p: usize, d: usize) -> Table {
    (0..out)
        .map(|o| {
            let pos: Vec<i64> = (0..k).map(|j| (o * s + j * d) as i64 - p as i64).collect();
            let first = pos
                .iter()
                .copied()
                .find(|&v| v >= 0 && v < len as i64)
                .unwrap_or(0);
            pos.into_iter()
                .map(|v| if v >= 0 && v < len as i64 { v } else { first } as usize)
                .collect()
        })
        .collect()
}

/// Per-axis table of adaptive windows `[floor(o*len/out), ceil((o+1)*len/out))`, each padded
/// to the longest window by repeating its last position.
fn adaptive_table(len: usize, out: usize) -> Table {
    let bounds: Vec<(usize, usize)> = (0..out)
        .map(|o| (o * len / out, ((o + 1) * len).div_ceil(out)))
        .collect();
    let k = bounds.iter().map(|(a, b)| b - a).max().unwrap_or(1);
    bounds
        .into_iter()
        .map(|(a, b)| (0..k).map(|j| (a + j).min(b - 1)).collect())
        .collect()
}

/// Source positions per output position along one axis: `table[o][j]` for window tap `j`.
type Table = Vec<Vec<usize>>;

fn check_float(op: &str, x: &Tensor) -> Result<()> {
    if x.dtype().is_float() {
        Ok(())
    } else {
        Err(Error::dtype(
            op,
            format!("input must be a float tensor, got {}", x.dtype()),
        ))
    }
}

/// `x` as `[N, C, H, W]` (adding a batch dim to a 3-D input), or an error naming `op`.
fn as_4d(op: &str, x: &Tensor) -> Result<(Tensor, bool)> {
    check_float(op, x)?;
    match x.rank() {
        4 => Ok((x.clone(), false)),
        3 => Ok((x.unsqueeze(0)?, true)),
        _ => Err(Error::shape(
            op,
            format!("input must be [N, C, H, W] or [C, H, W], got {}", x.shape()),
        )),
    }
}

/// `x` as `[N, C, 1, L]` from `[N, C, L]` or `[C, L]`.
fn as_4d_from_1d(op: &str, x: &Tensor) -> Result<(Tensor, bool)> {
    check_float(op, x)?;
    match x.rank() {
        3 => Ok((x.unsqueeze(2)?, false)),
        2 => Ok((x.unsqueeze(0)?.unsqueeze(2)?, true)),
        _ => Err(Error::shape(
            op,
            format!("input must be [N, C, L] or [C, L], got {}", x.shape()),
        )),
    }
}

fn drop_batch(t: Tensor, added: bool) -> Result<Tensor> {
    if added {
        t.squeeze(0)
    } else {
        Ok(t)
    }
}

/// Max over windows given by per-axis source tables; values and flat `iy * W + ix` indices.
fn window_max(op: &str, x: &Tensor, rows: &Table, cols: &Table) -> Result<(Tensor, Tensor)> {
    let (n, c, w) = (x.dims()[0], x.dims()[1], x.dims()[3]);
    let (oh, kh, ow, kw) = (rows.len(), rows[0].len(), cols.len(), cols[0].len());
    crate::limits::check_alloc(op, &vec![n, c, oh * kh, ow * kw].into(), x.dtype())?;
    let flat = |t: &[Vec<usize>]| -> Result<Tensor> {
        let v: Vec<i64> = t.iter().flatten().map(|&i| i as i64).collect();
        let len = v.len();
        Tensor::from_vec(v, [len])?.to_device(x.device())
    };
    let win = x
        .index_select(2, &flat(rows)?)?
        .index_select(3, &flat(cols)?)?
        .reshape(vec![n, c, oh, kh, ow, kw])?
        .permute(&[0, 1, 2, 4, 3, 5])?
        .reshape(vec![n, c, oh, ow, kh * kw])?;
    let (vals, arg) = win.max(-1, true)?;
    let mut table = Vec::with_capacity(oh * ow * kh * kw);
    for r in rows {
        for col in cols {
            for &iy in r {
                for &ix in col {
                    table.push((iy * w + ix) as i64);
                }
            }
        }
    }
    let table = Tensor::from_vec(table, [1, 1, oh, ow, kh * kw])?
        .to_device(x.device())?
        .expand([n, c, oh, ow, kh * kw])?
        .contiguous()?;
    let idx = table.gather(-1, &arg)?;
    Ok((vals.squeeze(-1)?, idx.squeeze(-1)?))
}

impl Tensor {
    /// `torch.nn.functional.max_pool2d` with every option: `dilation` spaces the window's
    /// taps, `ceil_mode` keeps a last partial window. Padding reads as `-inf` and may be at
    /// most half the kernel. Input `[N, C, H, W]` or `[C, H, W]`.
    #[track_caller]
    pub fn max_pool2d_ext(
        &self,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
    ) -> Result<Tensor> {
        Ok(self
            .max_pool2d_ext_with_indices(kernel, stride, padding, dilation, ceil_mode)?
            .0)
    }

    /// [`max_pool2d_ext`](Tensor::max_pool2d_ext) that also returns the int64 flat index
    /// `iy * W + ix` of each chosen element in its plane (PyTorch's `return_indices=True`).
    #[track_caller]
    pub fn max_pool2d_ext_with_indices(
        &self,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
    ) -> Result<(Tensor, Tensor)> {
        let op = "max_pool2d";
        let (x, added) = as_4d(op, self)?;
        let (rows, cols) = sliding_tables(op, &x, kernel, stride, padding, dilation, ceil_mode)?;
        let (v, i) = window_max(op, &x, &rows, &cols)?;
        Ok((drop_batch(v, added)?, drop_batch(i, added)?))
    }

    /// `torch.nn.functional.max_pool1d` over `[N, C, L]` (or `[C, L]`).
    #[track_caller]
    pub fn max_pool1d(
        &self,
        kernel: usize,
        stride: usize,
        padding: usize,
        dilation: usize,
        ceil_mode: bool,
    ) -> Result<Tensor> {
        Ok(self
            .max_pool1d_with_indices(kernel, stride, padding, dilation, ceil_mode)?
            .0)
    }

    /// [`max_pool1d`](Tensor::max_pool1d) with the int64 index of each chosen element.
    #[track_caller]
    pub fn max_pool1d_with_indices(
        &self,
        kernel: usize,
        stride: usize,
        padding: usize,
        dilation: usize,
        ceil_mode: bool,
    ) -> Result<(Tensor, Tensor)> {
        let op = "max_pool1d";
        let (x, added) = as_4d_from_1d(op, self)?;
        let (rows, cols) = sliding_tables(
            op,
            &x,
            [1, kernel],
            [1, stride],
            [0, padding],
            [1, dilation],
            ceil_mode,
        )?;
        let (v, i) = window_max(op, &x, &rows, &cols)?;
        Ok((
            drop_batch(v.squeeze(2)?, added)?,
            drop_batch(i.squeeze(2)?, added)?,
        ))
    }

    /// `torch.nn.functional.adaptive_max_pool2d(return_indices=True)`: output cell `o` covers
    /// input rows `floor(o * H / OH) .. ceil((o + 1) * H / OH)` (likewise for columns); returns
    /// the maxima and their flat `iy * W + ix` indices.
    #[track_caller]
    pub fn adaptive_max_pool2d(&self, output: [usize; 2]) -> Result<(Tensor, Tensor)> {
        let op = "adaptive_max_pool2d";
        let (x, added) = as_4d(op, self)?;
        let (h, w) = (x.dims()[2], x.dims()[3]);
        check_adaptive(op, self, &[h, w], &output)?;
        let (v, i) = window_max(
            op,
            &x,
            &adaptive_table(h, output[0]),
            &adaptive_table(w, output[1]),
        )?;
        Ok((drop_batch(v, added)?, drop_batch(i, added)?))
    }

    /// `torch.nn.functional.adaptive_max_pool1d(return_indices=True)` over `[N, C, L]` (or
    /// `[C, L]`).
    #[track_caller]
    pub fn adaptive_max_pool1d(&self, output: usize) -> Result<(Tensor, Tensor)> {
        let op = "adaptive_max_pool1d";
        let (x, added) = as_4d_from_1d(op, self)?;
        let l = x.dims()[3];
        check_adaptive(op, self, &[l], &[output])?;
        let (v, i) = window_max(op, &x, &adaptive_table(1, 1), &adaptive_table(l, output))?;
        Ok((
            drop_batch(v.squeeze(2)?, added)?,
            drop_batch(i.squeeze(2)?, added)?,
        ))
    }

    /// `torch.nn.functional.avg_pool2d` with every option: `ceil_mode` keeps a last partial
    /// window; `count_include_pad = false` divides by the number of real elements in the
    /// window; `divisor_override` divides every window by a fixed number instead. Input
    /// `[N, C, H, W]` or `[C, H, W]`.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn avg_pool2d_ext(
        &self,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        ceil_mode: bool,
        count_include_pad: bool,
        divisor_override: Option<usize>,
    ) -> Result<Tensor> {
        let op = "avg_pool2d";
        let (x, added) = as_4d(op, self)?;
        let cfg = AvgCfg {
            kernel,
            stride,
            padding,
            ceil_mode,
            count_include_pad,
            divisor_override,
        };
        drop_batch(avg_pool(op, &x, cfg)?, added)
    }

    /// `torch.nn.functional.avg_pool1d` over `[N, C, L]` (or `[C, L]`).
    #[track_caller]
    pub fn avg_pool1d(
        &self,
        kernel: usize,
        stride: usize,
        padding: usize,
        ceil_mode: bool,
        count_include_pad: bool,
    ) -> Result<Tensor> {
        let op = "avg_pool1d";
        let (x, added) = as_4d_from_1d(op, self)?;
        let cfg = AvgCfg {
            kernel: [1, kernel],
            stride: [1, stride],
            padding: [0, padding],
            ceil_mode,
            count_include_pad,
            divisor_override: None,
        };
        drop_batch(avg_pool(op, &x, cfg)?.squeeze(2)?, added)
    }
}

#[track_caller]
fn check_adaptive(op: &str, x: &Tensor, input: &[usize], output: &[usize]) -> Result<()> {
    if output.contains(&0) || input.contains(&0) {
        return Err(Error::invalid(
            op,
            format!(
                "input {} and output size {output:?} must have no empty spatial dim",
                x.shape()
            ),
        ));
    }
    Ok(())
}

/// Validate sliding-window settings (PyTorch's rules) and return the output size per axis.
#[track_caller]
fn check_window(
    op: &str,
    x: &Tensor,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    ceil_mode: bool,
) -> Result<[usize; 2]> {
    let settings =
        format!("kernel {kernel:?}, stride {stride:?}, padding {padding:?}, dilation {dilation:?}");
    if kernel.contains(&0) || stride.contains(&0) || dilation.contains(&0) {
        return Err(Error::invalid(
            op,
            format!("{settings}: kernel, stride and dilation must be positive"),
        ));
    }
    if (0..2).any(|i| padding[i] > kernel[i] / 2) {
        return Err(Error::invalid(
            op,
            format!("{settings}: padding must be at most half the kernel"),
        ));
    }
    let mut out = [0; 2];
    for i in 0..2 {
        let len = x.dims()[2 + i];
        out[i] = pooled_len(
            len,
            kernel[i],
            stride[i],
            padding[i],
            dilation[i],
            ceil_mode,
        )
        .filter(|&o| o > 0 && len > 0)
        .ok_or_else(|| {
            Error::shape(
                op,
                format!(
                    "input {} is too small for {settings} (ceil_mode {ceil_mode})",
                    x.shape()
                ),
            )
        })?;
    }
    Ok(out)
}

#[track_caller]
fn sliding_tables(
    op: &str,
    x: &Tensor,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    ceil_mode: bool,
) -> Result<(Table, Table)> {
    let out = check_window(op, x, kernel, stride, padding, dilation, ceil_mode)?;
    let t = |i: usize| {
        window_table(
            x.dims()[2 + i],
            out[i],
            kernel[i],
            stride[i],
            padding[i],
            dilation[i],
        )
    };
    Ok((t(0), t(1)))
}

#[derive(Clone, Copy)]
struct AvgCfg {
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<usize>,
}

/// Window sums by a depthwise all-ones conv over the zero-padded input (extended at the end
/// for ceil mode's partial windows), divided by PyTorch's per-window divisor.
#[track_caller]
fn avg_pool(op: &str, x: &Tensor, c: AvgCfg) -> Result<Tensor> {
    if c.divisor_override == Some(0) {
        return Err(Error::invalid(op, "divisor_override must be positive"));
    }
    let out = check_window(op, x, c.kernel, c.stride, c.padding, [1, 1], c.ceil_mode)?;
    let d = x.dims().to_vec();
    let (n, ch, h, w) = (d[0], d[1], d[2], d[3]);
    crate::limits::check_alloc(op, &vec![n, ch, out[0], out[1]].into(), x.dtype())?;
    // the windows' reach: leading padding, then up to the last window's end (which crops
    // unread trailing rows, or extends past the padding in ceil mode)
    let extra = |i: usize, len: usize| {
        let need = (out[i] - 1) * c.stride[i] + c.kernel[i];
        let p = c.padding[i] as i64;
        [p, need as i64 - len as i64 - p]
    };
    let [wl, wr] = extra(1, w);
    let [ht, hb] = extra(0, h);
    let xp = x
        .reshape(vec![n * ch, 1, h, w])?
        .pad(&[wl, wr, ht, hb], "constant", 0.0)?;
    let ones = Tensor::ones_on([1, 1, c.kernel[0], c.kernel[1]], x.dtype(), x.device())?;
    let sums = xp.conv2d(&ones, None, c.stride, [0, 0], [1, 1], 1)?;
    // PyTorch's divisor: the window clipped to the padded input, or to the input itself
    let mut div = Vec::with_capacity(out[0] * out[1]);
    let span = |o: usize, i: usize, len: usize| {
        let start = (o * c.stride[i]) as i64 - c.padding[i] as i64;
        let end = (start + c.kernel[i] as i64).min((len + c.padding[i]) as i64);
        let padded = end - start;
        let real = end.min(len as i64) - start.max(0);
        (padded, real)
    };
    for oy in 0..out[0] {
        let (py, ry) = span(oy, 0, h);
        for ox in 0..out[1] {
            let (px, rx) = span(ox, 1, w);
            div.push(match c.divisor_override {
                Some(v) => v as f64,
                None if c.count_include_pad => (py * px) as f64,
                None => (ry * rx) as f64,
            });
        }
    }
    let div = Tensor::from_vec(div, [out[0], out[1]])?
        .to_dtype(x.dtype())?
        .to_device(x.device())?;
    sums.div(&div)?.reshape(vec![n, ch, out[0], out[1]])
}
