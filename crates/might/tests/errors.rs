//! User mistakes give errors that name the op and both shapes — never a panic.

use might::{DType, ErrorKind, Result, Tensor};

fn z(s: &[usize]) -> Tensor {
    Tensor::zeros(s, DType::F32).unwrap()
}

#[test]
fn every_binary_op_reports_both_shapes() {
    let (a, b) = (z(&[2, 3]), z(&[4, 2]));
    type Op = fn(&Tensor, &Tensor) -> Result<Tensor>;
    let ops: Vec<(&str, Op)> = vec![
        ("add", |a, b| a.add(b)),
        ("sub", |a, b| a.sub(b)),
        ("mul", |a, b| a.mul(b)),
        ("div", |a, b| a.div(b)),
        ("pow", |a, b| a.pow(b)),
        ("maximum", |a, b| a.maximum(b)),
        ("minimum", |a, b| a.minimum(b)),
        ("eq", |a, b| a.eq(b)),
        ("ne", |a, b| a.ne(b)),
        ("lt", |a, b| a.lt(b)),
        ("le", |a, b| a.le(b)),
        ("gt", |a, b| a.gt(b)),
        ("ge", |a, b| a.ge(b)),
        ("matmul", |a, b| a.matmul(b)),
    ];
    for (name, f) in ops {
        let e = f(&a, &b).unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.kind, ErrorKind::Shape, "{name}: {msg}");
        assert!(msg.starts_with(&format!("{name}: ")), "{msg}");
        assert!(
            msg.contains("[2, 3]") && msg.contains("[4, 2]"),
            "{name}: {msg}"
        );
        assert!(msg.contains("tests/errors.rs"), "location missing: {msg}");
    }
}

#[test]
fn in_place_ops_refuse_bad_broadcasts() {
    let (a, b) = (z(&[2, 3]), z(&[3, 3]));
    for r in [
        a.add_(&b).err(),
        a.sub_(&b).err(),
        a.mul_(&b).err(),
        a.div_(&b).err(),
    ] {
        let msg = r.expect("must fail").to_string();
        assert!(msg.contains("[2, 3]") && msg.contains("[3, 3]"), "{msg}");
    }
    // expanded (stride 0) destinations are refused
    let e = z(&[3])
        .broadcast_to([2, 3])
        .unwrap()
        .add_(&z(&[2, 3]))
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Layout);
}

#[test]
fn dtype_device_dim_and_index_errors() {
    let a = z(&[2, 3]);
    let i = Tensor::zeros([2, 3], DType::I64).unwrap();
    assert_eq!(a.add(&i).unwrap_err().kind, ErrorKind::DType);
    assert_eq!(i.exp().unwrap_err().kind, ErrorKind::DType);
    assert_eq!(a.sum(2, false).unwrap_err().kind, ErrorKind::Index);
    assert_eq!(a.transpose(0, -3).unwrap_err().kind, ErrorKind::Index);
    assert_eq!(a.select(1, 3).unwrap_err().kind, ErrorKind::Index);
    let idx = Tensor::new(&[0i64, 5]);
    let e = a.index_select(1, &idx).unwrap_err();
    assert!(
        e.to_string()
            .contains("index 5 is out of bounds for size 3"),
        "{e}"
    );
    assert_eq!(a.reshape([4, 2]).unwrap_err().kind, ErrorKind::Shape);
    assert_eq!(
        Tensor::from_vec(vec![1f32, 2.], [3]).unwrap_err().kind,
        ErrorKind::Shape
    );
    assert_eq!(a.to_vec::<f64>().unwrap_err().kind, ErrorKind::DType);
    assert_eq!(a.item().unwrap_err().kind, ErrorKind::Shape);
    assert!(Tensor::cat(&[z(&[2, 3]), z(&[2, 4])], 0).is_err());
    assert!(Tensor::cat(&[], 0).is_err());
    assert!(Tensor::stack(&[z(&[2]), z(&[3])], 0).is_err());
    assert!(a.permute(&[0, 0]).is_err());
    assert!(a.narrow(1, 2, 2).is_err());
    assert!(a.matmul(&Tensor::scalar(1f32)).is_err());
    assert!(z(&[2, 2, 3]).matmul(&z(&[3, 3, 2])).is_err()); // batch 2 vs 3
    assert!(a.backward().is_err()); // no grad
    let w = z(&[2, 3]).with_requires_grad();
    let e = w.matmul(&z(&[3, 2])).unwrap().backward().unwrap_err();
    assert_eq!(e.kind, ErrorKind::Autograd);
    assert!(
        w.add_(&a).is_err(),
        "in-place on a leaf requiring grad must fail outside no_grad"
    );
    let _g = might::no_grad();
    assert!(w.add_(&a).is_ok());
}
