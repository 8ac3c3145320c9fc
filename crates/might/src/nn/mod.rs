//! Neural-network building blocks: the [`Module`] trait, [`Sequential`], layers, initialisers
//! ([`init`]) and losses ([`functional`]).
//!
//! Parameters are ordinary tensors with `requires_grad` set; a module hands out clones of their
//! handles (sharing storage), so an optimizer or a loader that writes into them in place
//! (`copy_`, `add_scaled_` under [`crate::no_grad`]) updates the module itself. Names follow
//! PyTorch (`fc1.weight`, `0.bias`, `layers.0.weight`) so state dicts can be exchanged.
//!
//! ```
//! use might::nn::{cross_entropy, CrossEntropyOptions, Linear, Module, ReLU, Sequential};
//! use might::{DType, Tensor};
//! let model = Sequential::new()
//!     .add(Linear::new(4, 16, true)?)
//!     .add(ReLU)
//!     .add(Linear::new(16, 3, true)?);
//! assert_eq!(model.named_parameters()[2].0, "2.weight");
//! let x = Tensor::randn([8, 4], DType::F32)?;
//! let y = Tensor::rand_int(0, 3, [8])?;
//! let loss = cross_entropy(&model.forward(&x)?, &y, &CrossEntropyOptions::default())?;
//! loss.backward()?;
//! {
//!     let _g = might::no_grad(); // one step of plain gradient descent
//!     for p in model.parameters() {
//!         p.add_scaled_(&p.grad().unwrap(), -0.1)?;
//!     }
//! }
//! # Ok::<(), might::Error>(())
//! ```

mod activation;
mod activation_ext;
mod attention;
mod conv;
mod conv_transpose;
pub mod functional;
pub mod init;

mod group_norm;
pub(crate) mod layers;
pub(crate) use attention::average_fully_masked;
mod loss;
mod norm;
mod resample;
mod similarity;
pub mod state_dict;

pub use activation::{LogSoftmax, ReLU, SiLU, Sigmoid, Softmax, Tanh, GELU};
pub use activation_ext::{
    Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid, Mish, ReLU6, Softsign, CELU, ELU, SELU,
};
pub use attention::{
    causal_softmax, key_keep_from_mask, masked_attention, scaled_dot_product_attention, MhaConfig,
    MultiheadAttention,
};
pub use conv::{
    AdaptiveAvgPool2d, AvgPool2d, Conv1d, Conv1dConfig, Conv2d, Conv2dConfig, MaxPool2d,
};
pub use conv_transpose::{ConvTranspose1d, ConvTranspose2d, ConvTransposeConfig};
pub use functional::{
    binary_cross_entropy_with_logits, cross_entropy, huber_loss, l1_loss, mse_loss, nll_loss,
    CrossEntropyOptions, Reduction,
};
pub use group_norm::{GroupNorm, InstanceNorm, InstanceNorm1d, InstanceNorm2d};
pub use layers::{Dropout, Embedding, Flatten, Identity, Linear};
pub use norm::{BatchNorm1d, BatchNorm2d, LayerNorm, RMSNorm};
pub use resample::{
    AdaptiveMaxPool2d, MaxPool1d, ReflectionPad2d, ReplicationPad2d, Upsample, ZeroPad2d,
};
pub use similarity::{kl_div, CosineSimilarity, KLDivLoss, KlDivReduction};
pub use state_dict::{load_into, load_state_dict, LoadReport};

use crate::{Device, Result, Tensor};

/// A layer or a model: a forward function plus named parameters and buffers.
///
/// Only `forward` and `named_parameters` are required; everything else has a default that
/// derives from them. Containers override `train` to reach their children.
pub trait Module: Send + Sync {
    /// Run the layer on one input.
    fn forward(&self, x: &Tensor) -> Result<Tensor>;

    /// Trainable tensors, with PyTorch-style dotted names, in registration order.
    fn named_parameters(&self) -> Vec<(String, Tensor)>;

