//! A char-GPT checkpoint as `might train gpt` writes it: safetensors bytes whose
//! `__metadata__` holds the model sizes. The sizes are read from the metadata (hostile
//! values included) and the model built from the tensors present: `Ok` or a clean `Err`,
//! never a panic or an allocation the metadata alone asks for.
#![no_main]
use libfuzzer_sys::fuzz_target;
use might::models::{Gpt, GptConfig};

fuzz_target!(|data: &[u8]| {
    let Ok((tensors, meta)) = might::io::safetensors::load_bytes_with_metadata(data) else {
        return;
    };
    let get = |k: &str, d: usize| meta.get(k).and_then(|v| v.parse().ok()).unwrap_or(d);
    let config = GptConfig {
        vocab_size: get("vocab_size", 65),
        block_size: get("block_size", 8),
        n_layer: get("n_layer", 1),
        n_head: get("n_head", 1),
        n_embd: get("n_embd", 8),
        dropout: 0.0,
        bias: meta.get("bias").map_or(true, |b| b == "true"),
    };
    let _ = Gpt::from_tensors(config, &tensors);
});
