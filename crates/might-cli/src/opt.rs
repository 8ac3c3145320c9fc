//! Optimizers for the CLI, written with in-place core ops under `no_grad` (the same update
//! rules as `torch.optim.SGD` / `Adam` / `AdamW`). Their state is named tensors so that a
//! checkpoint can carry it.

use might::{Result, Tensor};

/// Optimizer state: named tensors and named scalars.
pub type State = (Vec<(String, Tensor)>, Vec<(String, f64)>);

pub trait Optim {
    /// Apply one update from the parameters' `.grad()`.
    fn step(&mut self) -> Result<()>;
    fn zero_grad(&mut self);
    /// Named state tensors (momentum buffers...) and scalars (step count).
    fn state(&self) -> State;
    /// Restore what `state` returned; missing or mis-shaped entries are an error.
    fn load_state(&mut self, t: &[(String, Tensor)], s: &[(String, f64)]) -> Result<()>;
}

fn zero_grads(params: &[Tensor]) {
    for p in params {
        p.zero_grad();
    }
}

fn find<'a>(t: &'a [(String, Tensor)], name: &str, like: &Tensor) -> Result<&'a Tensor> {
    let v = t
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
        .ok_or_else(|| might::Error::format("optimizer", format!("checkpoint has no {name}")))?;
    if v.dims() != like.dims() {
        return Err(might::Error::shape(
            "optimizer",
            format!(
                "{name} has shape {} but the parameter is {}",
                v.shape(),
                like.shape()
            ),
        ));
    }
    Ok(v)
}

/// SGD with (heavy-ball) momentum: `b = m·b + g; p -= lr·b` (PyTorch's form).
pub struct Sgd {
    params: Vec<Tensor>,
    bufs: Vec<Option<Tensor>>,
    lr: f64,
    momentum: f64,
    weight_decay: f64,
}

impl Sgd {
    pub fn new(params: Vec<Tensor>, lr: f64, momentum: f64, weight_decay: f64) -> Sgd {
        let bufs = vec![None; params.len()];
        Sgd {
            params,
            bufs,
            lr,
            momentum,
            weight_decay,
        }
    }
}

impl Optim for Sgd {
    fn step(&mut self) -> Result<()> {
        let _g = might::no_grad();
        for (p, buf) in self.params.iter().zip(&mut self.bufs) {
            let Some(mut g) = p.grad() else { continue };
            if self.weight_decay != 0.0 {
                g = g.add(&p.mul_scalar(self.weight_decay)?)?;
            }
            if self.momentum != 0.0 {
                match buf {
                    Some(b) => {
                        b.affine_(self.momentum, 0.0)?.add_scaled_(&g, 1.0)?;
                    }
                    None => *buf = Some(g.deep_clone()?.detach()),
                }
                p.add_scaled_(buf.as_ref().expect("set above"), -self.lr)?;
            } else {
                p.add_scaled_(&g, -self.lr)?;
            }
        }
        Ok(())
    }
    fn zero_grad(&mut self) {
        zero_grads(&self.params)
    }
    fn state(&self) -> State {
        let t = self
            .bufs
            .iter()
            .enumerate()
            .filter_map(|(i, b)| {
                b.as_ref()
                    .map(|b| (format!("momentum_buffer.{i}"), b.clone()))
            })
            .collect();
        (t, vec![])
    }
    fn load_state(&mut self, t: &[(String, Tensor)], _s: &[(String, f64)]) -> Result<()> {
        for (i, p) in self.params.iter().enumerate() {
            let name = format!("momentum_buffer.{i}");
            self.bufs[i] = if t.iter().any(|(n, _)| *n == name) {
                Some(find(t, &name, p)?.deep_clone()?.detach())
            } else {
                None
            };
        }
        Ok(())
    }
}

/// Adam / AdamW (`decoupled = true`: weight decay applied to the weights, not the gradient).
pub struct Adam {
    params: Vec<Tensor>,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    step: u64,
    lr: f64,
    betas: (f64, f64),
    eps: f64,
    weight_decay: f64,
    decoupled: bool,
}

impl Adam {
    pub fn new(params: Vec<Tensor>, lr: f64, weight_decay: f64, decoupled: bool) -> Result<Adam> {
        let m = params
            .iter()
            .map(Tensor::zeros_like)
            .collect::<Result<Vec<_>>>()?;
        let v = params
            .iter()
            .map(Tensor::zeros_like)
            .collect::<Result<Vec<_>>>()?;
        Ok(Adam {
            params,
            m,
            v,
            step: 0,
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay,
            decoupled,
        })
    }
}

impl Optim for Adam {
    fn step(&mut self) -> Result<()> {
        let _g = might::no_grad();
        self.step += 1;
        let (b1, b2) = self.betas;
        let bc1 = 1.0 - b1.powi(self.step as i32);
        let bc2 = 1.0 - b2.powi(self.step as i32);
        for ((p, m), v) in self.params.iter().zip(&self.m).zip(&self.v) {
            let Some(mut g) = p.grad() else { continue };
            if self.weight_decay != 0.0 {
                if self.decoupled {
                    p.affine_(1.0 - self.lr * self.weight_decay, 0.0)?;
                } else {
                    g = g.add(&p.mul_scalar(self.weight_decay)?)?;
                }
            }
            m.affine_(b1, 0.0)?.add_scaled_(&g, 1.0 - b1)?;
            v.affine_(b2, 0.0)?.add_scaled_(&g.square()?, 1.0 - b2)?;
            let denom = v.sqrt()?.affine(1.0 / bc2.sqrt(), self.eps)?;
            p.add_scaled_(&m.div(&denom)?, -self.lr / bc1)?;
        }
        Ok(())
    }
    fn zero_grad(&mut self) {
        zero_grads(&self.params)
    }
    fn state(&self) -> State {
        let mut t = Vec::new();
        for (i, (m, v)) in self.m.iter().zip(&self.v).enumerate() {
            t.push((format!("exp_avg.{i}"), m.clone()));
            t.push((format!("exp_avg_sq.{i}"), v.clone()));
        }
        (t, vec![("step".into(), self.step as f64)])
    }
    fn load_state(&mut self, t: &[(String, Tensor)], s: &[(String, f64)]) -> Result<()> {
        let _g = might::no_grad();
        for (i, p) in self.params.iter().enumerate() {
            self.m[i].copy_(find(t, &format!("exp_avg.{i}"), p)?)?;
            self.v[i].copy_(find(t, &format!("exp_avg_sq.{i}"), p)?)?;
        }
        self.step = s
            .iter()
            .find(|(n, _)| n == "step")
            .map_or(0, |(_, v)| *v as u64);
        Ok(())
    }
}
