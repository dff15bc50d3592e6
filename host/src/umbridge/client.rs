//! The HTTP client of an UM-Bridge server: typed calls with a timeout on each request, retries
//! with doubling backoff when the server cannot be reached, is too slow or is busy, and one
//! clear error naming the server and the endpoint for anything else. Errors come in two kinds
//! ([`CallError`]): the model failing at this input (its error answer, a non-finite number),
//! which a sampler can treat as zero density there, and everything else (unreachable, a
//! refused request, a malformed or wrong-sized answer), which ends a run.
//!
//! A [`Client`] is `Sync` and its calls take `&self`: chains on several threads share one, each
//! call holds its own pooled keep-alive connection, so as many evaluations are in flight as
//! there are chains and the server (or its load balancer) decides how many run at once.
//! Without a load balancer, a [`Pool`](super::pool::Pool) spreads the calls over several
//! instances of one model.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use ureq::Agent;

use super::protocol::{
    ApplyJacobianRequest, Endpoint, ErrorResponse, EvaluateRequest, EvaluateResponse,
    GradientRequest, Info, InputSizes, ModelInfo, ModelRequest, OutputSizes, Support,
    VectorResponse,
};
use crate::{Error, Result};

/// How long to wait for the server and how often to try again.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Patience {
    /// The limit on one request, from connecting to the last byte of the answer.
    pub timeout: Duration,
    /// Further attempts after a connection error, a timeout or a busy server (503), waiting
    /// [`FIRST_BACKOFF`] before the first and twice as long before each next one.
    pub retries: u32,
}

impl Default for Patience {
    /// A minute per request (an expensive model's evaluation included) and three retries.
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            retries: 3,
        }
    }
}

/// The wait before the first retry.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// The largest answer read: far beyond any model's output vectors, small enough that a
/// misbehaving server cannot exhaust memory.
const MAX_ANSWER_BYTES: u64 = 64 << 20;
/// Keep-alive connections kept per server: one per chain in flight, with room to spare.
const IDLE_CONNECTIONS: usize = 64;

/// A connection to one UM-Bridge server.
#[derive(Debug)]
pub struct Client {
    agent: Agent,
    url: String,
    patience: Patience,
}

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// The model could not evaluate at this input: the server answered the protocol's
    /// `InvalidInput` or an internal error (the model raised), or a non-finite number.
    AtInput(Error),
    /// The server could not be reached, or broke its answers off, through every retry: gone,
    /// where an engine may start it again elsewhere.
    Gone(Error),
    /// Anything else: the server too slow or busy after the retries, the request refused as
    /// such, or a malformed or wrong-sized answer.
    Fatal(Error),
}

impl From<CallError> for Error {
    fn from(e: CallError) -> Self {
        match e {
            CallError::AtInput(e) | CallError::Gone(e) | CallError::Fatal(e) => e,
        }
    }
}

/// Why one attempt failed: worth another try, or a failure of the call.
enum Failed {
    Retry(String),
    /// Worth another try too, but the server is unreachable: gone if it stays so.
    Unreachable(String),
    AtInput(String),
    Final(String),
}

