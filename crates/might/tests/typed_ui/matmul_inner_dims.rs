// [8, 4] @ [5, 3]: the inner dims differ.
use might::typed::Tensor2;

fn main() -> might::Result<()> {
    let a = Tensor2::<8, 4>::zeros()?;
    let b = Tensor2::<5, 3>::zeros()?;
    let _c = a.matmul(&b)?;
    Ok(())
}
