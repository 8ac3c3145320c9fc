//! PyTorch parity for the core ops: values and gradients recorded by
//! `tests/fixtures/gen_core.py` (PyTorch is not needed to run this test).

mod common;

use might::{DType, Device, Result, Tensor};
use serde_json::Value;

fn fixture() -> Value {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/core.json"
    );
    serde_json::from_str(&std::fs::read_to_string(p).expect("fixture core.json")).unwrap()
}

fn shape(v: &Value) -> Vec<usize> {
    v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect()
}

fn num(v: &Value) -> f64 {
    match v {
        Value::String(s) => match s.as_str() {
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            _ => f64::NAN,
        },
        v => v.as_f64().unwrap(),
    }
}

fn decode(v: &Value, dev: Device) -> Tensor {
    let s = shape(v);
    let d = v["data"].as_array().unwrap();
    match v["dtype"].as_str().unwrap() {
        "bool" => Tensor::from_vec(d.iter().map(|x| x.as_bool().unwrap()).collect(), s),
        "int64" => Tensor::from_vec(d.iter().map(|x| x.as_i64().unwrap()).collect(), s),
        _ => Tensor::from_vec(d.iter().map(num).collect::<Vec<f64>>(), s),
    }
    .and_then(|t| t.to_device(dev))
    .unwrap()
}

/// Same input, but seen through a transposed view of transposed storage (non-contiguous).
fn as_transposed_view(t: &Tensor) -> Tensor {
    let c = t.transpose(-2, -1).unwrap().contiguous().unwrap();
    c.transpose(-2, -1).unwrap()
}

fn dims(args: &Value) -> Vec<isize> {
    args["dims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_i64().unwrap() as isize)
        .collect()
}

fn run(op: &str, a: &Value, x: &[Tensor]) -> Result<(Tensor, Option<Tensor>)> {
    let int = |k: &str| a[k].as_i64().unwrap() as isize;
    let f = |k: &str| a[k].as_f64().unwrap();
    let keep = || a["keepdim"].as_bool().unwrap_or(false);
    let one = |t: Result<Tensor>| t.map(|t| (t, None));
    match op {
        "neg" => one(x[0].neg()),
        "abs" => one(x[0].abs()),
        "exp" => one(x[0].exp()),
        "log" => one(x[0].log()),
        "log1p" => one(x[0].log1p()),
        "sqrt" => one(x[0].sqrt()),
        "rsqrt" => one(x[0].rsqrt()),
        "sin" => one(x[0].sin()),
        "cos" => one(x[0].cos()),
        "tanh" => one(x[0].tanh()),
        "sigmoid" => one(x[0].sigmoid()),
        "relu" => one(x[0].relu()),
        "gelu" => one(x[0].gelu()),
        "gelu_tanh" => one(x[0].gelu_tanh()),
        "silu" => one(x[0].silu()),
        "softplus" => one(x[0].softplus()),
        "square" => one(x[0].square()),
        "powf" => one(x[0].powf(f("p"))),
        "clamp" => one(x[0].clamp(Some(f("min")), Some(f("max")))),
        "sign" => one(x[0].sign()),
        "floor" => one(x[0].floor()),
        "round" => one(x[0].round()),
        "affine" => one(x[0].affine(f("mul"), f("add"))),
        "add" => one(x[0].add(&x[1])),
        "sub" => one(x[0].sub(&x[1])),
        "mul" => one(x[0].mul(&x[1])),
        "div" => one(x[0].div(&x[1])),
        "pow" => one(x[0].pow(&x[1])),
        "maximum" => one(x[0].maximum(&x[1])),
        "minimum" => one(x[0].minimum(&x[1])),
        "eq" => one(x[0].eq(&x[1])),
        "ne" => one(x[0].ne(&x[1])),
        "lt" => one(x[0].lt(&x[1])),
        "le" => one(x[0].le(&x[1])),
        "gt" => one(x[0].gt(&x[1])),
        "ge" => one(x[0].ge(&x[1])),
        "where" => one(Tensor::where_(&x[0], &x[1], &x[2])),
        "masked_fill" => one(x[0].masked_fill(&x[1], f("value"))),
        "sum" => one(x[0].sum_dims(&dims(a), keep())),
        "mean" => one(x[0].mean_dims(&dims(a), keep())),
        "var" => one(x[0].var_dims(&dims(a), a["correction"].as_u64().unwrap() as usize, keep())),
        "std" => one(x[0].std_dims(&dims(a), a["correction"].as_u64().unwrap() as usize, keep())),
        "sum_all" => one(x[0].sum_all()),
        "mean_all" => one(x[0].mean_all()),
        "max" => x[0].max(int("dim"), keep()).map(|(v, i)| (v, Some(i))),
        "min" => x[0].min(int("dim"), keep()).map(|(v, i)| (v, Some(i))),
        "argmax" => one(x[0].argmax(int("dim"), keep())),
        "argmin" => one(x[0].argmin(int("dim"), keep())),
        "prod" => one(x[0].prod(int("dim"), keep())),
        "logsumexp" => one(x[0].logsumexp(int("dim"), keep())),
        "softmax" => one(x[0].softmax(int("dim"))),
        "log_softmax" => one(x[0].log_softmax(int("dim"))),
        "max_all" => one(x[0].max_all()),
        "all" => one(x[0].all()),
        "any" => one(x[0].any()),
        "matmul" => one(x[0].matmul(&x[1])),
        "index_select" => one(x[0].index_select(int("dim"), &x[1])),
        "gather" => one(x[0].gather(int("dim"), &x[1])),
        "scatter_add" => one(x[0].scatter_add(int("dim"), &x[1], &x[2])),
        "cat" => one(Tensor::cat(x, int("dim"))),
        "stack" => one(Tensor::stack(x, int("dim"))),
        "one_hot" => one(x[0].one_hot(a["num_classes"].as_u64().unwrap() as usize)),
        "embedding" => one(Tensor::embedding(&x[0], &x[1])),
        "tril" => one(x[0].tril(a["diagonal"].as_i64().unwrap())),
        "triu" => one(x[0].triu(a["diagonal"].as_i64().unwrap())),
        "permute" => one(x[0].permute(&dims(a))),
        "slice" => one(x[0].slice(
            int("dim"),
            int("start"),
            int("end"),
            a["step"].as_u64().unwrap() as usize,
        )),
        "select" => one(x[0].select(int("dim"), int("index"))),
        "expand" => one(x[0].expand(shape(a))),
        "reshape" => one(x[0].reshape(shape(a))),
        other => panic!("fixture op {other} not wired"),
    }
}

fn close(name: &str, what: &str, got: &Tensor, want: &Value) {
    let ws = shape(want);
    assert_eq!(got.dims(), ws.as_slice(), "{name}: {what} shape");
    let w: Vec<f64> = want["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| match v {
            Value::Bool(b) => *b as i64 as f64,
            v => num(v),
        })
        .collect();
    let g = got.to_f64_vec();
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-9 + 1e-7 * b.abs();
        assert!(ok, "{name}: {what}[{i}] = {a} vs torch {b}");
    }
}

