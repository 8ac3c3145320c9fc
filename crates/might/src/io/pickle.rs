//! A small, restricted pickle VM for PyTorch checkpoints (`torch.save`, protocols 2-5).
//!
//! Python's pickle can call any importable function, so unpickling an untrusted file can run
//! arbitrary code. This VM follows the `torch.load(weights_only=True)` stance: it only knows
//! the handful of globals a `state_dict` needs (an allow-list) and refuses every other global,
//! naming it. It never recurses over the data (deeply nested input cannot overflow the native
//! stack, even when dropped), caps its stack and memo, and checks every length against the
//! bytes present before allocating.

use crate::{DType, Error, Result};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

const FMT: &str = "pt";
const MAX_STACK: usize = 1 << 20;
const MAX_MEMO: usize = 1 << 20;
const MAX_MARKS: usize = 1 << 12;
/// Deepest container nesting accepted when walking the result (a state_dict needs ~3).
pub(crate) const MAX_DEPTH: usize = 64;
const MAX_VISITS: usize = 1 << 22;

/// A shared, mutable container (list, tuple or dict; a dict stores keys and values
/// alternately). Dropped iteratively so a million-deep nesting cannot overflow the stack.
#[derive(Clone)]
pub(crate) struct Obj(Rc<RefCell<Vec<Value>>>);

impl Obj {
    fn new(v: Vec<Value>) -> Obj {
        Obj(Rc::new(RefCell::new(v)))
    }
    pub(crate) fn items(&self) -> std::cell::Ref<'_, Vec<Value>> {
        self.0.borrow()
    }
}

impl Drop for Obj {
    fn drop(&mut self) {
        fn drain(o: &Obj, out: &mut Vec<Value>) {
            if Rc::strong_count(&o.0) == 1 {
                if let Ok(mut v) = o.0.try_borrow_mut() {
                    out.append(&mut v);
                }
            }
        }
        let mut pending = Vec::new();
        drain(self, &mut pending);
        while let Some(v) = pending.pop() {
            if let Value::List(o) | Value::Tuple(o) | Value::Dict(o) = &v {
                drain(o, &mut pending);
            }
            // `v` now owns no children (or shares them), so dropping it is shallow.
        }
    }
}

/// The allow-listed globals.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Global {
    OrderedDict,
    RebuildTensorV2,
    RebuildParameter,
    /// `torch.FloatStorage` & co.
    StorageType(DType),
}

#[derive(Debug)]
pub(crate) struct StorageRef {
    pub(crate) key: String,
    pub(crate) dtype: DType,
    pub(crate) numel: usize,
}

#[derive(Debug)]
pub(crate) struct TensorSpec {
    pub(crate) storage: Rc<StorageRef>,
    pub(crate) offset: usize,
    pub(crate) shape: Vec<usize>,
    pub(crate) stride: Vec<usize>,
    pub(crate) requires_grad: bool,
}

#[derive(Clone)]
pub(crate) enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// Floats and byte strings carry nothing a tensor needs: only their kind is kept.
    Float,
    Str(String),
    Bytes,
    List(Obj),
    Tuple(Obj),
    Dict(Obj),
    Global(Global),
    Storage(Rc<StorageRef>),
    Tensor(Rc<TensorSpec>),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float => "float",
            Value::Str(_) => "str",
            Value::Bytes => "bytes",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
            Value::Global(_) => "global",
            Value::Storage(_) => "storage",
            Value::Tensor(_) => "tensor",
        }
    }
}

fn err(msg: impl Into<String>) -> Error {
    Error::format(FMT, format!("pickle: {}", msg.into()))
}

/// Map a `module.name` global to an allowed one, or refuse it by name.
fn resolve_global(module: &str, name: &str) -> Result<Global> {
    let storage = |d| Ok(Global::StorageType(d));
    match (module, name) {
        ("collections", "OrderedDict") => Ok(Global::OrderedDict),
        ("torch._utils", "_rebuild_tensor_v2") => Ok(Global::RebuildTensorV2),
        ("torch._utils", "_rebuild_parameter") => Ok(Global::RebuildParameter),
        ("torch", "FloatStorage") => storage(DType::F32),
        ("torch", "DoubleStorage") => storage(DType::F64),
        ("torch", "HalfStorage") => storage(DType::F16),
        ("torch", "BFloat16Storage") => storage(DType::BF16),
        ("torch", "LongStorage") => storage(DType::I64),
        ("torch", "ByteStorage") => storage(DType::U8),
        ("torch", "BoolStorage") => storage(DType::Bool),
        ("torch", s) if s.ends_with("Storage") => Err(err(format!(
            "storage type torch.{s} holds a dtype might does not support \
             (supported: Float Double Half BFloat16 Long Byte Bool)"
        ))),
        _ => Err(err(format!(
            "global '{module}.{name}' is not allowed: only tensors, storages and \
             OrderedDict can be loaded (the torch.load(weights_only=True) rules)"
        ))),
    }
}

