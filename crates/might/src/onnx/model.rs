//! An ONNX model ready to run: parsed, checked, constants folded, initializers decoded.

use super::ops::{lookup, Node, OpFn};
use super::proto::{type_proto, GraphProto, ModelProto, NodeProto, ValueInfoProto};
use super::value::{decode, dtype_of, elem_name, DataDir, Value};
use crate::{Device, Error, Result, Tensor};
use prost::Message;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The default-domain opsets the runner accepts (13–21 are the ones exported models use; the
/// operators also follow the older and newer semantics the ONNX test suite exercises).
pub const OPSETS: std::ops::RangeInclusive<i64> = 1..=28;

/// Graph outputs by name, in the graph's order.
pub type Outputs = Vec<(String, Value)>;

/// A graph input or output as the model declares it.
#[derive(Clone, Debug)]
pub struct IoInfo {
    pub name: String,
    /// ONNX element type name (`float`, `int64`, …), or the kind for non-tensor values.
    pub elem: String,
    /// Dimensions: a size, or the symbolic name (or `?`) of a dynamic one.
    pub dims: Vec<String>,
}

/// Milliseconds each node took, as `(operator type, node name or "#index", ms)` in the order
/// they ran ([`Model::run_profiled`]).
pub type NodeTimes = Vec<(String, String, f64)>;

/// A loaded ONNX model. Cheap to run many times; [`Model::run`] takes the inputs by name.
pub struct Model {
    graph: GraphProto,
    pub(super) opset: i64,
    pub(super) init: HashMap<String, Value>,
    /// Node indices still to run after constant folding, in graph order.
    plan: Vec<usize>,
    /// For each planned node: values whose last use it is (freed after it runs).
    frees: Vec<Vec<String>>,
    ops: Vec<OpFn>,
    pub(super) device: Device,
    pub ir_version: i64,
    pub producer: String,
}

fn bad(msg: impl Into<String>) -> Error {
    Error::format("onnx", msg)
}

fn io_info(v: &ValueInfoProto) -> IoInfo {
    let name = v.name.clone().unwrap_or_default();
    let (elem, dims) = match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(t)) => {
            let dims = t
                .shape
                .as_ref()
                .map(|s| {
                    s.dim
                        .iter()
                        .map(|d| match &d.value {
                            Some(super::proto::tensor_shape_proto::dimension::Value::DimValue(
                                v,
                            )) => v.to_string(),
                            Some(super::proto::tensor_shape_proto::dimension::Value::DimParam(
                                p,
                            )) => p.clone(),
                            None => "?".into(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            (elem_name(t.elem_type.unwrap_or(0)).to_string(), dims)
        }
        Some(type_proto::Value::SequenceType(_)) => ("sequence".into(), vec![]),
        Some(type_proto::Value::MapType(_)) => ("map".into(), vec![]),
        Some(type_proto::Value::OptionalType(_)) => ("optional".into(), vec![]),
        Some(type_proto::Value::SparseTensorType(_)) => ("sparse_tensor".into(), vec![]),
        Some(_) => ("opaque".into(), vec![]),
        None => ("?".into(), vec![]),
    };
    IoInfo { name, elem, dims }
}

impl Model {
    /// Load a `.onnx` file; external data files are read from its folder.
    #[track_caller]
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
        let dir: PathBuf = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Model::parse(&bytes, Some(&dir))
            .map_err(|e| Error::new(e.kind, e.op, format!("{}: {}", path.display(), e.msg)))
    }

    /// Load a model held in memory (no external data).
    #[track_caller]
    pub fn from_bytes(bytes: &[u8]) -> Result<Model> {
        Model::parse(bytes, None)
    }

    fn parse(bytes: &[u8], dir: Option<&Path>) -> Result<Model> {
        let proto =
            ModelProto::decode(bytes).map_err(|e| bad(format!("not an ONNX model: {e}")))?;
        let graph = proto.graph.ok_or_else(|| bad("the model has no graph"))?;
        let mut opset = None;
        let mut other = Vec::new();
        for o in &proto.opset_import {
            match o.domain.as_deref().unwrap_or("") {
                "" | "ai.onnx" => opset = o.version,
                d => other.push(d.to_string()),
            }
        }
        let opset = opset.unwrap_or(1);
        if !OPSETS.contains(&opset) {
            return Err(bad(format!(
                "opset {opset} of the default domain is not supported ({}..={})",
                OPSETS.start(),
                OPSETS.end()
            )));
        }
        // every unsupported op, all at once, before anything runs
        let mut missing = BTreeMap::new();
        let mut ops: Vec<OpFn> = Vec::with_capacity(graph.node.len());
        for n in &graph.node {
            let op = n.op_type.clone().unwrap_or_default();
            let dom = n.domain.clone().unwrap_or_default();
            let f = if dom.is_empty() || dom == "ai.onnx" {
                lookup(&op)
            } else {
                None
            };
            match f {
                Some(f) => ops.push(f),
                None => {
                    let key = if dom.is_empty() || dom == "ai.onnx" {
                        op
                    } else {
                        format!("{dom}.{op}")
                    };
                    *missing.entry(key).or_insert(0usize) += 1;
                }
            }
            // the branches of an `If` are checked too
            for a in &n.attribute {
                for g in a.g.iter().chain(&a.graphs) {
                    subgraph_missing(g, &mut missing);
                }
            }
        }
        if !missing.is_empty() {
            let list: Vec<String> = missing
                .iter()
                .map(|(k, v)| {
                    if *v > 1 {
                        format!("{k} (x{v})")
                    } else {
                        k.clone()
                    }
                })
                .collect();
            return Err(Error::new(
                crate::ErrorKind::Unsupported,
                "onnx",
                format!("unsupported operators: {}", list.join(", ")),
            ));
        }
        for v in graph.input.iter().chain(&graph.output) {
            if let Some(type_proto::Value::TensorType(t)) =
                v.r#type.as_ref().and_then(|t| t.value.as_ref())
            {
                let e = t.elem_type.unwrap_or(0);
                if dtype_of(e).is_none() {
                    return Err(Error::new(
                        crate::ErrorKind::Unsupported,
                        "onnx",
                        format!(
                            "'{}': element type {} is not supported",
                            v.name.as_deref().unwrap_or(""),
                            elem_name(e)
                        ),
                    ));
                }
            } else if v.r#type.is_some() {
                let i = io_info(v);
                return Err(Error::new(
                    crate::ErrorKind::Unsupported,
                    "onnx",
                    format!("'{}': {} values are not supported", i.name, i.elem),
                ));
            }
        }
        let dd = DataDir(dir);
        let mut init = HashMap::new();
        for t in &graph.initializer {
            init.insert(t.name.clone().unwrap_or_default(), decode(t, &dd)?);
        }
        if !graph.sparse_initializer.is_empty() {
            return Err(Error::new(
                crate::ErrorKind::Unsupported,
                "onnx",
                "sparse initializers are not supported",
            ));
        }
        let mut m = Model {
            graph,
            opset,
            init,
            plan: vec![],
            frees: vec![],
            ops,
            device: Device::Cpu,
            ir_version: proto.ir_version.unwrap_or(0),
            producer: proto.producer_name.unwrap_or_default(),
        };
        m.fold_constants();
        if super::fuse::fuse(&mut m.graph, &m.init) > 0 {
            m.ops = m
                .graph
                .node
                .iter()
                .map(|n| lookup(n.op_type.as_deref().unwrap_or("")))
                .collect::<Option<_>>()
                .ok_or_else(|| bad("a fused node has no operator"))?;
        }
        m.plan = (0..m.graph.node.len()).collect();
        m.plan_frees();
        Ok(m)
    }

    /// Run every node whose inputs are all initializers once, at load time, and keep its
    /// outputs as initializers (shape arithmetic, weight transposes, `Constant` nodes).
    fn fold_constants(&mut self) {
        let graph_inputs: HashSet<String> = self
            .graph
            .input
            .iter()
            .filter_map(|v| v.name.clone())
            .collect();
        let nodes = std::mem::take(&mut self.graph.node);
        let ops = std::mem::take(&mut self.ops);
        for (node, op_fn) in nodes.into_iter().zip(ops) {
            let op = node.op_type.as_deref().unwrap_or("");
            let foldable = !matches!(
                op,
                "RandomNormal"
                    | "RandomUniform"
                    | "RandomNormalLike"
                    | "RandomUniformLike"
                    | "Multinomial"
                    | "Bernoulli"
            ) && node
                .input
                .iter()
                .all(|n| n.is_empty() || (self.init.contains_key(n) && !graph_inputs.contains(n)));
            if foldable {
                let ins: Vec<Option<Value>> = node
                    .input
                    .iter()
                    .map(|n| self.init.get(n).cloned())
                    .collect();
                let nd = Node {
                    proto: &node,
                    opset: self.opset,
                };
                if let Ok(outs) = op_fn(&nd, &ins) {
                    for (name, mut v) in node.output.iter().zip(outs) {
                        if !name.is_empty() {
                            // folded weights (a transposed embedding, say) stored dense, once
                            if let Ok(t) = v.tensor.contiguous() {
                                v.tensor = t;
                            }
                            self.init.insert(name.clone(), v);
                        }
                    }
                    continue;
                }
            }
            self.graph.node.push(node);
            self.ops.push(op_fn);
        }
    }

    fn plan_frees(&mut self) {
        let outputs: HashSet<&str> = self
            .graph
            .output
            .iter()
            .filter_map(|v| v.name.as_deref())
            .collect();
        let mut last: HashMap<&str, usize> = HashMap::new();
        for (k, &i) in self.plan.iter().enumerate() {
            let mut reads = Vec::new();
            node_reads(&self.graph.node[i], &mut reads);
            for n in reads {
                if !n.is_empty() && !self.init.contains_key(n) && !outputs.contains(n) {
                    last.insert(n, k);
                }
            }
        }
        let mut frees = vec![vec![]; self.plan.len()];
        for (n, k) in last {
            frees[k].push(n.to_string());
        }
        self.frees = frees;
    }

    /// The default-domain opset the model was exported with.
    pub fn opset(&self) -> i64 {
        self.opset
    }

    /// Graph inputs the caller provides (initializers listed as inputs are left out).
    pub fn inputs(&self) -> Vec<IoInfo> {
        let inits: HashSet<&str> = self
            .graph
            .initializer
            .iter()
            .filter_map(|t| t.name.as_deref())
            .collect();
        self.graph
            .input
            .iter()
            .filter(|v| !inits.contains(v.name.as_deref().unwrap_or("")))
            .map(io_info)
            .collect()
    }

    pub fn outputs(&self) -> Vec<IoInfo> {
        self.graph.output.iter().map(io_info).collect()
    }

    /// Operator types and how often each appears in the graph.
    pub fn ops_used(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for n in &self.graph.node {
            *m.entry(n.op_type.clone().unwrap_or_default()).or_insert(0) += 1;
        }
        m
    }

    /// Number of elements across the model's initializers (its parameters).
    pub fn parameter_count(&self) -> usize {
        self.graph
            .initializer
            .iter()
            .map(|t| t.dims.iter().map(|&d| d.max(0) as usize).product::<usize>())
            .sum()
    }

    /// Nodes left to run after constant folding.
    pub fn node_count(&self) -> usize {
        self.plan.len()
    }

    /// Move the weights to `device`; later runs compute there.
    pub fn to_device(mut self, device: Device) -> Result<Model> {
        for v in self.init.values_mut() {
            v.tensor = v.tensor.to_device(device)?;
        }
        self.device = device;
        Ok(self)
    }

    /// Run the graph on named input tensors; returns the graph outputs, in order, with
    /// integer outputs narrowed to their declared ONNX type.
    #[track_caller]
    pub fn run(&self, inputs: &[(&str, Tensor)]) -> Result<Vec<(String, Tensor)>> {
        let vals = inputs
            .iter()
            .map(|(n, t)| (n.to_string(), Value::new(t.clone())))
            .collect();
        self.run_values(vals)?
            .into_iter()
            .map(|(n, v)| Ok((n, v.narrowed()?)))
            .collect()
    }

    /// [`run`](Model::run) on typed values (the ONNX element type kept beside each tensor).
    pub fn run_values(&self, inputs: HashMap<String, Value>) -> Result<Vec<(String, Value)>> {
        self.run_inner(inputs, None)
    }

    /// [`run_values`](Model::run_values) that also returns the milliseconds each node took, as
    /// `(operator type, node name or "#index", ms)` in the order they ran (for
    /// `might run --profile`).
    pub fn run_profiled(&self, inputs: HashMap<String, Value>) -> Result<(Outputs, NodeTimes)> {
        let mut prof = Vec::new();
        let out = self.run_inner(inputs, Some(&mut prof))?;
        Ok((out, prof))
    }

    fn run_inner(
        &self,
        inputs: HashMap<String, Value>,
        mut prof: Option<&mut NodeTimes>,
    ) -> Result<Vec<(String, Value)>> {
        let _guard = crate::no_grad();
        let declared = self.inputs();
        let mut env: HashMap<String, Value> = HashMap::new();
        for info in &declared {
            let v = inputs.get(&info.name).ok_or_else(|| {
                let names: Vec<&str> = declared.iter().map(|i| i.name.as_str()).collect();
                Error::invalid(
                    "onnx",
                    format!(
                        "missing input '{}' (the model takes {})",
                        info.name,
                        names.join(", ")
                    ),
                )
            })?;
            check_dims(info, v)?;
            let elem = match dtype_of_name(&info.elem) {
                Some((e, dt)) if dt == v.tensor.dtype() => e,
                Some((e, _)) => {
                    return Err(Error::dtype(
                        "onnx",
                        format!(
                            "input '{}' is {}, the model declares {}",
                            info.name,
                            v.tensor.dtype(),
                            elem_name(e)
                        ),
                    ))
                }
                None => v.elem,
            };
            env.insert(
                info.name.clone(),
                Value::typed(v.tensor.to_device(self.device)?, elem),
            );
        }
        for k in inputs.keys() {
            if !declared.iter().any(|i| &i.name == k) {
                return Err(Error::invalid("onnx", format!("unknown input '{k}'")));
            }
        }
        for (k, &i) in self.plan.iter().enumerate() {
            let node = &self.graph.node[i];
            let ins: Vec<Option<Value>> = node
                .input
                .iter()
                .map(|n| {
                    if n.is_empty() {
                        None
                    } else {
                        env.get(n).or_else(|| self.init.get(n)).cloned()
                    }
                })
                .collect();
            if let Some(missing) = node
                .input
                .iter()
                .zip(&ins)
                .find(|(n, v)| !n.is_empty() && v.is_none())
            {
                return Err(self.node_err(
                    node,
                    format!("input '{}' is not produced by any earlier node", missing.0),
                ));
            }
            let nd = Node {
                proto: node,
                opset: self.opset,
            };
            let t0 = prof.is_some().then(std::time::Instant::now);
            let outs = if super::control::is_control(nd.op()) {
                self.run_control(node, &ins, &env)
            } else {
                (self.ops[i])(&nd, &ins)
            }
            .map_err(|e| self.node_err(node, e.to_string()))?;
            if let (Some(p), Some(t0)) = (prof.as_deref_mut(), t0) {
                let name = match node.name.as_deref().unwrap_or("") {
                    "" => format!("#{i}"),
                    n => n.to_string(),
                };
                p.push((nd.op().to_string(), name, t0.elapsed().as_secs_f64() * 1e3));
            }
            for (name, v) in node.output.iter().zip(outs) {
                if !name.is_empty() {
                    env.insert(name.clone(), v);
                }
            }
            for f in &self.frees[k] {
                env.remove(f);
            }
        }
        self.graph
            .output
            .iter()
            .map(|o| {
                let name = o.name.clone().unwrap_or_default();
                let v = env
                    .get(&name)
                    .or_else(|| self.init.get(&name))
                    .cloned()
                    .ok_or_else(|| {
                        Error::invalid("onnx", format!("output '{name}' is never produced"))
                    })?;
                Ok((name, v))
            })
            .collect()
    }

    pub(super) fn node_err(&self, node: &NodeProto, msg: String) -> Error {
        let name = node
            .name
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(|s| format!(" '{s}'"))
            .unwrap_or_default();
        Error::invalid(
            "onnx",
            format!(
                "node{name} ({}): {msg}",
                node.op_type.as_deref().unwrap_or("")
            ),
        )
    }
}

/// The ONNX element type named `name` and the dtype it computes in.
fn dtype_of_name(name: &str) -> Option<(i32, crate::DType)> {
    (1..=26)
        .find(|&e| elem_name(e) == name)
        .and_then(|e| dtype_of(e).map(|d| (e, d)))
}

/// Every name a node reads: its inputs, and those of the nodes of its subgraphs (an `If`
/// branch reads the enclosing scope).
fn node_reads<'a>(n: &'a NodeProto, out: &mut Vec<&'a str>) {
    out.extend(n.input.iter().map(String::as_str));
    for a in &n.attribute {
        for g in a.g.iter().chain(&a.graphs) {
            for sn in &g.node {
                node_reads(sn, out);
            }
        }
    }
}

/// Operators of a subgraph (and its own subgraphs) that might lacks.
fn subgraph_missing(g: &GraphProto, missing: &mut BTreeMap<String, usize>) {
    for n in &g.node {
        let op = n.op_type.clone().unwrap_or_default();
        let dom = n.domain.clone().unwrap_or_default();
        if !(dom.is_empty() || dom == "ai.onnx") || lookup(&op).is_none() {
            *missing
                .entry(if dom.is_empty() {
                    op
                } else {
                    format!("{dom}.{op}")
                })
                .or_insert(0) += 1;
        }
        for a in &n.attribute {
            for sg in a.g.iter().chain(&a.graphs) {
                subgraph_missing(sg, missing);
            }
        }
    }
}

fn check_dims(info: &IoInfo, v: &Value) -> Result<()> {
    if info.dims.is_empty() && v.dims().is_empty() {
        return Ok(());
    }
    let fixed: Vec<Option<usize>> = info.dims.iter().map(|d| d.parse().ok()).collect();
    let ok = fixed.len() == v.dims().len()
        && fixed
            .iter()
            .zip(v.dims())
            .all(|(f, &d)| f.is_none_or(|f| f == d));
    if !info.dims.is_empty() && !ok {
        return Err(Error::shape(
            "onnx",
            format!(
                "input '{}' has shape {:?}, the model declares [{}]",
                info.name,
                v.dims(),
                info.dims.join(", ")
            ),
        ));
    }
    Ok(())
}
