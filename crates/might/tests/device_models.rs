//! Models on a device: `Module::to_device` moves parameters in place (an optimizer built before
//! still steps them), the data loader delivers batches on the model's device, and a GPT trains
//! and generates there, matching the CPU. Every body runs on every device (`tests/common`).

mod common;

use std::sync::Arc;

use might::data::{DataLoader, TensorDataset};
use might::models::{Gpt, GptConfig};
use might::nn::functional::{cross_entropy, scaled_dot_product_attention, CrossEntropyOptions};
use might::nn::{causal_softmax, Linear, Module, ReLU, Sequential};
use might::optim::{Optimizer, Sgd, SgdConfig};
use might::{manual_seed, DType, Device, ErrorKind, Result, Tensor};

device_tests!(
    to_device_moves_parameters_in_place,
    loader_delivers_on_the_device,
    gpt_trains_and_generates_like_the_cpu,
    ; f64:
    attention_and_causal_softmax_like_the_cpu,
);

fn close(a: &Tensor, b: &Tensor, tol: f64, what: &str) {
    let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "{what}[{i}]: {x} vs {y}"
        );
    }
}

fn mlp() -> Sequential {
    Sequential::new()
        .add(Linear::new(4, 8, true).unwrap())
        .add(ReLU)
        .add(Linear::new(8, 3, true).unwrap())
}

fn to_device_moves_parameters_in_place(dev: Device) -> Result<()> {
    manual_seed(5);
    let (cpu, moved) = (mlp(), mlp());
    moved.load_state_dict(&cpu.state_dict(), true)?;
    // the optimizer holds the parameters before the move: it must step them where they go
    let mut opt = Sgd::new(
        moved.parameters(),
        SgdConfig {
            lr: 0.1,
            momentum: 0.9,
            ..Default::default()
        },
    )?;
    let mut opt_cpu = Sgd::new(
        cpu.parameters(),
        SgdConfig {
            lr: 0.1,
            momentum: 0.9,
            ..Default::default()
        },
    )?;
    moved.to_device(dev)?;
    assert_eq!(moved.device(), dev);
    assert!(moved.state_dict().iter().all(|(_, t)| t.device() == dev));
    let x = Tensor::randn([5, 4], DType::F32)?;
    let y = Tensor::from_vec(vec![0i64, 1, 2, 1, 0], [5])?;
    let o = CrossEntropyOptions::default();
    for _ in 0..3 {
        let l = cross_entropy(&moved.forward(&x.to_device(dev)?)?, &y.to_device(dev)?, &o)?;
        let lc = cross_entropy(&cpu.forward(&x)?, &y, &o)?;
        close(&l, &lc, 1e-5, "loss");
        for m in [&l, &lc] {
            m.backward()?;
        }
        for ((n, p), (_, q)) in moved.named_parameters().iter().zip(cpu.named_parameters()) {
            let g = p.grad().expect("a gradient");
            assert_eq!(g.device(), dev, "grad of {n}");
            close(&g, &q.grad().expect("a gradient"), 1e-5, n);
        }
        opt.step()?;
        opt_cpu.step()?;
        opt.zero_grad();
        opt_cpu.zero_grad();
    }
    for ((n, p), (_, q)) in moved.state_dict().iter().zip(cpu.state_dict()) {
        assert_eq!(p.device(), dev, "{n} after the steps");
        close(p, &q, 1e-5, n);
    }
    // back to the CPU, and an input left on the wrong device is an error naming both
    moved.to_device(Device::Cpu)?;
    assert!(moved.parameters().iter().all(|t| t.device() == Device::Cpu));
    if dev != Device::Cpu {
        moved.to_device(dev)?;
        let e = moved.forward(&x).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Device, "{e}");
        assert!(e.to_string().contains(&dev.to_string()), "{e}");
    }
    Ok(())
}

fn loader_delivers_on_the_device(dev: Device) -> Result<()> {
    let x = Tensor::from_vec((0..20).map(|v| v as f32).collect::<Vec<_>>(), [10, 2])?;
    let y = Tensor::from_vec((0..10).map(|v| v as i64).collect::<Vec<_>>(), [10])?;
    let ds = Arc::new(TensorDataset::new(x, y)?);
    for prefetch in [0, 2] {
        let loader = DataLoader::new(ds.clone(), 4, false, false, 0)
            .with_prefetch(prefetch)
            .with_device(dev);
        assert_eq!(loader.device(), dev);
        let mut seen = Vec::new();
        for b in &loader {
            let (bx, by) = b?;
            assert_eq!((bx.device(), by.device()), (dev, dev));
            seen.extend(by.to_vec::<i64>()?);
            assert_eq!(
                bx.to_vec::<f32>()?[0],
                2.0 * seen[seen.len() - by.numel()] as f32
            );
        }
        assert_eq!(seen, (0..10).collect::<Vec<i64>>());
    }
    Ok(())
}

