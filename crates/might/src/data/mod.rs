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

use crate::storage::Storage;
use crate::{Device, Error, Result, Tensor};

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
/// scaling to [0, 1] and normalising in the same pass (a backend kernel); random crops and
/// flips move the u8 pixels first (they commute with the per-channel affine: a padded pixel
/// is a 0, whatever the normalisation makes of it).
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
    let (scale, shift) = transforms.channel_affine(c);
    let image = |i: usize| &images[i * per..(i + 1) * per];
    let moved: Vec<Vec<u8>>;
    let samples: Vec<&[u8]> = if transforms.has_random() {
        moved = transforms.apply_random(idx.iter().map(|&i| image(i).to_vec()).collect(), chw);
        moved.iter().map(Vec::as_slice).collect()
    } else {
        idx.iter().map(|&i| image(i)).collect()
    };
    let batch = Storage::from_u8_images(Device::Cpu, &samples, c, &scale, &shift)?;
    Ok(Tensor::from_storage(batch, [idx.len(), c, h, w]))
}

/// Class labels (u8) of the samples at `idx` as an i64 tensor.
pub(crate) fn gather_labels(labels: &[u8], idx: &[usize]) -> Tensor {
    Tensor::new(&idx.iter().map(|&i| labels[i] as i64).collect::<Vec<_>>())
}
