//! The models the CLI trains. Until `might::nn` lands they are built from core ops; the
//! `Net` trait mirrors `might::nn::Module` so either can stand behind it.

use might::{DType, Result, Tensor};

/// A trainable model (same shape as `might::nn::Module`).
pub trait Net: Send + Sync {
    fn forward(&self, x: &Tensor) -> Result<Tensor>;
    fn named_parameters(&self) -> Vec<(String, Tensor)>;
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        vec![]
    }
    fn train(&mut self, _mode: bool) {}
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters().into_iter().map(|(_, t)| t).collect()
    }
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(|t| t.numel()).sum()
    }
    fn state_dict(&self) -> Vec<(String, Tensor)> {
        let mut s = self.named_parameters();
        s.extend(self.named_buffers());
        s
    }
}

/// A fully connected layer with PyTorch's default init: weight and bias uniform in
/// `±1/sqrt(fan_in)`.
pub struct Dense {
    pub weight: Tensor,
    pub bias: Tensor,
}

impl Dense {
    pub fn new(fan_in: usize, fan_out: usize) -> Result<Dense> {
        let b = 1.0 / (fan_in as f64).sqrt();
        Ok(Dense {
            weight: Tensor::uniform([fan_out, fan_in], -b, b, DType::F32)?.with_requires_grad(),
            bias: Tensor::uniform([fan_out], -b, b, DType::F32)?.with_requires_grad(),
        })
    }
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.weight.t()?)?.add(&self.bias)
    }
}

/// `flatten → Linear(in, hidden) → ReLU → Linear(hidden, classes)`; parameter names match a
/// PyTorch `nn.Sequential(Flatten, Linear, ReLU, Linear)`.
pub struct Mlp {
    fc1: Dense,
    fc2: Dense,
}

impl Mlp {
    pub fn new(inputs: usize, hidden: usize, classes: usize) -> Result<Mlp> {
        Ok(Mlp {
            fc1: Dense::new(inputs, hidden)?,
            fc2: Dense::new(hidden, classes)?,
        })
    }
}

impl Net for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x.reshape([x.dims()[0], self.fc1.weight.dims()[1]])?;
        self.fc2.forward(&self.fc1.forward(&x)?.relu()?)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![
            ("1.weight".into(), self.fc1.weight.clone()),
            ("1.bias".into(), self.fc1.bias.clone()),
            ("3.weight".into(), self.fc2.weight.clone()),
            ("3.bias".into(), self.fc2.bias.clone()),
        ]
    }
}

/// Mean cross-entropy of `logits [b, c]` against class ids `targets [b]` (i64), and the number
/// of correct argmax predictions.
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    logits
        .log_softmax(-1)?
        .gather(1, &targets.unsqueeze(1)?)?
        .mean_all()?
        .neg()
}

/// Number of rows of `logits` whose argmax equals the target.
pub fn correct(logits: &Tensor, targets: &Tensor) -> Result<usize> {
    let pred = logits.argmax(-1, false)?.to_vec::<i64>()?;
    let t = targets.to_vec::<i64>()?;
    Ok(pred.iter().zip(&t).filter(|(a, b)| a == b).count())
}

/// The convolutional models (need conv ops).
pub fn cnn(
    _chw: [usize; 3],
    _classes: usize,
) -> std::result::Result<Box<dyn Net>, crate::train::CliError> {
    Err(crate::train::CliError(
        "model cnn is not available in this build yet (conv layers missing)".into(),
    ))
}
