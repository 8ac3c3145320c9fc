//! PyTorch parity: `tests/fixtures/nn.json` (made by `tests/fixtures/gen_nn.py`) holds, per
//! case, a layer's weights, an input, the output gradient, and PyTorch's output, gradients and
//! buffers (computed in f64 from f32-rounded data). We build the same layer with `might`, copy
//! the weights into its *named* parameters (so names must match PyTorch's), run f32 forward and
//! backward, and compare. Runs on every device (`tests/common`): the layer is built on the CPU
//! and moved with `Module::to_device`, its inputs and constants made on the device.

mod common;

use might::nn::functional::{
    binary_cross_entropy_with_logits, cross_entropy, huber_loss, scaled_dot_product_attention,
    CrossEntropyOptions, Reduction,
};
use might::nn::{
    AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, Conv1d, Conv2d, Conv2dConfig,
    Embedding, LayerNorm, Linear, LogSoftmax, MaxPool2d, MhaConfig, Module, MultiheadAttention,
    RMSNorm, ReLU, SiLU, Sigmoid, Softmax, Tanh, GELU,
};
use might::{no_grad, DType, Device, Result, Tensor};
use serde_json::Value;
use std::collections::BTreeSet;

/// Relative tolerance, measured against the larger of |reference| and a tenth of the
/// tensor's largest magnitude (f32 rounding on near-zero entries of a tensor is relative to
/// its scale, not to the entry).
const RTOL: f64 = 1e-5;

fn load_fixture() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/nn.json");
    let text = std::fs::read_to_string(path).expect("fixture nn.json");
    serde_json::from_str(&text).expect("valid json")
}

fn data(v: &Value) -> (Vec<f64>, Vec<usize>) {
    let shape = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let d = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    (d, shape)
}

fn f32_tensor(v: &Value, dev: Device) -> Tensor {
    let (d, s) = data(v);
    common::on(dev, d, s).unwrap().to_dtype(DType::F32).unwrap()
}

fn i64_tensor(v: &Value, dev: Device) -> Tensor {
    let (d, s) = data(v);
    common::on(dev, d.into_iter().map(|x| x as i64).collect::<Vec<_>>(), s).unwrap()
}

fn compare(case: &str, what: &str, got: &Tensor, want: &Value) {
    let (w, s) = data(want);
    assert_eq!(got.dims(), s.as_slice(), "{case} {what}: shape");
    let g = got.to_f64_vec();
    let scale = w.iter().fold(0f64, |a, b| a.max(b.abs())) * 0.1;
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let tol = RTOL * b.abs().max(scale).max(1e-6);
        assert!(
            (a - b).abs() <= tol,
            "{case} {what}[{i}]: might {a} vs torch {b} (|diff| {:.3e} > {tol:.3e})",
            (a - b).abs()
        );
    }
}

/// A parameter-free function as a module.
type FwdFn = Box<dyn Fn(&Tensor) -> Result<Tensor> + Send + Sync>;

struct Func(FwdFn);

impl Module for Func {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        (self.0)(x)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![]
    }
}

/// Self-attention with a key padding mask.
struct MhaKpm(MultiheadAttention, Tensor);

impl Module for MhaKpm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.0.forward_attn(x, x, x, Some(&self.1), false, None)?.0)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.0.named_parameters()
    }
}

fn reduction(c: &Value) -> Reduction {
    match c["reduction"].as_str().unwrap() {
        "mean" => Reduction::Mean,
        "sum" => Reduction::Sum,
        _ => Reduction::None,
    }
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect()
}