device_tests!(
    ; f64:
    core_ops_match_pytorch,
);

fn core_ops_match_pytorch(dev: Device) -> Result<()> {
    let fx = fixture();
    let cases = fx["cases"].as_array().unwrap();
    let mut checked_grads = 0;
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let transposed: Vec<usize> = c["transposed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        let wants_grad = c.get("grads").is_some();
        let leaves: Vec<Tensor> = c["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                let t = decode(v, dev);
                if wants_grad && t.dtype() == DType::F64 {
                    t.with_requires_grad()
                } else {
                    t
                }
            })
            .collect();
        let xs: Vec<Tensor> = leaves
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if transposed.contains(&i) {
                    as_transposed_view(t)
                } else {
                    t.clone()
                }
            })
            .collect();
        if transposed
            .iter()
            .any(|&i| xs[i].rank() >= 2 && xs[i].dims()[xs[i].rank() - 1] > 1)
        {
            assert!(
                !xs[transposed[0]].is_contiguous() || xs[transposed[0]].numel() <= 1,
                "{name}"
            );
        }
        let (out, out2) = run(c["op"].as_str().unwrap(), &c["args"], &xs)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(out.device(), dev, "{name}: output device");
        close(name, "output", &out, &c["output"]);
        if let (Some(o2), Some(w2)) = (out2, c.get("output2")) {
            close(name, "indices", &o2, w2);
        }
        if let Some(grads) = c.get("grads") {
            let n = out.numel();
            let w: Vec<f64> = (0..n).map(|i| 0.5 + ((i * 7) % 11) as f64 * 0.3).collect();
            let w = Tensor::from_vec(w, out.shape())?.to_device(dev)?;
            out.backward_with_grad(&w)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            for (k, gw) in grads.as_array().unwrap().iter().enumerate() {
                if gw.is_null() {
                    continue;
                }
                let g = leaves[k]
                    .grad()
                    .unwrap_or_else(|| Tensor::zeros(leaves[k].shape(), DType::F64).unwrap());
                assert_eq!(g.device(), dev, "{name}: grad[{k}] device");
                close(name, &format!("grad[{k}]"), &g, gw);
                checked_grads += 1;
            }
        }
    }
    assert!(
        cases.len() > 150 && checked_grads > 150,
        "{} cases, {checked_grads} grads",
        cases.len()
    );
    Ok(())
}
