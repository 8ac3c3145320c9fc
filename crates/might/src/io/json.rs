//! JSON through `serde_json` (safetensors headers, Hugging Face configs): parse errors become
//! might errors naming the line and column, and objects keep their keys in file order with
//! duplicates reported rather than silently merged (a safetensors header listing one tensor
//! twice is malformed). `serde_json` caps nesting at 128 levels, so hostile input cannot
//! exhaust the stack.

use crate::{Error, Result};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// A JSON value whose objects are lists of `(key, value)` in file order, duplicates kept.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    Str(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self {
            Json::Number(n) => n.as_u64(),
            _ => None,
        }
    }
    pub(crate) fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Number(n) => n.as_f64(),
            _ => None,
        }
    }
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }
    /// The first value of `key` in an object.
    pub(crate) fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(kv) => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Json, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> std::result::Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E>(self, v: bool) -> std::result::Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_u64<E>(self, v: u64) -> std::result::Result<Json, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_i64<E>(self, v: i64) -> std::result::Result<Json, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<Json, E> {
        serde_json::Number::from_f64(v)
            .map(Json::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<Json, E> {
        Ok(Json::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> std::result::Result<Json, E> {
        Ok(Json::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> std::result::Result<Json, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = a.next_element()? {
            v.push(x);
        }
        Ok(Json::Array(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> std::result::Result<Json, A::Error> {
        let mut kv = Vec::new();
        while let Some(entry) = a.next_entry::<String, Json>()? {
            kv.push(entry);
        }
        Ok(Json::Object(kv))
    }
}

/// Parse `text` (one JSON value, nothing after it but whitespace).
#[track_caller]
pub(crate) fn parse(op: &str, text: &[u8]) -> Result<Json> {
    serde_json::from_slice(text).map_err(|e| Error::format(op, format!("malformed JSON: {e}")))
}

/// `s` as a JSON string literal.
pub(crate) fn quote(s: &str) -> String {
    // (serializing a string cannot fail)
    serde_json::to_string(s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_and_escapes() {
        let j = parse(
            "t",
            br#"{"a": {"dtype": "F32", "shape": [2, 3]}, "s": "x\"\u00e9\ud83d\ude00"}"#,
        )
        .unwrap();
        assert_eq!(
            j.get("a").unwrap().get("dtype").unwrap().as_str(),
            Some("F32")
        );
        assert_eq!(j.get("s").unwrap().as_str(), Some("x\"é😀"));
        let q = quote("a\"b\\\n\u{1}");
        assert_eq!(
            parse("t", q.as_bytes()).unwrap().as_str(),
            Some("a\"b\\\n\u{1}")
        );
        // integers above 2^53 stay exact; keys keep file order, duplicates are seen
        let j = parse("t", br#"{"b": 18446744073709551615, "a": 1, "b": 2}"#).unwrap();
        assert_eq!(j.get("b").unwrap().as_u64(), Some(u64::MAX));
        let Json::Object(kv) = &j else { panic!() };
        let keys: Vec<&str> = kv.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "b"]);
    }

    #[test]
    fn rejects_hostile() {
        let deep = "[".repeat(100_000);
        assert!(parse("t", deep.as_bytes()).is_err());
        for bad in [
            "{",
            "{\"a\":}",
            "[1,]",
            "\"\\ud800\"",
            "nul",
            "1 2",
            "{\"a\" 1}",
            "\"\u{1}\"",
        ] {
            let e = parse("t", bad.as_bytes()).unwrap_err();
            assert!(e.msg.contains("line 1 column"), "{bad}: {e}");
        }
    }
}
