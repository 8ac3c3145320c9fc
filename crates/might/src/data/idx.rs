//! The IDX file format (MNIST, Fashion-MNIST, EMNIST): a big-endian header
//! `0x00 0x00 <type> <ndim>` followed by `ndim` u32 sizes and the raw data.
//!
//! Files may be gzip-compressed (`.gz`, detected by the gzip magic, not the name). The reader
//! treats the file as hostile: every size is checked against the real number of bytes before
//! anything is allocated, so a corrupt header can not make it allocate gigabytes or panic.

use std::io::Read;
use std::path::Path;

use crate::{Error, Result};

/// Element types an IDX file can hold (the third header byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdxType {
    U8,
    I8,
    I16,
    I32,
    F32,
    F64,
}

impl IdxType {
    fn from_code(code: u8) -> Option<IdxType> {
        Some(match code {
            0x08 => IdxType::U8,
            0x09 => IdxType::I8,
            0x0B => IdxType::I16,
            0x0C => IdxType::I32,
            0x0D => IdxType::F32,
            0x0E => IdxType::F64,
            _ => return None,
        })
    }
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            IdxType::U8 | IdxType::I8 => 1,
            IdxType::I16 => 2,
            IdxType::I32 | IdxType::F32 => 4,
            IdxType::F64 => 8,
        }
    }
}

/// A parsed IDX file: its element type, its dims and the raw (big-endian) element bytes.
#[derive(Clone, Debug)]
pub struct IdxArray {
    pub dtype: IdxType,
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

impl IdxArray {
    /// Number of elements (product of dims).
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    /// The data as u8, which is what MNIST-style files hold; errors for other types.
    #[track_caller]
    pub fn into_u8(self) -> Result<Vec<u8>> {
        if self.dtype != IdxType::U8 {
            return Err(Error::dtype(
                "idx",
                format!("expected unsigned byte data, file holds {:?}", self.dtype),
            ));
        }
        Ok(self.data)
    }
}

/// Cap on the decompressed size of one IDX file (4 GiB): a gzip bomb is refused.
const MAX_BYTES: u64 = 4 << 30;

/// Read an IDX file, raw or gzip-compressed.
#[track_caller]
pub fn read_idx(path: impl AsRef<Path>) -> Result<IdxArray> {
    let path = path.as_ref();
    let bytes = std::fs::read(path)
        .map_err(|e| Error::io("read_idx", format!("{}: {e}", path.display())))?;
    parse_idx(&bytes).map_err(|mut e| {
        e.msg = format!("{}: {}", path.display(), e.msg);
        e
    })
}

/// Parse IDX bytes (raw or gzip-compressed) already in memory.
#[track_caller]
pub fn parse_idx(bytes: &[u8]) -> Result<IdxArray> {
    if bytes.len() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b {
        let mut out = Vec::new();
        let dec = flate2::read::MultiGzDecoder::new(bytes);
        dec.take(MAX_BYTES + 1)
            .read_to_end(&mut out)
            .map_err(|e| Error::format("read_idx", format!("corrupt gzip stream: {e}")))?;
        if out.len() as u64 > MAX_BYTES {
            return Err(Error::format(
                "read_idx",
                "decompressed data is larger than 4 GiB",
            ));
        }
        return parse_raw(&out);
    }
    parse_raw(bytes)
}

#[track_caller]
fn parse_raw(bytes: &[u8]) -> Result<IdxArray> {
    if bytes.len() < 4 {
        return Err(Error::format(
            "read_idx",
            format!("file is {} bytes, too short for an IDX header", bytes.len()),
        ));
    }
    if bytes[0] != 0 || bytes[1] != 0 {
        return Err(Error::format(
            "read_idx",
            format!(
                "bad magic {:02x} {:02x} (IDX files start with two zero bytes)",
                bytes[0], bytes[1]
            ),
        ));
    }
    let dtype = IdxType::from_code(bytes[2]).ok_or_else(|| {
        Error::format(
            "read_idx",
            format!("unknown element type 0x{:02x}", bytes[2]),
        )
    })?;
    let ndim = bytes[3] as usize;
    if ndim == 0 {
        return Err(Error::format("read_idx", "zero dimensions"));
    }
    let header = 4 + 4 * ndim;
    if bytes.len() < header {
        return Err(Error::format(
            "read_idx",
            format!(
                "truncated header: {ndim} dims need {header} bytes, file has {}",
                bytes.len()
            ),
        ));
    }
    let dims: Vec<usize> = (0..ndim)
        .map(|i| {
            let o = 4 + 4 * i;
            u32::from_be_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) as usize
        })
        .collect();
    let need = dims
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| Error::format("read_idx", format!("dims {dims:?} overflow")))?;
    let have = bytes.len() - header;
    if have != need {
        return Err(Error::format(
            "read_idx",
            format!(
                "dims {dims:?} of {dtype:?} need {need} data bytes, file has {have}{}",
                if have < need { " (truncated?)" } else { "" }
            ),
        ));
    }
    Ok(IdxArray {
        dtype,
        dims,
        data: bytes[header..].to_vec(),
    })
}

