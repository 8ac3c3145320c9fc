//! The GPU backend (feature `gpu`): tensors in wgpu buffers, WGSL compute kernels, one code
//! path for Vulkan, Metal, DX12 and WebGPU. Tested on machines without a GPU through Mesa's
//! software Vulkan driver (lavapipe).
//!
//! Elements are 32 bits on the GPU: f32 as f32, int64 as i32 (values must fit in 32 bits;
//! uploads check), u8 and bool as u32. WGSL has no f64, so f64 tensors (and, for now, f16 and
//! bf16) are a clear error naming the dtype; convert with `to_dtype(DType::F32)` first.
//! Kernels take the operands' layouts, so views are read in place; results are contiguous.
//! Work is queued (see `context.rs`): the host waits only when it reads values.
//!
//! What a CUDA backend (cudarc, kernels compiled at run time by NVRTC) would reuse: the shape
//! of this folder. `context.rs` becomes the CUDA context, stream and module cache (NVRTC
//! keyed like the pipeline cache here), `GpuBuf` a pooled `CudaSlice`, and the kernel files
//! keep their structure (one generated source per op and dtype, sizes and layouts passed as
//! a parameter block in the `Meta` convention, `loc` walking strided views); only the source
//! strings change language. It would be its own folder with its own `Device` variant.

mod context;
mod dispatch;
mod elementwise;
mod fused;
mod index;
mod linalg;
mod pool;
mod reduce;
mod wgsl;

use crate::backend::walk::offsets;
use crate::backend::BackendDevice;
use crate::tensor::random::Generator;
use crate::{DType, Error, Layout, Result, WithDType};
use context::{device_error, Ctx, GpuBuf};
use std::sync::Arc;

/// A GPU buffer of `len` elements of `dtype`.
pub struct WgpuStorage {
    pub(crate) buf: GpuBuf,
    pub(crate) dtype: DType,
    pub(crate) len: usize,
    pub(crate) ordinal: usize,
    /// The host values of an int64 buffer uploaded from the host and not written since:
    /// class targets and token ids, which ops check on the host (bounds) before indexing.
    /// Reading them from here spares a wait for the GPU in every training step.
    pub(crate) shadow: Option<Arc<Vec<u32>>>,
}

impl std::fmt::Debug for WgpuStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "WgpuStorage(gpu:{}, {}, {} elements)",
            self.ordinal, self.dtype, self.len
        )
    }
}

/// GPU number `ordinal` (in the order wgpu lists adapters: discrete first, software last).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WgpuDevice(pub(crate) usize);

/// Open GPU `ordinal` (its device and queue), or the error naming the adapters found.
pub(crate) fn open(ordinal: usize) -> Result<()> {
    context::ctx(ordinal).map(|_| ())
}

/// Whether adapter `ordinal` is a hardware GPU (not a software emulation such as lavapipe).
pub(crate) fn is_hardware(ordinal: usize) -> bool {
    context::adapters().is_ok_and(|a| {
        a.get(ordinal).is_some_and(|a| {
            !matches!(
                a.get_info().device_type,
                wgpu::DeviceType::Cpu | wgpu::DeviceType::Other
            )
        })
    })
}

/// The name and driver of GPU `ordinal`.
pub(crate) fn adapter_name(ordinal: usize) -> String {
    match context::ctx(ordinal) {
        Ok(c) => format!("{} ({:?}, {})", c.info.name, c.info.backend, c.info.driver),
        Err(e) => e.to_string(),
    }
}

/// (host reads, buffers created) so far on GPU `ordinal`: counters for tests.
pub fn counters(ordinal: usize) -> (usize, usize) {
    use std::sync::atomic::Ordering::Relaxed;
    context::ctx(ordinal).map_or((0, 0), |c| (c.reads.load(Relaxed), c.created.load(Relaxed)))
}

/// Open GPU `ordinal` without blocking (the browser's only way in); returns the adapter name.
pub(crate) async fn init_async(ordinal: usize) -> Result<String> {
    context::init_async(ordinal).await
}

/// A read-back of a tensor's values, queued; [`HostRead::values`] awaits it.
pub(crate) enum HostRead {
    /// Already on the host (int64 values kept from their upload).
    Ready(Vec<u32>, DType),
    Pending(context::PendingRead, DType),
}

impl HostRead {
    /// The values, converted to `T` (the dtype was checked when the read was queued).
    pub(crate) async fn values<T: WithDType>(self) -> Result<Vec<T>> {
        let (words, dt) = match self {
            HostRead::Ready(w, dt) => (w, dt),
            HostRead::Pending(p, dt) => (p.words().await?, dt),
        };
        Ok(words
            .into_iter()
            .map(|w| T::from_f64(value_of(dt, w)))
            .collect())
    }
}

