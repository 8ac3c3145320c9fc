//! Per-sample image transforms applied while a batch is built: normalisation (fused with the
//! u8 → f32 scaling), and the random augmentations used for CIFAR (crop with padding,
//! horizontal flip).

use std::sync::Mutex;

use crate::Generator;

/// One transform of a `[c, h, w]` image with values already scaled to [0, 1].
#[derive(Clone, Debug, PartialEq)]
pub enum Transform {
    /// `(x - mean[c]) / std[c]` per channel (a single value applies to every channel).
    Normalize { mean: Vec<f32>, std: Vec<f32> },
    /// Pad each side with `padding` zeros, then crop back to the original size at a random
    /// offset (torchvision `RandomCrop(size, padding)`).
    RandomCrop { padding: usize },
    /// Mirror left-right with probability 1/2.
    RandomHorizontalFlip,
}

/// An ordered list of transforms plus the generator random ones draw from.
///
/// Normalisation is fused into the u8 → f32 conversion, so it happens before the random
/// transforms wherever it sits in the list; padding pixels get the value a black pixel has
/// after normalising (`-mean/std`), the same result as torchvision's
/// `RandomCrop(padding) → ToTensor → Normalize`.
#[derive(Debug, Default)]
pub struct Pipeline {
    transforms: Vec<Transform>,
    rng: Mutex<Option<Generator>>,
}

impl Clone for Pipeline {
    fn clone(&self) -> Self {
        Pipeline {
            transforms: self.transforms.clone(),
            rng: Mutex::new(self.rng.lock().unwrap().clone()),
        }
    }
}

impl Pipeline {
    pub fn new(transforms: Vec<Transform>, seed: u64) -> Pipeline {
        Pipeline {
            transforms,
            rng: Mutex::new(Some(Generator::new(seed))),
        }
    }

    pub fn transforms(&self) -> &[Transform] {
        &self.transforms
    }

    /// Per-channel `(scale, shift)` turning a raw u8 value into the normalised f32.
    pub(crate) fn channel_affine(&self, c: usize) -> (Vec<f32>, Vec<f32>) {
        let mut scale = vec![1.0f32 / 255.0; c];
        let mut shift = vec![0.0f32; c];
        for t in &self.transforms {
            if let Transform::Normalize { mean, std } = t {
                for ch in 0..c {
                    let m = mean.get(ch).or(mean.first()).copied().unwrap_or(0.0);
                    let s = std.get(ch).or(std.first()).copied().unwrap_or(1.0);
                    scale[ch] /= s;
                    shift[ch] = (shift[ch] - m) / s;
                }
            }
        }
        (scale, shift)
    }

    /// Whether any transform is random (crops, flips).
    pub(crate) fn has_random(&self) -> bool {
        self.transforms
            .iter()
            .any(|t| !matches!(t, Transform::Normalize { .. }))
    }

    /// Apply the random transforms to each `[c, h, w]` u8 sample, in order (padding is 0).
    pub(crate) fn apply_random(&self, mut samples: Vec<Vec<u8>>, chw: [usize; 3]) -> Vec<Vec<u8>> {
        if !self.has_random() {
            return samples;
        }
        let fill = vec![0u8; chw[0]];
        let per = chw.iter().product::<usize>();
        let mut guard = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        let rng = guard.get_or_insert_with(|| Generator::new(0));
        let mut scratch = vec![0u8; per];
        for sample in samples.iter_mut() {
            for t in &self.transforms {
                match t {
                    Transform::Normalize { .. } => {}
                    Transform::RandomCrop { padding } => {
                        random_crop(sample, &mut scratch, chw, *padding, &fill, rng)
                    }
                    Transform::RandomHorizontalFlip => {
                        if rng.below(2) == 1 {
                            hflip(sample, chw)
                        }
                    }
                }
            }
        }
        samples
    }
}

/// Crop at a random offset in `[0, 2 * pad]` of the padded image; `fill[c]` is channel `c`'s
/// padding.
fn random_crop<T: Copy>(
    sample: &mut [T],
    scratch: &mut [T],
    [c, h, w]: [usize; 3],
    pad: usize,
    fill: &[T],
    rng: &mut Generator,
) {
    if pad == 0 {
        return;
    }
    let dy = rng.below(2 * pad as u64 + 1) as isize - pad as isize;
    let dx = rng.below(2 * pad as u64 + 1) as isize - pad as isize;
    scratch.copy_from_slice(sample);
    for ch in 0..c {
        for y in 0..h {
            let sy = y as isize + dy;
            for x in 0..w {
                let sx = x as isize + dx;
                let v = if sy >= 0 && sy < h as isize && sx >= 0 && sx < w as isize {
                    scratch[ch * h * w + sy as usize * w + sx as usize]
                } else {
                    fill[ch]
                };
                sample[ch * h * w + y * w + x] = v;
            }
        }
    }
}

fn hflip<T>(sample: &mut [T], [_, _, w]: [usize; 3]) {
    for row in sample.chunks_exact_mut(w) {
        row.reverse();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_affine() {
        let p = Pipeline::new(
            vec![Transform::Normalize {
                mean: vec![0.5],
                std: vec![0.25],
            }],
            0,
        );
        let (a, b) = p.channel_affine(2);
        // 255 -> (1 - .5)/.25 = 2 ; 0 -> -2
        assert!((255.0 * a[1] + b[1] - 2.0).abs() < 1e-6);
        assert!((b[0] + 2.0).abs() < 1e-6);
    }

    #[test]
    fn crop_and_flip_move_pixels() {
        let mut s: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        hflip(&mut s, [1, 3, 3]);
        assert_eq!(s, vec![3., 2., 1., 6., 5., 4., 9., 8., 7.]);
        // A crop keeps every value either from the image or the fill, and over many draws
        // shifts the image (not always the identity).
        let mut rng = Generator::new(3);
        let mut moved = false;
        for _ in 0..20 {
            let mut s: Vec<f32> = (1..=9).map(|v| v as f32).collect();
            let mut scratch = vec![0.0; 9];
            random_crop(&mut s, &mut scratch, [1, 3, 3], 1, &[-1.0], &mut rng);
            assert!(s.iter().all(|&v| v == -1.0 || (1.0..=9.0).contains(&v)));
            moved |= s != (1..=9).map(|v| v as f32).collect::<Vec<_>>();
            // The centre pixel of a pad-1 crop of a 3x3 image always comes from the image.
            assert!(s[4] >= 1.0);
        }
        assert!(moved);
    }
}