/// Encode a u8 array as IDX bytes (used by tests and to write small synthetic datasets).
pub fn encode_idx_u8(dims: &[usize], data: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, 0x08, dims.len() as u8];
    for &d in dims {
        out.extend_from_slice(&(d as u32).to_be_bytes());
    }
    out.extend_from_slice(data);
    out
}

/// Write a u8 IDX file, gzip-compressed when `path` ends in `.gz`.
#[track_caller]
pub fn write_idx_u8(path: impl AsRef<Path>, dims: &[usize], data: &[u8]) -> Result<()> {
    use std::io::Write;
    let path = path.as_ref();
    let raw = encode_idx_u8(dims, data);
    let bytes = if path.extension().is_some_and(|e| e == "gz") {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&raw)?;
        enc.finish()?
    } else {
        raw
    };
    std::fs::write(path, bytes)
        .map_err(|e| Error::io("write_idx", format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_raw_and_gz() {
        let data: Vec<u8> = (0..24).collect();
        let raw = encode_idx_u8(&[2, 3, 4], &data);
        let a = parse_idx(&raw).unwrap();
        assert_eq!(a.dims, vec![2, 3, 4]);
        assert_eq!(a.data, data);
        let dir = std::env::temp_dir().join(format!("might-idx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.gz");
        write_idx_u8(&p, &[2, 3, 4], &data).unwrap();
        let b = read_idx(&p).unwrap();
        assert_eq!(b.dims, vec![2, 3, 4]);
        assert_eq!(b.into_u8().unwrap(), data);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn hostile_headers_error() {
        // Huge dims with no data: must error, not allocate.
        let mut h = vec![0, 0, 0x08, 3];
        for _ in 0..3 {
            h.extend_from_slice(&u32::MAX.to_be_bytes());
        }
        let e = parse_idx(&h).unwrap_err();
        assert_eq!(e.kind, crate::ErrorKind::Format);
        assert!(parse_idx(&[0, 0]).is_err());
        assert!(parse_idx(&[1, 0, 8, 1, 0, 0, 0, 1, 5]).is_err()); // bad magic
        assert!(parse_idx(&[0, 0, 0x42, 1, 0, 0, 0, 1, 5]).is_err()); // bad type
        assert!(parse_idx(&[0, 0, 8, 2, 0, 0, 0, 1]).is_err()); // truncated header
        assert!(parse_idx(&[0, 0, 8, 1, 0, 0, 0, 3, 5, 6])
            .unwrap_err()
            .msg
            .contains("truncated"));
        assert!(parse_idx(&[0, 0, 8, 0]).is_err()); // zero dims
                                                    // Truncated gzip stream.
        let raw = encode_idx_u8(&[4], &[1, 2, 3, 4]);
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, &raw).unwrap();
        let gz = enc.finish().unwrap();
        assert!(parse_idx(&gz[..gz.len() / 2]).is_err());
        assert_eq!(parse_idx(&gz).unwrap().data, vec![1, 2, 3, 4]);
    }
}
