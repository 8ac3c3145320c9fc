//! `might train gpt` (a character-level GPT on a UTF-8 text) and `might sample` (generate
//! text from its checkpoint).
//!
//! The text's distinct characters are the vocabulary; the first 90% trains, the last 10%
//! validates. Batches are random windows of `block + 1` characters drawn with a seeded
//! generator (nanoGPT's recipe). Checkpoints hold the model, AdamW state, step, both RNG
//! states, the model config and the vocabulary, so `sample` needs nothing else.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use might::models::generate::{generate, SampleConfig};
use might::models::{CharVocab as Vocab, Gpt, GptConfig};
use might::nn::Module;
use might::optim::checkpoint::{self as ck, Checkpoint};
use might::optim::{
    clip_grad_norm_, AdamConfig, AdamW, Optimizer, ParamGroup, Scheduler, WarmupCosine,
};
use might::{Device, Generator, Tensor};

use crate::checks::Ticker;
use crate::dist::Job;
use crate::meter::{parse_device, Meter};
use crate::plot::{self, Row};
use crate::rundir::RunDir;
use crate::train::{json_str, num, peak_rss_mb, CliError};

type Res<T> = Result<T, CliError>;

/// Median step time, leaving out the first three steps when there are more (they warm the
/// caches and the buffer pool), as the PyTorch benchmark script does.
fn median_step(times: &[f64]) -> f64 {
    let mut t: Vec<f64> = times
        .iter()
        .skip(if times.len() > 3 { 3 } else { 0 })
        .copied()
        .collect();
    if t.is_empty() {
        return 0.0;
    }
    t.sort_by(|a, b| a.total_cmp(b));
    t[t.len() / 2]
}

/// Options of `might train gpt`. The defaults reach a validation loss below 1.70 nats/char on
/// the committed Shakespeare slice.
#[derive(clap::Args, Debug, Clone)]
pub struct GptTrainArgs {
    /// UTF-8 text to model character by character.
    #[arg(long, default_value = "data/text/shakespeare_1mb.txt")]
    pub text: PathBuf,
    #[arg(long, default_value_t = 4)]
    pub layers: usize,
    #[arg(long, default_value_t = 4)]
    pub heads: usize,
    #[arg(long, default_value_t = 128)]
    pub embd: usize,
    /// Context length in characters.
    #[arg(long, default_value_t = 64)]
    pub block: usize,
    /// Sequences per micro-batch.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Optimizer steps.
    #[arg(long, default_value_t = 1300)]
    pub steps: u64,
    /// Peak learning rate (after warm-up; cosine decay to 10% of it at the last step).
    #[arg(long, default_value_t = 3e-3, allow_negative_numbers = true)]
    pub lr: f64,
    #[arg(long, default_value_t = 100)]
    pub warmup: u64,
    /// AdamW weight decay for weight matrices and embeddings (none on biases and LayerNorms).
    #[arg(long, default_value_t = 0.1, allow_negative_numbers = true)]
    pub weight_decay: f64,
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub dropout: f64,
    /// Micro-batches per optimizer step (gradients are averaged).
    #[arg(long, default_value_t = 1)]
    pub grad_accum: usize,
    /// Steps between validation-loss estimates (and checkpoints).
    #[arg(long, default_value_t = 150)]
    pub eval_interval: u64,
    /// Batches per loss estimate.
    #[arg(long, default_value_t = 20)]
    pub eval_batches: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Kernel threads (default: all cores; capped at the available cores unless
    /// MIGHT_FORCE_THREADS=1).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Where to train: cpu, gpu (the first GPU), gpu:N, or best (GPU builds: `--features gpu`).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Data-parallel training over MPI (`mpirun -np N might train gpt ... --distributed`):
    /// each rank draws its own batches, gradients are averaged (MPI builds: `--features mpi`).
    #[arg(long)]
    pub distributed: bool,
    /// Output directory for metrics.csv, curves.svg and checkpoints (default runs/gpt).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue the run whose checkpoint (last.safetensors) is in this directory.
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// Step checkpoints (checkpoint-stepN.safetensors, one per evaluation) to keep, the most
    /// recent ones; last.safetensors and best.safetensors (lowest validation loss) are always
    /// kept.
    #[arg(long, default_value_t = 0)]
    pub keep_checkpoints: usize,
    /// Seconds between plain progress lines on stderr when it is not a terminal (logs, CI);
    /// a terminal shows a progress bar instead.
    #[arg(long, default_value_t = 30.0)]
    pub progress_every: f64,
}

/// `might train gpt ...`: parsed on its own so the image `train` command stays untouched.
#[derive(clap::Parser, Debug)]
#[command(
    name = "might train gpt",
    about = "Train a character-level GPT on a text file",
    after_help = crate::AFTER_HELP
)]
pub struct GptTrainCli {
    #[command(flatten)]
    pub args: GptTrainArgs,
    #[command(flatten)]
    pub precision: crate::PrecisionArg,
}

