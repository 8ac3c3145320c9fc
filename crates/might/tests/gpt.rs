//! GPT model, fused causal softmax and sampling: shapes, causality, weight tying, gradient
//! checks, KV-cache equivalence and the sampling filters.

use might::autograd::{gradcheck, GradCheck};
use might::models::generate::{generate, sample_logits, SampleConfig};
use might::models::{Gpt, GptConfig};
use might::nn::{causal_softmax, Module};
use might::{manual_seed, DType, Generator, Tensor};

fn tiny(bias: bool) -> GptConfig {
    GptConfig {
        vocab_size: 7,
        block_size: 6,
        n_layer: 2,
        n_head: 2,
        n_embd: 8,
        dropout: 0.0,
        bias,
    }
}

fn ids(v: &[i64], shape: [usize; 2]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn shapes_names_and_parameter_count() {
    manual_seed(0);
    let cfg = tiny(true);
    let m = Gpt::new(cfg).unwrap();
    let x = ids(&[0, 1, 2, 3, 4, 5, 6, 0, 1, 2], [2, 5]);
    assert_eq!(m.forward(&x).unwrap().dims(), [2, 5, 7]);
    let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "transformer.wte.weight");
    assert_eq!(names[2], "transformer.h.0.ln_1.weight");
    assert_eq!(names[4], "transformer.h.0.attn.c_attn.weight");
    assert_eq!(names.last().unwrap(), "transformer.ln_f.bias");
    assert_eq!(names.len(), 2 + 2 * 12 + 2);
    // wte 7·8, wpe 6·8, per block 2·(2·8) + (24·8+24) + (8·8+8) + (32·8+32) + (8·32+8), ln_f 16
    let block = 32 + 216 + 72 + 288 + 264;
    assert_eq!(m.num_parameters(), 56 + 48 + 2 * block + 16);
    let no_bias = Gpt::new(tiny(false)).unwrap();
    assert_eq!(no_bias.named_parameters().len(), 2 + 2 * 6 + 1);
}

#[test]
fn bad_inputs_are_errors() {
    let m = Gpt::new(tiny(true)).unwrap();
    // too long for block_size 6, wrong dtype, wrong rank
    assert!(m.forward(&ids(&[0; 7], [1, 7])).is_err());
    assert!(m
        .forward(&Tensor::zeros([1, 3], DType::F32).unwrap())
        .is_err());
    assert!(m
        .forward(&Tensor::from_vec(vec![1i64, 2], [2]).unwrap())
        .is_err());
    let bad = GptConfig {
        n_embd: 9,
        ..tiny(true)
    };
    assert!(Gpt::new(bad).is_err());
    let (l, t) = (ids(&[1, 2], [1, 2]), ids(&[1, 2, 3], [1, 3]));
    assert!(m.forward_with_loss(&l, &t).is_err());
}

#[test]
fn changing_future_tokens_leaves_earlier_logits_unchanged() {
    manual_seed(1);
    let m = Gpt::new(tiny(true)).unwrap();
    let a = m.forward(&ids(&[1, 2, 3, 4, 5, 6], [1, 6])).unwrap();
    let b = m.forward(&ids(&[1, 2, 3, 0, 0, 1], [1, 6])).unwrap();
    let early = |t: &Tensor| t.narrow(1, 0, 3).unwrap();
    assert_eq!(
        early(&a).to_vec::<f32>().unwrap(),
        early(&b).to_vec::<f32>().unwrap()
    );
    // and the later ones do change
    assert!(max_diff(&a.narrow(1, 3, 3).unwrap(), &b.narrow(1, 3, 3).unwrap()) > 1e-4);
}

#[test]
fn lm_head_is_tied_to_wte() {
    manual_seed(2);
    let m = Gpt::new(tiny(true)).unwrap();
    let sd = m.state_dict();
    let head = &sd.iter().find(|(n, _)| n == "lm_head.weight").unwrap().1;
    // one tensor under two names: writing through one is seen through the other
    {
        let _g = might::no_grad();
        m.wte().fill_(0.25).unwrap();
    }
    assert!(head.to_vec::<f32>().unwrap().iter().all(|&v| v == 0.25));
    assert!(!m
        .named_parameters()
        .iter()
        .any(|(n, _)| n == "lm_head.weight"));
    // the head's gradient lands on wte too: with every token embedding equal, the logits
    // are equal and the loss is ln(vocab)
    let x = ids(&[1, 2, 3], [1, 3]);
    let (_, loss) = m.forward_with_loss(&x, &ids(&[2, 3, 4], [1, 3])).unwrap();
    assert!((loss.item().unwrap() - 7f64.ln()).abs() < 1e-5);
    loss.backward().unwrap();
    let g = m.wte().grad().unwrap().to_vec::<f32>().unwrap();
    // rows of tokens never used as input still get the head's gradient
    assert!(g[0..8].iter().any(|v| v.abs() > 1e-6));
}

