//! Regression tests for hostile sizes reaching the library's public calls: each returns an
//! error naming the op and the numbers, never a panic or an abort (issue: hardening).

use might::data::{DataLoader, Dataset};
use might::models::{Gpt, GptConfig};
use might::nn::{BatchNorm2d, Conv2d, Conv2dConfig, Embedding, LayerNorm, Linear, RMSNorm};
use might::{DType, ErrorKind, Generator, Result, Tensor};

/// The error of `r`, which must be one, with `op` in its text.
#[track_caller]
fn err_of<T>(r: Result<T>, op: &str) -> might::Error {
    match r {
        Ok(_) => panic!("expected an error from {op}"),
        Err(e) => {
            assert!(e.to_string().contains(op), "{op}: {e}");
            e
        }
    }
}

#[test]
fn layer_constructors_refuse_sizes_that_overflow_or_exceed_memory() {
    let e = err_of(Linear::new(usize::MAX, 2, true), "Linear");
    assert!(e.msg.contains("too many elements"), "{e}");
    let e = err_of(Linear::new(1 << 33, 1 << 33, true), "Linear");
    assert!(e.msg.contains("too many elements"), "{e}");
    // fits in usize but not in any machine's memory (2^40 floats = 4 TiB)
    let e = err_of(Linear::new(1 << 20, 1 << 20, false), "Linear");
    assert_eq!(e.kind, ErrorKind::Memory, "{e}");
    assert!(e.msg.contains("4.0 TiB"), "{e}");
    err_of(Embedding::new(usize::MAX, 2), "Embedding");
    err_of(
        LayerNorm::with_config(&[usize::MAX, 4], 1e-5, true, true),
        "LayerNorm",
    );
    err_of(
        RMSNorm::with_config(&[usize::MAX, 4], None, true),
        "RMSNorm",
    );
    err_of(BatchNorm2d::new(usize::MAX), "BatchNorm2d");
    err_of(
        Conv2d::new(usize::MAX, 2, 3, Conv2dConfig::default()),
        "Conv2d",
    );
    // ordinary sizes still build
    assert_eq!(Linear::new(3, 2, true).unwrap().weight.dims(), [2, 3]);
}

#[test]
fn creation_ops_refuse_buffers_beyond_the_memory_budget() {
    let e = err_of(
        Tensor::zeros([1 << 21, 1 << 21, 1 << 10], DType::F32),
        "zeros",
    );
    assert_eq!(e.kind, ErrorKind::Memory);
    assert!(e.msg.contains("[2097152, 2097152, 1024] float32"), "{e}");
    let e = err_of(Tensor::arange(0.0, 1e18, 1.0, DType::F32), "arange");
    assert_eq!(e.kind, ErrorKind::Memory);
    err_of(Tensor::full([1 << 40], 1.0, DType::F64), "full");
    err_of(Tensor::randn([1 << 20, 1 << 20], DType::F32), "randn");
    err_of(Tensor::rand_int(0, 5, [1 << 40]), "rand_int");
    err_of(Tensor::eye(1 << 24, DType::F32), "eye");
    err_of(Tensor::linspace(0.0, 1.0, 1 << 40, DType::F32), "linspace");
}

#[test]
fn a_stated_memory_limit_is_applied_and_can_be_lifted() {
    // (one test changes the process-wide limit; the others only ask for far more than any
    // machine has, so they fail either way)
    might::set_memory_limit(Some(100 << 20));
    assert_eq!(might::memory_limit(), 100 << 20);
    let e = err_of(Tensor::zeros([64 << 20], DType::F32), "zeros");
    assert!(
        e.msg.contains("256.0 MiB") && e.msg.contains("100.0 MiB"),
        "{e}"
    );
    assert!(Tensor::zeros([8 << 20], DType::F32).is_ok()); // 32 MiB fits
    might::set_memory_limit(None);
    assert!(might::memory_limit() > 100 << 20);
}

#[test]
fn conv_with_absurd_padding_is_an_error() {
    let x = Tensor::zeros([1, 1, 5, 5], DType::F32).unwrap();
    let w = Tensor::zeros([1, 1, 3, 3], DType::F32).unwrap();
    let e = err_of(
        x.conv2d(&w, None, [1, 1], [usize::MAX / 2, 0], [1, 1], 1),
        "conv2d",
    );
    assert!(e.msg.contains("does not fit the padded input"), "{e}");
    // padding that adds up but makes an output no memory holds
    let e = err_of(
        x.conv2d(&w, None, [1, 1], [1 << 30, 1 << 30], [1, 1], 1),
        "conv2d",
    );
    assert_eq!(e.kind, ErrorKind::Memory, "{e}");
    // groups that overflow the channel count
    let e = err_of(
        x.conv2d(&w, None, [1, 1], [0, 0], [1, 1], usize::MAX),
        "conv2d",
    );
    assert!(e.msg.contains("channels"), "{e}");
}

struct Ones;
impl Dataset for Ones {
    fn len(&self) -> usize {
        10
    }
    fn get_batch(&self, idx: &[usize]) -> Result<(Tensor, Tensor)> {
        Ok((
            Tensor::ones([idx.len(), 2], DType::F32)?,
            Tensor::zeros([idx.len()], DType::I64)?,
        ))
    }
}

