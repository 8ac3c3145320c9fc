//! Autograd: gradients of a small expression, checked against the formula by hand.
//!
//! Run with `cargo run -p might --example 02_autograd`.

use might::Tensor;

fn main() -> might::Result<()> {
    // y = sum(w * x^2 + 3 w) ; dy/dw = x^2 + 3 ; dy/dx = 2 w x.
    let x = Tensor::new(&[1.0f64, 2.0, 3.0]).with_requires_grad();
    let w = Tensor::new(&[0.5f64, -1.0, 2.0]).with_requires_grad();
    let y = w.mul(&x.square()?)?.add(&w.mul_scalar(3.0)?)?.sum_all()?;
    y.backward()?;
    println!("y = {}", y.item()?);
    println!(
        "dy/dw = {:?} (expect [4, 7, 12])",
        w.grad().unwrap().to_vec::<f64>()?
    );
    println!(
        "dy/dx = {:?} (expect [1, -4, 12])",
        x.grad().unwrap().to_vec::<f64>()?
    );

    // Inside no_grad nothing is recorded: the result has no history.
    let z = {
        let _g = might::no_grad();
        x.mul(&w)?
    };
    println!("under no_grad requires_grad = {}", z.requires_grad());

    // One step of gradient descent on w, in place.
    {
        let _g = might::no_grad();
        w.add_scaled_(&w.grad().unwrap(), -0.1)?;
    }
    println!("w after one step = {:?}", w.to_vec::<f64>()?);
    Ok(())
}
