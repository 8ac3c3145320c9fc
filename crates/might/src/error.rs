//! Errors as data: every fallible operation says which op failed, why, with which shapes,
//! and where the caller stood (`#[track_caller]`), so a user never has to guess.

use std::fmt;
use std::panic::Location;

/// What kind of mistake happened; lets callers and tests match without parsing text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Shapes do not fit together (broadcast, matmul, reshape, cat, conv...).
    Shape,
    /// Wrong or mismatched element type.
    DType,
    /// Tensors live on different devices, or the device cannot do this.
    Device,
    /// A dimension or index is out of range.
    Index,
    /// A layout cannot be viewed as requested (call `contiguous()`).
    Layout,
    /// Autograd misuse (backward of a non-scalar without a gradient, ...).
    Autograd,
    /// Reading or writing a file failed.
    Io,
    /// A file or byte stream is malformed.
    Format,
    /// Anything else (bad argument values...).
    Invalid,
    /// A buffer would not fit the memory budget, or the allocator refused it.
    Memory,
    /// Valid input that might does not implement (an ONNX operator, an element type).
    Unsupported,
}

/// The error type of every fallible might operation.
#[derive(Clone, Debug)]
pub struct Error {
    pub kind: ErrorKind,
    /// Name of the operation that failed, e.g. `"matmul"`.
    pub op: String,
    /// Human explanation, including the shapes involved.
    pub msg: String,
    /// Where the user called the op, when known.
    pub location: Option<&'static Location<'static>>,
}

impl Error {
    #[track_caller]
    pub fn new(kind: ErrorKind, op: impl Into<String>, msg: impl Into<String>) -> Self {
        Error {
            kind,
            op: op.into(),
            msg: msg.into(),
            location: Some(Location::caller()),
        }
    }

    /// Replace the recorded location (used by ops that capture the caller's location first).
    pub fn at(mut self, loc: &'static Location<'static>) -> Self {
        self.location = Some(loc);
        self
    }

    #[track_caller]
    pub fn shape(op: &str, msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::Shape, op, msg)
    }
    #[track_caller]
    pub fn dtype(op: &str, msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::DType, op, msg)
    }
    #[track_caller]
    pub fn index(op: &str, msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::Index, op, msg)
    }
    #[track_caller]
    pub fn invalid(op: &str, msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, op, msg)
    }
    #[track_caller]
    pub fn format(op: &str, msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::Format, op, msg)
    }
    #[track_caller]
    pub fn io(op: &str, err: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Io, op, err.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.msg)?;
        if let Some(loc) = self.location {
            write!(f, " (at {}:{}:{})", loc.file(), loc.line(), loc.column())?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    #[track_caller]
    fn from(e: std::io::Error) -> Self {
        Error::io("io", e)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// `bail!(kind, op, fmt...)`: return an error early.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $op:expr, $($arg:tt)*) => {
        return Err($crate::Error::new($crate::ErrorKind::$kind, $op, format!($($arg)*)))
    };
}
