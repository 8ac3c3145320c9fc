// A Linear<784, 128> fed rows of 100 features.
use might::typed::{Linear, Tensor2};

fn main() -> might::Result<()> {
    let fc = Linear::<784, 128>::new()?;
    let x = Tensor2::<8, 100>::zeros()?;
    let _y = fc.forward(&x)?;
    Ok(())
}