/// Run a pickle program and return the value it stops with.
pub(crate) fn unpickle(data: &[u8]) -> Result<Value> {
    let mut vm = Vm {
        data,
        pos: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
    };
    vm.run()
}

struct Vm<'a> {
    data: &'a [u8],
    pos: usize,
    stack: Vec<Value>,
    marks: Vec<Vec<Value>>,
    memo: HashMap<u32, Value>,
}

impl Vm<'_> {
    fn bytes(&mut self, n: usize) -> Result<&[u8]> {
        let start = self.pos;
        let end = start
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| {
                err(format!(
                    "truncated: needs {n} bytes at offset {start}, data.pkl is {} bytes",
                    self.data.len()
                ))
            })?;
        self.pos = end;
        Ok(&self.data[start..end])
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.bytes(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        let b = self.bytes(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn to_len(n: u64) -> Result<usize> {
        usize::try_from(n).map_err(|_| err("length does not fit in memory"))
    }
    fn utf8(&mut self, n: usize) -> Result<String> {
        let b = self.bytes(n)?;
        std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|_| err("string is not valid UTF-8"))
    }
    fn line(&mut self) -> Result<String> {
        let rest = &self.data[self.pos..];
        let n = rest
            .iter()
            .take(512)
            .position(|&c| c == b'\n')
            .ok_or_else(|| err("unterminated or overlong GLOBAL name"))?;
        let s = self.utf8(n)?;
        self.pos += 1;
        Ok(s)
    }
    fn push(&mut self, v: Value) -> Result<()> {
        if self.stack.len() >= MAX_STACK {
            return Err(err(format!("stack deeper than {MAX_STACK} items")));
        }
        self.stack.push(v);
        Ok(())
    }
    fn pop(&mut self) -> Result<Value> {
        self.stack.pop().ok_or_else(|| err("stack underflow"))
    }
    fn top(&mut self) -> Result<&mut Value> {
        self.stack.last_mut().ok_or_else(|| err("stack underflow"))
    }
    fn pop_mark(&mut self) -> Result<Vec<Value>> {
        let prev = self.marks.pop().ok_or_else(|| err("no MARK to pop to"))?;
        Ok(std::mem::replace(&mut self.stack, prev))
    }
    fn memo_put(&mut self, idx: u32) -> Result<()> {
        if self.memo.len() >= MAX_MEMO && !self.memo.contains_key(&idx) {
            return Err(err(format!("memo larger than {MAX_MEMO} entries")));
        }
        let v = self.top()?.clone();
        self.memo.insert(idx, v);
        Ok(())
    }
    fn memo_get(&mut self, idx: u32) -> Result<()> {
        let v = self
            .memo
            .get(&idx)
            .cloned()
            .ok_or_else(|| err(format!("memo key {idx} is not defined")))?;
        self.push(v)
    }
    fn int_bytes(b: &[u8]) -> Result<i64> {
        if b.len() > 8 {
            // Allow sign-extension bytes only.
            let (lo, hi) = b.split_at(8);
            let sign = if lo[7] & 0x80 != 0 { 0xFF } else { 0 };
            if hi.iter().any(|&x| x != sign) {
                return Err(err("integer larger than 64 bits"));
            }
            return Self::int_bytes(lo);
        }
        if b.is_empty() {
            return Ok(0);
        }
        let fill = if b[b.len() - 1] & 0x80 != 0 { 0xFF } else { 0 };
        let mut a = [fill; 8];
        a[..b.len()].copy_from_slice(b);
        Ok(i64::from_le_bytes(a))
    }

    fn run(&mut self) -> Result<Value> {
        loop {
            let at = self.pos;
            let op = self.u8().map_err(|_| err("truncated: no STOP opcode"))?;
            match op {
                0x80 => {
                    let p = self.u8()?;
                    if p > 5 {
                        return Err(err(format!("unsupported pickle protocol {p}")));
                    }
                }
                0x95 => {
                    self.u64()?; // FRAME: a hint for buffered readers
                }
                b'.' => {
                    let v = self.pop()?;
                    return Ok(v);
                }
                b'(' => {
                    if self.marks.len() >= MAX_MARKS {
                        return Err(err(format!("more than {MAX_MARKS} nested MARKs")));
                    }
                    let s = std::mem::take(&mut self.stack);
                    self.marks.push(s);
                }
                b'}' => self.push(Value::Dict(Obj::new(vec![])))?,
                b']' => self.push(Value::List(Obj::new(vec![])))?,
                b')' => self.push(Value::Tuple(Obj::new(vec![])))?,
                b't' => {
                    let items = self.pop_mark()?;
                    self.push(Value::Tuple(Obj::new(items)))?;
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    self.push(Value::List(Obj::new(items)))?;
                }
                b'd' => {
                    let items = self.pop_mark()?;
                    if items.len() % 2 != 0 {
                        return Err(err("DICT with an odd number of items"));
                    }
                    self.push(Value::Dict(Obj::new(items)))?;
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    if self.stack.len() < n {
                        return Err(err("stack underflow"));
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    self.push(Value::Tuple(Obj::new(items)))?;
                }
                b'N' => self.push(Value::None)?,
                0x88 => self.push(Value::Bool(true))?,
                0x89 => self.push(Value::Bool(false))?,
                b'J' => {
                    let v = self.u32()? as i32 as i64;
                    self.push(Value::Int(v))?;
                }
                b'K' => {
                    let v = self.u8()? as i64;
                    self.push(Value::Int(v))?;
                }
                b'M' => {
                    let v = self.u16()? as i64;
                    self.push(Value::Int(v))?;
                }
                0x8a => {
                    let n = self.u8()? as usize;
                    let v = Self::int_bytes(self.bytes(n)?)?;
                    self.push(Value::Int(v))?;
                }
                0x8b => {
                    let n = self.u32()? as u64;
                    let n = Self::to_len(n)?;
                    let v = Self::int_bytes(self.bytes(n)?)?;
                    self.push(Value::Int(v))?;
                }
                b'G' => {
                    self.bytes(8)?;
                    self.push(Value::Float)?;
                }
                b'X' => {
                    let n = self.u32()? as usize;
                    let s = self.utf8(n)?;
                    self.push(Value::Str(s))?;
                }
                0x8c => {
                    let n = self.u8()? as usize;
                    let s = self.utf8(n)?;
                    self.push(Value::Str(s))?;
                }
                0x8d => {
                    let n = self.u64()?;
                    let n = Self::to_len(n)?;
                    let s = self.utf8(n)?;
                    self.push(Value::Str(s))?;
                }
                b'U' | b'C' => {
                    let n = self.u8()? as usize;
                    self.bytes(n)?;
                    self.push(Value::Bytes)?;
                }
                b'T' | b'B' => {
                    let n = self.u32()? as usize;
                    self.bytes(n)?;
                    self.push(Value::Bytes)?;
                }
                0x8e => {
                    let n = self.u64()?;
                    let n = Self::to_len(n)?;
                    self.bytes(n)?;
                    self.push(Value::Bytes)?;
                }
                b'q' => {
                    let i = self.u8()? as u32;
                    self.memo_put(i)?;
                }
                b'r' => {
                    let i = self.u32()?;
                    self.memo_put(i)?;
                }
                0x94 => {
                    let i = u32::try_from(self.memo.len()).map_err(|_| err("memo overflow"))?;
                    self.memo_put(i)?;
                }
                b'h' => {
                    let i = self.u8()? as u32;
                    self.memo_get(i)?;
                }
                b'j' => {
                    let i = self.u32()?;
                    self.memo_get(i)?;
                }
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let v = self.top()?.clone();
                    self.push(v)?;
                }
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    let g = resolve_global(&module, &name)?;
                    self.push(Value::Global(g))?;
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (Value::Str(module), Value::Str(name)) = (module, name) else {
                        return Err(err("STACK_GLOBAL needs two strings"));
                    };
                    let g = resolve_global(&module, &name)?;
                    self.push(Value::Global(g))?;
                }
                b'a' => {
                    let v = self.pop()?;
                    self.append_to_top(vec![v])?;
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    self.append_to_top(items)?;
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    self.set_items(vec![k, v])?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    if items.len() % 2 != 0 {
                        return Err(err("SETITEMS with an odd number of items"));
                    }
                    self.set_items(items)?;
                }
                b'Q' => {
                    let pid = self.pop()?;
                    let v = persistent_load(pid)?;
                    self.push(v)?;
                }
                b'R' => {
                    let args = self.pop()?;
                    let func = self.pop()?;
                    let v = reduce(func, args)?;
                    self.push(v)?;
                }
                0x81 => {
                    let args = self.pop()?;
                    let cls = self.pop()?;
                    match cls {
                        Value::Global(Global::OrderedDict) => {
                            self.push(Value::Dict(Obj::new(vec![])))?
                        }
                        _ => return Err(err(format!("NEWOBJ of a {} is not allowed", cls.kind()))),
                    }
                    drop(args);
                }
                b'b' => {
                    // BUILD sets attributes (a state_dict's `_metadata`, a tensor's python
                    // attributes); none of them matter for the tensors, so they are dropped.
                    let _state = self.pop()?;
                    match self.top()? {
                        Value::Dict(_) | Value::Tensor(_) => {}
                        other => {
                            return Err(err(format!("BUILD on a {} is not allowed", other.kind())))
                        }
                    }
                }
                _ => {
                    return Err(err(format!(
                        "unknown or unsupported opcode 0x{op:02x} at offset {at}"
                    )))
                }
            }
        }
    }

    fn append_to_top(&mut self, items: Vec<Value>) -> Result<()> {
        match self.top()? {
            Value::List(o) => {
                o.0.try_borrow_mut()
                    .map_err(|_| err("list is being modified twice"))?
                    .extend(items);
                Ok(())
            }
            other => Err(err(format!("APPEND to a {}", other.kind()))),
        }
    }

    fn set_items(&mut self, items: Vec<Value>) -> Result<()> {
        match self.top()? {
            Value::Dict(o) => {
                o.0.try_borrow_mut()
                    .map_err(|_| err("dict is being modified twice"))?
                    .extend(items);
                Ok(())
            }
            other => Err(err(format!("SETITEM on a {}", other.kind()))),
        }
    }
}

