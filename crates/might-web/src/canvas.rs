//! From a drawing to an MNIST input. MNIST's digits were size-normalised to fit a 20x20 box
//! (keeping their aspect ratio) and placed in a 28x28 image with their centre of mass at the
//! centre; a digit drawn anywhere on a canvas, at any size, is brought to the same form before
//! the network sees it.

/// Side of an MNIST image.
pub const SIDE: usize = 28;
/// Side of the box the digit's longer edge is scaled to.
const BOX: f32 = 20.0;

/// `ink` is a `width x height` image, row-major, 0 = background .. 1 = full ink. Returns the
/// 28x28 MNIST-style image (all zeros for an empty drawing).
pub fn mnist_input(ink: &[f32], width: usize, height: usize) -> Vec<f32> {
    let mut out = vec![0f32; SIDE * SIDE];
    if width == 0 || height == 0 || ink.len() < width * height {
        return out;
    }
    let at = |x: usize, y: usize| ink[y * width + x].clamp(0.0, 1.0);
    // bounding box of the ink
    let (mut x0, mut y0, mut x1, mut y1) = (width, height, 0, 0);
    for y in 0..height {
        for x in 0..width {
            if at(x, y) > 0.0 {
                x0 = x0.min(x);
                y0 = y0.min(y);
                x1 = x1.max(x + 1);
                y1 = y1.max(y + 1);
            }
        }
    }
    if x0 >= x1 {
        return out;
    }
    let (bw, bh) = ((x1 - x0) as f32, (y1 - y0) as f32);
    let scale = BOX / bw.max(bh);
    let (sw, sh) = (
        ((bw * scale).round() as usize).clamp(1, SIDE),
        ((bh * scale).round() as usize).clamp(1, SIDE),
    );
    // area-average the box into sw x sh (each target pixel covers a rectangle of source)
    let mut small = vec![0f32; sw * sh];
    let (fx, fy) = (bw / sw as f32, bh / sh as f32);
    for ty in 0..sh {
        let (sy0, sy1) = (y0 as f32 + ty as f32 * fy, y0 as f32 + (ty + 1) as f32 * fy);
        for tx in 0..sw {
            let (sx0, sx1) = (x0 as f32 + tx as f32 * fx, x0 as f32 + (tx + 1) as f32 * fx);
            let (mut sum, mut area) = (0f32, 0f32);
            for y in sy0.floor() as usize..(sy1.ceil() as usize).min(height) {
                let wy = (sy1.min(y as f32 + 1.0) - sy0.max(y as f32)).max(0.0);
                for x in sx0.floor() as usize..(sx1.ceil() as usize).min(width) {
                    let wx = (sx1.min(x as f32 + 1.0) - sx0.max(x as f32)).max(0.0);
                    sum += at(x, y) * wx * wy;
                    area += wx * wy;
                }
            }
            small[ty * sw + tx] = if area > 0.0 { sum / area } else { 0.0 };
        }
    }
    // centre of mass of the scaled digit, placed at the image centre
    let (mut m, mut mx, mut my) = (0f32, 0f32, 0f32);
    for y in 0..sh {
        for x in 0..sw {
            let v = small[y * sw + x];
            m += v;
            mx += v * (x as f32 + 0.5);
            my += v * (y as f32 + 0.5);
        }
    }
    let half = SIDE as f32 / 2.0;
    let (ox, oy) = if m > 0.0 {
        ((half - mx / m).round(), (half - my / m).round())
    } else {
        (
            (half - sw as f32 / 2.0).round(),
            (half - sh as f32 / 2.0).round(),
        )
    };
    for y in 0..sh {
        let ty = y as f32 + oy;
        if !(0.0..SIDE as f32).contains(&ty) {
            continue;
        }
        for x in 0..sw {
            let tx = x as f32 + ox;
            if (0.0..SIDE as f32).contains(&tx) {
                out[ty as usize * SIDE + tx as usize] = small[y * sw + x];
            }
        }
    }
    out
}