#[test]
fn init_follows_nanogpt() {
    manual_seed(3);
    let cfg = GptConfig {
        vocab_size: 300,
        block_size: 64,
        n_layer: 8,
        n_head: 4,
        n_embd: 64,
        dropout: 0.0,
        bias: true,
    };
    let m = Gpt::new(cfg).unwrap();
    let std = |name: &str| {
        let t = &m
            .named_parameters()
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap()
            .1;
        t.to_dtype(DType::F64)
            .unwrap()
            .flatten(0, -1)
            .unwrap()
            .std(0, 1, false)
            .unwrap()
            .item()
            .unwrap()
    };
    assert!((std("transformer.wte.weight") - 0.02).abs() < 0.001);
    assert!((std("transformer.h.0.mlp.c_fc.weight") - 0.02).abs() < 0.001);
    assert!((std("transformer.h.0.mlp.c_proj.weight") - 0.005).abs() < 0.0003);
    assert!((std("transformer.h.3.attn.c_proj.weight") - 0.005).abs() < 0.0005);
    assert_eq!(std("transformer.h.0.attn.c_attn.bias"), 0.0);
}

#[test]
fn gradcheck_tiny_gpt_in_f64() {
    manual_seed(4);
    let cfg = GptConfig {
        vocab_size: 5,
        block_size: 4,
        n_layer: 1,
        n_head: 2,
        n_embd: 4,
        dropout: 0.0,
        bias: true,
    };
    let base = Gpt::new(cfg).unwrap();
    let names: Vec<String> = base
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    // weights far from init so every path carries signal
    let inputs: Vec<Tensor> = base
        .named_parameters()
        .iter()
        .map(|(_, t)| {
            Tensor::randn(t.shape().clone(), DType::F64)
                .unwrap()
                .mul_scalar(0.5)
                .unwrap()
        })
        .collect();
    let x = ids(&[0, 1, 2, 3, 4, 2, 1, 3], [2, 4]);
    let y = ids(&[1, 2, 3, 4, 0, 0, 1, 2], [2, 4]);
    gradcheck(
        |ts| {
            let named: Vec<(String, Tensor)> =
                names.iter().cloned().zip(ts.iter().cloned()).collect();
            let m = Gpt::from_tensors(cfg, &named)?;
            Ok(m.forward_with_loss(&x, &y)?.1)
        },
        &inputs,
        GradCheck::default(),
    )
    .unwrap();
}

#[test]
fn causal_softmax_matches_masked_softmax_and_gradchecks() {
    manual_seed(5);
    let s = Tensor::randn([2, 3, 5], DType::F64).unwrap();
    for offset in [0usize, 2] {
        let got = causal_softmax(&s, 0.7, offset).unwrap();
        let keep = Tensor::tri_mask(3, 5, offset as i64, true).unwrap();
        let want = s
            .mul_scalar(0.7)
            .unwrap()
            .masked_fill(&keep.logical_not().unwrap(), f64::NEG_INFINITY)
            .unwrap()
            .softmax(-1)
            .unwrap();
        assert!(max_diff(&got, &want) < 1e-12);
        gradcheck(
            |ts| {
                // weight the outputs so the gradient is not trivially zero
                let w = Tensor::arange(0.0, 5.0, 1.0, DType::F64)?;
                causal_softmax(&ts[0], 0.7, offset)?.mul(&w)?.sum_all()
            },
            std::slice::from_ref(&s),
            GradCheck::default(),
        )
        .unwrap();
    }
    // masked entries are exactly zero: query 0 sees only key 0 with offset 0
    let p = causal_softmax(&s.to_dtype(DType::F32).unwrap(), 1.0, 0).unwrap();
    let row0 = p.narrow(1, 0, 1).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(&row0[..5], &[1.0, 0.0, 0.0, 0.0, 0.0]);
    assert!(causal_softmax(&Tensor::zeros([3], DType::F32).unwrap(), 1.0, 0).is_err());
}