impl Drop for Vm<'_> {
    fn drop(&mut self) {
        // Hand everything to one container so its iterative Drop takes it apart.
        let mut all = std::mem::take(&mut self.stack);
        for m in self.marks.drain(..) {
            all.extend(m);
        }
        all.extend(self.memo.drain().map(|(_, v)| v));
        drop(Obj::new(all));
    }
}

fn tuple_items(v: &Value, what: &str) -> Result<Vec<Value>> {
    match v {
        Value::Tuple(o) | Value::List(o) => Ok(o.items().clone()),
        _ => Err(err(format!("{what} must be a tuple, got a {}", v.kind()))),
    }
}

fn as_usize(v: &Value, what: &str) -> Result<usize> {
    match v {
        Value::Int(i) => usize::try_from(*i).map_err(|_| err(format!("{what} is negative ({i})"))),
        _ => Err(err(format!("{what} must be an int, got a {}", v.kind()))),
    }
}

/// `('storage', storage_type, key, location, numel)` → a storage reference.
fn persistent_load(pid: Value) -> Result<Value> {
    let items = tuple_items(&pid, "persistent id")?;
    match items.as_slice() {
        [Value::Str(tag), Value::Global(Global::StorageType(dtype)), Value::Str(key), _loc, numel]
            if tag == "storage" =>
        {
            if key.is_empty() || key.len() > 64 || key.contains(['/', '\\']) || key.contains("..") {
                return Err(err(format!("storage key {key:?} is not a plain name")));
            }
            let numel = as_usize(numel, "storage numel")?;
            Ok(Value::Storage(Rc::new(StorageRef {
                key: key.clone(),
                dtype: *dtype,
                numel,
            })))
        }
        _ => Err(err(
            "persistent id is not ('storage', torch.<Type>Storage, key, location, numel)",
        )),
    }
}