/// Wait for every queued kernel of GPU `ordinal`.
pub(crate) fn synchronize(ordinal: usize) -> Result<()> {
    context::ctx(ordinal)?.synchronize("synchronize")
}

/// The dtypes the GPU holds, else the error naming `op`.
#[track_caller]
pub(crate) fn check_dtype(op: &str, dt: DType) -> Result<()> {
    match dt {
        DType::F32 | DType::I64 | DType::U8 | DType::Bool => Ok(()),
        _ => Err(Error::dtype(
            op,
            format!(
                "dtype {dt} is not supported on the GPU (WGSL kernels compute in 32 bits: \
                 f32, int64 held as i32, u8, bool); convert with to_dtype(DType::F32) first"
            ),
        )),
    }
}

impl WgpuStorage {
    pub(crate) fn ctx(&self) -> &Arc<Ctx> {
        &self.buf.ctx
    }
    pub(crate) fn raw(&self) -> &wgpu::Buffer {
        self.buf.raw()
    }
    /// A new uninitialised buffer of `len` elements of `dtype` on `ctx`.
    pub(crate) fn empty(
        ctx: &Arc<Ctx>,
        ordinal: usize,
        op: &str,
        dtype: DType,
        len: usize,
    ) -> Result<Self> {
        check_dtype(op, dtype)?;
        let buf = ctx.alloc(op, (len.max(1) * 4) as u64)?;
        Ok(WgpuStorage {
            buf,
            dtype,
            len,
            ordinal,
            shadow: None,
        })
    }
    /// A buffer like `self`'s (same GPU) of `len` elements of `dtype`.
    pub(crate) fn new_like(&self, op: &str, dtype: DType, len: usize) -> Result<Self> {
        WgpuStorage::empty(self.ctx(), self.ordinal, op, dtype, len)
    }
    pub(crate) fn from_words(
        ordinal: usize,
        op: &str,
        dtype: DType,
        words: Vec<u32>,
    ) -> Result<Self> {
        let ctx = context::ctx(ordinal)?;
        let mut s = WgpuStorage::empty(&ctx, ordinal, op, dtype, words.len())?;
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        ctx.upload(&s.buf, &bytes);
        if dtype == DType::I64 {
            s.shadow = Some(Arc::new(words));
        }
        Ok(s)
    }
    /// The elements `layout` selects, read back without blocking: the copy is queued now.
    pub(crate) fn read_async(&self, op: &str, layout: &Layout) -> Result<HostRead> {
        if let Some(h) = &self.shadow {
            let w = offsets(layout).into_iter().map(|o| h[o]).collect();
            return Ok(HostRead::Ready(w, self.dtype));
        }
        let pending =
            if layout.is_contiguous() && layout.offset() == 0 && layout.numel() == self.len {
                self.ctx().read_async(op, self.raw(), self.len)
            } else {
                let c = elementwise::copy(self, layout)?;
                c.ctx().read_async(op, c.raw(), c.len)
            };
        Ok(HostRead::Pending(pending, self.dtype))
    }
    /// The contiguous elements of this buffer as host words (waits for the GPU).
    pub(crate) fn words(&self, op: &str, layout: &Layout) -> Result<Vec<u32>> {
        if let Some(h) = &self.shadow {
            return Ok(offsets(layout).into_iter().map(|o| h[o]).collect());
        }
        if layout.is_contiguous() && layout.offset() == 0 && layout.numel() == self.len {
            return self.ctx().read(op, self.raw(), self.len);
        }
        let c = elementwise::copy(self, layout)?;
        c.ctx().read(op, c.raw(), c.len)
    }
}

/// `v` as the 32-bit word holding it in a buffer of `dt` (int64 must fit in i32).
fn word_of(op: &str, dt: DType, v: f64) -> Result<u32> {
    Ok(match dt {
        DType::F32 => (v as f32).to_bits(),
        DType::I64 => {
            let i = v as i64;
            i32::try_from(i).map_err(|_| out_of_range(op, i))? as u32
        }
        DType::U8 => v as u8 as u32,
        DType::Bool => (v != 0.0) as u32,
        _ => {
            return Err(device_error(
                op,
                format!("dtype {dt} is not held on the GPU"),
            ))
        }
    })
}

#[track_caller]
fn out_of_range(op: &str, v: i64) -> Error {
    Error::invalid(
        op,
        format!("int64 value {v} does not fit the GPU's 32-bit integers (|v| < 2^31)"),
    )
}

/// The host value of word `w` of a `dt` buffer, as f64.
pub(crate) fn value_of(dt: DType, w: u32) -> f64 {
    match dt {
        DType::F32 => f32::from_bits(w) as f64,
        DType::I64 => w as i32 as f64,
        _ => w as f64,
    }
}

