//! NumPy `.npz`: a zip of `.npy` files (`np.savez`, stored; `np.savez_compressed`, deflate).
//! Names come back without the `.npy` suffix, as `np.load(..)[name]` uses them.

use super::{npy, zip, MappedFile, TensorInfo};
use crate::{Error, Result, Tensor};
use std::path::Path;

const FMT: &str = "npz";

/// Read every array of a `.npz` file, in archive order.
#[track_caller]
pub fn load(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    let path = path.as_ref();
    let file = MappedFile::open(FMT, path)?;
    load_from_bytes(file.bytes())
        .map_err(|e| Error::new(e.kind, e.op, format!("{}: {}", path.display(), e.msg)))
}

/// Read `.npz` bytes held in memory.
#[track_caller]
pub fn load_from_bytes(bytes: &[u8]) -> Result<Vec<(String, Tensor)>> {
    let archive = zip::Archive::parse(FMT, bytes)?;
    let mut out = Vec::with_capacity(archive.entries().len());
    for e in archive.entries() {
        let data = archive.read(e)?;
        let t = npy::load_from_bytes(&data)
            .map_err(|err| Error::new(err.kind, FMT, format!("array '{}': {}", e.name, err.msg)))?;
        out.push((strip(&e.name), t));
    }
    Ok(out)
}

/// Write arrays as an uncompressed `.npz` (like `np.savez`).
#[track_caller]
pub fn save(path: impl AsRef<Path>, tensors: &[(String, Tensor)]) -> Result<()> {
    let mut entries = Vec::with_capacity(tensors.len());
    for (name, t) in tensors {
        entries.push((format!("{name}.npy"), npy::save_to_bytes(t)?));
    }
    let bytes = zip::write_stored(FMT, &entries)?;
    super::write_file(FMT, path.as_ref(), &bytes)
}

pub(crate) fn inspect_bytes(bytes: &[u8]) -> Result<Vec<TensorInfo>> {
    let archive = zip::Archive::parse(FMT, bytes)?;
    let mut out = Vec::new();
    for e in archive.entries() {
        let data = archive.read(e)?;
        for mut info in npy::inspect_bytes(&data)? {
            info.name = strip(&e.name);
            out.push(info);
        }
    }
    Ok(out)
}

fn strip(name: &str) -> String {
    name.strip_suffix(".npy").unwrap_or(name).to_string()
}
