//! A character-level GPT (the architecture of `might::models::Gpt` / nanoGPT) written with the
//! typed API: every activation's shape is in its type, `[Dyn, T, C]` through the blocks, and
//! the attention heads are `Tensor4<Dyn, NH, T, HD>`. Initialised with nanoGPT's init in the
//! order `models::Gpt::new` draws it, trained with AdamW on the Shakespeare slice in `data/text`.
//!
//! `--compare` trains `models::Gpt` from the same seed on the same batches alongside and checks
//! that both losses are equal, bit for bit, at every step.
//!
//! Run with `cargo run --release -p might --example 08_typed_char_gpt [TEXT] [STEPS]
//! [--compare]` (default `data/text/shakespeare_1mb.txt`, 200 steps).
//!
//! The vocabulary size is a compile-time constant here (`VOCAB`); the text's actual
//! vocabulary is checked against it once, at the boundary.

use might::data::CharDataset;
use might::models::{Gpt, GptConfig};
use might::nn::{init, Module};
use might::optim::{AdamConfig, AdamW, Optimizer, ParamGroup};
use might::typed::{
    attention, cross_entropy_seq, Dyn, Embedding, LayerNorm, Linear, Tensor1, Tensor2, Tensor3,
    Tensor4,
};
use might::{DType, Error, Generator, Tensor};

/// Distinct characters of `data/text/shakespeare_1mb.txt`.
const VOCAB: usize = 79;
/// Context length.
const T: usize = 64;
/// Width, heads, head size, layers.
const C: usize = 64;
const NH: usize = 4;
const HD: usize = C / NH;
const LAYERS: usize = 2;
const BATCH: usize = 16;

/// One pre-LayerNorm block: causal self-attention then a GELU MLP, each added to the
/// residual stream. Parameter names follow nanoGPT.
struct Block {
    ln_1: LayerNorm<C>,
    c_attn: Linear<C, { 3 * C }>,
    attn_proj: Linear<C, C>,
    ln_2: LayerNorm<C>,
    c_fc: Linear<C, { 4 * C }>,
    mlp_proj: Linear<{ 4 * C }, C>,
}

/// A `[A, B]` parameter from N(0, std) (nanoGPT's init for Linear and Embedding weights).
fn normal<const A: usize, const B: usize>(std: f64) -> might::Result<Tensor2<A, B>> {
    let t = Tensor2::zeros()?;
    init::normal(t.as_dyn(), 0.0, std)?;
    Ok(t)
}

impl Block {
    fn new() -> might::Result<Block> {
        let proj_std = 0.02 / ((2 * LAYERS) as f64).sqrt();
        let ln = || LayerNorm::from_weights(Tensor1::ones()?, Some(Tensor1::zeros()?), 1e-5);
        Ok(Block {
            ln_1: ln()?,
            c_attn: Linear::from_weights(normal(0.02)?, Some(Tensor1::zeros()?))?,
            attn_proj: Linear::from_weights(normal(proj_std)?, Some(Tensor1::zeros()?))?,
            ln_2: ln()?,
            c_fc: Linear::from_weights(normal(0.02)?, Some(Tensor1::zeros()?))?,
            mlp_proj: Linear::from_weights(normal(proj_std)?, Some(Tensor1::zeros()?))?,
        })
    }

    /// Causal self-attention: one `[.., 3C]` projection split into q, k, v, each
    /// `[B, T, C] -> [B, T, NH, HD] -> [B, NH, T, HD]`; heads merged back into `[B, T, C]`.
    fn attention(&self, x: &Tensor3<Dyn, T, C>) -> might::Result<Tensor3<Dyn, T, C>> {
        let qkv = self.c_attn.forward(x)?;
        let heads = |t: Tensor3<Dyn, T, C>| -> might::Result<Tensor4<Dyn, NH, T, HD>> {
            t.reshape::<Tensor4<Dyn, T, NH, HD>>()?.transpose_12()
        };
        let q = heads(qkv.narrow_last::<0, C>()?)?;
        let k = heads(qkv.narrow_last::<C, C>()?)?;
        let v = heads(qkv.narrow_last::<{ 2 * C }, C>()?)?;
        let y: Tensor3<Dyn, T, C> = attention(&q, &k, &v, true)?.transpose_12()?.reshape()?;
        self.attn_proj.forward(&y)
    }

    fn forward(&self, x: &Tensor3<Dyn, T, C>) -> might::Result<Tensor3<Dyn, T, C>> {
        let x = x.add(&self.attention(&self.ln_1.forward(x)?)?)?;
        let m = self.c_fc.forward(&self.ln_2.forward(&x)?)?.gelu()?;
        x.add(&self.mlp_proj.forward(&m)?)
    }

    fn named_parameters(&self, p: &str) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        let mut put = |name: &str, m: &dyn Module| {
            for (n, t) in m.named_parameters() {
                v.push((format!("{p}.{name}.{n}"), t));
            }
        };
        put("ln_1", &self.ln_1);
        put("attn.c_attn", &self.c_attn);
        put("attn.c_proj", &self.attn_proj);
        put("ln_2", &self.ln_2);
        put("mlp.c_fc", &self.c_fc);
        put("mlp.c_proj", &self.mlp_proj);
        v
    }
}

/// Token and position embeddings, the blocks, a final LayerNorm and an LM head tied to the
/// token embedding.
struct CharGpt {
    wte: Embedding<VOCAB, C>,
    wpe: Embedding<T, C>,
    h: Vec<Block>,
    ln_f: LayerNorm<C>,
}

