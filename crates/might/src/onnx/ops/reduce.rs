//! Reductions, arg-reductions and the softmax family.

use super::{axis, one, opt, req, same, Node, OpFn};
use crate::onnx::value::{ints, Value};
use crate::{DType, Result, Tensor};

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "ReduceSum" => |n, i| reduce(n, i, Red::Sum),
        "ReduceMean" => |n, i| reduce(n, i, Red::Mean),
        "ReduceMax" => |n, i| reduce(n, i, Red::Max),
        "ReduceMin" => |n, i| reduce(n, i, Red::Min),
        "ReduceProd" => |n, i| reduce(n, i, Red::Prod),
        "ReduceL1" => |n, i| reduce(n, i, Red::L1),
        "ReduceL2" => |n, i| reduce(n, i, Red::L2),
        "ReduceLogSum" => |n, i| reduce(n, i, Red::LogSum),
        "ReduceLogSumExp" => |n, i| reduce(n, i, Red::LogSumExp),
        "ReduceSumSquare" => |n, i| reduce(n, i, Red::SumSquare),
        "ArgMax" => |n, i| arg(n, i, true),
        "ArgMin" => |n, i| arg(n, i, false),
        "Softmax" => |n, i| softmax(n, i, 0),
        "LogSoftmax" => |n, i| softmax(n, i, 1),
        "Hardmax" => |n, i| softmax(n, i, 2),
        _ => return None,
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Red {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

fn reduce(n: &Node, ins: &[Option<Value>], red: Red) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let r = x.dims().len();
    let from = if red == Red::Sum { 13 } else { 18 };
    let axes = if n.opset >= from {
        opt(ins, 1).map(ints).transpose()?
    } else {
        n.ints("axes")
    };
    let keep = n.i("keepdims", 1) != 0;
    let axes: Vec<usize> = match axes {
        Some(a) if !a.is_empty() => {
            let mut v: Vec<usize> = a.iter().map(|&a| axis(n, a, r)).collect::<Result<_>>()?;
            v.sort_unstable();
            v.dedup();
            v
        }
        _ if n.i("noop_with_empty_axes", 0) != 0 => return Ok(vec![x.clone()]),
        _ => (0..r).collect(),
    };
    let float = x.tensor.dtype().is_float();
    let t = if float {
        x.tensor.clone()
    } else {
        x.tensor.to_dtype(DType::F64)?
    };
    let mut out_dims: Vec<usize> = Vec::new();
    for (d, &s) in x.dims().iter().enumerate() {
        if !axes.contains(&d) {
            out_dims.push(s);
        } else if keep {
            out_dims.push(1);
        }
    }
    let empty = axes.iter().any(|&d| x.dims()[d] == 0);
    let y = if empty {
        let boolean = x.tensor.dtype() == DType::Bool;
        let v = match red {
            Red::Max if boolean => 0.0,
            Red::Min if boolean => 1.0,
            Red::Max | Red::LogSum | Red::LogSumExp => f64::NEG_INFINITY,
            Red::Min => f64::INFINITY,
            Red::Prod => 1.0,
            Red::Mean => f64::NAN,
            _ => 0.0,
        };
        Tensor::full_on(out_dims.clone(), v, t.dtype(), t.device())?
    } else {
        let dims: Vec<isize> = axes.iter().map(|&d| d as isize).collect();
        let each = |t: &Tensor, f: &dyn Fn(&Tensor, isize) -> Result<Tensor>| -> Result<Tensor> {
            let mut t = t.clone();
            for &d in dims.iter().rev() {
                t = f(&t, d)?;
            }
            Ok(t)
        };
        let y = match red {
            Red::Sum => t.sum_dims(&dims, true)?,
            Red::Mean => t.mean_dims(&dims, true)?,
            Red::Max => each(&t, &|t, d| Ok(t.max(d, true)?.0))?,
            Red::Min => each(&t, &|t, d| Ok(t.min(d, true)?.0))?,
            Red::Prod => each(&t, &|t, d| t.prod(d, true))?,
            Red::L1 => t.abs()?.sum_dims(&dims, true)?,
            Red::L2 => t.square()?.sum_dims(&dims, true)?.sqrt()?,
            Red::LogSum => t.sum_dims(&dims, true)?.log()?,
            Red::LogSumExp => {
                let m = each(&t, &|t, d| Ok(t.max(d, true)?.0))?;
                // all -inf rows stay -inf instead of NaN
                let finite = Tensor::where_(
                    &m.abs()?.eq_scalar(f64::INFINITY)?,
                    &Tensor::zeros_on((), m.dtype(), m.device())?,
                    &m,
                )?;
                t.sub(&finite)?
                    .exp()?
                    .sum_dims(&dims, true)?
                    .log()?
                    .add(&finite)?
            }
            Red::SumSquare => t.square()?.sum_dims(&dims, true)?,
        };
        y.reshape(out_dims)?
    };
    let y = if float {
        y
    } else {
        y.round()?.to_dtype(x.tensor.dtype())?
    };
    same(y, x)
}

fn arg(n: &Node, ins: &[Option<Value>], max: bool) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let a = axis(n, n.i("axis", 0), x.dims().len())?;
    let keep = n.i("keepdims", 1) != 0;
    let last = n.i("select_last_index", 0) != 0;
    let len = x.dims()[a];
    let t = if x.tensor.dtype().is_float() {
        x.tensor.clone()
    } else {
        x.tensor.to_dtype(DType::F64)?
    };
    let t = if last {
        let rev: Vec<i64> = (0..len as i64).rev().collect();
        t.index_select(
            a as isize,
            &Tensor::from_vec(rev, [len])?.to_device(t.device())?,
        )?
    } else {
        t
    };
    let mut idx = if max {
        t.argmax(a as isize, keep)?
    } else {
        t.argmin(a as isize, keep)?
    };
    if last {
        idx = idx.affine(-1.0, len as f64 - 1.0)?;
    }
    one(idx)
}

fn softmax(n: &Node, ins: &[Option<Value>], kind: u8) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let r = x.dims().len();
    let old = n.opset < 13;
    let a = axis(n, n.i("axis", if old { 1 } else { -1 }), r)?;
    // before opset 13 the input is seen as 2-D [prod(dims[..axis]), prod(dims[axis..])]
    let t = if old {
        let outer: usize = x.dims()[..a].iter().product();
        x.tensor.reshape([outer, x.tensor.numel() / outer.max(1)])?
    } else {
        x.tensor.clone()
    };
    let ax = if old { 1 } else { a as isize };
    let y = match kind {
        0 => t.softmax(ax)?,
        1 => t.log_softmax(ax)?,
        _ => {
            let i = t.argmax(ax, true)?;
            let len = t.dims()[ax as usize];
            let pos = Tensor::arange(0.0, len as f64, 1.0, DType::I64)?.to_device(t.device())?;
            let mut sh = vec![1; t.rank()];
            sh[ax as usize] = len;
            pos.reshape(sh)?.eq(&i)?.to_dtype(t.dtype())?
        }
    };
    same(y.reshape(x.dims())?, x)
}
