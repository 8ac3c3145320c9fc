//! `might run`, `might inspect MODEL.onnx` and `might onnx-test` on a model built here.
#![cfg(feature = "onnx")]

use might::onnx::elem;
use might::onnx::proto::{
    type_proto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use might::Tensor;
use prost::Message;
use std::path::Path;
use std::process::{Command, Output};

fn might(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_might"))
        .args(args)
        .output()
        .expect("run might")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn info(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem::FLOAT),
                shape: Some(TensorShapeProto::default()),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `y = relu(x) + b`, b = [1, 2, 3].
fn write_model(path: &Path) {
    let node = |op: &str, ins: &[&str], out: &str| NodeProto {
        op_type: Some(op.into()),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        ..Default::default()
    };
    let m = ModelProto {
        ir_version: Some(8),
        producer_name: Some("onnx_cli test".into()),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            node: vec![node("Relu", &["x"], "r"), node("Add", &["r", "b"], "y")],
            input: vec![info("x")],
            output: vec![info("y")],
            initializer: vec![TensorProto {
                name: Some("b".into()),
                dims: vec![3],
                data_type: Some(elem::FLOAT),
                float_data: vec![1.0, 2.0, 3.0],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    std::fs::write(path, m.encode_to_vec()).unwrap();
}

fn tensor_pb(v: &[f32]) -> Vec<u8> {
    TensorProto {
        dims: vec![v.len() as i64],
        data_type: Some(elem::FLOAT),
        float_data: v.to_vec(),
        ..Default::default()
    }
    .encode_to_vec()
}

#[test]
fn run_writes_outputs_and_inspect_describes_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    write_model(&model);
    let x = dir.path().join("x.npy");
    might::io::npy::save(&x, &Tensor::from_vec(vec![-1f32, 0.5, 2.0], [3]).unwrap()).unwrap();
    let out = dir.path().join("out");
    let o = might(&[
        "run",
        model.to_str().unwrap(),
        "--input",
        &format!("x={}", x.display()),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("y: float32 [3]"), "{}", text(&o));
    let y = might::io::npy::load(out.join("y.npy")).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![1.0, 2.5, 5.0]);
    // a one-input model also takes the file alone
    let o = might(&[
        "run",
        model.to_str().unwrap(),
        "--input",
        x.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    // a wrong input name: one clear line, exit 1
    let o = might(&[
        "run",
        model.to_str().unwrap(),
        "--input",
        &format!("z={}", x.display()),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("missing input 'x'"), "{}", text(&o));

    let o = might(&["inspect", model.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    for want in [
        "opset 17",
        "from onnx_cli test",
        "x: float",
        "Relu",
        "Add",
        "parameters: 3",
    ] {
        assert!(t.contains(want), "no {want:?} in {t}");
    }
    let o = might(&["inspect", model.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["parameters"], 3);
    assert_eq!(v["ops"]["Relu"], 1);
}

#[test]
fn onnx_test_reports_pass_and_fail_per_case_and_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    for (case, want) in [
        ("test_good", [1.0f32, 2.5, 5.0]),
        ("test_bad", [1.0, 2.5, 6.0]),
    ] {
        let d = dir.path().join(case);
        std::fs::create_dir_all(d.join("test_data_set_0")).unwrap();
        write_model(&d.join("model.onnx"));
        std::fs::write(
            d.join("test_data_set_0/input_0.pb"),
            tensor_pb(&[-1.0, 0.5, 2.0]),
        )
        .unwrap();
        std::fs::write(d.join("test_data_set_0/output_0.pb"), tensor_pb(&want)).unwrap();
    }
    let o = might(&["onnx-test", dir.path().to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("PASS        test_good"), "{t}");
    assert!(
        t.contains("FAIL        test_bad: y[2] = 5 (expected 6)"),
        "{t}"
    );
    assert!(
        t.contains("onnx node tests: 1 passed, 1 failed, 0 unsupported of 2"),
        "{t}"
    );
    // listed as an expected failure: the run passes
    let list = dir.path().join("expected.txt");
    std::fs::write(&list, "test_bad  # a wrong expected output\n").unwrap();
    let o = might(&[
        "onnx-test",
        dir.path().to_str().unwrap(),
        "--expected-failures",
        list.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
}
