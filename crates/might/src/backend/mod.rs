//! The backend interface: what a device must provide for every op to run on it.
//!
//! Ops (`ops/`, `tensor/`) check shapes and dtypes, record autograd, and then call one of the
//! primitives below on [`crate::Storage`], which dispatches on the device to the backend's own
//! storage type. A backend is a folder under `backend/` with a type implementing
//! [`BackendStorage`] (its buffers and kernels) and one implementing [`BackendDevice`] (how to
//! make buffers on it). Adding one touches `device.rs`, `storage.rs` and that folder.
//!
//! Every kernel receives the [`Layout`] of each operand, so views (transposes, slices,
//! broadcasts) reach it without a copy. Elementwise operators are named values
//! ([`UnaryOp`], [`BinaryOp`], [`CmpOp`], [`ReduceOp`]), not closures, so a backend that
//! compiles its kernels (WGSL, CUDA) maps each one to its own code.
//!
//! Methods with a default body are optional fast paths: the default answers `None` (or
//! `false`) and the op composes the same result from primitives, so a new backend is correct
//! on day one and overrides only what it makes fast.

pub mod cpu;
pub mod geom;
#[cfg(feature = "reference-backend")]
pub(crate) mod reference;
#[cfg(any(feature = "gpu", feature = "reference-backend"))]
pub(crate) mod walk;
#[cfg(feature = "gpu")]
pub(crate) mod wgpu;

use crate::tensor::random::Generator;
use crate::{DType, Device, Layout, MatmulPrecision, Result, WithDType};

/// Elementwise functions of one float tensor (the parameterised ones carry their scalars).
///
/// Each also names its derivative: [`BackendStorage::unary_backward`] computes
/// `g · f'(x)` from the output gradient and the saved input (or output, see
/// [`UnaryOp::backward_uses_output`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    Neg,
    Abs,
    Exp,
    Log,
    Log1p,
    Sqrt,
    Rsqrt,
    Sin,
    Cos,
    Tan,
    Tanh,
    Sigmoid,
    Relu,
    /// exact GELU `x·Φ(x)`
    Gelu,
    /// GELU, tanh approximation
    GeluTanh,
    Silu,
    Softplus,
    /// `x · clamp(x + 3, 0, 6) / 6`
    HardSwish,
    Square,
    /// the error function `2/√π ∫₀ˣ e^{-t²} dt`
    Erf,
    Sign,
    Floor,
    Ceil,
    Round,
    /// `x^p`
    Powf(f64),
    /// clamp into `[lo, hi]` (infinite bounds are open)
    Clamp(f64, f64),
    /// `x·mul + add` (also defined on integer dtypes, exactly through f64)
    Affine(f64, f64),
}

impl UnaryOp {
    /// The op's name in error messages.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Log1p => "log1p",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tan => "tan",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Gelu => "gelu",
            UnaryOp::GeluTanh => "gelu_tanh",
            UnaryOp::Silu => "silu",
            UnaryOp::Softplus => "softplus",
            UnaryOp::HardSwish => "hardswish",
            UnaryOp::Square => "square",
            UnaryOp::Erf => "erf",
            UnaryOp::Sign => "sign",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
            UnaryOp::Powf(_) => "pow",
            UnaryOp::Clamp(..) => "clamp",
            UnaryOp::Affine(..) => "affine",
        }
    }

    /// Whether the derivative is computed from the output `y` (else from the input `x`).
    pub fn backward_uses_output(self) -> bool {
        matches!(
            self,
            UnaryOp::Exp
                | UnaryOp::Sqrt
                | UnaryOp::Rsqrt
                | UnaryOp::Tanh
                | UnaryOp::Tan
                | UnaryOp::Sigmoid
                | UnaryOp::Relu
        )
    }
}

/// Elementwise arithmetic of two tensors of one dtype (floats IEEE, integers wrapping, integer
/// division by zero gives 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
    /// `max(x, 0) - x·y + ln(1 + e^-|x|)`: binary cross-entropy of logits `x` and targets `y`.
    BceWithLogits,
    /// The share of the gradient of `maximum(a, b)` that goes to `a`: 1, 0, or ½ on ties.
    MaximumGradWeight,
    /// The same for `minimum`.
    MinimumGradWeight,
}

