//! Control flow: `If`, `Loop` and `Scan`, whose bodies are subgraphs run by the executor.
//!
//! A subgraph sees its own inputs and initializers first, then every value of the enclosing
//! scope, then the model's initializers. Loops run on tensors only (no sequences): the
//! loop-carried values go round, the per-iteration scan outputs are stacked on a new axis 0.

use super::model::Model;
use super::ops::{lookup, Node};
use super::proto::{AttributeProto, GraphProto, NodeProto};
use super::value::{decode, ints, DataDir, Value};
use crate::{Error, ErrorKind, Result, Tensor};
use std::collections::HashMap;

/// Whether `op` is run here rather than through the operator table.
pub fn is_control(op: &str) -> bool {
    matches!(op, "If" | "Loop" | "Scan")
}

fn attr<'a>(node: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    node.attribute
        .iter()
        .find(|a| a.name.as_deref() == Some(name))
}

fn body<'a>(node: &'a NodeProto, name: &str) -> Result<&'a GraphProto> {
    let op = node.op_type.as_deref().unwrap_or("");
    attr(node, name)
        .and_then(|a| a.g.as_ref())
        .ok_or_else(|| Error::invalid(op, format!("no {name} graph")))
}

fn int_list(node: &NodeProto, name: &str) -> Vec<i64> {
    attr(node, name).map(|a| a.ints.clone()).unwrap_or_default()
}

/// Normalize `a` (negative from the end) for rank `r`.
fn norm_axis(op: &str, a: i64, r: usize) -> Result<usize> {
    let ri = r as i64;
    if a < -ri || a >= ri.max(1) {
        return Err(Error::invalid(
            op,
            format!("axis {a} out of range for rank {r}"),
        ));
    }
    Ok(if a < 0 { (a + ri) as usize } else { a as usize })
}

fn stack(op: &str, parts: &[Value], axis: i64) -> Result<Value> {
    let first = parts
        .first()
        .ok_or_else(|| Error::invalid(op, "no iterations to stack"))?;
    let r = first.dims().len() + 1;
    let a = norm_axis(op, axis, r)?;
    let ts: Vec<Tensor> = parts.iter().map(|v| v.tensor.clone()).collect();
    Ok(Value::typed(Tensor::stack(&ts, a as isize)?, first.elem))
}

/// Hand out one run of a Loop or Scan body's outputs: first the new values of the carried
/// state, then one slice for each scan output.
fn take_body_outputs(
    op: &str,
    outs: &mut impl Iterator<Item = Value>,
    carried: &mut [Value],
    scans: &mut [Vec<Value>],
) -> Result<()> {
    let mut next = || {
        outs.next()
            .ok_or_else(|| Error::invalid(op, "body output missing"))
    };
    for slot in carried.iter_mut() {
        *slot = next()?;
    }
    for s in scans.iter_mut() {
        s.push(next()?);
    }
    Ok(())
}

impl Model {
    /// Run control-flow node `node` with inputs `ins` in scope `scope`.
    pub(super) fn run_control(
        &self,
        node: &NodeProto,
        ins: &[Option<Value>],
        scope: &HashMap<String, Value>,
    ) -> Result<Vec<Value>> {
        match node.op_type.as_deref().unwrap_or("") {
            "If" => self.run_if(node, ins, scope),
            "Loop" => self.run_loop(node, ins, scope),
            _ => self.run_scan(node, ins, scope),
        }
    }

