//! `might inspect FILE` through the real binary, on the PyTorch/NumPy-generated fixtures of
//! `tests/fixtures/io/` (see `tests/fixtures/gen_io.py`) and on broken files.

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/io")
        .join(name)
}

fn might(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_might"))
        .args(args)
        .output()
        .expect("run might")
}

fn inspect(path: &std::path::Path) -> String {
    let o = might(&["inspect", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "inspect {} failed: {err}",
        path.display()
    );
    String::from_utf8(o.stdout).unwrap()
}

/// The table row whose first column is `name`, split into its columns.
fn row<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in\n{out}"))
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

fn total_line(out: &str) -> &str {
    out.lines().last().unwrap()
}

#[test]
fn inspect_safetensors_lists_every_dtype() {
    let out = inspect(&fixture("all.safetensors"));
    assert_eq!(row(&out, "f32"), ["f32", "float32", "[2, 3]", "6", "24"]);
    assert_eq!(row(&out, "bf16"), ["bf16", "bfloat16", "[3]", "3", "6"]);
    assert_eq!(row(&out, "bool"), ["bool", "bool", "[2, 1]", "2", "2"]);
    assert_eq!(row(&out, "empty"), ["empty", "float32", "[0, 3]", "0", "0"]);
    assert_eq!(row(&out, "scalar"), ["scalar", "float32", "[]", "1", "4"]);
    assert_eq!(
        total_line(&out),
        "total: 9 tensors, 25 parameters, 95 bytes (95 B)"
    );
}

#[test]
fn inspect_pytorch_state_dict() {
    let out = inspect(&fixture("state_dict.pt"));
    assert_eq!(
        row(&out, "0.weight"),
        ["0.weight", "float32", "[3, 4]", "12", "48"]
    );
    assert_eq!(
        row(&out, "1.num_batches_tracked"),
        ["1.num_batches_tracked", "int64", "[]", "1", "8"]
    );
    assert_eq!(
        row(&out, "extra.half"),
        ["extra.half", "float16", "[5, 2]", "10", "20"]
    );
    assert!(
        total_line(&out).starts_with("total: 13 tensors, 61 parameters,"),
        "{out}"
    );
}

#[test]
fn inspect_npz_and_npy() {
    let out = inspect(&fixture("arrays.npz"));
    assert_eq!(row(&out, "a"), ["a", "float32", "[3, 2]", "6", "24"]);
    assert_eq!(row(&out, "b"), ["b", "int64", "[3]", "3", "24"]);
    assert_eq!(
        total_line(&out),
        "total: 2 tensors, 9 parameters, 48 bytes (48 B)"
    );
    // A .npy holds one unnamed array: it is listed under the file's stem.
    let out = inspect(&fixture("f4_c.npy"));
    assert_eq!(row(&out, "f4_c"), ["f4_c", "float32", "[2, 3]", "6", "24"]);
}

#[test]
fn inspect_json_output() {
    let o = might(&["inspect", "--json", fixture("arrays.npz").to_str().unwrap()]);
    assert!(o.status.success());
    let s = String::from_utf8(o.stdout).unwrap();
    assert!(s.contains(
        "\"tensors\":[{\"name\":\"a\",\"dtype\":\"float32\",\"shape\":[3,2],\"numel\":6,\"bytes\":24},"
    ), "{s}");
    assert!(
        s.trim_end().ends_with("\"parameters\":9,\"bytes\":48}"),
        "{s}"
    );
}

/// Broken input: exit code 1, one line on stderr naming the file, nothing on stdout.
fn assert_one_line_error(path: &std::path::Path, needle: &str) {
    let o = might(&["inspect", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(
        o.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(
        err.to_lowercase().contains(needle),
        "expected '{needle}' in: {err}"
    );
}

#[test]
fn inspect_bad_files_fail_cleanly() {
    let dir = std::env::temp_dir().join(format!("might-inspect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // A safetensors file cut in the middle of its data.
    let good = std::fs::read(fixture("all.safetensors")).unwrap();
    let cut = dir.join("cut.safetensors");
    std::fs::write(&cut, &good[..good.len() - 10]).unwrap();
    assert_one_line_error(&cut, "safetensors");

    // A header length far beyond the file.
    let mut huge = good.clone();
    huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    huge[8] = b'{';
    let huge_path = dir.join("huge_header.safetensors");
    std::fs::write(&huge_path, &huge).unwrap();
    assert_one_line_error(&huge_path, "safetensors");

    // Not a tensor file at all.
    let text = dir.join("notes.txt");
    std::fs::write(&text, "hello, these are not tensors\n").unwrap();
    assert_one_line_error(&text, "not a safetensors");

    // A pickle that asks for a global outside the allow-list is refused, not run.
    assert_one_line_error(&fixture("evil.pt"), "");

    assert_one_line_error(&dir.join("missing.safetensors"), "cannot open");
    std::fs::remove_dir_all(&dir).ok();
}