/// Options of `might sample`.
#[derive(clap::Args, Debug, Clone)]
pub struct SampleArgs {
    /// Checkpoint written by `might train gpt` (e.g. runs/gpt/last.safetensors).
    pub checkpoint: PathBuf,
    #[arg(long, default_value = "\n")]
    pub prompt: String,
    /// Characters to generate.
    #[arg(long, default_value_t = 500)]
    pub tokens: usize,
    /// 0 is greedy.
    #[arg(long, default_value_t = 0.8, allow_negative_numbers = true)]
    pub temperature: f64,
    #[arg(long)]
    pub top_k: Option<usize>,
    #[arg(long, allow_negative_numbers = true)]
    pub top_p: Option<f64>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where to run: cpu, gpu, gpu:N or best.
    #[arg(long, default_value = "cpu")]
    pub device: String,
}

/// Model config and vocabulary stored in a checkpoint.
fn config_from_meta(path: &Path, extra: &HashMap<String, String>) -> Res<(GptConfig, Vocab)> {
    might::models::gpt_from_metadata(extra)
        .map_err(|e| CliError(format!("{}: {}", path.display(), e.msg)))
}

/// Check a checkpoint's config against the tensors it holds before a model is built from it:
/// a forged or damaged `n_layer`, `n_embd`, `block_size` or vocabulary must not size the
/// allocations.
fn check_tensors(path: &Path, cfg: &GptConfig, tensors: &[(String, Tensor)]) -> Res<()> {
    let shown = path.display();
    let layers = tensors
        .iter()
        .filter_map(|(n, _)| {
            n.strip_prefix("transformer.h.")?
                .split_once('.')?
                .0
                .parse::<usize>()
                .ok()
        })
        .collect::<std::collections::BTreeSet<_>>();
    if layers.len() != cfg.n_layer || layers.last().is_some_and(|&l| l + 1 != layers.len()) {
        return Err(CliError(format!(
            "{shown}: checkpoint field n_layer is {}, but the file holds {} layers",
            cfg.n_layer,
            layers.len()
        )));
    }
    let dims = |name: &str| -> Res<&[usize]> {
        tensors
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.dims())
            .ok_or_else(|| CliError(format!("{shown}: checkpoint has no tensor {name}")))
    };
    let wte = dims("transformer.wte.weight")?;
    if wte != [cfg.vocab_size, cfg.n_embd] {
        return Err(CliError(format!(
            "{shown}: checkpoint fields vocab ({} characters) and n_embd ({}) do not match transformer.wte.weight {wte:?}",
            cfg.vocab_size, cfg.n_embd
        )));
    }
    let wpe = dims("transformer.wpe.weight")?;
    if wpe != [cfg.block_size, cfg.n_embd] {
        return Err(CliError(format!(
            "{shown}: checkpoint field block_size ({}) does not match transformer.wpe.weight {wpe:?}",
            cfg.block_size
        )));
    }
    if cfg.n_head == 0 || !cfg.n_embd.is_multiple_of(cfg.n_head) {
        return Err(CliError(format!(
            "{shown}: checkpoint field n_head ({}) does not divide n_embd ({})",
            cfg.n_head, cfg.n_embd
        )));
    }
    Ok(())
}

