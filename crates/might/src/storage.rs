//! Storage: the typed buffer behind one or more tensors, on one device. Tensors share it
//! through `Arc<RwLock<Storage>>`; it is freed when the last view goes away.
//!
//! Every method forwards to the backend of the buffer's device (the traits in
//! [`crate::backend`]); methods taking two buffers check they live on the same device. This
//! file and `device.rs` are the only places outside `backend/` that name a concrete backend.

use crate::backend::cpu::{CpuDevice, CpuStorage};
use crate::backend::{
    AttnGeom, BackendDevice, BackendStorage, BinaryOp, CeTarget, CmpOp, ConvGeom, OptimUpdate,
    PoolGeom, ReduceOp, UnaryOp,
};
use crate::tensor::random::Generator;
use crate::{DType, Device, Error, ErrorKind, Layout, Result, WithDType};

/// A device buffer.
#[derive(Clone, Debug)]
pub enum Storage {
    Cpu(CpuStorage),
}

#[track_caller]
fn devices_differ(op: &str, a: Device, b: Device) -> Error {
    Error::new(
        ErrorKind::Device,
        op,
        format!("tensors are on different devices: {a} vs {b}"),
    )
}

/// Forward a method of one buffer to its backend, wrapping buffers that come back.
macro_rules! one {
    ($s:expr, $b:ident => $e:expr) => {
        match $s {
            Storage::Cpu($b) => $e,
        }
    };
}

/// Forward a method of two buffers, which must be on one device.
macro_rules! two {
    ($op:expr, $s:expr, $o:expr, |$a:ident, $b:ident| $e:expr) => {{
        #[allow(unreachable_patterns)]
        match ($s, $o) {
            (Storage::Cpu($a), Storage::Cpu($b)) => $e,
            (a, b) => return Err(devices_differ($op, a.device(), b.device())),
        }
    }};
}

