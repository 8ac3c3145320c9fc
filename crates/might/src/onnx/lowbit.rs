//! ONNX's low-precision element types that might has no dtype for: the four float8 formats,
//! float8e8m0 (a bare power of two), float4e2m1, and the sub-byte integers int4/uint4/int2/uint2.
//!
//! They are exchange formats: a model stores weights or casts activations in them, but
//! nothing computes in them. So a value of such a type is held in `f32` (floats) or `i64`
//! (integers), with every element already on the type's grid; this file decodes the packed
//! bytes and rounds a wider value onto a type's grid the way the ONNX reference (ml_dtypes)
//! does, so later arithmetic sees exactly what a native implementation would.

/// float8 e4m3 "fn" (finite, no infinities, NaN = S.1111.111).
pub const FLOAT8E4M3FN: i32 = 17;
/// float8 e4m3 "fnuz" (no infinities, no negative zero; NaN = 0x80).
pub const FLOAT8E4M3FNUZ: i32 = 18;
/// float8 e5m2 (IEEE-like, with infinities).
pub const FLOAT8E5M2: i32 = 19;
/// float8 e5m2 "fnuz".
pub const FLOAT8E5M2FNUZ: i32 = 20;
pub const UINT4: i32 = 21;
pub const INT4: i32 = 22;
/// float4 e2m1 (values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives; no NaN, no infinity).
pub const FLOAT4E2M1: i32 = 23;
/// float8 e8m0: 2^(bits - 127), 0xFF = NaN (block scales of the MX formats).
pub const FLOAT8E8M0: i32 = 24;
pub const UINT2: i32 = 25;
pub const INT2: i32 = 26;

/// A minifloat format: mantissa bits, exponent bias, largest finite value, and what an
/// overflow becomes when not saturating (`inf`: infinity, else NaN).
struct Format {
    mant: i32,
    bias: i32,
    max: f64,
    inf: bool,
    /// whether the format has a NaN at all (float4 does not: NaN becomes zero)
    nan: bool,
}

fn format(e: i32) -> Option<Format> {
    let f = |mant, bias, max, inf, nan| Format {
        mant,
        bias,
        max,
        inf,
        nan,
    };
    Some(match e {
        FLOAT8E4M3FN => f(3, 7, 448.0, false, true),
        FLOAT8E4M3FNUZ => f(3, 8, 240.0, false, true),
        FLOAT8E5M2 => f(2, 15, 57344.0, true, true),
        FLOAT8E5M2FNUZ => f(2, 16, 57344.0, false, true),
        FLOAT4E2M1 => f(1, 1, 6.0, false, false),
        _ => return None,
    })
}

/// Whether `e` is one of the small float types held in `f32` (float8, float4, e8m0).
pub fn is_small_float(e: i32) -> bool {
    (FLOAT8E4M3FN..=FLOAT8E5M2FNUZ).contains(&e) || e == FLOAT4E2M1 || e == FLOAT8E8M0
}

/// Bits per element of a packed sub-byte type (`None`: a whole-byte or wider type).
pub fn sub_byte_bits(e: i32) -> Option<usize> {
    match e {
        UINT4 | INT4 | FLOAT4E2M1 => Some(4),
        UINT2 | INT2 => Some(2),
        _ => None,
    }
}

/// The value range of a small integer type.
pub fn int_range(e: i32) -> Option<(i64, i64)> {
    Some(match e {
        UINT4 => (0, 15),
        INT4 => (-8, 7),
        UINT2 => (0, 3),
        INT2 => (-2, 1),
        _ => return None,
    })
}

/// The bytes (or packed bytes) of a tensor of type `e` needed for `numel` elements.
pub fn byte_len(e: i32, numel: usize) -> usize {
    match sub_byte_bits(e) {
        Some(b) => numel.saturating_mul(b).div_ceil(8),
        None => numel,
    }
}

/// The value of one stored code of type `e` (a byte, or a nibble/crumb already unpacked).
fn decode_code(e: i32, c: u8) -> f64 {
    match e {
        FLOAT8E8M0 => {
            if c == 0xFF {
                f64::NAN
            } else {
                (2f64).powi(c as i32 - 127)
            }
        }
        INT4 => ((c << 4) as i8 >> 4) as f64,
        INT2 => ((c << 6) as i8 >> 6) as f64,
        UINT4 | UINT2 => c as f64,
        _ => {
            let Some(f) = format(e) else { return 0.0 };
            let total = if e == FLOAT4E2M1 { 4 } else { 8 };
            let ebits = total - 1 - f.mant;
            let sign = (c >> (total - 1)) & 1 == 1;
            let ex = ((c >> f.mant) as i32) & ((1 << ebits) - 1);
            let m = (c as i32) & ((1 << f.mant) - 1);
            let fnuz = matches!(e, FLOAT8E4M3FNUZ | FLOAT8E5M2FNUZ);
            if fnuz && c == 0x80 {
                return f64::NAN;
            }
            if e == FLOAT8E4M3FN && ex == 15 && m == 7 {
                return f64::NAN;
            }
            if e == FLOAT8E5M2 && ex == 31 {
                let v = if m == 0 { f64::INFINITY } else { f64::NAN };
                return if sign { -v } else { v };
            }
            let mag = if ex == 0 {
                m as f64 * (2f64).powi(1 - f.bias - f.mant)
            } else {
                (1.0 + m as f64 / (1 << f.mant) as f64) * (2f64).powi(ex - f.bias)
            };
            if sign {
                -mag
            } else {
                mag
            }
        }
    }
}