/// Bytes a training run of `a` needs at least: the weights with their gradients and two AdamW
/// moments, and the activations one micro-batch keeps for the backward pass (and their
/// gradients). Refused before the model is built when over the budget.
fn check_memory(a: &GptTrainArgs, vocab: usize) -> Res<()> {
    let (l, e, t, b, v) = (
        a.layers as u128,
        a.embd as u128,
        a.block as u128,
        a.batch_size as u128,
        vocab as u128,
    );
    let h = a.heads as u128;
    let params = l
        .saturating_mul(12 * e.saturating_mul(e) + 13 * e)
        .saturating_add((v + t).saturating_mul(e))
        .saturating_add(2 * e);
    crate::checks::fits(
        &format!("--layers {} --embd {}", a.layers, a.embd),
        &format!("a model of {params} parameters with its gradients and AdamW state"),
        params.saturating_mul(16),
    )?;
    // per token and layer: LayerNorms, qkv, attention rows (scores, softmax), projections,
    // the 4x MLP; then the logits
    let per_token = l
        .saturating_mul((20u128).saturating_mul(e).saturating_add(3 * h * t))
        .saturating_add(3 * v);
    crate::checks::fits(
        &format!(
            "--batch-size {} --block {} --layers {} --embd {}",
            a.batch_size, a.block, a.layers, a.embd
        ),
        "the activations of one micro-batch",
        b.saturating_mul(t)
            .saturating_mul(per_token)
            .saturating_mul(8)
            .saturating_add(params.saturating_mul(16)),
    )
}

/// Random windows: inputs `[B, T]` and the next characters `[B, T]`.
fn batch(data: &[i64], b: usize, t: usize, gen: &mut Generator) -> Res<(Tensor, Tensor)> {
    let (mut x, mut y) = (Vec::with_capacity(b * t), Vec::with_capacity(b * t));
    for _ in 0..b {
        let s = gen.below((data.len() - t) as u64) as usize;
        x.extend_from_slice(&data[s..s + t]);
        y.extend_from_slice(&data[s + 1..s + t + 1]);
    }
    Ok((Tensor::from_vec(x, [b, t])?, Tensor::from_vec(y, [b, t])?))
}

/// Mean loss and next-character accuracy over `n` random batches (fixed seed, so every
/// evaluation sees the same windows).
fn estimate(model: &mut Gpt, data: &[i64], args: &GptTrainArgs, seed: u64) -> Res<(f64, f64)> {
    let _g = might::no_grad();
    model.eval();
    let device = model.wte().device();
    let mut gen = Generator::new(seed);
    let mut meter = Meter::new(device);
    for _ in 0..args.eval_batches {
        let (x, y) = batch(data, args.batch_size, args.block, &mut gen)?;
        let (x, y) = (x.to_device(device)?, y.to_device(device)?);
        let (logits, l) = model.forward_with_loss(&x, &y)?;
        meter.add(&l, 1.0, &logits, &y)?;
    }
    let (loss, right, total) = meter.read()?;
    model.train(true);
    Ok((
        loss / args.eval_batches.max(1) as f64,
        right as f64 / total.max(1) as f64,
    ))
}

fn check_args(a: &GptTrainArgs) -> Res<()> {
    let pos = [
        ("--layers", a.layers),
        ("--heads", a.heads),
        ("--embd", a.embd),
        ("--block", a.block),
        ("--batch-size", a.batch_size),
        ("--grad-accum", a.grad_accum),
        ("--eval-batches", a.eval_batches),
        ("--steps", a.steps as usize),
        ("--eval-interval", a.eval_interval as usize),
    ];
    for (name, v) in pos {
        if v == 0 {
            return Err(CliError(format!("{name} must be at least 1")));
        }
    }
    if a.steps <= a.warmup {
        return Err(CliError(format!(
            "--steps ({}) must exceed --warmup ({})",
            a.steps, a.warmup
        )));
    }
    crate::checks::positive("--lr", a.lr)?;
    crate::checks::in_range("--weight-decay", a.weight_decay, 0.0, f64::MAX, true)?;
    crate::checks::in_range("--dropout", a.dropout, 0.0, 1.0, false)?;
    crate::checks::positive("--progress-every", a.progress_every)?;
    Ok(())
}

