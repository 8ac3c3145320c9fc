//! `--distributed`: the CLI's view of an MPI job (feature `mpi`). Without the feature, or
//! without `mpirun`, a job of one process that does nothing extra.

use crate::train::Res;
#[cfg(feature = "mpi")]
use might::distributed::{Distributed, DistributedDataParallel};
use might::Tensor;
#[cfg(feature = "mpi")]
use std::rc::Rc;

#[derive(Default)]
pub struct Job {
    #[cfg(feature = "mpi")]
    dist: Option<Rc<Distributed>>,
    #[cfg(feature = "mpi")]
    ddp: Option<DistributedDataParallel>,
}

impl Job {
    /// Join the MPI job when `distributed` (rank and world size from `mpirun`).
    pub fn init(distributed: bool) -> Res<Job> {
        if !distributed {
            return Ok(Job::default());
        }
        #[cfg(feature = "mpi")]
        return Ok(Job {
            dist: Some(Rc::new(Distributed::init()?)),
            ddp: None,
        });
        #[cfg(not(feature = "mpi"))]
        Err(crate::train::CliError(
            "--distributed: this build of might has no MPI support (build with --features mpi)"
                .into(),
        ))
    }

    /// Take part in data-parallel training of `params`: rank 0's values go to every rank.
    pub fn attach(&mut self, params: Vec<Tensor>) -> Res<()> {
        #[cfg(feature = "mpi")]
        if let Some(d) = &self.dist {
            self.ddp = Some(DistributedDataParallel::new(d.clone(), params)?);
        }
        let _ = params;
        Ok(())
    }

    pub fn rank(&self) -> usize {
        #[cfg(feature = "mpi")]
        if let Some(d) = &self.dist {
            return d.rank();
        }
        0
    }
    pub fn world(&self) -> usize {
        #[cfg(feature = "mpi")]
        if let Some(d) = &self.dist {
            return d.world_size();
        }
        1
    }
    /// Rank 0 writes checkpoints, logs and the JSON line.
    pub fn is_main(&self) -> bool {
        self.rank() == 0
    }

    /// Average the gradients over the ranks (after the backward, before the step).
    pub fn sync_gradients(&self) -> Res<()> {
        #[cfg(feature = "mpi")]
        if let Some(d) = &self.ddp {
            d.sync_gradients()?;
        }
        Ok(())
    }

    /// Element-wise sums over the ranks (metrics).
    pub fn sum(&self, v: &mut [f64]) -> Res<()> {
        #[cfg(feature = "mpi")]
        if let Some(d) = &self.dist {
            d.all_reduce_f64(v)?;
        }
        let _ = v;
        Ok(())
    }

    /// Seconds spent averaging gradients so far.
    pub fn comm_seconds(&self) -> f64 {
        #[cfg(feature = "mpi")]
        if let Some(d) = &self.ddp {
            return d.comm_seconds();
        }
        0.0
    }

    /// `"world_size":N,"global_batch":B·N,"allreduce_fraction":F` for the JSON line.
    pub fn json_fields(&self, batch: usize, train_secs: f64) -> String {
        format!(
            "\"world_size\":{},\"global_batch\":{},\"allreduce_fraction\":{:.4}",
            self.world(),
            batch * self.world(),
            self.comm_seconds() / train_secs.max(1e-9)
        )
    }
}
