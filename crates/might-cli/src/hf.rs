//! Pretrained Hugging Face models from the command line: `might generate MODEL_DIR` (GPT-2,
//! streaming), `might embed MODEL_DIR` (sentence-transformers vectors or their cosine
//! matrix) and `might inspect MODEL_DIR` (architecture, parameters, dtype). Generation and
//! embedding need the tokenizers (feature `hf`); inspecting does not.

use std::path::{Path, PathBuf};

use crate::train::{json_str, CliError, Res};
use might::models::{Architecture, ModelDir};

/// `might generate` options.
#[derive(clap::Args, Debug)]
pub struct GenerateArgs {
    /// A Hugging Face GPT-2 folder (config.json, model.safetensors or pytorch_model.bin,
    /// tokenizer.json or vocab.json + merges.txt).
    pub model_dir: PathBuf,
    #[arg(long)]
    pub prompt: String,
    /// New tokens to generate (fewer if the model writes its end-of-text token).
    #[arg(long, default_value_t = 50)]
    pub tokens: usize,
    /// 0 is greedy.
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f64,
    #[arg(long)]
    pub top_k: Option<usize>,
    #[arg(long)]
    pub top_p: Option<f64>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where to run: cpu, gpu, gpu:N or best.
    #[arg(long, default_value = "cpu")]
    pub device: String,
}

/// `might embed` options.
#[derive(clap::Args, Debug)]
pub struct EmbedArgs {
    /// A sentence-transformers folder (modules.json, a BERT, its tokenizer).
    pub model_dir: PathBuf,
    /// Sentences to embed (with --file, those come first).
    pub sentences: Vec<String>,
    /// Read one sentence per line from this file (`-`: standard input).
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Print the cosine similarity matrix instead of the vectors.
    #[arg(long)]
    pub similarity: bool,
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Where to run: cpu, gpu, gpu:N or best.
    #[arg(long, default_value = "cpu")]
    pub device: String,
}

fn open(dir: &Path) -> Res<ModelDir> {
    Ok(ModelDir::open(dir)?)
}

#[cfg(feature = "hf")]
pub fn generate(args: &GenerateArgs) -> Res<()> {
    use crate::meter::parse_device;
    use might::models::generate::SampleConfig;
    use might::models::{Gpt2, Gpt2Config};
    use std::io::Write;
    let md = open(&args.model_dir)?;
    if md.architecture != Architecture::Gpt2 {
        return Err(CliError(format!(
            "{}: `might generate` runs GPT-2 models; this is {:?}",
            args.model_dir.display(),
            md.architecture
        )));
    }
    let device = parse_device(&args.device)?;
    let cfg = Gpt2Config::from_config(&md.config)?;
    let model = Gpt2::load(cfg, &md.weights(might::DType::F32, device)?)?;
    let tok = md.tokenizer()?;
    let prompt: Vec<i64> = tok
        .encode(&args.prompt, false)?
        .into_iter()
        .map(i64::from)
        .collect();
    if prompt.is_empty() {
        return Err(CliError("--prompt must not be empty".into()));
    }
    let room = model.config.n_positions.saturating_sub(prompt.len());
    let n = if args.tokens > room {
        eprintln!(
            "note: the model's context is {} positions: generating {room} tokens, not {}",
            model.config.n_positions, args.tokens
        );
        room
    } else {
        args.tokens
    };
    let sc = SampleConfig {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
    };
    let mut gen = might::Generator::new(args.seed);
    let mut out = std::io::stdout().lock();
    if write!(out, "{}", args.prompt)
        .and_then(|_| out.flush())
        .is_err()
    {
        return Ok(()); // closed pipe (`| head`): nothing more to show
    }
    // decode everything generated so far and print what is new: a character split over two
    // byte-level tokens appears once its last byte has come (no U+FFFD halves)
    let mut ids: Vec<u32> = Vec::new();
    let mut shown = 0usize;
    let start = std::time::Instant::now();
    let new = model.generate(&prompt, n, &sc, &mut gen, |t| {
        ids.push(t as u32);
        let text = tok.decode(&ids, true)?;
        if !text.ends_with('\u{FFFD}') && text.len() > shown && text.is_char_boundary(shown) {
            let ok = write!(out, "{}", &text[shown..]).and_then(|_| out.flush());
            shown = text.len();
            // a closed pipe (`| head`): stop generating, quietly
            return Ok(ok.is_ok());
        }
        Ok(true)
    })?;
    let secs = start.elapsed().as_secs_f64();
    let _ = writeln!(out);
    eprintln!(
        "{} tokens in {secs:.2} s ({:.1} tokens/s) on {}",
        new.len(),
        new.len() as f64 / secs.max(1e-9),
        device.name()
    );
    Ok(())
}

