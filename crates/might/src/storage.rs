//! Storage: the typed buffer behind one or more tensors, on one device. Tensors share it
//! through `Arc<RwLock<Storage>>`; it is freed when the last view goes away.
//!
//! Every method forwards to the backend of the buffer's device (the traits in
//! [`crate::backend`]); methods taking several buffers check they live on one device and
//! otherwise fail naming both. This file and `device.rs` are the only places outside
//! `backend/` that name a concrete backend: a new one adds its variant to `Storage`, to the
//! [`one!`] and [`on_device!`] macros and a [`Variant`] impl.

use crate::backend::cpu::{CpuDevice, CpuStorage};
#[cfg(feature = "reference-backend")]
use crate::backend::reference::{RefDevice, RefStorage};
#[cfg(feature = "gpu")]
use crate::backend::wgpu::{WgpuDevice, WgpuStorage};
use crate::backend::{
    AttnGeom, BackendDevice, BackendStorage, BinaryOp, CeTarget, CmpOp, ConvGeom, OptimUpdate,
    PoolGeom, ReduceOp, UnaryOp,
};
use crate::tensor::random::Generator;
use crate::{DType, Device, Error, ErrorKind, Layout, Result, WithDType};

/// A device buffer.
#[derive(Debug)]
pub enum Storage {
    Cpu(CpuStorage),
    #[cfg(feature = "reference-backend")]
    Reference(RefStorage),
    #[cfg(feature = "gpu")]
    Gpu(WgpuStorage),
}

#[track_caller]
fn devices_differ(op: &str, a: Device, b: Device) -> Error {
    Error::new(
        ErrorKind::Device,
        op,
        format!("tensors are on different devices: {a} vs {b}"),
    )
}

/// A backend's buffer type: how to find it among the variants of [`Storage`].
trait Variant: BackendStorage {
    fn of(s: &Storage) -> Option<&Self>;
    fn of_mut(s: &mut Storage) -> Option<&mut Self>;
}

impl Variant for CpuStorage {
    fn of(s: &Storage) -> Option<&Self> {
        #[allow(unreachable_patterns)]
        match s {
            Storage::Cpu(b) => Some(b),
            _ => None,
        }
    }
    fn of_mut(s: &mut Storage) -> Option<&mut Self> {
        #[allow(unreachable_patterns)]
        match s {
            Storage::Cpu(b) => Some(b),
            _ => None,
        }
    }
}

#[cfg(feature = "reference-backend")]
impl Variant for RefStorage {
    fn of(s: &Storage) -> Option<&Self> {
        match s {
            Storage::Reference(b) => Some(b),
            _ => None,
        }
    }
    fn of_mut(s: &mut Storage) -> Option<&mut Self> {
        match s {
            Storage::Reference(b) => Some(b),
            _ => None,
        }
    }
}

#[cfg(feature = "gpu")]
impl Variant for WgpuStorage {
    fn of(s: &Storage) -> Option<&Self> {
        #[allow(unreachable_patterns)]
        match s {
            Storage::Gpu(b) => Some(b),
            _ => None,
        }
    }
    fn of_mut(s: &mut Storage) -> Option<&mut Self> {
        #[allow(unreachable_patterns)]
        match s {
            Storage::Gpu(b) => Some(b),
            _ => None,
        }
    }
}

/// `other` as a buffer of the same backend as `like`, or the error naming both devices.
#[track_caller]
fn same<'a, B: Variant>(op: &str, like: &B, other: &'a Storage) -> Result<&'a B> {
    B::of(other).ok_or_else(|| devices_differ(op, like.device(), other.device()))
}

/// [`same`] for an optional operand with its layout.
#[track_caller]
fn same_opt<'a, B: Variant>(
    op: &str,
    like: &B,
    other: Option<(&'a Storage, &'a Layout)>,
) -> Result<Option<(&'a B, &'a Layout)>> {
    other.map(|(s, l)| Ok((same(op, like, s)?, l))).transpose()
}

/// Forward a method of one buffer to its backend: `$b` is the backend's buffer and `$w`
/// the variant that wraps the backend's buffers back into a `Storage`.
macro_rules! one {
    ($s:expr, |$b:ident, $w:ident| $e:expr) => {
        match $s {
            Storage::Cpu($b) => {
                #[allow(unused_variables)]
                let $w = Storage::Cpu;
                $e
            }
            #[cfg(feature = "reference-backend")]
            Storage::Reference($b) => {
                #[allow(unused_variables)]
                let $w = Storage::Reference;
                $e
            }
            #[cfg(feature = "gpu")]
            Storage::Gpu($b) => {
                #[allow(unused_variables)]
                let $w = Storage::Gpu;
                $e
            }
        }
    };
}

