//! The device seam holds: a tensor on the reference backend stays there through every kind
//! of op (and its gradients arrive there), and mixing devices is an error naming both, never
//! a panic. Would fail if an op reached for the CPU buffer or built a constant on the CPU.
#![cfg(feature = "reference-backend")]

use might::{DType, Device, ErrorKind, Result, Tensor};

const REF: Device = Device::Reference;

/// Serialises the tests that draw from the global generator (one checks seeded values).
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn r(v: &[f64], s: &[usize]) -> Tensor {
    Tensor::from_slice(v, s).unwrap().to_device(REF).unwrap()
}

#[test]
fn every_op_keeps_the_device_and_gradients_arrive_there() -> Result<()> {
    let _rng = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let x = r(&[1., -2., 3., 4., -5., 6.], &[2, 3]).with_requires_grad();
    let w = r(&[0.5, 1., -1., 2., 0.25, -0.5], &[3, 2]).with_requires_grad();
    let img = Tensor::normal_on([1, 2, 5, 5], 0.0, 1.0, DType::F64, REF)?.with_requires_grad();
    let k = Tensor::uniform_on([3, 2, 3, 3], -1.0, 1.0, DType::F64, REF)?.with_requires_grad();
    let ids = Tensor::from_vec(vec![2i64, 0], [2])?.to_device(REF)?;
    let outs: Vec<(&str, Tensor)> = vec![
        ("exp", x.exp()?),
        ("add_scalar", x.add_scalar(1.0)?),
        ("mul", x.mul(&x)?),
        ("gt_scalar", x.gt_scalar(0.0)?),
        ("where", Tensor::where_(&x.gt_scalar(0.0)?, &x, &x.neg()?)?),
        ("masked_fill", x.masked_fill(&x.lt_scalar(0.0)?, 0.0)?),
        ("sum", x.sum(1, false)?),
        ("mean_all", x.mean_all()?),
        ("max", x.max(1, false)?.0),
        ("argmax", x.argmax(1, false)?),
        ("softmax", x.softmax(-1)?),
        ("log_softmax", x.log_softmax(0)?),
        ("logsumexp", x.logsumexp(1, false)?),
        ("matmul", x.matmul(&w)?),
        ("t", x.t()?.contiguous()?),
        ("to_dtype", x.to_dtype(DType::F32)?),
        ("index_select", x.index_select(1, &ids)?),
        ("tril", x.tril(0)?),
        ("one_hot", ids.one_hot(3)?),
        ("cat", Tensor::cat(&[x.clone(), x.clone()], 0)?),
        ("conv2d", img.conv2d(&k, None, [1, 1], [1, 1], [1, 1], 1)?),
        ("max_pool2d", img.max_pool2d([2, 2], [2, 2], [0, 0])?),
        ("zeros_like", Tensor::zeros_like(&x)?),
    ];
    for (name, t) in &outs {
        assert_eq!(t.device(), REF, "{name}");
    }
    let loss = x.matmul(&w)?.relu()?.sum_all()?.add(
        &img.conv2d(&k, None, [1, 1], [1, 1], [1, 1], 1)?
            .mean_all()?,
    )?;
    assert_eq!(loss.device(), REF);
    loss.backward()?;
    for (name, p) in [("x", &x), ("w", &w), ("img", &img), ("k", &k)] {
        let g = p.grad().expect("a gradient");
        assert_eq!(g.device(), REF, "grad of {name}");
    }
    Ok(())
}

#[test]
fn mixing_devices_is_an_error_naming_both() -> Result<()> {
    let c = Tensor::from_slice(&[1f64, 2., 3., 4.], [2, 2])?;
    let r = c.to_device(REF)?;
    let idx = Tensor::from_vec(vec![true, false, true, true], [2, 2])?;
    type Op = fn(&Tensor, &Tensor, &Tensor) -> Result<Tensor>;
    let ops: Vec<(&str, Op)> = vec![
        ("add", |a, b, _| a.add(b)),
        ("mul", |a, b, _| a.mul(b)),
        ("maximum", |a, b, _| a.maximum(b)),
        ("lt", |a, b, _| a.lt(b)),
        ("matmul", |a, b, _| a.matmul(b)),
        ("where", |a, b, m| Tensor::where_(m, a, b)),
        ("cat", |a, b, _| Tensor::cat(&[a.clone(), b.clone()], 0)),
        ("copy_", |a, b, _| a.copy_(b).cloned()),
    ];
    for (name, f) in ops {
        for (a, b) in [(&r, &c), (&c, &r)] {
            let e = f(a, b, &idx).expect_err(name);
            let msg = e.to_string();
            assert_eq!(e.kind, ErrorKind::Device, "{name}: {msg}");
            assert!(
                msg.contains("cpu") && msg.contains("reference"),
                "{name}: {msg}"
            );
        }
    }
    Ok(())
}

#[test]
fn round_trips_are_exact_for_every_dtype() -> Result<()> {
    let big = (1i64 << 53) + 1; // not representable in f64
    let i = Tensor::from_vec(vec![big, -big, i64::MAX, i64::MIN], [4])?.to_device(REF)?;
    assert_eq!(i.to_vec::<i64>()?, vec![big, -big, i64::MAX, i64::MIN]);
    assert_eq!(i.add(&i)?.to_device(Device::Cpu)?.to_vec::<i64>()?, {
        let c = Tensor::from_vec(vec![big, -big, i64::MAX, i64::MIN], [4])?;
        c.add(&c)?.to_vec::<i64>()?
    });
    for dt in DType::ALL {
        let c = Tensor::from_slice(&[0.1f64, -2.7, 300.0, 1e-5], [4])?.to_dtype(dt)?;
        let back = c.to_device(REF)?.to_device(Device::Cpu)?;
        assert_eq!(back.dtype(), dt);
        assert_eq!(back.to_f64_vec(), c.to_f64_vec(), "{dt}");
        // the same cast on either device
        let on_ref = c.to_device(REF)?.to_dtype(DType::F32)?.to_f64_vec();
        assert_eq!(on_ref, c.to_dtype(DType::F32)?.to_f64_vec(), "{dt} -> f32");
    }
    // seeded draws match the CPU backend
    let _rng = RNG.lock().unwrap_or_else(|e| e.into_inner());
    might::manual_seed(7);
    let a = Tensor::randn([16], DType::F32)?;
    might::manual_seed(7);
    let b = Tensor::normal_on([16], 0.0, 1.0, DType::F32, REF)?;
    assert_eq!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
    Ok(())
}
