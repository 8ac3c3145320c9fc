//! The `train`, `eval` and `predict` commands.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use might::data::{DataLoader, Dataset};
use might::nn::load_state_dict;
use might::nn::Module;
use might::optim::{
    Adam, AdamConfig, AdamW, OneCycleLR, Optimizer, Scheduler, Sgd, SgdConfig, WarmupCosine,
};
use might::{Device, Tensor};

use crate::checks::Ticker;
use crate::ckpt::{self, Checkpoint};
use crate::dist::Job;
use crate::meter::{parse_device, Meter};
use crate::net::cross_entropy;
use crate::plot::{self, Row};
use crate::rundir::RunDir;
use crate::{data, DatasetName, ModelName, OptimizerName, ScheduleName, TrainArgs};

/// A user-facing error: printed as one line, exit code 1.
#[derive(Debug)]
pub struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl From<might::Error> for CliError {
    fn from(e: might::Error) -> Self {
        CliError(format!("{}: {}", e.op, e.msg))
    }
}
impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError(e.to_string())
    }
}

pub(crate) type Res<T> = Result<T, CliError>;

/// Build the model for `kind` on inputs of shape `chw` with `classes` outputs.
pub fn build_model(kind: ModelName, chw: [usize; 3], classes: usize) -> Res<Box<dyn Module>> {
    let inputs = chw.iter().product();
    match kind {
        ModelName::Mlp => Ok(Box::new(might::models::vision::mlp(inputs, 128, classes)?)),
        ModelName::Cnn => crate::net::cnn(chw, classes),
        ModelName::SmallCnn => crate::net::small_cnn(chw, classes),
    }
}

/// Floats one sample keeps alive in a training step of `kind` on `chw` inputs (activations
/// saved for the backward pass, their gradients, the im2col buffers of the convolutions): an
/// estimate on the generous side, to refuse a batch that cannot fit before it is built.
fn floats_per_sample(kind: ModelName, [c, h, w]: [usize; 3], classes: usize) -> u128 {
    let (c, h, w, k) = (c as u128, h as u128, w as u128, classes as u128);
    let hw = h * w;
    // conv3x3 (cin → cout) at `hw` pixels: im2col, conv, BN, ReLU outputs
    let conv = |cin: u128, cout: u128, hw: u128| 9 * cin * hw + 3 * cout * hw;
    let forward = match kind {
        ModelName::Mlp => c * hw + 3 * 128 + 3 * k,
        ModelName::Cnn if c == 1 => {
            c * hw + conv(c, 32, hw) + 8 * hw + conv(32, 64, hw / 4) + 4 * hw + 3 * 128 + 3 * k
        }
        ModelName::Cnn => {
            let mut f = c * hw;
            let (mut cin, mut px) = (c, hw);
            for (cout, pool) in [(32u128, true), (64, true), (128, true), (256, false)] {
                f += conv(cin, cout, px);
                if pool {
                    px /= 4;
                    f += cout * px;
                }
                cin = cout;
            }
            f + 3 * k
        }
        ModelName::SmallCnn => c * hw + 9 * c * hw + 8 * hw * 3 + 72 * hw / 4 + 16 * hw + 3 * k,
    };
    // the gradients of the saved activations, as large again
    2 * forward
}

/// Refuse `--batch-size` / `--prefetch` values whose buffers would not fit the memory
/// budget, before the model or any batch is built.
fn check_memory(args: &TrainArgs, chw: [usize; 3], classes: usize, train_len: usize) -> Res<()> {
    let batch = args.batch_size.min(train_len.max(1)) as u128;
    let per = floats_per_sample(args.model, chw, classes);
    crate::checks::fits(
        &format!(
            "--batch-size {} with --model {}",
            args.batch_size,
            args.model.as_str()
        ),
        &format!("the activations of one batch of {batch}"),
        batch.saturating_mul(per).saturating_mul(4),
    )?;
    let steps = train_len.div_ceil(args.batch_size.max(1)) as u128;
    if let Some(p) = args.prefetch {
        let input = chw.iter().map(|&d| d as u128).product::<u128>();
        let queued = (p as u128).min(steps);
        crate::checks::fits(
            &format!("--prefetch {p}"),
            &format!("{queued} queued batches of {batch} samples"),
            queued.saturating_mul(batch).saturating_mul(input * 4 + 8),
        )?;
    }
    Ok(())
}

