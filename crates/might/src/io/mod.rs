//! Reading and writing tensors: safetensors, NumPy `.npy`/`.npz`, PyTorch `.pt`/`.pth`, raw
//! little-endian dumps. Formats only: loading into a model is `nn::load_state_dict`, training
//! checkpoints are `optim::checkpoint`.
//!
//! Every loader treats its input as hostile: sizes are checked against the bytes actually
//! present *before* anything is allocated, nesting and stack depths are capped, and every
//! problem comes back as a `might::Error` (kind `Format` or `Io`) that names the file format
//! and what is wrong. No input makes a loader panic.

pub(crate) mod json;
pub mod npy;
pub mod npz;
mod pickle;
pub mod pt;
pub mod raw;
pub mod safetensors;
mod zip;

use crate::{DType, Error, Result, Tensor};
use half::{bf16, f16};
use std::path::Path;

/// What `inspect` tells about one tensor of a file, without reading its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Bytes of the tensor's elements (`numel * dtype size`).
    pub bytes: usize,
}

impl TensorInfo {
    pub(crate) fn new(name: String, dtype: DType, shape: Vec<usize>) -> TensorInfo {
        // Callers only build infos for shapes already checked against the file size.
        let bytes = shape.iter().product::<usize>() * dtype.size_in_bytes();
        TensorInfo {
            name,
            dtype,
            shape,
            bytes,
        }
    }
}

/// List the tensors in a file (safetensors, npy, npz, pt/pth), guessing the format from its
/// first bytes: used by `might inspect FILE`. Reads headers only where the format allows.
#[track_caller]
pub fn inspect(path: impl AsRef<Path>) -> Result<Vec<TensorInfo>> {
    let path = path.as_ref();
    let file = MappedFile::open("inspect", path)?;
    let mut infos = inspect_bytes(file.bytes()).map_err(|mut e| {
        e.msg = format!("{}: {}", path.display(), e.msg);
        e
    })?;
    if file.bytes().starts_with(npy::MAGIC) {
        // A .npy holds one unnamed array: name it after the file, as `np.load` users do.
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        for i in &mut infos {
            i.name = stem.clone().unwrap_or_default();
        }
    }
    Ok(infos)
}

/// [`inspect`] on bytes in memory (a `.npy` array is listed with an empty name).
#[track_caller]
pub fn inspect_bytes(bytes: &[u8]) -> Result<Vec<TensorInfo>> {
    if bytes.starts_with(npy::MAGIC) {
        npy::inspect_bytes(bytes)
    } else if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        let archive = zip::Archive::parse("zip", bytes)?;
        if archive
            .entries()
            .iter()
            .any(|e| e.name.ends_with("data.pkl"))
        {
            pt::inspect_bytes(bytes)
        } else {
            npz::inspect_bytes(bytes)
        }
    } else if bytes.len() >= 10 && bytes[8] == b'{' {
        safetensors::inspect_bytes(bytes)
    } else {
        Err(Error::format(
            "inspect",
            "not a safetensors, npy, npz or PyTorch file (unrecognized first bytes)",
        ))
    }
}

/// A read-only view of a whole file: memory-mapped when possible (no copy of a large model),
/// read into memory otherwise (pipes, special files, empty files).
pub(crate) struct MappedFile {
    data: MappedData,
}

enum MappedData {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl MappedFile {
    #[track_caller]
    pub(crate) fn open(op: &str, path: &Path) -> Result<MappedFile> {
        let file = std::fs::File::open(path)
            .map_err(|e| Error::io(op, format!("cannot open {}: {e}", path.display())))?;
        let meta = file
            .metadata()
            .map_err(|e| Error::io(op, format!("cannot stat {}: {e}", path.display())))?;
        if meta.is_file() && meta.len() > 0 {
            // SAFETY: the map is read-only and private to this process. The only hazard is
            // another process truncating the file while it is mapped (SIGBUS); loaders copy
            // the data out right away and drop the map, the same contract as every mmap-based
            // model loader. Contents are never trusted: all offsets are bounds-checked.
            let map = unsafe { memmap2::Mmap::map(&file) };
            if let Ok(map) = map {
                return Ok(MappedFile {
                    data: MappedData::Map(map),
                });
            }
        }
        let mut buf = Vec::new();
        use std::io::Read;
        (&file)
            .read_to_end(&mut buf)
            .map_err(|e| Error::io(op, format!("cannot read {}: {e}", path.display())))?;
        Ok(MappedFile {
            data: MappedData::Owned(buf),
        })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match &self.data {
            MappedData::Map(m) => m,
            MappedData::Owned(v) => v,
        }
    }
}

/// Number of elements of `shape`, failing (instead of wrapping) on overflow, and the byte
/// count for `dtype`.
pub(crate) fn checked_nbytes(fmt: &str, shape: &[usize], dtype: DType) -> Result<(usize, usize)> {
    let numel = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            Error::format(
                fmt,
                format!("shape {shape:?} has more elements than fit in memory"),
            )
        })?;
    let nbytes = numel.checked_mul(dtype.size_in_bytes()).ok_or_else(|| {
        Error::format(
            fmt,
            format!("shape {shape:?} of {dtype} is larger than memory"),
        )
    })?;
    Ok((numel, nbytes))
}