#[test]
fn a_huge_prefetch_is_an_epoch_of_batches() {
    let dl =
        DataLoader::new(std::sync::Arc::new(Ones), 3, false, false, 0).with_prefetch(usize::MAX);
    let n = dl.iter().map(|b| b.unwrap().0.dims()[0]).sum::<usize>();
    assert_eq!(n, 10);
}

#[test]
fn generators_and_models_refuse_absurd_sizes() {
    // below(0) is the whole u64 range (no division by zero)
    let mut g = Generator::new(0);
    let draws: Vec<u64> = (0..4).map(|_| g.below(0)).collect();
    assert!(draws.iter().any(|&d| d > u32::MAX as u64), "{draws:?}");
    assert!((0..100).all(|_| g.below(3) < 3));
    let cfg = GptConfig {
        vocab_size: 1 << 40,
        block_size: 8,
        n_layer: 1,
        n_head: 1,
        n_embd: 8,
        dropout: 0.0,
        bias: true,
    };
    let e = err_of(Gpt::new(cfg), "GptConfig");
    assert_eq!(e.kind, ErrorKind::Memory, "{e}");
    let huge = GptConfig {
        vocab_size: 16,
        n_layer: 100_000_000,
        n_embd: 64,
        ..cfg
    };
    err_of(Gpt::new(huge), "GptConfig");
    let wide = GptConfig {
        vocab_size: 16,
        n_embd: usize::MAX,
        ..cfg
    };
    assert_eq!(wide.parameter_count(), u128::MAX);
    err_of(Gpt::new(wide), "GptConfig");
    // a small model samples, and asks for no memory up front for a huge token count
    let small = GptConfig {
        vocab_size: 16,
        ..cfg
    };
    let m = Gpt::new(small).unwrap();
    let e = err_of(
        might::models::generate::generate(&m, &[1], usize::MAX, &Default::default(), &mut g),
        "generate",
    );
    assert_eq!(e.kind, ErrorKind::Memory, "{e}");
    let out = might::models::generate::generate(&m, &[1], 5, &Default::default(), &mut g).unwrap();
    assert_eq!(out.len(), 5);
}

#[test]
fn npy_whose_header_promises_more_data_than_the_file_holds() {
    let dir = std::env::temp_dir().join(format!("might-hardening-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let t = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2]).unwrap();
    let p = dir.join("a.npy");
    might::io::npy::save(&p, &t).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    // a version 1.0 header promising 10^18 elements, followed by 16 bytes of data
    let mut dict =
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000000000,), }".to_string();
    while !(10 + dict.len() + 1).is_multiple_of(64) {
        dict.push(' ');
    }
    dict.push('\n');
    let mut big = b"\x93NUMPY\x01\x00".to_vec();
    big.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    big.extend_from_slice(dict.as_bytes());
    big.extend_from_slice(&[0u8; 16]);
    let q = dir.join("big.npy");
    std::fs::write(&q, &big).unwrap();
    let e = err_of(might::io::inspect(&q), "npy");
    assert!(e.msg.contains("truncated"), "{e}");
    // and a truncated one
    let r = dir.join("cut.npy");
    std::fs::write(&r, &bytes[..bytes.len() - 3]).unwrap();
    let e = err_of(might::io::inspect(&r), "npy");
    assert!(e.msg.contains("truncated"), "{e}");
    assert!(might::io::inspect(&p).is_ok());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn ops_whose_output_outgrows_their_inputs_check_the_budget() {
    let col = Tensor::zeros([1 << 20, 1], DType::F32).unwrap();
    let row = Tensor::zeros([1, 1 << 20], DType::F32).unwrap();
    let e = err_of(col.add(&row), "add");
    assert_eq!(e.kind, ErrorKind::Memory, "{e}");
    let e = err_of(col.matmul(&row), "matmul");
    assert_eq!(e.kind, ErrorKind::Memory, "{e}");
    let e = err_of(
        col.expand([1 << 20, 1 << 20]).and_then(|t| t.contiguous()),
        "contiguous",
    );
    assert_eq!(e.kind, ErrorKind::Memory, "{e}");
    let ids = Tensor::zeros([1 << 20], DType::I64).unwrap();
    err_of(ids.one_hot(1 << 20), "one_hot");
}

#[test]
fn a_checkpoint_claiming_more_layers_than_it_holds_is_refused_before_listing_them() {
    let cfg = GptConfig {
        vocab_size: 16,
        block_size: 8,
        n_layer: 1,
        n_head: 1,
        n_embd: 8,
        dropout: 0.0,
        bias: true,
    };
    let m = Gpt::new(cfg).unwrap();
    let tensors: Vec<(String, Tensor)> = might::nn::Module::named_parameters(&m);
    assert!(Gpt::from_tensors(cfg, &tensors).is_ok());
    let t0 = std::time::Instant::now();
    let forged = GptConfig {
        n_layer: 5_000_000,
        ..cfg
    };
    let e = err_of(Gpt::from_tensors(forged, &tensors), "transformer.h.4999999");
    assert!(t0.elapsed().as_secs() < 5, "{e}");
}
