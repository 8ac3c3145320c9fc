//! Resuming from a checkpoint reproduces the uninterrupted run bit for bit: model parameters,
//! AdamW moments and step count, the learning-rate schedule position and the global RNG
//! (dropout masks and batch sampling draw from it) all travel through the checkpoint file.
//!
//! One test function per concern, and a single one touches the global generator, because the
//! generator is process-wide and tests in one binary run in parallel.

use might::nn::functional::{cross_entropy, CrossEntropyOptions};
use might::nn::load_state_dict;
use might::nn::{Dropout, Linear, Module, ReLU, Sequential};
use might::optim::checkpoint::{load_checkpoint, save_checkpoint, Checkpoint};
use might::optim::{AdamConfig, AdamW, Optimizer, Scheduler, WarmupCosine};
use might::tensor::random::{global_state, set_global_state};
use might::{DType, Generator, Tensor};

const STEPS: usize = 40;
const SPLIT: usize = 17;
const BATCH: usize = 8;

struct Run {
    model: Sequential,
    opt: AdamW,
    sched: Scheduler,
}

/// Linear-ReLU-Dropout-Linear, AdamW with a warmup + cosine schedule; weights from the global
/// generator seeded with `seed`.
fn build(seed: u64) -> Run {
    might::manual_seed(seed);
    let model = Sequential::new()
        .add(Linear::new(6, 16, true).unwrap())
        .add(ReLU)
        .add(Dropout::new(0.3))
        .add(Linear::new(16, 3, true).unwrap());
    let mut opt = AdamW::new(
        model.parameters(),
        AdamConfig {
            lr: 0.02,
            ..AdamConfig::adamw()
        },
    )
    .unwrap();
    let sched = Scheduler::for_optimizer(&mut opt, WarmupCosine::new(5, STEPS, 0.1).unwrap());
    Run { model, opt, sched }
}

/// A fixed data set (its own generator, so the global one only drives training).
fn dataset() -> (Tensor, Tensor) {
    let mut g = Generator::new(42);
    let x: Vec<f32> = (0..64 * 6).map(|_| g.next_normal() as f32).collect();
    let y: Vec<i64> = (0..64).map(|_| g.below(3) as i64).collect();
    (
        Tensor::from_vec(x, [64, 6]).unwrap(),
        Tensor::from_vec(y, [64]).unwrap(),
    )
}

/// One step: a random batch (global RNG), forward with dropout (global RNG), AdamW, schedule.
fn step(run: &mut Run, x: &Tensor, y: &Tensor) {
    let idx = Tensor::rand_int(0, 64, [BATCH]).unwrap();
    let (xb, yb) = (
        x.index_select(0, &idx).unwrap(),
        y.index_select(0, &idx).unwrap(),
    );
    let loss = cross_entropy(
        &run.model.forward(&xb).unwrap(),
        &yb,
        &CrossEntropyOptions::default(),
    )
    .unwrap();
    run.opt.zero_grad();
    loss.backward().unwrap();
    run.opt.step().unwrap();
    run.sched.step(&mut run.opt);
}

fn bits(model: &Sequential) -> Vec<(String, Vec<u32>)> {
    model
        .state_dict()
        .into_iter()
        .map(|(k, t)| {
            let v = t.to_vec::<f32>().unwrap();
            (k, v.iter().map(|f| f.to_bits()).collect())
        })
        .collect()
}

/// Restore a fresh run from `ck` the way a training program does after a restart.
fn restore(run: &mut Run, ck: &Checkpoint, with_rng: bool) {
    let report = load_state_dict(&run.model, &ck.model, true).unwrap();
    assert!(report.is_clean());
    run.opt.load_state_dict(&ck.optimizer).unwrap();
    run.sched.set_step(ck.step as usize);
    run.sched.apply(&mut run.opt);
    if with_rng {
        set_global_state(ck.rng);
    }
}