/// Peak resident memory of this process in MiB (`VmHWM`), 0 when unknown.
pub(crate) fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Samples per evaluation batch.
const EVAL_BATCH: usize = 256;

/// Mean loss and accuracy of `model` over `ds`.
fn evaluate(
    model: &mut dyn Module,
    ds: Arc<dyn Dataset>,
    device: Device,
    ticker: &mut Ticker,
) -> Res<(f64, f64)> {
    model.train(false);
    let _g = might::no_grad();
    // 256 per batch: large enough to keep the kernels busy, small enough that a CNN's
    // activations stay ~100 MB (1000 per batch: ~690 MB peak RSS for the MNIST CNN)
    let loader = DataLoader::new(ds.clone(), EVAL_BATCH, false, false, 0).with_device(device);
    let total = loader.len();
    let mut meter = Meter::new(device);
    let t0 = Instant::now();
    for (i, batch) in loader.iter().enumerate() {
        let (x, y) = batch?;
        let logits = model.forward(&x)?;
        let b = y.dims()[0];
        meter.add(&cross_entropy(&logits, &y)?, b as f64, &logits, &y)?;
        ticker.tick(|| {
            format!(
                "evaluating: batch {}/{total} ({:.1}s)",
                i + 1,
                t0.elapsed().as_secs_f64()
            )
        });
    }
    let (loss_sum, right, n) = meter.read()?;
    model.train(true);
    let n = n.max(1) as f64;
    Ok((loss_sum / n, right as f64 / n))
}

/// The optimizer the run uses: `--optimizer`, else SGD for the MLP (the classic experiment)
/// and Adam for the CNNs.
fn optimizer_name(args: &TrainArgs) -> OptimizerName {
    args.optimizer.unwrap_or(match args.model {
        ModelName::Mlp | ModelName::SmallCnn => OptimizerName::Sgd,
        ModelName::Cnn => OptimizerName::Adam,
    })
}

fn make_optimizer(args: &TrainArgs, params: Vec<Tensor>) -> Res<Box<dyn Optimizer>> {
    let cnn = args.model == ModelName::Cnn;
    Ok(match optimizer_name(args) {
        OptimizerName::Sgd => Box::new(Sgd::new(
            params,
            SgdConfig {
                lr: args.lr.unwrap_or(if cnn { 0.05 } else { 0.01 }),
                momentum: args.momentum,
                weight_decay: args.weight_decay.unwrap_or(0.0),
                ..Default::default()
            },
        )?),
        OptimizerName::Adam => Box::new(Adam::new(
            params,
            AdamConfig {
                lr: args.lr.unwrap_or(if cnn { 3e-3 } else { 1e-3 }),
                weight_decay: args.weight_decay.unwrap_or(0.0),
                ..Default::default()
            },
        )?),
        OptimizerName::Adamw => Box::new(AdamW::new(
            params,
            AdamConfig {
                lr: args.lr.unwrap_or(if cnn { 3e-3 } else { 1e-3 }),
                weight_decay: args.weight_decay.unwrap_or(0.01),
                ..AdamConfig::adamw()
            },
        )?),
    })
}

