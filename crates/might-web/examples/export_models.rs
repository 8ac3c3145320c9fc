//! Make the page's models from `might train` checkpoints: keep the model tensors and the
//! fields that describe the model, drop the optimizer state, store float weights as float16
//! (half the download; the page computes in float32), and write the greedy sample the
//! end-to-end test expects from the GPT.
//!
//!     cargo run --release -p might-web --example export_models -- \
//!         runs/mnist-cnn/last.safetensors runs/gpt/last.safetensors web/models

use std::path::{Path, PathBuf};

use might::optim::{load_checkpoint, save_checkpoint, Checkpoint};
use might::DType;
use might_web::TextGenerator;

/// The prompt and length of the greedy sample in `gpt-greedy.txt`.
pub const PROMPT: &str = "ROMEO:";
pub const CHARS: usize = 200;

fn export(from: &Path, to: &Path) -> might::Result<()> {
    let ck = load_checkpoint(from)?;
    let model = ck
        .model
        .into_iter()
        .map(|(n, t)| {
            let t = if t.dtype() == DType::F32 {
                t.to_dtype(DType::F16)?
            } else {
                t
            };
            Ok((n, t))
        })
        .collect::<might::Result<Vec<_>>>()?;
    let out = Checkpoint {
        model,
        step: ck.step,
        epoch: ck.epoch,
        extra: ck.extra,
        ..Default::default()
    };
    save_checkpoint(to, &out)
}

fn main() -> might::Result<()> {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [cnn, gpt, dir] = args.as_slice() else {
        eprintln!("usage: export_models CNN_CHECKPOINT GPT_CHECKPOINT OUT_DIR");
        std::process::exit(2);
    };
    std::fs::create_dir_all(dir).map_err(|e| might::Error::io("export", e.to_string()))?;
    export(cnn, &dir.join("mnist-cnn.safetensors"))?;
    export(gpt, &dir.join("gpt.safetensors"))?;
    let bytes = std::fs::read(dir.join("gpt.safetensors"))
        .map_err(|e| might::Error::io("export", e.to_string()))?;
    let mut text = TextGenerator::from_checkpoint(&bytes)?;
    text.start(PROMPT, 0.0, 0, 0)?;
    let sample = format!("{PROMPT}{}", text.next(CHARS)?);
    std::fs::write(dir.join("gpt-greedy.txt"), &sample)
        .map_err(|e| might::Error::io("export", e.to_string()))?;
    println!("{sample}");
    Ok(())
}
