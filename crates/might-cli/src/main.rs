//! `might`: train, evaluate and run image classifiers from the command line.
//!
//! `might train mnist` trains the default MLP on the committed MNIST files and prints, as the
//! last line on stdout, one JSON object with the results. User mistakes (a missing directory,
//! a corrupt file, an unknown model) end with a one-line error and exit code 1.

// Output that never panics (a closed pipe, a closed stderr): these shadow the std macros in
// every module of the crate (see term.rs).
macro_rules! println {
    () => { $crate::term::out_line("") };
    ($($t:tt)*) => { $crate::term::out_line(&format!($($t)*)) };
}
macro_rules! print {
    ($($t:tt)*) => { $crate::term::out(&format!($($t)*)) };
}
macro_rules! eprintln {
    () => { $crate::term::err_line("") };
    ($($t:tt)*) => { $crate::term::err_line(&format!($($t)*)) };
}

mod bench;
mod checks;
mod ckpt;
mod data;
mod dist;
mod gpt;
mod hf;
mod inspect;
mod meter;
mod net;
mod onnx;
mod plot;
mod rundir;
mod term;
mod train;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::TypedValueParser;
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "might",
    version,
    about = "Train and run models with the might tensor library",
    after_help = AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
    #[command(flatten)]
    precision: PrecisionArg,
}

/// The environment variables, shown under every command's help.
pub const AFTER_HELP: &str = "Environment:\n  MIGHT_FORCE_THREADS=1  let --threads exceed the available cores (otherwise it is capped at\n                         them with a warning: oversubscribed kernel threads run far slower)";

/// `--matmul-precision` and `--memory-limit`, taken by every command.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct PrecisionArg {
    /// Internal precision of f32 matrix products (PyTorch's `set_float32_matmul_precision`):
    /// `medium` rounds their operands to bfloat16 and sums in f32, twice as fast on CPUs with
    /// AVX512-BF16 (elsewhere it multiplies in f32).
    #[arg(long, global = true, default_value = "highest", value_parser =
        clap::builder::PossibleValuesParser::new(["highest", "high", "medium"])
            .map(|s| s.parse::<might::MatmulPrecision>().unwrap_or_default()))]
    matmul_precision: might::MatmulPrecision,
    /// Memory budget (e.g. 4G, 512M): models, batches and outputs that would need more are
    /// refused before anything is allocated (default: the memory available now).
    #[arg(long, global = true, value_parser = checks::parse_bytes)]
    memory_limit: Option<u64>,
}

