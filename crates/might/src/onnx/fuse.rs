//! Graph rewrites at load: exporters spell some layers as chains of small operators; where a
//! chain computes exactly what one of might's fused kernels does, it is replaced by that one
//! node (fewer passes over memory, the kernel's better accuracy).
//!
//! - GELU, erf form (`torch.nn.GELU()`): `Div(x, √2) → Erf → Add(1) → Mul(x) → Mul(0.5)`
//!   becomes one `Gelu`.
//! - GELU, tanh form (GPT-2's `NewGELU`): `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`
//!   becomes one `Gelu(approximate = "tanh")`.
//! - `Conv → Relu` (ResNet's and every CNN's conv + BatchNorm, folded by the exporter, + ReLU)
//!   becomes one `Conv` carrying the private attribute [`FUSED_RELU`]: the CPU kernel applies
//!   the ReLU as it writes each output, instead of a second pass over the activations.
//! - `Conv → Add(residual) [→ Relu]` (ResNet's block ending; MobileNet's without the ReLU)
//!   becomes one `Conv` with the residual as a fourth input, flagged by [`FUSED_ADD`]
//!   (and [`FUSED_RELU`]): the CPU kernel adds it as it writes each output.
//!
//! A chain is only rewritten when every intermediate value has that one consumer and is not a
//! graph output, so nothing else can observe the values that disappear.

use super::proto::{attribute_proto::AttributeType, AttributeProto, GraphProto, NodeProto};
use super::value::Value;
use std::collections::HashMap;

/// The attribute a fused `Conv → Relu` carries (a name no ONNX operator defines).
pub(crate) const FUSED_RELU: &str = "might.fused_relu";
/// The attribute of a fused `Conv → Add`: input 3 is the residual added to the output.
pub(crate) const FUSED_ADD: &str = "might.fused_add";

struct Graph<'a> {
    nodes: &'a [NodeProto],
    init: &'a HashMap<String, Value>,
    /// value name -> indices of the nodes reading it
    users: HashMap<&'a str, Vec<usize>>,
    /// value name -> index of the node writing it
    producer: HashMap<&'a str, usize>,
    outputs: Vec<&'a str>,
}

impl<'a> Graph<'a> {
    fn op(&self, i: usize) -> &str {
        self.nodes[i].op_type.as_deref().unwrap_or("")
    }

    /// The scalar value of initializer `name`, if it is one.
    fn scalar(&self, name: &str) -> Option<f64> {
        let v = self.init.get(name)?;
        (v.tensor.numel() == 1 && v.tensor.dtype().is_float()).then(|| v.tensor.to_f64_vec()[0])
    }

    /// The only node reading `name` (none if it is a graph output or read twice).
    fn sole_user(&self, name: &str) -> Option<usize> {
        if self.outputs.contains(&name) {
            return None;
        }
        match self.users.get(name).map(Vec::as_slice) {
            Some([i]) => Some(*i),
            _ => None,
        }
    }

    /// For a binary node: (the other input, the constant) when one input is a scalar constant
    /// close to `want`.
    fn with_const(&self, i: usize, want: f64) -> Option<&'a str> {
        let n = &self.nodes[i];
        if n.input.len() != 2 {
            return None;
        }
        let close = |s: &str| {
            self.scalar(s)
                .is_some_and(|v| (v - want).abs() <= 1e-4 * want.abs().max(1.0))
        };
        if close(&n.input[1]) {
            Some(n.input[0].as_str())
        } else if close(&n.input[0]) && self.op(i) != "Div" && self.op(i) != "Sub" {
            Some(n.input[1].as_str())
        } else {
            None
        }
    }

    fn out(&self, i: usize) -> &'a str {
        self.nodes[i]
            .output
            .first()
            .map(String::as_str)
            .unwrap_or("")
    }

    /// `Mul(a, b)` with `x` as one factor: the other factor.
    fn mul_other(&self, i: usize, x: &str) -> Option<&'a str> {
        let n = &self.nodes[i];
        if self.op(i) != "Mul" || n.input.len() != 2 {
            return None;
        }
        if n.input[0] == x {
            Some(n.input[1].as_str())
        } else if n.input[1] == x {
            Some(n.input[0].as_str())
        } else {
            None
        }
    }
}

