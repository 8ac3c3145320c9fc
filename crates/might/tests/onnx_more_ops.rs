//! `might::onnx` operators beyond the core set: the low-precision element types (float8,
//! int4) through Cast, detection and resampling operators, checked by hand; malformed
//! arguments give errors naming the operator, never panics.
#![cfg(feature = "onnx")]

use might::onnx::proto::{
    attribute_proto::AttributeType, type_proto, AttributeProto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use might::onnx::{elem, Model};
use might::Tensor;
use prost::Message;

fn node(op: &str, ins: &[&str], outs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Ints as i32),
        ints: v.to_vec(),
        ..Default::default()
    }
}

fn info(name: &str, e: i32) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(e),
                shape: None::<TensorShapeProto>,
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A one-node model at opset 22 with the given typed inputs and outputs.
fn model(n: NodeProto, ins: &[(&str, i32)], outs: &[(&str, i32)]) -> might::Result<Model> {
    let bytes = ModelProto {
        ir_version: Some(10),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(22),
        }],
        graph: Some(GraphProto {
            node: vec![n],
            input: ins.iter().map(|&(k, e)| info(k, e)).collect(),
            output: outs.iter().map(|&(k, e)| info(k, e)).collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec();
    Model::from_bytes(&bytes)
}

/// Run a one-node model and return the error message (the run must fail).
fn run_err(n: NodeProto, feeds: Vec<(&str, Tensor)>, outs: &[(&str, i32)]) -> String {
    let ins: Vec<(&str, i32)> = feeds
        .iter()
        .map(|(k, t)| (*k, might::onnx::elem_of(t.dtype())))
        .collect();
    let m = model(n, &ins, outs).expect("the model loads");
    match m.run(&feeds) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn casts_round_onto_float8_and_int4_grids() -> might::Result<()> {
    const FLOAT8E4M3FN: i64 = 17;
    const FLOAT8E5M2: i64 = 19;
    const INT4: i64 = 22;
    let x = Tensor::from_vec(vec![0.4789f32, 1e6, -1e6, 0.0, 3.3], [5])?;
    let cast = |to: i64, saturate: i64| -> might::Result<Vec<f32>> {
        let m = model(
            node(
                "Cast",
                &["x"],
                &["y"],
                vec![int("to", to), int("saturate", saturate)],
            ),
            &[("x", elem::FLOAT)],
            &[("y", to as i32)],
        )?;
        m.run(&[("x", x.clone())])?
            .remove(0)
            .1
            .to_dtype(might::DType::F32)?
            .to_vec::<f32>()
    };
    // e4m3fn: 3 mantissa bits, largest finite 448; saturation clamps, otherwise NaN
    let y = cast(FLOAT8E4M3FN, 1)?;
    assert_eq!(y, vec![0.46875, 448.0, -448.0, 0.0, 3.25]);
    let y = cast(FLOAT8E4M3FN, 0)?;
    assert!(y[1].is_nan() && y[2].is_nan());
    // e5m2 without saturation overflows to infinity
    let y = cast(FLOAT8E5M2, 0)?;
    assert_eq!(y[1], f32::INFINITY);
    assert_eq!(y[4], 3.5);
    // float -> int4 truncates; out of [-8, 7] gives 0 (as the ONNX reference)
    let m = model(
        node("Cast", &["x"], &["y"], vec![int("to", INT4)]),
        &[("x", elem::FLOAT)],
        &[("y", INT4 as i32)],
    )?;
    let x4 = Tensor::from_vec(vec![-9f32, -8.5, 7.9, 8.0, -0.5], [5])?;
    let y = m.run(&[("x", x4)])?.remove(0).1.to_vec::<i64>()?;
    assert_eq!(y, vec![0, -8, 7, 0, 0]);
    Ok(())
}

#[test]
fn non_max_suppression_keeps_the_best_of_overlapping_boxes() -> might::Result<()> {
    // boxes 0 and 1 overlap with IoU 0.81 > 0.5; box 2 stands apart
    let boxes = Tensor::from_vec(
        vec![0f32, 0., 10., 10., 0., 1., 10., 11., 20., 20., 30., 30.],
        [1, 3, 4],
    )?;
    let scores = Tensor::from_vec(vec![0.8f32, 0.9, 0.7], [1, 1, 3])?;
    let max_out = Tensor::from_vec(vec![10i64], [1])?;
    let iou = Tensor::from_vec(vec![0.5f32], [1])?;
    let m = model(
        node("NonMaxSuppression", &["b", "s", "m", "i"], &["y"], vec![]),
        &[
            ("b", elem::FLOAT),
            ("s", elem::FLOAT),
            ("m", elem::INT64),
            ("i", elem::FLOAT),
        ],
        &[("y", elem::INT64)],
    )?;
    let y = m
        .run(&[("b", boxes), ("s", scores), ("m", max_out), ("i", iou)])?
        .remove(0)
        .1;
    assert_eq!(y.dims(), &[2, 3]);
    assert_eq!(y.to_vec::<i64>()?, vec![0, 0, 1, 0, 0, 2]);
    Ok(())
}

#[test]
fn grid_sample_and_col2im_give_hand_computed_values() -> might::Result<()> {
    // bilinear, align_corners: the grid's centre point of a 2x2 image is the mean
    let x = Tensor::from_vec(vec![1f32, 2., 3., 4.], [1, 1, 2, 2])?;
    let g = Tensor::from_vec(vec![0f32, 0., -1., -1.], [1, 1, 2, 2])?;
    let m = model(
        node(
            "GridSample",
            &["x", "g"],
            &["y"],
            vec![int("align_corners", 1)],
        ),
        &[("x", elem::FLOAT), ("g", elem::FLOAT)],
        &[("y", elem::FLOAT)],
    )?;
    let y = m.run(&[("x", x), ("g", g)])?.remove(0).1;
    assert_eq!(y.to_vec::<f32>()?, vec![2.5, 1.0]);
    // 1-D col2im of two overlapping length-2 blocks (stride 1) into length 3: the middle
    // element sums both
    let cols = Tensor::from_vec(vec![1f32, 10., 2., 20.], [1, 2, 2])?;
    let img = Tensor::from_vec(vec![1i64, 3], [2])?;
    let blk = Tensor::from_vec(vec![1i64, 2], [2])?;
    let m = model(
        node("Col2Im", &["x", "i", "b"], &["y"], vec![]),
        &[("x", elem::FLOAT), ("i", elem::INT64), ("b", elem::INT64)],
        &[("y", elem::FLOAT)],
    )?;
    let y = m.run(&[("x", cols), ("i", img), ("b", blk)])?.remove(0).1;
    assert_eq!(y.dims(), &[1, 1, 1, 3]);
    assert_eq!(y.to_vec::<f32>()?, vec![1., 12., 20.]);
    Ok(())
}

#[test]
fn malformed_arguments_are_errors_naming_the_operator() -> might::Result<()> {
    let f = |d: &[usize]| Tensor::zeros(d.to_vec(), might::DType::F32);
    let i = |v: Vec<i64>| Tensor::from_vec(v.clone(), [v.len()]);
    let out = [("y", elem::FLOAT)];
    let e = run_err(
        node("GridSample", &["x", "g"], &["y"], vec![]),
        vec![("x", f(&[1, 1, 2, 2])?), ("g", f(&[1, 2, 2, 3])?)],
        &out,
    );
    assert!(e.contains("GridSample"), "{e}");
    let e = run_err(
        node(
            "Col2Im",
            &["x", "i", "b"],
            &["y"],
            vec![ints("strides", &[0, 1])],
        ),
        vec![
            ("x", f(&[1, 2, 2])?),
            ("i", i(vec![1, 3])?),
            ("b", i(vec![1, 2])?),
        ],
        &out,
    );
    assert!(e.contains("Col2Im"), "{e}");
    let e = run_err(
        node(
            "MaxUnpool",
            &["x", "i"],
            &["y"],
            vec![ints("kernel_shape", &[2])],
        ),
        vec![
            ("x", f(&[1, 1, 2])?),
            ("i", Tensor::from_vec(vec![0i64, 99], [1, 1, 2])?),
        ],
        &out,
    );
    assert!(e.contains("MaxUnpool") && e.contains("99"), "{e}");
    let e = run_err(
        node("RotaryEmbedding", &["x", "c", "s"], &["y"], vec![]),
        vec![
            ("x", f(&[1, 2, 4])?),
            ("c", f(&[2, 2])?),
            ("s", f(&[2, 2])?),
        ],
        &out,
    );
    assert!(
        e.contains("RotaryEmbedding") && e.contains("num_heads"),
        "{e}"
    );
    let e = run_err(
        node("Unique", &["x"], &["y"], vec![int("axis", 3)]),
        vec![("x", f(&[2, 2])?)],
        &out,
    );
    assert!(e.contains("Unique"), "{e}");
    let e = run_err(
        node(
            "BitCast",
            &["x"],
            &["y"],
            vec![int("to", elem::INT64 as i64)],
        ),
        vec![("x", f(&[2])?)],
        &out,
    );
    assert!(e.contains("BitCast") && e.contains("size"), "{e}");
    let e = run_err(
        node("DFT", &["x"], &["y"], vec![]),
        vec![("x", f(&[4, 3])?)],
        &out,
    );
    assert!(e.contains("DFT"), "{e}");
    Ok(())
}