pub fn train(args: &GptTrainArgs) -> Res<()> {
    check_args(args)?;
    crate::checks::apply_threads(args.threads)?;
    let threads = might::get_num_threads();
    let text = std::fs::read_to_string(&args.text)
        .map_err(|e| CliError(format!("{}: {e}", args.text.display())))?;
    // sorted distinct characters: the same text always gives the same ids
    let chars: Vec<char> = text
        .chars()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let vocab = Vocab::new(chars);
    let data = vocab.encode(&text)?;
    let split = data.len() * 9 / 10;
    let (train_data, val_data) = (&data[..split], &data[split..]);
    if val_data.len() <= args.block + 1 {
        return Err(CliError(format!(
            "{}: {} characters is too short for --block {} (the validation 10% needs more than one window)",
            args.text.display(),
            data.len(),
            args.block
        )));
    }
    let cfg = GptConfig {
        vocab_size: vocab.len(),
        block_size: args.block,
        n_layer: args.layers,
        n_head: args.heads,
        n_embd: args.embd,
        dropout: args.dropout,
        bias: true,
    };
    // before validate(): the flags, not the config, are named when the model cannot fit
    check_memory(args, vocab.len())?;
    cfg.validate()?;
    let out = args
        .out
        .clone()
        .or_else(|| args.resume.clone())
        .unwrap_or_else(|| PathBuf::from("runs/gpt"));
    let device = parse_device(&args.device)?;
    let mut job = Job::init(args.distributed)?;
    // rank 0 writes the run's files: it alone holds the folder
    let run = if job.is_main() {
        let flag = if args.out.is_none() && args.resume.is_some() {
            "--resume"
        } else {
            "--out"
        };
        Some(RunDir::open(&out, flag)?)
    } else {
        None
    };

    might::manual_seed(args.seed);
    let mut model = Gpt::new(cfg)?;
    model.to_device(device)?;
    job.attach(model.parameters())?;
    let main = job.is_main();
    let named = model.named_parameters();
    let params: Vec<Tensor> = named.iter().map(|(_, t)| t.clone()).collect();
    let mut opt = AdamW::with_groups(
        ParamGroup::decay_split(&named, args.weight_decay),
        AdamConfig {
            lr: args.lr,
            betas: (0.9, 0.99),
            eps: 1e-8,
            weight_decay: args.weight_decay,
            amsgrad: false,
        },
    )?;
    let mut sched = Scheduler::new(
        args.lr,
        WarmupCosine::new(args.warmup as usize, args.steps as usize, 0.1)?,
    );
    // each rank its own batches (rank 0 draws what a single process draws)
    let mut gen = Generator::new(
        args.seed
            .wrapping_add(0x9e37_79b9)
            .wrapping_add((job.rank() as u64).wrapping_mul(0x5851_f42d_4c95_7f2d)),
    );
    let mut start = 0u64;
    let mut rows: Vec<Row> = Vec::new();
    let mut prior_secs = 0.0;
    if let Some(rdir) = &args.resume {
        let path = rdir.join("last.safetensors");
        let c = ck::load_checkpoint(&path)?;
        let (saved_cfg, saved_vocab) = config_from_meta(&path, &c.extra)?;
        check_tensors(&path, &saved_cfg, &c.model)?;
        if saved_cfg != cfg || saved_vocab != vocab {
            return Err(CliError(format!(
                "{} was trained with another config or text ({saved_cfg:?})",
                path.display()
            )));
        }
        let _g = might::no_grad();
        for (name, t) in &named {
            let s = c
                .model
                .iter()
                .find(|(n, _)| n == name)
                .ok_or_else(|| CliError(format!("{}: no tensor {name}", path.display())))?;
            t.copy_(&s.1.to_device(device)?)?;
        }
        opt.load_state_dict(&c.optimizer)?;
        gen = Generator::from_state(c.rng);
        if let Some(g) = c.extra.get("global_rng") {
            let v: Vec<u64> = g.split(',').filter_map(|x| x.parse().ok()).collect();
            if let Ok(s) = v.try_into() {
                might::tensor::random::set_global_state(s);
            }
        }
        prior_secs = c
            .extra
            .get("seconds")
            .and_then(|s| s.parse().ok())
            .unwrap_or(0.0);
        start = c.step;
        rows = Row::read_until(&rdir.join("metrics.csv"), start);
        if main {
            eprintln!("resuming from {} (step {start})", path.display());
        }
    }
    sched.set_step(start as usize);
    sched.apply(&mut opt);

    if main {
        eprintln!(
        "training gpt ({} layers, {} heads, {} dims, block {}) on {} ({} chars, vocab {}), {} parameters, {}",
        cfg.n_layer,
        cfg.n_head,
        cfg.n_embd,
        cfg.block_size,
        args.text.display(),
        data.len(),
        vocab.len(),
        model.num_parameters(),
        if device == Device::Cpu {
            format!("{threads} threads")
        } else {
            format!("on {device}: {}", device.name())
        }
    );
    }
    let pb = ProgressBar::new(args.steps);
    pb.set_style(
        ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed_precise}, eta {eta})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    pb.set_prefix("gpt");
    if !main {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    pb.set_position(start);
    let t0 = Instant::now();
    // every rank's tokens: the job's throughput
    let tokens_per_step = args.batch_size * args.block * args.grad_accum * job.world();
    let mut meter = Meter::new(device);
    let mut since_steps = 0u64;
    let mut seg_t = Instant::now();
    let mut step_secs = 0.0f64;
    let mut step_times: Vec<f64> = Vec::new();
    let mut steps_done = 0u64;
    let mut ticker = if main {
        Ticker::new(args.progress_every)
    } else {
        Ticker::off()
    };
    let mut best = rows
        .iter()
        .map(|r| r.test_loss)
        .fold(f64::INFINITY, f64::min);
    for step in start..args.steps {
        let ts = Instant::now();
        for _ in 0..args.grad_accum {
            let (x, y) = batch(train_data, args.batch_size, args.block, &mut gen)?;
            let (x, y) = (x.to_device(device)?, y.to_device(device)?);
            let (logits, loss) = model.forward_with_loss(&x, &y)?;
            meter
                .add(&loss, 1.0 / args.grad_accum as f64, &logits, &y)
                .map_err(|e| {
                    pb.finish_and_clear();
                    CliError(format!("{} at step {step} (learning rate too high?)", e.0))
                })?;
            loss.div_scalar(args.grad_accum as f64)?.backward()?;
        }
        job.sync_gradients()?;
        clip_grad_norm_(&params, 1.0)?;
        opt.step()?;
        opt.zero_grad();
        sched.step(&mut opt);
        let dt = ts.elapsed().as_secs_f64();
        step_times.push(dt);
        step_secs += dt;
        steps_done += 1;
        since_steps += 1;
        pb.inc(1);
        ticker.tick(|| {
            format!(
                "gpt: step {}/{} ({:.1}s)",
                step + 1,
                args.steps,
                t0.elapsed().as_secs_f64()
            )
        });
        if step % 10 == 0 {
            // on a GPU the only wait for the device between evaluations
            let (since_loss, _, _) = meter.read().map_err(|e| {
                CliError(format!("{} by step {step} (learning rate too high?)", e.0))
            })?;
            pb.set_message(format!(
                "loss {:.4} lr {:.2e} {:.0} tok/s",
                since_loss / since_steps as f64,
                sched.get_lr(),
                (steps_done as usize * tokens_per_step) as f64 / step_secs.max(1e-9)
            ));
        }
        let done = step + 1;
        if (done % args.eval_interval == 0 || done == args.steps) && !main {
            // rank 0 evaluates, logs and writes the checkpoint
            (meter, since_steps) = (Meter::new(device), 0);
            continue;
        }
        if done % args.eval_interval == 0 || done == args.steps {
            ticker.tick(|| format!("gpt: evaluating at step {done}"));
            let (val_loss, val_acc) = estimate(&mut model, val_data, args, args.seed ^ 0x5eed)?;
            let (since_loss, since_right, since_n) = meter.read()?;
            let row = Row {
                epoch: done,
                train_loss: since_loss / since_steps as f64,
                train_acc: since_right as f64 / since_n.max(1) as f64,
                test_loss: val_loss,
                test_acc: val_acc,
                seconds: seg_t.elapsed().as_secs_f64(),
            };
            pb.suspend(|| {
                println!(
                    "step {done}/{}: train_loss {:.4} val_loss {:.4} val_acc {:.2}% ({:.1}s)",
                    args.steps,
                    row.train_loss,
                    val_loss,
                    100.0 * val_acc,
                    row.seconds
                )
            });
            let improved = val_loss < best;
            best = best.min(val_loss);
            rows.push(row);
            (meter, since_steps) = (Meter::new(device), 0);
            seg_t = Instant::now();
            let run = run.as_ref().expect("rank 0 holds the run folder");
            let mut csv = plot::STEPS.csv_header();
            csv.push('\n');
            for r in &rows {
                csv += &r.csv();
                csv.push('\n');
            }
            run.write("metrics.csv", &csv)?;
            run.write("curves.svg", &plot::curves_svg(&rows, plot::STEPS))?;
            let mut extra: HashMap<String, String> = might::models::gpt_metadata(&cfg, &vocab)
                .into_iter()
                .collect();
            let g = might::tensor::random::global_state();
            extra.insert(
                "global_rng".into(),
                g.iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            );
            extra.insert(
                "seconds".into(),
                (prior_secs + t0.elapsed().as_secs_f64()).to_string(),
            );
            let c = Checkpoint {
                model: model.named_parameters(),
                optimizer: opt.state_dict(),
                step: done,
                epoch: 0,
                rng: gen.state(),
                extra,
            };
            if args.keep_checkpoints > 0 {
                ck::save_checkpoint(out.join(format!("checkpoint-step{done}.safetensors")), &c)?;
            }
            run.prune("checkpoint-step", args.keep_checkpoints);
            if improved {
                ck::save_checkpoint(out.join("best.safetensors"), &c)?;
            }
            ck::save_checkpoint(out.join("last.safetensors"), &c)?;
            if crate::term::stdout_closed() {
                // `might train gpt … | head -1`: the reader left; this step is saved
                pb.finish_and_clear();
                eprintln!(
                    "stdout closed: stopping after step {done} (saved in {})",
                    out.display()
                );
                return Ok(());
            }
        }
    }
    pb.finish_and_clear();
    if !main {
        return Ok(());
    }
    let last = rows.last().cloned().ok_or_else(|| {
        CliError(format!(
            "nothing to do: the run in {} already has {start} steps",
            out.display()
        ))
    })?;
    let (train_loss, _) = estimate(&mut model, train_data, args, args.seed ^ 0x5eed)?;
    let secs = t0.elapsed().as_secs_f64();
    let fields: BTreeMap<&str, String> = BTreeMap::from([
        ("train_loss", num(train_loss)),
        ("val_loss", num(last.test_loss)),
        (
            "tokens_per_second",
            num((steps_done as usize * tokens_per_step) as f64 / step_secs.max(1e-9)),
        ),
        ("ms_per_step", num(1000.0 * median_step(&step_times))),
        ("peak_rss_mb", num(peak_rss_mb())),
        ("steps", args.steps.to_string()),
        ("seconds", num(prior_secs + secs)),
        ("threads", threads.to_string()),
        (
            "matmul_precision",
            json_str(&might::get_float32_matmul_precision().to_string()),
        ),
        ("parameters", model.num_parameters().to_string()),
        ("world_size", job.world().to_string()),
        (
            "global_batch",
            (args.batch_size * args.grad_accum * job.world()).to_string(),
        ),
        (
            "allreduce_fraction",
            num(job.comm_seconds() / step_secs.max(1e-9)),
        ),
        ("device", json_str(&device.to_string())),
        ("adapter", json_str(&device.name())),
    ]);
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{v}", json_str(k)))
        .collect();
    println!("{{\"model\":\"gpt\",{}}}", body.join(","));
    Ok(())
}