    /// Non-trainable state saved with the model (BatchNorm running statistics...).
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        vec![]
    }

    /// Switch training mode (dropout active, batch statistics) on or off.
    fn train(&mut self, _mode: bool) {}

    /// Is the module in training mode?
    fn is_training(&self) -> bool {
        true
    }

    /// The parameters without their names (what optimizers take).
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }

    /// Total number of trainable scalars.
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(|t| t.numel()).sum()
    }

    /// Everything needed to restore the module: parameters then buffers.
    fn state_dict(&self) -> Vec<(String, Tensor)> {
        let mut v = self.named_parameters();
        v.extend(self.named_buffers());
        v
    }

    /// Copy `tensors` into the parameters and buffers with the same names, in place
    /// (PyTorch's `module.load_state_dict(sd, strict)`; see [`load_into`]).
    #[track_caller]
    fn load_state_dict(&self, tensors: &[(String, Tensor)], strict: bool) -> Result<LoadReport> {
        load_into(&self.state_dict(), tensors, strict)
    }

    /// Move every parameter and buffer to `device`, in place (PyTorch's `module.to(device)`):
    /// the tensors keep their identity, so an optimizer built on them, tied weights and views
    /// follow; their gradients move too.
    fn to_device(&self, device: Device) -> Result<()> {
        for (_, t) in self.state_dict() {
            t.move_storage_to(device)?;
        }
        Ok(())
    }

    /// The device of the first parameter (the CPU for a module without parameters).
    fn device(&self) -> Device {
        self.parameters()
            .first()
            .map_or(Device::Cpu, Tensor::device)
    }

    /// Evaluation mode (`train(false)`).
    fn eval(&mut self) {
        self.train(false)
    }

    /// `relu(self.forward(x))` as one fused op, for layers that have one (`Conv2d`,
    /// `BatchNorm1d`, `BatchNorm2d`);
    /// `None` for the rest. [`Sequential`] calls it for a layer followed by a [`ReLU`].
    fn forward_relu(&self, _x: &Tensor) -> Option<Result<Tensor>> {
        None
    }

    /// Whether this layer is a plain [`ReLU`] (which [`Sequential`] may fuse into the layer
    /// before it).
    fn is_relu(&self) -> bool {
        false
    }
}

/// Prefix every name with `prefix.` (how containers name their children's tensors).
pub fn prefixed(prefix: &str, items: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
    items
        .into_iter()
        .map(|(n, t)| (format!("{prefix}.{n}"), t))
        .collect()
}

/// Run modules one after another; children are named `"0"`, `"1"`, ... as in
/// `torch.nn.Sequential`.
pub struct Sequential {
    layers: Vec<Box<dyn Module>>,
    training: bool,
}

impl Default for Sequential {
    fn default() -> Self {
        Sequential::new()
    }
}

impl Sequential {
    pub fn new() -> Self {
        Sequential {
            layers: Vec::new(),
            training: true,
        }
    }

    /// Builder: append a layer.
    #[allow(clippy::should_implement_trait)]
    pub fn add(mut self, layer: impl Module + 'static) -> Self {
        self.layers.push(Box::new(layer));
        self
    }

    /// Append an already boxed layer.
    pub fn push(&mut self, layer: Box<dyn Module>) {
        self.layers.push(layer);
    }

    pub fn len(&self) -> usize {
        self.layers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// The `i`-th child.
    pub fn get(&self, i: usize) -> Option<&dyn Module> {
        self.layers.get(i).map(|b| b.as_ref())
    }
}

impl Module for Sequential {
    /// Each layer in turn; a layer followed by a [`ReLU`] runs both as one fused op when it
    /// has one ([`Module::forward_relu`]: `Conv2d`, BatchNorm), with the same values and
    /// gradients.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = x.clone();
        let mut i = 0;
        while let Some(l) = self.layers.get(i) {
            if self.layers.get(i + 1).is_some_and(|n| n.is_relu()) {
                if let Some(y) = l.forward_relu(&h) {
                    h = y?;
                    i += 2;
                    continue;
                }
            }
            h = l.forward(&h)?;
            i += 1;
        }
        Ok(h)
    }

    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        for (i, l) in self.layers.iter().enumerate() {
            v.extend(prefixed(&i.to_string(), l.named_parameters()));
        }
        v
    }

    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        for (i, l) in self.layers.iter().enumerate() {
            v.extend(prefixed(&i.to_string(), l.named_buffers()));
        }
        v
    }

    /// PyTorch order: each child's parameters then its buffers, child by child.
    fn state_dict(&self) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        for (i, l) in self.layers.iter().enumerate() {
            v.extend(prefixed(&i.to_string(), l.state_dict()));
        }
        v
    }

    fn train(&mut self, mode: bool) {
        self.training = mode;
        for l in &mut self.layers {
            l.train(mode);
        }
    }

    fn is_training(&self) -> bool {
        self.training
    }
}
