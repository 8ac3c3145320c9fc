//! Hand-computed checks of the core: creation, views, broadcasting, reductions, matmul, autograd.

use might::autograd::{gradcheck, GradCheck};
use might::{DType, ErrorKind, Result, Tensor};

fn t(v: &[f32], s: &[usize]) -> Tensor {
    Tensor::from_slice(v, s).unwrap()
}

#[test]
fn views_share_storage_and_read_in_logical_order() -> Result<()> {
    let a = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
    let b = a.t()?;
    assert!(b.same_storage(&a));
    assert!(!b.is_contiguous());
    assert_eq!(b.to_vec::<f32>()?, vec![0., 3., 1., 4., 2., 5.]);
    assert_eq!(a.slice(1, 0, 3, 2)?.to_vec::<f32>()?, vec![0., 2., 3., 5.]);
    assert_eq!(a.select(0, -1)?.to_vec::<f32>()?, vec![3., 4., 5.]);
    let e = b.view([6]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Layout);
    assert!(e.to_string().contains("contiguous()"), "{e}");
    assert_eq!(
        b.reshape([6])?.to_vec::<f32>()?,
        vec![0., 3., 1., 4., 2., 5.]
    );
    Ok(())
}

#[test]
fn broadcasting_add_and_error_names_shapes() -> Result<()> {
    let a = t(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
    let b = t(&[10., 20., 30.], &[3]);
    assert_eq!(
        a.add(&b)?.to_vec::<f32>()?,
        vec![11., 22., 33., 14., 25., 36.]
    );
    let c = t(&[1., 2.], &[2, 1]);
    assert_eq!(a.mul(&c)?.to_vec::<f32>()?, vec![1., 2., 3., 8., 10., 12.]);
    let bad = t(&[1., 2.], &[2]);
    let e = a.add(&bad).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("[2, 3]") && msg.contains("[2]") && msg.contains("smoke.rs"),
        "{msg}"
    );
    Ok(())
}

#[test]
fn strict_broadcast_refuses_double_expansion() -> Result<()> {
    let a = t(&[1., 2., 3.], &[3, 1]);
    let b = t(&[1., 2., 3.], &[1, 3]);
    assert_eq!(a.add(&b)?.dims(), &[3, 3]);
    let _g = might::strict_broadcast();
    assert!(a.add(&b).is_err());
    Ok(())
}

#[test]
fn reductions() -> Result<()> {
    let a = t(&[1., 5., 3., 4., 2., 6.], &[2, 3]);
    assert_eq!(a.sum(0, false)?.to_vec::<f32>()?, vec![5., 7., 9.]);
    assert_eq!(a.sum(1, true)?.dims(), &[2, 1]);
    assert_eq!(a.sum(1, false)?.to_vec::<f32>()?, vec![9., 12.]);
    assert_eq!(a.mean_all()?.item()?, 3.5);
    let (v, i) = a.max(1, false)?;
    assert_eq!(v.to_vec::<f32>()?, vec![5., 6.]);
    assert_eq!(i.to_vec::<i64>()?, vec![1, 2]);
    assert_eq!(a.argmin(0, false)?.to_vec::<i64>()?, vec![0, 1, 0]);
    assert!((a.var(1, 1, false)?.to_vec::<f32>()?[0] - 4.0).abs() < 1e-6);
    assert_eq!(a.t()?.sum(0, false)?.to_vec::<f32>()?, vec![9., 12.]);
    Ok(())
}

#[test]
fn matmul_shapes_and_values() -> Result<()> {
    let a = t(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
    let b = t(&[1., 0., 0., 1., 1., 1.], &[3, 2]);
    assert_eq!(a.matmul(&b)?.to_vec::<f32>()?, vec![4., 5., 10., 11.]);
    // transposed operand, no copy
    assert_eq!(
        a.matmul(&a.t()?)?.to_vec::<f32>()?,
        vec![14., 32., 32., 77.]
    );
    let v = t(&[1., 1., 1.], &[3]);
    assert_eq!(a.matmul(&v)?.to_vec::<f32>()?, vec![6., 15.]);
    assert_eq!(v.matmul(&v)?.dims(), &[] as &[usize]);
    let e = a.matmul(&a).unwrap_err().to_string();
    assert!(
        e.starts_with("matmul: inner dimensions differ: lhs [2, 3] vs rhs [2, 3]"),
        "{e}"
    );
    Ok(())
}

#[test]
fn autograd_mlp_like_graph() -> Result<()> {
    let x = Tensor::from_vec(vec![1f64, 2., 3., 4.], [2, 2])?;
    let w = Tensor::from_vec(vec![0.5f64, -1., 2., 1.], [2, 2])?.with_requires_grad();
    let y = x.matmul(&w)?.relu()?.sum_all()?;
    y.backward()?;
    // relu'(xw) = [[1,1],[1,1]] here: xw = [[4.5, 1], [9.5, 1]]
    assert_eq!(w.grad().unwrap().to_vec::<f64>()?, vec![4., 4., 6., 6.]);
    Ok(())
}

#[test]
fn gradchecks() -> Result<()> {
    let a = Tensor::randn([2, 3], DType::F64)?;
    let b = Tensor::randn([3], DType::F64)?;
    let o = GradCheck::default();
    gradcheck(
        |x| x[0].mul(&x[1])?.tanh()?.sum(1, false),
        &[a.clone(), b.clone()],
        o,
    )?;
    gradcheck(
        |x| x[0].div(&x[1].exp()?)?.gelu(),
        &[a.clone(), b.clone()],
        o,
    )?;
    gradcheck(|x| x[0].softmax(1), &[a.clone()], o)?;
    gradcheck(|x| x[0].log_softmax(0), &[a.clone()], o)?;
    gradcheck(|x| x[0].matmul(&x[1]), &[a.clone(), b.clone()], o)?;
    gradcheck(|x| x[0].t()?.matmul(&x[0]), &[a.clone()], o)?;
    gradcheck(|x| Ok(x[0].max(1, false)?.0), &[a.clone()], o)?;
    gradcheck(|x| x[0].var(1, 1, true), &[a.clone()], o)?;
    gradcheck(|x| x[0].logsumexp(1, false), &[a.clone()], o)?;
    gradcheck(|x| x[0].prod(1, false), &[a.clone()], o)?;
    gradcheck(
        |x| Tensor::cat(&[x[0].clone(), x[0].slice(1, 0, 3, 2)?], 1),
        &[a.clone()],
        o,
    )?;
    Ok(())
}
