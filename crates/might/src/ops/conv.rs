//! Convolution and pooling (`conv1d`, `conv2d`, `max_pool2d`, `avg_pool2d`,
//! `adaptive_avg_pool2d`) with PyTorch semantics: shape checks, dtype dispatch and autograd
//! recording. The loops live in the backends.
//!
//! Layouts are NCHW (batched) or CHW (unbatched, a batch of one is added and removed around the
//! batched op, as PyTorch does). Kernels read dense buffers, so strided inputs are made
//! contiguous first.

use crate::backend::geom::{out_len, ConvGeom, PoolGeom};
use crate::{DType, Error, Result, Shape, Tensor};

/// Only f32 and f64 have conv kernels; say so clearly for anything else.
#[track_caller]
fn check_conv_dtype(op: &str, t: &Tensor, what: &str) -> Result<()> {
    match t.dtype() {
        DType::F32 | DType::F64 => Ok(()),
        dt => Err(Error::dtype(
            op,
            format!(
                "{what} has dtype {dt} (shape {}); only f32 and f64 are supported",
                t.shape()
            ),
        )),
    }
}

/// Check every argument of a convolution with `sp` spatial dims (1 or 2) and return the output
/// spatial size. `x` is batched (`[N, C, ...]`) here.
#[track_caller]
#[allow(clippy::too_many_arguments)]
fn check_conv(
    op: &str,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    stride: &[usize],
    padding: &[usize],
    dilation: &[usize],
    groups: usize,
) -> Result<Vec<usize>> {
    let sp = stride.len();
    check_conv_dtype(op, x, "input")?;
    if w.rank() != sp + 2 {
        return Err(Error::shape(
            op,
            format!(
                "weight must have {} dims [out_channels, in_channels/groups, kernel..], got {}",
                sp + 2,
                w.shape()
            ),
        ));
    }
    x.check_same_dtype(op, w)?;
    if groups == 0 {
        return Err(Error::invalid(op, "groups must be positive, got 0"));
    }
    if stride.contains(&0) {
        return Err(Error::invalid(
            op,
            format!("stride must be positive, got {stride:?}"),
        ));
    }
    if dilation.contains(&0) {
        return Err(Error::invalid(
            op,
            format!("dilation must be positive, got {dilation:?}"),
        ));
    }
    let (xd, wd) = (x.dims(), w.dims());
    let (c, o) = (xd[1], wd[0]);
    if wd[1].checked_mul(groups) != Some(c) {
        return Err(Error::shape(
            op,
            format!(
                "expected input with {} channels (weight {}, groups {groups}), got input {}",
                wd[1].saturating_mul(groups),
                w.shape(),
                x.shape()
            ),
        ));
    }
    if c % groups != 0 || o % groups != 0 {
        return Err(Error::shape(
            op,
            format!(
                "groups {groups} must divide both input channels {c} and output channels {o} \
                 (input {}, weight {})",
                x.shape(),
                w.shape()
            ),
        ));
    }
    if let Some(b) = bias {
        x.check_same_dtype(op, b)?;
        if b.dims() != [o] {
            return Err(Error::shape(
                op,
                format!(
                    "bias must have shape [{o}] (weight {}), got {}",
                    w.shape(),
                    b.shape()
                ),
            ));
        }
    }
    let mut out = Vec::with_capacity(sp);
    for i in 0..sp {
        let (len, kl) = (xd[2 + i], wd[2 + i]);
        if kl == 0 {
            return Err(Error::shape(
                op,
                format!("kernel size must be positive, got weight {}", w.shape()),
            ));
        }
        match out_len(len, kl, stride[i], padding[i], dilation[i]) {
            Some(ol) => out.push(ol),
            None => {
                return Err(Error::shape(
                    op,
                    format!(
                        "kernel {:?} (dilation {dilation:?}) does not fit the padded input: \
                         input {}, padding {padding:?}",
                        &wd[2..],
                        x.shape()
                    ),
                ))
            }
        }
    }
    let full: Vec<usize> = [xd[0], o].iter().chain(&out).copied().collect();
    crate::limits::check_alloc(op, &full.into(), x.dtype())?;
    Ok(out)
}