fn gpt_trains_and_generates_like_the_cpu(dev: Device) -> Result<()> {
    let cfg = GptConfig {
        vocab_size: 11,
        block_size: 8,
        n_layer: 2,
        n_head: 2,
        n_embd: 16,
        dropout: 0.0,
        bias: true,
    };
    manual_seed(9);
    let (cpu, moved) = (Gpt::new(cfg)?, Gpt::new(cfg)?);
    moved.load_state_dict(&cpu.state_dict(), true)?;
    moved.to_device(dev)?;
    // SGD: a linear update keeps the backends' rounding differences as small as they are
    // (Adam's normalisation would blow up the sign of near-zero gradients)
    let sgd = SgdConfig {
        lr: 0.1,
        ..Default::default()
    };
    let mut opts = [
        Sgd::new(cpu.parameters(), sgd)?,
        Sgd::new(moved.parameters(), sgd)?,
    ];
    let idx: Vec<i64> = (0..16).map(|i| (i * 7 + 3) % 11).collect();
    let tgt: Vec<i64> = (0..16).map(|i| (i * 5 + 1) % 11).collect();
    for _ in 0..3 {
        let mut losses = Vec::new();
        for (m, opt) in [&cpu, &moved].into_iter().zip(opts.iter_mut()) {
            let d = m.wte().device();
            let x = Tensor::from_vec(idx.clone(), [2, 8])?.to_device(d)?;
            let t = Tensor::from_vec(tgt.clone(), [2, 8])?.to_device(d)?;
            let (_, loss) = m.forward_with_loss(&x, &t)?;
            loss.backward()?;
            opt.step()?;
            opt.zero_grad();
            losses.push(loss);
        }
        close(&losses[1], &losses[0], 1e-4, "gpt loss");
    }
    for ((n, p), (_, q)) in moved.state_dict().iter().zip(cpu.state_dict()) {
        assert_eq!(p.device(), dev, "{n}");
        close(p, &q, 1e-4, n);
    }
    // cached inference on the device gives the full forward's logits
    let x = Tensor::from_vec(idx[..6].to_vec(), [1, 6])?.to_device(dev)?;
    let mut cache = moved.new_cache(1)?;
    let a = moved.forward_cached(&x.narrow(1, 0, 4)?, &mut cache)?;
    let b = moved.forward_cached(&x.narrow(1, 4, 2)?, &mut cache)?;
    let full = moved.forward_logits(&x)?;
    close(&Tensor::cat(&[a, b], 1)?, &full, 1e-4, "cached logits");
    Ok(())
}

fn attention_and_causal_softmax_like_the_cpu(dev: Device) -> Result<()> {
    manual_seed(3);
    let (q, k, v) = (
        Tensor::randn([2, 3, 5, 4], DType::F64)?,
        Tensor::randn([2, 3, 7, 4], DType::F64)?,
        Tensor::randn([2, 3, 7, 6], DType::F64)?,
    );
    let w = Tensor::randn([2, 3, 5, 6], DType::F64)?;
    for causal in [false, true] {
        let mut got = Vec::new();
        for d in [Device::Cpu, dev] {
            let ins: Vec<Tensor> = [&q, &k, &v]
                .iter()
                .map(|t| Ok(t.detach().to_device(d)?.with_requires_grad()))
                .collect::<Result<_>>()?;
            let y = scaled_dot_product_attention(&ins[0], &ins[1], &ins[2], None, 0.0, causal)?;
            assert_eq!(y.device(), d);
            y.mul(&w.to_device(d)?)?.sum_all()?.backward()?;
            let grads: Vec<Tensor> = ins.iter().map(|t| t.grad().expect("a grad")).collect();
            got.push((y, grads));
        }
        close(&got[1].0, &got[0].0, 1e-12, "sdpa");
        for (a, b) in got[1].1.iter().zip(&got[0].1) {
            close(a, b, 1e-12, "sdpa grad");
        }
    }
    let s = Tensor::randn([3, 4, 6], DType::F64)?;
    let on = causal_softmax(&s.to_device(dev)?, 0.5, 2)?;
    assert_eq!(on.device(), dev);
    close(&on, &causal_softmax(&s, 0.5, 2)?, 1e-12, "causal_softmax");
    Ok(())
}