/// The learning-rate schedule over the whole run (`total` steps): `--schedule`, else constant
/// for the MLP and one-cycle for the CNNs. `None` keeps the optimizer's lr.
fn make_schedule(args: &TrainArgs, base_lr: f64, total: usize) -> Res<Option<Scheduler>> {
    let name = args.schedule.unwrap_or(match args.model {
        ModelName::Mlp | ModelName::SmallCnn => ScheduleName::Constant,
        ModelName::Cnn => ScheduleName::Onecycle,
    });
    let total = total.max(2);
    Ok(match name {
        ScheduleName::Constant => None,
        // warm up over the first quarter (at least one step), then anneal to ~0
        ScheduleName::Onecycle => {
            let pct = (1.5 / total as f64).clamp(0.25, 0.75);
            Some(Scheduler::new(
                base_lr,
                OneCycleLR::with_options(total, pct, 25.0, 1e3)?,
            ))
        }
        ScheduleName::Cosine => Some(Scheduler::new(
            base_lr,
            WarmupCosine::new((total / 20).min(total - 1), total, 0.0)?,
        )),
    })
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

pub(crate) fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

pub(crate) fn num(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.6}")
    } else {
        "null".into()
    }
}

/// The flag values `train` refuses before loading anything.
fn check_args(args: &TrainArgs) -> Res<()> {
    if args.batch_size == 0 {
        return Err(CliError("--batch-size must be at least 1".into()));
    }
    if args.epochs == 0 {
        return Err(CliError("--epochs must be at least 1".into()));
    }
    if args.limit == Some(0) {
        return Err(CliError(
            "--limit must be at least 1 (it is the number of training samples)".into(),
        ));
    }
    if let Some(lr) = args.lr {
        crate::checks::positive("--lr", lr)?;
    }
    crate::checks::in_range("--momentum", args.momentum, 0.0, 1.0, false)?;
    if let Some(wd) = args.weight_decay {
        crate::checks::in_range("--weight-decay", wd, 0.0, f64::MAX, true)?;
    }
    crate::checks::positive("--progress-every", args.progress_every)?;
    Ok(())
}

