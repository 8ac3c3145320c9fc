//! `DataLoader`: batches of a `Dataset` in (optionally shuffled) order, built ahead
//! on a background thread so that reading/augmenting overlaps with the training step.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::queue::Queue;
use super::Dataset;
use crate::{Device, Error, Generator, Result, Tensor};

/// Iterates a dataset in batches (`torch.utils.data.DataLoader`).
///
/// Each call to [`DataLoader::iter`] is one epoch. With `shuffle`, epoch `e` visits the samples
/// in the permutation drawn from `Generator::new(mix(seed, e))`, so the order depends only on
/// the seed and the epoch number — a resumed run (`set_epoch`) sees the same batches.
pub struct DataLoader {
    dataset: Arc<dyn Dataset>,
    batch_size: usize,
    shuffle: bool,
    drop_last: bool,
    seed: u64,
    epoch: AtomicU64,
    prefetch: usize,
    device: Device,
    /// `(rank, world)`: this process's share of each epoch (see [`DataLoader::with_shard`]).
    shard: (usize, usize),
}

impl DataLoader {
    /// A loader over `dataset`. A `batch_size` of 0 makes iteration yield one error.
    pub fn new(
        dataset: Arc<dyn Dataset>,
        batch_size: usize,
        shuffle: bool,
        drop_last: bool,
        seed: u64,
    ) -> DataLoader {
        DataLoader {
            dataset,
            batch_size,
            shuffle,
            drop_last,
            seed,
            epoch: AtomicU64::new(0),
            prefetch: 8,
            device: Device::Cpu,
            shard: (0, 1),
        }
    }

    /// How many batches to build ahead on the background thread (default 8; 0: build on the
    /// caller's thread, no extra thread). The thread refills the queue when it has drained to
    /// half, so it wakes once per `batches / 2` steps rather than every step. More than an
    /// epoch's batches is the same as an epoch's batches.
    pub fn with_prefetch(mut self, batches: usize) -> DataLoader {
        self.prefetch = batches;
        self
    }

    /// Deliver the batches on `device` (the model's): datasets build them on the host, and the
    /// loader thread moves them, so the copy overlaps with the training step.
    pub fn with_device(mut self, device: Device) -> DataLoader {
        self.device = device;
        self
    }

    /// Where the batches are delivered.
    pub fn device(&self) -> Device {
        self.device
    }

    pub fn dataset(&self) -> &Arc<dyn Dataset> {
        &self.dataset
    }
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Take only rank `rank`'s share of each epoch in a job of `world` processes (PyTorch's
    /// `DistributedSampler`): the epoch's order (the same on every rank: same seed), padded by
    /// repeating its start to a multiple of `world`, then every `world`-th sample from
    /// `rank`. The shares never overlap, and batch `k` of all ranks together is batch `k` of
    /// one process with a `world` times larger batch. A `rank` outside the world gives an
    /// empty loader.
    pub fn with_shard(mut self, rank: usize, world: usize) -> DataLoader {
        self.shard = (rank, world.max(1));
        self
    }

    /// Samples in this process's share of an epoch.
    fn shard_len(&self) -> usize {
        let (rank, world) = self.shard;
        match rank < world {
            true => self.dataset.len().div_ceil(world),
            false => 0,
        }
    }