/// Accept `[N, C, spatial..]` or unbatched `[C, spatial..]`; returns the batched tensor and
/// whether a batch dim was added.
#[track_caller]
fn batched(op: &str, x: &Tensor, sp: usize, layout: &str) -> Result<(Tensor, bool)> {
    if x.rank() == sp + 2 {
        Ok((x.clone(), false))
    } else if x.rank() == sp + 1 {
        Ok((x.unsqueeze(0)?, true))
    } else {
        Err(Error::shape(
            op,
            format!(
                "expected a {}-D (unbatched) or {}-D (batched) input {layout}, got {}",
                sp + 1,
                sp + 2,
                x.shape()
            ),
        ))
    }
}

/// Undo [`batched`].
fn unbatched(y: Tensor, added: bool) -> Result<Tensor> {
    if added {
        y.squeeze(0)
    } else {
        Ok(y)
    }
}

impl Tensor {
    /// 2-D convolution (`torch.nn.functional.conv2d`): input `[N, C, H, W]` (or `[C, H, W]`),
    /// weight `[O, C / groups, kh, kw]`, optional bias `[O]`; output `[N, O, OH, OW]` with
    /// `OH = (H + 2 * pad - dil * (kh - 1) - 1) / stride + 1`. Differentiable in input, weight
    /// and bias.
    #[track_caller]
    pub fn conv2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
    ) -> Result<Tensor> {
        self.conv2d_epilogue(
            "conv2d",
            weight,
            bias,
            [stride, padding, dilation],
            groups,
            None,
            false,
        )
    }

    /// `relu(conv2d(..))` as one op, what `torch.ao.nn.intrinsic.ConvReLU2d` computes: the
    /// ReLU is applied as the convolution writes its output, and its backward as the
    /// convolution's backward reads the gradient, so neither the pre-activation tensor nor
    /// the ReLU's two memory passes each way exist. Same values and gradients as
    /// `conv2d(..)?.relu()`. [`nn::Sequential`](crate::nn::Sequential) uses it for a `Conv2d`
    /// followed by a `ReLU`.
    #[track_caller]
    pub fn conv2d_relu(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
    ) -> Result<Tensor> {
        let p = [stride, padding, dilation];
        self.conv2d_epilogue("conv2d_relu", weight, bias, p, groups, None, true)
    }

    /// `conv2d(..) + residual`, then a ReLU when `relu`, as one op: what
    /// `torch.ao.nn.intrinsic.ConvAddReLU2d` (`ConvAdd2d`) computes, a ResNet block's last
    /// conv, its shortcut and its ReLU. `residual` has the output's shape; a backend that can
    /// (the CPU) adds it as the convolution writes each output, so neither the sum nor the
    /// ReLU is a pass of its own. Same values and gradients as `conv2d(..)?.add(residual)?`
    /// (then `.relu()`).
    #[track_caller]
    #[allow(clippy::too_many_arguments)]
    pub fn conv2d_add(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        residual: &Tensor,
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
        relu: bool,
    ) -> Result<Tensor> {
        let p = [stride, padding, dilation];
        self.conv2d_epilogue("conv2d_add", weight, bias, p, groups, Some(residual), relu)
    }

    #[track_caller]
    #[allow(clippy::too_many_arguments)]
    fn conv2d_epilogue(
        &self,
        op: &str,
        weight: &Tensor,
        bias: Option<&Tensor>,
        [stride, padding, dilation]: [[usize; 2]; 3],
        groups: usize,
        residual: Option<&Tensor>,
        relu: bool,
    ) -> Result<Tensor> {
        let (x, added) = batched(op, self, 2, "[N, C, H, W]")?;
        let [oh, ow]: [usize; 2] =
            check_conv(op, &x, weight, bias, &stride, &padding, &dilation, groups)?
                .try_into()
                .expect("two spatial dims");
        let (xd, wd) = (x.dims(), weight.dims());
        let geom = ConvGeom {
            n: xd[0],
            c: xd[1],
            h: xd[2],
            w: xd[3],
            o: wd[0],
            kh: wd[2],
            kw: wd[3],
            stride,
            padding,
            dilation,
            groups,
            oh,
            ow,
        };
        let r = residual.map(|r| if added { r.unsqueeze(0) } else { Ok(r.clone()) });
        let r = r.transpose()?;
        if let Some(r) = &r {
            let out = [geom.n, geom.o, oh, ow];
            if r.dims() != out || r.dtype() != x.dtype() {
                let (rs, dt) = (r.shape(), r.dtype());
                let msg = format!(
                    "residual {rs} ({dt}) must match the output {out:?} ({})",
                    x.dtype()
                );
                return Err(Error::shape(op, msg));
            }
        }
        let y = conv2d_batched(&x, weight, bias, r.as_ref(), geom, relu)?;
        unbatched(y, added)
    }

    /// 1-D convolution (`torch.nn.functional.conv1d`): input `[N, C, L]` (or `[C, L]`), weight
    /// `[O, C / groups, k]`, optional bias `[O]`. Runs as a conv2d with a unit height.
    #[track_caller]
    pub fn conv1d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: usize,
        padding: usize,
        dilation: usize,
        groups: usize,
    ) -> Result<Tensor> {
        let op = "conv1d";
        let (x, added) = batched(op, self, 1, "[N, C, L]")?;
        check_conv(
            op,
            &x,
            weight,
            bias,
            &[stride],
            &[padding],
            &[dilation],
            groups,
        )?;
        let y = x.unsqueeze(2)?.conv2d(
            &weight.unsqueeze(2)?,
            bias,
            [1, stride],
            [0, padding],
            [1, dilation],
            groups,
        )?;
        unbatched(y.squeeze(2)?, added)
    }

    /// 2-D max pooling (`torch.nn.functional.max_pool2d`, `ceil_mode = false`, no dilation).
    /// Padding reads as `-inf` and may be at most half the kernel.
    #[track_caller]
    pub fn max_pool2d(
        &self,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<Tensor> {
        if crate::autograd::is_grad_enabled() && self.requires_grad() {
            return Ok(self.max_pool2d_with_indices(kernel, stride, padding)?.0);
        }
        // no gradient to route: the values alone, which a backend may find faster
        let (x, geom, out_shape) = pool_setup("max_pool2d", self, kernel, stride, padding)?;
        let out = x.storage().max_pool2d_values(x.layout(), &geom)?;
        Ok(Tensor::from_storage(out, out_shape))
    }

    /// [`max_pool2d`](Tensor::max_pool2d) that also returns, for every output, the flat index
    /// `iy * W + ix` (int64) of the chosen input element in its `[H, W]` plane, as PyTorch's
    /// `return_indices=True` does.
    #[track_caller]
    pub fn max_pool2d_with_indices(
        &self,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<(Tensor, Tensor)> {
        let op = "max_pool2d";
        let (x, geom, out_shape) = pool_setup(op, self, kernel, stride, padding)?;
        let (out, idx) = x.storage().max_pool2d(x.layout(), &geom)?;
        let idx = Tensor::from_storage(idx, out_shape.clone());
        let idx_saved = idx.clone();
        let in_shape = self.shape().clone();
        let y =
            Tensor::from_storage(out, out_shape).record("MaxPool2DBackward", &[self], move || {
                Box::new(move |g| {
                    let g = g.contiguous()?;
                    let gx = g.storage().max_pool2d_backward(
                        g.layout(),
                        &idx_saved.storage(),
                        idx_saved.layout(),
                        &geom,
                    );
                    Ok(vec![Some(Tensor::from_result(gx, in_shape.clone())?)])
                })
            });
        Ok((y, idx))
    }

    /// 2-D average pooling (`torch.nn.functional.avg_pool2d` with `count_include_pad = true`,
    /// `ceil_mode = false`): every window divides by `kh * kw`, padded zeros included.
    #[track_caller]
    pub fn avg_pool2d(
        &self,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<Tensor> {
        let op = "avg_pool2d";
        let (x, geom, out_shape) = pool_setup(op, self, kernel, stride, padding)?;
        let out = x.storage().avg_pool2d(x.layout(), &geom)?;
        let in_shape = self.shape().clone();
        Ok(
            Tensor::from_storage(out, out_shape).record("AvgPool2DBackward", &[self], move || {
                Box::new(move |g| {
                    let g = g.contiguous()?;
                    let gx = g.storage().avg_pool2d_backward(g.layout(), &geom);
                    Ok(vec![Some(Tensor::from_result(gx, in_shape.clone())?)])
                })
            }),
        )
    }

    /// Adaptive average pooling (`torch.nn.functional.adaptive_avg_pool2d`) to `output =
    /// [OH, OW]`: output cell `i` averages input rows `floor(i * H / OH) .. ceil((i + 1) * H /
    /// OH)` (likewise for columns), so windows may overlap or differ in size.
    #[track_caller]
    pub fn adaptive_avg_pool2d(&self, output: [usize; 2]) -> Result<Tensor> {
        let op = "adaptive_avg_pool2d";
        check_conv_dtype(op, self, "input")?;
        let (xb, _) = batched(op, self, 2, "[N, C, H, W]")?;
        let d = xb.dims();
        let (planes, hw) = (d[0] * d[1], [d[2], d[3]]);
        if output.contains(&0) {
            return Err(Error::invalid(
                op,
                format!("output size must be positive, got {output:?}"),
            ));
        }
        if hw.contains(&0) {
            return Err(Error::shape(
                op,
                format!("input has an empty spatial dim: {}", self.shape()),
            ));
        }
        let mut out_shape = self.dims().to_vec();
        let r = out_shape.len();
        out_shape[r - 2..].copy_from_slice(&output);
        crate::limits::check_alloc(op, &Shape(out_shape.clone()), self.dtype())?;
        let x = self.detach().contiguous()?;
        let out = x
            .storage()
            .adaptive_avg_pool2d(x.layout(), planes, hw, output)?;
        let in_shape = self.shape().clone();
        Ok(Tensor::from_storage(out, out_shape).record(
            "AdaptiveAvgPool2DBackward",
            &[self],
            move || {
                Box::new(move |g| {
                    let g = g.contiguous()?;
                    let gx =
                        g.storage()
                            .adaptive_avg_pool2d_backward(g.layout(), planes, hw, output);
                    Ok(vec![Some(Tensor::from_result(gx, in_shape.clone())?)])
                })
            },
        ))
    }
}

/// The batched conv2d after all checks: run the kernel and record the backward.
fn conv2d_batched(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    residual: Option<&Tensor>,
    geom: ConvGeom,
    relu: bool,
) -> Result<Tensor> {
    let xc = x.detach().contiguous()?;
    let wc = weight.detach().contiguous()?;
    let bc = bias.map(|b| b.detach().contiguous()).transpose()?;
    let rc = residual.map(|r| r.detach().contiguous()).transpose()?;
    let out = {
        let sb = bc.as_ref().map(|b| b.storage());
        let sbias = sb.as_deref().zip(bc.as_ref().map(|b| b.layout()));
        let (sx, sw) = (xc.storage(), wc.storage());
        match (&rc, residual) {
            (Some(r), Some(res)) => {
                let (l, rs) = (xc.layout(), (&*r.storage(), r.layout()));
                let fused = sx.conv2d_add(l, &sw, wc.layout(), sbias, rs, &geom, relu)?;
                let Some(out) = fused else {
                    // no fused pass on this backend: the sum and the ReLU composed
                    drop((sx, sw, sb));
                    let y = conv2d_batched(x, weight, bias, None, geom, false)?;
                    let y = y.add(res)?;
                    return if relu { y.relu() } else { Ok(y) };
                };
                out
            }
            _ => sx.conv2d(xc.layout(), &sw, wc.layout(), sbias, &geom, relu)?,
        }
    };
    let y = Tensor::from_storage(out, [geom.n, geom.o, geom.oh, geom.ow]);
    // the backward of a fused ReLU needs its output (a view of the same storage, no copy)
    let relu_y = relu.then(|| y.detach());
    let mut inputs = vec![x, weight];
    inputs.extend(bias);
    inputs.extend(residual);
    let has_res = residual.is_some();
    let (need_x, need_w) = (x.requires_grad(), weight.requires_grad());
    let need_b = bias.is_some_and(|b| b.requires_grad());
    let has_bias = bias.is_some();
    let name = if relu {
        "ConvolutionReluBackward"
    } else {
        "ConvolutionBackward"
    };
    Ok(y.record(name, &inputs, move || {
        Box::new(move |g| {
            let g = g.contiguous()?;
            let [gx, gw, gb] = {
                let sy = relu_y.as_ref().map(|y| y.storage());
                let y = sy.as_deref().zip(relu_y.as_ref().map(|y| y.layout()));
                xc.storage().conv2d_backward(
                    xc.layout(),
                    &wc.storage(),
                    wc.layout(),
                    &g.storage(),
                    g.layout(),
                    y,
                    &geom,
                    [need_x, need_w, need_b],
                )?
            };
            let mut grads = vec![
                gx.map(|s| Tensor::from_storage(s, xc.shape())),
                gw.map(|s| Tensor::from_storage(s, wc.shape())),
            ];
            if has_bias {
                grads.push(gb.map(|s| Tensor::from_storage(s, [geom.o])));
            }
            if has_res {
                // the residual's gradient is the sum's: the output's, where the ReLU passed
                grads.push(Some(match &relu_y {
                    Some(y) => Tensor::where_(&y.gt_scalar(0.0)?, &g, &Tensor::zeros_like(&g)?)?,
                    None => g.clone(),
                }));
            }
            Ok(grads)
        })
    }))
}

/// Shared checks of the fixed-window pools; returns the dense input, the geometry and the
/// output shape (batched or not, like the input).
#[track_caller]
fn pool_setup(
    op: &str,
    input: &Tensor,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> Result<(Tensor, PoolGeom, Vec<usize>)> {
    check_conv_dtype(op, input, "input")?;
    let (xb, _) = batched(op, input, 2, "[N, C, H, W]")?;
    if kernel.contains(&0) {
        return Err(Error::invalid(
            op,
            format!("kernel size must be positive, got {kernel:?}"),
        ));
    }
    if stride.contains(&0) {
        return Err(Error::invalid(
            op,
            format!("stride must be positive, got {stride:?}"),
        ));
    }
    if padding[0] > kernel[0] / 2 || padding[1] > kernel[1] / 2 {
        return Err(Error::invalid(
            op,
            format!("padding {padding:?} must be at most half the kernel size {kernel:?}"),
        ));
    }
    let d = xb.dims();
    let mut out = [0; 2];
    for i in 0..2 {
        out[i] = match out_len(d[2 + i], kernel[i], stride[i], padding[i], 1) {
            Some(len) => len,
            None => {
                return Err(Error::shape(
                    op,
                    format!(
                        "kernel {kernel:?} is larger than the padded input: input {}, padding \
                         {padding:?}",
                        input.shape()
                    ),
                ))
            }
        };
    }
    let geom = PoolGeom {
        planes: d[0] * d[1],
        h: d[2],
        w: d[3],
        kernel,
        stride,
        padding,
        oh: out[0],
        ow: out[1],
    };
    let mut out_shape = input.dims().to_vec();
    let r = out_shape.len();
    out_shape[r - 2..].copy_from_slice(&out);
    Ok((input.detach().contiguous()?, geom, out_shape))
}