fn gelu_node(x: &str, y: &str, tanh: bool) -> NodeProto {
    let attribute = if tanh {
        vec![AttributeProto {
            name: Some("approximate".into()),
            r#type: Some(AttributeType::String as i32),
            s: Some(b"tanh".to_vec()),
            ..Default::default()
        }]
    } else {
        vec![]
    };
    NodeProto {
        op_type: Some("Gelu".into()),
        name: Some(format!("fused_gelu_{y}")),
        input: vec![x.to_string()],
        output: vec![y.to_string()],
        attribute,
        ..Default::default()
    }
}

/// `Conv → Relu`, the conv's output read only by the Relu: (removed nodes, last node, fused node).
fn conv_relu(g: &Graph, relu: usize) -> Option<(Vec<usize>, usize, NodeProto)> {
    let x = g.nodes[relu].input.first()?;
    let conv = *g.producer.get(x.as_str())?;
    if g.op(conv) != "Conv" || g.sole_user(x)? != relu || g.nodes[conv].output.len() != 1 {
        return None;
    }
    let mut node = g.nodes[conv].clone();
    node.output = vec![g.out(relu).to_string()];
    node.attribute.push(AttributeProto {
        name: Some(FUSED_RELU.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(1),
        ..Default::default()
    });
    Some((vec![conv], relu, node))
}

/// `Conv → Add(other) [→ Relu]`, the conv's output read only by the Add and the sum only by
/// the Relu: (removed nodes, last node, fused node).
fn conv_add(g: &Graph, add: usize) -> Option<(Vec<usize>, usize, NodeProto)> {
    let n = &g.nodes[add];
    let [a, b] = n.input.as_slice() else {
        return None;
    };
    let is_conv = |v: &str| {
        let i = *g.producer.get(v)?;
        let c = &g.nodes[i];
        let plain = c.output.len() == 1 && c.input.len() <= 3 && g.sole_user(v)? == add;
        (g.op(i) == "Conv"
            && plain
            && !c
                .attribute
                .iter()
                .any(|a| a.name.as_deref() == Some(FUSED_RELU)))
        .then_some(i)
    };
    let (conv, residual) = match (is_conv(a), is_conv(b)) {
        (Some(c), _) => (c, b),
        (None, Some(c)) => (c, a),
        _ => return None,
    };
    if residual.is_empty() {
        return None;
    }
    // a ReLU that alone reads the sum goes in too
    let relu = g
        .sole_user(g.out(add))
        .filter(|&r| g.op(r) == "Relu" && g.nodes[r].input.len() == 1);
    let mut node = g.nodes[conv].clone();
    node.input.resize(3, String::new());
    node.input.push(residual.clone());
    let last = relu.unwrap_or(add);
    node.output = vec![g.out(last).to_string()];
    let flag = |name: &str| AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(1),
        ..Default::default()
    };
    node.attribute.push(flag(FUSED_ADD));
    if relu.is_some() {
        node.attribute.push(flag(FUSED_RELU));
    }
    let removed = if relu.is_some() {
        vec![conv, add]
    } else {
        vec![conv]
    };
    Some((removed, last, node))
}

/// `Div(x, √2) | Mul(x, 1/√2) → Erf → Add(1) → Mul(x) → Mul(0.5)`: (removed nodes, last node,
/// x, output).
fn gelu_erf(g: &Graph, erf: usize) -> Option<(Vec<usize>, usize, String, String)> {
    let a = g.nodes[erf].input.first()?;
    let scale = *g.producer.get(a.as_str())?;
    let x = match g.op(scale) {
        "Div" => g.with_const(scale, std::f64::consts::SQRT_2)?,
        "Mul" => g.with_const(scale, std::f64::consts::FRAC_1_SQRT_2)?,
        _ => return None,
    };
    g.sole_user(a)?;
    let add = g.sole_user(g.out(erf))?;
    if g.op(add) != "Add" || g.with_const(add, 1.0)? != g.out(erf) {
        return None;
    }
    let m1 = g.sole_user(g.out(add))?;
    let (last, removed) = if g.mul_other(m1, x)? == g.out(add) {
        // x·(1 + erf) then ·0.5
        let m2 = g.sole_user(g.out(m1))?;
        if g.op(m2) != "Mul" || g.with_const(m2, 0.5)? != g.out(m1) {
            return None;
        }
        (m2, vec![scale, erf, add, m1])
    } else {
        return None;
    };
    Some((removed, last, x.to_string(), g.out(last).to_string()))
}

