//! Floats in grid files as exact decimal strings (`"0.1"`, `"-3e-7"`, `"NaN"`): Rust's shortest
//! round-trip form out, its correctly rounded parser in, so a saved grid loads bit for bit.
//! serde_json's own number handling is only best-effort in the last bit.

/// One `f64`.
pub mod float {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    /// Writes `x` as its shortest round-trip string.
    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{x:?}"))
    }

    /// Reads a string written by [`serialize`].
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        let text = String::deserialize(d)?;
        text.parse()
            .map_err(|_| D::Error::custom(format!("{text:?} is not a number")))
    }
}

/// A slice (written) or vector (read) of `f64`.
pub mod vec {
    use serde::{Deserialize, Deserializer, Serializer, de::Error, ser::SerializeSeq};

    /// Writes every element as its shortest round-trip string.
    pub fn serialize<S: Serializer>(x: &[f64], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(x.len()))?;
        for v in x {
            seq.serialize_element(&format!("{v:?}"))?;
        }
        seq.end()
    }

    /// Reads an array written by [`serialize`].
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
