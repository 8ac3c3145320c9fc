//! ONNX element types and the values a graph passes around: a might [`Tensor`] plus the ONNX
//! element type it stands for.
//!
//! might computes in seven dtypes; ONNX has more. Every ONNX integer type is held as `i64`
//! (uint8 as `u8`), and the value remembers its ONNX type so outputs come back as the model
//! declares them (an int32 result is narrowed with wrap-around, as C would).

use super::lowbit;
use super::proto::TensorProto;
use crate::{DType, Error, Result, Tensor};
use std::path::Path;

/// ONNX `TensorProto.DataType` codes.
pub mod elem {
    pub const FLOAT: i32 = 1;
    pub const UINT8: i32 = 2;
    pub const INT8: i32 = 3;
    pub const UINT16: i32 = 4;
    pub const INT16: i32 = 5;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const STRING: i32 = 8;
    pub const BOOL: i32 = 9;
    pub const FLOAT16: i32 = 10;
    pub const DOUBLE: i32 = 11;
    pub const UINT32: i32 = 12;
    pub const UINT64: i32 = 13;
    pub const BFLOAT16: i32 = 16;
}

/// ONNX's name of an element type (`tensor(float)` says `float`).
pub fn elem_name(e: i32) -> &'static str {
    match e {
        1 => "float",
        2 => "uint8",
        3 => "int8",
        4 => "uint16",
        5 => "int16",
        6 => "int32",
        7 => "int64",
        8 => "string",
        9 => "bool",
        10 => "float16",
        11 => "double",
        12 => "uint32",
        13 => "uint64",
        14 => "complex64",
        15 => "complex128",
        16 => "bfloat16",
        17 => "float8e4m3fn",
        18 => "float8e4m3fnuz",
        19 => "float8e5m2",
        20 => "float8e5m2fnuz",
        21 => "uint4",
        22 => "int4",
        23 => "float4e2m1",
        24 => "float8e8m0",
        25 => "uint2",
        26 => "int2",
        _ => "unknown",
    }
}

/// The might dtype an ONNX element type computes in (`None`: not supported).
pub fn dtype_of(e: i32) -> Option<DType> {
    Some(match e {
        elem::FLOAT => DType::F32,
        elem::DOUBLE => DType::F64,
        elem::FLOAT16 => DType::F16,
        elem::BFLOAT16 => DType::BF16,
        elem::UINT8 => DType::U8,
        elem::BOOL => DType::Bool,
        elem::INT8
        | elem::UINT16
        | elem::INT16
        | elem::INT32
        | elem::INT64
        | elem::UINT32
        | elem::UINT64 => DType::I64,
        // float8/float4 values are held exactly in f32, int4/int2 in i64 (see lowbit.rs)
        e if lowbit::is_small_float(e) => DType::F32,
        e if lowbit::is_small_int(e) => DType::I64,
        _ => return None,
    })
}

/// The ONNX element type a might dtype stands for when nothing else says.
pub fn elem_of(d: DType) -> i32 {
    match d {
        DType::F32 => elem::FLOAT,
        DType::F64 => elem::DOUBLE,
        DType::F16 => elem::FLOAT16,
        DType::BF16 => elem::BFLOAT16,
        DType::I64 => elem::INT64,
        DType::U8 => elem::UINT8,
        DType::Bool => elem::BOOL,
    }
}

/// A tensor flowing through a graph, with the ONNX element type it stands for.
#[derive(Clone, Debug)]
pub struct Value {
    pub tensor: Tensor,
    pub elem: i32,
}

impl Value {
    /// A value whose ONNX type is the one its dtype stands for.
    pub fn new(tensor: Tensor) -> Value {
        let elem = elem_of(tensor.dtype());
        Value { tensor, elem }
    }

    /// `tensor` standing for ONNX type `elem` (held in `elem`'s might dtype).
    pub fn typed(tensor: Tensor, elem: i32) -> Value {
        Value { tensor, elem }
    }

    pub fn dims(&self) -> &[usize] {
        self.tensor.dims()
    }

    /// The tensor with its values narrowed to the ONNX type's range (int32 wraps, uint8
    /// stays, …): what a runtime computing in that type would hold.
    pub fn narrowed(&self) -> Result<Tensor> {
        let bits = match self.elem {
            lowbit::INT2 | lowbit::UINT2 => 2,
            lowbit::INT4 | lowbit::UINT4 => 4,
            elem::INT8 | elem::UINT8 => 8,
            elem::INT16 | elem::UINT16 => 16,
            elem::INT32 | elem::UINT32 => 32,
            _ => return Ok(self.tensor.clone()),
        };
        if self.tensor.dtype() != DType::I64 {
            return Ok(self.tensor.clone());
        }
        let signed = matches!(
            self.elem,
            elem::INT8 | elem::INT16 | elem::INT32 | lowbit::INT4 | lowbit::INT2
        );
        let v: Vec<i64> = self
            .tensor
            .to_vec::<i64>()?
            .into_iter()
            .map(|x| {
                let m = x & ((1i64 << bits) - 1);
                if signed && m >= 1i64 << (bits - 1) {
                    m - (1i64 << bits)
                } else {
                    m
                }
            })
            .collect();
        Tensor::from_vec(v, self.tensor.dims())
    }
}

