// A conv made for 3 input channels fed a 1-channel image.
use might::typed::{Conv2d, Tensor4};

fn main() -> might::Result<()> {
    let conv = Conv2d::<3, 8, 3>::new()?;
    let x = Tensor4::<2, 1, 28, 28>::zeros()?;
    let _y: Tensor4<2, 8, 26, 26> = conv.forward(&x)?;
    Ok(())
}