#[test]
fn kv_cache_gives_the_logits_of_a_full_recompute() {
    manual_seed(6);
    let m = Gpt::new(tiny(true)).unwrap();
    let seq = [3i64, 1, 4, 1, 5, 2];
    let full = m.forward(&ids(&seq, [1, 6])).unwrap();
    let mut cache = m.new_cache(1).unwrap();
    // a prompt of 2, then one token at a time
    let first = m
        .forward_cached(&ids(&seq[..2], [1, 2]), &mut cache)
        .unwrap();
    assert!(max_diff(&first, &full.narrow(1, 0, 2).unwrap()) < 1e-5);
    for i in 2..6 {
        let step = m
            .forward_cached(&ids(&seq[i..i + 1], [1, 1]), &mut cache)
            .unwrap();
        assert!(
            max_diff(&step, &full.narrow(1, i, 1).unwrap()) < 1e-5,
            "pos {i}"
        );
    }
    assert_eq!(cache.len(), 6);
    // full: one more token does not fit
    assert!(m.forward_cached(&ids(&[0], [1, 1]), &mut cache).is_err());
}

#[test]
fn sampling_filters_and_seeds() {
    let logits = [1.0f32, 3.0, 2.0, f32::NAN, 0.5];
    let mut g = Generator::new(0);
    let greedy = SampleConfig {
        temperature: 0.0,
        ..Default::default()
    };
    assert_eq!(sample_logits(&logits, &greedy, &mut g).unwrap(), 1);
    let top1 = SampleConfig {
        top_k: Some(1),
        ..Default::default()
    };
    let top2 = SampleConfig {
        top_k: Some(2),
        ..Default::default()
    };
    let mut counts = [0usize; 5];
    for _ in 0..2000 {
        assert_eq!(sample_logits(&logits, &top1, &mut g).unwrap(), 1);
        counts[sample_logits(&logits, &top2, &mut g).unwrap()] += 1;
    }
    // top-2 keeps tokens 1 and 2 with probabilities e/(e+1) ≈ 0.731 and 0.269
    assert_eq!(counts[0] + counts[3] + counts[4], 0);
    assert!(
        (counts[1] as f64 / 2000.0 - 0.731).abs() < 0.04,
        "{counts:?}"
    );
    // top-p 0.6: token 1 alone has p ≈ 0.63 of the full softmax, so it is the only survivor
    let nucleus = SampleConfig {
        top_p: Some(0.6),
        ..Default::default()
    };
    for _ in 0..200 {
        assert_eq!(sample_logits(&logits, &nucleus, &mut g).unwrap(), 1);
    }
    let bad = SampleConfig {
        top_p: Some(0.0),
        ..Default::default()
    };
    assert!(sample_logits(&logits, &bad, &mut g).is_err());
    assert!(sample_logits(&[], &SampleConfig::default(), &mut g).is_err());
}

#[test]
fn generate_is_seeded_and_runs_past_block_size() {
    manual_seed(7);
    let mut m = Gpt::new(tiny(true)).unwrap();
    m.eval();
    let cfg = SampleConfig {
        temperature: 1.0,
        top_k: Some(5),
        top_p: Some(0.95),
    };
    let a = generate(&m, &[1, 2], 20, &cfg, &mut Generator::new(42)).unwrap();
    let b = generate(&m, &[1, 2], 20, &cfg, &mut Generator::new(42)).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), 20);
    assert!(a.iter().all(|&t| (0..7).contains(&t)));
    // greedy with the cache equals greedy by full recompute while within block_size
    let greedy = SampleConfig {
        temperature: 0.0,
        ..Default::default()
    };
    let fast = generate(&m, &[3], 5, &greedy, &mut Generator::new(0)).unwrap();
    let mut seq = vec![3i64];
    for _ in 0..5 {
        let n = seq.len();
        let logits = m.forward(&ids(&seq, [1, n])).unwrap();
        let last = logits
            .select(1, (n - 1) as isize)
            .unwrap()
            .argmax(-1, false)
            .unwrap();
        seq.push(last.to_vec::<i64>().unwrap()[0]);
    }
    assert_eq!(fast, seq[1..]);
    assert!(generate(&m, &[9], 1, &greedy, &mut Generator::new(0)).is_err());
}
