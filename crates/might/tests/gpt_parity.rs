//! The GPT model against PyTorch: a tiny nanoGPT-style model with fixed weights
//! (tests/fixtures/gen_gpt.py) gives the same logits, loss and parameter gradients.

use might::io::safetensors;
use might::models::{Gpt, GptConfig};
use might::nn::Module;
use might::Tensor;
use std::path::PathBuf;

fn fixture(name: &str) -> Vec<(String, Tensor)> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/gpt")
        .join(name);
    safetensors::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn get<'a>(v: &'a [(String, Tensor)], name: &str) -> &'a Tensor {
    &v.iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("fixture has no {name}"))
        .1
}

/// Every element within 1e-4 relative of the reference; elements much smaller than the
/// tensor's largest are compared against 1% of that largest value instead (f32 round-off is
/// relative to the magnitudes summed, not to a tiny result).
fn assert_close(name: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.dims(), want.dims(), "{name}: shape");
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let big = w.iter().fold(0.0f64, |a, b| a.max(b.abs()));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let tol = 1e-4 * b.abs().max(0.01 * big);
        assert!(
            (a - b).abs() <= tol,
            "{name}[{i}]: might {a} vs torch {b} (tol {tol})"
        );
    }
}

const CONFIG: GptConfig = GptConfig {
    vocab_size: 11,
    block_size: 8,
    n_layer: 2,
    n_head: 2,
    n_embd: 16,
    dropout: 0.0,
    bias: true,
};

#[test]
fn logits_loss_and_grads_match_pytorch() {
    let weights = fixture("weights.safetensors");
    let batch = fixture("batch.safetensors");
    let expected = fixture("expected.safetensors");
    let model = Gpt::from_tensors(CONFIG, &weights).unwrap();
    // the fixture's state_dict holds both tied keys with equal values
    assert_eq!(
        get(&weights, "lm_head.weight").to_vec::<f32>().unwrap(),
        get(&weights, "transformer.wte.weight")
            .to_vec::<f32>()
            .unwrap()
    );
    let (logits, loss) = model
        .forward_with_loss(get(&batch, "idx"), get(&batch, "targets"))
        .unwrap();
    assert_close("logits", &logits, get(&expected, "logits"));
    assert_close("loss", &loss.reshape([1]).unwrap(), get(&expected, "loss"));
    loss.backward().unwrap();
    let params = model.named_parameters();
    // PyTorch's named_parameters also lists the tied weight once
    assert_eq!(params.len(), expected.len() - 2);
    for (name, p) in &params {
        let g = p.grad().unwrap_or_else(|| panic!("{name} has no grad"));
        assert_close(name, &g, get(&expected, &format!("grad.{name}")));
    }
}