impl BinaryOp {
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Maximum | BinaryOp::MaximumGradWeight => "maximum",
            BinaryOp::Minimum | BinaryOp::MinimumGradWeight => "minimum",
            BinaryOp::BceWithLogits => "binary_cross_entropy_with_logits",
        }
    }
}

/// Comparisons; the result is a bool tensor (NaN compares false to everything, `ne` true).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Reductions over the dims marked in a mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// ints, u8 and bool sum into int64 (like PyTorch); f16/bf16 accumulate in f32
    Sum,
    /// f32, f64 and int64
    Prod,
    /// logical and/or of a bool tensor
    All,
    Any,
}

pub use geom::{AttnGeom, ConvGeom, PoolGeom};

/// The target of a fused cross-entropy: a class index per row (`None`: ignored), checked
/// against the class count on the host, or probability rows passed beside it.
#[derive(Clone, Copy, Debug)]
pub enum CeTarget<'a> {
    Index(&'a [Option<usize>]),
    Prob,
}

/// One optimizer step of one parameter, with its hyper-parameters (PyTorch's semantics; the
/// state buffers, in this order, have the parameter's shape):
/// - `Sgd`: `[momentum_buffer]` when `momentum > 0`, else none. `d = g + wd·p`;
///   `buf = first ? d : μ·buf + (1 - dampening)·d`; `d = nesterov ? d + μ·buf : buf`;
///   `p -= lr·d`.
/// - `Adam`: `[exp_avg, exp_avg_sq (, max_exp_avg_sq with amsgrad)]`. `p *= decay` (AdamW's
///   `1 - lr·wd`), `d = g + l2·p` (Adam's weight decay); `m = lerp(m, d, 1 - β1)`,
///   `v = β2·v + (1 - β2)·d²`, `p -= lr / (1 - β1^step) · m / (sqrt(v) / sqrt(1 - β2^step) + eps)`.
/// - `RmsProp`: `[square_avg (, momentum_buffer) (, grad_avg when centered)]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OptimUpdate {
    Sgd {
        lr: f64,
        weight_decay: f64,
        momentum: f64,
        dampening: f64,
        nesterov: bool,
        /// the first step (the momentum buffer starts as the gradient)
        first: bool,
    },
    Adam {
        lr: f64,
        beta1: f64,
        beta2: f64,
        eps: f64,
        l2: f64,
        decay: f64,
        /// the step being taken, from 1
        step: u64,
    },
    RmsProp {
        lr: f64,
        weight_decay: f64,
        alpha: f64,
        eps: f64,
        momentum: f64,
    },
}

/// `Σ|x|^p` of `values` (max `|x|` when `p` is infinite, NaN winning), in f64: the
/// reference every backend's [`BackendStorage::norm_part`] agrees with.
pub fn norm_part_of(it: &mut dyn Iterator<Item = f64>, p: f64) -> f64 {
    if p.is_infinite() {
        it.fold(0.0, |m, x| {
            if x.abs() > m || x.is_nan() {
                x.abs()
            } else {
                m
            }
        })
    } else if p == 2.0 {
        it.map(|x| x * x).sum()
    } else if p == 1.0 {
        it.map(f64::abs).sum()
    } else {
        it.map(|x| x.abs().powf(p)).sum()
    }
}

/// How to make buffers on one kind of device.
pub(crate) trait BackendDevice {
    type Storage: BackendStorage;
    fn zeros(&self, dtype: DType, n: usize) -> Result<Self::Storage>;
    /// A buffer holding `values` converted to `dtype` (creation functions build their values
    /// on the host: arange, linspace, eye, full).
    fn storage_from_f64(
        &self,
        dtype: DType,
        values: &mut dyn Iterator<Item = f64>,
    ) -> Result<Self::Storage>;
    /// Take host data (a `Vec` of one of might's element types).
    fn storage_from_vec<T: WithDType>(&self, data: Vec<T>) -> Result<Self::Storage>;
    /// `n` samples of U(low, high) or N(mean, std) in `dtype`, drawn from `rng` in order.
    fn rand_uniform(
        &self,
        dtype: DType,
        n: usize,
        low: f64,
        high: f64,
        rng: &mut Generator,
    ) -> Result<Self::Storage>;
    fn rand_normal(
        &self,
        dtype: DType,
        n: usize,
        mean: f64,
        std: f64,
        rng: &mut Generator,
    ) -> Result<Self::Storage>;
    /// An f32 batch from u8 samples (each `channels` planes of `len / channels` pixels, side by
    /// side): `v as f32 * scale[c] + shift[c]` per pixel of channel `c`. What datasets of images
    /// build their batches with; uploading u8 and converting on the device moves a quarter of
    /// the bytes. The default converts on the host.
    fn storage_from_u8_images(
        &self,
        samples: &[&[u8]],
        channels: usize,
        scale: &[f32],
        shift: &[f32],
    ) -> Result<Self::Storage> {
        let mut out = Vec::with_capacity(samples.iter().map(|s| s.len()).sum());
        for s in samples {
            let plane = s.len() / channels.max(1);
            for (i, &v) in s.iter().enumerate() {
                let c = i / plane.max(1);
                out.push(v as f32 * scale[c] + shift[c]);
            }
        }
        self.storage_from_vec(out)
    }