pub fn sample(args: &SampleArgs) -> Res<()> {
    crate::checks::in_range("--temperature", args.temperature, 0.0, f64::MAX, true)?;
    if let Some(p) = args.top_p {
        if !(p > 0.0 && p <= 1.0) {
            return Err(CliError(format!("--top-p must be in (0, 1], got {p}")));
        }
    }
    if args.top_k == Some(0) {
        return Err(CliError("--top-k must be at least 1, got 0".into()));
    }
    // the ids of the prompt and the output, and the text (up to 4 bytes a character)
    crate::checks::fits(
        &format!("--tokens {}", args.tokens),
        "the generated ids and text",
        (args.tokens as u128 + args.prompt.len() as u128).saturating_mul(8 + 8 + 4),
    )?;
    let c = ck::load_checkpoint(&args.checkpoint)?;
    let (cfg, vocab) = config_from_meta(&args.checkpoint, &c.extra)?;
    check_tensors(&args.checkpoint, &cfg, &c.model)?;
    let mut model = Gpt::from_tensors(cfg, &c.model)?;
    model.to_device(parse_device(&args.device)?)?;
    model.eval();
    let prompt = vocab.encode(&args.prompt)?;
    if prompt.is_empty() {
        return Err(CliError("--prompt must not be empty".into()));
    }
    let sc = SampleConfig {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
    };
    let mut gen = Generator::new(args.seed);
    let new = generate(&model, &prompt, args.tokens, &sc, &mut gen)?;
    println!("{}{}", args.prompt, vocab.decode(&new));
    Ok(())
}