#[cfg(not(feature = "hf"))]
pub fn generate(_args: &GenerateArgs) -> Res<()> {
    Err(no_tokenizers("generate"))
}

#[cfg(not(feature = "hf"))]
fn no_tokenizers(cmd: &str) -> CliError {
    CliError(format!(
        "`might {cmd}` needs the Hugging Face tokenizers: build with --features hf \
         (cargo run --release -p might-cli --features hf -- {cmd} ...)"
    ))
}

#[cfg(feature = "hf")]
pub fn embed(args: &EmbedArgs) -> Res<()> {
    use crate::meter::parse_device;
    use might::models::SentenceTransformer;
    let mut sentences = args.sentences.clone();
    if let Some(f) = &args.file {
        let text = if f.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin())?
        } else {
            std::fs::read_to_string(f)
                .map_err(|e| CliError(format!("--file {}: {e}", f.display())))?
        };
        sentences.extend(text.lines().map(str::to_string));
    }
    if sentences.is_empty() {
        return Err(CliError(
            "no sentences: pass them as arguments or with --file".into(),
        ));
    }
    let md = open(&args.model_dir)?;
    if md.architecture != Architecture::SentenceTransformer {
        return Err(CliError(format!(
            "{}: `might embed` runs sentence-transformers folders (with modules.json); this is {:?}",
            args.model_dir.display(),
            md.architecture
        )));
    }
    let device = parse_device(&args.device)?;
    let st = SentenceTransformer::load(&md, might::DType::F32, device)?;
    let refs: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let v = st.encode(&refs, args.batch_size)?;
    let (n, d) = (v.dims()[0], v.dims()[1]);
    let vals = v.to_vec::<f32>()?;
    let rows: Vec<&[f32]> = vals.chunks(d).collect();
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let fmt = |xs: &mut dyn Iterator<Item = f32>| -> String {
        xs.map(|x| format!("{x}")).collect::<Vec<_>>().join(",")
    };
    if args.similarity {
        let norm = |r: &[f32]| r.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        for i in 0..n {
            let mut cos = (0..n).map(|j| {
                let dot: f32 = rows[i].iter().zip(rows[j]).map(|(a, b)| a * b).sum();
                dot / (norm(rows[i]) * norm(rows[j]))
            });
            if writeln!(out, "[{}]", fmt(&mut cos)).is_err() {
                return Ok(()); // closed pipe
            }
        }
    } else {
        for (s, r) in sentences.iter().zip(&rows) {
            let line = format!(
                "{{\"sentence\":{},\"embedding\":[{}]}}",
                json_str(s),
                fmt(&mut r.iter().copied())
            );
            if writeln!(out, "{line}").is_err() {
                return Ok(());
            }
        }
    }
    Ok(())
}

#[cfg(not(feature = "hf"))]
pub fn embed(_args: &EmbedArgs) -> Res<()> {
    Err(no_tokenizers("embed"))
}