/// Decode `numel` elements of type `e` from their stored bytes (sub-byte types packed low
/// bits first). Returns the values as `f64` and whether they belong in an `f32` tensor.
pub fn decode(e: i32, bytes: &[u8], numel: usize) -> (Vec<f64>, bool) {
    let v = match sub_byte_bits(e) {
        Some(bits) => {
            let per = 8 / bits;
            let mask = ((1u16 << bits) - 1) as u8;
            (0..numel)
                .map(|i| {
                    let b = bytes.get(i / per).copied().unwrap_or(0);
                    decode_code(e, (b >> ((i % per) * bits)) & mask)
                })
                .collect()
        }
        None => bytes
            .iter()
            .take(numel)
            .map(|&c| decode_code(e, c))
            .collect(),
    };
    (v, is_small_float(e))
}

/// Round `x` onto the grid of minifloat type `e` (nearest, ties to even), as ml_dtypes'
/// `astype` does; `saturate` clamps overflow (and infinities) to the largest finite value,
/// otherwise overflow becomes infinity (e5m2) or NaN.
pub fn round_float(e: i32, x: f64, saturate: bool) -> f64 {
    let Some(f) = format(e) else { return x };
    if x.is_nan() {
        return if f.nan { f64::NAN } else { 0.0 };
    }
    let sat = saturate || !f.nan;
    let a = x.abs();
    let r = if a.is_infinite() {
        f64::INFINITY
    } else if a == 0.0 {
        0.0
    } else {
        let min_exp = 1 - f.bias;
        let ex = (a.log2().floor() as i32).max(min_exp);
        let q = (2f64).powi(ex - f.mant);
        (a / q).round_ties_even() * q
    };
    let r = if r > f.max {
        if sat {
            f.max
        } else if f.inf {
            f64::INFINITY
        } else {
            f64::NAN
        }
    } else {
        r
    };
    if x < 0.0 {
        -r
    } else {
        r
    }
}

/// Convert an `f32` to float8e8m0 the way the ONNX reference does, on the float's bits:
/// the exponent, rounded by `mode` ("up", "down" or "nearest"), saturating at 2^127.
pub fn round_e8m0(x: f32, saturate: bool, mode: &str) -> f64 {
    let bits = x.to_bits();
    let mut ex = (bits >> 23) & 0xFF;
    if ex == 0xFF {
        return f64::NAN;
    }
    let up = match mode {
        "nearest" => {
            let g = bits & 0x40_0000 != 0;
            let rest = bits & 0x3F_FFFF != 0;
            g && (rest || ex > 0)
        }
        "down" => false,
        _ => bits & 0x7F_FFFF != 0,
    };
    if up && !(saturate && ex == 0xFE) {
        ex += 1;
    }
    decode_code(FLOAT8E8M0, (ex & 0xFF) as u8)
}

/// The integer a float becomes in small integer type `e`: truncated toward zero, and 0 when
/// out of range or not finite (ml_dtypes' conversion).
pub fn float_to_small_int(e: i32, x: f64) -> i64 {
    let (lo, hi) = int_range(e).unwrap_or((i64::MIN, i64::MAX));
    if !x.is_finite() {
        return 0;
    }
    let t = x.trunc();
    if t < lo as f64 || t > hi as f64 {
        0
    } else {
        t as i64
    }
}

/// Whether `e` is one of the integer types of this module.
pub fn is_small_int(e: i32) -> bool {
    int_range(e).is_some()
}

/// Whether ONNX element type `e` is handled here.
pub fn handles(e: i32) -> bool {
    is_small_float(e) || is_small_int(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float8_grid_and_overflow() {
        assert_eq!(round_float(FLOAT8E4M3FN, 0.4789, true), 0.46875);
        assert_eq!(round_float(FLOAT8E4M3FN, 1e6, true), 448.0);
        assert!(round_float(FLOAT8E4M3FN, 1e6, false).is_nan());
        assert_eq!(round_float(FLOAT8E5M2, 1e6, false), f64::INFINITY);
        assert_eq!(round_float(FLOAT4E2M1, 0.25, true), 0.0);
        assert_eq!(round_float(FLOAT4E2M1, 0.75, true), 1.0);
        assert_eq!(round_float(FLOAT4E2M1, 5.0, true), 4.0);
        assert_eq!(round_float(FLOAT4E2M1, f64::NAN, true), 0.0);
        assert_eq!(decode_code(FLOAT8E4M3FN, 0x7E), 448.0);
        assert_eq!(decode_code(INT4, 0xF), -1.0);
        assert_eq!(round_e8m0(1.1, true, "up"), 2.0);
        assert_eq!(round_e8m0(0.0, true, "up"), (2f64).powi(-127));
        assert_eq!(float_to_small_int(INT4, -9.0), 0);
        assert_eq!(float_to_small_int(INT4, -8.5), -8);
    }
}
