//! `might::onnx`: models built here with the protobuf types, run, and checked against the same
//! computation written with might's ops or by hand; hostile files and wrong inputs give errors.
#![cfg(feature = "onnx")]

use might::onnx::proto::{
    attribute_proto::AttributeType, tensor_proto::DataLocation, tensor_shape_proto, type_proto,
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use might::onnx::{elem, Model};
use might::{DType, ErrorKind, Tensor};
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

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Ints as i32),
        ints: v.to_vec(),
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

fn string(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::String as i32),
        s: Some(v.as_bytes().to_vec()),
        ..Default::default()
    }
}

fn floats(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(elem::FLOAT),
        raw_data: Some(v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        ..Default::default()
    }
}

fn int64s(name: &str, v: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: vec![v.len() as i64],
        data_type: Some(elem::INT64),
        int64_data: v.to_vec(),
        ..Default::default()
    }
}

fn info(name: &str, e: i32, dims: &[i64]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| tensor_shape_proto::Dimension {
            value: Some(if d < 0 {
                tensor_shape_proto::dimension::Value::DimParam("batch".into())
            } else {
                tensor_shape_proto::dimension::Value::DimValue(d)
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(e),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn model(
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    inits: Vec<TensorProto>,
) -> Vec<u8> {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            node: nodes,
            input: inputs,
            output: outputs,
            initializer: inits,
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

fn seq(n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) * scale)
        .collect()
}

/// A small CNN classifier, as torch.onnx.export writes one: Conv (+bias) -> Relu ->
/// MaxPool -> Flatten -> Gemm (transB) -> Softmax; against the same model in might ops.
#[test]
fn a_small_cnn_matches_the_same_model_written_with_might_ops() -> might::Result<()> {
    let (w, b) = (seq(36, 0.1), seq(4, 0.05));
    let (fw, fb) = (seq(10 * 4 * 3 * 3, 0.02), seq(10, 0.01));
    let bytes = model(
        vec![
            node(
                "Conv",
                &["x", "w", "b"],
                &["c"],
                vec![ints("kernel_shape", &[3, 3]), ints("pads", &[1, 1, 1, 1])],
            ),
            node("Relu", &["c"], &["r"], vec![]),
            node(
                "MaxPool",
                &["r"],
                &["p"],
                vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
            ),
            node("Flatten", &["p"], &["f"], vec![int("axis", 1)]),
            node("Gemm", &["f", "fw", "fb"], &["l"], vec![int("transB", 1)]),
            node("Softmax", &["l"], &["y"], vec![int("axis", -1)]),
        ],
        vec![info("x", elem::FLOAT, &[-1, 1, 6, 6])],
        vec![info("y", elem::FLOAT, &[-1, 10])],
        vec![
            floats("w", &[4, 1, 3, 3], &w),
            floats("b", &[4], &b),
            floats("fw", &[10, 36], &fw),
            floats("fb", &[10], &fb),
        ],
    );
    let m = Model::from_bytes(&bytes)?;
    assert_eq!(m.parameter_count(), 36 + 4 + 360 + 10);
    // Conv -> Relu runs as one fused conv (onnx/fuse.rs)
    assert_eq!(m.node_count(), 5);
    assert!(!m.ops_used().contains_key("Relu"));
    assert_eq!(m.inputs()[0].dims, vec!["batch", "1", "6", "6"]);
    let x = Tensor::from_vec(seq(2 * 36, 0.3), [2, 1, 6, 6])?;
    let out = m.run(&[("x", x.clone())])?;
    assert_eq!(out[0].0, "y");
    let y = &out[0].1;
    assert_eq!(y.dims(), &[2, 10]);

    let wt = Tensor::from_vec(w, [4, 1, 3, 3])?;
    let bt = Tensor::from_vec(b, [4])?;
    let h = x
        .conv2d(&wt, Some(&bt), [1, 1], [1, 1], [1, 1], 1)?
        .relu()?
        .max_pool2d([2, 2], [2, 2], [0, 0])?;
    let h = h.reshape([2, 36])?;
    let fwt = Tensor::from_vec(fw, [10, 36])?;
    let want = h
        .matmul(&fwt.t()?)?
        .add(&Tensor::from_vec(fb, [10])?)?
        .softmax(-1)?;
    let (g, w) = (y.to_vec::<f32>()?, want.to_vec::<f32>()?);
    for (a, b) in g.iter().zip(&w) {
        assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    }
    for row in g.chunks(10) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }
    Ok(())
}

/// A residual block as torch.onnx.export writes one: `Conv → Relu`, `Conv → Add(x) → Relu`
/// (fused into one conv with the residual as a fourth input), a `Conv → Add` whose other
/// operand broadcasts (fused too; at run time it is added apart, broadcasting) and a 1-D
/// `Conv → Add`; against the same computation in might ops.
#[test]
fn residual_blocks_fuse_the_add_into_the_conv() -> might::Result<()> {
    let (w1, b1, w2) = (
        seq(32 * 32 * 9, 0.01),
        seq(32, 0.05),
        seq(32 * 32 * 9, 0.02),
    );
    let (w3, b3, rb) = (seq(32 * 32 * 9, 0.015), seq(32, 0.1), seq(32, 0.3));
    let (wz, bz) = (seq(4 * 4 * 3, 0.2), seq(4, 0.1));
    let conv3 = |ins: &[&str], out: &str| {
        let attrs = vec![ints("kernel_shape", &[3, 3]), ints("pads", &[1, 1, 1, 1])];
        node("Conv", ins, &[out], attrs)
    };
    let bytes = model(
        vec![
            conv3(&["x", "w1", "b1"], "c1"),
            node("Relu", &["c1"], &["r1"], vec![]),
            conv3(&["r1", "w2"], "c2"),
            node("Add", &["c2", "x"], &["s"], vec![]),
            node("Relu", &["s"], &["y1"], vec![]),
            conv3(&["y1", "w3", "b3"], "c3"),
            node("Add", &["rb", "c3"], &["y2"], vec![]),
            node(
                "Conv",
                &["z", "wz", "bz"],
                &["cz"],
                vec![ints("kernel_shape", &[3]), ints("pads", &[1, 1])],
            ),
            node("Add", &["cz", "z"], &["y3"], vec![]),
        ],
        vec![
            info("x", elem::FLOAT, &[1, 32, 14, 14]),
            info("z", elem::FLOAT, &[2, 4, 9]),
        ],
        vec![info("y2", elem::FLOAT, &[]), info("y3", elem::FLOAT, &[])],
        vec![
            floats("w1", &[32, 32, 3, 3], &w1),
            floats("b1", &[32], &b1),
            floats("w2", &[32, 32, 3, 3], &w2),
            floats("w3", &[32, 32, 3, 3], &w3),
            floats("b3", &[32], &b3),
            floats("rb", &[1, 32, 1, 1], &rb),
            floats("wz", &[4, 4, 3], &wz),
            floats("bz", &[4], &bz),
        ],
    );
    let m = Model::from_bytes(&bytes)?;
    // four convs, each with its ReLU and add
    assert_eq!(m.node_count(), 4);
    assert!(!m.ops_used().contains_key("Relu") && !m.ops_used().contains_key("Add"));
    let x = Tensor::from_vec(seq(32 * 14 * 14, 0.1), [1, 32, 14, 14])?;
    let z = Tensor::from_vec(seq(2 * 4 * 9, 0.25), [2, 4, 9])?;
    let out = m.run(&[("x", x.clone()), ("z", z.clone())])?;
    let t = |v: &[f32], s: &[usize]| Tensor::from_slice(v, s);
    let (p1, ws) = ([1, 1], [32, 32, 3, 3]);
    let r1 = x
        .conv2d(&t(&w1, &ws)?, Some(&t(&b1, &[32])?), p1, p1, p1, 1)?
        .relu()?;
    let y1 = r1
        .conv2d(&t(&w2, &ws)?, None, p1, p1, p1, 1)?
        .add(&x)?
        .relu()?;
    let c3 = y1.conv2d(&t(&w3, &ws)?, Some(&t(&b3, &[32])?), p1, p1, p1, 1)?;
    let y2 = t(&rb, &[1, 32, 1, 1])?.add(&c3)?;
    let cz = z.conv1d(&t(&wz, &[4, 4, 3])?, Some(&t(&bz, &[4])?), 1, 1, 1, 1)?;
    let y3 = cz.add(&z)?;
    for ((name, got), want) in out.iter().zip([y2, y3]) {
        assert_eq!(got.dims(), want.dims(), "{name}");
        let (g, w) = (got.to_vec::<f32>()?, want.to_vec::<f32>()?);
        assert!(w.iter().any(|&v| v < 0.0), "{name}: some negative sums");
        for (a, b) in g.iter().zip(&w) {
            assert!((a - b).abs() < 1e-5 * (1.0 + b.abs()), "{name}: {a} vs {b}");
        }
    }
    Ok(())
}

/// Hand-computed values for a few operators with fiddly semantics.
#[test]
fn operators_give_hand_computed_values() -> might::Result<()> {
    let one = |n: NodeProto,
               ins: Vec<ValueInfoProto>,
               inits: Vec<TensorProto>,
               feeds: Vec<(&str, Tensor)>|
     -> might::Result<Tensor> {
        let out = n.output[0].clone();
        let m = Model::from_bytes(&model(
            vec![n],
            ins,
            vec![info(&out, elem::FLOAT, &[])],
            inits,
        ))?;
        Ok(m.run(&feeds)?.remove(0).1)
    };
    let x = Tensor::from_vec(vec![1f32, 2., 3., 4.], [1, 4])?;
    // reflect padding: [3, 2 | 1 2 3 4 | 3]
    let y = one(
        node(
            "Pad",
            &["x", "pads"],
            &["y"],
            vec![string("mode", "reflect")],
        ),
        vec![info("x", elem::FLOAT, &[1, 4])],
        vec![int64s("pads", &[0, 2, 0, 1])],
        vec![("x", x.clone())],
    )?;
    assert_eq!(y.to_vec::<f32>()?, vec![3., 2., 1., 2., 3., 4., 3.]);
    // top-2, largest first, indices as int64
    let m = Model::from_bytes(&model(
        vec![node("TopK", &["x", "k"], &["v", "i"], vec![])],
        vec![info("x", elem::FLOAT, &[1, 4])],
        vec![info("v", elem::FLOAT, &[]), info("i", elem::INT64, &[])],
        vec![int64s("k", &[2])],
    ))?;
    let out = m.run(&[("x", Tensor::from_vec(vec![3f32, 9., 1., 9.], [1, 4])?)])?;
    assert_eq!(out[0].1.to_vec::<f32>()?, vec![9., 9.]);
    assert_eq!(out[1].1.to_vec::<i64>()?, vec![1, 3]);
    // nearest resize x2 (asymmetric, floor): each element twice
    let y = one(
        node(
            "Resize",
            &["x", "", "scales"],
            &["y"],
            vec![
                string("coordinate_transformation_mode", "asymmetric"),
                string("nearest_mode", "floor"),
            ],
        ),
        vec![info("x", elem::FLOAT, &[1, 4])],
        vec![floats("scales", &[2], &[1.0, 2.0])],
        vec![("x", x.clone())],
    )?;
    assert_eq!(y.to_vec::<f32>()?, vec![1., 1., 2., 2., 3., 3., 4., 4.]);
    // einsum as a matrix product: [1,4] x [4,1]
    let y = one(
        node(
            "Einsum",
            &["x", "z"],
            &["y"],
            vec![string("equation", "ij,jk->ik")],
        ),
        vec![
            info("x", elem::FLOAT, &[1, 4]),
            info("z", elem::FLOAT, &[4, 1]),
        ],
        vec![],
        vec![
            ("x", x.clone()),
            ("z", Tensor::from_vec(vec![1f32, 1., 1., 1.], [4, 1])?),
        ],
    )?;
    assert_eq!(y.to_vec::<f32>()?, vec![10.]);
    // cumulative sum, exclusive and reversed: [9, 7, 4, 0]
    let y = one(
        node(
            "CumSum",
            &["x", "axis"],
            &["y"],
            vec![int("exclusive", 1), int("reverse", 1)],
        ),
        vec![info("x", elem::FLOAT, &[1, 4])],
        vec![int64s("axis", &[1])],
        vec![("x", x)],
    )?;
    assert_eq!(y.to_vec::<f32>()?, vec![9., 7., 4., 0.]);
    Ok(())
}

/// int32 arithmetic wraps in 32 bits, as ONNX (and C) do, though might holds it as i64.
#[test]
fn int32_results_wrap_in_their_own_width() -> might::Result<()> {
    let t = |name: &str, v: i32| TensorProto {
        name: Some(name.into()),
        dims: vec![1],
        data_type: Some(elem::INT32),
        int32_data: vec![v],
        ..Default::default()
    };
    let m = Model::from_bytes(&model(
        vec![node("Add", &["a", "b"], &["y"], vec![])],
        vec![],
        vec![info("y", elem::INT32, &[1])],
        vec![t("a", i32::MAX), t("b", 1)],
    ))?;
    let y = m.run(&[])?.remove(0).1;
    assert_eq!(y.to_vec::<i64>()?, vec![i32::MIN as i64]);
    Ok(())
}

#[test]
fn every_unsupported_operator_is_named_at_once_before_running() {
    let bytes = model(
        vec![
            node("FooOp", &["x"], &["a"], vec![]),
            node("Relu", &["a"], &["b"], vec![]),
            node("BarOp", &["b"], &["c"], vec![]),
            node("BarOp", &["c"], &["y"], vec![]),
        ],
        vec![info("x", elem::FLOAT, &[1])],
        vec![info("y", elem::FLOAT, &[1])],
        vec![],
    );
    let e = Model::from_bytes(&bytes)
        .err()
        .expect("unsupported ops are refused");
    assert_eq!(e.kind, ErrorKind::Unsupported);
    assert!(
        e.msg.contains("unsupported operators: BarOp (x2), FooOp"),
        "{}",
        e.msg
    );
}

#[test]
fn malformed_files_and_tensors_are_refused_with_a_message() {
    let e = Model::from_bytes(b"\x0a\xff\xff\xff\xff\x0fnot a model")
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::Format);
    // raw data shorter than the dims promise: refused before anything is sized
    let bad = TensorProto {
        name: Some("w".into()),
        dims: vec![1 << 40, 1 << 20],
        data_type: Some(elem::FLOAT),
        raw_data: Some(vec![0; 16]),
        ..Default::default()
    };
    let bytes = model(
        vec![node("Relu", &["w"], &["y"], vec![])],
        vec![],
        vec![info("y", elem::FLOAT, &[])],
        vec![bad],
    );
    let e = Model::from_bytes(&bytes).err().unwrap();
    assert!(e.msg.contains("tensor 'w'"), "{}", e.msg);
    // an opset from the future
    let mut m = ModelProto::decode(model(vec![], vec![], vec![], vec![]).as_slice()).unwrap();
    m.opset_import[0].version = Some(99);
    let e = Model::from_bytes(&m.encode_to_vec()).err().unwrap();
    assert!(e.msg.contains("opset 99"), "{}", e.msg);
}

#[test]
fn external_data_is_read_beside_the_model_and_may_not_leave_its_folder() -> might::Result<()> {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = [0f32, 0., 1.5, -2.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    std::fs::write(dir.path().join("weights.bin"), &data).unwrap();
    let ext = |loc: &str| TensorProto {
        name: Some("w".into()),
        dims: vec![2],
        data_type: Some(elem::FLOAT),
        data_location: Some(DataLocation::External as i32),
        external_data: [("location", loc), ("offset", "8"), ("length", "8")]
            .iter()
            .map(|(k, v)| StringStringEntryProto {
                key: Some(k.to_string()),
                value: Some(v.to_string()),
            })
            .collect(),
        ..Default::default()
    };
    let write = |loc: &str| {
        let bytes = model(
            vec![node("Relu", &["w"], &["y"], vec![])],
            vec![],
            vec![info("y", elem::FLOAT, &[2])],
            vec![ext(loc)],
        );
        let p = dir.path().join("m.onnx");
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let m = Model::load(write("weights.bin"))?;
    assert_eq!(m.run(&[])?[0].1.to_vec::<f32>()?, vec![1.5, 0.0]);
    let e = Model::load(write("../weights.bin")).err().unwrap();
    assert!(e.msg.contains("leaves the model's folder"), "{}", e.msg);
    Ok(())
}

#[test]
fn inputs_are_checked_by_name_shape_and_type() -> might::Result<()> {
    let m = Model::from_bytes(&model(
        vec![node("Relu", &["x"], &["y"], vec![])],
        vec![info("x", elem::FLOAT, &[-1, 3])],
        vec![info("y", elem::FLOAT, &[-1, 3])],
        vec![],
    ))?;
    let e = m.run(&[]).err().unwrap();
    assert!(e.msg.contains("missing input 'x'"), "{}", e.msg);
    let e = m
        .run(&[("x", Tensor::zeros([2, 4], DType::F32)?)])
        .err()
        .unwrap();
    assert!(e.msg.contains("input 'x' has shape [2, 4]"), "{}", e.msg);
    let e = m
        .run(&[("x", Tensor::zeros([2, 3], DType::F64)?)])
        .err()
        .unwrap();
    assert!(
        e.msg
            .contains("input 'x' is float64, the model declares float"),
        "{}",
        e.msg
    );
    let e = m
        .run(&[
            ("x", Tensor::zeros([2, 3], DType::F32)?),
            ("z", Tensor::zeros([1], DType::F32)?),
        ])
        .err()
        .unwrap();
    assert!(e.msg.contains("unknown input 'z'"), "{}", e.msg);
    assert_eq!(
        m.run(&[("x", Tensor::zeros([5, 3], DType::F32)?)])?[0]
            .1
            .dims(),
        &[5, 3]
    );
    Ok(())
}

/// Shape arithmetic on weights (what exporters emit around every Reshape) runs once, at load.
#[test]
fn constant_subgraphs_are_folded_at_load() -> might::Result<()> {
    let m = Model::from_bytes(&model(
        vec![
            node("Shape", &["w"], &["s"], vec![]),
            node("Gather", &["s", "zero"], &["n"], vec![int("axis", 0)]),
            node("Unsqueeze", &["n", "zero1"], &["n1"], vec![]),
            node(
                "Concat",
                &["n1", "minus1"],
                &["shape"],
                vec![int("axis", 0)],
            ),
            node("Reshape", &["x", "shape"], &["y"], vec![]),
        ],
        vec![info("x", elem::FLOAT, &[6])],
        vec![info("y", elem::FLOAT, &[2, 3])],
        vec![
            floats("w", &[2, 5], &[0.0; 10]),
            TensorProto {
                name: Some("zero".into()),
                dims: vec![],
                data_type: Some(elem::INT64),
                int64_data: vec![0],
                ..Default::default()
            },
            int64s("zero1", &[0]),
            int64s("minus1", &[-1]),
        ],
    ))?;
    assert_eq!(
        m.node_count(),
        1,
        "only the Reshape of the input is left to run"
    );
    let y = m.run(&[("x", Tensor::from_vec(vec![1f32, 2., 3., 4., 5., 6.], [6])?)])?;
    assert_eq!(y[0].1.dims(), &[2, 3]);
    Ok(())
}
