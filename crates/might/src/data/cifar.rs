//! CIFAR-10 in its binary form: `data_batch_1.bin` .. `data_batch_5.bin` and `test_batch.bin`,
//! each a sequence of 3073-byte records (label byte + 32x32x3 planar RGB).

use std::path::{Path, PathBuf};

use super::transforms::{Pipeline, Transform};
use super::{gather_images, gather_labels, Dataset};
use crate::{Error, Result, Tensor};

pub const CIFAR10_CLASSES: [&str; 10] = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
];

const RECORD: usize = 1 + 3 * 32 * 32;

/// CIFAR-10 held as u8 pixels; batches are `[b, 3, 32, 32]` f32 with i64 labels `[b]`.
#[derive(Clone, Debug)]
pub struct Cifar10 {
    images: Vec<u8>,
    labels: Vec<u8>,
    transforms: Pipeline,
}

/// The usual per-channel mean/std of the CIFAR-10 training set.
pub fn cifar10_normalize() -> Transform {
    Transform::Normalize {
        mean: vec![0.4914, 0.4822, 0.4465],
        std: vec![0.2470, 0.2435, 0.2616],
    }
}

impl Cifar10 {
    /// Load the train (5 batches) or test split from `dir` (or its `cifar-10-batches-bin/`).
    #[track_caller]
    pub fn load(dir: impl AsRef<Path>, train: bool) -> Result<Cifar10> {
        let mut dir = dir.as_ref().to_path_buf();
        if !dir.is_dir() {
            return Err(Error::io(
                "Cifar10::load",
                format!("{} is not a directory", dir.display()),
            ));
        }
        if dir.join("cifar-10-batches-bin").is_dir() {
            dir = dir.join("cifar-10-batches-bin");
        }
        let files: Vec<PathBuf> = if train {
            (1..=5)
                .map(|i| dir.join(format!("data_batch_{i}.bin")))
                .collect()
        } else {
            vec![dir.join("test_batch.bin")]
        };
        let mut bytes = Vec::new();
        for f in &files {
            let b = std::fs::read(f)
                .map_err(|e| Error::io("Cifar10::load", format!("{}: {e}", f.display())))?;
            if !b.len().is_multiple_of(RECORD) {
                return Err(Error::format(
                    "Cifar10::load",
                    format!(
                        "{}: {} bytes is not a whole number of {RECORD}-byte records",
                        f.display(),
                        b.len()
                    ),
                ));
            }
            bytes.extend_from_slice(&b);
        }
        Cifar10::from_records(&bytes)
    }

    /// Parse concatenated 3073-byte records.
    #[track_caller]
    pub fn from_records(bytes: &[u8]) -> Result<Cifar10> {
        if !bytes.len().is_multiple_of(RECORD) {
            return Err(Error::format(
                "Cifar10",
                format!(
                    "{} bytes is not a whole number of {RECORD}-byte records",
                    bytes.len()
                ),
            ));
        }
        let n = bytes.len() / RECORD;
        let mut images = Vec::with_capacity(n * (RECORD - 1));
        let mut labels = Vec::with_capacity(n);
        for (i, r) in bytes.chunks_exact(RECORD).enumerate() {
            if r[0] >= 10 {
                return Err(Error::format(
                    "Cifar10",
                    format!("record {i} has label {} (expected 0..9)", r[0]),
                ));
            }
            labels.push(r[0]);
            images.extend_from_slice(&r[1..]);
        }
        Ok(Cifar10 {
            images,
            labels,
            transforms: Pipeline::default(),
        })
    }

    /// A dataset from planar RGB pixels (`n * 3072` bytes) and labels.
    #[track_caller]
    pub fn from_raw(images: Vec<u8>, labels: Vec<u8>) -> Result<Cifar10> {
        if images.len() != labels.len() * (RECORD - 1) {
            return Err(Error::format(
                "Cifar10",
                format!(
                    "{} labels need {} pixels, got {}",
                    labels.len(),
                    labels.len() * 3072,
                    images.len()
                ),
            ));
        }
        Ok(Cifar10 {
            images,
            labels,
            transforms: Pipeline::default(),
        })
    }

    /// Use these transforms (random ones draw from a generator seeded with `seed`).
    pub fn with_transforms(mut self, transforms: Vec<Transform>, seed: u64) -> Cifar10 {
        self.transforms = Pipeline::new(transforms, seed);
        self
    }

    /// The standard training augmentation: random crop (padding 4), flip, normalise.
    pub fn with_train_augmentation(self, seed: u64) -> Cifar10 {
        self.with_transforms(
            vec![
                Transform::RandomCrop { padding: 4 },
                Transform::RandomHorizontalFlip,
                cifar10_normalize(),
            ],
            seed,
        )
    }

    pub fn labels(&self) -> &[u8] {
        &self.labels
    }
}

impl Dataset for Cifar10 {
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn get_batch(&self, idx: &[usize]) -> Result<(Tensor, Tensor)> {
        let x = gather_images("Cifar10", &self.images, [3, 32, 32], idx, &self.transforms)?;
        Ok((x, gather_labels(&self.labels, idx)))
    }
}
