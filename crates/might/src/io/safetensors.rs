//! safetensors: an 8-byte little-endian header length, a JSON header
//! `{"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {..}}`, then the
//! raw little-endian data. Files are memory-mapped; `load_from_bytes` reads embedded models
//! (`include_bytes!`).
//!
//! Every header passes two checks: the reference `safetensors` crate's (header size, UTF-8,
//! offsets contiguous from 0, sizes matching dtype × shape without overflow, the data section
//! covered exactly), and ours, which runs first so a bad file gets a message naming the tensor
//! and the numbers, keeps the file's tensor order, and refuses a name that appears twice (the
//! crate's map keeps the last silently).

use super::json::{self, Json};
use super::{checked_nbytes, tensor_from_bytes, tensor_to_le_bytes, MappedFile, TensorInfo};
use crate::{DType, Error, Result, Tensor};
use std::collections::HashMap;
use std::path::Path;

const FMT: &str = "safetensors";

/// Tensors with their names, in file order.
pub type NamedTensors = Vec<(String, Tensor)>;
/// Headers larger than this are refused (the reference implementation uses the same cap).
const MAX_HEADER: u64 = 100_000_000;

/// Read every tensor of a safetensors file, in file order.
#[track_caller]
pub fn load(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    Ok(load_with_metadata(path)?.0)
}

/// Read every tensor and the `__metadata__` string map.
#[track_caller]
pub fn load_with_metadata(
    path: impl AsRef<Path>,
) -> Result<(NamedTensors, HashMap<String, String>)> {
    let path = path.as_ref();
    let file = MappedFile::open(FMT, path)?;
    load_bytes_with_metadata(file.bytes())
        .map_err(|e| Error::new(e.kind, e.op, format!("{}: {}", path.display(), e.msg)))
}

/// Read tensors from bytes in memory (e.g. `include_bytes!("model.safetensors")`).
#[track_caller]
pub fn load_from_bytes(bytes: &[u8]) -> Result<Vec<(String, Tensor)>> {
    Ok(load_bytes_with_metadata(bytes)?.0)
}

/// Read tensors and metadata from bytes in memory.
#[track_caller]
pub fn load_bytes_with_metadata(bytes: &[u8]) -> Result<(NamedTensors, HashMap<String, String>)> {
    let (header, data) = parse(bytes)?;
    let mut out = Vec::with_capacity(header.tensors.len());
    for e in &header.tensors {
        let t = tensor_from_bytes(
            FMT,
            &e.name,
            e.dtype,
            &e.shape,
            &data[e.begin..e.end],
            false,
        )?;
        out.push((e.name.clone(), t));
    }
    Ok((out, header.metadata))
}

/// Names, dtypes and shapes without reading the data.
pub(crate) fn inspect_bytes(bytes: &[u8]) -> Result<Vec<TensorInfo>> {
    let (header, _) = parse(bytes)?;
    Ok(header
        .tensors
        .into_iter()
        .map(|e| TensorInfo::new(e.name, e.dtype, e.shape))
        .collect())
}

/// Write tensors (any layout; written row-major) and optional metadata. Names must be unique.
#[track_caller]
pub fn save(
    path: impl AsRef<Path>,
    tensors: &[(String, Tensor)],
    metadata: Option<HashMap<String, String>>,
) -> Result<()> {
    let bytes = save_to_bytes(tensors, metadata.as_ref())?;
    super::write_file(FMT, path.as_ref(), &bytes)
}

/// The bytes `save` writes.
#[track_caller]
pub fn save_to_bytes(
    tensors: &[(String, Tensor)],
    metadata: Option<&HashMap<String, String>>,
) -> Result<Vec<u8>> {
    let mut header = String::from("{");
    let mut first = true;
    if let Some(meta) = metadata {
        // Sorted so the same input always gives the same file.
        let mut kv: Vec<_> = meta.iter().collect();
        kv.sort();
        header.push_str("\"__metadata__\":{");
        for (i, (k, v)) in kv.iter().enumerate() {
            if i > 0 {
                header.push(',');
            }
            header.push_str(&format!("{}:{}", json::quote(k), json::quote(v)));
        }
        header.push('}');
        first = false;
    }
    let mut seen = std::collections::HashSet::new();
    let mut offset = 0usize;
    for (name, t) in tensors {
        if name == "__metadata__" || !seen.insert(name.as_str()) {
            return Err(Error::invalid(
                "safetensors::save",
                format!("tensor name '{name}' is duplicated or reserved"),
            ));
        }
        let n = t.numel() * t.dtype().size_in_bytes();
        if !first {
            header.push(',');
        }
        first = false;
        header.push_str(&format!(
            "{}:{{\"dtype\":\"{}\",\"shape\":{:?},\"data_offsets\":[{},{}]}}",
            json::quote(name),
            dtype_name(t.dtype()),
            t.dims(),
            offset,
            offset + n
        ));
        offset += n;
    }
    header.push('}');
    // Pad with spaces so the data starts 8-byte aligned, as the reference writer does.
    while (8 + header.len()) % 8 != 0 {
        header.push(' ');
    }
    let mut out = Vec::with_capacity(8 + header.len() + offset);
    out.extend((header.len() as u64).to_le_bytes());
    out.extend(header.as_bytes());
    for (_, t) in tensors {
        out.extend(tensor_to_le_bytes(t)?);
    }
    Ok(out)
}