    // ---- per-device settings (a device without one keeps these answers) ----
    /// Threads this device's kernels run on.
    fn num_threads(&self) -> usize {
        1
    }
    fn set_num_threads(&self, _n: usize) {}
    /// Internal precision of f32 matrix products.
    fn matmul_precision(&self) -> MatmulPrecision {
        MatmulPrecision::Highest
    }
    fn set_matmul_precision(&self, _p: MatmulPrecision) {}
    /// Bytes held by the device's cache of freed buffers.
    fn cached_bytes(&self) -> usize {
        0
    }
    /// Cap the buffer cache at `bytes` (0 disables it), freeing what no longer fits.
    fn set_cache_limit(&self, _bytes: usize) {}
    /// Free every cached buffer.
    fn empty_cache(&self) {}
}

/// A device buffer and the kernels that read it. Results are fresh contiguous buffers in the
/// logical order of the output shape unless a method says otherwise.
pub(crate) trait BackendStorage: Sized {
    fn dtype(&self) -> DType;
    /// Elements in the buffer.
    fn len(&self) -> usize;
    fn device(&self) -> Device;
    /// The buffer is about to be written (in place, through `Tensor::storage_mut`): whatever
    /// the backend keeps derived from its contents must not be served unchecked any more.
    fn touched(&self) {}

    // ---- reading back to the host ----
    /// The elements `layout` selects, in logical order; `T` matches the dtype (checked by
    /// the caller).
    fn to_vec<T: WithDType>(&self, layout: &Layout) -> Result<Vec<T>>;
    /// The elements converted to f64.
    fn to_f64_vec(&self, layout: &Layout) -> Result<Vec<f64>>;

    // ---- copies and casts ----
    fn copy_contiguous(&self, layout: &Layout) -> Result<Self>;
    fn to_dtype(&self, layout: &Layout, dtype: DType) -> Result<Self>;
    /// `self[dst] = src[src_layout]` (same dtype, `src_layout` already broadcast to `dst`).
    fn assign(&mut self, dst: &Layout, src: &Self, src_layout: &Layout) -> Result<()>;

    // ---- elementwise ----
    fn unary(&self, layout: &Layout, op: UnaryOp) -> Result<Self>;
    /// `g · op'(s)` where `s` is the saved input or output (see
    /// [`UnaryOp::backward_uses_output`]); both layouts have the output's shape.
    fn unary_backward(&self, gl: &Layout, saved: &Self, sl: &Layout, op: UnaryOp) -> Result<Self>;
    /// `(op(x), op'(x))` from one evaluation, for a contiguous float `x` (the fused GELU).
    fn unary_with_grad(&self, _layout: &Layout, _op: UnaryOp) -> Result<Option<(Self, Self)>> {
        Ok(None)
    }
    /// Both layouts are already broadcast to the output shape.
    fn binary(&self, l: &Layout, rhs: &Self, rl: &Layout, op: BinaryOp) -> Result<Self>;
    /// `self[l] = op(self[l], rhs[rl])` in place.
    fn binary_inplace(&mut self, l: &Layout, rhs: &Self, rl: &Layout, op: BinaryOp) -> Result<()>;
    /// `self += alpha · rhs` in place in one pass; `false` when not provided for this dtype.
    fn add_scaled_inplace(
        &mut self,
        _l: &Layout,
        _rhs: &Self,
        _rl: &Layout,
        _alpha: f64,
    ) -> Result<bool> {
        Ok(false)
    }
    /// `self = self · mul + add` in place; `false` when not provided for this dtype.
    fn affine_inplace(&mut self, _l: &Layout, _mul: f64, _add: f64) -> Result<bool> {
        Ok(false)
    }
    fn cmp(&self, l: &Layout, rhs: &Self, rl: &Layout, op: CmpOp) -> Result<Self>;
    /// `cond ? a : b` where `self` is the bool condition.
    fn where_cond(&self, cl: &Layout, a: &Self, al: &Layout, b: &Self, bl: &Layout)
        -> Result<Self>;

