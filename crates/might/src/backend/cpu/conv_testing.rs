//! What the conv kernels' tests share: the convolution straight from its definition, and
//! reproducible inputs.

use super::conv::ConvGeom;

/// The convolution summed in f64, straight from its definition.
pub(super) fn naive(x: &[f32], w: &[f32], b: &[f32], g: &ConvGeom, relu: bool) -> Vec<f64> {
    let mut y = vec![0.0f64; g.n * g.o * g.p()];
    for n in 0..g.n {
        for o in 0..g.o {
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    let mut acc = b[o] as f64;
                    for c in 0..g.c {
                        for ky in 0..g.kh {
                            for kx in 0..g.kw {
                                let iy = (oy * g.stride[0] + ky) as isize - g.padding[0] as isize;
                                let ix = (ox * g.stride[1] + kx) as isize - g.padding[1] as isize;
                                if iy < 0 || ix < 0 || iy >= g.h as isize || ix >= g.w as isize {
                                    continue;
                                }
                                let xv = x[((n * g.c + c) * g.h + iy as usize) * g.w + ix as usize];
                                let wv = w[((o * g.c + c) * g.kh + ky) * g.kw + kx];
                                acc += xv as f64 * wv as f64;
                            }
                        }
                    }
                    y[((n * g.o + o) * g.oh + oy) * g.ow + ox] =
                        if relu { acc.max(0.0) } else { acc };
                }
            }
        }
    }
    y
}

pub(super) fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}
