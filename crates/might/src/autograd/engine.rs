//! The backward pass: topological sort, gradient accumulation, freeing nodes as we go.

use super::no_grad;
use crate::tensor::TensorId;
use crate::{Error, ErrorKind, Result, Tensor};
use std::collections::{HashMap, HashSet};

/// Options of a backward pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct BackwardOptions {
    /// Keep the recorded graph so `backward` can run through it again.
    pub retain_graph: bool,
}

/// Tensors reachable from `root` through recorded nodes, in topological order (inputs after
/// the outputs that use them). Iterative, so deep graphs cannot overflow the stack.
fn topo_order(root: &Tensor) -> Vec<Tensor> {
    let mut order = Vec::new();
    let mut visited: HashSet<TensorId> = HashSet::new();
    // (tensor, children pushed?)
    let mut stack = vec![(root.clone(), false)];
    while let Some((t, expanded)) = stack.pop() {
        if expanded {
            order.push(t);
            continue;
        }
        if !visited.insert(t.id()) {
            continue;
        }
        let node = t.0.node.lock().unwrap().clone();
        stack.push((t, true));
        if let Some(node) = node {
            for inp in &node.inputs {
                if inp.requires_grad() && !visited.contains(&inp.id()) {
                    stack.push((inp.clone(), false));
                }
            }
        }
    }
    order.reverse(); // post-order reversed: root first
    order
}

/// Run backward from `root` with gradient `grad` (ones for a scalar root when `None`).
#[track_caller]
pub fn backward_with(root: &Tensor, grad: Option<&Tensor>, opts: BackwardOptions) -> Result<()> {
    if !root.requires_grad() {
        return Err(Error::new(
            ErrorKind::Autograd,
            "backward",
            "tensor does not require grad and has no grad_fn (did you forget \
             requires_grad_(true) on the parameters, or run under no_grad?)",
        ));
    }
    let seed = match grad {
        Some(g) => {
            if g.dims() != root.dims() {
                return Err(Error::shape(
                    "backward",
                    format!(
                        "gradient shape {} does not match tensor shape {}",
                        g.shape(),
                        root.shape()
                    ),
                ));
            }
            g.detach()
        }
        None => {
            if root.numel() != 1 {
                return Err(Error::new(
                    ErrorKind::Autograd,
                    "backward",
                    format!(
                        "grad can be implicitly created only for scalar outputs, got shape {}; \
                         use backward_with_grad",
                        root.shape()
                    ),
                ));
            }
            Tensor::ones_like(root)?
        }
    };
    let _guard = no_grad();
    let order = topo_order(root);
    let mut grads: HashMap<TensorId, Tensor> = HashMap::new();
    grads.insert(root.id(), seed);
    for t in order {
        let Some(g) = grads.remove(&t.id()) else {
            continue;
        };
        let node = if opts.retain_graph {
            t.0.node.lock().unwrap().clone()
        } else {
            t.0.node.lock().unwrap().take()
        };
        let Some(node) = node else {
            // a leaf: accumulate into .grad
            let mut slot = t.0.grad.lock().unwrap();
            *slot = Some(match slot.take() {
                None => g.contiguous()?,
                Some(prev) => prev.add(&g)?,
            });
            continue;
        };
        let in_grads = (node.backward)(&g).map_err(|e| {
            Error::new(
                e.kind,
                format!("backward of {}", node.name),
                format!("{}: {}", e.op, e.msg),
            )
        })?;
        debug_assert_eq!(in_grads.len(), node.inputs.len(), "{}", node.name);
        for (inp, ig) in node.inputs.iter().zip(in_grads) {
            let Some(ig) = ig else { continue };
            if !inp.requires_grad() {
                continue;
            }
            if ig.dims() != inp.dims() {
                return Err(Error::shape(
                    "backward",
                    format!(
                        "internal: {} produced a gradient of shape {} for an input of shape {}",
                        node.name,
                        ig.shape(),
                        inp.shape()
                    ),
                ));
            }
            match grads.remove(&inp.id()) {
                None => grads.insert(inp.id(), ig),
                Some(prev) => grads.insert(inp.id(), prev.add(&ig)?),
            };
        }
        // `node` (and the activations its closure saved) is dropped here
    }
    Ok(())
}
