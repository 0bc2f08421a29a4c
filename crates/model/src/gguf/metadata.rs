//! GGUF metadata values and typed look-ups on them.

use std::collections::HashMap;

use super::GgufError;

/// One metadata value as stored in the file.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<MetaValue>),
}

impl MetaValue {
    /// The value as an unsigned integer, whichever integer width the writer chose.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v as u64),
            MetaValue::U16(v) => Some(v as u64),
            MetaValue::U32(v) => Some(v as u64),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            MetaValue::I8(v) => Some(v as i64),
            MetaValue::I16(v) => Some(v as i64),
            MetaValue::I32(v) => Some(v as i64),
            MetaValue::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v as f64),
            MetaValue::F64(v) => Some(v),
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetaValue::Bool(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            MetaValue::Array(v) => Some(v),
            _ => None,
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            MetaValue::U8(_) => "u8",
            MetaValue::I8(_) => "i8",
            MetaValue::U16(_) => "u16",
            MetaValue::I16(_) => "i16",
            MetaValue::U32(_) => "u32",
            MetaValue::I32(_) => "i32",
            MetaValue::U64(_) => "u64",
            MetaValue::I64(_) => "i64",
            MetaValue::F32(_) => "f32",
            MetaValue::F64(_) => "f64",
            MetaValue::Bool(_) => "bool",
            MetaValue::String(_) => "string",
            MetaValue::Array(_) => "array",
        }
    }
}

/// The key/value section of a GGUF file.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    pub values: HashMap<String, MetaValue>,
}

impl Metadata {
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.values.get(key)
    }

    fn require(&self, key: &str) -> Result<&MetaValue, GgufError> {
        self.values
            .get(key)
            .ok_or_else(|| GgufError::MissingKey(key.to_string()))
    }

    fn wrong_type(key: &str, want: &'static str, got: &MetaValue) -> GgufError {
        GgufError::WrongType {
            key: key.to_string(),
            expected: want,
            found: got.type_name(),
        }
    }

    pub fn usize(&self, key: &str) -> Result<usize, GgufError> {
        let v = self.require(key)?;
        v.as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| Self::wrong_type(key, "unsigned integer", v))
    }

    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>, GgufError> {
        if self.values.contains_key(key) {
            self.usize(key).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn f32(&self, key: &str) -> Result<f32, GgufError> {
        let v = self.require(key)?;
        v.as_f64()
            .map(|x| x as f32)
            .ok_or_else(|| Self::wrong_type(key, "number", v))
    }

    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>, GgufError> {
        if self.values.contains_key(key) {
            self.f32(key).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, GgufError> {
        match self.values.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| Self::wrong_type(key, "bool", v)),
        }
    }

    pub fn str(&self, key: &str) -> Result<&str, GgufError> {
        let v = self.require(key)?;
        v.as_str().ok_or_else(|| Self::wrong_type(key, "string", v))
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, GgufError> {
        if self.values.contains_key(key) {
            self.str(key).map(Some)
        } else {
            Ok(None)
        }
    }

    /// An array of strings (token lists, merges).
    pub fn str_array(&self, key: &str) -> Result<Vec<&str>, GgufError> {
        let v = self.require(key)?;
        let items = v
            .as_array()
            .ok_or_else(|| Self::wrong_type(key, "array of strings", v))?;
        items
            .iter()
            .map(|item| {
                item.as_str()
                    .ok_or_else(|| Self::wrong_type(key, "array of strings", item))
            })
            .collect()
    }

    /// An array of integers (token types).
    pub fn i64_array(&self, key: &str) -> Result<Vec<i64>, GgufError> {
        let v = self.require(key)?;
        let items = v
            .as_array()
            .ok_or_else(|| Self::wrong_type(key, "array of integers", v))?;
        items
            .iter()
            .map(|item| {
                item.as_i64()
                    .ok_or_else(|| Self::wrong_type(key, "array of integers", item))
            })
            .collect()
    }

    /// An array of numbers (sentencepiece scores).
    pub fn f32_array(&self, key: &str) -> Result<Vec<f32>, GgufError> {
        let v = self.require(key)?;
        let items = v
            .as_array()
            .ok_or_else(|| Self::wrong_type(key, "array of numbers", v))?;
        items
            .iter()
            .map(|item| {
                item.as_f64()
                    .map(|x| x as f32)
                    .ok_or_else(|| Self::wrong_type(key, "array of numbers", item))
            })
            .collect()
    }
}
