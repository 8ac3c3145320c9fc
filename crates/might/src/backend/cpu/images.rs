//! u8 image samples to one f32 batch, scaled and normalised in the same pass: how datasets of
//! images (MNIST, CIFAR-10, image folders) build a batch without per-sample tensors.

use super::prefetch::prefetch;
use super::{pool, simd, threads};

/// `out[k] = samples[k] as f32 * scale[c] + shift[c]` for the pixels of channel `c` of each
/// sample, one sample per share on the kernel threads.
///
/// Why this shape: the u8 -> f32 affine in the widest SIMD build (it was ~10 % of an MNIST MLP
/// step on the main thread as a baseline-SSE2 loop). A batch is random samples of an array
/// larger than the caches, so each image waited for memory line after line (~0.8 ns per
/// pixel): convert one while the image `AHEAD` places on is fetched (an epoch of random
/// 64-image MNIST batches at one thread: 26-27 -> 8.3 ms; 4 ahead: 10-10.5 ms).
pub(crate) fn u8_images_affine(
    samples: &[&[u8]],
    channels: usize,
    scale: &[f32],
    shift: &[f32],
) -> Vec<f32> {
    const AHEAD: usize = 8;
    let per = samples.first().map_or(0, |s| s.len());
    let plane = per / channels.max(1);
    // every element is written below; a reused buffer saves a batch's worth of page faults
    let mut out = pool::output::<f32>(samples.len() * per);
    let image = |k: usize| samples.get(k).copied().unwrap_or(&[]);
    for k in 0..AHEAD {
        prefetch(image(k));
    }
    let convert = |dst: &mut [f32], k: usize| {
        prefetch(image(k + AHEAD));
        let src = image(k);
        for ch in 0..channels {
            let (a, b) = (scale[ch], shift[ch]);
            let (s, d) = (
                &src[ch * plane..(ch + 1) * plane],
                &mut dst[ch * plane..(ch + 1) * plane],
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
    out
}
