//! The ONNX backend node tests (about 1,900 cases the `onnx` PyPI package generates): written
//! out by tests/onnx/gen_node_tests.py, run by `might onnx-test` against the committed list of
//! expected failures, which may only shrink: a case that newly fails fails this test.
//!
//! Needs `python3` with `onnx` (CI installs it; `MIGHT_PYTHON` picks another interpreter).
//! Without it the test prints a notice and passes, unless `MIGHT_REQUIRE_ONNX=1` (set in CI).
#![cfg(feature = "onnx")]

use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn onnx_backend_node_tests_pass_except_the_listed_ones() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("onnx-node-tests");
    let python = std::env::var("MIGHT_PYTHON").unwrap_or_else(|_| "python3".into());
    let _ = std::fs::remove_dir_all(&out);
    let gen = Command::new(&python)
        .arg(root().join("tests/onnx/gen_node_tests.py"))
        .arg(&out)
        .output();
    let ok = matches!(&gen, Ok(o) if o.status.success());
    if !ok {
        let why = match &gen {
            Ok(o) => String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
                .to_string(),
            Err(e) => e.to_string(),
        };
        assert!(
            std::env::var("MIGHT_REQUIRE_ONNX").is_err(),
            "MIGHT_REQUIRE_ONNX is set but the node tests could not be generated: {why}"
        );
        eprintln!("NOTICE: skipping the ONNX node tests ({python} with onnx not available: {why})");
        return;
    }
    let o = Command::new(env!("CARGO_BIN_EXE_might"))
        .arg("onnx-test")
        .arg(&out)
        .arg("--quiet")
        .arg("--expected-failures")
        .arg(root().join("tests/onnx/expected_failures.txt"))
        .output()
        .expect("run might onnx-test");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let summary: Vec<&str> = stdout
        .lines()
        .filter(|l| {
            l.starts_with("onnx node tests:")
                || l.starts_with("scored set")
                || l.starts_with("now passing")
        })
        .collect();
    println!("{}", summary.join("\n"));
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(
        summary.iter().any(|l| l.starts_with("onnx node tests: ")),
        "{stdout}"
    );
}
