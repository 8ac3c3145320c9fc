//! `DistributedDataParallel`: the same parameters on every rank, gradients averaged in buckets.

use super::Distributed;
use crate::{DType, Error, Result, Tensor};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

/// Elements per gradient bucket (25 MB of f32, PyTorch's default bucket size): a few large
/// messages instead of one per parameter.
const BUCKET_ELEMS: usize = 25 << 18;

/// Wraps a model's parameters for data-parallel training. [`new`](Self::new) copies rank 0's
/// parameters to every rank, so all start equal; after each backward,
/// [`sync_gradients`](Self::sync_gradients) replaces every gradient by its mean over the
/// ranks, so every rank's optimizer takes the same step. With each rank on `B` samples this
/// is the step of one process on the `N·B` samples together.
///
/// The gradients are averaged after the backward pass (the autograd engine has no per-
/// parameter completion hooks to start buckets early), in buckets of about 25 MB.
pub struct DistributedDataParallel {
    dist: Rc<Distributed>,
    params: Vec<Tensor>,
    /// Parameter index ranges of each bucket.
    buckets: Vec<std::ops::Range<usize>>,
    comm_seconds: Cell<f64>,
}

impl DistributedDataParallel {
    /// Broadcast the parameters from rank 0 and plan the gradient buckets. Parameters must
    /// be f32.
    pub fn new(dist: Rc<Distributed>, params: Vec<Tensor>) -> Result<Self> {
        if let Some(p) = params.iter().find(|p| p.dtype() != DType::F32) {
            return Err(Error::dtype(
                "DistributedDataParallel",
                format!("parameters must be f32, got {} {}", p.dtype(), p.shape()),
            ));
        }
        let mut buckets = Vec::new();
        let (mut start, mut elems) = (0, 0);
        for (i, p) in params.iter().enumerate() {
            if elems > 0 && elems + p.numel() > BUCKET_ELEMS {
                buckets.push(start..i);
                (start, elems) = (i, 0);
            }
            elems += p.numel();
        }
        if start < params.len() {
            buckets.push(start..params.len());
        }
        let ddp = DistributedDataParallel {
            dist,
            params,
            buckets,
            comm_seconds: Cell::new(0.0),
        };
        ddp.broadcast_parameters()?;
        Ok(ddp)
    }

    /// The job this model trains in.
    pub fn dist(&self) -> &Rc<Distributed> {
        &self.dist
    }

    /// Seconds spent in collectives so far (the all-reduce share of a step).
    pub fn comm_seconds(&self) -> f64 {
        self.comm_seconds.get()
    }

    /// The number of gradient buckets (one message each per step).
    pub fn num_buckets(&self) -> usize {
        self.buckets.len()
    }

    fn broadcast_parameters(&self) -> Result<()> {
        if self.dist.world_size() == 1 {
            return Ok(());
        }
        let t0 = Instant::now();
        for b in &self.buckets {
            let ps = &self.params[b.clone()];
            let mut flat = Vec::new();
            for p in ps {
                flat.extend(p.to_vec::<f32>()?);
            }
            self.dist.broadcast_f32(&mut flat, 0)?;
            let _g = crate::no_grad();
            let mut at = 0;
            for p in ps {
                let src = Tensor::from_vec(flat[at..at + p.numel()].to_vec(), p.shape())?
                    .to_device(p.device())?;
                p.copy_(&src)?;
                at += p.numel();
            }
        }
        self.comm_seconds
            .set(self.comm_seconds.get() + t0.elapsed().as_secs_f64());
        Ok(())
    }

    /// Replace each parameter's gradient by its mean over the ranks (a missing gradient counts
    /// as zeros, and every rank then holds the mean).
    pub fn sync_gradients(&self) -> Result<()> {
        let world = self.dist.world_size();
        if world == 1 {
            return Ok(());
        }
        let t0 = Instant::now();
        for b in &self.buckets {
            let ps = &self.params[b.clone()];
            let mut flat = Vec::new();
            for p in ps {
                match p.grad() {
                    Some(g) => flat.extend(g.to_dtype(DType::F32)?.to_vec::<f32>()?),
                    None => flat.extend(std::iter::repeat_n(0.0, p.numel())),
                }
            }
            self.dist.all_reduce_f32(&mut flat)?;
            let inv = 1.0 / world as f32;
            let mut at = 0;
            for p in ps {
                let avg: Vec<f32> = flat[at..at + p.numel()].iter().map(|v| v * inv).collect();
                let g = Tensor::from_vec(avg, p.shape())?.to_device(p.device())?;
                p.set_grad(Some(g));
                at += p.numel();
            }
        }
        self.comm_seconds
            .set(self.comm_seconds.get() + t0.elapsed().as_secs_f64());
        Ok(())
    }
}
