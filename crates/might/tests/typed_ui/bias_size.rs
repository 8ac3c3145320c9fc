// A bias of 5 added to rows of 4.
use might::typed::{Tensor1, Tensor2};

fn main() -> might::Result<()> {
    let x = Tensor2::<8, 4>::zeros()?;
    let bias = Tensor1::<5>::zeros()?;
    let _y = x.add_bias(&bias)?;
    Ok(())
}