impl CharGpt {
    fn new() -> might::Result<CharGpt> {
        let wte = Embedding::from_weight(normal(0.02)?)?;
        let wpe = Embedding::from_weight(normal(0.02)?)?;
        let h = (0..LAYERS)
            .map(|_| Block::new())
            .collect::<might::Result<_>>()?;
        let ln_f = LayerNorm::from_weights(Tensor1::ones()?, Some(Tensor1::zeros()?), 1e-5)?;
        Ok(CharGpt { wte, wpe, h, ln_f })
    }

    /// Logits `[B, T, VOCAB]` for token ids `[B, T]`.
    fn forward(&self, idx: &Tensor2<Dyn, T, i64>) -> might::Result<Tensor3<Dyn, T, VOCAB>> {
        let pos: Tensor1<T, i64> =
            Tensor1::from_dyn(Tensor::arange(0., T as f64, 1., DType::I64)?)?;
        let mut x = self
            .wte
            .forward(idx)?
            .add_broadcast(&self.wpe.lookup(&pos)?)?;
        for blk in &self.h {
            x = blk.forward(&x)?;
        }
        self.ln_f
            .forward(&x)?
            .matmul_shared(&self.wte.weight().t()?)
    }

    /// nanoGPT names, in `models::Gpt::named_parameters` order.
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = vec![
            (
                "transformer.wte.weight".into(),
                self.wte.weight().into_dyn(),
            ),
            (
                "transformer.wpe.weight".into(),
                self.wpe.weight().into_dyn(),
            ),
        ];
        for (i, blk) in self.h.iter().enumerate() {
            v.extend(blk.named_parameters(&format!("transformer.h.{i}")));
        }
        for (n, t) in self.ln_f.named_parameters() {
            v.push((format!("transformer.ln_f.{n}"), t));
        }
        v
    }
}

/// `BATCH` random windows of `T + 1` characters: inputs and next-character targets.
fn batch(data: &[i64], gen: &mut Generator) -> might::Result<(Tensor, Tensor)> {
    let (mut x, mut y) = (Vec::with_capacity(BATCH * T), Vec::with_capacity(BATCH * T));
    for _ in 0..BATCH {
        let s = gen.below((data.len() - T) as u64) as usize;
        x.extend_from_slice(&data[s..s + T]);
        y.extend_from_slice(&data[s + 1..s + T + 1]);
    }
    Ok((
        Tensor::from_vec(x, [BATCH, T])?,
        Tensor::from_vec(y, [BATCH, T])?,
    ))
}

fn adamw(named: &[(String, Tensor)]) -> might::Result<AdamW> {
    AdamW::with_groups(
        ParamGroup::decay_split(named, 0.1),
        AdamConfig {
            lr: 3e-3,
            betas: (0.9, 0.99),
            eps: 1e-8,
            weight_decay: 0.1,
            amsgrad: false,
        },
    )
}

fn main() -> might::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let compare = args.iter().any(|a| a == "--compare");
    let mut pos = args.iter().filter(|a| !a.starts_with("--"));
    let path = pos
        .next()
        .cloned()
        .unwrap_or_else(|| "data/text/shakespeare_1mb.txt".into());
    let steps: usize = pos.next().and_then(|s| s.parse().ok()).unwrap_or(200);

    let ds = CharDataset::load(&path, T)?;
    // the one run-time check of a size the types fix
    if ds.vocab_size() != VOCAB {
        return Err(Error::shape(
            "08_typed_char_gpt",
            format!(
                "{path} has {} distinct characters; this program is compiled for VOCAB = {VOCAB}",
                ds.vocab_size()
            ),
        ));
    }
    let text = std::fs::read_to_string(&path)?;
    let data: Vec<i64> = ds.encode(&text)?.into_iter().map(|i| i as i64).collect();

    might::manual_seed(0);
    let model = CharGpt::new()?;
    let named = model.named_parameters();
    let mut opt = adamw(&named)?;
    // the dynamic model from the same seed (same draws, same values)
    let reference = if compare {
        might::manual_seed(0);
        let gpt = Gpt::new(GptConfig {
            vocab_size: VOCAB,
            block_size: T,
            n_layer: LAYERS,
            n_head: NH,
            n_embd: C,
            dropout: 0.0,
            bias: true,
        })?;
        let opt = adamw(&gpt.named_parameters())?;
        Some((gpt, opt))
    } else {
        None
    };
    let mut reference = reference;
    println!(
        "typed char-GPT: {LAYERS} layers, {NH} heads, {C} dims, context {T}, vocab {VOCAB}, {} parameters",
        named.iter().map(|(_, t)| t.numel()).sum::<usize>()
    );

    let mut gen = Generator::new(1234);
    for step in 1..=steps {
        let (x, y) = batch(&data, &mut gen)?;
        let logits = model.forward(&Tensor2::from_dyn(x.clone())?)?;
        let loss = cross_entropy_seq(&logits, &Tensor2::from_dyn(y.clone())?)?;
        opt.zero_grad();
        loss.backward()?;
        opt.step()?;
        let l = loss.item()?;
        if let Some((gpt, ropt)) = reference.as_mut() {
            let (_, rl) = gpt.forward_with_loss(&x, &y)?;
            ropt.zero_grad();
            rl.backward()?;
            ropt.step()?;
            let rl = rl.item()?;
            if rl.to_bits() != l.to_bits() {
                return Err(Error::invalid(
                    "08_typed_char_gpt",
                    format!("step {step}: typed loss {l} but models::Gpt loss {rl}"),
                ));
            }
        }
        if step == 1 || step % 20 == 0 || step == steps {
            let same = if compare {
                " (models::Gpt: identical)"
            } else {
                ""
            };
            println!("step {step}: loss {l:.4}{same}");
        }
    }
    Ok(())
}
