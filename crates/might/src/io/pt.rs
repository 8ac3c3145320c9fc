//! PyTorch `.pt`/`.pth` files written by `torch.save` (the zip format, PyTorch >= 1.6):
//! `<prefix>/data.pkl` (a pickle describing the object), `<prefix>/data/<key>` (one raw
//! little-endian buffer per storage) and `<prefix>/byteorder`.
//!
//! The pickle is run by a restricted VM (see `pickle.rs`) that only accepts tensors,
//! storages and `OrderedDict`; any other global is refused by name. Tensors are strided
//! views of their storage: a tensor that is exactly its whole storage keeps sharing it (tied
//! weights stay tied); a slice, transpose or other partial view is copied into a fresh
//! contiguous tensor so it does not pin the whole storage. The legacy (pre-1.6, non-zip)
//! format is not supported.

use super::pickle::{self, TensorSpec};
use super::{checked_nbytes, decode, zip, MappedFile, TensorInfo};
use crate::{Error, Layout, Result, Shape, Tensor};
use std::collections::HashMap;
use std::path::Path;

const FMT: &str = "pt";

/// Read the tensors of a `torch.save` file. Nested dicts/lists flatten to dotted names
/// (`{"model": {"fc.weight": t}}` → `"model.fc.weight"`); a bare tensor is named `"tensor"`.
#[track_caller]
pub fn load(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    let path = path.as_ref();
    let file = MappedFile::open(FMT, path)?;
    load_from_bytes(file.bytes())
        .map_err(|e| Error::new(e.kind, e.op, format!("{}: {}", path.display(), e.msg)))
}

/// Read a `torch.save` archive held in memory.
#[track_caller]
pub fn load_from_bytes(bytes: &[u8]) -> Result<Vec<(String, Tensor)>> {
    let (archive, prefix, big_endian) = open(bytes)?;
    let specs = run_pickle(&archive, &prefix)?;
    // each storage once, as a flat tensor the views below share
    let mut storages: HashMap<String, Tensor> = HashMap::new();
    let mut out = Vec::with_capacity(specs.len());
    for (name, spec) in specs {
        let sref = &spec.storage;
        let storage = match storages.get(&sref.key) {
            Some(s) => {
                let s = s.clone();
                let (dt, len) = (s.dtype(), s.numel());
                if dt != sref.dtype || len != sref.numel {
                    return Err(Error::format(
                        FMT,
                        format!(
                            "storage '{}' is used with two different types or sizes",
                            sref.key
                        ),
                    ));
                }
                s
            }
            None => {
                let entry_name = format!("{prefix}/data/{}", sref.key);
                let entry = archive.find(&entry_name).ok_or_else(|| {
                    Error::format(
                        FMT,
                        format!("tensor '{name}': archive has no entry '{entry_name}'"),
                    )
                })?;
                let (_, nbytes) = checked_nbytes(FMT, &[sref.numel], sref.dtype)?;
                if entry.usize != nbytes as u64 {
                    return Err(Error::format(
                        FMT,
                        format!(
                            "storage '{}' should hold {} {} elements ({nbytes} bytes) but its entry has {} bytes",
                            sref.key, sref.numel, sref.dtype, entry.usize
                        ),
                    ));
                }
                let data = archive.read(entry)?;
                let s = decode(sref.dtype, &data, big_endian, &[sref.numel])?;
                storages.insert(sref.key.clone(), s.clone());
                s
            }
        };
        let t = build_view(&name, &spec, storage)?;
        out.push((name, t));
    }
    Ok(out)
}

/// The tensor `spec` describes, as a strided view of `storage` (bounds-checked).
fn build_view(name: &str, spec: &TensorSpec, storage: Tensor) -> Result<Tensor> {
    let numel_storage = spec.storage.numel;
    let numel = spec
        .shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| {
            Error::format(
                FMT,
                format!("tensor '{name}': size {:?} overflows", spec.shape),
            )
        })?;
    if numel > 0 {
        // Largest storage index touched, computed without overflow.
        let extent = spec
            .shape
            .iter()
            .zip(&spec.stride)
            .try_fold(spec.offset, |acc, (&d, &s)| {
                acc.checked_add((d - 1).checked_mul(s)?)
            });
        if extent.is_none_or(|e| e >= numel_storage) {
            return Err(Error::format(
                FMT,
                format!(
                    "tensor '{name}': size {:?}, stride {:?}, offset {} reach past its storage of {} elements",
                    spec.shape, spec.stride, spec.offset, numel_storage
                ),
            ));
        }
    }
    let layout = Layout::new(
        Shape::from(spec.shape.clone()),
        spec.stride.clone(),
        spec.offset,
    );
    let whole = layout.is_contiguous() && spec.offset == 0 && numel == numel_storage;
    let view = storage.with_layout(layout);
    let t = if whole { view } else { view.deep_clone()? };
    if spec.requires_grad && t.dtype().is_float() {
        t.requires_grad_(true);
    }
    Ok(t)
}

pub(crate) fn inspect_bytes(bytes: &[u8]) -> Result<Vec<TensorInfo>> {
    let (archive, prefix, _) = open(bytes)?;
    let specs = run_pickle(&archive, &prefix)?;
    let mut out = Vec::with_capacity(specs.len());
    for (name, spec) in specs {
        checked_nbytes(FMT, &spec.shape, spec.storage.dtype)?;
        out.push(TensorInfo::new(
            name,
            spec.storage.dtype,
            spec.shape.clone(),
        ));
    }
    Ok(out)
}

/// Parse the archive, find the `<prefix>/data.pkl` record and the byte order.
fn open(bytes: &[u8]) -> Result<(zip::Archive<'_>, String, bool)> {
    let archive = zip::Archive::parse(FMT, bytes).map_err(|e| {
        if !bytes.starts_with(b"PK") {
            Error::format(
                FMT,
                "not a zip archive: only the torch.save zip format (PyTorch >= 1.6) is supported",
            )
        } else {
            e
        }
    })?;
    let pkl = archive
        .entries()
        .iter()
        .find(|e| e.name.ends_with("/data.pkl") && e.name.matches('/').count() == 1)
        .ok_or_else(|| {
            Error::format(
                FMT,
                "archive has no '<name>/data.pkl' record (not a torch.save file)",
            )
        })?;
    let prefix = pkl.name.trim_end_matches("/data.pkl").to_string();
    let big_endian = match archive.find(&format!("{prefix}/byteorder")) {
        Some(e) => match &*archive.read(e)? {
            b"little" => false,
            b"big" => true,
            other => {
                return Err(Error::format(
                    FMT,
                    format!("byteorder record is {:?}", String::from_utf8_lossy(other)),
                ))
            }
        },
        None => false,
    };
    Ok((archive, prefix, big_endian))
}

fn run_pickle(
    archive: &zip::Archive<'_>,
    prefix: &str,
) -> Result<Vec<(String, std::rc::Rc<TensorSpec>)>> {
    let entry = archive
        .find(&format!("{prefix}/data.pkl"))
        .ok_or_else(|| Error::format(FMT, "missing data.pkl"))?;
    let data = archive.read(entry)?;
    let value = pickle::unpickle(&data)?;
    pickle::flatten(&value)
}
