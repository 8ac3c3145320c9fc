// [N, 64, 7, 7] flattens to 3136 features, not 3000 (fails `cargo build`, not `cargo check`).
use might::typed::{Dyn, Tensor2, Tensor4};

fn main() -> might::Result<()> {
    let x: Tensor4<Dyn, 64, 7, 7> =
        Tensor4::from_dyn(might::Tensor::zeros([2, 64, 7, 7], might::DType::F32)?)?;
    let _y: Tensor2<Dyn, 3000> = x.flatten()?;
    Ok(())
}