impl Client {
    /// A client of the server at `url` (`http://HOST:PORT`). Nothing is sent yet. Fails on a
    /// URL that is not plain HTTP or a zero timeout.
    pub fn new(url: &str, patience: Patience) -> Result<Self> {
        let url = url.trim_end_matches('/');
        if url.starts_with("https://") {
            return Err(Error::setting(
                "url",
                "is HTTPS, which shmc does not speak: UM-Bridge servers and their load \
                 balancer serve plain HTTP on the cluster's network (tunnel it over ssh from \
                 outside)",
            ));
        }
        let host = url.strip_prefix("http://").unwrap_or("");
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(Error::setting(
                "url",
                format!("must be http://HOST:PORT, got {url:?}"),
            ));
        }
        if patience.timeout.is_zero() {
            return Err(Error::setting("timeout", "must be positive"));
        }
        let agent: Agent = Agent::config_builder()
            .timeout_global(Some(patience.timeout))
            .http_status_as_error(false)
            .max_idle_connections(IDLE_CONNECTIONS)
            .max_idle_connections_per_host(IDLE_CONNECTIONS)
            .build()
            .into();
        Ok(Self {
            agent,
            url: url.to_string(),
            patience,
        })
    }

    /// The server's base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The protocol version and the served models.
    pub fn info(&self) -> Result<Info> {
        Ok(self.call(Endpoint::Info, None::<&()>)?)
    }

    /// What model `name` supports.
    pub fn support(&self, name: &str) -> Result<Support> {
        let request = ModelRequest {
            name: name.into(),
            config: Value::Object(Default::default()),
        };
        let info: ModelInfo = self.call(Endpoint::ModelInfo, Some(&request))?;
        Ok(info.support)
    }

    /// The lengths of model `name`'s input vectors.
    pub fn input_sizes(&self, name: &str, config: &Value) -> Result<Vec<usize>> {
        let sizes: InputSizes = self.call(Endpoint::InputSizes, Some(&request(name, config)))?;
        Ok(sizes.input_sizes)
    }

    /// The lengths of model `name`'s output vectors.
    pub fn output_sizes(&self, name: &str, config: &Value) -> Result<Vec<usize>> {
        let sizes: OutputSizes = self.call(Endpoint::OutputSizes, Some(&request(name, config)))?;
        Ok(sizes.output_sizes)
    }

    /// The output of model `name` (one input vector, one output vector of length `outputs`)
    /// at `input`.
    pub fn evaluate(
        &self,
        name: &str,
        input: &[f64],
        config: &Value,
        outputs: usize,
    ) -> Result<Vec<f64>, CallError> {
        let request = EvaluateRequest {
            name: name.into(),
            input: vec![input.to_vec()],
            config: config.clone(),
        };
        let answer: EvaluateResponse = self.call(Endpoint::Evaluate, Some(&request))?;
        let [output]: [Vec<f64>; 1] = answer.output.try_into().map_err(|o: Vec<Vec<f64>>| {
            CallError::Fatal(self.error(
                Endpoint::Evaluate,
                format!("answered {} output vectors where 1 was expected", o.len()),
            ))
        })?;
        self.check_length(Endpoint::Evaluate, output, outputs)
    }

    /// `sensᵀ J` of model `name` at `input`: a vector as long as the input.
    pub fn gradient(
        &self,
        name: &str,
        input: &[f64],
        sens: &[f64],
        config: &Value,
    ) -> Result<Vec<f64>, CallError> {
        let request = GradientRequest {
            name: name.into(),
            out_wrt: 0,
            in_wrt: 0,
            input: vec![input.to_vec()],
            sens: sens.to_vec(),
            config: config.clone(),
        };
        let answer: VectorResponse = self.call(Endpoint::Gradient, Some(&request))?;
        self.check_length(Endpoint::Gradient, answer.output, input.len())
    }

    /// `J vec` of model `name` at `input`: a vector of length `outputs`.
    pub fn apply_jacobian(
        &self,
        name: &str,
        input: &[f64],
        vec: &[f64],
        config: &Value,
        outputs: usize,
    ) -> Result<Vec<f64>, CallError> {
        let request = ApplyJacobianRequest {
            name: name.into(),
            out_wrt: 0,
            in_wrt: 0,
            input: vec![input.to_vec()],
            vec: vec.to_vec(),
            config: config.clone(),
        };
        let answer: VectorResponse = self.call(Endpoint::ApplyJacobian, Some(&request))?;
        self.check_length(Endpoint::ApplyJacobian, answer.output, outputs)
    }

    /// An [`Error::Served`] at `endpoint`.
    pub fn error(&self, endpoint: Endpoint, problem: impl Into<String>) -> Error {
        Error::Served {
            url: self.url.clone(),
            endpoint: endpoint.path(),
            problem: problem.into(),
        }
    }

    fn check_length(
        &self,
        endpoint: Endpoint,
        v: Vec<f64>,
        expected: usize,
    ) -> Result<Vec<f64>, CallError> {
        if v.len() == expected {
            Ok(v)
        } else {
            Err(CallError::Fatal(self.error(
                endpoint,
                format!(
                    "answered {} numbers where {expected} were expected",
                    v.len()
                ),
            )))
        }
    }

    /// Sends `request` to `endpoint` (a GET without one), trying again with backoff while the
    /// server is unreachable, slow or busy, and parses the answer.
    fn call<T: DeserializeOwned>(
        &self,
        endpoint: Endpoint,
        request: Option<&impl Serialize>,
    ) -> Result<T, CallError> {
        let fatal = |problem: String| CallError::Fatal(self.error(endpoint, problem));
        let body = request
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| fatal(format!("cannot encode the request: {e}")))?;
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 0;
        loop {
            match self.attempt(endpoint, body.as_deref()) {
                Ok(text) => return self.parse(endpoint, &text),
                Err(Failed::Retry(_) | Failed::Unreachable(_))
                    if attempt < self.patience.retries =>
                {
                    std::thread::sleep(backoff);
                    backoff = (2 * backoff).min(MAX_BACKOFF);
                    attempt += 1;
                }
                Err(Failed::Retry(problem)) => {
                    return Err(fatal(format!(
                        "{problem} (gave up after {} attempts)",
                        attempt + 1
                    )));
                }
                Err(Failed::Unreachable(problem)) => {
                    return Err(CallError::Gone(self.error(
                        endpoint,
                        format!("{problem} (gave up after {} attempts)", attempt + 1),
                    )));
                }
                Err(Failed::AtInput(problem)) => {
                    return Err(CallError::AtInput(self.error(endpoint, problem)));
                }
                Err(Failed::Final(problem)) => return Err(fatal(problem)),
            }
        }
    }

    /// One request: the answer's text on a 2xx status.
    fn attempt(&self, endpoint: Endpoint, body: Option<&[u8]>) -> Result<String, Failed> {
        let url = format!("{}{}", self.url, endpoint.path());
        let sent = match body {
            None => self.agent.get(&url).call(),
            Some(body) => self
                .agent
                .post(&url)
                .header("Content-Type", "application/json")
                .send(body),
        };
        let mut answer = sent.map_err(|e| self.transport(e))?;
        let status = answer.status().as_u16();
        let text = answer
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_string()
            .map_err(|e| self.transport(e))?;
        let why = refusal(&text);
        match status {
            200..=299 => Ok(text),
            503 => Err(Failed::Retry(format!(
                "the server is busy (HTTP 503){}",
                why.text
            ))),
            500 => Err(Failed::AtInput(format!(
                "the model failed at this input (HTTP 500){}",
                why.text
            ))),
            400 if why.kind.as_deref() == Some("InvalidInput") => Err(Failed::AtInput(format!(
                "the model refused this input (HTTP 400){}",
                why.text
            ))),
            _ => Err(Failed::Final(format!(
                "the server refused (HTTP {status}){}",
                why.text
            ))),
        }
    }

    /// A transport error: connection failures, timeouts and answers cut off are worth a retry
    /// (the server may be starting, restarting, overloaded or dying mid-answer); anything
    /// else (a bad URL, an answer too large) is not.
    fn transport(&self, error: ureq::Error) -> Failed {
        match error {
            ureq::Error::Timeout(_) => Failed::Retry(format!(
                "no complete answer within the {} s timeout",
                self.patience.timeout.as_secs_f64()
            )),
            ureq::Error::Io(_) | ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => {
                Failed::Unreachable(format!("cannot reach the server: {error}"))
            }
            ureq::Error::Protocol(_) => {
                Failed::Unreachable(format!("a broken HTTP answer: {error}"))
            }
            other => Failed::Final(format!("no usable answer: {other}")),
        }
    }

    fn parse<T: DeserializeOwned>(&self, endpoint: Endpoint, text: &str) -> Result<T, CallError> {
        serde_json::from_str(text).map_err(|e| {
            // Python writes NaN and inf, its json module NaN and Infinity, a Rust server null:
            // none is a JSON number.
            let non_finite = text
                .split(|c: char| !c.is_ascii_alphabetic())
                .any(|w| matches!(w, "NaN" | "nan" | "Infinity" | "inf" | "null"));
            let problem = |what: &str| format!("{what}: {e}; it began {:?}", excerpt(text));
            if non_finite {
                CallError::AtInput(self.error(
                    endpoint,
                    problem("a non-finite number (NaN, Infinity or null) in the answer"),
                ))
            } else {
                CallError::Fatal(self.error(endpoint, problem("a malformed answer")))
            }
        })
    }
}

