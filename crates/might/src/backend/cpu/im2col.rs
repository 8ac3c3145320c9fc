//! Unrolling convolution patches into a column matrix (im2col) and folding a column matrix
//! back onto the image (col2im, its adjoint), the data movement around the conv GEMMs.

use super::conv::{ConvFloat, ConvGeom};

/// The output indices `o` in `[lo, hi)` whose input index `o * stride + off - pad` falls inside
/// `[0, len)`; outside that range a patch element reads padding. Lets the inner loops run
/// without a bounds test per element.
fn valid_range(out: usize, len: usize, stride: usize, pad: usize, off: usize) -> (usize, usize) {
    let lo = if pad > off {
        (pad - off).div_ceil(stride)
    } else {
        0
    };
    let hi = if len + pad > off {
        ((len + pad - off - 1) / stride + 1).min(out)
    } else {
        0
    };
    (lo.min(hi), hi)
}

/// Unroll the patches of one group of one sample (`x`: `[C/groups, H, W]`) into the columns
/// `0..OH * OW` of the `C/groups * kh * kw` rows of `col`, row `r` starting at `r * ld`; zeros
/// where a patch reads padding. `ld > OH * OW` lets several samples share one column matrix.
pub(super) fn im2col<T: ConvFloat>(x: &[T], g: &ConvGeom, col: &mut [T], ld: usize) {
    let (p, hw) = (g.p(), g.hw());
    let ([sh, sw], [ph, pw], [dh, dw]) = (g.stride, g.padding, g.dilation);
    let mut rows = col.chunks_mut(ld);
    for plane in x.chunks_exact(hw).take(g.cg()) {
        for ki in 0..g.kh {
            let (y_lo, y_hi) = valid_range(g.oh, g.h, sh, ph, ki * dh);
            for kj in 0..g.kw {
                let row = &mut rows.next().expect("im2col: column buffer too small")[..p];
                let (x_lo, x_hi) = valid_range(g.ow, g.w, sw, pw, kj * dw);
                row[..y_lo * g.ow].fill(T::zero());
                row[y_hi * g.ow..].fill(T::zero());
                for oy in y_lo..y_hi {
                    let iy = oy * sh + ki * dh - ph;
                    let src = &plane[iy * g.w..(iy + 1) * g.w];
                    let dst = &mut row[oy * g.ow..(oy + 1) * g.ow];
                    dst[..x_lo].fill(T::zero());
                    dst[x_hi..].fill(T::zero());
                    if x_lo == x_hi {
                        continue;
                    }
                    // first input column read by this kernel column
                    let ix0 = x_lo * sw + kj * dw - pw;
                    let dst = &mut dst[x_lo..x_hi];
                    if sw == 1 {
                        dst.copy_from_slice(&src[ix0..ix0 + dst.len()]);
                    } else {
                        for (d, &s) in dst.iter_mut().zip(src[ix0..].iter().step_by(sw)) {
                            *d = s;
                        }
                    }
                }
            }
        }
    }
}

/// The adjoint of [`im2col`]: add every entry of `col` (row `r` at `r * ld`) back into the
/// input position it was read from (`gx`: `[C/groups, H, W]`, accumulated into).
pub(super) fn col2im<T: ConvFloat>(col: &[T], g: &ConvGeom, gx: &mut [T], ld: usize) {
    let (p, hw) = (g.p(), g.hw());
    let ([sh, sw], [ph, pw], [dh, dw]) = (g.stride, g.padding, g.dilation);
    let mut rows = col.chunks(ld);
    for plane in gx.chunks_exact_mut(hw).take(g.cg()) {
        for ki in 0..g.kh {
            let (y_lo, y_hi) = valid_range(g.oh, g.h, sh, ph, ki * dh);
            for kj in 0..g.kw {
                let row = &rows.next().expect("col2im: column buffer too small")[..p];
                let (x_lo, x_hi) = valid_range(g.ow, g.w, sw, pw, kj * dw);
                if x_lo == x_hi {
                    continue;
                }
                let ix0 = x_lo * sw + kj * dw - pw;
                for oy in y_lo..y_hi {
                    let iy = oy * sh + ki * dh - ph;
                    let dst = &mut plane[iy * g.w..(iy + 1) * g.w];
                    let src = &row[oy * g.ow + x_lo..oy * g.ow + x_hi];
                    if sw == 1 {
                        for (d, &s) in dst[ix0..ix0 + src.len()].iter_mut().zip(src) {
                            *d += s;
                        }
                    } else {
                        for (d, &s) in dst[ix0..].iter_mut().step_by(sw).zip(src) {
                            *d += s;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::geom::out_len;

    #[test]
    fn valid_range_matches_brute_force() {
        for len in 1..7 {
            for stride in 1..4 {
                for pad in 0..3 {
                    for off in 0..6 {
                        let out = 8;
                        let (lo, hi) = valid_range(out, len, stride, pad, off);
                        for o in 0..out {
                            let i = (o * stride + off) as isize - pad as isize;
                            let inside = i >= 0 && (i as usize) < len;
                            assert_eq!(inside, o >= lo && o < hi, "{len} {stride} {pad} {off} {o}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn col2im_is_adjoint_of_im2col() {
        // <im2col(x), c> == <x, col2im(c)> for any x, c
        let g = ConvGeom {
            n: 1,
            c: 2,
            h: 5,
            w: 4,
            o: 1,
            kh: 3,
            kw: 2,
            stride: [2, 1],
            padding: [1, 1],
            dilation: [1, 2],
            groups: 1,
            oh: out_len(5, 3, 2, 1, 1).unwrap(),
            ow: out_len(4, 2, 1, 1, 2).unwrap(),
        };
        let x: Vec<f64> = (0..40).map(|i| (i as f64 * 0.37).sin()).collect();
        let c: Vec<f64> = (0..g.klen() * g.p())
            .map(|i| (i as f64 * 0.11).cos())
            .collect();
        let mut col = vec![0.0; c.len()];
        im2col(&x, &g, &mut col, g.p());
        let mut gx = vec![0.0; x.len()];
        col2im(&c, &g, &mut gx, g.p());
        let a: f64 = col.iter().zip(&c).map(|(a, b)| a * b).sum();
        let b: f64 = x.iter().zip(&gx).map(|(a, b)| a * b).sum();
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}
