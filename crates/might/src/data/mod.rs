//! Datasets and the data loader: reading MNIST-style IDX files, CIFAR-10 binaries, image
//! folders and text, and turning them into shuffled f32 batches on a background thread.
//!
//! Datasets keep their samples compactly in memory (u8 pixels) and build a whole batch in one
//! pass (`get_batch`): gather, scale and normalise are fused, no per-sample tensors are made.
//!
//! ```
//! use std::sync::Arc;
//! use might::data::{DataLoader, Dataset, TensorDataset};
//! use might::Tensor;
//! let x = Tensor::from_vec((0..10).map(|v| v as f32).collect::<Vec<_>>(), [5, 2])?;
//! let y = Tensor::new(&[0i64, 1, 0, 1, 1]);
//! let ds = Arc::new(TensorDataset::new(x, y)?);
//! let loader = DataLoader::new(ds, 2, true, false, 42);
//! let sizes: Vec<usize> = loader.iter().map(|b| b.unwrap().0.dims()[0]).collect();
//! assert_eq!(sizes, vec![2, 2, 1]);
//! # Ok::<(), might::Error>(())
//! ```

pub mod cifar;
pub mod idx;
#[cfg(feature = "image")]
pub mod image_folder;
pub mod loader;
pub mod mnist;
mod queue;
pub mod text;
pub mod transforms;

pub use cifar::Cifar10;
#[cfg(feature = "image")]
pub use image_folder::ImageFolder;
pub use loader::{DataLoader, DataLoaderIter};
pub use mnist::Mnist;
pub use text::CharDataset;
pub use transforms::Transform;

use crate::backend::cpu::prefetch::prefetch;
use crate::backend::cpu::{simd, threads};
use crate::{Error, Result, Tensor};

/// A collection of samples addressable by index, batched by the dataset itself.
///
/// `get_batch(idx)` returns `(inputs, targets)` with the batch as the first dim of both; it
/// must be deterministic for a given index list (random augmentations draw from a seeded
/// generator owned by the dataset).
pub trait Dataset: Send + Sync {
    /// Number of samples.
    fn len(&self) -> usize;
    /// Inputs and targets for the samples at `idx`, stacked along a new first dim.
    fn get_batch(&self, idx: &[usize]) -> Result<(Tensor, Tensor)>;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A dataset over two in-memory tensors whose first dims are samples (`torch.utils.data.TensorDataset`).
#[derive(Clone, Debug)]
pub struct TensorDataset {
    x: Tensor,
    y: Tensor,
}

impl TensorDataset {
    #[track_caller]
    pub fn new(x: Tensor, y: Tensor) -> Result<Self> {
        if x.rank() == 0 || y.rank() == 0 || x.dims()[0] != y.dims()[0] {
            return Err(Error::shape(
                "TensorDataset",
                format!(
                    "inputs {} and targets {} must have the same first dim",
                    x.shape(),
                    y.shape()
                ),
            ));
        }
        Ok(TensorDataset { x, y })
    }
}

impl Dataset for TensorDataset {
    fn len(&self) -> usize {
        self.x.dims()[0]
    }
    fn get_batch(&self, idx: &[usize]) -> Result<(Tensor, Tensor)> {
        let n = self.len();
        if let Some(&bad) = idx.iter().find(|&&i| i >= n) {
            return Err(Error::index(
                "TensorDataset",
                format!("sample {bad} out of range for {n} samples"),
            ));
        }
        let ids = Tensor::new(&idx.iter().map(|&i| i as i64).collect::<Vec<_>>());
        Ok((self.x.index_select(0, &ids)?, self.y.index_select(0, &ids)?))
    }
}

/// Check that every index is below `n` (datasets call this before gathering).
#[track_caller]
pub(crate) fn check_indices(op: &str, idx: &[usize], n: usize) -> Result<()> {
    match idx.iter().find(|&&i| i >= n) {
        Some(&bad) => Err(Error::index(
            op,
            format!("sample {bad} out of range for {n} samples"),
        )),
        None => Ok(()),
    }
}

/// Gather u8 images `[n, c, h, w]` (flat, sample-major) into an f32 batch `[b, c, h, w]`,
/// scaling to [0, 1] and applying `transforms` in the same pass.
pub(crate) fn gather_images(
    op: &str,
    images: &[u8],
    chw: [usize; 3],
    idx: &[usize],
    transforms: &transforms::Pipeline,
) -> Result<Tensor> {
    let [c, h, w] = chw;
    let per = c * h * w;
    check_indices(op, idx, images.len() / per.max(1))?;
    // every element is written below; a reused buffer saves a batch's worth of page faults
    let mut out = crate::backend::cpu::pool::output::<f32>(idx.len() * per);
    let (scale, shift) = transforms.channel_affine(c);
    // One sample per share, on the kernel threads; the u8 -> f32 affine in the widest SIMD
    // build (it was ~10 % of an MNIST MLP step on the main thread as a baseline-SSE2 loop).
    // A batch is random samples of an array larger than the caches, so each image waited for
    // memory line after line (~0.8 ns per pixel): convert one while the image `AHEAD` places
    // on is fetched (an epoch of random 64-image MNIST batches at one thread: 26-27 -> 8.3 ms;
    // 4 ahead: 10-10.5 ms).
    const AHEAD: usize = 8;
    let image = |k: usize| {
        idx.get(k)
            .map_or(&[][..], |&i| &images[i * per..(i + 1) * per])
    };
    for k in 0..AHEAD {
        prefetch(image(k));
    }
    let convert = |dst: &mut [f32], k: usize| {
        prefetch(image(k + AHEAD));
        let src = image(k);
        for ch in 0..c {
            let (a, b) = (scale[ch], shift[ch]);
            let (s, d) = (
                &src[ch * h * w..(ch + 1) * h * w],
                &mut dst[ch * h * w..(ch + 1) * h * w],
            );
            simd::run(
                #[inline(always)]
                || {
                    for (o, &v) in d.iter_mut().zip(s) {
                        *o = v as f32 * a + b;
                    }
                },
            );
        }
    };
    if per > 0 && threads::parallel(out.len()) {
        threads::for_each_chunk(&mut out, per, |k, dst| convert(dst, k));
    } else {
        for (k, dst) in out.chunks_exact_mut(per.max(1)).enumerate() {
            convert(dst, k);
        }
    }
    transforms.apply_random(&mut out, chw);
    Tensor::from_vec(out, [idx.len(), c, h, w])
}

/// Class labels (u8) of the samples at `idx` as an i64 tensor.
pub(crate) fn gather_labels(labels: &[u8], idx: &[usize]) -> Tensor {
    Tensor::new(&idx.iter().map(|&i| labels[i] as i64).collect::<Vec<_>>())
}
