//! The direct kernels against the convolution's definition, in every build this CPU runs.

use super::super::conv::{conv2d_backward, conv2d_forward};
use super::*;
use crate::backend::geom::out_len;

type Case = (
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    [usize; 2],
    usize,
);

fn geom((n, c, h, w, o, kh, kw, padding, groups): Case) -> ConvGeom {
    ConvGeom {
        n,
        c,
        h,
        w,
        o,
        kh,
        kw,
        stride: [1, 1],
        padding,
        dilation: [1, 1],
        groups,
        oh: out_len(h, kh, 1, padding[0], 1).unwrap(),
        ow: out_len(w, kw, 1, padding[1], 1).unwrap(),
    }
}

/// Visit every (sample, out channel, out y, out x, in channel, ki, kj) term of the conv
/// that reads a real (not padding) input element: `f(x index, w index, y index)`.
fn each_term(g: &ConvGeom, mut f: impl FnMut(usize, usize, usize)) {
    let (cg, og) = (g.c / g.groups, g.o / g.groups);
    for n in 0..g.n {
        for o in 0..g.o {
            let grp = o / og;
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    for ci in 0..cg {
                        for ki in 0..g.kh {
                            for kj in 0..g.kw {
                                let iy = (oy * g.stride[0] + ki) as isize - g.padding[0] as isize;
                                let ix = (ox * g.stride[1] + kj) as isize - g.padding[1] as isize;
                                if iy < 0 || ix < 0 || iy >= g.h as isize || ix >= g.w as isize {
                                    continue;
                                }
                                let c = grp * cg + ci;
                                let xi = ((n * g.c + c) * g.h + iy as usize) * g.w + ix as usize;
                                let wi = ((o * cg + ci) * g.kh + ki) * g.kw + kj;
                                let yi = ((n * g.o + o) * g.oh + oy) * g.ow + ox;
                                f(xi, wi, yi);
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn direct_conv_matches_the_definition() {
    let cases: [Case; 7] = [
        (2, 1, 12, 12, 8, 3, 3, [0, 0], 1),  // MNIST conv1-like
        (2, 2, 10, 7, 3, 3, 2, [0, 0], 1),   // output rows shorter than a row-copy step
        (2, 8, 13, 13, 16, 3, 3, [0, 0], 1), // MNIST conv2
        (2, 3, 9, 10, 5, 3, 3, [1, 1], 1),   // "same" padding, rows not a tile multiple
        (1, 4, 7, 12, 6, 2, 3, [0, 1], 2),   // groups, rectangular kernel, uneven padding
        (3, 2, 6, 20, 1, 1, 3, [0, 0], 1),   // one output channel, a 1x3 kernel
        (2, 1, 8, 9, 3, 2, 2, [1, 0], 1),    // patch length 4: a short weight-gradient tile
    ];
    // Miri (scalar path only, ~1000x slower) takes the small cases: every kind of edge is there
    let cases: &[Case] = if cfg!(miri) {
        &[cases[1], cases[4], cases[6]]
    } else {
        &cases
    };
    let mut rng = crate::Generator::new(5);
    // every build this CPU runs: AVX-512, AVX2, baseline
    for max in (0..=level()).rev() {
        MAX_LEVEL.store(max, std::sync::atomic::Ordering::Relaxed);
        for &case in cases {
            check(case, &mut rng, max);
        }
    }
    MAX_LEVEL.store(2, std::sync::atomic::Ordering::Relaxed);
}

fn check(case: Case, rng: &mut crate::Generator, level: u8) {
    let g = geom(case);
    let klen = g.c / g.groups * g.kh * g.kw;
    let mut draw = |n: usize| -> Vec<f64> { (0..n).map(|_| rng.next_f64() - 0.5).collect() };
    let (x, w, b) = (draw(g.n * g.c * g.h * g.w), draw(g.o * klen), draw(g.o));
    let gy = draw(g.n * g.o * g.oh * g.ow);
    assert!(
        Plan::new(&g, &w, true).is_some(),
        "{case:?} takes the direct path"
    );

    let mut want_y: Vec<f64> = (0..gy.len()).map(|i| b[i / (g.oh * g.ow) % g.o]).collect();
    let (mut want_gx, mut want_gw) = (vec![0.0; x.len()], vec![0.0; w.len()]);
    each_term(&g, |xi, wi, yi| {
        want_y[yi] += w[wi] * x[xi];
        want_gx[xi] += w[wi] * gy[yi];
        want_gw[wi] += x[xi] * gy[yi];
    });
    let mut want_gb = vec![0.0; g.o];
    for (i, v) in gy.iter().enumerate() {
        want_gb[i / (g.oh * g.ow) % g.o] += v;
    }

    let close = |got: &[f64], want: &[f64], what: &str| {
        assert_eq!(got.len(), want.len(), "{case:?} build {level} {what}");
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!(
                (a - b).abs() < 1e-12,
                "{case:?} build {level} {what}[{i}]: {a} vs {b}"
            );
        }
    };
    close(
        &conv2d_forward(&x, &w, Some(&b), &g, false, None),
        &want_y,
        "y",
    );
    let (gx, gw, gb) = conv2d_backward(&x, &w, &gy, None, &g, true, true, true);
    close(&gx.unwrap(), &want_gx, "grad x");
    close(&gw.unwrap(), &want_gw, "grad w");
    close(&gb.unwrap(), &want_gb, "grad b");
    // the weight gradient alone (no input-gradient weights packed)
    let (gx, gw, _) = conv2d_backward(&x, &w, &gy, None, &g, false, true, false);
    assert!(gx.is_none());
    close(&gw.unwrap(), &want_gw, "grad w alone");
}

/// Strided convolutions run forward in phases (see `Wide`): ResNet's 7x7/2 stem and 3x3/2
/// layers, odd sizes, uneven strides, padding that is not a multiple of the stride.
#[test]
fn strided_direct_conv_matches_the_definition() {
    // (n, c, h, w, o, kh, kw, padding, groups, stride)
    let cases = [
        (1, 3, 23, 23, 5, 7, 7, [3, 3], 1, [2, 2]),
        (2, 4, 12, 12, 9, 3, 3, [1, 1], 1, [2, 2]),
        (1, 2, 11, 14, 3, 3, 3, [1, 1], 1, [2, 2]),
        (1, 4, 13, 10, 6, 3, 2, [2, 1], 2, [3, 2]),
        (1, 2, 9, 9, 4, 2, 2, [0, 0], 1, [2, 2]),
        (1, 2, 10, 9, 3, 1, 3, [1, 0], 1, [1, 2]),
    ];
    let cases: &[_] = if cfg!(miri) { &cases[4..] } else { &cases };
    let mut rng = crate::Generator::new(7);
    for max in (0..=level()).rev() {
        MAX_LEVEL.store(max, std::sync::atomic::Ordering::Relaxed);
        for &(n, c, h, w, o, kh, kw, padding, groups, stride) in cases {
            let g = ConvGeom {
                stride,
                oh: out_len(h, kh, stride[0], padding[0], 1).unwrap(),
                ow: out_len(w, kw, stride[1], padding[1], 1).unwrap(),
                ..geom((n, c, h, w, o, kh, kw, padding, groups))
            };
            let klen = c / groups * kh * kw;
            let mut draw =
                |n: usize| -> Vec<f64> { (0..n).map(|_| rng.next_f64() - 0.5).collect() };
            let (x, wt, b) = (draw(n * c * h * w), draw(o * klen), draw(o));
            assert!(
                Plan::new(&g, &wt, false).is_some(),
                "{g:?} takes the direct path"
            );
            let mut want: Vec<f64> = (0..n * o * g.oh * g.ow)
                .map(|i| b[i / (g.oh * g.ow) % o])
                .collect();
            each_term(&g, |xi, wi, yi| want[yi] += wt[wi] * x[xi]);
            for relu in [false, true] {
                let got = conv2d_forward(&x, &wt, Some(&b), &g, relu, None);
                for (i, (a, v)) in got.iter().zip(&want).enumerate() {
                    let v = if relu { v.max(0.0) } else { *v };
                    assert!(
                        (a - v).abs() < 1e-12,
                        "{g:?} build {max} y[{i}]: {a} vs {v}"
                    );
                }
            }
            // the backward pass keeps to im2col for strided convolutions
            let gy = draw(n * o * g.oh * g.ow);
            let mut want_gx = vec![0.0; x.len()];
            each_term(&g, |xi, wi, yi| want_gx[xi] += wt[wi] * gy[yi]);
            let (gx, _, _) = conv2d_backward(&x, &wt, &gy, None, &g, true, false, false);
            for (a, v) in gx.unwrap().iter().zip(&want_gx) {
                assert!((a - v).abs() < 1e-12, "{g:?} grad x: {a} vs {v}");
            }
        }
    }
    MAX_LEVEL.store(2, std::sync::atomic::Ordering::Relaxed);
}
