//! One GPU as the backend sees it: the wgpu device and queue, the compiled kernels, the cache
//! of freed buffers, and the command encoder that queues work.
//!
//! Work is queued, not synchronised per op: each kernel launch records a compute pass into
//! the pending encoder, which is submitted every [`BATCH`] launches (or before an upload or a
//! read). The host waits only in [`Ctx::read`], when it needs the values. wgpu orders
//! submissions, so a buffer freed by one op and reused by a later one is safe without waits;
//! an upload into a recycled buffer first submits the pending work that may still read it.

use crate::{Error, ErrorKind, Result};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Kernel launches recorded before the pending encoder is submitted.
const BATCH: usize = 64;
/// Invocations per workgroup of the one-thread-per-element kernels.
pub(crate) const WG: u32 = 256;

/// One adapter's device, queue and caches.
pub(crate) struct Ctx {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) info: wgpu::AdapterInfo,
    pub(crate) max_groups: u32,
    pipelines: Mutex<HashMap<String, Arc<wgpu::ComputePipeline>>>,
    pool: Mutex<Pool>,
    /// Parameter buffers free for reuse, by size class: kept apart from the tensor pool
    /// because `write_buffer` lands before the pending launches run, so a parameter buffer
    /// must never be a buffer those launches still read. They come back here only once the
    /// launches that used them are submitted.
    meta_free: Mutex<HashMap<u64, Vec<wgpu::Buffer>>>,
    pending: Mutex<Pending>,
    /// The first error wgpu reported outside an op's own checks (validation, out of memory).
    error: Arc<Mutex<Option<String>>>,
    /// Times the host waited for the GPU to read values back, and buffers created (not
    /// reused): what tests check to see that work is queued and buffers are recycled.
    pub(crate) reads: AtomicUsize,
    pub(crate) created: AtomicUsize,
}

/// Freed buffers by size class, kept for reuse (a caching allocator like the CPU's).
struct Pool {
    free: HashMap<u64, Vec<wgpu::Buffer>>,
    bytes: u64,
    limit: u64,
}

struct Pending {
    enc: Option<wgpu::CommandEncoder>,
    launches: usize,
    /// Parameter buffers of the recorded launches, recycled once submitted.
    meta: Vec<wgpu::Buffer>,
}

/// Size class of a request: powers of two up to 1 MiB, then whole MiB.
fn size_class(bytes: u64) -> u64 {
    let b = bytes.max(16);
    if b <= 1 << 20 {
        b.next_power_of_two()
    } else {
        b.div_ceil(1 << 20) << 20
    }
}

/// A device buffer owned by one storage (returned to the pool when dropped).
pub(crate) struct GpuBuf {
    pub(crate) raw: Option<wgpu::Buffer>,
    pub(crate) ctx: Arc<Ctx>,
}

impl GpuBuf {
    pub(crate) fn raw(&self) -> &wgpu::Buffer {
        self.raw.as_ref().expect("a live buffer")
    }
}

impl Drop for GpuBuf {
    fn drop(&mut self) {
        if let Some(b) = self.raw.take() {
            self.ctx.recycle(b);
        }
    }
}

static ADAPTERS: OnceLock<std::result::Result<Vec<wgpu::Adapter>, String>> = OnceLock::new();
static CTXS: OnceLock<Mutex<HashMap<usize, Arc<Ctx>>>> = OnceLock::new();

