//! `mpirun -np 2 might train ... --distributed` against one process: with a fixed seed, two
//! ranks at batch B reach the same parameters (within 1e-6) as one process at batch 2B (the
//! MLP, SGD with momentum, two epochs: 24 steps). Not the CNN: its BatchNorm normalises each
//! rank's B samples by their own statistics, as PyTorch's DDP does without SyncBatchNorm. Needs
//! the `mpi` feature and `mpirun` (OpenMPI); without `mpirun` the test prints that it skipped,
//! unless `MIGHT_REQUIRE_MPI=1` (set in CI), which makes that a failure.
#![cfg(feature = "mpi")]

use std::path::{Path, PathBuf};
use std::process::Command;

use might::io::safetensors;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("might-ddp-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn mpirun() -> Option<&'static str> {
    let found = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some("mpirun");
    }
    if std::env::var("MIGHT_REQUIRE_MPI").is_ok_and(|v| v == "1") {
        panic!("MIGHT_REQUIRE_MPI=1 but no mpirun (apt-get install openmpi-bin)");
    }
    eprintln!("SKIPPED (no mpirun)");
    None
}

fn train(ranks: usize, batch: usize, extra: &[&str], out: &Path) -> String {
    let bin = env!("CARGO_BIN_EXE_might");
    let b = batch.to_string();
    let o = out.to_str().unwrap();
    let mut args: Vec<&str> = vec![
        "train",
        "mnist",
        "--limit",
        "384",
        "--epochs",
        "2",
        "--seed",
        "3",
        "--threads",
        "1",
        "--batch-size",
        &b,
        "--out",
        o,
        "--data",
        "data/mnist",
    ];
    args.extend(extra);
    let output = if ranks == 1 {
        Command::new(bin)
            .args(&args)
            .current_dir("../..")
            .output()
            .unwrap()
    } else {
        let np = ranks.to_string();
        let mut a = vec!["--allow-run-as-root", "--oversubscribe", "-np", &np, bin];
        a.extend(&args);
        a.push("--distributed");
        Command::new("mpirun")
            .args(&a)
            .current_dir("../..")
            .output()
            .unwrap()
    };
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "{ranks} rank(s) failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn same_params(a: &Path, b: &Path, tol: f64) {
    let (ta, tb) = (
        safetensors::load(a.join("last.safetensors")).unwrap(),
        safetensors::load(b.join("last.safetensors")).unwrap(),
    );
    let mut compared = 0;
    for (name, x) in &ta {
        if !name.starts_with("model.") {
            continue;
        }
        let y = &tb.iter().find(|(n, _)| n == name).unwrap().1;
        for (i, (p, q)) in x.to_f64_vec().iter().zip(y.to_f64_vec()).enumerate() {
            assert!(
                (p - q).abs() <= tol,
                "{name}[{i}]: 2 ranks {p} vs 1 process {q}"
            );
        }
        compared += 1;
    }
    assert!(compared > 0, "no model tensors in {}", a.display());
}

#[test]
fn two_ranks_at_batch_b_equal_one_process_at_batch_2b() {
    let Some(_) = mpirun() else { return };
    let (one, two) = (tmpdir("mlp-1"), tmpdir("mlp-2"));
    let s1 = train(1, 32, &[], &one);
    let s2 = train(2, 16, &[], &two);
    same_params(&two, &one, 1e-6);
    // only rank 0 prints the result, which names the world and the global batch
    assert_eq!(s2.matches("\"world_size\":2").count(), 1, "{s2}");
    assert!(s2.contains("\"global_batch\":32"), "{s2}");
    assert!(s1.contains("\"world_size\":1"), "{s1}");
}

/// A rank that stops answering (SIGSTOP: alive, but never reaches the next all-reduce) makes
/// the other exit with a clear error after the collective timeout instead of hanging.
#[test]
fn a_hung_rank_makes_the_others_exit_with_a_clear_error() {
    let Some(_) = mpirun() else { return };
    let out = tmpdir("hang");
    let o = out.to_str().unwrap().to_string();
    let bin = env!("CARGO_BIN_EXE_might");
    let child = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2", bin])
        .args([
            "train",
            "mnist",
            "--epochs",
            "50",
            "--limit",
            "2048",
            "--threads",
            "1",
        ])
        .args(["--data", "data/mnist", "--distributed", "--out", &o])
        .env("MIGHT_DIST_TIMEOUT", "3")
        .current_dir("../..")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // wait until both ranks train, then freeze one of them
    let t0 = std::time::Instant::now();
    let ranks = loop {
        let o = Command::new("pgrep").args(["-f", &o]).output().unwrap();
        let pids: Vec<String> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .filter(|p| *p != child.id().to_string())
            .collect();
        if pids.len() >= 2 && out.join("metrics.csv").exists() {
            break pids;
        }
        assert!(t0.elapsed().as_secs() < 60, "ranks did not start: {pids:?}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let frozen = ranks.last().unwrap().clone();
    Command::new("kill")
        .args(["-STOP", &frozen])
        .status()
        .unwrap();
    let t1 = std::time::Instant::now();
    let result = child.wait_with_output().unwrap();
    Command::new("kill").args(["-KILL", &frozen]).status().ok();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!result.status.success(), "the job should fail");
    assert!(t1.elapsed().as_secs() < 60, "took {:?}", t1.elapsed());
    assert!(
        stderr.contains("got no answer from the other ranks") && stderr.contains("all_reduce"),
        "{stderr}"
    );
}
