//! NumPy `.npy`: magic `\x93NUMPY`, version, a Python-literal header
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`, then the data.
//! Reads C and Fortran order and either byte order; writes C order, little-endian.

use super::{checked_nbytes, decode, take, tensor_to_le_bytes, MappedFile, TensorInfo};
use crate::{DType, Error, Result, Tensor};
use std::path::Path;

pub(crate) const MAGIC: &[u8] = b"\x93NUMPY";
const FMT: &str = "npy";
/// Header text larger than this is refused (numpy itself caps at 10,000 bytes by default).
const MAX_HEADER: usize = 1 << 20;

/// Read a `.npy` file.
#[track_caller]
pub fn load(path: impl AsRef<Path>) -> Result<Tensor> {
    let path = path.as_ref();
    let file = MappedFile::open(FMT, path)?;
    load_from_bytes(file.bytes())
        .map_err(|e| Error::new(e.kind, e.op, format!("{}: {}", path.display(), e.msg)))
}

/// Read `.npy` bytes held in memory.
#[track_caller]
pub fn load_from_bytes(bytes: &[u8]) -> Result<Tensor> {
    let h = parse_header(bytes)?;
    let data = data_of(bytes, &h)?;
    if h.fortran_order && h.shape.len() > 1 {
        // Column-major data is the row-major data of the reversed shape, transposed back.
        let rev: Vec<usize> = h.shape.iter().rev().copied().collect();
        let perm: Vec<isize> = (0..h.shape.len() as isize).rev().collect();
        decode(h.dtype, data, h.big_endian, &rev)?
            .permute(&perm)?
            .contiguous()
    } else {
        decode(h.dtype, data, h.big_endian, &h.shape)
    }
}

/// Write a tensor as `.npy` (C order, little-endian). bfloat16 has no NumPy dtype: convert
/// it first.
#[track_caller]
pub fn save(path: impl AsRef<Path>, t: &Tensor) -> Result<()> {
    let bytes = save_to_bytes(t)?;
    super::write_file(FMT, path.as_ref(), &bytes)
}

/// The bytes `save` writes.
#[track_caller]
pub fn save_to_bytes(t: &Tensor) -> Result<Vec<u8>> {
    let descr = match t.dtype() {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::F16 => "<f2",
        DType::I64 => "<i8",
        DType::U8 => "|u1",
        DType::Bool => "|b1",
        DType::BF16 => {
            return Err(Error::dtype(
                "npy::save",
                "NumPy has no bfloat16 dtype; convert with to_dtype(F32) first",
            ))
        }
    };
    let shape = match t.dims() {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        ds => format!(
            "({})",
            ds.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad so the data starts 64-byte aligned; the header ends with '\n'.
    let (version, prefix) = if header.len() + 11 < 65536 {
        (1u8, 10)
    } else {
        (2u8, 12)
    };
    while (prefix + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(prefix + header.len() + t.numel() * t.dtype().size_in_bytes());
    out.extend(MAGIC);
    out.extend([version, 0]);
    if version == 1 {
        out.extend((header.len() as u16).to_le_bytes());
    } else {
        out.extend((header.len() as u32).to_le_bytes());
    }
    out.extend(header.as_bytes());
    out.extend(tensor_to_le_bytes(t)?);
    Ok(out)
}

pub(crate) fn inspect_bytes(bytes: &[u8]) -> Result<Vec<TensorInfo>> {
    let h = parse_header(bytes)?;
    data_of(bytes, &h)?; // the data the header promises must be there
    Ok(vec![TensorInfo::new(String::new(), h.dtype, h.shape)])
}

/// The array's data bytes, checked against what the header promises.
#[track_caller]
fn data_of<'a>(bytes: &'a [u8], h: &Header) -> Result<&'a [u8]> {
    let (_, nbytes) = checked_nbytes(FMT, &h.shape, h.dtype)?;
    let data = bytes.get(h.data_start..).unwrap_or(&[]);
    if data.len() < nbytes {
        return Err(Error::format(
            FMT,
            format!(
                "truncated: shape {:?} of {} needs {nbytes} data bytes, the file has {}",
                h.shape,
                h.dtype,
                data.len()
            ),
        ));
    }
    Ok(&data[..nbytes])
}

struct Header {
    dtype: DType,
    big_endian: bool,
    fortran_order: bool,
    shape: Vec<usize>,
    data_start: usize,
}

fn parse_header(bytes: &[u8]) -> Result<Header> {
    let magic = take(FMT, bytes, 0, 6, "magic")?;
    if magic != MAGIC {
        return Err(Error::format(
            FMT,
            "bad magic: expected \\x93NUMPY (not a .npy file)",
        ));
    }
    let ver = take(FMT, bytes, 6, 2, "version")?;
    let (len, start) = match ver[0] {
        1 => {
            let l = take(FMT, bytes, 8, 2, "header length")?;
            (u16::from_le_bytes([l[0], l[1]]) as usize, 10)
        }
        2 | 3 => {
            let l = take(FMT, bytes, 8, 4, "header length")?;
            (u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize, 12)
        }
        v => {
            return Err(Error::format(
                FMT,
                format!("unsupported format version {v}.{}", ver[1]),
            ))
        }
    };
    if len > MAX_HEADER {
        return Err(Error::format(
            FMT,
            format!("header length {len} is implausibly large"),
        ));
    }
    let text = take(FMT, bytes, start, len, "header")?;
    let text = std::str::from_utf8(text).map_err(|_| Error::format(FMT, "header is not text"))?;
    let dict = PyLit::parse_dict(text)?;
    let mut descr = None;
    let mut fortran = None;
    let mut shape = None;
    for (k, v) in dict {
        match (k.as_str(), v) {
            ("descr", PyLit::Str(s)) => descr = Some(s),
            ("fortran_order", PyLit::Bool(b)) => fortran = Some(b),
            ("shape", PyLit::Tuple(t)) => shape = Some(t),
            ("descr", _) => {
                return Err(Error::format(
                    FMT,
                    "structured dtypes (descr is a list) are not supported",
                ))
            }
            (k, _) => {
                return Err(Error::format(
                    FMT,
                    format!("unexpected header key or value for '{k}'"),
                ))
            }
        }
    }
    let (Some(descr), Some(fortran_order), Some(shape)) = (descr, fortran, shape) else {
        return Err(Error::format(
            FMT,
            "header must have 'descr', 'fortran_order' and 'shape'",
        ));
    };
    let (dtype, big_endian) = parse_descr(&descr)?;
    Ok(Header {
        dtype,
        big_endian,
        fortran_order,
        shape,
        data_start: start + len,
    })
}

fn parse_descr(d: &str) -> Result<(DType, bool)> {
    let (order, code) = match d.as_bytes().first() {
        Some(b'<' | b'>' | b'|' | b'=') => (d.as_bytes()[0], &d[1..]),
        _ => (b'|', d),
    };
    let dtype = match code {
        "f4" => DType::F32,
        "f8" => DType::F64,
        "f2" => DType::F16,
        "i8" => DType::I64,
        "u1" => DType::U8,
        "b1" => DType::Bool,
        _ => {
            return Err(Error::format(
                FMT,
                format!(
                    "dtype '{d}' is not supported (supported: f4 f8 f2 i8 u1 b1, either byte order)"
                ),
            ))
        }
    };
    Ok((dtype, order == b'>' && dtype.size_in_bytes() > 1))
}

/// The few Python literals a `.npy` header contains.
enum PyLit {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
}

impl PyLit {
    fn parse_dict(text: &str) -> Result<Vec<(String, PyLit)>> {
        let err = |m: &str| Error::format(FMT, format!("malformed header {text:?}: {m}"));
        let mut s = text.trim();
        s = s
            .strip_prefix('{')
            .and_then(|s| s.strip_suffix('}'))
            .ok_or_else(|| err("not a dict"))?;
        let mut out = Vec::new();
        loop {
            s = s.trim_start();
            if s.is_empty() {
                break;
            }
            let (key, rest) = Self::string(s).ok_or_else(|| err("expected a quoted key"))?;
            s = rest
                .trim_start()
                .strip_prefix(':')
                .ok_or_else(|| err("expected ':'"))?;
            s = s.trim_start();
            let v;
            if let Some((st, rest)) = Self::string(s) {
                v = PyLit::Str(st);
                s = rest;
            } else if let Some(rest) = s.strip_prefix("True") {
                v = PyLit::Bool(true);
                s = rest;
            } else if let Some(rest) = s.strip_prefix("False") {
                v = PyLit::Bool(false);
                s = rest;
            } else if let Some(rest) = s.strip_prefix('(') {
                let end = rest.find(')').ok_or_else(|| err("unclosed tuple"))?;
                let mut dims = Vec::new();
                for part in rest[..end].split(',') {
                    let p = part.trim().trim_end_matches('L');
                    if p.is_empty() {
                        continue;
                    }
                    dims.push(p.parse::<usize>().map_err(|_| {
                        err(&format!("shape entry '{p}' is not a non-negative integer"))
                    })?);
                }
                v = PyLit::Tuple(dims);
                s = &rest[end + 1..];
            } else if s.starts_with('[') {
                // A structured dtype list: report it as such.
                v = PyLit::Tuple(vec![]);
                out.push((key.clone(), v));
                if key == "descr" {
                    return Err(Error::format(
                        FMT,
                        "structured dtypes (descr is a list) are not supported",
                    ));
                }
                return Err(err("unexpected list"));
            } else {
                return Err(err("unexpected value"));
            }
            out.push((key, v));
            s = s.trim_start();
            if let Some(rest) = s.strip_prefix(',') {
                s = rest;
            } else if !s.is_empty() {
                return Err(err("expected ','"));
            }
        }
        Ok(out)
    }

    fn string(s: &str) -> Option<(String, &str)> {
        let q = s.chars().next().filter(|c| *c == '\'' || *c == '"')?;
        let rest = &s[1..];
        let end = rest.find(q)?;
        Some((rest[..end].to_string(), &rest[end + 1..]))
    }
}