impl BackendDevice for WgpuDevice {
    type Storage = WgpuStorage;
    fn zeros(&self, dtype: DType, n: usize) -> Result<WgpuStorage> {
        WgpuStorage::from_words(self.0, "zeros", dtype, vec![0; n])
    }
    fn storage_from_f64(
        &self,
        dtype: DType,
        values: &mut dyn Iterator<Item = f64>,
    ) -> Result<WgpuStorage> {
        check_dtype("to_device", dtype)?;
        let w = values
            .map(|v| word_of("to_device", dtype, v))
            .collect::<Result<Vec<u32>>>()?;
        WgpuStorage::from_words(self.0, "to_device", dtype, w)
    }
    fn storage_from_vec<T: WithDType>(&self, data: Vec<T>) -> Result<WgpuStorage> {
        let dt = T::DTYPE;
        check_dtype("to_device", dt)?;
        let w = match dt {
            DType::F32 => data.iter().map(|v| (v.to_f64() as f32).to_bits()).collect(),
            DType::I64 => data
                .iter()
                .map(|v| {
                    let i = v.to_f64() as i64;
                    i32::try_from(i)
                        .map(|x| x as u32)
                        .map_err(|_| out_of_range("to_device", i))
                })
                .collect::<Result<Vec<u32>>>()?,
            _ => data.iter().map(|v| v.to_f64() as u32).collect(),
        };
        WgpuStorage::from_words(self.0, "to_device", dt, w)
    }
    /// The CPU backend's draws (same generator, same order), uploaded: a seeded program draws
    /// the same numbers on every device.
    fn rand_uniform(
        &self,
        dtype: DType,
        n: usize,
        low: f64,
        high: f64,
        g: &mut Generator,
    ) -> Result<WgpuStorage> {
        check_dtype("rand", dtype)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let u = g.next_f32() as f64;
            v.push(low + (high - low) * u);
        }
        self.storage_from_f64(dtype, &mut v.into_iter())
    }
    fn rand_normal(
        &self,
        dtype: DType,
        n: usize,
        mean: f64,
        std: f64,
        g: &mut Generator,
    ) -> Result<WgpuStorage> {
        check_dtype("randn", dtype)?;
        let v: Vec<f64> = (0..n).map(|_| mean + std * g.next_normal()).collect();
        self.storage_from_f64(dtype, &mut v.into_iter())
    }
    fn cached_bytes(&self) -> usize {
        context::ctx(self.0).map(|c| c.cached_bytes()).unwrap_or(0)
    }
    fn set_cache_limit(&self, bytes: usize) {
        if let Ok(c) = context::ctx(self.0) {
            c.set_cache_limit(bytes)
        }
    }
    fn empty_cache(&self) {
        if let Ok(c) = context::ctx(self.0) {
            let l = c.cached_bytes();
            c.set_cache_limit(0);
            c.set_cache_limit(l.max(1 << 30));
        }
    }
}

/// Parameters of one launch (binding 0): `[threads, slots.., layouts..]`.
pub(crate) struct Meta {
    w: Vec<u32>,
}

/// Slots 0 and 1 hold scalars; layouts and sizes go in slots from here on.
pub(crate) const FIRST_SLOT: usize = 2;

impl Meta {
    pub(crate) fn new(threads: usize, slots: usize) -> Meta {
        let mut w = vec![0u32; 1 + slots.max(FIRST_SLOT)];
        w[0] = threads as u32;
        Meta { w }
    }
    pub(crate) fn set(&mut self, k: usize, v: usize) -> &mut Self {
        self.w[1 + k] = v as u32;
        self
    }
    pub(crate) fn f(&mut self, k: usize, v: f64) -> &mut Self {
        self.w[1 + k] = (v as f32).to_bits();
        self
    }
    pub(crate) fn i(&mut self, k: usize, v: i64) -> &mut Self {
        self.w[1 + k] = v as i32 as u32;
        self
    }
    /// Slot `k` points at the description of `dims`/`strides`/`offset`.
    pub(crate) fn dims(
        &mut self,
        k: usize,
        dims: &[usize],
        strides: &[usize],
        offset: usize,
    ) -> &mut Self {
        self.w[1 + k] = self.w.len() as u32;
        self.w.push(dims.len() as u32);
        self.w.extend(dims.iter().map(|&d| d as u32));
        self.w.extend(strides.iter().map(|&s| s as u32));
        self.w.push(offset as u32);
        self
    }
    pub(crate) fn layout(&mut self, k: usize, l: &Layout) -> &mut Self {
        self.dims(k, l.dims(), l.strides(), l.offset())
    }
    pub(crate) fn words(&self) -> &[u32] {
        &self.w
    }
}

/// The header every kernel's source starts with: the entry point's builtins and `i`/`grp`.
pub(crate) const ENTRY: &str = "@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid.x;
    if (i >= prm[0]) { return; }
";

/// Workgroups for `n` threads of 256.
pub(crate) fn groups(n: usize) -> u64 {
    (n as u64).div_ceil(context::WG as u64)
}
