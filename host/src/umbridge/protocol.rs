//! The messages of UM-Bridge protocol 1.0, one definition shared by the client and the server
//! so that the two sides cannot drift apart on a field name.
//!
//! Every call but `GET /Info` is a `POST` of a JSON object that names the model. Inputs and
//! outputs are lists of vectors (a model may take several input vectors); `outWrt` and `inWrt`
//! pick one of them for the derivative calls. A failed call answers
//! `{"error": {"type": ..., "message": ...}}` with a 4xx or 5xx status.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version this implementation speaks.
pub const PROTOCOL_VERSION: f64 = 1.0;

/// The port UM-Bridge servers listen on by convention.
pub const DEFAULT_PORT: u16 = 4242;

/// The protocol's endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `GET`: the protocol version and the served models' names.
    Info,
    /// Which of Evaluate, Gradient, ApplyJacobian and ApplyHessian a model supports.
    ModelInfo,
    /// The lengths of a model's input vectors.
    InputSizes,
    /// The lengths of a model's output vectors.
    OutputSizes,
    /// The model's outputs at an input.
    Evaluate,
    /// `sensᵀ J`: the gradient of a weighted sum of one output vector.
    Gradient,
    /// `J vec`: the Jacobian of one output vector applied to a direction.
    ApplyJacobian,
    /// The Hessian action (named for the error of a server that does not offer it).
    ApplyHessian,
}

impl Endpoint {
    /// The endpoints a request can name, for routing.
    pub const ALL: [Endpoint; 8] = [
        Endpoint::Info,
        Endpoint::ModelInfo,
        Endpoint::InputSizes,
        Endpoint::OutputSizes,
        Endpoint::Evaluate,
        Endpoint::Gradient,
        Endpoint::ApplyJacobian,
        Endpoint::ApplyHessian,
    ];

    /// Its path, `/Evaluate`.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Info => "/Info",
            Endpoint::ModelInfo => "/ModelInfo",
            Endpoint::InputSizes => "/InputSizes",
            Endpoint::OutputSizes => "/OutputSizes",
            Endpoint::Evaluate => "/Evaluate",
            Endpoint::Gradient => "/Gradient",
            Endpoint::ApplyJacobian => "/ApplyJacobian",
            Endpoint::ApplyHessian => "/ApplyHessian",
        }
    }

    /// The endpoint at `path`, if the protocol has one.
    pub fn from_path(path: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.path() == path)
    }
}

/// The answer of `GET /Info`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Info {
    /// The protocol version, 1.0.
    #[serde(rename = "protocolVersion")]
    pub protocol_version: f64,
    /// The names of the served models.
    pub models: Vec<String>,
}

/// A request that only names the model (and its configuration): ModelInfo, InputSizes and
/// OutputSizes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The model.
    pub name: String,
    /// Model-specific options; `{}` when none.
    #[serde(default)]
    pub config: Value,
}

/// What a model supports (a missing entry means no).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Support {
    /// Evaluate.
    #[serde(rename = "Evaluate", default)]
    pub evaluate: bool,
    /// Gradient.
    #[serde(rename = "Gradient", default)]
    pub gradient: bool,
    /// ApplyJacobian.
    #[serde(rename = "ApplyJacobian", default)]
    pub apply_jacobian: bool,
    /// ApplyHessian.
    #[serde(rename = "ApplyHessian", default)]
    pub apply_hessian: bool,
}

/// The answer of ModelInfo.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// What the model supports.
    pub support: Support,
}

/// The answer of InputSizes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputSizes {
    /// The length of each input vector.
    #[serde(rename = "inputSizes")]
    pub input_sizes: Vec<usize>,
}

/// The answer of OutputSizes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputSizes {
    /// The length of each output vector.
    #[serde(rename = "outputSizes")]
    pub output_sizes: Vec<usize>,
}

/// An Evaluate request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvaluateRequest {
    /// The model.
    pub name: String,
    /// The input vectors.
    pub input: Vec<Vec<f64>>,
    /// Model-specific options.
    #[serde(default)]
    pub config: Value,
}

/// A Gradient request: `sensᵀ ∂output[outWrt]/∂input[inWrt]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GradientRequest {
    /// The model.
    pub name: String,
    /// Which output vector.
    #[serde(rename = "outWrt")]
    pub out_wrt: usize,
    /// Which input vector.
    #[serde(rename = "inWrt")]
    pub in_wrt: usize,
    /// The input vectors.
    pub input: Vec<Vec<f64>>,
    /// The weights of the output vector's entries.
    pub sens: Vec<f64>,
    /// Model-specific options.
    #[serde(default)]
    pub config: Value,
}

/// An ApplyJacobian request: `∂output[outWrt]/∂input[inWrt] · vec`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApplyJacobianRequest {
    /// The model.
    pub name: String,
    /// Which output vector.
    #[serde(rename = "outWrt")]
    pub out_wrt: usize,
    /// Which input vector.
    #[serde(rename = "inWrt")]
    pub in_wrt: usize,
    /// The input vectors.
    pub input: Vec<Vec<f64>>,
    /// The direction, one entry per entry of the input vector.
    pub vec: Vec<f64>,
    /// Model-specific options.
    #[serde(default)]
    pub config: Value,
}

/// The answer of Evaluate: one vector per output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvaluateResponse {
    /// The output vectors.
    pub output: Vec<Vec<f64>>,
}

/// The answer of Gradient and ApplyJacobian: one vector.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VectorResponse {
    /// The vector.
    pub output: Vec<f64>,
}

/// A failed call's body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorResponse {
    /// What went wrong.
    pub error: ErrorBody,
}

/// What went wrong, as the protocol says it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The kind: `InvalidInput`, `ModelNotFound`, `UnsupportedFeature`, `InvalidOutput`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The explanation.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_use_the_protocols_field_names() {
        let request = GradientRequest {
            name: "m".into(),
            out_wrt: 0,
            in_wrt: 0,
            input: vec![vec![1.0, 2.5]],
            sens: vec![1.0],
            config: serde_json::json!({}),
        };
        let text = serde_json::to_string(&request).unwrap();
        assert_eq!(
            text,
            r#"{"name":"m","outWrt":0,"inWrt":0,"input":[[1.0,2.5]],"sens":[1.0],"config":{}}"#
        );
        let info: ModelInfo =
            serde_json::from_str(r#"{"support": {"Evaluate": true, "ApplyJacobian": true}}"#)
                .unwrap();
        assert!(info.support.evaluate && info.support.apply_jacobian && !info.support.gradient);
        let sizes: InputSizes = serde_json::from_str(r#"{"inputSizes": [3]}"#).unwrap();
        assert_eq!(sizes.input_sizes, [3]);
        // A request without config (the Python client always sends one, others may not).
        let evaluate: EvaluateRequest =
            serde_json::from_str(r#"{"name": "m", "input": [[1]]}"#).unwrap();
        assert_eq!(evaluate.input, [[1.0]]);
        assert_eq!(Endpoint::from_path("/Gradient"), Some(Endpoint::Gradient));
        assert_eq!(Endpoint::from_path("/etc/passwd"), None);
    }
}
