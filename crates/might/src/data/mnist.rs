//! MNIST and Fashion-MNIST: 28x28 grey images with labels 0..9, stored as IDX files
//! (`train-images-idx3-ubyte[.gz]`, `train-labels-idx1-ubyte[.gz]`, `t10k-...`).

use std::path::{Path, PathBuf};

use super::idx::read_idx;
use super::transforms::{Pipeline, Transform};
use super::{gather_images, gather_labels, Dataset};
use crate::{Error, Result, Tensor};

/// Class names of Fashion-MNIST, in label order.
pub const FASHION_CLASSES: [&str; 10] = [
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
];

/// Class names of MNIST.
pub const MNIST_CLASSES: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];

/// An MNIST-style dataset held in memory as u8 pixels; batches are `[b, 1, rows, cols]` f32
/// in [0, 1] (then transformed) with i64 labels `[b]`.
#[derive(Clone, Debug)]
pub struct Mnist {
    images: Vec<u8>,
    labels: Vec<u8>,
    rows: usize,
    cols: usize,
    transforms: Pipeline,
}

/// Find `<stem>` or `<stem>.gz` in `dir` (also accepting the `t10k`/`train` names with dots,
/// as some mirrors ship them, e.g. `train-images.idx3-ubyte`).
fn find_file(dir: &Path, stem: &str) -> Option<PathBuf> {
    let dotted = stem.replacen("-idx", ".idx", 1);
    [stem.to_string(), dotted]
        .iter()
        .flat_map(|s| [s.clone(), format!("{s}.gz")])
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

impl Mnist {
    /// Load the training (`train = true`, 60 000 samples) or test split from `dir`.
    #[track_caller]
    pub fn load(dir: impl AsRef<Path>, train: bool) -> Result<Mnist> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(Error::io(
                "Mnist::load",
                format!("{} is not a directory", dir.display()),
            ));
        }
        let prefix = if train { "train" } else { "t10k" };
        let find = |kind: &str| {
            let stem = format!("{prefix}-{kind}");
            find_file(dir, &stem).ok_or_else(|| {
                Error::io(
                    "Mnist::load",
                    format!("{} has no {stem} or {stem}.gz", dir.display()),
                )
            })
        };
        let img = read_idx(find("images-idx3-ubyte")?)?;
        let lab = read_idx(find("labels-idx1-ubyte")?)?;
        if img.dims.len() != 3 || lab.dims.len() != 1 {
            return Err(Error::format(
                "Mnist::load",
                format!(
                    "expected images [n, rows, cols] and labels [n], got {:?} and {:?}",
                    img.dims, lab.dims
                ),
            ));
        }
        let (rows, cols) = (img.dims[1], img.dims[2]);
        Mnist::from_raw(img.into_u8()?, lab.into_u8()?, rows, cols)
    }

    /// A dataset from raw pixels (`n * rows * cols` bytes, sample-major) and labels.
    #[track_caller]
    pub fn from_raw(images: Vec<u8>, labels: Vec<u8>, rows: usize, cols: usize) -> Result<Mnist> {
        let per = rows * cols;
        if per == 0 || images.len() != labels.len() * per {
            return Err(Error::format(
                "Mnist",
                format!(
                    "{} labels need {} pixels of {rows}x{cols}, got {}",
                    labels.len(),
                    labels.len() * per,
                    images.len()
                ),
            ));
        }
        Ok(Mnist {
            images,
            labels,
            rows,
            cols,
            transforms: Pipeline::default(),
        })
    }

    /// Use these transforms (random ones draw from a generator seeded with `seed`).
    pub fn with_transforms(mut self, transforms: Vec<Transform>, seed: u64) -> Mnist {
        self.transforms = Pipeline::new(transforms, seed);
        self
    }

    /// `[channels, rows, cols]` of one sample.
    pub fn image_shape(&self) -> [usize; 3] {
        [1, self.rows, self.cols]
    }
    pub fn labels(&self) -> &[u8] {
        &self.labels
    }
    /// Number of classes (largest label + 1).
    pub fn num_classes(&self) -> usize {
        self.labels.iter().max().map_or(0, |&m| m as usize + 1)
    }
}

impl Dataset for Mnist {
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn get_batch(&self, idx: &[usize]) -> Result<(Tensor, Tensor)> {
        let x = gather_images(
            "Mnist",
            &self.images,
            self.image_shape(),
            idx,
            &self.transforms,
        )?;
        Ok((x, gather_labels(&self.labels, idx)))
    }
}