fn bad(msg: String) -> Error {
    Error::format("onnx", msg)
}

/// Where external tensor data is looked up: the model file's folder.
pub(crate) struct DataDir<'a>(pub Option<&'a Path>);

/// Decode a `TensorProto` (raw bytes, typed fields or an external file) into a value. Sizes
/// are checked against the data actually present before anything is allocated.
pub fn tensor_from_proto(t: &TensorProto) -> Result<Value> {
    decode(t, &DataDir(None))
}

pub(crate) fn decode(t: &TensorProto, dir: &DataDir) -> Result<Value> {
    let name = t.name.as_deref().unwrap_or("");
    let e = t.data_type.unwrap_or(0);
    dtype_of(e).ok_or_else(|| {
        Error::dtype(
            "onnx",
            format!(
                "tensor '{name}': element type {} ({e}) is not supported",
                elem_name(e)
            ),
        )
    })?;
    let mut shape = Vec::with_capacity(t.dims.len());
    let mut numel: usize = 1;
    for &d in &t.dims {
        let d = usize::try_from(d)
            .map_err(|_| bad(format!("tensor '{name}': negative dimension {d}")))?;
        numel = numel
            .checked_mul(d)
            .ok_or_else(|| bad(format!("tensor '{name}': dims {:?} overflow", t.dims)))?;
        shape.push(d);
    }
    let width = match e {
        elem::BOOL | elem::UINT8 | elem::INT8 => 1,
        elem::FLOAT16 | elem::BFLOAT16 | elem::INT16 | elem::UINT16 => 2,
        elem::FLOAT | elem::INT32 | elem::UINT32 => 4,
        _ => 8,
    };
    let external;
    let raw: Option<&[u8]> = if t.data_location == Some(1) {
        external = read_external(t, dir, name)?;
        Some(&external)
    } else {
        t.raw_data.as_deref()
    };
    if lowbit::handles(e) {
        // one byte per element, or packed sub-byte elements; the int32 field holds the same
        // bytes one per entry
        let bytes: Vec<u8> = match raw {
            Some(r) => r.to_vec(),
            None => t.int32_data.iter().map(|&v| v as u8).collect(),
        };
        let need = lowbit::byte_len(e, numel);
        if bytes.len() != need {
            return Err(bad(format!(
                "tensor '{name}': {} bytes of data for dims {:?} of {} ({need} expected)",
                bytes.len(),
                t.dims,
                elem_name(e)
            )));
        }
        let (v, float) = lowbit::decode(e, &bytes, numel);
        let tensor = if float {
            Tensor::from_vec(v.iter().map(|&x| x as f32).collect::<Vec<_>>(), shape)?
        } else {
            Tensor::from_vec(v.iter().map(|&x| x as i64).collect::<Vec<_>>(), shape)?
        };
        return Ok(Value::typed(tensor, e));
    }
    let tensor = if let Some(raw) = raw {
        if numel.checked_mul(width) != Some(raw.len()) {
            return Err(bad(format!(
                "tensor '{name}': {} bytes of data for dims {:?} of {} ({} expected)",
                raw.len(),
                t.dims,
                elem_name(e),
                numel.saturating_mul(width)
            )));
        }
        from_raw(e, raw, shape)?
    } else {
        let have = match e {
            elem::FLOAT => t.float_data.len(),
            elem::DOUBLE => t.double_data.len(),
            elem::INT64 => t.int64_data.len(),
            elem::UINT32 | elem::UINT64 => t.uint64_data.len(),
            _ => t.int32_data.len(),
        };
        if have != numel {
            return Err(bad(format!(
                "tensor '{name}': {have} values for dims {:?} ({numel} expected)",
                t.dims
            )));
        }
        from_fields(e, t, shape)?
    };
    Ok(Value::typed(tensor, e))
}

