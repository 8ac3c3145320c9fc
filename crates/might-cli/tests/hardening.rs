//! Regression tests of issue 28: the `might` binary never panics or aborts on a closed pipe,
//! a busy or read-only run folder, out-of-range flags, oversized models or forged checkpoint
//! metadata; it answers with one clear line (exit 1) and loses no finished work.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use might::data::idx::write_idx_u8;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("might-harden-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_might"))
}

fn might(args: &[&str]) -> Output {
    bin().args(args).output().expect("run might")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A tiny MNIST-format set: class k is a bar at rows 2k+4..2k+6. `bad_label` replaces the
/// label of sample 3.
fn write_split(dir: &Path, prefix: &str, n: usize, bad_label: Option<u8>) {
    let mut labels: Vec<u8> = (0..n).map(|i| (i * 7 % 10) as u8).collect();
    if let Some(l) = bad_label {
        labels[3] = l;
    }
    let mut px = vec![0u8; n * 784];
    for (i, &k) in labels.iter().enumerate() {
        let k = (k % 10) as usize;
        for r in 2 * k + 4..2 * k + 6 {
            for c in 4..24 {
                px[i * 784 + r * 28 + c] = 150 + ((i * 13 + c * 5) % 100) as u8;
            }
        }
    }
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

fn mnist(name: &str) -> PathBuf {
    let d = tmpdir(name);
    write_split(&d, "train", 200, None);
    write_split(&d, "t10k", 50, None);
    d
}

/// `args` with the `--flag value` pairs of `extra` replacing their defaults or appended.
fn override_flags<'a>(mut args: Vec<&'a str>, extra: &[&'a str]) -> Vec<&'a str> {
    for pair in extra.chunks(2) {
        match args.iter().position(|a| *a == pair[0]) {
            Some(i) if pair.len() == 2 => args[i + 1] = pair[1],
            _ => args.extend_from_slice(pair),
        }
    }
    args
}

/// `train mnist` on `data` into `out` with small settings plus `extra`.
fn train_args<'a>(data: &'a Path, out: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let a = vec![
        "train",
        "mnist",
        "--data",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--threads",
        "1",
        "--batch-size",
        "16",
        "--lr",
        "0.05",
    ];
    override_flags(a, extra)
}

/// Exit 1 with one line on stderr containing `needle`, and no panic.
#[track_caller]
fn assert_user_error(o: &Output, needle: &str) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    assert!(
        err.starts_with("error: ") && !err.starts_with("error: error:"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
}

/// No panic (101) or abort (134) and no backtrace hint.
#[track_caller]
fn assert_no_crash(o: &Output) {
    let err = text(&o.stderr);
    assert!(
        !matches!(o.status.code(), Some(101) | Some(134) | None),
        "{o:?}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
}

/// Run `might args` with a stdout whose reader is already gone (`| head` that exited).
fn with_closed_stdout(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let child = bin()
        .args(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.wait_with_output().unwrap()
}

fn epoch_of(path: &Path) -> u64 {
    might::optim::checkpoint::load_checkpoint(path)
        .unwrap()
        .epoch
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn gpt_text(dir: &Path) -> PathBuf {
    let p = dir.join("abc.txt");
    std::fs::write(&p, "abcabd abcabd abcabe ".repeat(100)).unwrap();
    p
}

fn gpt_args<'a>(text: &'a Path, out: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let a = vec![
        "train",
        "gpt",
        "--text",
        text.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--layers",
        "1",
        "--heads",
        "2",
        "--embd",
        "16",
        "--block",
        "8",
        "--batch-size",
        "4",
        "--warmup",
        "2",
        "--steps",
        "20",
        "--eval-interval",
        "10",
        "--eval-batches",
        "2",
        "--threads",
        "1",
    ];
    override_flags(a, extra)
}

/// Rewrite `extra.KEY` fields in a safetensors checkpoint's `__metadata__`.
fn forge_meta(src: &Path, dst: &Path, fields: &[(&str, &str)]) {
    let b = std::fs::read(src).unwrap();
    let n = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&b[8..8 + n]).unwrap();
    for (k, v) in fields {
        header["__metadata__"][format!("extra.{k}")] = serde_json::Value::String(v.to_string());
    }
    let mut h = serde_json::to_vec(&header).unwrap();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(&b[8 + n..]);
    std::fs::write(dst, out).unwrap();
}

// ---- 1. broken pipes -------------------------------------------------------------------

#[test]
fn closed_stdout_stops_training_after_saving_the_epoch() {
    let data = mnist("pipe-data");
    let out = tmpdir("pipe-out");
    let o = with_closed_stdout(&train_args(&data, &out, &["--epochs", "5"]));
    assert_no_crash(&o);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("stdout closed"),
        "{}",
        text(&o.stderr)
    );
    // the epoch whose line could not be printed is saved, and the run stopped there
    assert_eq!(epoch_of(&out.join("last.safetensors")), 1);
    assert!(out.join("checkpoint-epoch1.safetensors").is_file());
    let csv = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2, "{csv}");

    // eval, predict-free commands and sample: quiet exit 0
    let ck = out.join("last.safetensors");
    let o = with_closed_stdout(&[
        "eval",
        ck.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
    ]);
    assert_no_crash(&o);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for args in [
        vec!["inspect", ck.to_str().unwrap()],
        vec!["inspect", "--json", ck.to_str().unwrap()],
    ] {
        let o = with_closed_stdout(&args);
        assert_no_crash(&o);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    }
    std::fs::remove_dir_all(&data).ok();
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn closed_stdout_in_gpt_training_and_sample() {
    let dir = tmpdir("pipe-gpt");
    let txt = gpt_text(&dir);
    let out = dir.join("out");
    let o = with_closed_stdout(&gpt_args(&txt, &out, &[]));
    assert_no_crash(&o);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let c = might::optim::checkpoint::load_checkpoint(out.join("last.safetensors")).unwrap();
    assert_eq!(c.step, 10, "stopped after the first evaluation, saved");
    let ck = out.join("last.safetensors");
    let o = with_closed_stdout(&[
        "sample",
        ck.to_str().unwrap(),
        "--tokens",
        "20",
        "--prompt",
        "a",
    ]);
    assert_no_crash(&o);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    std::fs::remove_dir_all(&dir).ok();
}

// ---- 2. atomic metrics, stale temporaries, --keep-checkpoints -------------------------

#[test]
fn stale_temp_files_are_removed_and_no_temp_is_left() {
    let data = mnist("tmp-data");
    let out = tmpdir("tmp-out");
    // what a killed run leaves: temporaries of its atomic writes
    for name in [".last.safetensors.tmp.4194000", ".metrics.csv.tmp.4194001"] {
        std::fs::write(out.join(name), b"partial").unwrap();
    }
    let o = might(&train_args(&data, &out, &["--epochs", "1"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let names = files(&out);
    assert!(
        names
            .iter()
            .all(|n| !n.contains(".tmp.") && !n.starts_with(".might")),
        "{names:?}"
    );
    let csv = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2, "{csv}");
    std::fs::remove_dir_all(&data).ok();
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn keep_checkpoints_prunes_old_epochs() {
    let data = mnist("keep-data");
    let out = tmpdir("keep-out");
    let o = might(&train_args(&data, &out, &["--epochs", "3"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ckpts: Vec<String> = files(&out)
        .into_iter()
        .filter(|n| n.ends_with(".safetensors"))
        .collect();
    assert_eq!(
        ckpts,
        [
            "best.safetensors",
            "checkpoint-epoch3.safetensors",
            "last.safetensors"
        ],
        "default: last, best and the final epoch"
    );
    let best = epoch_of(&out.join("best.safetensors"));
    assert!((1..=3).contains(&best));

    let out2 = tmpdir("keep-out2");
    let o = might(&train_args(
        &data,
        &out2,
        &["--epochs", "3", "--keep-checkpoints", "2"],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!out2.join("checkpoint-epoch1.safetensors").exists());
    assert!(out2.join("checkpoint-epoch2.safetensors").is_file());
    assert!(out2.join("checkpoint-epoch3.safetensors").is_file());

    // GPT: step checkpoints only when asked for
    let txt = gpt_text(&out2);
    let g = out2.join("gpt");
    let o = might(&gpt_args(&txt, &g, &["--keep-checkpoints", "1"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ckpts: Vec<String> = files(&g)
        .into_iter()
        .filter(|n| n.ends_with(".safetensors"))
        .collect();
    assert_eq!(
        ckpts,
        [
            "best.safetensors",
            "checkpoint-step20.safetensors",
            "last.safetensors"
        ]
    );
    for d in [data, out, out2] {
        std::fs::remove_dir_all(d).ok();
    }
}

// ---- 3. one run per folder, write access checked up front ----------------------------

#[test]
fn a_locked_run_folder_is_refused_and_a_stale_lock_taken_over() {
    let data = mnist("lock-data");
    let out = tmpdir("lock-out");
    let lock_path = out.join(".might.lock");
    {
        // another live run holds the folder
        let f = File::create(&lock_path).unwrap();
        f.lock().unwrap();
        let o = might(&train_args(&data, &out, &["--epochs", "1"]));
        assert_user_error(&o, "in use by another might run");
        assert!(!out.join("metrics.csv").exists());
        let txt = gpt_text(&data);
        let o = might(&gpt_args(&txt, &out, &[]));
        assert_user_error(&o, "in use by another might run");
    }
    // a lock file left by a dead run is taken over, and removed at the end
    std::fs::write(&lock_path, "4194000\n").unwrap();
    let o = might(&train_args(&data, &out, &["--epochs", "1"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!lock_path.exists());
    std::fs::remove_dir_all(&data).ok();
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn an_unwritable_out_folder_is_refused_before_training() {
    let data = mnist("ro-data");
    // a path below a file can never be created
    let file = data.join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let bad = file.join("run");
    let o = might(&train_args(&data, &bad, &["--epochs", "1"]));
    assert_user_error(&o, "--out");
    assert!(text(&o.stdout).is_empty(), "trained anyway");

    let ro = tmpdir("ro-out");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    if File::create(ro.join("probe")).is_ok() {
        // root ignores permissions
        println!("skipped the read-only folder check: this user can write a 0555 folder");
    } else {
        let o = might(&train_args(&data, &ro, &["--epochs", "1"]));
        assert_user_error(&o, "is not writable");
        assert!(text(&o.stdout).is_empty(), "trained anyway");
    }
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::remove_dir_all(&data).ok();
    std::fs::remove_dir_all(&ro).ok();
}

// ---- 4. threads capped at the cores --------------------------------------------------

#[test]
fn threads_are_capped_at_the_available_cores() {
    let data = mnist("threads-data");
    let out = tmpdir("threads-out");
    let mut args = train_args(&data, &out, &["--epochs", "1"]);
    let i = args.iter().position(|a| *a == "--threads").unwrap();
    args[i + 1] = "64";
    let o = might(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let cores = std::thread::available_parallelism().unwrap().get();
    let err = text(&o.stderr);
    let json = text(&o.stdout).lines().last().unwrap().to_string();
    if cores < 64 {
        assert!(err.contains("warning: --threads 64"), "{err}");
        assert!(json.contains(&format!("\"threads\":{cores},")), "{json}");
    }
    let ck = out.join("last.safetensors");
    for args in [
        vec!["eval", ck.to_str().unwrap(), "--threads", "0"],
        vec!["bench", "kernels", "--threads", "0"],
    ] {
        assert_user_error(&might(&args), "--threads must be at least 1");
    }
    let txt = gpt_text(&data);
    assert_user_error(
        &might(&gpt_args(&txt, &out, &["--threads", "0"])),
        "--threads must be at least 1",
    );
    let help = text(&might(&["train", "--help"]).stdout);
    assert!(help.contains("MIGHT_FORCE_THREADS"), "{help}");
    std::fs::remove_dir_all(&data).ok();
    std::fs::remove_dir_all(&out).ok();
}

// ---- 5. plain progress lines off a terminal ------------------------------------------

#[test]
fn progress_lines_when_stderr_is_not_a_terminal() {
    let data = mnist("progress-data");
    let out = tmpdir("progress-out");
    let o = might(&train_args(
        &data,
        &out,
        &["--epochs", "1", "--progress-every", "0.000001"],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("epoch 1/1: step 1/13"), "{err}");
    assert!(err.contains("evaluating: batch 1/1"), "{err}");
    let ck = out.join("last.safetensors");
    let o = might(&[
        "eval",
        ck.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
        "--progress-every",
        "0.000001",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("evaluating: batch"));
    assert_user_error(
        &might(&train_args(&data, &out, &["--progress-every", "0"])),
        "--progress-every must be a positive finite number",
    );
    std::fs::remove_dir_all(&data).ok();
    std::fs::remove_dir_all(&out).ok();
}

// ---- 6. flag values checked up front -------------------------------------------------

#[test]
fn bad_flag_values_are_refused_up_front() {
    let data = mnist("flags-data");
    let out = tmpdir("flags-out");
    let cases: [(&[&str], &str); 6] = [
        (&["--limit", "0"], "--limit must be at least 1"),
        (
            &["--lr", "-0.1"],
            "--lr must be a positive finite number, got -0.1",
        ),
        (
            &["--lr", "inf"],
            "--lr must be a positive finite number, got inf",
        ),
        (&["--lr", "NaN"], "--lr must be a positive finite number"),
        (&["--momentum", "-1"], "--momentum must be in [0, 1)"),
        (&["--weight-decay", "-1"], "--weight-decay must be in"),
    ];
    for (extra, needle) in cases {
        let o = might(&train_args(&data, &out, extra));
        assert_user_error(&o, needle);
    }
    for t in ["inf", "0", "-1", "1e9"] {
        let o = might(&["bench", "kernels", "--min-time", t]);
        assert_user_error(&o, "--min-time");
    }
    let txt = gpt_text(&data);
    assert_user_error(
        &might(&gpt_args(&txt, &out, &["--lr", "-1"])),
        "--lr must be a positive finite number, got -1",
    );
    assert!(!out.join("metrics.csv").exists());
    std::fs::remove_dir_all(&data).ok();
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn out_of_range_labels_name_the_file_before_training() {
    let data = tmpdir("labels-data");
    write_split(&data, "train", 200, Some(12));
    write_split(&data, "t10k", 50, None);
    let out = tmpdir("labels-out");
    let o = might(&train_args(&data, &out, &["--epochs", "1"]));
    assert_user_error(
        &o,
        "train-labels-idx1-ubyte.gz: label 12 at index 3 is out of range",
    );
    assert!(text(&o.stdout).is_empty());
    std::fs::remove_dir_all(&data).ok();
    std::fs::remove_dir_all(&out).ok();
}

/// A class-sorted image folder (CIFAR-10's JPEG layout): `--limit` takes every class, not
/// the first class's files only.
#[test]
fn limit_takes_every_class_of_a_sorted_image_folder() {
    let data = tmpdir("folder-data");
    for split in ["train", "test"] {
        for (class, v) in [("a_dark", 10u8), ("b_light", 230u8)] {
            let d = data.join(split).join(class);
            std::fs::create_dir_all(&d).unwrap();
            for i in 0..20u8 {
                let img = image::RgbImage::from_pixel(32, 32, image::Rgb([v, v + i, v]));
                img.save(d.join(format!("{i}.png"))).unwrap();
            }
        }
    }
    let out = tmpdir("folder-out");
    // the first 20 training files are all "a_dark": a model trained on them says a_dark to
    // everything (50% on the test set); an even subset learns both
    let o = might(&[
        "train",
        "cifar10",
        "--data",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--limit",
        "20",
        "--epochs",
        "3",
        "--batch-size",
        "4",
        "--lr",
        "0.01",
        "--threads",
        "1",
        "--prefetch",
        "0",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json = text(&o.stdout).lines().last().unwrap().to_string();
    let acc: f64 = json
        .split("\"test_accuracy\":")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(acc > 0.9, "{json}");
    std::fs::remove_dir_all(&data).ok();
    std::fs::remove_dir_all(&out).ok();
}

// ---- 7. memory needs checked against the budget --------------------------------------

#[test]
fn oversized_models_batches_and_outputs_are_refused() {
    let dir = tmpdir("mem");
    let txt = gpt_text(&dir);
    let out = dir.join("out");
    let o = might(&gpt_args(
        &txt,
        &out,
        &["--layers", "100000", "--embd", "128"],
    ));
    assert_user_error(&o, "--layers 100000");
    assert!(text(&o.stderr).contains("memory budget"));
    let o = might(&gpt_args(
        &txt,
        &out,
        &["--embd", "1000000", "--heads", "1", "--layers", "1"],
    ));
    assert_user_error(&o, "--embd 1000000");
    let o = might(&gpt_args(
        &txt,
        &out,
        &["--batch-size", "100000000", "--memory-limit", "1G"],
    ));
    assert_user_error(&o, "--batch-size 100000000");

    let data = mnist("mem-data");
    let o = might(&train_args(
        &data,
        &out,
        &[
            "--model",
            "cnn",
            "--batch-size",
            "200",
            "--memory-limit",
            "50M",
        ],
    ));
    assert_user_error(&o, "--batch-size 200 with --model cnn");
    let o = might(&train_args(
        &data,
        &out,
        &["--prefetch", "1000000000000", "--memory-limit", "500K"],
    ));
    assert_user_error(&o, "--prefetch 1000000000000");
    let o = might(&train_args(&data, &out, &["--memory-limit", "lots"]));
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(text(&o.stderr).contains("--memory-limit"));

    let g = dir.join("g");
    let o = might(&gpt_args(&txt, &g, &[]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ck = g.join("last.safetensors");
    let o = might(&[
        "sample",
        ck.to_str().unwrap(),
        "--tokens",
        "1000000000000000",
    ]);
    assert_user_error(&o, "--tokens 1000000000000000");
    std::fs::remove_dir_all(&dir).ok();
    std::fs::remove_dir_all(&data).ok();
}

// ---- 8. checkpoint metadata checked against the tensors ------------------------------

#[test]
fn forged_checkpoint_metadata_is_refused_before_building_the_model() {
    let data = mnist("meta-data");
    let out = tmpdir("meta-out");
    let o = might(&train_args(&data, &out, &["--epochs", "1"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ck = out.join("last.safetensors");
    let png = out.join("x.png");
    image::GrayImage::from_pixel(28, 28, image::Luma([9]))
        .save(&png)
        .unwrap();
    for (field, value) in [
        ("chw", "99999999,99999999,99999999"),
        ("chw", "1,2000,2000"),
        ("chw", "1,30000,30000"),
        ("chw", "1,28"),
        ("chw", "7,28,28"),
        ("classes", "a|b"),
    ] {
        let forged = out.join("forged.safetensors");
        forge_meta(&ck, &forged, &[(field, value)]);
        let f = forged.to_str().unwrap();
        let o = might(&["eval", f, "--data", data.to_str().unwrap()]);
        assert_user_error(&o, &format!("{f}: checkpoint field {field}"));
        let o = might(&["predict", f, png.to_str().unwrap()]);
        assert_user_error(&o, &format!("{f}: checkpoint field {field}"));
    }

    let txt = gpt_text(&out);
    let g = out.join("gpt");
    let o = might(&gpt_args(&txt, &g, &[]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let gck = g.join("last.safetensors");
    for (field, value) in [
        ("n_layer", "100000000"),
        ("n_embd", "1000000"),
        ("block_size", "100000000"),
        ("n_head", "3"),
    ] {
        let forged = g.join("forged.safetensors");
        forge_meta(&gck, &forged, &[(field, value)]);
        let f = forged.to_str().unwrap();
        let o = might(&["sample", f, "--tokens", "5", "--prompt", "a"]);
        assert_user_error(&o, f);
        assert!(text(&o.stderr).contains(field), "{}", text(&o.stderr));
    }
    std::fs::remove_dir_all(&data).ok();
    std::fs::remove_dir_all(&out).ok();
}

// ---- 9. messages ---------------------------------------------------------------------

#[test]
fn messages_are_single_lines_and_gpt_metrics_say_step_and_val() {
    let dir = tmpdir("msg");
    // one `error:` prefix, not two
    let o = might(&["train", "gpt", "--epochs", "1"]);
    assert_user_error(&o, "--epochs");

    // a corrupt PNG: one line naming the file
    let data = mnist("msg-data");
    let out = dir.join("out");
    let o = might(&train_args(&data, &out, &["--epochs", "1"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ck = out.join("last.safetensors");
    let good = dir.join("good.png");
    image::GrayImage::from_pixel(28, 28, image::Luma([9]))
        .save(&good)
        .unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.join("cut.png");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let junk = dir.join("junk.png");
    let mut j = bytes[..16].to_vec();
    j.extend_from_slice(&[0xAB; 64]);
    std::fs::write(&junk, j).unwrap();
    for p in [&cut, &junk] {
        let o = might(&["predict", ck.to_str().unwrap(), p.to_str().unwrap()]);
        assert_user_error(&o, p.to_str().unwrap());
    }

    let txt = gpt_text(&dir);
    let g = dir.join("gpt");
    let o = might(&gpt_args(&txt, &g, &[]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let csv = std::fs::read_to_string(g.join("metrics.csv")).unwrap();
    assert_eq!(
        csv.lines().next().unwrap(),
        "step,train_loss,train_acc,val_loss,val_acc,seconds"
    );
    let svg = std::fs::read_to_string(g.join("curves.svg")).unwrap();
    assert!(svg.contains(">val<") && svg.contains(">step ("), "{svg}");
    assert!(!svg.contains(">test<") && !svg.contains(">epoch ("));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::remove_dir_all(&data).ok();
}