fn request(name: &str, config: &Value) -> ModelRequest {
    ModelRequest {
        name: name.into(),
        config: config.clone(),
    }
}

/// The server's reason for an error status.
struct Refusal {
    /// The protocol's error type, if the server sent the protocol's error body.
    kind: Option<String>,
    /// The reason to append to a message (empty, or `: ` and the reason).
    text: String,
}

/// The reason in an error answer's body, from the protocol's error body if it is one.
fn refusal(body: &str) -> Refusal {
    match serde_json::from_str::<ErrorResponse>(body) {
        Ok(e) => Refusal {
            text: format!(": {}: {}", e.error.kind, e.error.message),
            kind: Some(e.error.kind),
        },
        Err(_) if body.trim().is_empty() => Refusal {
            kind: None,
            text: String::new(),
        },
        Err(_) => Refusal {
            kind: None,
            text: format!(": {:?}", excerpt(body)),
        },
    }
}

/// The start of `text`, enough to recognize it.
fn excerpt(text: &str) -> String {
    text.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_timeouts_are_checked_before_anything_is_sent() {
        let patience = Patience::default();
        let err = |url: &str, p: Patience| Client::new(url, p).unwrap_err().to_string();
        assert!(err("https://a:1", patience).contains("HTTPS"));
        assert!(err("localhost:4242", patience).contains("http://HOST:PORT"));
        assert!(err("http://", patience).contains("http://HOST:PORT"));
        let zero = Patience {
            timeout: Duration::ZERO,
            ..patience
        };
        assert_eq!(
            err("http://a:1", zero),
            "setting `timeout` must be positive"
        );
        let client = Client::new("http://127.0.0.1:4242/", patience).unwrap();
        assert_eq!(client.url(), "http://127.0.0.1:4242");
    }

    #[test]
    fn refusals_quote_the_protocols_error_or_the_text() {
        let r = refusal(r#"{"error": {"type": "InvalidInput", "message": "too long"}}"#);
        assert_eq!(
            (r.kind.as_deref(), r.text.as_str()),
            (Some("InvalidInput"), ": InvalidInput: too long")
        );
        assert_eq!(refusal("  ").text, "");
        let r = refusal("oops");
        assert_eq!((r.kind, r.text.as_str()), (None, ": \"oops\""));
    }

    #[test]
    fn an_unreachable_server_is_retried_then_named() {
        // A port just released: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = Client::new(
            &format!("http://127.0.0.1:{port}"),
            Patience {
                timeout: Duration::from_secs(5),
                retries: 2,
            },
        )
        .unwrap();
        let err = client.info().unwrap_err().to_string();
        assert!(
            err.contains(&format!("127.0.0.1:{port}, /Info: cannot reach the server"))
                && err.contains("gave up after 3 attempts"),
            "{err}"
        );
    }
}