pub fn train(args: &TrainArgs) -> Res<()> {
    check_args(args)?;
    crate::checks::apply_threads(args.threads)?;
    let threads = might::get_num_threads();
    let dir = args
        .data
        .clone()
        .unwrap_or_else(|| data::default_dir(args.dataset));
    let loaded = data::load(
        args.dataset,
        &dir,
        true,
        args.seed,
        args.limit,
        !args.no_normalize,
    )?;
    let train_ds = loaded.train.clone().expect("train split was asked for");
    check_memory(args, loaded.chw, loaded.classes.len(), train_ds.len())?;
    let out = args
        .out
        .clone()
        .or_else(|| args.resume.clone())
        .unwrap_or_else(|| {
            PathBuf::from(format!(
                "runs/{}-{}",
                args.dataset.as_str(),
                args.model.as_str()
            ))
        });
    let device = parse_device(&args.device)?;
    let mut job = Job::init(args.distributed)?;
    // rank 0 writes the run's files: it alone holds the folder
    let run = if job.is_main() {
        let flag = if args.out.is_some() {
            "--out"
        } else if args.resume.is_some() {
            "--resume"
        } else {
            "--out"
        };
        Some(RunDir::open(&out, flag)?)
    } else {
        None
    };

    might::manual_seed(args.seed);
    let mut model = build_model(args.model, loaded.chw, loaded.classes.len())?;
    model.to_device(device)?;
    // every rank starts from rank 0's parameters
    job.attach(model.parameters())?;
    let mut opt = make_optimizer(args, model.parameters())?;
    // A loader thread for in-memory MNIST batches only where a core is free for it: with
    // every core running kernels its wake-ups preempt a kernel thread the others then wait
    // for (small CNN at 2 threads: 2.7 s an epoch with it, 2.0 s without), while at 1 thread
    // on 2 cores it hides the batch copy (MLP: 0.35 s an epoch without it, 0.27 s with).
    let spare_core = std::thread::available_parallelism().map_or(1, |n| n.get()) > threads;
    let prefetch = args.prefetch.unwrap_or(match args.dataset {
        DatasetName::Mnist | DatasetName::FashionMnist if !spare_core => 0,
        _ => 8,
    });
    let loader = DataLoader::new(train_ds.clone(), args.batch_size, true, false, args.seed)
        .with_prefetch(prefetch)
        .with_device(device)
        .with_shard(job.rank(), job.world());
    let steps = loader.len() as u64;
    let mut sched = make_schedule(args, opt.lr(), (args.epochs * steps) as usize)?;
    let mut start_epoch = 0;
    let mut rows: Vec<Row> = Vec::new();
    if let Some(rdir) = &args.resume {
        let path = rdir.join("last.safetensors");
        let ck = ckpt::load(&path)?;
        if ck.meta.get("dataset").map(String::as_str) != Some(args.dataset.as_str())
            || ck.meta.get("model").map(String::as_str) != Some(args.model.as_str())
        {
            return Err(CliError(format!(
                "{} is a {}/{} checkpoint, not {}/{}",
                path.display(),
                ck.meta.get("dataset").map_or("?", |s| s),
                ck.meta.get("model").map_or("?", |s| s),
                args.dataset.as_str(),
                args.model.as_str()
            )));
        }
        load_state_dict(model.as_ref(), &ck.model, true)?;
        opt.load_state_dict(&ck.optimizer)?;
        might::tensor::random::set_global_state(ck.rng);
        start_epoch = ck.epoch;
        rows = Row::read_until(&rdir.join("metrics.csv"), start_epoch);
        if job.is_main() {
            eprintln!("resuming from {} (epoch {start_epoch})", path.display());
        }
    }
    let main = job.is_main();

    loader.set_epoch(start_epoch);
    if let Some(s) = sched.as_mut() {
        s.set_step((start_epoch * steps) as usize);
        s.apply(opt.as_mut());
    }
    if main {
        eprintln!(
            "training {} on {} ({} train / {} test samples, {} parameters, {}{})",
            args.model.as_str(),
            args.dataset.as_str(),
            train_ds.len(),
            loaded.test.len(),
            model.num_parameters(),
            if device == Device::Cpu {
                format!("{threads} threads")
            } else {
                format!("on {device}: {}", device.name())
            },
            if job.world() > 1 {
                format!(", {} ranks", job.world())
            } else {
                String::new()
            }
        );
    }
    let style = ProgressStyle::with_template(
        "{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed_precise}, eta {eta})",
    )
    .expect("valid template")
    .progress_chars("=> ");
    let mut epoch_secs = Vec::new();
    let mut samples_total = 0usize;
    let mut ticker = if main {
        Ticker::new(args.progress_every)
    } else {
        Ticker::off()
    };
    // the best test accuracy so far (best.safetensors holds its model)
    let mut best = rows
        .iter()
        .map(|r| r.test_acc)
        .fold(f64::NEG_INFINITY, f64::max);
    for epoch in start_epoch..args.epochs {
        let pb = ProgressBar::new(steps);
        if !main {
            pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        pb.set_style(style.clone());
        pb.set_prefix(format!("epoch {}/{}", epoch + 1, args.epochs));
        let t0 = Instant::now();
        let mut meter = Meter::new(device);
        for (step, batch) in loader.iter().enumerate() {
            let (x, y) = batch?;
            let logits = model.forward(&x)?;
            let loss = cross_entropy(&logits, &y)?;
            opt.zero_grad();
            loss.backward()?;
            job.sync_gradients()?;
            opt.step()?;
            if let Some(s) = sched.as_mut() {
                s.step(opt.as_mut());
            }
            let b = y.dims()[0];
            let at = |e: CliError| {
                pb.finish_and_clear();
                CliError(format!(
                    "{} at epoch {} step {step} (learning rate too high?)",
                    e.0,
                    epoch + 1
                ))
            };
            meter.add(&loss, b as f64, &logits, &y).map_err(at)?;
            pb.inc(1);
            ticker.tick(|| {
                format!(
                    "epoch {}/{}: step {}/{steps} ({:.1}s)",
                    epoch + 1,
                    args.epochs,
                    step + 1,
                    t0.elapsed().as_secs_f64()
                )
            });
            // on a GPU this is the only wait for the device during the epoch
            if step % 10 == 0 {
                let (loss_sum, right, seen) = meter.read().map_err(at)?;
                let sps = seen as f64 / t0.elapsed().as_secs_f64().max(1e-9);
                pb.set_message(format!(
                    "loss {:.4} acc {:.2}% {sps:.0} samples/s",
                    loss_sum / seen as f64,
                    100.0 * right as f64 / seen as f64
                ));
            }
        }
        let (loss_sum, right, seen) = meter.read()?;
        // the epoch's figures over every rank
        let mut sums = [loss_sum, right as f64, seen as f64];
        job.sum(&mut sums)?;
        let (loss_sum, right, seen) = (sums[0], sums[1] as usize, sums[2] as usize);
        pb.finish_and_clear();
        let secs = t0.elapsed().as_secs_f64();
        epoch_secs.push(secs);
        samples_total += seen;
        let (test_loss, test_acc) = if main {
            evaluate(model.as_mut(), loaded.test.clone(), device, &mut ticker)?
        } else {
            (0.0, 0.0)
        };
        let row = Row {
            epoch: epoch + 1,
            train_loss: loss_sum / seen.max(1) as f64,
            train_acc: right as f64 / seen.max(1) as f64,
            test_loss,
            test_acc,
            seconds: secs,
        };
        if !main {
            // rank 0 reports and writes; the others only keep the count of epochs
            rows.push(row);
            continue;
        }
        println!(
            "epoch {}/{}: train_loss {:.4} train_acc {:.2}% test_loss {:.4} test_acc {:.2}% ({secs:.1}s, {:.0} samples/s)",
            row.epoch,
            args.epochs,
            row.train_loss,
            100.0 * row.train_acc,
            row.test_loss,
            100.0 * row.test_acc,
            seen as f64 / secs.max(1e-9)
        );
        let improved = row.test_acc > best;
        best = best.max(row.test_acc);
        rows.push(row);
        let run = run.as_ref().expect("rank 0 holds the run folder");
        let mut csv = plot::EPOCHS.csv_header();
        csv.push('\n');
        for r in &rows {
            csv += &r.csv();
            csv.push('\n');
        }
        run.write("metrics.csv", &csv)?;
        run.write("curves.svg", &plot::curves_svg(&rows, plot::EPOCHS))?;
        let mut meta = BTreeMap::new();
        meta.insert("dataset".to_string(), args.dataset.as_str().to_string());
        meta.insert("model".to_string(), args.model.as_str().to_string());
        meta.insert(
            "chw".to_string(),
            loaded.chw.map(|d| d.to_string()).join(","),
        );
        meta.insert("classes".to_string(), loaded.classes.join("|"));
        meta.insert("mean".to_string(), join_f32(&loaded.mean));
        meta.insert("std".to_string(), join_f32(&loaded.std));
        let ck = Checkpoint {
            model: model.state_dict(),
            optimizer: opt.state_dict(),
            epoch: epoch + 1,
            step: (epoch + 1) * steps,
            rng: might::tensor::random::global_state(),
            meta,
        };
        if args.keep_checkpoints > 0 {
            ckpt::save(
                &out.join(format!("checkpoint-epoch{}.safetensors", epoch + 1)),
                &ck,
            )?;
        }
        run.prune("checkpoint-epoch", args.keep_checkpoints);
        if improved {
            ckpt::save(&out.join("best.safetensors"), &ck)?;
        }
        ckpt::save(&out.join("last.safetensors"), &ck)?;
        if crate::term::stdout_closed() {
            // `might train … | head -1`: the reader left; this epoch is saved, stop here
            eprintln!(
                "stdout closed: stopping after epoch {} (saved in {})",
                epoch + 1,
                out.display()
            );
            return Ok(());
        }
    }
    let last = rows.last().cloned().ok_or_else(|| {
        CliError(format!(
            "nothing to do: the run in {} already has {} epochs",
            out.display(),
            start_epoch
        ))
    })?;
    let train_secs: f64 = epoch_secs.iter().sum();
    if !main {
        return Ok(());
    }
    println!(
        "{{\"dataset\":{},\"model\":{},\"epochs\":{},\"train_loss\":{},\"test_accuracy\":{},\"seconds_per_epoch\":{},\"samples_per_second\":{},\"peak_rss_mb\":{},\"threads\":{},\"matmul_precision\":{},{},{}}}",
        json_str(args.dataset.as_str()),
        json_str(args.model.as_str()),
        last.epoch,
        num(last.train_loss),
        num(last.test_acc),
        num(median(&mut epoch_secs)),
        num(samples_total as f64 / train_secs.max(1e-9)),
        num(peak_rss_mb()),
        threads,
        json_str(&might::get_float32_matmul_precision().to_string()),
        crate::meter::json_fields(device),
        job.json_fields(args.batch_size, train_secs)
    );
    Ok(())
}

fn join_f32(v: &[f32]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Model, dataset name, input shape and classes stored in a checkpoint.
fn restore(path: &Path) -> Res<(Box<dyn Module>, DatasetName, Checkpoint)> {
    let ck = ckpt::load(path)?;
    let get = |k: &str| {
        ck.meta
            .get(k)
            .cloned()
            .ok_or_else(|| CliError(format!("{}: checkpoint has no {k}", path.display())))
    };
    let ds = DatasetName::parse(&get("dataset")?)
        .ok_or_else(|| CliError(format!("{}: unknown dataset", path.display())))?;
    let model = match get("model")?.as_str() {
        "mlp" => ModelName::Mlp,
        "cnn" => ModelName::Cnn,
        "small-cnn" => ModelName::SmallCnn,
        m => return Err(CliError(format!("{}: unknown model {m}", path.display()))),
    };
    let chw_text = get("chw")?;
    let bad_chw = || {
        CliError(format!(
            "{}: checkpoint field chw {chw_text:?} is not three positive sizes C,H,W",
            path.display()
        ))
    };
    let chw: Vec<usize> = chw_text
        .split(',')
        .map(|d| d.trim().parse().map_err(|_| bad_chw()))
        .collect::<Res<_>>()?;
    let chw: [usize; 3] = chw.try_into().map_err(|_| bad_chw())?;
    if chw.contains(&0) {
        return Err(bad_chw());
    }
    let classes = get("classes")?.split('|').count();
    check_meta(path, model, chw, classes, &ck.model)?;
    let mut net = build_model(model, chw, classes)?;
    load_state_dict(net.as_ref(), &ck.model, true)?;
    net.train(false);
    Ok((net, ds, ck))
}

/// Check a checkpoint's `chw` and `classes` against the shapes of the tensors it holds, before
/// a model is built from them (a forged or damaged field must not size the allocations).
fn check_meta(
    path: &Path,
    kind: ModelName,
    [c, h, w]: [usize; 3],
    classes: usize,
    tensors: &[(String, Tensor)],
) -> Res<()> {
    let shown = path.display();
    if c != 1 && c != 3 {
        return Err(CliError(format!(
            "{shown}: checkpoint field chw has {c} channels; the models take 1 (gray) or 3 (RGB)"
        )));
    }
    // the layers' weights in model order (names are `INDEX.weight`)
    let mut weights: Vec<(usize, &str, &[usize])> = tensors
        .iter()
        .filter_map(|(n, t)| {
            let (i, rest) = n.split_once('.')?;
            (rest == "weight").then_some((i.parse().ok()?, n.as_str(), t.dims()))
        })
        .collect();
    weights.sort_by_key(|w| w.0);
    let linear: Vec<_> = weights.iter().filter(|w| w.2.len() == 2).collect();
    let (Some(first), Some(last)) = (linear.first(), linear.last()) else {
        return Err(CliError(format!(
            "{shown}: checkpoint has no Linear layer weights for model {}",
            kind.as_str()
        )));
    };
    if kind != ModelName::Mlp {
        let conv = weights.iter().find(|w| w.2.len() == 4).ok_or_else(|| {
            CliError(format!(
                "{shown}: checkpoint has no convolution weights for model {}",
                kind.as_str()
            ))
        })?;
        if conv.2[1] != c {
            return Err(CliError(format!(
                "{shown}: checkpoint field chw says {c} channels, but {} has shape {:?}",
                conv.1, conv.2
            )));
        }
    }
    let side = |n: usize| (n.saturating_sub(2) / 2).saturating_sub(2) / 2;
    let features = match kind {
        ModelName::Mlp => [c, h, w],
        ModelName::Cnn if c == 1 => [64, h / 4, w / 4],
        ModelName::Cnn => [256, h / 8, w / 8],
        ModelName::SmallCnn => [16, side(h), side(w)],
    }
    .iter()
    .try_fold(1usize, |a, &d| a.checked_mul(d));
    if features != Some(first.2[1]) {
        return Err(CliError(format!(
            "{shown}: checkpoint field chw {c},{h},{w} does not match the model's weights ({} has shape {:?})",
            first.1, first.2
        )));
    }
    if last.2[0] != classes {
        return Err(CliError(format!(
            "{shown}: checkpoint field classes names {classes} classes, but {} has shape {:?}",
            last.1, last.2
        )));
    }
    Ok(())
}

pub fn eval(
    path: &Path,
    data_dir: Option<&Path>,
    threads: Option<usize>,
    progress_every: f64,
) -> Res<()> {
    crate::checks::positive("--progress-every", progress_every)?;
    crate::checks::apply_threads(threads)?;
    let (mut net, ds, ck) = restore(path)?;
    let dir = data_dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| data::default_dir(ds));
    let loaded = data::load(
        ds,
        &dir,
        false,
        0,
        None,
        !ck.meta.get("mean").is_none_or(|m| m.is_empty()),
    )?;
    let t0 = Instant::now();
    let (loss, acc) = evaluate(
        net.as_mut(),
        loaded.test.clone(),
        Device::Cpu,
        &mut Ticker::new(progress_every),
    )?;
    println!(
        "{{\"dataset\":{},\"model\":{},\"epoch\":{},\"test_loss\":{},\"test_accuracy\":{},\"samples\":{},\"seconds\":{}}}",
        json_str(ds.as_str()),
        json_str(ck.meta.get("model").map_or("?", |s| s)),
        ck.epoch,
        num(loss),
        num(acc),
        loaded.test.len(),
        num(t0.elapsed().as_secs_f64())
    );
    Ok(())
}

#[cfg(feature = "image")]
pub fn predict(path: &Path, image: &Path) -> Res<()> {
    let (net, _ds, ck) = restore(path)?;
    let chw: Vec<usize> = ck.meta["chw"]
        .split(',')
        .filter_map(|d| d.parse().ok())
        .collect();
    let classes: Vec<&str> = ck.meta["classes"].split('|').collect();
    let parse = |k: &str| -> Vec<f32> {
        ck.meta
            .get(k)
            .map(|s| s.split(',').filter_map(|v| v.parse().ok()).collect())
            .unwrap_or_default()
    };
    let (mean, std) = (parse("mean"), parse("std"));
    let (px, s) =
        might::data::image_folder::load_image(image, chw[0] == 1, Some((chw[1], chw[2])))?;
    let hw = s[1] * s[2];
    let x: Vec<f32> = px
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let c = i / hw;
            let v = v as f32 / 255.0;
            match (mean.get(c), std.get(c)) {
                (Some(m), Some(sd)) => (v - m) / sd,
                _ => v,
            }
        })
        .collect();
    let x = Tensor::from_vec(x, [1, s[0], s[1], s[2]])?;
    let _g = might::no_grad();
    let probs = net.forward(&x)?.softmax(-1)?.to_vec::<f32>()?;
    let mut order: Vec<usize> = (0..probs.len()).collect();
    order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]));
    let name = |i: usize| classes.get(i).copied().unwrap_or("?");
    println!("{}", name(order[0]));
    for &i in order.iter().take(5) {
        println!("  {:>12} {:.4}", name(i), probs[i]);
    }
    Ok(())
}

#[cfg(not(feature = "image"))]
pub fn predict(_path: &Path, _image: &Path) -> Res<()> {
    Err(CliError(
        "this build has no image support (build with feature `image`)".into(),
    ))
}
