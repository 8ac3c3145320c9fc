//! End-to-end tests of the `might` binary on a tiny synthetic MNIST-format dataset.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use might::data::idx::write_idx_u8;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("might-cli-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Image of class k: a bright horizontal bar at rows 2k+4..2k+6, plus a little texture.
fn synthetic_image(k: usize, i: usize) -> Vec<u8> {
    let mut img = vec![0u8; 28 * 28];
    for r in 2 * k + 4..2 * k + 6 {
        for c in 4..24 {
            img[r * 28 + c] = 200 + ((i * 7 + c) % 50) as u8;
        }
    }
    img
}

fn write_split(dir: &Path, prefix: &str, n: usize) {
    let labels: Vec<u8> = (0..n).map(|i| (i * 7 % 10) as u8).collect();
    let px: Vec<u8> = labels
        .iter()
        .enumerate()
        .flat_map(|(i, &k)| synthetic_image(k as usize, i))
        .collect();
    write_idx_u8(
        dir.join(format!("{prefix}-images-idx3-ubyte.gz")),
        &[n, 28, 28],
        &px,
    )
    .unwrap();
    write_idx_u8(
        dir.join(format!("{prefix}-labels-idx1-ubyte.gz")),
        &[n],
        &labels,
    )
    .unwrap();
}

fn might(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_might"))
        .args(args)
        .output()
        .expect("run might")
}

fn json_field<'a>(json: &'a str, key: &str) -> &'a str {
    let start = json
        .find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("no {key} in {json}"))
        + key.len()
        + 3;
    let rest = &json[start..];
    let end = rest.find([',', '}']).unwrap();
    rest[..end].trim_matches('"')
}

fn last_line(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap_or("")
        .to_string()
}

#[test]
fn train_eval_resume_on_synthetic_mnist() {
    let data = tmpdir("data");
    write_split(&data, "train", 600);
    write_split(&data, "t10k", 100);
    let out = tmpdir("out");
    let (d, o) = (data.to_str().unwrap(), out.to_str().unwrap());
    let r = might(&[
        "train",
        "mnist",
        "--data",
        d,
        "--out",
        o,
        "--epochs",
        "1",
        "--threads",
        "1",
        "--batch-size",
        "16",
        "--lr",
        "0.05",
    ]);
    assert!(
        r.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    let json = last_line(&r);
    assert!(json.starts_with('{') && json.ends_with('}'), "{json}");
    assert_eq!(json_field(&json, "dataset"), "mnist");
    assert_eq!(json_field(&json, "model"), "mlp");
    assert_eq!(json_field(&json, "epochs"), "1");
    assert_eq!(json_field(&json, "threads"), "1");
    let acc: f64 = json_field(&json, "test_accuracy").parse().unwrap();
    // Ten well-separated bar positions: one epoch of SGD learns them.
    assert!(acc > 0.9 && acc <= 1.0, "accuracy {acc}");
    for k in [
        "train_loss",
        "seconds_per_epoch",
        "samples_per_second",
        "peak_rss_mb",
    ] {
        let v: f64 = json_field(&json, k).parse().unwrap();
        assert!(v > 0.0, "{k} = {v}");
    }
    let csv = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "epoch,train_loss,train_acc,test_loss,test_acc,seconds"
    );
    assert_eq!(lines.len(), 2);
    assert!(lines[1].starts_with("1,"));
    let svg = std::fs::read_to_string(out.join("curves.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("polyline"));
    assert!(out.join("checkpoint-epoch1.safetensors").is_file());

    // eval reproduces the test accuracy from the checkpoint.
    let ck = out.join("last.safetensors");
    let r = might(&["eval", ck.to_str().unwrap(), "--data", d]);
    assert!(
        r.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    let ev = last_line(&r);
    let acc2: f64 = json_field(&ev, "test_accuracy").parse().unwrap();
    assert!((acc - acc2).abs() < 1e-9, "{acc} vs {acc2}");

    // resume continues at epoch 2 and appends to metrics.csv.
    let r = might(&[
        "train",
        "mnist",
        "--data",
        d,
        "--resume",
        o,
        "--epochs",
        "2",
        "--threads",
        "1",
        "--batch-size",
        "16",
        "--lr",
        "0.05",
    ]);
    assert!(
        r.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(json_field(&last_line(&r), "epochs"), "2");
    let csv = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3);
    assert!(out.join("checkpoint-epoch2.safetensors").is_file());

    // predict prints a class and five probabilities that sum to at most 1.
    let png = out.join("three.png");
    let img = image::GrayImage::from_raw(28, 28, synthetic_image(3, 0)).unwrap();
    img.save(&png).unwrap();
    let r = might(&["predict", ck.to_str().unwrap(), png.to_str().unwrap()]);
    assert!(
        r.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    let text = String::from_utf8_lossy(&r.stdout).to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "{text}");
    assert_eq!(lines[0], "3");
    let p: f64 = lines[1..]
        .iter()
        .map(|l| l.split_whitespace().last().unwrap().parse::<f64>().unwrap())
        .sum();
    assert!(p > 0.5 && p <= 1.0001, "{p}");

    std::fs::remove_dir_all(&data).ok();
    std::fs::remove_dir_all(&out).ok();
}

fn assert_user_error(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
    assert!(err.contains(needle), "{err:?} lacks {needle:?}");
}

#[test]
fn user_mistakes_exit_1_with_one_line() {
    let missing = std::env::temp_dir().join("might-cli-definitely-missing");
    let r = might(&["train", "mnist", "--data", missing.to_str().unwrap()]);
    assert_user_error(&r, "does not exist");
    let r = might(&["train", "mnist", "--model", "transformer"]);
    assert_user_error(&r, "transformer");
    let r = might(&["train", "imagenet"]);
    assert_user_error(&r, "imagenet");

    let bad = tmpdir("corrupt");
    std::fs::write(bad.join("train-images-idx3-ubyte.gz"), b"\x1f\x8bgarbage").unwrap();
    std::fs::write(bad.join("train-labels-idx1-ubyte"), b"junk").unwrap();
    std::fs::write(bad.join("t10k-images-idx3-ubyte"), b"junk").unwrap();
    std::fs::write(bad.join("t10k-labels-idx1-ubyte"), b"junk").unwrap();
    let r = might(&["train", "mnist", "--data", bad.to_str().unwrap()]);
    assert_user_error(&r, "t10k-images");
    let r = might(&["eval", bad.join("t10k-images-idx3-ubyte").to_str().unwrap()]);
    assert_user_error(&r, "t10k-images");
    std::fs::remove_dir_all(&bad).ok();
}