    /// Run subgraph `g` with its inputs bound to `args`, in `scope`; its outputs.
    fn run_graph(
        &self,
        g: &GraphProto,
        args: Vec<Value>,
        scope: &HashMap<String, Value>,
    ) -> Result<Vec<Value>> {
        let mut env = scope.clone();
        for t in &g.initializer {
            env.insert(
                t.name.clone().unwrap_or_default(),
                decode(t, &DataDir(None))?,
            );
        }
        for (i, v) in g.input.iter().zip(args) {
            env.insert(i.name.clone().unwrap_or_default(), v);
        }
        for n in &g.node {
            let ins: Vec<Option<Value>> = n
                .input
                .iter()
                .map(|k| {
                    if k.is_empty() {
                        None
                    } else {
                        env.get(k).or_else(|| self.init.get(k)).cloned()
                    }
                })
                .collect();
            let nd = Node {
                proto: n,
                opset: self.opset,
            };
            let outs = if is_control(nd.op()) {
                self.run_control(n, &ins, &env)?
            } else {
                let f = lookup(nd.op()).ok_or_else(|| {
                    Error::new(
                        ErrorKind::Unsupported,
                        "onnx",
                        format!("unsupported operator {}", nd.op()),
                    )
                })?;
                if let Some((k, _)) = n
                    .input
                    .iter()
                    .zip(&ins)
                    .find(|(k, v)| !k.is_empty() && v.is_none())
                {
                    return Err(self.node_err(n, format!("input '{k}' is never produced")));
                }
                f(&nd, &ins).map_err(|e| self.node_err(n, e.to_string()))?
            };
            for (k, v) in n.output.iter().zip(outs) {
                if !k.is_empty() {
                    env.insert(k.clone(), v);
                }
            }
        }
        g.output
            .iter()
            .map(|o| {
                let k = o.name.clone().unwrap_or_default();
                env.get(&k)
                    .or_else(|| self.init.get(&k))
                    .cloned()
                    .ok_or_else(|| {
                        Error::invalid("onnx", format!("subgraph output '{k}' is never produced"))
                    })
            })
            .collect()
    }

    /// `If`: run the branch the condition picks.
    fn run_if(
        &self,
        node: &NodeProto,
        ins: &[Option<Value>],
        scope: &HashMap<String, Value>,
    ) -> Result<Vec<Value>> {
        let cond = ins
            .first()
            .and_then(|v| v.as_ref())
            .ok_or_else(|| Error::invalid("If", "no condition"))?;
        let take = cond.tensor.to_f64_vec().first().copied().unwrap_or(0.0) != 0.0;
        let g = body(node, if take { "then_branch" } else { "else_branch" })?;
        self.run_graph(g, Vec::new(), scope)
    }

    /// `Loop`: up to `M` iterations while `cond` holds; the body maps (iteration, cond,
    /// carried…) to (cond, carried…, scan outputs…).
    fn run_loop(
        &self,
        node: &NodeProto,
        ins: &[Option<Value>],
        scope: &HashMap<String, Value>,
    ) -> Result<Vec<Value>> {
        let g = body(node, "body")?;
        let trip = match ins.first().and_then(|v| v.as_ref()) {
            Some(m) => Some(ints(m)?.first().copied().unwrap_or(0)),
            None => None,
        };
        let mut cond = match ins.get(1).and_then(|v| v.as_ref()) {
            Some(c) => c.tensor.to_f64_vec().first().copied().unwrap_or(0.0) != 0.0,
            None => true,
        };
        let mut carried: Vec<Value> = Vec::new();
        for (k, v) in ins.iter().enumerate().skip(2) {
            carried.push(
                v.clone()
                    .ok_or_else(|| Error::invalid("Loop", format!("input {k} is required")))?,
            );
        }
        let n_carried = carried.len();
        let n_scan = g.output.len().saturating_sub(1 + n_carried);
        if g.output.len() < 1 + n_carried || g.input.len() != 2 + n_carried {
            return Err(Error::invalid(
                "Loop",
                format!(
                    "body takes {} inputs and gives {} outputs for {n_carried} loop-carried values",
                    g.input.len(),
                    g.output.len()
                ),
            ));
        }
        let mut scans: Vec<Vec<Value>> = vec![Vec::new(); n_scan];
        let mut i: i64 = 0;
        let dev = self.device;
        while cond && trip.is_none_or(|m| i < m) {
            let mut args = vec![
                Value::new(Tensor::scalar(i).to_device(dev)?),
                Value::new(Tensor::scalar(cond).to_device(dev)?),
            ];
            args.extend(carried.iter().cloned());
            let mut outs = self.run_graph(g, args, scope)?.into_iter();
            let c = outs
                .next()
                .ok_or_else(|| Error::invalid("Loop", "body gave no condition"))?;
            cond = c.tensor.to_f64_vec().first().copied().unwrap_or(0.0) != 0.0;
            take_body_outputs("Loop", &mut outs, &mut carried, &mut scans)?;
            i += 1;
        }
        let mut out = carried;
        for s in &scans {
            out.push(stack("Loop", s, 0)?);
        }
        Ok(out)
    }

