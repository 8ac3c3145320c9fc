// Correct typed code builds: the sizes agree everywhere.
use might::typed::{Conv2d, Dyn, Linear, MaxPool2d, Tensor1, Tensor2, Tensor4};

fn main() -> might::Result<()> {
    let x: Tensor4<Dyn, 1, 28, 28> = Tensor4::from_dyn(might::Tensor::zeros([2, 1, 28, 28], might::DType::F32)?)?;
    let conv = Conv2d::<1, 8, 3, 1, 1>::new()?;
    let h: Tensor4<Dyn, 8, 28, 28> = conv.forward(&x)?;
    let h: Tensor4<Dyn, 8, 14, 14> = MaxPool2d::<2>::new().forward(&h)?;
    let fc = Linear::<1568, 10>::new()?;
    let logits: Tensor2<Dyn, 10> = fc.forward(&h.flatten::<1568>()?)?;
    let bias = Tensor1::<10>::zeros()?;
    let w = Tensor2::<10, 3>::zeros()?;
    let _out: Tensor2<Dyn, 3> = logits.add_bias(&bias)?.matmul(&w)?;
    Ok(())
}
