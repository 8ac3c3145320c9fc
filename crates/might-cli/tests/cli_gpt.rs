//! End-to-end tests of `might train gpt` and `might sample` on a tiny synthetic text.

use std::path::PathBuf;
use std::process::{Command, Output};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("might-gpt-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn might(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_might"))
        .args(args)
        .output()
        .expect("run might")
}

fn json_f64(json: &str, key: &str) -> f64 {
    let start = json
        .find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("no {key} in {json}"))
        + key.len()
        + 3;
    let rest = &json[start..];
    rest[..rest.find([',', '}']).unwrap()].parse().unwrap()
}

fn last_line(o: &Output) -> String {
    let s = String::from_utf8_lossy(&o.stdout);
    s.lines().last().unwrap_or("").to_string()
}

#[test]
fn train_resume_and_sample_on_a_tiny_text() {
    let dir = tmpdir("run");
    let text = dir.join("abc.txt");
    // a deterministic pattern a tiny model learns quickly
    std::fs::write(&text, "abcabd abcabd abcabe ".repeat(200)).unwrap();
    let out = dir.join("out");
    let common = [
        "--text",
        text.to_str().unwrap(),
        "--layers",
        "1",
        "--heads",
        "2",
        "--embd",
        "16",
        "--block",
        "8",
        "--batch-size",
        "8",
        "--warmup",
        "5",
        "--lr",
        "0.01",
        "--eval-interval",
        "20",
        "--eval-batches",
        "2",
        "--threads",
        "1",
        "--out",
        out.to_str().unwrap(),
    ];
    let mut args = vec!["train", "gpt", "--steps", "40"];
    args.extend(common);
    let r = might(&args);
    assert!(r.status.success(), "{r:?}");
    let json = last_line(&r);
    // uniform over 6 characters is ln 6 ≈ 1.79; the pattern is far more predictable
    assert!(json_f64(&json, "val_loss") < 1.2, "{json}");
    assert!(json_f64(&json, "tokens_per_second") > 0.0);
    assert!(json_f64(&json, "peak_rss_mb") > 0.0);
    assert_eq!(json_f64(&json, "steps"), 40.0);
    let csv = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(std::fs::read_to_string(out.join("curves.svg"))
        .unwrap()
        .contains("<svg"));

    // resume to 60 steps: one more row
    let mut args = vec![
        "train",
        "gpt",
        "--steps",
        "60",
        "--resume",
        out.to_str().unwrap(),
    ];
    args.extend(common);
    let r = might(&args);
    assert!(r.status.success(), "{r:?}");
    let csv = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4, "{csv}");

    let ck = out.join("last.safetensors");
    let sample = |seed: &str| {
        let r = might(&[
            "sample",
            ck.to_str().unwrap(),
            "--prompt",
            "abca",
            "--tokens",
            "30",
            "--top-k",
            "3",
            "--seed",
            seed,
        ]);
        assert!(r.status.success(), "{r:?}");
        String::from_utf8(r.stdout).unwrap()
    };
    let a = sample("1");
    assert_eq!(a, sample("1"));
    assert!(a.starts_with("abca"));
    assert_eq!(a.trim_end_matches('\n').chars().count(), 34);
    assert!(a.chars().all(|c| "abcde \n".contains(c)), "{a:?}");

    // a character the model never saw is a one-line user error
    let r = might(&["sample", ck.to_str().unwrap(), "--prompt", "xyz"]);
    assert_eq!(r.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&r.stderr).contains("vocabulary"));
    let r = might(&["train", "gpt", "--text", "/definitely/missing.txt"]);
    assert_eq!(r.status.code(), Some(1));
    let r = might(&[
        "train",
        "gpt",
        "--heads",
        "3",
        "--text",
        text.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&r.stderr).trim().lines().count(), 1);
    std::fs::remove_dir_all(&dir).ok();
}

/// `--matmul-precision medium` (bf16 operands in the products where the CPU has AVX512-BF16:
/// with 32 dimensions and 128 tokens per batch every layer's products qualify) still learns
/// the pattern, and says which precision it ran at; an unknown precision is a one-line error.
#[test]
fn train_at_medium_matmul_precision() {
    let dir = tmpdir("medium");
    let text = dir.join("abc.txt");
    std::fs::write(&text, "abcabd abcabd abcabe ".repeat(200)).unwrap();
    let out = dir.join("out");
    let args = [
        "train",
        "gpt",
        "--text",
        text.to_str().unwrap(),
        "--layers",
        "1",
        "--heads",
        "2",
        "--embd",
        "32",
        "--block",
        "16",
        "--batch-size",
        "8",
        "--steps",
        "40",
        "--warmup",
        "5",
        "--lr",
        "0.01",
        "--eval-interval",
        "40",
        "--eval-batches",
        "2",
        "--threads",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--matmul-precision",
        "medium",
    ];
    let r = might(&args);
    assert!(r.status.success(), "{r:?}");
    let json = last_line(&r);
    assert!(json.contains("\"matmul_precision\":\"medium\""), "{json}");
    assert!(json_f64(&json, "val_loss") < 1.2, "{json}");
    let mut bad = args.to_vec();
    *bad.last_mut().unwrap() = "low";
    let r = might(&bad);
    assert_eq!(r.status.code(), Some(1));
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("low"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