fn read_external(t: &TensorProto, dir: &DataDir, name: &str) -> Result<Vec<u8>> {
    let mut location = None;
    let (mut offset, mut length) = (0u64, None);
    for kv in &t.external_data {
        let v = kv.value.as_deref().unwrap_or("");
        match kv.key.as_deref().unwrap_or("") {
            "location" => location = Some(v.to_string()),
            "offset" => {
                offset = v
                    .parse()
                    .map_err(|_| bad(format!("tensor '{name}': bad offset '{v}'")))?
            }
            "length" => {
                length = Some(
                    v.parse::<u64>()
                        .map_err(|_| bad(format!("tensor '{name}': bad length '{v}'")))?,
                )
            }
            _ => {}
        }
    }
    let loc = location
        .ok_or_else(|| bad(format!("tensor '{name}': external data without a location")))?;
    let rel = Path::new(&loc);
    // the data must sit beside the model: no absolute paths, no `..`
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return Err(bad(format!(
            "tensor '{name}': external data location '{loc}' leaves the model's folder"
        )));
    }
    let base = dir.0.ok_or_else(|| {
        bad(format!(
            "tensor '{name}': external data '{loc}' but the model was not loaded from a file"
        ))
    })?;
    let path = base.join(rel);
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(&path)
        .map_err(|err| bad(format!("tensor '{name}': {}: {err}", path.display())))?;
    let size = f.metadata()?.len();
    let len = length.unwrap_or(size.saturating_sub(offset));
    if offset.checked_add(len).is_none_or(|end| end > size) {
        return Err(bad(format!(
            "tensor '{name}': external data {}..+{len} beyond the {size} bytes of {}",
            offset,
            path.display()
        )));
    }
    let mut buf = Vec::new();
    buf.try_reserve_exact(len as usize)
        .map_err(|_| bad(format!("tensor '{name}': cannot allocate {len} bytes")))?;
    f.seek(SeekFrom::Start(offset))?;
    f.take(len).read_to_end(&mut buf)?;
    Ok(buf)
}

fn from_raw(e: i32, raw: &[u8], shape: Vec<usize>) -> Result<Tensor> {
    macro_rules! le {
        ($t:ty, $n:expr) => {
            raw.chunks_exact($n)
                .map(|c| <$t>::from_le_bytes(c.try_into().unwrap()))
        };
    }
    match e {
        elem::FLOAT => Tensor::from_vec(le!(f32, 4).collect::<Vec<_>>(), shape),
        elem::DOUBLE => Tensor::from_vec(le!(f64, 8).collect::<Vec<_>>(), shape),
        elem::FLOAT16 => Tensor::from_vec(
            le!(u16, 2).map(half::f16::from_bits).collect::<Vec<_>>(),
            shape,
        ),
        elem::BFLOAT16 => Tensor::from_vec(
            le!(u16, 2).map(half::bf16::from_bits).collect::<Vec<_>>(),
            shape,
        ),
        elem::UINT8 => Tensor::from_vec(raw.to_vec(), shape),
        elem::BOOL => Tensor::from_vec(raw.iter().map(|&b| b != 0).collect::<Vec<_>>(), shape),
        elem::INT8 => Tensor::from_vec(
            raw.iter().map(|&b| b as i8 as i64).collect::<Vec<_>>(),
            shape,
        ),
        elem::INT16 => Tensor::from_vec(le!(i16, 2).map(i64::from).collect::<Vec<_>>(), shape),
        elem::UINT16 => Tensor::from_vec(le!(u16, 2).map(i64::from).collect::<Vec<_>>(), shape),
        elem::INT32 => Tensor::from_vec(le!(i32, 4).map(i64::from).collect::<Vec<_>>(), shape),
        elem::UINT32 => Tensor::from_vec(le!(u32, 4).map(i64::from).collect::<Vec<_>>(), shape),
        elem::INT64 => Tensor::from_vec(le!(i64, 8).collect::<Vec<_>>(), shape),
        // uint64 above i64::MAX wraps: might has no unsigned 64-bit dtype
        _ => Tensor::from_vec(le!(u64, 8).map(|v| v as i64).collect::<Vec<_>>(), shape),
    }
}

fn from_fields(e: i32, t: &TensorProto, shape: Vec<usize>) -> Result<Tensor> {
    let i32s = || t.int32_data.iter();
    match e {
        elem::FLOAT => Tensor::from_vec(t.float_data.clone(), shape),
        elem::DOUBLE => Tensor::from_vec(t.double_data.clone(), shape),
        elem::INT64 => Tensor::from_vec(t.int64_data.clone(), shape),
        elem::UINT32 | elem::UINT64 => Tensor::from_vec(
            t.uint64_data.iter().map(|&v| v as i64).collect::<Vec<_>>(),
            shape,
        ),
        elem::FLOAT16 => Tensor::from_vec(
            i32s()
                .map(|&v| half::f16::from_bits(v as u16))
                .collect::<Vec<_>>(),
            shape,
        ),
        elem::BFLOAT16 => Tensor::from_vec(
            i32s()
                .map(|&v| half::bf16::from_bits(v as u16))
                .collect::<Vec<_>>(),
            shape,
        ),
        elem::UINT8 => Tensor::from_vec(i32s().map(|&v| v as u8).collect::<Vec<_>>(), shape),
        elem::BOOL => Tensor::from_vec(i32s().map(|&v| v != 0).collect::<Vec<_>>(), shape),
        _ => Tensor::from_vec(i32s().map(|&v| v as i64).collect::<Vec<_>>(), shape),
    }
}

/// Values of an integer (or any) tensor as `i64`s: shapes, axes, indices given as tensors.
pub fn ints(v: &Value) -> Result<Vec<i64>> {
    match v.tensor.dtype() {
        DType::I64 => v.tensor.to_vec::<i64>(),
        _ => Ok(v
            .tensor
            .to_f64_vec()
            .into_iter()
            .map(|x| x as i64)
            .collect()),
    }
}