fn reduce(func: Value, args: Value) -> Result<Value> {
    let Value::Global(g) = &func else {
        return Err(err(format!(
            "REDUCE on a {}, not an allowed global",
            func.kind()
        )));
    };
    let args = tuple_items(&args, "REDUCE arguments")?;
    match *g {
        Global::OrderedDict => {
            if !args.is_empty() {
                return Err(err("OrderedDict(...) with arguments is not supported"));
            }
            Ok(Value::Dict(Obj::new(vec![])))
        }
        Global::RebuildTensorV2 => {
            if !(6..=7).contains(&args.len()) {
                return Err(err(format!(
                    "_rebuild_tensor_v2 takes 6 or 7 arguments, got {}",
                    args.len()
                )));
            }
            let Value::Storage(storage) = &args[0] else {
                return Err(err("_rebuild_tensor_v2: first argument is not a storage"));
            };
            let offset = as_usize(&args[1], "storage offset")?;
            let shape = tuple_items(&args[2], "size")?
                .iter()
                .map(|v| as_usize(v, "size entry"))
                .collect::<Result<Vec<_>>>()?;
            let stride = tuple_items(&args[3], "stride")?
                .iter()
                .map(|v| as_usize(v, "stride entry"))
                .collect::<Result<Vec<_>>>()?;
            if shape.len() != stride.len() {
                return Err(err(format!(
                    "size {shape:?} and stride {stride:?} have different lengths"
                )));
            }
            let requires_grad = matches!(args[4], Value::Bool(true));
            Ok(Value::Tensor(Rc::new(TensorSpec {
                storage: storage.clone(),
                offset,
                shape,
                stride,
                requires_grad,
            })))
        }
        Global::RebuildParameter => match args.first() {
            Some(Value::Tensor(t)) => {
                let requires_grad = matches!(args.get(1), Some(Value::Bool(true)));
                Ok(Value::Tensor(Rc::new(TensorSpec {
                    storage: t.storage.clone(),
                    offset: t.offset,
                    shape: t.shape.clone(),
                    stride: t.stride.clone(),
                    requires_grad,
                })))
            }
            _ => Err(err("_rebuild_parameter: first argument is not a tensor")),
        },
        Global::StorageType(d) => Err(err(format!(
            "calling a storage type ({d}) directly is not allowed"
        ))),
    }
}

