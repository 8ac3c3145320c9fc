//! Transposed convolution (`torch.nn.functional.conv_transpose1d/2d`), the gradient of a
//! convolution with respect to its input, run forward. It is built from `conv2d`: the input is
//! spread out with `stride - 1` zeros between neighbours (`index_add` into zeros), padded by the
//! dilated kernel's reach less `padding` (plus `output_padding` at the end; a negative amount
//! crops), and convolved at stride 1 with the kernel flipped in space and its in/out channel
//! axes swapped per group. So it reuses the conv kernels of every backend, and its backward is
//! the primitives' own.

use crate::{Error, Result, Tensor};

/// Spread `x` along `axis` with `stride - 1` zeros between neighbours.
fn dilate(x: &Tensor, axis: usize, stride: usize) -> Result<Tensor> {
    let len = x.dims()[axis];
    if stride == 1 || len <= 1 {
        return Ok(x.clone());
    }
    let mut dims = x.dims().to_vec();
    dims[axis] = (len - 1) * stride + 1;
    let idx: Vec<i64> = (0..len).map(|i| (i * stride) as i64).collect();
    let idx = Tensor::from_vec(idx, [len])?.to_device(x.device())?;
    Tensor::zeros_on(dims, x.dtype(), x.device())?.index_add(axis as isize, &idx, x)
}