/// Every adapter wgpu finds (Vulkan, Metal, DX12; lavapipe counts), discovered once. In the
/// browser, the adapter [`init_async`] was given (none before it ran: WebGPU hands adapters
/// out only asynchronously).
pub(crate) fn adapters() -> std::result::Result<&'static [wgpu::Adapter], String> {
    #[cfg(target_arch = "wasm32")]
    return Ok(ADAPTERS
        .get()
        .and_then(|r| r.as_ref().ok())
        .map_or(&[], |v| v.as_slice()));
    #[cfg(not(target_arch = "wasm32"))]
    let r = ADAPTERS.get_or_init(|| {
        let inst = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        let mut v = pollster::block_on(inst.enumerate_adapters(wgpu::Backends::all()));
        // real GPUs first, then integrated, then software emulation
        let rank = |a: &wgpu::Adapter| match a.get_info().device_type {
            wgpu::DeviceType::DiscreteGpu => 0,
            wgpu::DeviceType::IntegratedGpu => 1,
            wgpu::DeviceType::VirtualGpu => 2,
            wgpu::DeviceType::Other => 3,
            wgpu::DeviceType::Cpu => 4,
        };
        v.retain(|a| {
            a.get_downlevel_capabilities()
                .flags
                .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
        });
        v.sort_by_key(rank);
        Ok(v)
    });
    #[cfg(not(target_arch = "wasm32"))]
    r.as_ref().map(|v| v.as_slice()).map_err(|e| e.clone())
}

/// Open GPU `ordinal` without blocking and return its adapter's name. Native code may simply
/// call [`ctx`]; in the browser this is the only way in (WebGPU's adapter and device requests
/// are promises, and blocking the page's only thread on them would never end). Afterwards
/// every op finds the context as usual.
pub(crate) async fn init_async(ordinal: usize) -> Result<String> {
    #[cfg(target_arch = "wasm32")]
    if ADAPTERS.get().is_none() {
        let inst = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        let opts = wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        };
        let found = inst
            .request_adapter(&opts)
            .await
            .map(|a| vec![a])
            .map_err(|e| format!("WebGPU gave no adapter: {e}"));
        let _ = ADAPTERS.set(found);
    }
    let map = CTXS.get_or_init(Default::default);
    if let Some(c) = map.lock().unwrap_or_else(|e| e.into_inner()).get(&ordinal) {
        return Ok(c.info.name.clone());
    }
    let ad = adapter(ordinal)?;
    let c = Arc::new(Ctx::from_adapter(ad).await?);
    let name = c.info.name.clone();
    map.lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(ordinal)
        .or_insert(c);
    Ok(name)
}

/// Adapter `ordinal`, or the error naming those found.
fn adapter(ordinal: usize) -> Result<&'static wgpu::Adapter> {
    #[cfg(target_arch = "wasm32")]
    if let Some(Err(e)) = ADAPTERS.get() {
        return Err(device_error("Device::gpu", e.clone()));
    }
    let ads = adapters().map_err(|e| device_error("Device::gpu", e))?;
    ads.get(ordinal).ok_or_else(|| {
        let found: Vec<String> = ads
            .iter()
            .enumerate()
            .map(|(i, a)| format!("gpu:{i} = {}", a.get_info().name))
            .collect();
        let hint = if cfg!(target_arch = "wasm32") {
            "in a browser, await might::init_gpu first (it asks WebGPU for the adapter)"
        } else {
            "on Linux without a GPU, Mesa's software Vulkan driver provides one \
             (apt-get install mesa-vulkan-drivers)"
        };
        device_error(
            "Device::gpu",
            format!(
                "no GPU adapter {ordinal}: wgpu found {} ({}); {hint}",
                ads.len(),
                if found.is_empty() {
                    "none".to_string()
                } else {
                    found.join(", ")
                }
            ),
        )
    })
}

/// The context of GPU `ordinal`, created on first use.
pub(crate) fn ctx(ordinal: usize) -> Result<Arc<Ctx>> {
    let map = CTXS.get_or_init(Default::default);
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = map.get(&ordinal) {
        return Ok(c.clone());
    }
    let c = Arc::new(Ctx::new(ordinal)?);
    map.insert(ordinal, c.clone());
    Ok(c)
}

#[track_caller]
pub(crate) fn device_error(op: &str, msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Device, op, msg)
}

impl Ctx {
    fn new(ordinal: usize) -> Result<Ctx> {
        let ad = adapter(ordinal)?;
        #[cfg(not(target_arch = "wasm32"))]
        return pollster::block_on(Ctx::from_adapter(ad));
        // unreachable in practice: `adapter` finds none before `init_async` ran, which
        // creates the context itself
        #[cfg(target_arch = "wasm32")]
        Err(device_error(
            "Device::gpu",
            format!(
                "{}: in a browser, await might::init_gpu first",
                ad.get_info().name
            ),
        ))
    }

