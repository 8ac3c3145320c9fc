//! Dropout's seeded masks. Its own test binary: it reseeds the process-wide generator and
//! expects the next draws to be its own, which other tests drawing in parallel would break.

use might::autograd::{gradcheck, GradCheck};
use might::nn::{Dropout, Module};
use might::{manual_seed, DType, Result, Tensor};

fn gc() -> GradCheck {
    GradCheck::default()
}

#[test]
fn dropout_eval_identity_seeded_and_scaled() -> Result<()> {
    let x = Tensor::ones([1000], DType::F32)?;
    let mut d = Dropout::new(0.25);
    manual_seed(11);
    let a = d.forward(&x)?.to_vec::<f32>()?;
    manual_seed(11);
    let b = d.forward(&x)?.to_vec::<f32>()?;
    assert_eq!(a, b, "same seed, same mask");
    let c = d.forward(&x)?.to_vec::<f32>()?;
    assert_ne!(a, c, "the generator advances");
    // survivors scaled by 1 / (1 - p)
    assert!(a.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
    let dropped = a.iter().filter(|&&v| v == 0.0).count();
    assert!((200..300).contains(&dropped), "dropped {dropped} of 1000");
    d.eval();
    assert!(!d.is_training());
    let e = d.forward(&x)?;
    assert_eq!(e.to_vec::<f32>()?, vec![1.0; 1000]);
    assert!(Dropout::new(1.5).forward(&x).is_err());
    // gradient: the same mask in forward and backward
    let xg = Tensor::randn([4, 5], DType::F64)?;
    let d = Dropout::new(0.5);
    gradcheck(
        |i| {
            manual_seed(5);
            d.forward(&i[0])
        },
        &[xg],
        gc(),
    )
}