    // ---- reductions ----
    /// Reduce the dims where `mask` is true (kept as size-1 dims in the output order).
    fn reduce(&self, l: &Layout, mask: &[bool], op: ReduceOp) -> Result<Self>;
    /// Values and int64 indices of the max (`max`) or min over the masked dim.
    fn arg_reduce(&self, l: &Layout, mask: &[bool], max: bool) -> Result<(Self, Self)>;
    /// Softmax (or log-softmax) of each contiguous row of `n` elements of a contiguous
    /// float tensor; `None` for dtypes the backend computes through f32.
    fn softmax_rows(&self, l: &Layout, n: usize, log: bool) -> Result<Option<Self>>;
    /// The softmax backward from the output gradient `self` and the output `y`, both
    /// contiguous with rows of `n`.
    fn softmax_backward_rows(
        &self,
        gl: &Layout,
        y: &Self,
        yl: &Layout,
        n: usize,
        log: bool,
    ) -> Result<Self>;

    // ---- matrix products ----
    /// Batched `[.., m, k] @ [.., k, n]` with both layouts broadcast to full batch dims,
    /// under the device's f32 matmul precision.
    fn matmul(&self, l: &Layout, rhs: &Self, rl: &Layout) -> Result<Self>;
    /// The same plus a bias row of `n` elements added inside the product (a linear layer);
    /// `None` when not provided for this dtype.
    fn matmul_bias(
        &self,
        _l: &Layout,
        _rhs: &Self,
        _rl: &Layout,
        _bias: &Self,
        _bl: &Layout,
    ) -> Result<Option<Self>> {
        Ok(None)
    }

    // ---- convolution and pooling (contiguous NCHW operands; a layout gives the offset) ----
    /// `conv2d(x, w) + bias`, then ReLU when `relu`.
    #[allow(clippy::too_many_arguments)]
    fn conv2d(
        &self,
        l: &Layout,
        w: &Self,
        wl: &Layout,
        bias: Option<(&Self, &Layout)>,
        geom: &ConvGeom,
        relu: bool,
    ) -> Result<Self>;
    /// `conv2d` with `residual` (shaped like the output) added before the ReLU, in the conv's
    /// own output pass; `None` where the backend has no such pass (the caller adds it after).
    #[allow(clippy::too_many_arguments)]
    fn conv2d_add(
        &self,
        _l: &Layout,
        _w: &Self,
        _wl: &Layout,
        _bias: Option<(&Self, &Layout)>,
        _residual: (&Self, &Layout),
        _geom: &ConvGeom,
        _relu: bool,
    ) -> Result<Option<Self>> {
        Ok(None)
    }
    /// Gradients of input, weight and bias (each when asked in `need`) from the output
    /// gradient `g`; `y` is the forward output when it went through ReLU.
    #[allow(clippy::too_many_arguments)]
    fn conv2d_backward(
        &self,
        l: &Layout,
        w: &Self,
        wl: &Layout,
        g: &Self,
        gl: &Layout,
        y: Option<(&Self, &Layout)>,
        geom: &ConvGeom,
        need: [bool; 3],
    ) -> Result<[Option<Self>; 3]>;
    /// Max pooling: the values and the int64 flat index `iy * W + ix` of each.
    fn max_pool2d(&self, l: &Layout, geom: &PoolGeom) -> Result<(Self, Self)>;
    /// Max pooling's values alone (inference): a backend may skip the indices.
    fn max_pool2d_values(&self, l: &Layout, geom: &PoolGeom) -> Result<Self> {
        Ok(self.max_pool2d(l, geom)?.0)
    }
    /// `self` is the output gradient.
    fn max_pool2d_backward(
        &self,
        l: &Layout,
        indices: &Self,
        il: &Layout,
        geom: &PoolGeom,
    ) -> Result<Self>;
    fn avg_pool2d(&self, l: &Layout, geom: &PoolGeom) -> Result<Self>;
    fn avg_pool2d_backward(&self, l: &Layout, geom: &PoolGeom) -> Result<Self>;
    /// `planes` planes of `hw` pooled to `out`.
    fn adaptive_avg_pool2d(
        &self,
        l: &Layout,
        planes: usize,
        hw: [usize; 2],
        out: [usize; 2],
    ) -> Result<Self>;
    fn adaptive_avg_pool2d_backward(
        &self,
        l: &Layout,
        planes: usize,
        hw: [usize; 2],
        out: [usize; 2],
    ) -> Result<Self>;

