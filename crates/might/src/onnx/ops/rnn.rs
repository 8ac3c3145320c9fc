//! The recurrent layers `RNN`, `GRU` and `LSTM`: forward, reverse or bidirectional, with
//! sequence lengths, initial states, clipping, peepholes and both layouts. The input
//! projection of every step is one product up front; the loop over time does the rest.

use super::{opt, req, Node, OpFn};
use crate::onnx::value::{ints, Value};
use crate::{Result, Tensor};

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "RNN" => |n, i| rnn(n, i, Cell::Rnn),
        "GRU" => |n, i| rnn(n, i, Cell::Gru),
        "LSTM" => |n, i| rnn(n, i, Cell::Lstm),
        _ => return None,
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Cell {
    Rnn,
    Gru,
    Lstm,
}

/// An activation named in the `activations` attribute, with its alpha and beta.
fn activate(n: &Node, name: &str, a: Option<f32>, b: Option<f32>, x: &Tensor) -> Result<Tensor> {
    let (a, b) = (a.map(f64::from), b.map(f64::from));
    match name.to_ascii_lowercase().as_str() {
        "sigmoid" => x.sigmoid(),
        "tanh" => x.tanh(),
        "relu" => x.relu(),
        "affine" => x.affine(a.unwrap_or(1.0), b.unwrap_or(0.0)),
        "leakyrelu" => {
            let m = x.clamp(None, Some(0.0))?.mul_scalar(a.unwrap_or(0.01))?;
            x.relu()?.add(&m)
        }
        "scaledtanh" => x
            .mul_scalar(b.unwrap_or(1.0))?
            .tanh()?
            .mul_scalar(a.unwrap_or(1.0)),
        "hardsigmoid" => x
            .affine(a.unwrap_or(0.2), b.unwrap_or(0.5))?
            .clamp(Some(0.0), Some(1.0)),
        "softsign" => x.div(&x.abs()?.add_scalar(1.0)?),
        "softplus" => x.softplus(),
        other => Err(n.err(format!("activation '{other}' is not supported"))),
    }
}