    async fn from_adapter(ad: &wgpu::Adapter) -> Result<Ctx> {
        let limits = ad.limits();
        let desc = wgpu::DeviceDescriptor {
            label: Some("might"),
            required_features: wgpu::Features::empty(),
            required_limits: wgpu::Limits {
                max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
                max_buffer_size: limits.max_buffer_size,
                max_storage_buffers_per_shader_stage: limits
                    .max_storage_buffers_per_shader_stage
                    .min(8),
                ..wgpu::Limits::downlevel_defaults()
            },
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        let (device, queue) = ad
            .request_device(&desc)
            .await
            .map_err(|e| device_error("Device::gpu", format!("{}: {e}", ad.get_info().name)))?;
        let error: Arc<Mutex<Option<String>>> = Arc::default();
        let sink = error.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut s = sink.lock().unwrap_or_else(|p| p.into_inner());
            if s.is_none() {
                *s = Some(e.to_string());
            }
        }));
        Ok(Ctx {
            max_groups: limits.max_compute_workgroups_per_dimension.min(65535),
            device,
            queue,
            info: ad.get_info(),
            pipelines: Mutex::default(),
            meta_free: Mutex::default(),
            pool: Mutex::new(Pool {
                free: HashMap::new(),
                bytes: 0,
                limit: 1 << 30,
            }),
            pending: Mutex::new(Pending {
                enc: None,
                launches: 0,
                meta: Vec::new(),
            }),
            error,
            reads: AtomicUsize::new(0),
            created: AtomicUsize::new(0),
        })
    }

    /// The error wgpu reported asynchronously since the last check, if any, as the op's
    /// error (reported once: later work is unaffected by it).
    pub(crate) fn check(&self, op: &str) -> Result<()> {
        let mut s = self.error.lock().unwrap_or_else(|p| p.into_inner());
        match s.take() {
            Some(e) => Err(device_error(op, format!("the GPU reported: {e}"))),
            None => Ok(()),
        }
    }

    /// A buffer of at least `bytes` (from the cache when one of its size class is free).
    pub(crate) fn alloc(self: &Arc<Self>, op: &str, bytes: u64) -> Result<GpuBuf> {
        let class = size_class(bytes);
        if class > self.device.limits().max_storage_buffer_binding_size {
            return Err(device_error(
                op,
                format!(
                    "a buffer of {bytes} bytes exceeds this GPU's limit of {} bytes per binding",
                    self.device.limits().max_storage_buffer_binding_size
                ),
            ));
        }
        let cached = {
            let mut p = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            let b = p.free.get_mut(&class).and_then(|v| v.pop());
            if b.is_some() {
                p.bytes -= class;
            }
            b
        };
        let raw = match cached {
            Some(b) => b,
            None => {
                self.created.fetch_add(1, Ordering::Relaxed);
                self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: class,
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_SRC
                        | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            }
        };
        Ok(GpuBuf {
            raw: Some(raw),
            ctx: self.clone(),
        })
    }

    fn recycle(&self, b: wgpu::Buffer) {
        let mut p = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        let size = b.size();
        if p.bytes + size <= p.limit {
            p.bytes += size;
            p.free.entry(size).or_default().push(b);
        }
    }

    pub(crate) fn cached_bytes(&self) -> usize {
        self.pool.lock().unwrap_or_else(|e| e.into_inner()).bytes as usize
    }
    pub(crate) fn set_cache_limit(&self, bytes: usize) {
        self.meta_free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        let mut p = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        p.limit = bytes as u64;
        if p.bytes > p.limit {
            p.free.clear();
            p.bytes = 0;
        }
    }

    /// Copy `data` into `buf` (after the queued work that may still read its old contents).
    pub(crate) fn upload(&self, buf: &GpuBuf, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.flush();
        self.queue.write_buffer(buf.raw(), 0, data);
    }

    /// Submit the queued launches (does not wait for them).
    pub(crate) fn flush(&self) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(enc) = p.enc.take() {
            self.queue.submit([enc.finish()]);
        }
        p.launches = 0;
        let meta = std::mem::take(&mut p.meta);
        drop(p);
        let mut free = self.meta_free.lock().unwrap_or_else(|e| e.into_inner());
        for b in meta {
            free.entry(b.size()).or_default().push(b);
        }
    }

    /// The compiled kernel `key`, compiling `src()` the first time.
    fn pipeline(&self, key: &str, src: impl FnOnce() -> String) -> Arc<wgpu::ComputePipeline> {
        let mut m = self.pipelines.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = m.get(key) {
            return p.clone();
        }
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(key),
                source: wgpu::ShaderSource::Wgsl(src().into()),
            });
        let p = Arc::new(
            self.device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(key),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                }),
        );
        m.insert(key.to_string(), p.clone());
        p
    }

    /// Queue kernel `key` over `groups` workgroups with `meta` (binding 0, the sizes, layouts
    /// and scalars, as u32 words) and `bufs` (bindings 1..).
    pub(crate) fn launch(
        self: &Arc<Self>,
        op: &str,
        key: &str,
        src: impl FnOnce() -> String,
        meta: &[u32],
        bufs: &[&wgpu::Buffer],
        groups: u64,
    ) -> Result<()> {
        if groups == 0 {
            return Ok(());
        }
        let pipe = self.pipeline(key, src);
        let mut words = meta.to_vec();
        if words.is_empty() {
            words.push(0);
        }
        let class = size_class((words.len() * 4) as u64);
        let reused = {
            let mut free = self.meta_free.lock().unwrap_or_else(|e| e.into_inner());
            free.get_mut(&class).and_then(|v| v.pop())
        };
        let mraw = match reused {
            Some(b) => b,
            None => self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("params"),
                size: class,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
        };
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.queue.write_buffer(&mraw, 0, &bytes);
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: mraw.as_entire_binding(),
        }];
        for (i, b) in bufs.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: b.as_entire_binding(),
            });
        }
        let bg = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipe.get_bind_group_layout(0),
            entries: &entries,
        });
        let (gx, gy) = self.grid(op, groups)?;
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let enc = p.enc.get_or_insert_with(|| {
            self.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
        });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(&pipe);
            pass.set_bind_group(0, &bg, &[]);
            pass.dispatch_workgroups(gx, gy, 1);
        }
        p.meta.push(mraw);
        p.launches += 1;
        let full = p.launches >= BATCH;
        drop(p);
        if full {
            self.flush();
        }
        Ok(())
    }

    /// `groups` workgroups as an `x × y` grid within the per-dimension limit (kernels compute
    /// their group index as `x + y · num_workgroups.x` and skip the excess).
    fn grid(&self, op: &str, groups: u64) -> Result<(u32, u32)> {
        let m = self.max_groups as u64;
        if groups <= m {
            return Ok((groups as u32, 1));
        }
        let y = groups.div_ceil(m);
        if y > m {
            return Err(device_error(
                op,
                format!("{groups} workgroups exceed the grid limit"),
            ));
        }
        Ok((m as u32, y as u32))
    }

    /// The first `words` 32-bit words of `buf`, waiting for the queued work.
    pub(crate) fn read(&self, op: &str, buf: &wgpu::Buffer, words: usize) -> Result<Vec<u32>> {
        if words == 0 {
            return Ok(Vec::new());
        }
        let (staging, slot) = self.start_read(buf, words);
        self.wait(op)?;
        // In a browser `poll` cannot wait: the mapping is answered only once the page's event
        // loop runs again, which a synchronous read would never let happen.
        let answer = slot.take().unwrap_or_else(|| {
            Err(if cfg!(target_arch = "wasm32") {
                "in a browser the GPU answers asynchronously: read with Tensor::to_vec_async"
                    .to_string()
            } else {
                "the GPU did not answer".to_string()
            })
        });
        self.finish_read(op, &staging, answer)
    }

    /// [`Ctx::read`] without blocking: the copy is queued now, the words arrive when the
    /// returned read is awaited.
    pub(crate) fn read_async(
        self: &Arc<Self>,
        op: &str,
        buf: &wgpu::Buffer,
        words: usize,
    ) -> PendingRead {
        let staged = (words > 0).then(|| self.start_read(buf, words));
        PendingRead {
            ctx: self.clone(),
            op: op.to_string(),
            staged,
        }
    }

    /// Queue the copy of `buf`'s first `words` words into a mappable buffer and ask for its
    /// mapping; the answer lands in the returned slot.
    fn start_read(&self, buf: &wgpu::Buffer, words: usize) -> (wgpu::Buffer, Arc<MapSlot>) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let bytes = (words * 4) as u64;
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.flush();
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        enc.copy_buffer_to_buffer(buf, 0, &staging, 0, bytes);
        self.queue.submit([enc.finish()]);
        let slot = Arc::new(MapSlot::default());
        let answer = slot.clone();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            answer.set(r.map_err(|e| e.to_string()))
        });
        (staging, slot)
    }

    /// The words of a mapped `staging` buffer, once the mapping's `answer` came.
    fn finish_read(
        &self,
        op: &str,
        staging: &wgpu::Buffer,
        answer: std::result::Result<(), String>,
    ) -> Result<Vec<u32>> {
        self.check(op)?;
        answer.map_err(|e| device_error(op, format!("reading back: {e}")))?;
        let slice = staging.slice(..);
        let view = slice
            .get_mapped_range()
            .map_err(|e| device_error(op, format!("reading back: {e}")))?;
        let out = view
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        drop(view);
        staging.unmap();
        Ok(out)
    }

    /// Block until the submitted work has run (natively; a browser's `poll` returns at once).
    fn wait(&self, op: &str) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: None,
            })
            .map(|_| ())
            .map_err(|e| device_error(op, format!("waiting for the GPU: {e}")))
    }

    /// Wait until every queued kernel has run (`torch.cuda.synchronize`).
    pub(crate) fn synchronize(&self, op: &str) -> Result<()> {
        self.flush();
        self.wait(op)?;
        self.check(op)
    }
}

