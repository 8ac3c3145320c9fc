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
    write!(out, "{}", args.prompt)?;
    out.flush()?;
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