/// `might inspect MODEL_DIR`: architecture, sizes, parameter count and dtypes.
pub fn inspect_model(dir: &Path, json: bool) -> Res<()> {
    let md = open(dir)?;
    let files = md.weight_files()?;
    let mut infos = Vec::new();
    for f in &files {
        infos.extend(might::io::inspect(f)?);
    }
    // parameters are the float tensors (not integer buffers such as BERT's position_ids)
    let params: usize = infos
        .iter()
        .filter(|i| i.dtype.is_float())
        .map(|i| i.shape.iter().product::<usize>())
        .sum();
    let bytes: usize = infos.iter().map(|i| i.bytes).sum();
    let mut dtypes: Vec<String> = infos.iter().map(|i| i.dtype.to_string()).collect();
    dtypes.sort();
    dtypes.dedup();
    let c = &md.config;
    let fields: &[&str] = match md.architecture {
        Architecture::Gpt2 => &["vocab_size", "n_positions", "n_embd", "n_layer", "n_head"],
        _ => &[
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
        ],
    };
    let sizes: Vec<(String, String)> = fields
        .iter()
        .filter_map(|f| {
            c.opt_usize(f)
                .ok()
                .flatten()
                .map(|v| (f.to_string(), v.to_string()))
        })
        .collect();
    let arch = c.first_str("architectures").unwrap_or_default();
    let files: Vec<String> = files
        .iter()
        .map(|f| {
            f.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    if json {
        let sizes: Vec<String> = sizes
            .iter()
            .map(|(k, v)| format!("{}:{v}", json_str(k)))
            .collect();
        println!(
            "{{\"path\":{},\"family\":\"{:?}\",\"architecture\":{},\"parameters\":{params},\"bytes\":{bytes},\"dtypes\":[{}],\"files\":[{}],\"config\":{{{}}}}}",
            json_str(&dir.display().to_string()),
            md.architecture,
            json_str(&arch),
            dtypes.iter().map(|d| json_str(d)).collect::<Vec<_>>().join(","),
            files.iter().map(|f| json_str(f)).collect::<Vec<_>>().join(","),
            sizes.join(",")
        );
        return Ok(());
    }
    println!("{}", dir.display());
    println!("  family:       {:?} ({arch})", md.architecture);
    for (k, v) in &sizes {
        println!("  {:<13} {v}", format!("{k}:"));
    }
    println!(
        "  parameters:   {params} ({:.1} M) in {} tensors, {bytes} bytes",
        params as f64 / 1e6,
        infos.len()
    );
    println!("  dtype:        {}", dtypes.join(", "));
    println!("  weights:      {}", files.join(", "));
    Ok(())
}

/// `might bench embed MODEL_DIR`: sentences per second of a sentence-transformers model on
/// the lines of `--sentences FILE` (tokenisation included, batches of `batch_size`), the
/// median of `reps` passes; one JSON line. `bench/hf.py` runs sentence-transformers alike.
#[cfg(feature = "hf")]
pub fn bench_embed(
    dir: &Path,
    sentences: &Path,
    batch: usize,
    reps: usize,
    threads: Option<usize>,
) -> Res<()> {
    use might::models::SentenceTransformer;
    crate::checks::apply_threads(threads)?;
    let text = std::fs::read_to_string(sentences)
        .map_err(|e| CliError(format!("--sentences {}: {e}", sentences.display())))?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return Err(CliError(format!("{}: no sentences", sentences.display())));
    }
    let st = SentenceTransformer::load(&open(dir)?, might::DType::F32, might::Device::Cpu)?;
    st.encode(&lines[..batch.min(lines.len())], batch)?; // warm up
    let mut secs = Vec::new();
    for _ in 0..reps.max(1) {
        let t0 = std::time::Instant::now();
        st.encode(&lines, batch)?;
        secs.push(t0.elapsed().as_secs_f64());
    }
    secs.sort_by(f64::total_cmp);
    let s = secs[secs.len() / 2];
    println!(
        "{{\"bench\":\"embed\",\"sentences\":{},\"batch_size\":{batch},\"threads\":{},\"seconds\":{s:.4},\"sentences_per_s\":{:.2}}}",
        lines.len(),
        might::get_num_threads(),
        lines.len() as f64 / s
    );
    Ok(())
}

#[cfg(not(feature = "hf"))]
pub fn bench_embed(_: &Path, _: &Path, _: usize, _: usize, _: Option<usize>) -> Res<()> {
    Err(no_tokenizers("bench embed"))
}

/// `might bench generate`: tokens per second of greedy KV-cached generation with GPT-2 124M
/// (random weights, the shapes are what matter) from a `prompt`-token prompt, batch 1; the
/// median of `reps` runs; one JSON line.
pub fn bench_generate(
    prompt: usize,
    tokens: usize,
    reps: usize,
    threads: Option<usize>,
) -> Res<()> {
    use might::models::generate::SampleConfig;
    use might::models::{Gpt2, Gpt2Config, Weights};
    use might::{DType, Device, Tensor};
    crate::checks::apply_threads(threads)?;
    let mut cfg = Gpt2Config::gpt2_124m();
    cfg.eos_token_id = None; // always `tokens` tokens
    if prompt == 0 || prompt + tokens > cfg.n_positions {
        return Err(CliError(format!(
            "--prompt {prompt} + --tokens {tokens} must be positive and fit {} positions",
            cfg.n_positions
        )));
    }
    might::manual_seed(0);
    let (c, v, p) = (cfg.n_embd, cfg.vocab_size, cfg.n_positions);
    let mut named: Vec<(String, Vec<usize>)> = vec![
        ("wte.weight".into(), vec![v, c]),
        ("wpe.weight".into(), vec![p, c]),
        ("ln_f.weight".into(), vec![c]),
        ("ln_f.bias".into(), vec![c]),
    ];
    for i in 0..cfg.n_layer {
        for (n, s) in [
            ("ln_1.weight", vec![c]),
            ("ln_1.bias", vec![c]),
            ("attn.c_attn.weight", vec![c, 3 * c]),
            ("attn.c_attn.bias", vec![3 * c]),
            ("attn.c_proj.weight", vec![c, c]),
            ("attn.c_proj.bias", vec![c]),
            ("ln_2.weight", vec![c]),
            ("ln_2.bias", vec![c]),
            ("mlp.c_fc.weight", vec![c, 4 * c]),
            ("mlp.c_fc.bias", vec![4 * c]),
            ("mlp.c_proj.weight", vec![4 * c, c]),
            ("mlp.c_proj.bias", vec![c]),
        ] {
            named.push((format!("h.{i}.{n}"), s));
        }
    }
    let tensors = named
        .into_iter()
        .map(|(n, s)| Ok((n, Tensor::normal(s, 0.0, 0.02, DType::F32)?)))
        .collect::<might::Result<Vec<_>>>()?;
    let model = Gpt2::load(cfg, &Weights::new(tensors, DType::F32, Device::Cpu))?;
    let ids: Vec<i64> = (0..prompt as i64).map(|i| (i * 7919) % v as i64).collect();
    let greedy = SampleConfig {
        temperature: 0.0,
        top_k: None,
        top_p: None,
    };
    let mut gen = might::Generator::new(0);
    let mut run = || -> Res<(f64, usize)> {
        let t0 = std::time::Instant::now();
        let out = model.generate(&ids, tokens, &greedy, &mut gen, |_| Ok(true))?;
        Ok((t0.elapsed().as_secs_f64(), out.len()))
    };
    run()?;
    let mut rates = Vec::new();
    for _ in 0..reps.max(1) {
        let (s, n) = run()?;
        rates.push(n as f64 / s);
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "{{\"bench\":\"generate\",\"model\":\"gpt2-124m\",\"prompt\":{prompt},\"tokens\":{tokens},\"threads\":{},\"tokens_per_s\":{:.2}}}",
        might::get_num_threads(),
        rates[rates.len() / 2]
    );
    Ok(())
}