/// A buffer mapping's answer: `Err` holds wgpu's message.
type MapAnswer = std::result::Result<(), String>;

/// Where a buffer mapping's answer lands, and who to wake when it does.
#[derive(Default)]
struct MapSlot {
    state: Mutex<(Option<MapAnswer>, Option<std::task::Waker>)>,
}

impl MapSlot {
    fn set(&self, answer: MapAnswer) {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        g.0 = Some(answer);
        if let Some(w) = g.1.take() {
            w.wake();
        }
    }

    fn take(&self) -> Option<MapAnswer> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .take()
    }
}

/// A read-back queued by [`Ctx::read_async`]; `words().await` gives the values.
pub(crate) struct PendingRead {
    ctx: Arc<Ctx>,
    op: String,
    staged: Option<(wgpu::Buffer, Arc<MapSlot>)>,
}

impl PendingRead {
    pub(crate) async fn words(self) -> Result<Vec<u32>> {
        let Some((staging, slot)) = self.staged else {
            return Ok(Vec::new());
        };
        // natively the mapping is answered inside `poll`; in a browser, by the event loop
        #[cfg(not(target_arch = "wasm32"))]
        self.ctx.wait(&self.op)?;
        let answer = std::future::poll_fn(|cx| {
            let mut g = slot.state.lock().unwrap_or_else(|e| e.into_inner());
            match g.0.take() {
                Some(a) => std::task::Poll::Ready(a),
                None => {
                    g.1 = Some(cx.waker().clone());
                    std::task::Poll::Pending
                }
            }
        })
        .await;
        self.ctx.finish_read(&self.op, &staging, answer)
    }
}