fn rnn(n: &Node, ins: &[Option<Value>], cell: Cell) -> Result<Vec<Value>> {
    let (xv, wv, rv) = (req(n, ins, 0)?, req(n, ins, 1)?, req(n, ins, 2)?);
    let (b, lens, h0) = (opt(ins, 3), opt(ins, 4), opt(ins, 5));
    let (c0, peep) = if cell == Cell::Lstm {
        (opt(ins, 6), opt(ins, 7))
    } else {
        (None, None)
    };
    let layout = n.i("layout", 0);
    let x = if layout == 1 {
        xv.tensor.transpose(0, 1)?
    } else {
        xv.tensor.clone()
    };
    let (s, batch) = (x.dims()[0], x.dims()[1]);
    let gates = match cell {
        Cell::Rnn => 1,
        Cell::Gru => 3,
        Cell::Lstm => 4,
    };
    let hsz = rv.dims().last().copied().unwrap_or(0);
    let dirs = wv.dims()[0];
    if wv.dims().len() != 3 || wv.dims()[1] != gates * hsz {
        return Err(n.err(format!("W {:?} for {gates} gates of {hsz}", wv.dims())));
    }
    let direction = n.s("direction", "forward");
    let clip = n.has("clip").then(|| n.f("clip", 0.0) as f64);
    // the defaults, once per direction
    let names: Vec<String> = n.attr_strings("activations").unwrap_or_else(|| {
        let one: &[&str] = match cell {
            Cell::Rnn => &["Tanh"],
            Cell::Gru => &["Sigmoid", "Tanh"],
            Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
        };
        (0..dirs)
            .flat_map(|_| one.iter().map(|s| s.to_string()))
            .collect()
    });
    let alphas = n.floats("activation_alpha").unwrap_or_default();
    let betas = n.floats("activation_beta").unwrap_or_default();
    let per_dir = names.len() / dirs.max(1);
    let lens: Option<Vec<i64>> = lens.map(ints).transpose()?;
    let dt = x.dtype();
    let dev = x.device();
    let mut ys = Vec::new();
    let mut hs = Vec::new();
    let mut cs = Vec::new();
    for d in 0..dirs {
        let reverse = direction == "reverse" || (direction == "bidirectional" && d == 1);
        let f = |k: usize, t: &Tensor| -> Result<Tensor> {
            let i = d * per_dir + k;
            let name = names.get(i).map(String::as_str).unwrap_or("Tanh");
            activate(n, name, alphas.get(i).copied(), betas.get(i).copied(), t)
        };
        let w = wv.tensor.select(0, d as isize)?;
        let r = rv.tensor.select(0, d as isize)?;
        let (wb, rb) = match b {
            Some(b) => {
                let bd = b.tensor.select(0, d as isize)?;
                (
                    bd.narrow(0, 0, gates * hsz)?,
                    bd.narrow(0, gates * hsz, gates * hsz)?,
                )
            }
            None => {
                let z = Tensor::zeros_on(vec![gates * hsz], dt, dev)?;
                (z.clone(), z)
            }
        };
        // every step's input projection at once: [S, B, G*H]
        let xw = x.matmul(&w.t()?)?.add(&wb)?;
        let mut h = match h0 {
            Some(h) => h
                .tensor
                .select(if layout == 1 { 1 } else { 0 }, d as isize)?,
            None => Tensor::zeros_on(vec![batch, hsz], dt, dev)?,
        };
        let mut c = match c0 {
            Some(c) => c
                .tensor
                .select(if layout == 1 { 1 } else { 0 }, d as isize)?,
            None => Tensor::zeros_on(vec![batch, hsz], dt, dev)?,
        };
        let p = peep.map(|p| p.tensor.select(0, d as isize)).transpose()?;
        let mut out = vec![None; s];
        for step in 0..s {
            let t = if reverse { s - 1 - step } else { step };
            let gx = xw.select(0, t as isize)?;
            let clipped = |v: Tensor| -> Result<Tensor> {
                clip.map_or(Ok(v.clone()), |c| v.clamp(Some(-c), Some(c)))
            };
            let g = |k: usize, v: &Tensor| v.narrow(1, k * hsz, hsz);
            let (h_new, c_new) = match cell {
                Cell::Rnn => {
                    let a = gx.add(&h.matmul(&r.t()?)?)?.add(&rb)?;
                    (f(0, &clipped(a)?)?, c.clone())
                }
                Cell::Gru => {
                    let rz = |k: usize| -> Result<Tensor> { r.narrow(0, k * hsz, hsz) };
                    let rbk = |k: usize| rb.narrow(0, k * hsz, hsz);
                    let z = f(
                        0,
                        &clipped(g(0, &gx)?.add(&h.matmul(&rz(0)?.t()?)?)?.add(&rbk(0)?)?)?,
                    )?;
                    let rr = f(
                        0,
                        &clipped(g(1, &gx)?.add(&h.matmul(&rz(1)?.t()?)?)?.add(&rbk(1)?)?)?,
                    )?;
                    let hh = if n.i("linear_before_reset", 0) != 0 {
                        g(2, &gx)?.add(&rr.mul(&h.matmul(&rz(2)?.t()?)?.add(&rbk(2)?)?)?)?
                    } else {
                        g(2, &gx)?
                            .add(&rr.mul(&h)?.matmul(&rz(2)?.t()?)?)?
                            .add(&rbk(2)?)?
                    };
                    let hh = f(1, &clipped(hh)?)?;
                    let one = Tensor::ones_on((), dt, dev)?;
                    (one.sub(&z)?.mul(&hh)?.add(&z.mul(&h)?)?, c.clone())
                }
                Cell::Lstm => {
                    let a = gx.add(&h.matmul(&r.t()?)?)?.add(&rb)?;
                    let pk = |k: usize| -> Result<Option<Tensor>> {
                        p.as_ref().map(|p| p.narrow(0, k * hsz, hsz)).transpose()
                    };
                    let with_peep = |v: Tensor, k: usize, cc: &Tensor| -> Result<Tensor> {
                        match pk(k)? {
                            Some(pv) => v.add(&pv.mul(cc)?),
                            None => Ok(v),
                        }
                    };
                    let i = f(0, &clipped(with_peep(g(0, &a)?, 0, &c)?)?)?;
                    let fg = if n.i("input_forget", 0) != 0 {
                        Tensor::ones_on((), dt, dev)?.sub(&i)?
                    } else {
                        f(0, &clipped(with_peep(g(2, &a)?, 2, &c)?)?)?
                    };
                    let cand = f(1, &clipped(g(3, &a)?)?)?;
                    let cn = fg.mul(&c)?.add(&i.mul(&cand)?)?;
                    let o = f(0, &clipped(with_peep(g(1, &a)?, 1, &cn)?)?)?;
                    (o.mul(&f(2, &cn)?)?, cn)
                }
            };
            // past a sequence's length its state stays and its output is zero
            let (h_next, c_next, y) = match &lens {
                Some(l) => {
                    let live: Vec<bool> = l.iter().map(|&len| (t as i64) < len).collect();
                    let m = Tensor::from_vec(live, vec![batch, 1])?.to_device(dev)?;
                    let z = Tensor::zeros_on((), dt, dev)?;
                    (
                        Tensor::where_(&m, &h_new, &h)?,
                        Tensor::where_(&m, &c_new, &c)?,
                        Tensor::where_(&m, &h_new, &z)?,
                    )
                }
                None => (h_new.clone(), c_new, h_new),
            };
            h = h_next;
            c = c_next;
            out[t] = Some(y);
        }
        let y: Vec<Tensor> = out.into_iter().flatten().collect();
        ys.push(Tensor::stack(&y, 0)?);
        hs.push(h);
        cs.push(c);
    }
    // Y [S, D, B, H], Y_h / Y_c [D, B, H] (layout 1: [B, S, D, H] and [B, D, H])
    let mut y = Tensor::stack(&ys, 1)?;
    let mut yh = Tensor::stack(&hs, 0)?;
    let mut yc = Tensor::stack(&cs, 0)?;
    if layout == 1 {
        y = y.permute(&[2, 0, 1, 3])?;
        yh = yh.transpose(0, 1)?;
        yc = yc.transpose(0, 1)?;
    }
    let mut outs = vec![Value::typed(y, xv.elem), Value::typed(yh, xv.elem)];
    if cell == Cell::Lstm {
        outs.push(Value::typed(yc, xv.elem));
    }
    Ok(outs)
}