    // ---- fused ops (optional: `None` means the op composes primitives instead) ----
    /// LayerNorm over contiguous rows of `n`: `(y, mean, rstd)`, the statistics one per row
    /// in the input's dtype; weight and bias are contiguous `n`-element buffers.
    fn layer_norm(
        &self,
        _l: &Layout,
        _w: Option<(&Self, &Layout)>,
        _b: Option<(&Self, &Layout)>,
        _n: usize,
        _eps: f64,
    ) -> Result<Option<[Self; 3]>> {
        Ok(None)
    }
    /// The backward of [`layer_norm`](Self::layer_norm) from the output gradient `self`:
    /// `(dx, dw, db)`. Provided by every backend that provides the forward.
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_backward(
        &self,
        _gl: &Layout,
        _x: (&Self, &Layout),
        _w: Option<(&Self, &Layout)>,
        _mean: &Self,
        _rstd: &Self,
        _n: usize,
    ) -> Result<[Self; 3]> {
        Err(crate::Error::invalid(
            "layer_norm_backward",
            "this backend has no fused LayerNorm",
        ))
    }

    /// Cross-entropy of contiguous logit rows of `c` against `target` (probability rows in
    /// `probs`), label smoothing `eps` and class weights `cw`: the per-row losses (on the
    /// host, f64) and the rows' log-sum-exps.
    #[allow(clippy::too_many_arguments)]
    fn cross_entropy(
        &self,
        _l: &Layout,
        _c: usize,
        _target: CeTarget<'_>,
        _probs: Option<(&Self, &Layout)>,
        _eps: f64,
        _cw: Option<&[f64]>,
    ) -> Result<Option<(Vec<f64>, Self)>> {
        Ok(None)
    }
    /// Its backward: `scale[row] · (softmax - smoothed target)` (`scale` one value for all
    /// rows, or one per row). Provided by every backend that provides the forward.
    #[allow(clippy::too_many_arguments)]
    fn cross_entropy_backward(
        &self,
        _l: &Layout,
        _lse: &Self,
        _c: usize,
        _target: CeTarget<'_>,
        _probs: Option<(&Self, &Layout)>,
        _eps: f64,
        _cw: Option<&[f64]>,
        _scale: &[f64],
    ) -> Result<Self> {
        Err(crate::Error::invalid(
            "cross_entropy_backward",
            "this backend has no fused cross-entropy",
        ))
    }

    /// `softmax(scale · x)` over contiguous rows of `s` keys with the causal mask: row `r` is
    /// query `r % t`, which sees keys `0..=query + offset`; masked entries exactly 0.
    fn causal_softmax(
        &self,
        _l: &Layout,
        _t: usize,
        _s: usize,
        _scale: f64,
        _offset: usize,
    ) -> Result<Option<Self>> {
        Ok(None)
    }
    /// Its backward from the output gradient `self` and the output `y` (both contiguous):
    /// `scale·y·(g - Σ g·y)` on the visible keys. Provided with the forward.
    #[allow(clippy::too_many_arguments)]
    fn causal_softmax_backward(
        &self,
        _gl: &Layout,
        _y: &Self,
        _yl: &Layout,
        _t: usize,
        _s: usize,
        _scale: f64,
        _offset: usize,
    ) -> Result<Self> {
        Err(crate::Error::invalid(
            "causal_softmax_backward",
            "this backend has no fused causal softmax",
        ))
    }