#[test]
fn resume_from_checkpoint_is_bitwise_identical() {
    let (x, y) = dataset();
    let dir = std::env::temp_dir().join(format!("might-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ck.safetensors");

    // Uninterrupted reference run.
    let mut a = build(7);
    for _ in 0..STEPS {
        step(&mut a, &x, &y);
    }
    let reference = bits(&a.model);
    let final_lr = a.opt.lr();

    // Interrupted run: SPLIT steps, checkpoint, everything dropped.
    let mut b = build(7);
    for _ in 0..SPLIT {
        step(&mut b, &x, &y);
    }
    let ck = Checkpoint {
        model: b.model.state_dict(),
        optimizer: b.opt.state_dict(),
        step: b.sched.current_step() as u64,
        epoch: 0,
        rng: global_state(),
        extra: Default::default(),
    };
    save_checkpoint(&path, &ck).unwrap();
    drop(b);

    // A new process would start from other weights and another RNG state.
    let mut c = build(12345);
    assert_ne!(bits(&c.model), reference);
    let loaded = load_checkpoint(&path).unwrap();
    assert_eq!(loaded.step, SPLIT as u64);
    restore(&mut c, &loaded, true);
    for _ in SPLIT..STEPS {
        step(&mut c, &x, &y);
    }
    assert_eq!(c.opt.lr().to_bits(), final_lr.to_bits());
    let resumed = bits(&c.model);
    for ((name, r), (_, got)) in reference.iter().zip(&resumed) {
        let diff = r.iter().zip(got).filter(|(a, b)| a != b).count();
        assert_eq!(diff, 0, "{name}: {diff} of {} elements differ", r.len());
    }

    // The test can fail: the same resume without the RNG state diverges (other dropout masks
    // and batches), and so does one that skips the optimizer state.
    let mut d = build(12345);
    restore(&mut d, &loaded, false);
    for _ in SPLIT..STEPS {
        step(&mut d, &x, &y);
    }
    assert_ne!(bits(&d.model), reference, "RNG state had no effect");

    let mut e = build(12345);
    load_state_dict(&e.model, &loaded.model, true).unwrap();
    e.sched.set_step(SPLIT);
    e.sched.apply(&mut e.opt);
    set_global_state(loaded.rng);
    for _ in SPLIT..STEPS {
        step(&mut e, &x, &y);
    }
    assert_ne!(bits(&e.model), reference, "optimizer state had no effect");

    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn optimizer_state_survives_the_file_exactly() {
    // Moments after a few steps, through save/load, equal bit for bit (no f64 → text → f64 or
    // dtype loss on the way).
    let p = Tensor::from_vec(vec![0.5f32, -1.25, 3.0], [3])
        .unwrap()
        .with_requires_grad();
    let mut opt = AdamW::new(vec![p.clone()], AdamConfig::adamw()).unwrap();
    for i in 0..3 {
        let loss = p
            .mul_scalar(0.1 + i as f64)
            .unwrap()
            .square()
            .unwrap()
            .sum_all()
            .unwrap();
        opt.zero_grad();
        loss.backward().unwrap();
        opt.step().unwrap();
    }
    let state = opt.state_dict();
    let dir = std::env::temp_dir().join(format!("might-resume-opt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("o.safetensors");
    let ck = Checkpoint {
        optimizer: state.clone(),
        rng: [1, 2, 3, u64::MAX],
        step: 3,
        ..Default::default()
    };
    save_checkpoint(&path, &ck).unwrap();
    let back = load_checkpoint(&path).unwrap();
    assert_eq!(back.rng, [1, 2, 3, u64::MAX]);
    assert_eq!(back.optimizer.tensors.len(), state.tensors.len());
    assert!(!state.tensors.is_empty());
    for (name, t) in &state.tensors {
        let u = back.optimizer.tensor(name).unwrap();
        assert_eq!(u.dtype(), t.dtype(), "{name}");
        assert_eq!(u.dims(), t.dims(), "{name}");
        let (a, b) = (t.to_f64_vec(), u.to_f64_vec());
        assert!(
            a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{name}"
        );
    }
    for (name, v) in &state.scalars {
        assert_eq!(
            back.optimizer.scalar(name).unwrap().to_bits(),
            v.to_bits(),
            "{name}"
        );
    }
    assert!(t_dtype_is_float(&state));
    std::fs::remove_dir_all(&dir).ok();
}

fn t_dtype_is_float(s: &might::optim::OptimizerState) -> bool {
    s.tensors.iter().all(|(_, t)| t.dtype() == DType::F32)
}