/// The layer for a case, or `None` for a kind this file does not know.
fn build(kind: &str, c: &Value, dev: Device) -> Result<Option<Box<dyn Module>>> {
    let u = |k: &str| c[k].as_u64().unwrap() as usize;
    Ok(Some(match kind {
        "linear" => Box::new(Linear::new(u("in"), u("out"), c["bias"].as_bool().unwrap()).unwrap()),
        "layernorm" => Box::new(
            LayerNorm::with_config(&usizes(&c["shape"]), c["eps"].as_f64().unwrap(), true, true)
                .unwrap(),
        ),
        "rmsnorm" => {
            Box::new(RMSNorm::with_config(&usizes(&c["shape"]), c["eps"].as_f64(), true).unwrap())
        }
        "batchnorm1d" => Box::new(BatchNorm1d::new(u("c")).unwrap()),
        "batchnorm2d" => Box::new(BatchNorm2d::new(u("c")).unwrap()),
        "embedding" => Box::new(Embedding::new(u("n"), u("d")).unwrap()),
        "gelu" => Box::new(GELU::new()),
        "gelu_tanh" => Box::new(GELU::tanh()),
        "silu" => Box::new(SiLU),
        "tanh" => Box::new(Tanh),
        "sigmoid" => Box::new(Sigmoid),
        "relu" => Box::new(ReLU),
        "softmax" => Box::new(Softmax::new(-1)),
        "log_softmax" => Box::new(LogSoftmax::new(1)),
        "mha" => {
            let cfg = MhaConfig {
                batch_first: c["batch_first"].as_bool().unwrap(),
                ..Default::default()
            };
            let m = MultiheadAttention::new(u("e"), u("h"), cfg)?;
            if c.get("kpm").is_some() {
                let rows: Vec<Vec<bool>> = c["kpm"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| usizes(r).iter().map(|&v| v == 1).collect())
                    .collect();
                let n = rows[0].len();
                let kpm = common::on(dev, rows.concat(), [rows.len(), n])?;
                Box::new(MhaKpm(m, kpm))
            } else {
                Box::new(m)
            }
        }
        "sdpa" => {
            let (k, v, causal) = (
                f32_tensor(&c["k"], dev),
                f32_tensor(&c["v"], dev),
                c["causal"].as_bool().unwrap(),
            );
            Box::new(Func(Box::new(move |q| {
                scaled_dot_product_attention(q, &k, &v, None, 0.0, causal)
            })))
        }
        "cross_entropy" | "cross_entropy_prob" => {
            let t = if kind == "cross_entropy" {
                i64_tensor(&c["target"], dev)
            } else {
                f32_tensor(&c["target"], dev)
            };
            let o = CrossEntropyOptions {
                weight: c.get("weight").map(|w| f32_tensor(w, dev)),
                label_smoothing: c["label_smoothing"].as_f64().unwrap(),
                reduction: reduction(c),
                ..Default::default()
            };
            Box::new(Func(Box::new(move |x| cross_entropy(x, &t, &o))))
        }
        "bce_logits" => {
            let (t, r) = (f32_tensor(&c["target"], dev), reduction(c));
            Box::new(Func(Box::new(move |x| {
                binary_cross_entropy_with_logits(x, &t, r)
            })))
        }
        "huber" => {
            let (t, r, d) = (
                f32_tensor(&c["target"], dev),
                reduction(c),
                c["delta"].as_f64().unwrap(),
            );
            Box::new(Func(Box::new(move |x| huber_loss(x, &t, d, r))))
        }
        "conv2d" | "conv1d" => {
            let cfg = Conv2dConfig {
                stride: u("stride"),
                padding: u("padding"),
                dilation: u("dilation"),
                groups: u("groups"),
                bias: c["bias"].as_bool().unwrap(),
            };
            if kind == "conv2d" {
                Box::new(Conv2d::new(u("in"), u("out"), u("k"), cfg)?)
            } else {
                Box::new(Conv1d::new(u("in"), u("out"), u("k"), cfg)?)
            }
        }
        "maxpool2d" => Box::new(MaxPool2d::with_config(u("k"), u("stride"), u("padding"))),
        "avgpool2d" => Box::new(AvgPool2d::with_config(u("k"), u("stride"), u("padding"))),
        "adaptive_avgpool2d" => {
            let o = usizes(&c["out"]);
            Box::new(AdaptiveAvgPool2d::new([o[0], o[1]]))
        }
        _ => return Ok(None),
    }))
}

/// Load weights and buffers by name, run forward/backward, compare with PyTorch.
pub fn check_case(case: &Value, mut m: Box<dyn Module>, dev: Device) -> Result<()> {
    m.to_device(dev)?;
    let name = case["name"].as_str().unwrap();
    m.train(case["train"].as_bool().unwrap());
    let want_params: BTreeSet<&String> = case["params"].as_object().unwrap().keys().collect();
    let params = m.named_parameters();
    let have: BTreeSet<&String> = params.iter().map(|p| &p.0).collect();
    assert_eq!(have, want_params, "{name}: parameter names");
    {
        let _g = no_grad();
        for (n, p) in &params {
            assert_eq!(p.device(), dev, "{name}: {n} moved");
            p.copy_(&f32_tensor(&case["params"][n], dev))?;
        }
        for (n, b) in m.named_buffers() {
            b.copy_(&f32_tensor(&case["buffers_before"][&n], dev))?;
        }
    }
    let xin = &case["input"];
    let x = if case["kind"] == "embedding" {
        i64_tensor(xin, dev)
    } else {
        f32_tensor(xin, dev).with_requires_grad()
    };
    let y = m.forward(&x)?;
    compare(name, "output", &y, &case["output"]);
    assert_eq!(y.device(), dev, "{name}: output device");
    y.backward_with_grad(&f32_tensor(&case["grad_output"], dev))?;
    for (k, want) in case["grads"].as_object().unwrap() {
        let t = if k == "input" {
            x.clone()
        } else {
            params.iter().find(|p| &p.0 == k).unwrap().1.clone()
        };
        let g = t
            .grad()
            .unwrap_or_else(|| panic!("{name}: no grad for {k}"));
        compare(name, &format!("grad of {k}"), &g, want);
    }
    for (n, b) in m.named_buffers() {
        compare(name, &n, &b, &case["buffers_after"][&n]);
    }
    Ok(())
}

device_tests!(
    ; f64:
    layers_and_losses_match_pytorch,
);

fn layers_and_losses_match_pytorch(dev: Device) -> Result<()> {
    let fx = load_fixture();
    let mut done = vec![];
    for case in fx["cases"].as_array().unwrap() {
        let kind = case["kind"].as_str().unwrap();
        if let Some(m) = build(kind, &case["config"], dev)? {
            check_case(case, m, dev)?;
            done.push(case["name"].as_str().unwrap().to_string());
        }
    }
    // every case of the fixture ran
    assert_eq!(done.len(), 36, "cases run: {done:?}");
    Ok(())
}
