//! PyTorch-like printing: nested brackets, aligned values, summarised (`...`) when large.

use crate::{DType, Tensor};
use std::fmt;

const SUMMARIZE_ABOVE: usize = 1000;
const EDGE: usize = 3;

fn fmt_value(v: f64, dtype: DType, all_int: bool) -> String {
    match dtype {
        DType::Bool => (if v != 0.0 { "True" } else { "False" }).into(),
        DType::I64 | DType::U8 => format!("{}", v as i64),
        _ if v.is_nan() => "nan".into(),
        _ if v.is_infinite() => (if v > 0.0 { "inf" } else { "-inf" }).into(),
        _ if all_int => format!("{v:.0}."),
        _ if v != 0.0 && (v.abs() >= 1e8 || v.abs() < 1e-4) => format!("{v:.4e}"),
        _ => format!("{v:.4}"),
    }
}

#[allow(clippy::too_many_arguments)] // a recursive printer; a struct would only rename the same eight values
fn write_dim(
    out: &mut String,
    vals: &[f64],
    dims: &[usize],
    strides: &[usize],
    off: usize,
    indent: usize,
    summarize: bool,
    cells: &dyn Fn(f64) -> String,
) {
    out.push('[');
    let n = dims[0];
    let idx: Vec<Option<usize>> = if summarize && n > 2 * EDGE {
        (0..EDGE)
            .map(Some)
            .chain(std::iter::once(None))
            .chain((n - EDGE..n).map(Some))
            .collect()
    } else {
        (0..n).map(Some).collect()
    };
    for (k, i) in idx.iter().enumerate() {
        if k > 0 {
            if dims.len() == 1 {
                out.push_str(", ");
            } else {
                out.push(',');
                out.push_str(&"\n".repeat(dims.len() - 1));
                out.push_str(&" ".repeat(indent + 1));
            }
        }
        match i {
            None => out.push_str("..."),
            Some(i) if dims.len() == 1 => out.push_str(&cells(vals[off + i * strides[0]])),
            Some(i) => write_dim(
                out,
                vals,
                &dims[1..],
                &strides[1..],
                off + i * strides[0],
                indent + 1,
                summarize,
                cells,
            ),
        }
    }
    out.push(']');
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vals = self.to_f64_vec();
        let dt = self.dtype();
        let all_int = vals.iter().all(|v| v.fract() == 0.0 && v.abs() < 1e8);
        let width = vals
            .iter()
            .map(|&v| fmt_value(v, dt, all_int).len())
            .max()
            .unwrap_or(0);
        let cells = |v: f64| format!("{:>width$}", fmt_value(v, dt, all_int));
        let mut s = String::from("tensor(");
        if self.rank() == 0 {
            s.push_str(&fmt_value(vals[0], dt, all_int));
        } else {
            let strides = self.shape().contiguous_strides();
            write_dim(
                &mut s,
                &vals,
                self.dims(),
                &strides,
                0,
                7,
                vals.len() > SUMMARIZE_ABOVE,
                &cells,
            );
        }
        write!(f, "{s}, shape={}, dtype={}", self.shape(), dt)?;
        if let Some(op) = self.grad_fn() {
            write!(f, ", grad_fn={op}")?;
        } else if self.requires_grad() {
            write!(f, ", requires_grad=True")?;
        }
        f.write_str(")")
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor[{}, {}, strides={:?}, offset={}]",
            self.shape(),
            self.dtype(),
            self.strides(),
            self.storage_offset()
        )
    }
}
