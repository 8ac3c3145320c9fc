//! ONNX operators on might tensors: each is a function from a node (its attributes and the
//! default-domain opset) and its input values to its output values. [`lookup`] is the one
//! table from `op_type` to function; the graph checks every node against it before running.

mod attention;
mod cast;
mod detect;
mod elementwise;
mod misc;
mod nn;
mod quant;
mod reduce;
mod resize;
mod rnn;
mod rotary;
mod sample;
mod shape;
mod spectral;
mod stateful;
mod unique;
mod unpool;

use super::proto::{AttributeProto, NodeProto};
use super::value::{decode, DataDir, Value};
use crate::{Error, Result, Tensor};

/// One node being run: its proto and the model's default-domain opset.
pub struct Node<'a> {
    pub proto: &'a NodeProto,
    pub opset: i64,
}

/// An operator: inputs (`None` for an omitted optional input) to outputs.
pub type OpFn = fn(&Node, &[Option<Value>]) -> Result<Vec<Value>>;

impl Node<'_> {
    pub fn op(&self) -> &str {
        self.proto.op_type.as_deref().unwrap_or("")
    }

    fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.proto
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some(name))
    }

    /// Integer attribute, or `default`.
    pub fn i(&self, name: &str, default: i64) -> i64 {
        self.attr(name).and_then(|a| a.i).unwrap_or(default)
    }

    /// Float attribute, or `default`.
    pub fn f(&self, name: &str, default: f32) -> f32 {
        self.attr(name).and_then(|a| a.f).unwrap_or(default)
    }

    /// String attribute, or `default`.
    pub fn s(&self, name: &str, default: &str) -> String {
        self.attr(name)
            .and_then(|a| a.s.as_deref())
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_else(|| default.to_string())
    }

    /// Integer-list attribute (`None` when absent).
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr(name).map(|a| a.ints.clone())
    }

    /// Float-list attribute (`None` when absent).
    pub fn floats(&self, name: &str) -> Option<Vec<f32>> {
        self.attr(name).map(|a| a.floats.clone())
    }

    /// String-list attribute (`None` when absent).
    pub fn attr_strings(&self, name: &str) -> Option<Vec<String>> {
        self.attr(name).map(|a| {
            a.strings
                .iter()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect()
        })
    }

    /// Tensor attribute (`None` when absent).
    pub fn tensor(&self, name: &str) -> Result<Option<Value>> {
        match self.attr(name).and_then(|a| a.t.as_ref()) {
            Some(t) => Ok(Some(decode(t, &DataDir(None))?)),
            None => Ok(None),
        }
    }

    pub fn has(&self, name: &str) -> bool {
        self.attr(name).is_some()
    }

    /// An error naming this node.
    pub fn err(&self, msg: impl Into<String>) -> Error {
        Error::invalid(self.op(), msg)
    }
}

/// Input `i`, which the operator requires.
pub fn req<'v>(node: &Node, ins: &'v [Option<Value>], i: usize) -> Result<&'v Value> {
    ins.get(i)
        .and_then(|v| v.as_ref())
        .ok_or_else(|| node.err(format!("input {i} is required")))
}

/// Optional input `i`.
pub fn opt(ins: &[Option<Value>], i: usize) -> Option<&Value> {
    ins.get(i).and_then(|v| v.as_ref())
}

/// Axis `a` (negative counts from the end) of a rank-`rank` tensor.
pub fn axis(node: &Node, a: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if a < -r || a >= r.max(1) {
        return Err(node.err(format!("axis {a} out of range for rank {rank}")));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

/// One output with the element type of `like`.
pub fn same(t: Tensor, like: &Value) -> Result<Vec<Value>> {
    Ok(vec![Value::typed(t, like.elem)])
}

/// One output whose ONNX type follows its dtype.
pub fn one(t: Tensor) -> Result<Vec<Value>> {
    Ok(vec![Value::new(t)])
}

/// The operator for `op_type` in the default domain, if might has it.
pub fn lookup(op_type: &str) -> Option<OpFn> {
    elementwise::lookup(op_type)
        .or_else(|| cast::lookup(op_type))
        .or_else(|| shape::lookup(op_type))
        .or_else(|| reduce::lookup(op_type))
        .or_else(|| nn::lookup(op_type))
        .or_else(|| attention::lookup(op_type))
        .or_else(|| resize::lookup(op_type))
        .or_else(|| misc::lookup(op_type))
        .or_else(|| rnn::lookup(op_type))
        .or_else(|| sample::lookup(op_type))
        .or_else(|| detect::lookup(op_type))
        .or_else(|| rotary::lookup(op_type))
        .or_else(|| quant::lookup(op_type))
        .or_else(|| spectral::lookup(op_type))
        .or_else(|| unique::lookup(op_type))
        .or_else(|| stateful::lookup(op_type))
        .or_else(|| unpool::lookup(op_type))
}
