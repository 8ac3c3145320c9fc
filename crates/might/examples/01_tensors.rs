//! Tensors: creation, views, broadcasting, reductions and matmul.
//!
//! Run with `cargo run -p might --example 01_tensors`.

use might::{DType, Tensor};

fn main() -> might::Result<()> {
    // Creation.
    let a = Tensor::from_vec(vec![1f32, 2., 3., 4., 5., 6.], [2, 3])?;
    let b = Tensor::arange(0.0, 3.0, 1.0, DType::F32)?;
    println!("a = {a}");
    println!("b = {b}");

    // Broadcasting: [2, 3] + [3] -> [2, 3].
    let c = a.add(&b)?;
    println!("a + b = {c}");

    // Views share storage: transposing copies nothing.
    let at = a.t()?;
    println!(
        "a.t() has shape {:?}, contiguous: {}",
        at.dims(),
        at.is_contiguous()
    );

    // Matmul and reductions.
    let g = a.matmul(&at)?;
    println!("a @ a.t() = {g}");
    println!("sum over dim 1 = {}", a.sum(1, false)?);
    println!("mean of all = {}", a.mean_all()?.item()?);
    let (vals, idx) = a.max(1, false)?;
    println!("row max = {vals}, argmax = {idx}");

    // Random numbers are reproducible with a seed.
    might::manual_seed(0);
    let r = Tensor::randn([2, 2], DType::F32)?;
    println!("randn = {r}");
    Ok(())
}