pub(crate) fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "F32",
        DType::F64 => "F64",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::I64 => "I64",
        DType::U8 => "U8",
        DType::Bool => "BOOL",
    }
}

fn parse_dtype(name: &str, s: &str) -> Result<DType> {
    Ok(match s {
        "F32" => DType::F32,
        "F64" => DType::F64,
        "F16" => DType::F16,
        "BF16" => DType::BF16,
        "I64" => DType::I64,
        "U8" => DType::U8,
        "BOOL" => DType::Bool,
        "I8" | "I16" | "I32" | "U16" | "U32" | "U64" | "F8_E4M3" | "F8_E5M2" | "F8_E8M0" | "F4"
        | "F6_E2M3" | "F6_E3M2" | "C64" => {
            return Err(Error::format(
                FMT,
                format!(
                    "tensor '{name}' has dtype {s}, which might does not support \
                     (supported: F32 F64 F16 BF16 I64 U8 BOOL); convert it before saving"
                ),
            ))
        }
        _ => {
            return Err(Error::format(
                FMT,
                format!("tensor '{name}' has unknown dtype '{s}'"),
            ))
        }
    })
}

struct Entry {
    name: String,
    dtype: DType,
    shape: Vec<usize>,
    begin: usize,
    end: usize,
}

struct Header {
    tensors: Vec<Entry>,
    metadata: HashMap<String, String>,
}

/// Parse and validate the header; returns it and the data section.
fn parse(bytes: &[u8]) -> Result<(Header, &[u8])> {
    if bytes.len() < 8 {
        return Err(Error::format(
            FMT,
            format!(
                "truncated: {} bytes, the header length alone needs 8",
                bytes.len()
            ),
        ));
    }
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    let avail = (bytes.len() - 8) as u64;
    if n > avail || n > MAX_HEADER {
        return Err(Error::format(
            FMT,
            format!(
                "header length {n} is larger than the {avail} bytes after it \
                 (truncated file, or not a safetensors file)"
            ),
        ));
    }
    let n = n as usize;
    let head = &bytes[8..8 + n];
    if head.first() != Some(&b'{') {
        return Err(Error::format(
            FMT,
            "header does not start with '{' (not a safetensors file)",
        ));
    }
    let data = &bytes[8 + n..];
    let json = json::parse(FMT, head)?;
    let Json::Object(items) = json else {
        return Err(Error::format(FMT, "header is not a JSON object"));
    };
    let mut tensors = Vec::with_capacity(items.len());
    let mut metadata = HashMap::new();
    let mut names = std::collections::HashSet::new();
    for (name, v) in items {
        if name == "__metadata__" {
            let Json::Object(kv) = v else {
                return Err(Error::format(FMT, "__metadata__ is not an object"));
            };
            for (k, v) in kv {
                let Json::Str(s) = v else {
                    return Err(Error::format(
                        FMT,
                        format!("__metadata__ value of '{k}' is not a string"),
                    ));
                };
                metadata.insert(k, s);
            }
            continue;
        }
        if !names.insert(name.clone()) {
            return Err(Error::format(FMT, format!("tensor '{name}' appears twice")));
        }
        let bad = |what: &str| Error::format(FMT, format!("tensor '{name}': {what}"));
        let dtype = v
            .get("dtype")
            .and_then(Json::as_str)
            .ok_or_else(|| bad("missing or non-string 'dtype'"))?;
        let dtype = parse_dtype(&name, dtype)?;
        let Some(Json::Array(shape_j)) = v.get("shape") else {
            return Err(bad("missing 'shape' array"));
        };
        let shape = shape_j
            .iter()
            .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| bad("shape entries must be non-negative integers"))?;
        let Some(Json::Array(offs)) = v.get("data_offsets") else {
            return Err(bad("missing 'data_offsets' array"));
        };
        let (begin, end) = match offs.as_slice() {
            [b, e] => (b.as_u64(), e.as_u64()),
            _ => (None, None),
        };
        let (Some(begin), Some(end)) = (begin, end) else {
            return Err(bad("data_offsets must be two non-negative integers"));
        };
        if begin > end || end > data.len() as u64 {
            return Err(bad(&format!(
                "data_offsets [{begin}, {end}] out of range (data section is {} bytes)",
                data.len()
            )));
        }
        let (_, nbytes) = checked_nbytes(FMT, &shape, dtype).map_err(|e| bad(&e.msg))?;
        if (end - begin) as usize != nbytes {
            return Err(bad(&format!(
                "shape {shape:?} of {dtype} needs {nbytes} bytes but data_offsets span {}",
                end - begin
            )));
        }
        tensors.push(Entry {
            name,
            dtype,
            shape,
            begin: begin as usize,
            end: end as usize,
        });
    }
    ::safetensors::SafeTensors::read_metadata(bytes).map_err(|e| {
        Error::format(
            FMT,
            format!("header fails the safetensors reference checks: {e}"),
        )
    })?;
    Ok((Header { tensors, metadata }, data))
}