    /// Number of batches in one epoch.
    pub fn len(&self) -> usize {
        let n = self.shard_len();
        match self.batch_size {
            0 => 0,
            b if self.drop_last => n / b,
            b => n.div_ceil(b),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The epoch the next `iter()` will run (incremented by each `iter()`).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }
    /// Set the epoch number of the next `iter()` (to resume a run).
    pub fn set_epoch(&self, epoch: u64) {
        self.epoch.store(epoch, Ordering::SeqCst);
    }

    /// The sample order of `epoch` (this process's share of it, see [`Self::with_shard`]).
    pub fn epoch_order(&self, epoch: u64) -> Vec<usize> {
        let order = self.full_order(epoch);
        let (rank, world) = self.shard;
        if world == 1 || order.is_empty() {
            return order;
        }
        let total = self.shard_len() * world;
        (rank..total)
            .step_by(world)
            .map(|i| order[i % order.len()])
            .collect()
    }

    /// The order of the whole epoch (the same on every rank).
    fn full_order(&self, epoch: u64) -> Vec<usize> {
        let n = self.dataset.len();
        if self.shuffle {
            let mixed = self
                .seed
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(epoch.wrapping_mul(0xD1B5_4A32_D192_ED03));
            Generator::new(mixed).permutation(n)
        } else {
            (0..n).collect()
        }
    }

    /// The index lists of each batch of `epoch`.
    pub fn epoch_batches(&self, epoch: u64) -> Vec<Vec<usize>> {
        if self.batch_size == 0 {
            return vec![];
        }
        let order = self.epoch_order(epoch);
        order
            .chunks(self.batch_size)
            .filter(|c| !self.drop_last || c.len() == self.batch_size)
            .map(|c| c.to_vec())
            .collect()
    }

    /// One epoch of `(inputs, targets)` batches.
    pub fn iter(&self) -> DataLoaderIter {
        let epoch = self.epoch.fetch_add(1, Ordering::SeqCst);
        if self.batch_size == 0 {
            return DataLoaderIter {
                inner: Inner::Failed(Some(Error::invalid(
                    "DataLoader",
                    "batch_size must be at least 1",
                ))),
            };
        }
        let batches = self.epoch_batches(epoch);
        let ds = self.dataset.clone();
        let device = self.device;
        if self.prefetch == 0 {
            return DataLoaderIter {
                inner: Inner::Sync {
                    ds,
                    batches: batches.into_iter(),
                    device,
                },
            };
        }
        // (never more room than the epoch has batches: a huge prefetch asks for nothing extra)
        let queue = Arc::new(Queue::new(self.prefetch.min(batches.len())));
        let tx = queue.clone();
        let handle = std::thread::Builder::new()
            .name("might-dataloader".into())
            .spawn(move || {
                /// Tells the iterator there is no more, also if `get_batch` panics.
                struct Finish(Arc<BatchQueue>);
                impl Drop for Finish {
                    fn drop(&mut self) {
                        self.0.finish()
                    }
                }
                let tx = Finish(tx);
                for b in batches {
                    // A closed queue means the iterator was dropped: stop early.
                    if !tx.0.push(fetch(&*ds, &b, device)) {
                        break;
                    }
                }
            });
        match handle {
            Ok(h) => DataLoaderIter {
                inner: Inner::Thread {
                    rx: Some(queue),
                    handle: Some(h),
                },
            },
            Err(e) => DataLoaderIter {
                inner: Inner::Failed(Some(Error::io("DataLoader", e))),
            },
        }
    }
}

impl IntoIterator for &DataLoader {
    type Item = Result<(Tensor, Tensor)>;
    type IntoIter = DataLoaderIter;
    fn into_iter(self) -> DataLoaderIter {
        self.iter()
    }
}

/// Batch `idx` of `ds` on `device`.
fn fetch(ds: &dyn Dataset, idx: &[usize], device: Device) -> Result<(Tensor, Tensor)> {
    let (x, y) = ds.get_batch(idx)?;
    Ok((x.to_device(device)?, y.to_device(device)?))
}

/// Batches built ahead by the loader thread.
type BatchQueue = Queue<Result<(Tensor, Tensor)>>;

/// The batches of one epoch; see [`DataLoader::iter`].
pub struct DataLoaderIter {
    inner: Inner,
}

enum Inner {
    Sync {
        ds: Arc<dyn Dataset>,
        batches: std::vec::IntoIter<Vec<usize>>,
        device: Device,
    },
    Thread {
        rx: Option<Arc<BatchQueue>>,
        handle: Option<JoinHandle<()>>,
    },
    Failed(Option<Error>),
}

impl Iterator for DataLoaderIter {
    type Item = Result<(Tensor, Tensor)>;
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            Inner::Sync {
                ds,
                batches,
                device,
            } => batches.next().map(|b| fetch(&**ds, &b, *device)),
            Inner::Thread { rx, handle } => {
                let got = rx.as_ref().and_then(|q| q.pop());
                if got.is_none() {
                    rx.take();
                    if let Some(h) = handle.take() {
                        if h.join().is_err() {
                            return Some(Err(Error::invalid(
                                "DataLoader",
                                "the loader thread panicked",
                            )));
                        }
                    }
                }
                got
            }
            Inner::Failed(e) => e.take().map(Err),
        }
    }
}

impl Drop for DataLoaderIter {
    fn drop(&mut self) {
        if let Inner::Thread { rx, handle } = &mut self.inner {
            // Closing the queue first unblocks a worker waiting for room.
            if let Some(q) = rx.take() {
                q.close();
            }
            if let Some(h) = handle.take() {
                let _ = h.join();
            }
        }
    }
}
