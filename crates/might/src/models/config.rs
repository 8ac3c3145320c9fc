//! Reading a Hugging Face `config.json`: typed getters with defaults, and errors that name
//! the file and the field.

use crate::io::json::{self, Json};
use crate::{Error, Result};
use std::path::Path;

/// A parsed `config.json` (or any JSON object of settings).
#[derive(Clone, Debug)]
pub struct HfConfig {
    json: Json,
    /// Where it came from, for messages.
    origin: String,
}

impl HfConfig {
    /// Read and parse `path`.
    #[track_caller]
    pub fn load(path: impl AsRef<Path>) -> Result<HfConfig> {
        let path = path.as_ref();
        let text = std::fs::read(path)
            .map_err(|e| Error::io("config", format!("cannot read {}: {e}", path.display())))?;
        HfConfig::parse(&text, &path.display().to_string())
    }

    /// Parse JSON text; `origin` names it in errors.
    #[track_caller]
    pub fn parse(text: &[u8], origin: &str) -> Result<HfConfig> {
        let json = json::parse("config", text)
            .map_err(|e| Error::new(e.kind, "config", format!("{origin}: {}", e.msg)))?;
        if !matches!(json, Json::Object(_)) {
            return Err(Error::format(
                "config",
                format!("{origin}: expected a JSON object"),
            ));
        }
        Ok(HfConfig {
            json,
            origin: origin.to_string(),
        })
    }

    fn bad(&self, key: &str, want: &str) -> Error {
        Error::format(
            "config",
            format!("{}: field `{key}` must be {want}", self.origin),
        )
    }

    /// The raw value of `key`, if present and not `null`.
    fn value(&self, key: &str) -> Option<&Json> {
        self.json.get(key).filter(|v| !matches!(v, Json::Null))
    }

    /// Is `key` present (and not `null`)?
    pub fn has(&self, key: &str) -> bool {
        self.value(key).is_some()
    }

    /// A non-negative integer; `default` when absent (`None`: required).
    #[track_caller]
    pub fn usize(&self, key: &str, default: Option<usize>) -> Result<usize> {
        match self.value(key) {
            None => default.ok_or_else(|| {
                Error::format("config", format!("{}: missing field `{key}`", self.origin))
            }),
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| self.bad(key, "a non-negative integer")),
        }
    }

    /// An optional non-negative integer (absent or `null`: `None`).
    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        self.value(key).map(|_| self.usize(key, None)).transpose()
    }

    /// A finite number.
    pub fn f64(&self, key: &str, default: f64) -> Result<f64> {
        match self.value(key) {
            None => Ok(default),
            Some(v @ Json::Number(_)) => v
                .as_f64()
                .filter(|v| v.is_finite())
                .ok_or_else(|| self.bad(key, "a finite number")),
            Some(_) => Err(self.bad(key, "a number")),
        }
    }

    /// A boolean.
    pub fn bool(&self, key: &str, default: bool) -> Result<bool> {
        match self.value(key) {
            None => Ok(default),
            Some(Json::Bool(b)) => Ok(*b),
            Some(_) => Err(self.bad(key, "true or false")),
        }
    }

    /// A string.
    pub fn str(&self, key: &str, default: &str) -> Result<String> {
        match self.value(key) {
            None => Ok(default.to_string()),
            Some(v) => v
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| self.bad(key, "a string")),
        }
    }

    /// The first string of an array field (`architectures`), if any.
    pub fn first_str(&self, key: &str) -> Option<String> {
        match self.value(key) {
            Some(Json::Array(a)) => a.first().and_then(|v| v.as_str()).map(str::to_string),
            _ => None,
        }
    }

    /// An object field as a config of its own.
    pub fn object(&self, key: &str) -> Option<HfConfig> {
        self.value(key)
            .filter(|v| matches!(v, Json::Object(_)))
            .map(|v| HfConfig {
                json: v.clone(),
                origin: format!("{}:{key}", self.origin),
            })
    }

    /// Keys and string values of an object field (a sharded checkpoint's `weight_map`).
    pub fn string_map(&self, key: &str) -> Result<Vec<(String, String)>> {
        match self.value(key) {
            Some(Json::Object(kv)) => kv
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|s| (k.clone(), s.to_string()))
                        .ok_or_else(|| self.bad(key, "an object of strings"))
                })
                .collect(),
            _ => Err(self.bad(key, "an object of strings")),
        }
    }

    /// An array of objects (`modules.json`'s top level is an array: use [`HfConfig::items`]).
    pub fn items(text: &[u8], origin: &str) -> Result<Vec<HfConfig>> {
        let json = json::parse("config", text)
            .map_err(|e| Error::new(e.kind, "config", format!("{origin}: {}", e.msg)))?;
        match json {
            Json::Array(a) => Ok(a
                .into_iter()
                .map(|json| HfConfig {
                    json,
                    origin: origin.to_string(),
                })
                .collect()),
            _ => Err(Error::format(
                "config",
                format!("{origin}: expected a JSON array"),
            )),
        }
    }
}

/// A Hugging Face activation name (`hidden_act`, `activation_function`), as transformers'
/// `ACT2FN` maps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `gelu`: the exact (erf) GELU.
    Gelu,
    /// `gelu_new`, `gelu_pytorch_tanh`: the tanh approximation GPT-2 was trained with.
    GeluTanh,
    Relu,
    /// `silu`, `swish`.
    Silu,
    Tanh,
    /// `quick_gelu`: `x * sigmoid(1.702 x)`.
    QuickGelu,
}

impl Activation {
    /// Parse a transformers activation name.
    #[track_caller]
    pub fn from_name(name: &str) -> Result<Activation> {
        Ok(match name {
            "gelu" => Activation::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" => Activation::GeluTanh,
            "relu" => Activation::Relu,
            "silu" | "swish" => Activation::Silu,
            "tanh" => Activation::Tanh,
            "quick_gelu" => Activation::QuickGelu,
            other => {
                return Err(Error::invalid(
                    "config",
                    format!(
                        "activation `{other}` is not supported (gelu, gelu_new, \
                         gelu_pytorch_tanh, relu, silu, swish, tanh, quick_gelu)"
                    ),
                ))
            }
        })
    }

    /// Apply to `x`.
    pub fn forward(self, x: &crate::Tensor) -> Result<crate::Tensor> {
        match self {
            Activation::Gelu => x.gelu(),
            Activation::GeluTanh => x.gelu_tanh(),
            Activation::Relu => x.relu(),
            Activation::Silu => x.silu(),
            Activation::Tanh => x.tanh(),
            Activation::QuickGelu => x.mul(&x.mul_scalar(1.702)?.sigmoid()?),
        }
    }
}
