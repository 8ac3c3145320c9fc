//! Raw dumps: the elements only, row-major, little-endian, no header. The caller supplies
//! shape and dtype; the file size must match them exactly.

use super::{tensor_from_bytes, tensor_to_le_bytes, MappedFile};
use crate::{DType, Error, Result, Shape, Tensor};
use std::path::Path;

const FMT: &str = "raw";

/// Read a raw little-endian file as a tensor of `shape` and `dtype`.
#[track_caller]
pub fn from_raw_file(
    path: impl AsRef<Path>,
    shape: impl Into<Shape>,
    dtype: DType,
) -> Result<Tensor> {
    let path = path.as_ref();
    let shape = shape.into();
    let file = MappedFile::open(FMT, path)?;
    tensor_from_bytes(
        FMT,
        &path.display().to_string(),
        dtype,
        shape.dims(),
        file.bytes(),
        false,
    )
    .map_err(|e| Error::new(e.kind, e.op, e.msg))
}

/// Write the elements of `t` (any layout) row-major, little-endian.
#[track_caller]
pub fn to_raw_file(path: impl AsRef<Path>, t: &Tensor) -> Result<()> {
    super::write_file(FMT, path.as_ref(), &tensor_to_le_bytes(t)?)
}