/// Collect the tensors of a (possibly nested) result: dict keys and list indices join with
/// '.', as `state_dict` names do. Non-tensor leaves (ints, strings...) are skipped.
pub(crate) fn flatten(v: &Value) -> Result<Vec<(String, Rc<TensorSpec>)>> {
    let mut out = Vec::new();
    // Explicit stack, depth-tracked: no native recursion over untrusted data.
    let mut todo: Vec<(String, Value, usize)> = vec![(String::new(), v.clone(), 0)];
    let mut visits = 0usize;
    while let Some((prefix, v, depth)) = todo.pop() {
        // Shared sub-containers are walked once per reference; cap the total so a
        // "billion laughs" structure (each level referencing the previous twice) stops early.
        visits += 1;
        if visits > MAX_VISITS {
            return Err(err(format!(
                "more than {MAX_VISITS} values reachable (shared-reference bomb?)"
            )));
        }
        if depth > MAX_DEPTH {
            return Err(err(format!("containers nested deeper than {MAX_DEPTH}")));
        }
        let join = |k: &str| {
            if prefix.is_empty() {
                k.to_string()
            } else {
                format!("{prefix}.{k}")
            }
        };
        match &v {
            Value::Tensor(t) => out.push((
                if prefix.is_empty() {
                    "tensor".to_string()
                } else {
                    prefix.clone()
                },
                t.clone(),
            )),
            Value::Dict(o) => {
                let items = o.items();
                let mut children = Vec::new();
                for kv in items.chunks(2) {
                    let key = match &kv[0] {
                        Value::Str(s) => s.clone(),
                        Value::Int(i) => i.to_string(),
                        other => {
                            return Err(err(format!(
                                "dict key of type {} is not supported",
                                other.kind()
                            )))
                        }
                    };
                    if let Some(val) = kv.get(1) {
                        children.push((join(&key), val.clone(), depth + 1));
                    }
                }
                // Reversed so the stack pops them in file order.
                todo.extend(children.into_iter().rev());
            }
            Value::List(o) | Value::Tuple(o) => {
                let items = o.items();
                let children: Vec<_> = items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| (join(&i.to_string()), x.clone(), depth + 1))
                    .collect();
                todo.extend(children.into_iter().rev());
            }
            _ => {}
        }
    }
    Ok(out)
}
