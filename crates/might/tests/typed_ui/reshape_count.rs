// 24 elements cannot become 25 (fails `cargo build`, not `cargo check`).
use might::typed::Tensor2;

fn main() -> might::Result<()> {
    let x = Tensor2::<4, 6>::zeros()?;
    let _y: Tensor2<5, 5> = x.reshape()?;
    Ok(())
}