impl Storage {
    // ---- creation on a device ----
    pub(crate) fn zeros(device: Device, dtype: DType, n: usize) -> Result<Storage> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(CpuDevice.zeros(dtype, n)?)),
        }
    }
    pub(crate) fn from_f64(
        device: Device,
        dtype: DType,
        values: &mut dyn Iterator<Item = f64>,
    ) -> Result<Storage> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(CpuDevice.storage_from_f64(dtype, values)?)),
        }
    }
    /// See [`BackendDevice::storage_from_u8_images`].
    pub(crate) fn from_u8_images(
        device: Device,
        samples: &[&[u8]],
        channels: usize,
        scale: &[f32],
        shift: &[f32],
    ) -> Result<Storage> {
        let per = samples.first().map_or(0, |s| s.len());
        if samples.iter().any(|s| s.len() != per)
            || (channels == 0 && per > 0)
            || !per.is_multiple_of(channels.max(1))
            || scale.len() < channels
            || shift.len() < channels
        {
            return Err(Error::invalid(
                "from_u8_images",
                format!(
                    "samples of unequal lengths or not {channels} planes each, or an affine of {} / {} channels",
                    scale.len(),
                    shift.len()
                ),
            ));
        }
        match device {
            Device::Cpu => Ok(Storage::Cpu(
                CpuDevice.storage_from_u8_images(samples, channels, scale, shift)?,
            )),
        }
    }
    pub(crate) fn from_vec<T: WithDType>(device: Device, data: Vec<T>) -> Result<Storage> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(CpuDevice.storage_from_vec(data)?)),
        }
    }
    pub(crate) fn rand_uniform(
        device: Device,
        dtype: DType,
        n: usize,
        low: f64,
        high: f64,
        rng: &mut Generator,
    ) -> Result<Storage> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(
                CpuDevice.rand_uniform(dtype, n, low, high, rng)?,
            )),
        }
    }
    pub(crate) fn rand_normal(
        device: Device,
        dtype: DType,
        n: usize,
        mean: f64,
        std: f64,
        rng: &mut Generator,
    ) -> Result<Storage> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(
                CpuDevice.rand_normal(dtype, n, mean, std, rng)?,
            )),
        }
    }

    pub fn device(&self) -> Device {
        one!(self, s => s.device())
    }
    /// Elements in the buffer.
    pub(crate) fn len(&self) -> usize {
        one!(self, s => BackendStorage::len(s))
    }
    pub fn dtype(&self) -> DType {
        one!(self, s => BackendStorage::dtype(s))
    }

    // ---- host ----
    pub(crate) fn to_vec<T: WithDType>(&self, l: &Layout) -> Result<Vec<T>> {
        one!(self, s => s.to_vec(l))
    }
    pub(crate) fn to_f64_vec(&self, l: &Layout) -> Result<Vec<f64>> {
        one!(self, s => s.to_f64_vec(l))
    }

    // ---- copies ----
    /// The elements `l` selects, contiguous, on `device` (through the host).
    pub(crate) fn copy_to(&self, l: &Layout, device: Device) -> Result<Storage> {
        fn go<T: WithDType>(s: &Storage, l: &Layout, device: Device) -> Result<Storage> {
            Storage::from_vec(device, s.to_vec::<T>(l)?)
        }
        match self.dtype() {
            DType::F32 => go::<f32>(self, l, device),
            DType::F64 => go::<f64>(self, l, device),
            DType::F16 => go::<half::f16>(self, l, device),
            DType::BF16 => go::<half::bf16>(self, l, device),
            DType::I64 => go::<i64>(self, l, device),
            DType::U8 => go::<u8>(self, l, device),
            DType::Bool => go::<bool>(self, l, device),
        }
    }
    pub(crate) fn copy_contiguous(&self, l: &Layout) -> Result<Storage> {
        one!(self, s => Ok(Storage::Cpu(s.copy_contiguous(l)?)))
    }
    pub(crate) fn to_dtype(&self, l: &Layout, dtype: DType) -> Result<Storage> {
        one!(self, s => Ok(Storage::Cpu(s.to_dtype(l, dtype)?)))
    }
    pub(crate) fn assign(&mut self, dl: &Layout, src: &Storage, sl: &Layout) -> Result<()> {
        two!("copy_", self, src, |a, b| a.assign(dl, b, sl))
    }

    // ---- elementwise ----
    pub(crate) fn unary(&self, l: &Layout, op: UnaryOp) -> Result<Storage> {
        one!(self, s => Ok(Storage::Cpu(s.unary(l, op)?)))
    }
    pub(crate) fn unary_backward(
        &self,
        gl: &Layout,
        saved: &Storage,
        sl: &Layout,
        op: UnaryOp,
    ) -> Result<Storage> {
        two!(op.name(), self, saved, |g, s| Ok(Storage::Cpu(
            g.unary_backward(gl, s, sl, op)?
        )))
    }
    pub(crate) fn unary_with_grad(
        &self,
        l: &Layout,
        op: UnaryOp,
    ) -> Result<Option<(Storage, Storage)>> {
        one!(self, s => Ok(s.unary_with_grad(l, op)?.map(|(a, b)| (Storage::Cpu(a), Storage::Cpu(b)))))
    }
    pub(crate) fn binary(
        &self,
        l: &Layout,
        rhs: &Storage,
        rl: &Layout,
        op: BinaryOp,
    ) -> Result<Storage> {
        two!(op.name(), self, rhs, |a, b| Ok(Storage::Cpu(
            a.binary(l, b, rl, op)?
        )))
    }
    pub(crate) fn binary_inplace(
        &mut self,
        l: &Layout,
        rhs: &Storage,
        rl: &Layout,
        op: BinaryOp,
    ) -> Result<()> {
        two!(op.name(), self, rhs, |a, b| a.binary_inplace(l, b, rl, op))
    }
    pub(crate) fn add_scaled_inplace(
        &mut self,
        l: &Layout,
        rhs: &Storage,
        rl: &Layout,
        alpha: f64,
    ) -> Result<bool> {
        two!("add_", self, rhs, |a, b| a
            .add_scaled_inplace(l, b, rl, alpha))
    }
    pub(crate) fn affine_inplace(&mut self, l: &Layout, mul: f64, add: f64) -> Result<bool> {
        one!(self, s => s.affine_inplace(l, mul, add))
    }
    pub(crate) fn cmp(&self, l: &Layout, rhs: &Storage, rl: &Layout, op: CmpOp) -> Result<Storage> {
        two!("compare", self, rhs, |a, b| Ok(Storage::Cpu(
            a.cmp(l, b, rl, op)?
        )))
    }
    pub(crate) fn where_cond(
        &self,
        cl: &Layout,
        a: &Storage,
        al: &Layout,
        b: &Storage,
        bl: &Layout,
    ) -> Result<Storage> {
        #[allow(unreachable_patterns)]
        match (self, a, b) {
            (Storage::Cpu(c), Storage::Cpu(a), Storage::Cpu(b)) => {
                Ok(Storage::Cpu(c.where_cond(cl, a, al, b, bl)?))
            }
            (c, a, b) => Err(devices_differ(
                "where",
                c.device(),
                if a.device() != c.device() {
                    a.device()
                } else {
                    b.device()
                },
            )),
        }
    }

    // ---- reductions ----
    pub(crate) fn reduce(&self, l: &Layout, mask: &[bool], op: ReduceOp) -> Result<Storage> {
        one!(self, s => Ok(Storage::Cpu(s.reduce(l, mask, op)?)))
    }
    pub(crate) fn arg_reduce(
        &self,
        l: &Layout,
        mask: &[bool],
        max: bool,
    ) -> Result<(Storage, Storage)> {
        one!(self, s => {
            let (v, i) = s.arg_reduce(l, mask, max)?;
            Ok((Storage::Cpu(v), Storage::Cpu(i)))
        })
    }
    pub(crate) fn softmax_rows(&self, l: &Layout, n: usize, log: bool) -> Result<Option<Storage>> {
        one!(self, s => Ok(s.softmax_rows(l, n, log)?.map(Storage::Cpu)))
    }
    pub(crate) fn softmax_backward_rows(
        &self,
        gl: &Layout,
        y: &Storage,
        yl: &Layout,
        n: usize,
        log: bool,
    ) -> Result<Storage> {
        two!("softmax_backward", self, y, |g, y| Ok(Storage::Cpu(
            g.softmax_backward_rows(gl, y, yl, n, log)?
        )))
    }

    // ---- matrix products ----
    pub(crate) fn matmul(&self, l: &Layout, rhs: &Storage, rl: &Layout) -> Result<Storage> {
        two!("matmul", self, rhs, |a, b| Ok(Storage::Cpu(
            a.matmul(l, b, rl)?
        )))
    }
    pub(crate) fn matmul_bias(
        &self,
        l: &Layout,
        rhs: &Storage,
        rl: &Layout,
        bias: &Storage,
        bl: &Layout,
    ) -> Result<Option<Storage>> {
        #[allow(unreachable_patterns)]
        match (self, rhs, bias) {
            (Storage::Cpu(a), Storage::Cpu(b), Storage::Cpu(c)) => {
                Ok(a.matmul_bias(l, b, rl, c, bl)?.map(Storage::Cpu))
            }
            _ => Ok(None),
        }
    }

    // ---- convolution and pooling ----
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn conv2d(
        &self,
        l: &Layout,
        w: &Storage,
        wl: &Layout,
        bias: Option<(&Storage, &Layout)>,
        geom: &ConvGeom,
        relu: bool,
    ) -> Result<Storage> {
        two!("conv2d", self, w, |x, w| {
            let b = bias.map(|(s, bl)| match s {
                Storage::Cpu(b) => (b, bl),
            });
            Ok(Storage::Cpu(x.conv2d(l, w, wl, b, geom, relu)?))
        })
    }
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn conv2d_backward(
        &self,
        l: &Layout,
        w: &Storage,
        wl: &Layout,
        g: &Storage,
        gl: &Layout,
        y: Option<(&Storage, &Layout)>,
        geom: &ConvGeom,
        need: [bool; 3],
    ) -> Result<[Option<Storage>; 3]> {
        #[allow(unreachable_patterns)]
        match (self, w, g) {
            (Storage::Cpu(x), Storage::Cpu(w), Storage::Cpu(g)) => {
                let y = y.map(|(s, yl)| match s {
                    Storage::Cpu(y) => (y, yl),
                });
                let r = x.conv2d_backward(l, w, wl, g, gl, y, geom, need)?;
                Ok(r.map(|s| s.map(Storage::Cpu)))
            }
            (x, w, _) => Err(devices_differ("conv2d_backward", x.device(), w.device())),
        }
    }
    pub(crate) fn max_pool2d(&self, l: &Layout, geom: &PoolGeom) -> Result<(Storage, Storage)> {
        one!(self, s => {
            let (v, i) = s.max_pool2d(l, geom)?;
            Ok((Storage::Cpu(v), Storage::Cpu(i)))
        })
    }
    pub(crate) fn max_pool2d_backward(
        &self,
        l: &Layout,
        idx: &Storage,
        il: &Layout,
        geom: &PoolGeom,
    ) -> Result<Storage> {
        two!("max_pool2d_backward", self, idx, |g, i| Ok(Storage::Cpu(
            g.max_pool2d_backward(l, i, il, geom)?
        )))
    }
    pub(crate) fn avg_pool2d(&self, l: &Layout, geom: &PoolGeom) -> Result<Storage> {
        one!(self, s => Ok(Storage::Cpu(s.avg_pool2d(l, geom)?)))
    }
    pub(crate) fn avg_pool2d_backward(&self, l: &Layout, geom: &PoolGeom) -> Result<Storage> {
        one!(self, s => Ok(Storage::Cpu(s.avg_pool2d_backward(l, geom)?)))
    }
    pub(crate) fn adaptive_avg_pool2d(
        &self,
        l: &Layout,
        planes: usize,
        hw: [usize; 2],
        out: [usize; 2],
    ) -> Result<Storage> {
        one!(self, s => Ok(Storage::Cpu(s.adaptive_avg_pool2d(l, planes, hw, out)?)))
    }
    pub(crate) fn adaptive_avg_pool2d_backward(
        &self,
        l: &Layout,
        planes: usize,
        hw: [usize; 2],
        out: [usize; 2],
    ) -> Result<Storage> {
        one!(self, s => Ok(Storage::Cpu(s.adaptive_avg_pool2d_backward(l, planes, hw, out)?)))
    }

    // ---- fused ops ----
    pub(crate) fn layer_norm(
        &self,
        l: &Layout,
        w: Option<(&Storage, &Layout)>,
        b: Option<(&Storage, &Layout)>,
        n: usize,
        eps: f64,
    ) -> Result<Option<[Storage; 3]>> {
        one!(self, s => {
            let w = w.map(|(w, l)| match w { Storage::Cpu(w) => (w, l) });
            let b = b.map(|(b, l)| match b { Storage::Cpu(b) => (b, l) });
            Ok(s.layer_norm(l, w, b, n, eps)?.map(|r| r.map(Storage::Cpu)))
        })
    }
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn layer_norm_backward(
        &self,
        gl: &Layout,
        x: (&Storage, &Layout),
        w: Option<(&Storage, &Layout)>,
        mean: &Storage,
        rstd: &Storage,
        n: usize,
    ) -> Result<[Storage; 3]> {
        #[allow(unreachable_patterns)]
        match (self, x.0, mean, rstd) {
            (Storage::Cpu(g), Storage::Cpu(x0), Storage::Cpu(m), Storage::Cpu(r)) => {
                let w = w.map(|(w, l)| match w {
                    Storage::Cpu(w) => (w, l),
                });
                let out = g.layer_norm_backward(gl, (x0, x.1), w, m, r, n)?;
                Ok(out.map(Storage::Cpu))
            }
            (g, x, _, _) => Err(devices_differ(
                "layer_norm_backward",
                g.device(),
                x.device(),
            )),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn cross_entropy(
        &self,
        l: &Layout,
        c: usize,
        target: CeTarget<'_>,
        probs: Option<(&Storage, &Layout)>,
        eps: f64,
        cw: Option<&[f64]>,
    ) -> Result<Option<(Vec<f64>, Storage)>> {
        one!(self, s => {
            let probs = probs.map(|(p, l)| match p { Storage::Cpu(p) => (p, l) });
            Ok(s.cross_entropy(l, c, target, probs, eps, cw)?.map(|(v, lse)| (v, Storage::Cpu(lse))))
        })
    }
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn cross_entropy_backward(
        &self,
        l: &Layout,
        lse: &Storage,
        c: usize,
        target: CeTarget<'_>,
        probs: Option<(&Storage, &Layout)>,
        eps: f64,
        cw: Option<&[f64]>,
        scale: &[f64],
    ) -> Result<Storage> {
        two!("cross_entropy_backward", self, lse, |x, lse| {
            let probs = probs.map(|(p, l)| match p {
                Storage::Cpu(p) => (p, l),
            });
            Ok(Storage::Cpu(x.cross_entropy_backward(
                l, lse, c, target, probs, eps, cw, scale,
            )?))
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn causal_softmax(
        &self,
        l: &Layout,
        t: usize,
        s: usize,
        scale: f64,
        offset: usize,
    ) -> Result<Option<Storage>> {
        one!(self, x => Ok(x.causal_softmax(l, t, s, scale, offset)?.map(Storage::Cpu)))
    }
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn causal_softmax_backward(
        &self,
        gl: &Layout,
        y: &Storage,
        yl: &Layout,
        t: usize,
        s: usize,
        scale: f64,
        offset: usize,
    ) -> Result<Storage> {
        two!("causal_softmax_backward", self, y, |g, y| Ok(Storage::Cpu(
            g.causal_softmax_backward(gl, y, yl, t, s, scale, offset)?
        )))
    }
    /// Fused attention with `self` = q (k and v the same buffer when packed).
    pub(crate) fn attention(
        &self,
        k: &Storage,
        v: &Storage,
        geom: &AttnGeom,
    ) -> Result<Option<(Storage, Storage)>> {
        #[allow(unreachable_patterns)]
        match (self, k, v) {
            (Storage::Cpu(q), Storage::Cpu(k), Storage::Cpu(v)) => Ok(q
                .attention(k, v, geom)?
                .map(|(y, p)| (Storage::Cpu(y), Storage::Cpu(p)))),
            (q, k, v) => {
                let other = if k.device() != q.device() { k } else { v };
                Err(devices_differ("attention", q.device(), other.device()))
            }
        }
    }
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn attention_backward(
        &self,
        k: &Storage,
        v: &Storage,
        saved: &Storage,
        dy: &Storage,
        dy_offsets: &[usize],
        dy_row_stride: usize,
        geom: &AttnGeom,
    ) -> Result<Vec<Storage>> {
        #[allow(unreachable_patterns)]
        match (self, k, v, saved, dy) {
            (
                Storage::Cpu(q),
                Storage::Cpu(k),
                Storage::Cpu(v),
                Storage::Cpu(p),
                Storage::Cpu(g),
            ) => Ok(q
                .attention_backward(k, v, p, g, dy_offsets, dy_row_stride, geom)?
                .into_iter()
                .map(Storage::Cpu)
                .collect()),
            (q, k, v, p, g) => {
                let other = [k, v, p, g].into_iter().find(|o| o.device() != q.device());
                let other = other.map_or(q.device(), |o| o.device());
                Err(devices_differ("attention_backward", q.device(), other))
            }
        }
    }

    pub(crate) fn optimizer_update(
        &mut self,
        l: &Layout,
        grad: (&Storage, &Layout),
        state: &mut [&mut Storage],
        update: &OptimUpdate,
    ) -> Result<bool> {
        #[allow(unreachable_patterns)]
        match (self, grad.0) {
            (Storage::Cpu(p), Storage::Cpu(g)) => {
                let mut bufs = Vec::with_capacity(state.len());
                for b in state.iter_mut() {
                    match &mut **b {
                        Storage::Cpu(b) => bufs.push(b),
                        b => return Err(devices_differ("optimizer step", Device::Cpu, b.device())),
                    }
                }
                p.optimizer_update(l, (g, grad.1), &mut bufs, update)
            }
            (p, g) => Err(devices_differ("optimizer step", p.device(), g.device())),
        }
    }

    pub(crate) fn batch_norm_stats(
        &self,
        l: &Layout,
        c: usize,
        s: usize,
    ) -> Result<Option<[Vec<f64>; 2]>> {
        one!(self, st => st.batch_norm_stats(l, c, s))
    }
    pub(crate) fn channel_affine(
        &self,
        l: &Layout,
        scale: &Storage,
        shift: &Storage,
        s: usize,
        relu: bool,
    ) -> Result<Option<Storage>> {
        #[allow(unreachable_patterns)]
        match (self, scale, shift) {
            (Storage::Cpu(x), Storage::Cpu(a), Storage::Cpu(b)) => {
                Ok(x.channel_affine(l, a, b, s, relu)?.map(Storage::Cpu))
            }
            (x, a, _) => Err(devices_differ("batch_norm", x.device(), a.device())),
        }
    }
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn batch_norm_backward(
        &self,
        gl: &Layout,
        x: (&Storage, &Layout),
        w: Option<&Storage>,
        stats: (&[f64], &[f64]),
        s: usize,
        gate: Option<(&Storage, &Storage)>,
    ) -> Result<[Storage; 3]> {
        #[allow(unreachable_patterns)]
        match (self, x.0) {
            (Storage::Cpu(g), Storage::Cpu(x0)) => {
                let w = w.map(|w| match w {
                    Storage::Cpu(w) => w,
                });
                let gate = gate.map(|(a, b)| match (a, b) {
                    (Storage::Cpu(a), Storage::Cpu(b)) => (a, b),
                });
                let r = g.batch_norm_backward(gl, (x0, x.1), w, stats, s, gate)?;
                Ok(r.map(Storage::Cpu))
            }
            (g, x) => Err(devices_differ(
                "batch_norm_backward",
                g.device(),
                x.device(),
            )),
        }
    }
    pub(crate) fn norm_part(&self, l: &Layout, p: f64) -> Result<Option<f64>> {
        one!(self, s => s.norm_part(l, p))
    }

    // ---- indexing ----
    pub(crate) fn index_select(
        &self,
        l: &Layout,
        ids: &[usize],
        dims: [usize; 3],
    ) -> Result<Storage> {
        one!(self, s => Ok(Storage::Cpu(s.index_select(l, ids, dims)?)))
    }
    pub(crate) fn index_add_inplace(
        &mut self,
        ids: &[usize],
        src: &Storage,
        sl: &Layout,
        dims: [usize; 3],
    ) -> Result<()> {
        two!("index_add", self, src, |o, s| o
            .index_add_inplace(ids, s, sl, dims))
    }
    pub(crate) fn gather(
        &self,
        l: &Layout,
        ids: &[usize],
        index_dims: &[usize],
        dim: usize,
    ) -> Result<Storage> {
        one!(self, s => Ok(Storage::Cpu(s.gather(l, ids, index_dims, dim)?)))
    }
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scatter_add_inplace(
        &mut self,
        l: &Layout,
        ids: &[usize],
        index_dims: &[usize],
        src: &Storage,
        sl: &Layout,
        dim: usize,
    ) -> Result<()> {
        two!("scatter_add", self, src, |o, s| o
            .scatter_add_inplace(l, ids, index_dims, s, sl, dim))
    }
}