/// Decode `bytes` (exactly `numel * size` of them) as a contiguous tensor of `dtype` and
/// `shape` (on the CPU, like every loaded tensor until moved).
pub(crate) fn decode(
    dtype: DType,
    bytes: &[u8],
    big_endian: bool,
    shape: &[usize],
) -> Result<Tensor> {
    macro_rules! dec {
        ($n:literal, $f:expr) => {
            bytes
                .chunks_exact($n)
                .map(|c| {
                    let mut a = [0u8; $n];
                    a.copy_from_slice(c);
                    if big_endian {
                        a.reverse();
                    }
                    $f(a)
                })
                .collect::<Vec<_>>()
        };
    }
    match dtype {
        DType::F32 => Tensor::from_vec(dec!(4, f32::from_le_bytes), shape),
        DType::F64 => Tensor::from_vec(dec!(8, f64::from_le_bytes), shape),
        DType::I64 => Tensor::from_vec(dec!(8, i64::from_le_bytes), shape),
        DType::F16 => Tensor::from_vec(dec!(2, |a| f16::from_bits(u16::from_le_bytes(a))), shape),
        DType::BF16 => Tensor::from_vec(dec!(2, |a| bf16::from_bits(u16::from_le_bytes(a))), shape),
        DType::U8 => Tensor::from_vec(bytes.to_vec(), shape),
        DType::Bool => Tensor::from_vec(bytes.iter().map(|&b| b != 0).collect(), shape),
    }
}

/// Build a contiguous tensor of `shape` from little-endian bytes, checking the byte count.
pub(crate) fn tensor_from_bytes(
    fmt: &str,
    name: &str,
    dtype: DType,
    shape: &[usize],
    bytes: &[u8],
    big_endian: bool,
) -> Result<Tensor> {
    let (_, nbytes) = checked_nbytes(fmt, shape, dtype)?;
    if nbytes != bytes.len() {
        return Err(Error::format(
            fmt,
            format!(
                "tensor '{name}': shape {shape:?} of {dtype} needs {nbytes} bytes but the file has {}",
                bytes.len()
            ),
        ));
    }
    decode(dtype, bytes, big_endian, shape)
}

/// The elements of `t` (any layout) as little-endian bytes, row-major.
pub(crate) fn tensor_to_le_bytes(t: &Tensor) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(t.numel() * t.dtype().size_in_bytes());
    match t.dtype() {
        DType::F32 => t
            .to_vec::<f32>()?
            .iter()
            .for_each(|v| out.extend(v.to_le_bytes())),
        DType::F64 => t
            .to_vec::<f64>()?
            .iter()
            .for_each(|v| out.extend(v.to_le_bytes())),
        DType::I64 => t
            .to_vec::<i64>()?
            .iter()
            .for_each(|v| out.extend(v.to_le_bytes())),
        DType::F16 => t
            .to_vec::<f16>()?
            .iter()
            .for_each(|v| out.extend(v.to_bits().to_le_bytes())),
        DType::BF16 => t
            .to_vec::<bf16>()?
            .iter()
            .for_each(|v| out.extend(v.to_bits().to_le_bytes())),
        DType::U8 => out.extend(t.to_vec::<u8>()?),
        DType::Bool => out.extend(t.to_vec::<bool>()?.iter().map(|&b| b as u8)),
    }
    Ok(out)
}

/// Read `n` bytes at `pos`, or a format error naming what was being read.
pub(crate) fn take<'a>(
    fmt: &str,
    bytes: &'a [u8],
    pos: usize,
    n: usize,
    what: &str,
) -> Result<&'a [u8]> {
    pos.checked_add(n)
        .and_then(|end| bytes.get(pos..end))
        .ok_or_else(|| {
            Error::format(
                fmt,
                format!(
                    "truncated: {what} needs {n} bytes at offset {pos} but the data is {} bytes",
                    bytes.len()
                ),
            )
        })
}

/// Write `data` to `path` with a clear error naming the format.
pub(crate) fn write_file(fmt: &str, path: &Path, data: &[u8]) -> Result<()> {
    std::fs::write(path, data)
        .map_err(|e| Error::io(fmt, format!("cannot write {}: {e}", path.display())))
}

/// Build an uncompressed zip from `(name, bytes)` entries. Exposed (hidden) for tests and
/// fuzz targets that need hand-made `.pt`/`.npz` archives.
#[doc(hidden)]
pub fn write_zip_stored(entries: &[(String, Vec<u8>)]) -> Result<Vec<u8>> {
    zip::write_stored("zip", entries)
}