    /// `Scan`: the body maps (state…, one slice of each scan input…) to (state…, one slice of
    /// each scan output…). Opset 8's form, with a batch axis and `sequence_lens`, is run one
    /// batch entry at a time.
    fn run_scan(
        &self,
        node: &NodeProto,
        ins: &[Option<Value>],
        scope: &HashMap<String, Value>,
    ) -> Result<Vec<Value>> {
        let g = body(node, "body")?;
        let m = attr(node, "num_scan_inputs")
            .and_then(|a| a.i)
            .ok_or_else(|| Error::invalid("Scan", "num_scan_inputs is required"))?
            as usize;
        if self.opset < 9 {
            if ins.first().is_some_and(|v| v.is_some()) {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    "Scan",
                    "sequence_lens is not supported",
                ));
            }
            let vals: Vec<Value> = ins
                .get(1..)
                .unwrap_or(&[])
                .iter()
                .map(|v| {
                    v.clone()
                        .ok_or_else(|| Error::invalid("Scan", "missing input"))
                })
                .collect::<Result<_>>()?;
            let batch = vals
                .first()
                .map_or(0, |v| v.dims().first().copied().unwrap_or(0));
            let dirs = int_list(node, "directions");
            let mut per: Vec<Vec<Value>> = Vec::new();
            for b in 0..batch {
                let vb: Vec<Value> = vals
                    .iter()
                    .map(|v| Ok(Value::typed(v.tensor.select(0, b as isize)?, v.elem)))
                    .collect::<Result<_>>()?;
                per.push(self.scan_once(g, vb, m, &dirs, &[], &[], &[], scope)?);
            }
            let k = per.first().map_or(0, Vec::len);
            return (0..k)
                .map(|j| {
                    let parts: Vec<Value> = per.iter().map(|p| p[j].clone()).collect();
                    stack("Scan", &parts, 0)
                })
                .collect();
        }
        let vals: Vec<Value> = ins
            .iter()
            .map(|v| {
                v.clone()
                    .ok_or_else(|| Error::invalid("Scan", "missing input"))
            })
            .collect::<Result<_>>()?;
        self.scan_once(
            g,
            vals,
            m,
            &int_list(node, "scan_input_directions"),
            &int_list(node, "scan_input_axes"),
            &int_list(node, "scan_output_directions"),
            &int_list(node, "scan_output_axes"),
            scope,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn scan_once(
        &self,
        g: &GraphProto,
        vals: Vec<Value>,
        m: usize,
        in_dirs: &[i64],
        in_axes: &[i64],
        out_dirs: &[i64],
        out_axes: &[i64],
        scope: &HashMap<String, Value>,
    ) -> Result<Vec<Value>> {
        if m > vals.len() {
            return Err(Error::invalid(
                "Scan",
                format!("{m} scan inputs but {} inputs", vals.len()),
            ));
        }
        let n_state = vals.len() - m;
        let mut state: Vec<Value> = vals[..n_state].to_vec();
        let mut seqs: Vec<(Value, usize, bool)> = Vec::new();
        for (j, v) in vals[n_state..].iter().enumerate() {
            if v.dims().is_empty() {
                return Err(Error::shape(
                    "Scan",
                    "a scan input must have an axis to scan",
                ));
            }
            let a = norm_axis("Scan", in_axes.get(j).copied().unwrap_or(0), v.dims().len())?;
            seqs.push((v.clone(), a, in_dirs.get(j).copied().unwrap_or(0) == 1));
        }
        let len = seqs.first().map_or(0, |s| s.0.dims()[s.1]);
        if seqs.iter().any(|s| s.0.dims()[s.1] != len) {
            return Err(Error::shape("Scan", "scan inputs differ in length"));
        }
        let n_out = g.output.len().saturating_sub(n_state);
        let mut outs: Vec<Vec<Value>> = vec![Vec::new(); n_out];
        for t in 0..len {
            let mut args = state.clone();
            for (v, a, rev) in &seqs {
                let i = if *rev { len - 1 - t } else { t };
                args.push(Value::typed(
                    v.tensor.select(*a as isize, i as isize)?,
                    v.elem,
                ));
            }
            let mut res = self.run_graph(g, args, scope)?.into_iter();
            take_body_outputs("Scan", &mut res, &mut state, &mut outs)?;
        }
        let mut result = state;
        for (j, mut parts) in outs.into_iter().enumerate() {
            if out_dirs.get(j).copied().unwrap_or(0) == 1 {
                parts.reverse();
            }
            result.push(stack(
                "Scan",
                &parts,
                out_axes.get(j).copied().unwrap_or(0),
            )?);
        }
        Ok(result)
    }
}