/// Forward a method of two buffers, which must be on one device.
macro_rules! two {
    ($op:expr, $s:expr, $o:expr, |$a:ident, $b:ident, $w:ident| $e:expr) => {
        one!($s, |$a, $w| {
            let $b = same($op, $a, $o)?;
            $e
        })
    };
}

/// Make a buffer on `device`: `$d` is the backend's [`BackendDevice`], `$w` its variant.
macro_rules! on_device {
    ($device:expr, |$d:ident, $w:ident| $e:expr) => {
        match $device {
            Device::Cpu => {
                let ($d, $w) = (CpuDevice, Storage::Cpu);
                $e
            }
            #[cfg(feature = "reference-backend")]
            Device::Reference => {
                let ($d, $w) = (RefDevice, Storage::Reference);
                $e
            }
            #[cfg(feature = "gpu")]
            Device::Gpu(n) => {
                let ($d, $w) = (WgpuDevice(n), Storage::Gpu);
                $e
            }
        }
    };
}

impl Storage {
    // ---- creation on a device ----
    pub(crate) fn zeros(device: Device, dtype: DType, n: usize) -> Result<Storage> {
        on_device!(device, |d, w| Ok(w(d.zeros(dtype, n)?)))
    }
    pub(crate) fn from_f64(
        device: Device,
        dtype: DType,
        values: &mut dyn Iterator<Item = f64>,
    ) -> Result<Storage> {
        on_device!(device, |d, w| Ok(w(d.storage_from_f64(dtype, values)?)))
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
        on_device!(device, |d, w| Ok(w(
            d.storage_from_u8_images(samples, channels, scale, shift)?
        )))
    }
    pub(crate) fn from_vec<T: WithDType>(device: Device, data: Vec<T>) -> Result<Storage> {
        on_device!(device, |d, w| Ok(w(d.storage_from_vec(data)?)))
    }
    pub(crate) fn rand_uniform(
        device: Device,
        dtype: DType,
        n: usize,
        low: f64,
        high: f64,
        rng: &mut Generator,
    ) -> Result<Storage> {
        on_device!(device, |d, w| Ok(w(
            d.rand_uniform(dtype, n, low, high, rng)?
        )))
    }
    pub(crate) fn rand_normal(
        device: Device,
        dtype: DType,
        n: usize,
        mean: f64,
        std: f64,
        rng: &mut Generator,
    ) -> Result<Storage> {
        on_device!(device, |d, w| Ok(w(
            d.rand_normal(dtype, n, mean, std, rng)?
        )))
    }

    pub fn device(&self) -> Device {
        one!(self, |s, w| s.device())
    }
    /// Elements in the buffer.
    pub(crate) fn len(&self) -> usize {
        one!(self, |s, w| BackendStorage::len(s))
    }
    pub fn dtype(&self) -> DType {
        one!(self, |s, w| BackendStorage::dtype(s))
    }

    // ---- host ----
    pub(crate) fn to_vec<T: WithDType>(&self, l: &Layout) -> Result<Vec<T>> {
        one!(self, |s, w| s.to_vec(l))
    }
    pub(crate) fn to_f64_vec(&self, l: &Layout) -> Result<Vec<f64>> {
        one!(self, |s, w| s.to_f64_vec(l))
    }
    /// Start reading the elements `l` selects; host backends read at once, the GPU queues a
    /// copy whose values [`HostValues::get`] awaits (see `Tensor::to_vec_async`).
    pub(crate) fn read_async<T: WithDType>(&self, l: &Layout) -> Result<HostValues<T>> {
        match self {
            #[cfg(feature = "gpu")]
            Storage::Gpu(s) => Ok(HostValues::Gpu(s.read_async("to_vec_async", l)?)),
            _ => self.to_vec(l).map(HostValues::Ready),
        }
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
        one!(self, |s, w| Ok(w(s.copy_contiguous(l)?)))
    }
    pub(crate) fn to_dtype(&self, l: &Layout, dtype: DType) -> Result<Storage> {
        one!(self, |s, w| Ok(w(s.to_dtype(l, dtype)?)))
    }
    /// See [`BackendStorage::touched`].
    pub(crate) fn touched(&self) {
        one!(self, |s, w| s.touched())
    }
    pub(crate) fn assign(&mut self, dl: &Layout, src: &Storage, sl: &Layout) -> Result<()> {
        two!("copy_", self, src, |a, b, w| a.assign(dl, b, sl))
    }