impl PrecisionArg {
    /// Set the process-wide precision and memory budget.
    pub fn apply(self) {
        might::set_float32_matmul_precision(self.matmul_precision);
        if self.memory_limit.is_some() {
            might::set_memory_limit(self.memory_limit);
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum DatasetName {
    Mnist,
    FashionMnist,
    Cifar10,
}

impl DatasetName {
    pub fn as_str(self) -> &'static str {
        match self {
            DatasetName::Mnist => "mnist",
            DatasetName::FashionMnist => "fashion-mnist",
            DatasetName::Cifar10 => "cifar10",
        }
    }
    pub fn parse(s: &str) -> Option<DatasetName> {
        DatasetName::from_str(s, false).ok()
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModelName {
    Mlp,
    Cnn,
    /// The tiny CNN of the speed benchmark (`bench/torch/mlp_mnist.py --model small-cnn`).
    SmallCnn,
}

impl ModelName {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelName::Mlp => "mlp",
            ModelName::Cnn => "cnn",
            ModelName::SmallCnn => "small-cnn",
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum OptimizerName {
    Sgd,
    Adam,
    Adamw,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ScheduleName {
    Constant,
    Onecycle,
    Cosine,
}

#[derive(clap::Args, Debug, Clone)]
pub struct TrainArgs {
    /// Which dataset to train on (`might train gpt --help` for the text model).
    #[arg(value_enum)]
    pub dataset: DatasetName,
    /// Model architecture.
    #[arg(long, value_enum, default_value = "mlp")]
    pub model: ModelName,
    #[arg(long, default_value_t = 5)]
    pub epochs: u64,
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    /// Learning rate, the peak one with a schedule (default: sgd 0.01 for mlp / 0.05 for cnn,
    /// adam/adamw 0.001 for mlp / 0.003 for cnn).
    #[arg(long, allow_negative_numbers = true)]
    pub lr: Option<f64>,
    /// Optimizer (default: sgd for mlp, adam for cnn).
    #[arg(long, value_enum)]
    pub optimizer: Option<OptimizerName>,
    /// Learning-rate schedule over the run (default: constant for mlp, onecycle for cnn).
    #[arg(long, value_enum)]
    pub schedule: Option<ScheduleName>,
    /// SGD momentum.
    #[arg(long, default_value_t = 0.9, allow_negative_numbers = true)]
    pub momentum: f64,
    /// Weight decay (L2 for sgd/adam, decoupled for adamw; default 0, 0.01 for adamw).
    #[arg(long, allow_negative_numbers = true)]
    pub weight_decay: Option<f64>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Kernel threads (default: all cores; capped at the available cores unless
    /// MIGHT_FORCE_THREADS=1).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Where to train: cpu, gpu (the first GPU), gpu:N, or best (GPU builds: `--features gpu`).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Data-parallel training over MPI: `mpirun -np N might train ... --distributed`, each
    /// rank on --batch-size samples of every step (MPI builds: `--features mpi`).
    #[arg(long)]
    pub distributed: bool,
    /// Dataset directory (default: data/mnist, /usr/share/datasets/fashion-mnist, data/cifar10).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Output directory for metrics.csv, curves.svg and checkpoints (default runs/<dataset>-<model>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue the run whose checkpoints are in this directory.
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// Use only N training samples (quick experiments), taken evenly across the training set
    /// (every len/N-th), so a set sorted by class keeps all its classes.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Epoch checkpoints (checkpoint-epochN.safetensors) to keep, the most recent ones;
    /// last.safetensors and best.safetensors (best test accuracy) are always kept. The default
    /// keeps the final one; 0 keeps none besides last and best.
    #[arg(long, default_value_t = 1)]
    pub keep_checkpoints: usize,
    /// Seconds between plain progress lines on stderr when it is not a terminal (logs, CI);
    /// a terminal shows a progress bar instead.
    #[arg(long, default_value_t = 30.0)]
    pub progress_every: f64,
    /// Batches built ahead on a background thread (0: on the training thread). Default: 8,
    /// except 0 for MNIST and Fashion-MNIST when the kernel threads use every core (their
    /// batches are a copy out of memory, and a loader thread would take a core from the
    /// kernels).
    #[arg(long)]
    pub prefetch: Option<usize>,
    /// Feed MNIST/Fashion-MNIST pixels as plain [0, 1] values instead of standardising them
    /// with the dataset's mean and std.
    #[arg(long)]
    pub no_normalize: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Train a model and evaluate it on the test set after every epoch.
    Train(TrainArgs),
    /// Evaluate a checkpoint on the test split of its dataset.
    Eval {
        checkpoint: PathBuf,
        #[arg(long)]
        data: Option<PathBuf>,
        /// Kernel threads (default: all cores; capped at the available cores unless
        /// MIGHT_FORCE_THREADS=1).
        #[arg(long)]
        threads: Option<usize>,
        /// Seconds between plain progress lines on stderr when it is not a terminal.
        #[arg(long, default_value_t = 30.0)]
        progress_every: f64,
    },
    /// Classify one image with a checkpoint: prints the class and the top-5 probabilities.
    Predict { checkpoint: PathBuf, image: PathBuf },
    /// List the tensors of a safetensors, .npy, .npz or PyTorch .pt/.pth file: name, dtype,
    /// shape, size, and totals. Reads headers only; never executes anything in the file.
    /// A Hugging Face model folder: its architecture, sizes, parameter count and dtype.
    /// An ONNX model (.onnx, feature `onnx`): inputs, outputs, ops used and parameter count.
    Inspect {
        file: PathBuf,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Generate text from a `might train gpt` checkpoint.
    Sample(gpt::SampleArgs),
    /// Continue a prompt with a Hugging Face GPT-2 folder, streaming the tokens (needs the
    /// `hf` feature: the tokenizers).
    Generate(hf::GenerateArgs),
    /// Sentence vectors (one JSON line each) or their cosine matrix from a
    /// sentence-transformers folder such as all-MiniLM-L6-v2 (needs the `hf` feature).
    Embed(hf::EmbedArgs),
    /// Run an ONNX model on .npy inputs: prints each output's name, shape and a summary, and
    /// writes them as .npy with --output (needs the `onnx` feature).
    Run(onnx::RunArgs),
    /// Run ONNX backend test cases (model.onnx + test_data_set_N/{input,output}_K.pb) and print
    /// pass/fail per case and a summary (needs the `onnx` feature).
    OnnxTest(onnx::OnnxTestArgs),
    /// Micro-benchmarks (used by bench/compare.sh against PyTorch).
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
    },
}

#[derive(Subcommand, Debug)]
enum BenchWhat {
    /// sgemm (GFLOP/s) and elementwise/reduction/softmax (GB/s) throughput.
    Kernels {
        #[arg(long)]
        threads: Option<usize>,
        /// Timed samples per case (the median is reported).
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Minimum seconds per sample (fast kernels are repeated to reach it; at most 60).
        #[arg(long, default_value_t = 0.2, allow_negative_numbers = true)]
        min_time: f64,
        /// One JSON object on stdout instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Sentences per second of a sentence-transformers model (needs --features hf).
    Embed {
        model_dir: PathBuf,
        /// One sentence per line.
        #[arg(long)]
        sentences: PathBuf,
        #[arg(long, default_value_t = 32)]
        batch_size: usize,
        #[arg(long, default_value_t = 3)]
        reps: usize,
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Tokens per second of greedy GPT-2 124M generation (random weights), batch 1.
    Generate {
        #[arg(long, default_value_t = 16)]
        prompt: usize,
        #[arg(long, default_value_t = 64)]
        tokens: usize,
        #[arg(long, default_value_t = 3)]
        reps: usize,
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Square f32 matrix products on a device (GFLOP/s per size, one JSON line each).
    Matmul {
        /// cpu, gpu, gpu:N or best.
        #[arg(long, default_value = "cpu")]
        device: String,
        /// Matrix sizes n (n×n by n×n).
        #[arg(long, value_delimiter = ',', default_value = "1024,4096,8192")]
        sizes: Vec<usize>,
        /// Timed samples per size (the median is reported).
        #[arg(long, default_value_t = 5)]
        reps: usize,
    },
}

/// Clap's message in one line: the error line plus any hint, without usage blocks.
fn one_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more"))
        .collect();
    parts.join(" ")
}

fn main() -> ExitCode {
    // `might train gpt ...` has its own options (see gpt.rs); the image `train` is unchanged
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("train")
        && argv.get(2).map(String::as_str) == Some("gpt")
    {
        return finish(
            <gpt::GptTrainCli as Parser>::try_parse_from(&argv[2..])
                .map_err(|e| {
                    if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp) {
                        let _ = e.print();
                        std::process::exit(0);
                    }
                    // `finish` adds the `error: ` prefix
                    let line = one_line(&e);
                    train::CliError(line.strip_prefix("error: ").unwrap_or(&line).to_string())
                })
                .and_then(|c| {
                    c.precision.apply();
                    gpt::train(&c.args)
                }),
        );
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind as K;
            if matches!(e.kind(), K::DisplayHelp | K::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            if e.kind() == K::DisplayHelpOnMissingArgumentOrSubcommand {
                // `might` alone: show the help, but it is still not a valid command.
                let _ = e.print();
                return ExitCode::from(1);
            }
            eprintln!("{}", one_line(&e));
            return ExitCode::from(1);
        }
    };
    cli.precision.apply();
    let result = match cli.cmd {
        Command::Train(args) => train::train(&args),
        Command::Eval {
            checkpoint,
            data,
            threads,
            progress_every,
        } => train::eval(&checkpoint, data.as_deref(), threads, progress_every),
        Command::Predict { checkpoint, image } => train::predict(&checkpoint, &image),
        Command::Bench {
            what:
                BenchWhat::Kernels {
                    threads,
                    reps,
                    min_time,
                    json,
                },
        } => checks::positive("--min-time", min_time)
            .and_then(|_| checks::in_range("--min-time", min_time, 0.0, 60.0, true))
            .and_then(|_| checks::apply_threads(threads))
            .and_then(|_| bench::kernels(None, reps, min_time, json).map_err(Into::into)),
        Command::Bench {
            what:
                BenchWhat::Matmul {
                    device,
                    sizes,
                    reps,
                },
        } => bench::matmul(&device, &sizes, reps),
        Command::Bench {
            what:
                BenchWhat::Embed {
                    model_dir,
                    sentences,
                    batch_size,
                    reps,
                    threads,
                },
        } => hf::bench_embed(&model_dir, &sentences, batch_size, reps, threads),
        Command::Bench {
            what:
                BenchWhat::Generate {
                    prompt,
                    tokens,
                    reps,
                    threads,
                },
        } => hf::bench_generate(prompt, tokens, reps, threads),
        Command::Inspect { file, json } if file.is_dir() => hf::inspect_model(&file, json),
        Command::Inspect { file, json } if file.extension().is_some_and(|e| e == "onnx") => {
            onnx::inspect(&file, json)
        }
        Command::Run(args) => onnx::run(&args),
        Command::OnnxTest(args) => onnx::onnx_test(&args),
        Command::Inspect { file, json } => inspect::inspect(&file, json).map_err(Into::into),
        Command::Generate(args) => hf::generate(&args),
        Command::Embed(args) => hf::embed(&args),
        Command::Sample(args) => gpt::sample(&args),
    };
    finish(result)
}

fn finish(result: Result<(), train::CliError>) -> ExitCode {
    match result {
        // a reader that went away early (`| head`) is no error; a failed write is
        Ok(()) if term::stdout_failed() => ExitCode::from(1),
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
