//! Unique: the distinct elements (or slices along an axis) of a tensor, with where each first
//! occurs, which one every input maps to, and how often each occurs. Data-dependent sizes,
//! so it runs on the host.

use super::{axis, Node, OpFn};
use crate::onnx::value::Value;
use crate::{Result, Tensor};
use std::cmp::Ordering;

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Unique" => unique,
        _ => return None,
    })
}

fn cmp_slices(a: &[f64], b: &[f64]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match x.total_cmp(y) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    Ordering::Equal
}

fn unique(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = super::req(n, ins, 0)?;
    let d = x.dims().to_vec();
    let xv = x.tensor.to_f64_vec();
    // view the input as [outer, len, inner], unique along len
    let (outer, len, inner, a) = if n.has("axis") {
        let a = axis(n, n.i("axis", 0), d.len())?;
        let outer: usize = d[..a].iter().product();
        let inner: usize = d[a + 1..].iter().product();
        (outer, d[a], inner, Some(a))
    } else {
        (1, xv.len(), 1, None)
    };
    let slice = |k: usize| -> Vec<f64> {
        let mut s = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            let base = (o * len + k) * inner;
            s.extend_from_slice(&xv[base..base + inner]);
        }
        s
    };
    let slices: Vec<Vec<f64>> = (0..len).map(slice).collect();
    // first occurrences, in input order
    let mut firsts: Vec<usize> = Vec::new();
    let mut inverse = vec![0usize; len];
    let mut order: Vec<usize> = (0..len).collect();
    order.sort_by(|&i, &j| cmp_slices(&slices[i], &slices[j]).then(i.cmp(&j)));
    let mut group_of = vec![0usize; len];
    let mut g = 0;
    for (p, &i) in order.iter().enumerate() {
        if p > 0 && cmp_slices(&slices[order[p - 1]], &slices[i]) != Ordering::Equal {
            g += 1;
        }
        if p == 0 || cmp_slices(&slices[order[p - 1]], &slices[i]) != Ordering::Equal {
            firsts.push(i);
        }
        group_of[i] = g;
    }
    // firsts is in sorted order; unsorted output lists groups by first occurrence
    let sorted = n.i("sorted", 1) != 0;
    let mut groups: Vec<usize> = (0..firsts.len()).collect();
    if !sorted {
        groups.sort_by_key(|&k| firsts[k]);
    }
    let mut rank = vec![0usize; firsts.len()];
    for (r, &k) in groups.iter().enumerate() {
        rank[k] = r;
    }
    let mut counts = vec![0i64; firsts.len()];
    for i in 0..len {
        inverse[i] = rank[group_of[i]];
        counts[rank[group_of[i]]] += 1;
    }
    let u = groups.len();
    let idx: Vec<i64> = groups.iter().map(|&k| firsts[k] as i64).collect();
    let mut y = vec![0.0; outer * u * inner];
    for (r, &k) in groups.iter().enumerate() {
        let s = &slices[firsts[k]];
        for o in 0..outer {
            y[(o * u + r) * inner..(o * u + r + 1) * inner]
                .copy_from_slice(&s[o * inner..(o + 1) * inner]);
        }
    }
    let yd = match a {
        Some(a) => {
            let mut yd = d.clone();
            yd[a] = u;
            yd
        }
        None => vec![u],
    };
    let dev = x.tensor.device();
    let yt = Tensor::from_vec(y, yd)?
        .to_dtype(x.tensor.dtype())?
        .to_device(dev)?;
    let i64s = |v: Vec<i64>| -> Result<Value> {
        let l = v.len();
        Ok(Value::new(Tensor::from_vec(v, vec![l])?.to_device(dev)?))
    };
    Ok(vec![
        Value::typed(yt, x.elem),
        i64s(idx)?,
        i64s(inverse.into_iter().map(|v| v as i64).collect())?,
        i64s(counts)?,
    ])
}
