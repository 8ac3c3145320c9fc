//! Data-parallel training over MPI (feature `mpi`): every rank holds the whole model, trains on
//! its own share of each batch, and averages gradients with the others before the optimizer
//! step, as PyTorch's `DistributedDataParallel` does. MPI is the transport every cluster has;
//! `mpirun -np N program` starts the ranks.
//!
//! Without `mpirun` (no MPI environment) [`Distributed::init`] gives a world of one and every
//! collective is a no-op, so a program behaves as it does without this module.
//!
//! Collectives move tensors through host memory (gradients of a CPU model are there already).
//! Each waits with a deadline ([`Distributed::set_timeout`], or `MIGHT_DIST_TIMEOUT` seconds,
//! default 300): a rank that died or hangs
//! would otherwise leave the others blocked forever, so on expiry the waiting rank prints a
//! clear error and aborts the whole job (`MPI_Abort`; an MPI request cannot be abandoned).

mod ddp;

pub use ddp::DistributedDataParallel;

use crate::{DType, Error, ErrorKind, Result, Tensor};
use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::time::{Duration, Instant};

/// How [`Distributed::all_reduce`] combines the ranks' values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Mean,
}

/// This process's place in the job: its rank, the world size, and the communicator.
pub struct Distributed {
    comm: Option<(mpi::environment::Universe, SimpleCommunicator)>,
    timeout: Duration,
}

/// Whether this process was started by an MPI launcher (`mpirun`, `srun`, ...).
fn under_mpi() -> bool {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_RANK",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
}

#[track_caller]
fn comm_error(op: &str, msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Device, op, msg)
}

impl Distributed {
    /// Join the job from the MPI environment; a world of one when not started by `mpirun`.
    #[track_caller]
    pub fn init() -> Result<Distributed> {
        let comm = if under_mpi() {
            let universe = mpi::initialize()
                .ok_or_else(|| comm_error("Distributed::init", "MPI is already initialized"))?;
            let world = universe.world();
            Some((universe, world))
        } else {
            None
        };
        // MIGHT_DIST_TIMEOUT: seconds a collective waits (default 300)
        let secs = std::env::var("MIGHT_DIST_TIMEOUT")
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .unwrap_or(300.0);
        Ok(Distributed {
            comm,
            timeout: Duration::from_secs_f64(secs),
        })
    }

    /// This process's rank, from 0.
    pub fn rank(&self) -> usize {
        self.comm.as_ref().map_or(0, |c| c.1.rank() as usize)
    }
    /// How many processes take part.
    pub fn world_size(&self) -> usize {
        self.comm.as_ref().map_or(1, |c| c.1.size() as usize)
    }
    /// Rank 0, the one that writes checkpoints, logs and results.
    pub fn is_main(&self) -> bool {
        self.rank() == 0
    }
    /// How long a collective waits for the other ranks before aborting the job.
    pub fn set_timeout(&mut self, t: Duration) {
        self.timeout = t;
    }

    /// Wait for `req` to complete (`test` gives it back while pending), or abort the job
    /// naming `op` after the timeout.
    fn wait<R>(
        &self,
        op: &str,
        world: &SimpleCommunicator,
        req: R,
        test: impl Fn(R) -> std::result::Result<mpi::point_to_point::Status, R>,
    ) {
        let t0 = Instant::now();
        let mut req = req;
        loop {
            match test(req) {
                Ok(_) => return,
                Err(r) => req = r,
            }
            if t0.elapsed() > self.timeout {
                eprintln!(
                    "error: {op}: rank {} got no answer from the other ranks in {:.0} s (did a rank die?); aborting the job",
                    world.rank(),
                    self.timeout.as_secs_f64()
                );
                world.abort(3);
            }
            std::thread::yield_now();
        }
    }

    /// Element-wise sum over the ranks of `v`, in place.
    fn all_reduce_sum<T: Equivalence + Clone>(&self, v: &mut [T]) -> Result<()> {
        let Some((_, world)) = &self.comm else {
            return Ok(());
        };
        let send = v.to_vec();
        let sum = SystemOperation::sum();
        mpi::request::scope(|scope| {
            let req = world.immediate_all_reduce_into(scope, &send[..], &mut v[..], sum);
            self.wait("all_reduce", world, req, |r| r.test());
        });
        Ok(())
    }

    /// Element-wise sum over the ranks of `v` (gradients), in place.
    pub fn all_reduce_f32(&self, v: &mut [f32]) -> Result<()> {
        self.all_reduce_sum(v)
    }

    /// Element-wise sum over the ranks of `v` (metrics: counts and loss sums), in place.
    pub fn all_reduce_f64(&self, v: &mut [f64]) -> Result<()> {
        self.all_reduce_sum(v)
    }

    /// `v` replaced by rank `root`'s values.
    pub fn broadcast_f32(&self, v: &mut [f32], root: usize) -> Result<()> {
        let Some((_, world)) = &self.comm else {
            return Ok(());
        };
        if root >= self.world_size() {
            return Err(comm_error(
                "broadcast",
                format!(
                    "root {root} is not a rank of a world of {}",
                    self.world_size()
                ),
            ));
        }
        mpi::request::scope(|scope| {
            let req = world
                .process_at_rank(root as i32)
                .immediate_broadcast_into(scope, &mut v[..]);
            self.wait("broadcast", world, req, |r| r.test());
        });
        Ok(())
    }

    /// Wait until every rank gets here.
    pub fn barrier(&self) -> Result<()> {
        let Some((_, world)) = &self.comm else {
            return Ok(());
        };
        let req = world.immediate_barrier();
        self.wait("barrier", world, req, |r| r.test());
        Ok(())
    }

    /// The sum (or mean) over the ranks of `t` (f32 or f64), as a new tensor on `t`'s device.
    pub fn all_reduce(&self, t: &Tensor, op: ReduceOp) -> Result<Tensor> {
        let scale = match op {
            ReduceOp::Sum => 1.0,
            ReduceOp::Mean => 1.0 / self.world_size() as f64,
        };
        let out = match t.dtype() {
            DType::F32 => {
                let mut v = t.to_vec::<f32>()?;
                self.all_reduce_f32(&mut v)?;
                Tensor::from_vec(v, t.shape())?
            }
            DType::F64 => {
                let mut v = t.to_vec::<f64>()?;
                self.all_reduce_f64(&mut v)?;
                Tensor::from_vec(v, t.shape())?
            }
            d => {
                return Err(Error::dtype(
                    "all_reduce",
                    format!("expected an f32 or f64 tensor, got {d}"),
                ))
            }
        };
        let out = if scale == 1.0 {
            out
        } else {
            out.mul_scalar(scale)?
        };
        out.to_device(t.device())
    }

    /// `t` (f32) overwritten in place with rank `root`'s values.
    pub fn broadcast_(&self, t: &Tensor, root: usize) -> Result<()> {
        if self.world_size() == 1 {
            return Ok(());
        }
        let mut v = t.to_dtype(DType::F32)?.to_vec::<f32>()?;
        self.broadcast_f32(&mut v, root)?;
        let src = Tensor::from_vec(v, t.shape())?
            .to_dtype(t.dtype())?
            .to_device(t.device())?;
        let _g = crate::no_grad();
        t.copy_(&src).map(drop)
    }
}