    // ---- elementwise ----
    pub(crate) fn unary(&self, l: &Layout, op: UnaryOp) -> Result<Storage> {
        one!(self, |s, w| Ok(w(s.unary(l, op)?)))
    }
    pub(crate) fn unary_backward(
        &self,
        gl: &Layout,
        saved: &Storage,
        sl: &Layout,
        op: UnaryOp,
    ) -> Result<Storage> {
        two!(op.name(), self, saved, |g, s, w| Ok(w(
            g.unary_backward(gl, s, sl, op)?
        )))
    }
    pub(crate) fn unary_with_grad(
        &self,
        l: &Layout,
        op: UnaryOp,
    ) -> Result<Option<(Storage, Storage)>> {
        one!(self, |s, w| Ok(s
            .unary_with_grad(l, op)?
            .map(|(a, b)| (w(a), w(b)))))
    }
    pub(crate) fn binary(
        &self,
        l: &Layout,
        rhs: &Storage,
        rl: &Layout,
        op: BinaryOp,
    ) -> Result<Storage> {
        two!(op.name(), self, rhs, |a, b, w| Ok(w(
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
        two!(op.name(), self, rhs, |a, b, w| a
            .binary_inplace(l, b, rl, op))
    }
    pub(crate) fn add_scaled_inplace(
        &mut self,
        l: &Layout,
        rhs: &Storage,
        rl: &Layout,
        alpha: f64,
    ) -> Result<bool> {
        two!("add_", self, rhs, |a, b, w| a
            .add_scaled_inplace(l, b, rl, alpha))
    }
    pub(crate) fn affine_inplace(&mut self, l: &Layout, mul: f64, add: f64) -> Result<bool> {
        one!(self, |s, w| s.affine_inplace(l, mul, add))
    }
    pub(crate) fn cmp(&self, l: &Layout, rhs: &Storage, rl: &Layout, op: CmpOp) -> Result<Storage> {
        two!("compare", self, rhs, |a, b, w| Ok(w(a.cmp(l, b, rl, op)?)))
    }
    pub(crate) fn where_cond(
        &self,
        cl: &Layout,
        a: &Storage,
        al: &Layout,
        b: &Storage,
        bl: &Layout,
    ) -> Result<Storage> {
        one!(self, |c, w| {
            let (a, b) = (same("where", c, a)?, same("where", c, b)?);
            Ok(w(c.where_cond(cl, a, al, b, bl)?))
        })
    }

    // ---- reductions ----
    pub(crate) fn reduce(&self, l: &Layout, mask: &[bool], op: ReduceOp) -> Result<Storage> {
        one!(self, |s, w| Ok(w(s.reduce(l, mask, op)?)))
    }
    pub(crate) fn arg_reduce(
        &self,
        l: &Layout,
        mask: &[bool],
        max: bool,
    ) -> Result<(Storage, Storage)> {
        one!(self, |s, w| {
            let (v, i) = s.arg_reduce(l, mask, max)?;
            Ok((w(v), w(i)))
        })
    }
    pub(crate) fn softmax_rows(&self, l: &Layout, n: usize, log: bool) -> Result<Option<Storage>> {
        one!(self, |s, w| Ok(s.softmax_rows(l, n, log)?.map(w)))
    }
    pub(crate) fn softmax_backward_rows(
        &self,
        gl: &Layout,
        y: &Storage,
        yl: &Layout,
        n: usize,
        log: bool,
    ) -> Result<Storage> {
        two!("softmax_backward", self, y, |g, y, w| Ok(w(
            g.softmax_backward_rows(gl, y, yl, n, log)?
        )))
    }

    // ---- matrix products ----
    pub(crate) fn matmul(&self, l: &Layout, rhs: &Storage, rl: &Layout) -> Result<Storage> {
        two!("matmul", self, rhs, |a, b, w| Ok(w(a.matmul(l, b, rl)?)))
    }
    /// `None` also when the operands are on different devices (the composed path reports it).
    pub(crate) fn matmul_bias(
        &self,
        l: &Layout,
        rhs: &Storage,
        rl: &Layout,
        bias: &Storage,
        bl: &Layout,
    ) -> Result<Option<Storage>> {
        one!(self, |a, w| {
            let (Ok(b), Ok(c)) = (same("matmul", a, rhs), same("matmul", a, bias)) else {
                return Ok(None);
            };
            Ok(a.matmul_bias(l, b, rl, c, bl)?.map(w))
        })
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
        two!("conv2d", self, w, |x, wt, wrap| {
            let b = same_opt("conv2d", x, bias)?;
            Ok(wrap(x.conv2d(l, wt, wl, b, geom, relu)?))
        })
    }
    /// `None` also when the residual is on another device (the composed path reports it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn conv2d_add(
        &self,
        l: &Layout,
        w: &Storage,
        wl: &Layout,
        bias: Option<(&Storage, &Layout)>,
        (r, rl): (&Storage, &Layout),
        geom: &ConvGeom,
        relu: bool,
    ) -> Result<Option<Storage>> {
        two!("conv2d", self, w, |x, wt, wrap| {
            let b = same_opt("conv2d", x, bias)?;
            let Ok(r) = same("conv2d", x, r) else {
                return Ok(None);
            };
            Ok(x.conv2d_add(l, wt, wl, b, (r, rl), geom, relu)?.map(wrap))
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
        const OP: &str = "conv2d_backward";
        one!(self, |x, wrap| {
            let (wt, g) = (same(OP, x, w)?, same(OP, x, g)?);
            let y = same_opt(OP, x, y)?;
            let r = x.conv2d_backward(l, wt, wl, g, gl, y, geom, need)?;
            Ok(r.map(|s| s.map(wrap)))
        })
    }
    pub(crate) fn max_pool2d(&self, l: &Layout, geom: &PoolGeom) -> Result<(Storage, Storage)> {
        one!(self, |s, w| {
            let (v, i) = s.max_pool2d(l, geom)?;
            Ok((w(v), w(i)))
        })
    }
    pub(crate) fn max_pool2d_values(&self, l: &Layout, geom: &PoolGeom) -> Result<Storage> {
        one!(self, |s, w| Ok(w(s.max_pool2d_values(l, geom)?)))
    }
    pub(crate) fn max_pool2d_backward(
        &self,
        l: &Layout,
        idx: &Storage,
        il: &Layout,
        geom: &PoolGeom,
    ) -> Result<Storage> {
        two!("max_pool2d_backward", self, idx, |g, i, w| Ok(w(
            g.max_pool2d_backward(l, i, il, geom)?
        )))
    }
    pub(crate) fn avg_pool2d(&self, l: &Layout, geom: &PoolGeom) -> Result<Storage> {
        one!(self, |s, w| Ok(w(s.avg_pool2d(l, geom)?)))
    }
    pub(crate) fn avg_pool2d_backward(&self, l: &Layout, geom: &PoolGeom) -> Result<Storage> {
        one!(self, |s, w| Ok(w(s.avg_pool2d_backward(l, geom)?)))
    }
    pub(crate) fn adaptive_avg_pool2d(
        &self,
        l: &Layout,
        planes: usize,
        hw: [usize; 2],
        out: [usize; 2],
    ) -> Result<Storage> {
        one!(self, |s, w| Ok(w(
            s.adaptive_avg_pool2d(l, planes, hw, out)?
        )))
    }
    pub(crate) fn adaptive_avg_pool2d_backward(
        &self,
        l: &Layout,
        planes: usize,
        hw: [usize; 2],
        out: [usize; 2],
    ) -> Result<Storage> {
        one!(self, |s, w| Ok(w(
            s.adaptive_avg_pool2d_backward(l, planes, hw, out)?
        )))
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
        one!(self, |s, wrap| {
            let (w, b) = (same_opt("layer_norm", s, w)?, same_opt("layer_norm", s, b)?);
            Ok(s.layer_norm(l, w, b, n, eps)?.map(|r| r.map(wrap)))
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
        const OP: &str = "layer_norm_backward";
        one!(self, |g, wrap| {
            let x0 = same(OP, g, x.0)?;
            let (m, r) = (same(OP, g, mean)?, same(OP, g, rstd)?);
            let w = same_opt(OP, g, w)?;
            Ok(g.layer_norm_backward(gl, (x0, x.1), w, m, r, n)?.map(wrap))
        })
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
        one!(self, |s, w| {
            let probs = same_opt("cross_entropy", s, probs)?;
            Ok(s.cross_entropy(l, c, target, probs, eps, cw)?
                .map(|(v, lse)| (v, w(lse))))
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
        const OP: &str = "cross_entropy_backward";
        two!(OP, self, lse, |x, lse, w| {
            let probs = same_opt(OP, x, probs)?;
            Ok(w(x.cross_entropy_backward(
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
        one!(self, |x, w| Ok(x
            .causal_softmax(l, t, s, scale, offset)?
            .map(w)))
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
        two!("causal_softmax_backward", self, y, |g, y, w| Ok(w(
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
        const OP: &str = "attention";
        one!(self, |q, w| {
            let (k, v) = (same(OP, q, k)?, same(OP, q, v)?);
            Ok(q.attention(k, v, geom)?.map(|(y, p)| (w(y), w(p))))
        })
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
        const OP: &str = "attention_backward";
        one!(self, |q, w| {
            let (k, v) = (same(OP, q, k)?, same(OP, q, v)?);
            let (p, g) = (same(OP, q, saved)?, same(OP, q, dy)?);
            Ok(
                q.attention_backward(k, v, p, g, dy_offsets, dy_row_stride, geom)?
                    .into_iter()
                    .map(w)
                    .collect(),
            )
        })
    }

    pub(crate) fn optimizer_update(
        &mut self,
        l: &Layout,
        grad: (&Storage, &Layout),
        state: &mut [&mut Storage],
        update: &OptimUpdate,
    ) -> Result<bool> {
        const OP: &str = "optimizer step";
        one!(self, |p, w| {
            let g = same(OP, p, grad.0)?;
            let dev = p.device();
            let mut bufs = Vec::with_capacity(state.len());
            for b in state.iter_mut() {
                let d = b.device();
                bufs.push(Variant::of_mut(b).ok_or_else(|| devices_differ(OP, dev, d))?);
            }
            p.optimizer_update(l, (g, grad.1), &mut bufs, update)
        })
    }

    pub(crate) fn batch_norm_stats(
        &self,
        l: &Layout,
        c: usize,
        s: usize,
    ) -> Result<Option<[Vec<f64>; 2]>> {
        one!(self, |st, w| st.batch_norm_stats(l, c, s))
    }
    pub(crate) fn channel_affine(
        &self,
        l: &Layout,
        scale: &Storage,
        shift: &Storage,
        s: usize,
        relu: bool,
    ) -> Result<Option<Storage>> {
        one!(self, |x, w| {
            let (a, b) = (same("batch_norm", x, scale)?, same("batch_norm", x, shift)?);
            Ok(x.channel_affine(l, a, b, s, relu)?.map(w))
        })
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
        const OP: &str = "batch_norm_backward";
        one!(self, |g, wrap| {
            let x0 = same(OP, g, x.0)?;
            let w = w.map(|w| same(OP, g, w)).transpose()?;
            let gate = gate
                .map(|(a, b)| Ok::<_, Error>((same(OP, g, a)?, same(OP, g, b)?)))
                .transpose()?;
            Ok(g.batch_norm_backward(gl, (x0, x.1), w, stats, s, gate)?
                .map(wrap))
        })
    }
    pub(crate) fn norm_part(&self, l: &Layout, p: f64) -> Result<Option<f64>> {
        one!(self, |s, w| s.norm_part(l, p))
    }

    // ---- indexing ----
    pub(crate) fn index_select(
        &self,
        l: &Layout,
        ids: &[usize],
        dims: [usize; 3],
    ) -> Result<Storage> {
        one!(self, |s, w| Ok(w(s.index_select(l, ids, dims)?)))
    }
    pub(crate) fn index_add_inplace(
        &mut self,
        ids: &[usize],
        src: &Storage,
        sl: &Layout,
        dims: [usize; 3],
    ) -> Result<()> {
        two!("index_add", self, src, |o, s, w| o
            .index_add_inplace(ids, s, sl, dims))
    }
    pub(crate) fn gather(
        &self,
        l: &Layout,
        ids: &[usize],
        index_dims: &[usize],
        dim: usize,
    ) -> Result<Storage> {
        one!(self, |s, w| Ok(w(s.gather(l, ids, index_dims, dim)?)))
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
        two!("scatter_add", self, src, |o, s, w| o
            .scatter_add_inplace(l, ids, index_dims, s, sl, dim))
    }
}

/// Values on their way to the host (see [`Storage::read_async`]).
pub(crate) enum HostValues<T> {
    Ready(Vec<T>),
    #[cfg(feature = "gpu")]
    Gpu(crate::backend::wgpu::HostRead),
}

impl<T: WithDType> HostValues<T> {
    pub(crate) async fn get(self) -> Result<Vec<T>> {
        match self {
            HostValues::Ready(v) => Ok(v),
            #[cfg(feature = "gpu")]
            HostValues::Gpu(r) => r.values().await,
        }
    }
}