/// GPT-2's tanh GELU as torch exports it: `Pow(x, 3) → Mul(0.044715) → Add(x) →
/// Mul(√(2/π)) → Tanh → Add(1) → Mul(0.5·x)` with `0.5·x = Mul(x, 0.5)` computed beside.
fn gelu_tanh(g: &Graph, tanh: usize) -> Option<(Vec<usize>, usize, String, String)> {
    let t_in = g.nodes[tanh].input.first()?;
    let m_k = *g.producer.get(t_in.as_str())?;
    if g.op(m_k) != "Mul" {
        return None;
    }
    let inner = g.with_const(m_k, 0.797_884_560_802_865_4)?;
    let add_x = *g.producer.get(inner)?;
    if g.op(add_x) != "Add" {
        return None;
    }
    let n = &g.nodes[add_x];
    // one input is x, the other 0.044715·x³
    let (x, cubic) = (0..2).find_map(|k| {
        let c = g.producer.get(n.input[1 - k].as_str())?;
        (g.op(*c) == "Mul").then_some((n.input[k].as_str(), *c))
    })?;
    let pow_out = g.with_const(cubic, 0.044715)?;
    let pow = *g.producer.get(pow_out)?;
    let cubed = match g.op(pow) {
        "Pow" => g.with_const(pow, 3.0)? == x,
        _ => false,
    };
    if !cubed {
        return None;
    }
    for v in [g.out(pow), g.out(cubic), g.out(add_x), g.out(m_k)] {
        g.sole_user(v)?;
    }
    let add1 = g.sole_user(g.out(tanh))?;
    if g.op(add1) != "Add" || g.with_const(add1, 1.0)? != g.out(tanh) {
        return None;
    }
    let last = g.sole_user(g.out(add1))?;
    let half_x = g.mul_other(last, g.out(add1))?;
    let hx = *g.producer.get(half_x)?;
    if g.op(hx) != "Mul" || g.with_const(hx, 0.5)? != x {
        return None;
    }
    g.sole_user(half_x)?;
    Some((
        vec![pow, cubic, add_x, m_k, tanh, add1, hx],
        last,
        x.to_string(),
        g.out(last).to_string(),
    ))
}

/// Apply the rewrites to `graph` (in place); returns how many chains were fused.
pub(crate) fn fuse(graph: &mut GraphProto, init: &HashMap<String, Value>) -> usize {
    let mut rewrites: Vec<(Vec<usize>, usize, NodeProto)> = Vec::new();
    {
        let nodes = &graph.node;
        let mut users: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut producer = HashMap::new();
        for (i, n) in nodes.iter().enumerate() {
            for v in &n.input {
                users.entry(v.as_str()).or_default().push(i);
            }
            for v in &n.output {
                producer.insert(v.as_str(), i);
            }
        }
        let outputs = graph
            .output
            .iter()
            .filter_map(|o| o.name.as_deref())
            .collect();
        let g = Graph {
            nodes,
            init,
            users,
            producer,
            outputs,
        };
        let mut taken = vec![false; nodes.len()];
        for i in 0..nodes.len() {
            let found = match g.op(i) {
                "Erf" => gelu_erf(&g, i).map(|(r, l, x, y)| (r, l, gelu_node(&x, &y, false))),
                "Tanh" => gelu_tanh(&g, i).map(|(r, l, x, y)| (r, l, gelu_node(&x, &y, true))),
                "Relu" => conv_relu(&g, i),
                "Add" => conv_add(&g, i),
                _ => None,
            };
            if let Some((removed, last, node)) = found {
                if removed.iter().chain([&last]).any(|&k| taken[k]) {
                    continue;
                }
                removed.iter().chain([&last]).for_each(|&k| taken[k] = true);
                rewrites.push((removed, last, node));
            }
        }
    }
    let count = rewrites.len();
    let mut drop = vec![false; graph.node.len()];
    for (removed, last, node) in rewrites {
        removed.iter().for_each(|&k| drop[k] = true);
        graph.node[last] = node;
    }
    let mut k = 0;
    graph.node.retain(|_| {
        k += 1;
        !drop[k - 1]
    });
    count
}