    /// Fused attention `softmax(scale · q kᵀ) v` with `self` = q, laid out as `geom` says:
    /// the output and what the backward needs saved (backend-private, e.g. the probabilities).
    /// For a packed geometry q, k and v are one buffer.
    fn attention(&self, _k: &Self, _v: &Self, _geom: &AttnGeom) -> Result<Option<(Self, Self)>> {
        Ok(None)
    }
    /// Its backward: the gradients of q, k, v (one buffer when packed) from the output
    /// gradient `dy`, pair `i`'s rows at `dy_offsets[i]` with row stride `dy_row_stride`.
    /// Provided with the forward.
    #[allow(clippy::too_many_arguments)]
    fn attention_backward(
        &self,
        _k: &Self,
        _v: &Self,
        _saved: &Self,
        _dy: &Self,
        _dy_offsets: &[usize],
        _dy_row_stride: usize,
        _geom: &AttnGeom,
    ) -> Result<Vec<Self>> {
        Err(crate::Error::invalid(
            "attention_backward",
            "this backend has no fused attention",
        ))
    }

    /// Training BatchNorm statistics of a contiguous `[N, C, S]` buffer: per-channel mean
    /// and biased variance, accumulated in f64 and read back; `None` when not provided.
    fn batch_norm_stats(&self, _l: &Layout, _c: usize, _s: usize) -> Result<Option<[Vec<f64>; 2]>> {
        Ok(None)
    }
    /// `y = x·scale[ch] + shift[ch]` over `[N, C, S]` planes, through a ReLU when `relu`
    /// (the BatchNorm forward once the statistics are folded into `scale` and `shift`).
    fn channel_affine(
        &self,
        _l: &Layout,
        _scale: &Self,
        _shift: &Self,
        _s: usize,
        _relu: bool,
    ) -> Result<Option<Self>> {
        Ok(None)
    }
    /// The training BatchNorm backward from the output gradient `self` (contiguous, like
    /// `x`): `(dx, dw, db)`. `gate`: the forward's `(scale, shift)` when it went through a
    /// ReLU, whose gate is recomputed from them. Provided with the two above.
    #[allow(clippy::too_many_arguments)]
    fn batch_norm_backward(
        &self,
        _gl: &Layout,
        _x: (&Self, &Layout),
        _w: Option<&Self>,
        _stats: (&[f64], &[f64]),
        _s: usize,
        _gate: Option<(&Self, &Self)>,
    ) -> Result<[Self; 3]> {
        Err(crate::Error::invalid(
            "batch_norm_backward",
            "this backend has no fused BatchNorm",
        ))
    }

    /// One optimizer step in place: the contiguous parameter `self`, its gradient (same
    /// shape and dtype, contiguous) and the state buffers; `false` when not provided.
    fn optimizer_update(
        &mut self,
        _l: &Layout,
        _grad: (&Self, &Layout),
        _state: &mut [&mut Self],
        _update: &OptimUpdate,
    ) -> Result<bool> {
        Ok(false)
    }

    /// `Σ|x|^p` of the elements (max `|x|` for infinite `p`) accumulated in f64 and read back
    /// ([`norm_part_of`] defines it); `None` when not provided for this buffer.
    fn norm_part(&self, _l: &Layout, _p: f64) -> Result<Option<f64>> {
        Ok(None)
    }

    // ---- indexing (indices checked against their bound by the op, on the host) ----
    /// Slices along the middle dim of a contiguous `[outer, n, inner]` view picked by `ids`.
    fn index_select(&self, l: &Layout, ids: &[usize], dims: [usize; 3]) -> Result<Self>;
    /// `self[o, ids[i], j] += src[o, i, j]` in place, `self` a contiguous `[outer, n, inner]`.
    fn index_add_inplace(
        &mut self,
        ids: &[usize],
        src: &Self,
        sl: &Layout,
        dims: [usize; 3],
    ) -> Result<()>;
    /// `out[..i..] = self[..ids[..i..]..]` along `dim`; the output has `index_dims`.
    fn gather(&self, l: &Layout, ids: &[usize], index_dims: &[usize], dim: usize) -> Result<Self>;
    /// `self[..ids[..i..]..] += src[..i..]` along `dim`, in place (`l` is self's layout).
    #[allow(clippy::too_many_arguments)]
    fn scatter_add_inplace(
        &mut self,
        l: &Layout,
        ids: &[usize],
        index_dims: &[usize],
        src: &Self,
        sl: &Layout,
        dim: usize,
    ) -> Result<()>;
}
