// A 3x3 conv with padding 1 keeps 28x28; the annotated 27x27 is wrong (fails `cargo build`,
// not `cargo check`).
use might::typed::{Conv2d, Dyn, Tensor4};

fn main() -> might::Result<()> {
    let conv = Conv2d::<1, 8, 3, 1, 1>::new()?;
    let x: Tensor4<Dyn, 1, 28, 28> =
        Tensor4::from_dyn(might::Tensor::zeros([2, 1, 28, 28], might::DType::F32)?)?;
    let _y: Tensor4<Dyn, 8, 27, 27> = conv.forward(&x)?;
    Ok(())
}