impl Tensor {
    /// `torch.nn.functional.conv_transpose2d`: input `[N, C_in, H, W]` (or `[C_in, H, W]`),
    /// weight `[C_in, C_out / groups, kh, kw]` (PyTorch's layout), optional bias `[C_out]`.
    /// Output `H_out = (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding +
    /// 1`; `output_padding` (less than stride or dilation) picks among the input sizes a
    /// strided convolution maps to the same output size. Differentiable in all three inputs.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn conv_transpose2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: [usize; 2],
        padding: [usize; 2],
        output_padding: [usize; 2],
        groups: usize,
        dilation: [usize; 2],
    ) -> Result<Tensor> {
        let cfg = [stride, padding, output_padding, dilation];
        self.conv_transpose_nd("conv_transpose2d", weight, bias, cfg, groups, 2)
    }

    /// `torch.nn.functional.conv_transpose1d`: input `[N, C_in, L]` (or `[C_in, L]`), weight
    /// `[C_in, C_out / groups, k]`; runs as [`conv_transpose2d`](Tensor::conv_transpose2d)
    /// with a unit height.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn conv_transpose1d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: usize,
        padding: usize,
        output_padding: usize,
        groups: usize,
        dilation: usize,
    ) -> Result<Tensor> {
        let cfg = [
            [1, stride],
            [0, padding],
            [0, output_padding],
            [1, dilation],
        ];
        self.conv_transpose_nd("conv_transpose1d", weight, bias, cfg, groups, 1)
    }

    #[track_caller]
    fn conv_transpose_nd(
        &self,
        op: &str,
        weight: &Tensor,
        bias: Option<&Tensor>,
        [stride, padding, out_pad, dilation]: [[usize; 2]; 4],
        groups: usize,
        k: usize,
    ) -> Result<Tensor> {
        let batched = self.rank() == k + 2;
        if !batched && self.rank() != k + 1 {
            return Err(Error::shape(
                op,
                format!(
                    "input must be {}-D (batched) or {}-D, got {}",
                    k + 2,
                    k + 1,
                    self.shape()
                ),
            ));
        }
        if weight.rank() != k + 2 {
            return Err(Error::shape(
                op,
                format!(
                    "weight must be {}-D [C_in, C_out / groups, kernel...], got {}",
                    k + 2,
                    weight.shape()
                ),
            ));
        }
        if !self.dtype().is_float() || weight.dtype() != self.dtype() {
            return Err(Error::dtype(
                op,
                format!(
                    "input and weight must share a float dtype, got {} and {}",
                    self.dtype(),
                    weight.dtype()
                ),
            ));
        }
        // as 4-D: [N, C, H, W] and [C_in, C_out/g, kh, kw]
        let mut x = if batched {
            self.clone()
        } else {
            self.unsqueeze(0)?
        };
        let mut w = weight.clone();
        if k == 1 {
            x = x.unsqueeze(2)?;
            w = w.unsqueeze(2)?;
        }
        let (c, sp) = (x.dims()[1], [x.dims()[2], x.dims()[3]]);
        let wd = w.dims().to_vec();
        let kernel = [wd[2], wd[3]];
        if groups == 0 || wd[0] != c || !c.is_multiple_of(groups) {
            return Err(Error::shape(
                op,
                format!(
                    "weight {} needs input channels {} divisible by groups {groups}; input {}",
                    weight.shape(),
                    wd[0],
                    self.shape()
                ),
            ));
        }
        let cout = wd[1] * groups;
        if let Some(b) = bias {
            if b.dims() != [cout] || b.dtype() != self.dtype() {
                return Err(Error::shape(
                    op,
                    format!(
                        "bias must be [{cout}] {}, got {} {}",
                        self.dtype(),
                        b.shape(),
                        b.dtype()
                    ),
                ));
            }
        }
        let settings = format!(
            "stride {stride:?}, padding {padding:?}, output_padding {out_pad:?}, dilation \
             {dilation:?}"
        );
        let bad_out = (0..2).any(|i| out_pad[i] >= stride[i].max(dilation[i]));
        if stride.contains(&0) || dilation.contains(&0) || kernel.contains(&0) || bad_out {
            return Err(Error::invalid(
                op,
                format!(
                    "{settings} with kernel {kernel:?}: stride, dilation and kernel must be \
                     positive, output_padding smaller than stride or dilation"
                ),
            ));
        }
        let mut out_sp = [0usize; 2];
        for i in 0..2 {
            let reach = (dilation[i] * (kernel[i] - 1)) as i128;
            let o = (sp[i] as i128 - 1) * stride[i] as i128 - 2 * padding[i] as i128
                + reach
                + out_pad[i] as i128
                + 1;
            if sp[i] == 0 || o <= 0 {
                return Err(Error::shape(
                    op,
                    format!(
                        "input {} with kernel {kernel:?} and {settings} gives output size {o}",
                        self.shape()
                    ),
                ));
            }
            out_sp[i] = o as usize;
        }
        let out_shape = vec![x.dims()[0], cout, out_sp[0], out_sp[1]];
        crate::limits::check_alloc(op, &out_shape.into(), self.dtype())?;

        // 1. zeros between neighbours, 2. pad by the reach less padding
        let mut pads = Vec::with_capacity(4);
        for i in [1, 0] {
            x = dilate(&x, 2 + i, stride[i])?;
            let reach = (dilation[i] * (kernel[i] - 1)) as i64;
            let p = padding[i] as i64;
            pads.extend([reach - p, reach - p + out_pad[i] as i64]);
        }
        let x = x.pad(&pads, "constant", 0.0)?;
        // 3. weight [C_in, C_out/g, kh, kw] -> [C_out, C_in/g, kh, kw], flipped in space
        let (cg, og) = (c / groups, wd[1]);
        let w = w
            .reshape(vec![groups, cg, og, kernel[0], kernel[1]])?
            .transpose(1, 2)?
            .reshape(vec![cout, cg, kernel[0], kernel[1]])?;
        let rev = |n: usize| -> Result<Tensor> {
            Tensor::from_vec((0..n as i64).rev().collect::<Vec<_>>(), [n])?.to_device(w.device())
        };
        let w = w.index_select(2, &rev(kernel[0])?)?;
        let w = w.index_select(3, &rev(kernel[1])?)?;
        let mut y = x.conv2d(&w, bias, [1, 1], [0, 0], dilation, groups)?;
        if k == 1 {
            y = y.squeeze(2)?;
        }
        if !batched {
            y = y.squeeze(0)?;
        }
        Ok(y)
    }
}
