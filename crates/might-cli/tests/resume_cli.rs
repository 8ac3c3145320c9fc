//! `might train --resume` through the real binary: two epochs in one run, or one epoch, a
//! restart from the checkpoint directory, and a second epoch, end with bitwise identical
//! model weights. Black-box: only the command line and the checkpoint files are used.

use std::path::{Path, PathBuf};
use std::process::Command;

use might::data::idx::write_idx_u8;
use might::optim::checkpoint::load_checkpoint;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("might-resume-cli-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A tiny MNIST-format data set: class k is a bar at rows 2k+4..2k+6 with some texture.
fn write_split(dir: &Path, prefix: &str, n: usize) {
    let labels: Vec<u8> = (0..n).map(|i| (i * 7 % 10) as u8).collect();
    let mut px = vec![0u8; n * 784];
    for (i, &k) in labels.iter().enumerate() {
        for r in 2 * k as usize + 4..2 * k as usize + 6 {
            for c in 4..24 {
                px[i * 784 + r * 28 + c] = 150 + ((i * 13 + c * 5) % 100) as u8;
            }
        }
    }
    let name = |kind: &str| {
        dir.join(format!(
            "{prefix}-{kind}-idx{}-ubyte.gz",
            if kind == "images" { 3 } else { 1 }
        ))
    };
    write_idx_u8(name("images"), &[n, 28, 28], &px).unwrap();
    write_idx_u8(name("labels"), &[n], &labels).unwrap();
}

fn train(data: &Path, out: &Path, epochs: &str, resume: bool) {
    let mut args = vec![
        "train",
        "mnist",
        "--data",
        data.to_str().unwrap(),
        "--epochs",
        epochs,
        "--threads",
        "1",
        "--batch-size",
        "16",
        "--lr",
        "0.05",
        "--seed",
        "3",
        // the test compares the epoch checkpoints of both runs
        "--keep-checkpoints",
        "2",
    ];
    let o = out.to_str().unwrap();
    if resume {
        args.extend(["--resume", o]);
    } else {
        args.extend(["--out", o]);
    }
    let r = Command::new(env!("CARGO_BIN_EXE_might"))
        .args(&args)
        .output()
        .expect("run might");
    assert!(
        r.status.success(),
        "might {args:?}: {}",
        String::from_utf8_lossy(&r.stderr)
    );
}

fn model_bits(path: &Path) -> Vec<(String, Vec<u64>)> {
    let mut m: Vec<(String, Vec<u64>)> = load_checkpoint(path)
        .unwrap()
        .model
        .into_iter()
        .map(|(k, t)| (k, t.to_f64_vec().iter().map(|v| v.to_bits()).collect()))
        .collect();
    m.sort_by(|a, b| a.0.cmp(&b.0));
    m
}

#[test]
fn cli_resume_matches_uninterrupted_run_bitwise() {
    let data = tmpdir("data");
    write_split(&data, "train", 320);
    write_split(&data, "t10k", 40);
    let straight = tmpdir("straight");
    let resumed = tmpdir("resumed");

    train(&data, &straight, "2", false);
    train(&data, &resumed, "1", false);
    train(&data, &resumed, "2", true);

    let a = model_bits(&straight.join("checkpoint-epoch2.safetensors"));
    let b = model_bits(&resumed.join("checkpoint-epoch2.safetensors"));
    assert!(!a.is_empty());
    assert_eq!(a.len(), b.len());
    for ((name, x), (name_b, y)) in a.iter().zip(&b) {
        assert_eq!(name, name_b);
        let diff = x.iter().zip(y).filter(|(p, q)| p != q).count();
        assert_eq!(
            diff,
            0,
            "{name}: {diff} of {} values differ after resume",
            x.len()
        );
    }
    // And the first epoch really changed the weights (the comparison is not vacuous).
    let e1 = model_bits(&resumed.join("checkpoint-epoch1.safetensors"));
    assert_ne!(e1, b);

    for d in [data, straight, resumed] {
        std::fs::remove_dir_all(d).ok();
    }
}
