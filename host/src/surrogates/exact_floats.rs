//! Floats in surrogate files as exact decimal strings (`"0.1"`, `"-3e-7"`, `"NaN"`): Rust's
//! shortest round-trip form, parsed back by Rust's correctly rounded parser. JSON numbers through
//! serde_json are only best-effort in the last bit, and a surrogate must be rebuilt bit for bit.
//! Use with `#[serde(with = "crate::surrogates::exact_floats")]` on an `f64` and
//! `#[serde(with = "crate::surrogates::exact_floats::vec")]` on a `Vec<f64>`.

use serde::{Deserialize, Deserializer, Serializer, de::Error};

/// Writes `x` as its exact decimal string.
pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{x:?}"))
}

/// Reads a float from its decimal string.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let text = String::deserialize(d)?;
    text.parse()
        .map_err(|_| D::Error::custom(format!("{text:?} is not a number")))
}

/// Vectors of floats as arrays of exact decimal strings.
pub mod vec {
    use serde::{Deserialize, Deserializer, Serializer, de::Error, ser::SerializeSeq};

    /// Writes every entry of `x` as its exact decimal string.
    pub fn serialize<S: Serializer>(x: &[f64], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(x.len()))?;
        for v in x {
            seq.serialize_element(&format!("{v:?}"))?;
        }
        seq.end()
    }

    /// Reads an array of decimal strings.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        let text = Vec::<String>::deserialize(d)?;
        text.iter()
            .map(|t| {
                t.parse()
                    .map_err(|_| D::Error::custom(format!("{t:?} is not a number")))
            })
            .collect()
    }
}
