//! `Tensor`: a cheap-to-clone handle to reference-counted storage seen through a `Layout`.
//!
//! Cloning a tensor or taking a view shares the storage; the buffer is freed when the last
//! handle goes. Autograd state (the node that produced the tensor, the accumulated `.grad` of a
//! leaf) rides along in the same allocation.

mod creation;
pub mod random;
mod view;

pub use view::{Infer, ShapeSpec};

use crate::autograd::Node;
use crate::{DType, Device, Error, Layout, Result, Shape, Storage, WithDType};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Unique id of a tensor handle (views get their own ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(u64);

impl TensorId {
    fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        TensorId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

pub(crate) struct TensorImpl {
    pub(crate) id: TensorId,
    pub(crate) storage: Arc<RwLock<Storage>>,
    pub(crate) layout: Layout,
    pub(crate) dtype: DType,
    pub(crate) requires_grad: AtomicBool,
    /// How this tensor was computed (None for leaves and for tensors outside the graph).
    pub(crate) node: Mutex<Option<Arc<Node>>>,
    /// Accumulated gradient (leaves).
    pub(crate) grad: Mutex<Option<Tensor>>,
}

/// An N-dimensional array with autograd. See the crate docs for an overview.
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<TensorImpl>);

impl Tensor {
    /// Wrap storage + layout into a new tensor outside the autograd graph.
    pub(crate) fn from_parts(storage: Arc<RwLock<Storage>>, layout: Layout) -> Tensor {
        let dtype = storage.read().unwrap().dtype();
        Tensor(Arc::new(TensorImpl {
            id: TensorId::new(),
            storage,
            layout,
            dtype,
            requires_grad: AtomicBool::new(false),
            node: Mutex::new(None),
            grad: Mutex::new(None),
        }))
    }

    /// A fresh contiguous tensor owning `storage`.
    pub(crate) fn from_storage(storage: Storage, shape: impl Into<Shape>) -> Tensor {
        Tensor::from_parts(Arc::new(RwLock::new(storage)), Layout::contiguous(shape))
    }

    /// A fresh contiguous tensor from a backend result (`Result<Storage>`).
    pub(crate) fn from_result(storage: Result<Storage>, shape: impl Into<Shape>) -> Result<Tensor> {
        Ok(Tensor::from_storage(storage?, shape))
    }

    /// Host data on the CPU, which takes it as it is (moving a `Vec` cannot fail).
    fn cpu_host<T: WithDType>(data: Vec<T>, shape: impl Into<Shape>) -> Tensor {
        Tensor::from_host(data, shape)
            .unwrap_or_else(|_| unreachable!("the CPU backend adopts host vectors"))
    }

    /// Host data on the CPU (the default device; `to_device` moves it).
    fn from_host<T: WithDType>(data: Vec<T>, shape: impl Into<Shape>) -> Result<Tensor> {
        Tensor::from_result(Storage::from_vec(Device::Cpu, data), shape)
    }

    /// A view of the same storage with another layout (no autograd recording).
    pub(crate) fn with_layout(&self, layout: Layout) -> Tensor {
        Tensor::from_parts(self.0.storage.clone(), layout)
    }

    /// Build a tensor from a `Vec` and a shape: `Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2])`.
    #[track_caller]
    pub fn from_vec<T: WithDType>(data: Vec<T>, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape = shape.into();
        if shape.checked_numel() != Some(data.len()) {
            return Err(Error::shape(
                "from_vec",
                format!(
                    "{} elements cannot have shape {shape} ({} elements)",
                    data.len(),
                    shape
                        .checked_numel()
                        .map_or("overflow".into(), |n| n.to_string())
                ),
            ));
        }
        Tensor::from_host(data, shape)
    }

    /// Like `from_vec`, copying from a slice.
    #[track_caller]
    pub fn from_slice<T: WithDType>(data: &[T], shape: impl Into<Shape>) -> Result<Tensor> {
        Tensor::from_vec(data.to_vec(), shape)
    }

    /// A 1-D tensor from a slice (like `torch.tensor([..])`).
    pub fn new<T: WithDType>(data: &[T]) -> Tensor {
        Tensor::cpu_host(data.to_vec(), [data.len()])
    }

    /// A 0-d tensor.
    pub fn scalar<T: WithDType>(v: T) -> Tensor {
        Tensor::cpu_host(vec![v], ())
    }

    pub fn id(&self) -> TensorId {
        self.0.id
    }
    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }
    pub fn shape(&self) -> &Shape {
        &self.0.layout.shape
    }
    /// The sizes of each dim (PyTorch `size()`).
    pub fn dims(&self) -> &[usize] {
        self.0.layout.dims()
    }
    /// Size of one dim; negative counts from the end.
    #[track_caller]
    pub fn size(&self, dim: isize) -> Result<usize> {
        let d = self.0.layout.dim("size", dim)?;
        Ok(self.dims()[d])
    }
    pub fn rank(&self) -> usize {
        self.dims().len()
    }
    pub fn numel(&self) -> usize {
        self.0.layout.numel()
    }
    pub fn strides(&self) -> &[usize] {
        self.0.layout.strides()
    }
    pub fn storage_offset(&self) -> usize {
        self.0.layout.offset()
    }
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }
    /// Where the data lives: the storage's device (which `Module::to_device` may move, for
    /// every view of it at once).
    pub fn device(&self) -> Device {
        self.storage().device()
    }
    pub fn is_contiguous(&self) -> bool {
        self.0.layout.is_contiguous()
    }
    /// Do two tensors share one buffer?
    pub fn same_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0.storage, &other.0.storage)
    }

    pub(crate) fn storage(&self) -> RwLockReadGuard<'_, Storage> {
        self.0.storage.read().unwrap()
    }
    /// The buffer for writing. Every write goes through here, so the backend is told first:
    /// the CPU backend keeps packed copies of weights it may serve without reading them again
    /// only while it knows they have not been written.
    pub(crate) fn storage_mut(&self) -> RwLockWriteGuard<'_, Storage> {
        let g = self.0.storage.write().unwrap();
        g.touched();
        g
    }

    /// Move the whole storage under this tensor to `device` in place, with its gradient: every
    /// view of it and every handle (an optimizer's, a tied weight's) now sees it there. What
    /// `Module::to_device` does to each parameter and buffer (PyTorch's `module.to(device)`).
    pub(crate) fn move_storage_to(&self, device: Device) -> Result<()> {
        if let Some(g) = self.grad() {
            g.move_storage_to(device)?;
        }
        if self.device() == device {
            return Ok(());
        }
        let moved = {
            let s = self.storage();
            s.copy_to(&Layout::contiguous([s.len()]), device)?
        };
        *self.storage_mut() = moved;
        Ok(())
    }

    /// Read the elements (in logical order) as a `Vec<T>`; `T` must match the dtype.
    #[track_caller]
    pub fn to_vec<T: WithDType>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype() {
            return Err(Error::dtype(
                "to_vec",
                format!("tensor has dtype {}, asked for {}", self.dtype(), T::DTYPE),
            ));
        }
        self.storage().to_vec(self.layout())
    }

    /// [`Tensor::to_vec`] for code that must not block: in a browser a GPU tensor's values
    /// arrive only once the page's event loop runs, so `to_vec` cannot wait for them there.
    /// Elsewhere it gives what `to_vec` gives (on the GPU the copy is queued at the call, so
    /// several reads can be in flight).
    pub async fn to_vec_async<T: WithDType>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype() {
            return Err(Error::dtype(
                "to_vec_async",
                format!("tensor has dtype {}, asked for {}", self.dtype(), T::DTYPE),
            ));
        }
        // the storage lock is released before the wait
        let read = self.storage().read_async::<T>(self.layout())?;
        read.get().await
    }

    /// Elements converted to f64, whatever the dtype (handy for tests and printing).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        // reading back from a device cannot fail short of a lost device; print nothing then
        self.storage().to_f64_vec(self.layout()).unwrap_or_default()
    }

    /// The single element of a tensor with one element, as `T`.
    #[track_caller]
    pub fn to_scalar<T: WithDType>(&self) -> Result<T> {
        if self.numel() != 1 {
            return Err(Error::shape(
                "to_scalar",
                format!("expected one element, tensor has shape {}", self.shape()),
            ));
        }
        Ok(self.to_vec::<T>()?[0])
    }

    /// The single element as f64 (PyTorch `item()`).
    #[track_caller]
    pub fn item(&self) -> Result<f64> {
        if self.numel() != 1 {
            return Err(Error::shape(
                "item",
                format!("expected one element, tensor has shape {}", self.shape()),
            ));
        }
        Ok(self.to_f64_vec()[0])
    }

    /// The tensor on `device`: itself (shared) when already there, else a contiguous copy
    /// made through the host. Differentiable: the gradient goes back to the source device.
    #[track_caller]
    pub fn to_device(&self, device: Device) -> Result<Tensor> {
        let from = self.device();
        if from == device {
            return Ok(self.clone());
        }
        let out = self.storage().copy_to(self.layout(), device);
        let out = Tensor::from_result(out, self.shape())?;
        Ok(out.record("ToCopyBackward", &[self], move || {
            Box::new(move |g| Ok(vec![Some(g.to_device(from)?)]))
        }))
    }

    #[track_caller]
    pub(crate) fn check_same_dtype(&self, op: &str, other: &Tensor) -> Result<()> {
        if self.dtype() != other.dtype() {
            return Err(Error::dtype(
                op,
                format!(
                    "dtypes differ: lhs {} {} vs rhs {} {}",
                    self.dtype(),
                    self.shape(),
                    other.dtype(),
                    other.shape()
                ),
            ));
        }
        if self.device() != other.device() {
            return Err(Error::new(
                crate::ErrorKind::Device,
                op,
                format!("devices differ: {} vs {}", self.device(), other.device()),
            ));
        }
        Ok(())
    }

    #[track_caller]
    pub(crate) fn check_float(&self, op: &str) -> Result<()> {
        if !self.dtype().is_float() {
            return Err(Error::dtype(
                op,
                format!(
                    "expected a floating-point tensor, got {} with shape {}",
                    self.dtype(),
                    self.shape()
                ),
            ));
        }
        Ok(())
    }
}
