//! An UM-Bridge server for [`Served`] models, on `tiny_http`.
//!
//! Safe by default: it listens on loopback unless told otherwise; it reads at most
//! [`ServerSettings::max_body_bytes`] of a request; every evaluation runs on a fixed pool of
//! [`ServerSettings::workers`] threads behind a queue of [`ServerSettings::queue`], and is
//! answered within [`ServerSettings::max_seconds`] of its arrival (or with an error; the pool
//! stays bounded, an evaluation that overran keeps its worker until it ends). A full queue
//! answers 503 with `Retry-After` at once, and a request whose limit passes while it waits is
//! answered 503 without being evaluated. Request threads beyond those an evaluation can hold
//! take every request as it comes, so no request waits where the clock does not run. The
//! requests name only a
//! served model and numbers: `config` is accepted and ignored, and nothing a request says can
//! make the server touch a file or run anything but the model.
//!
//! Errors follow the protocol (`{"error": {"type", "message"}}`): 400 for malformed JSON,
//! wrong sizes, an unknown model or an input where the model has no finite value, 404 for an
//! unknown path, 405 for a wrong method, 413 for an oversized body, 500 for an evaluation past
//! the time limit, 503 (with `Retry-After`) for a full queue or a wait past the limit.

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde::de::DeserializeOwned;
use tiny_http::{Header, Method, Request, Response};

use super::queue::{Outcome, Queue};
use super::served::Served;
use crate::umbridge::protocol::{
    ApplyJacobianRequest, Endpoint, ErrorBody, ErrorResponse, EvaluateRequest, EvaluateResponse,
    GradientRequest, Info, InputSizes, ModelInfo, ModelRequest, OutputSizes, PROTOCOL_VERSION,
    Support, VectorResponse,
};
use crate::{Error, Result};

/// Where and how the server listens.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerSettings {
    /// The address to listen on: loopback unless the user says otherwise.
    pub bind: IpAddr,
    /// The port; 0 lets the system pick a free one ([`Server::addr`] tells which).
    pub port: u16,
    /// Evaluations run at once.
    pub workers: usize,
    /// Evaluations that may wait for a worker; a request beyond them is refused (503).
    pub queue: usize,
    /// The largest request body read, in bytes.
    pub max_body_bytes: usize,
    /// The longest a request waits for its evaluation, from its arrival, queueing included,
    /// in seconds.
    pub max_seconds: f64,
}

/// Queued evaluations per worker by default: a few evaluations' worth of waiting.
pub const QUEUE_PER_WORKER: usize = 4;

impl Default for ServerSettings {
    /// Loopback, port 4242, one worker per core and [`QUEUE_PER_WORKER`] queued evaluations
    /// each, 1 MiB bodies, 60 s per evaluation.
    fn default() -> Self {
        let workers = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: crate::umbridge::protocol::DEFAULT_PORT,
            workers,
            queue: workers.saturating_mul(QUEUE_PER_WORKER),
            max_body_bytes: 1 << 20,
            max_seconds: 60.0,
        }
    }
}

/// Request threads beyond those evaluations can hold (one per worker and one per queued
/// evaluation): always free, they take requests as they arrive, answer Info and size queries
/// while every worker is busy, and refuse evaluations when the queue is full.
const SPARE_HANDLERS: usize = 4;
/// The `Retry-After` of a 503: a queue clears within about an evaluation's time.
const RETRY_AFTER_SECONDS: &str = "1";
/// How often idle request threads look whether the server is stopping.
const POLL: Duration = Duration::from_millis(100);

/// What the request threads share.
struct Shared {
    http: tiny_http::Server,
    models: Vec<(String, Arc<dyn Served>)>,
    jobs: Queue,
    settings: ServerSettings,
    stop: AtomicBool,
}

/// A running server; dropping it (or [`Server::stop`]) stops it.
pub struct Server {
    shared: Arc<Shared>,
    addr: SocketAddr,
    handlers: Vec<JoinHandle<()>>,
}

impl Server {
    /// Starts serving `models` (name, map) as `settings` say. Fails on bad settings, no
    /// models, a duplicate name or an address that cannot be bound.
    pub fn start(
        models: Vec<(String, Arc<dyn Served>)>,
        settings: &ServerSettings,
    ) -> Result<Self> {
        if settings.workers == 0 {
            return Err(Error::setting("workers", "must be at least 1"));
        }
        if settings.max_body_bytes == 0 {
            return Err(Error::setting("max_body_bytes", "must be at least 1"));
        }
        if !(settings.max_seconds.is_finite() && settings.max_seconds > 0.0) {
            return Err(Error::setting("max_seconds", "must be positive and finite"));
        }
        if models.is_empty() {
            return Err(Error::invalid("no model to serve"));
        }
        for (i, (name, _)) in models.iter().enumerate() {
            if models[..i].iter().any(|(other, _)| other == name) {
                return Err(Error::invalid(format!("model {name:?} is served twice")));
            }
        }
        let http = tiny_http::Server::http(SocketAddr::new(settings.bind, settings.port)).map_err(
            |e| {
                Error::invalid(format!(
                    "cannot listen on {}:{}: {e}",
                    settings.bind, settings.port
                ))
            },
        )?;
        let addr = http
            .server_addr()
            .to_ip()
            .ok_or_else(|| Error::invalid("the server did not bind an IP address"))?;
        let handlers = settings
            .workers
            .checked_add(settings.queue)
            .and_then(|held| held.checked_add(SPARE_HANDLERS))
            .ok_or_else(|| Error::setting("queue", "is too large"))?;
        // Workers end when the queue closes, which is when the server is dropped.
        let shared = Arc::new(Shared {
            http,
            models,
            jobs: Queue::start(settings.workers, settings.queue),
            settings: settings.clone(),
            stop: AtomicBool::new(false),
        });
        let handlers = (0..handlers)
            .map(|_| {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || serve(&shared))
            })
            .collect();
        Ok(Self {
            shared,
            addr,
            handlers,
        })
    }

    /// The address it listens on (the port the system picked, if 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops taking requests and waits for the ones in hand to be answered.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for handler in self.handlers.drain(..) {
            let _ = handler.join();
        }
    }
}

/// A request thread: answers requests until the server stops.
fn serve(shared: &Shared) {
    while !shared.stop.load(Ordering::Relaxed) {
        // An error here is one client's failed connection: nothing to answer.
        if let Ok(Some(mut request)) = shared.http.recv_timeout(POLL) {
            let deadline = Instant::now() + Duration::from_secs_f64(shared.settings.max_seconds);
            let (status, body) = match handle(shared, &mut request, deadline) {
                Ok(body) => (200, body),
                Err(refusal) => (refusal.status, refusal.body()),
            };
            let json = Header::from_bytes(&b"Content-Type"[..], &b"application/json"[..])
                .expect("a valid header");
            let mut response = Response::from_string(body)
                .with_status_code(status)
                .with_header(json);
            if status == 503 {
                let retry = Header::from_bytes(&b"Retry-After"[..], RETRY_AFTER_SECONDS.as_bytes())
                    .expect("a valid header");
                response.add_header(retry);
            }
            // The client may have gone; there is no one to tell.
            let _ = request.respond(response);
        }
    }
}

/// A request the server does not answer with a result: the HTTP status and the protocol's
/// error type and message.
#[derive(Debug)]
struct Refusal {
    status: u16,
    kind: &'static str,
    message: String,
}

impl Refusal {
    fn new(status: u16, kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            kind,
            message: message.into(),
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new(400, "InvalidInput", message)
    }

    fn body(&self) -> String {
        let error = ErrorResponse {
            error: ErrorBody {
                kind: self.kind.into(),
                message: self.message.clone(),
            },
        };
        serde_json::to_string(&error).unwrap_or_else(|_| "{}".into())
    }
}

/// The JSON answer to `request`, or why there is none, by `deadline`.
fn handle(shared: &Shared, request: &mut Request, deadline: Instant) -> Result<String, Refusal> {
    let path = request
        .url()
        .split('?')
        .next()
        .unwrap_or_default()
        .to_string();
    let endpoint = Endpoint::from_path(&path).ok_or_else(|| {
        let known: Vec<&str> = Endpoint::ALL.iter().map(|e| e.path()).collect();
        Refusal::new(
            404,
            "NotFound",
            format!("no endpoint {path:?}; UM-Bridge's are {}", known.join(", ")),
        )
    })?;
    let method = if endpoint == Endpoint::Info {
        Method::Get
    } else {
        Method::Post
    };
    if *request.method() != method {
        return Err(Refusal::new(
            405,
            "MethodNotAllowed",
            format!("{} takes {method}", endpoint.path()),
        ));
    }
    if endpoint == Endpoint::Info {
        return reply(&Info {
            protocol_version: PROTOCOL_VERSION,
            models: shared.models.iter().map(|(n, _)| n.clone()).collect(),
        });
    }
    let body = read_body(request, shared.settings.max_body_bytes)?;
    match endpoint {
        Endpoint::ModelInfo => {
            let request: ModelRequest = parse(&body)?;
            model(shared, &request.name)?;
            reply(&ModelInfo {
                support: Support {
                    evaluate: true,
                    gradient: true,
                    apply_jacobian: true,
                    apply_hessian: false,
                },
            })
        }
        Endpoint::InputSizes => {
            let request: ModelRequest = parse(&body)?;
            let input_sizes = vec![model(shared, &request.name)?.input_size()];
            reply(&InputSizes { input_sizes })
        }
        Endpoint::OutputSizes => {
            let request: ModelRequest = parse(&body)?;
            let output_sizes = vec![model(shared, &request.name)?.output_size()];
            reply(&OutputSizes { output_sizes })
        }
        Endpoint::Evaluate => {
            let request: EvaluateRequest = parse(&body)?;
            let served = model(shared, &request.name)?;
            let x = one_input(request.input, served.input_size())?;
            let output = run(shared, deadline, move || served.evaluate(&x))?;
            reply(&EvaluateResponse {
                output: vec![output],
            })
        }
        Endpoint::Gradient => {
            let request: GradientRequest = parse(&body)?;
            let served = model(shared, &request.name)?;
            check_wrt(request.out_wrt, request.in_wrt)?;
            let x = one_input(request.input, served.input_size())?;
            check_length("sens", &request.sens, served.output_size())?;
            let sens = request.sens;
            let output = run(shared, deadline, move || served.gradient(&x, &sens))?;
            reply(&VectorResponse { output })
        }
        Endpoint::ApplyJacobian => {
            let request: ApplyJacobianRequest = parse(&body)?;
            let served = model(shared, &request.name)?;
            check_wrt(request.out_wrt, request.in_wrt)?;
            let x = one_input(request.input, served.input_size())?;
            check_length("vec", &request.vec, served.input_size())?;
            let v = request.vec;
            let output = run(shared, deadline, move || served.apply_jacobian(&x, &v))?;
            reply(&VectorResponse { output })
        }
        Endpoint::ApplyHessian | Endpoint::Info => Err(Refusal::new(
            400,
            "UnsupportedFeature",
            format!("{} is not supported", endpoint.path()),
        )),
    }
}

/// The request body, at most `limit` bytes.
fn read_body(request: &mut Request, limit: usize) -> Result<Vec<u8>, Refusal> {
    let too_large = || {
        Refusal::new(
            413,
            "PayloadTooLarge",
            format!("the request body exceeds the server's limit of {limit} bytes"),
        )
    };
    if request.body_length().is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    request
        .as_reader()
        .take(limit as u64 + 1)
        .read_to_end(&mut body)
        .map_err(|e| Refusal::invalid(format!("cannot read the request body: {e}")))?;
    if body.len() > limit {
        return Err(too_large());
    }
    Ok(body)
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, Refusal> {
    serde_json::from_slice(body).map_err(|e| {
        Refusal::invalid(format!(
            "malformed request: {e} (numbers must be finite JSON numbers: NaN and Infinity \
             are not JSON)"
        ))
    })
}

fn reply(value: &impl Serialize) -> Result<String, Refusal> {
    serde_json::to_string(value).map_err(|e| {
        Refusal::new(
            500,
            "InvalidOutput",
            format!("cannot encode the answer: {e}"),
        )
    })
}

/// The served model `name`.
fn model(shared: &Shared, name: &str) -> Result<Arc<dyn Served>, Refusal> {
    shared
        .models
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, m)| Arc::clone(m))
        .ok_or_else(|| {
            let names: Vec<&str> = shared.models.iter().map(|(n, _)| n.as_str()).collect();
            Refusal::new(
                400,
                "ModelNotFound",
                format!(
                    "model {name:?} not found; this server serves: {}",
                    names.join(", ")
                ),
            )
        })
}

/// The one input vector, of length `size`.
fn one_input(input: Vec<Vec<f64>>, size: usize) -> Result<Vec<f64>, Refusal> {
    let [x]: [Vec<f64>; 1] = input.try_into().map_err(|input: Vec<Vec<f64>>| {
        Refusal::invalid(format!(
            "the model takes 1 input vector, the request has {}",
            input.len()
        ))
    })?;
    check_length("input vector", &x, size)?;
    Ok(x)
}

fn check_length(what: &str, v: &[f64], size: usize) -> Result<(), Refusal> {
    if v.len() == size {
        Ok(())
    } else {
        Err(Refusal::invalid(format!(
            "the {what} has {} entries, the model expects {size}",
            v.len()
        )))
    }
}

fn check_wrt(out_wrt: usize, in_wrt: usize) -> Result<(), Refusal> {
    if out_wrt == 0 && in_wrt == 0 {
        Ok(())
    } else {
        Err(Refusal::invalid(format!(
            "outWrt {out_wrt} and inWrt {in_wrt}: the model has one input and one output \
             vector, both 0"
        )))
    }
}

/// Runs `evaluation` on the worker pool and waits for it until `deadline`, the request's
/// arrival plus the time limit.
fn run(
    shared: &Shared,
    deadline: Instant,
    evaluation: impl FnOnce() -> Result<Vec<f64>> + Send + 'static,
) -> Result<Vec<f64>, Refusal> {
    let limit = shared.settings.max_seconds;
    match shared.jobs.run(deadline, evaluation) {
        Outcome::Done(Ok(output)) => Ok(output),
        Outcome::Done(Err(e)) => Err(Refusal::invalid(e.to_string())),
        Outcome::Full => Err(Refusal::new(
            503,
            "Busy",
            format!(
                "every worker is busy and the queue of {} is full: try again shortly",
                shared.settings.queue
            ),
        )),
        Outcome::Expired => Err(Refusal::new(
            503,
            "Busy",
            format!("waited for a worker past the server's limit of {limit} s: not evaluated"),
        )),
        Outcome::Overran => Err(Refusal::new(
            500,
            "Timeout",
            format!("no result within the server's limit of {limit} s per evaluation"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Echoes its input after sleeping.
    struct Sleepy(Duration);

    impl Served for Sleepy {
        fn input_size(&self) -> usize {
            1
        }
        fn output_size(&self) -> usize {
            1
        }
        fn evaluate(&self, x: &[f64]) -> Result<Vec<f64>> {
            std::thread::sleep(self.0);
            Ok(x.to_vec())
        }
        fn gradient(&self, _: &[f64], sens: &[f64]) -> Result<Vec<f64>> {
            Ok(sens.to_vec())
        }
        fn apply_jacobian(&self, _: &[f64], v: &[f64]) -> Result<Vec<f64>> {
            Ok(v.to_vec())
        }
    }

    fn post(addr: SocketAddr, name: &str) -> (u16, String) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let body = format!(r#"{{"name": "{name}", "input": [[0.5]]}}"#);
        let mut answer = agent
            .post(format!("http://{addr}/Evaluate"))
            .send(body.as_bytes())
            .unwrap();
        let status = answer.status().as_u16();
        (status, answer.body_mut().read_to_string().unwrap())
    }

    #[test]
    fn an_evaluation_past_the_time_limit_is_an_error_and_the_server_serves_on() {
        let models: Vec<(String, Arc<dyn Served>)> = vec![
            ("slow".into(), Arc::new(Sleepy(Duration::from_secs(3)))),
            ("fast".into(), Arc::new(Sleepy(Duration::ZERO))),
        ];
        let server = Server::start(
            models,
            &ServerSettings {
                port: 0,
                workers: 2,
                max_seconds: 0.2,
                ..ServerSettings::default()
            },
        )
        .unwrap();
        assert!(server.addr().ip().is_loopback());
        let (status, body) = post(server.addr(), "slow");
        assert_eq!(status, 500, "{body}");
        assert!(body.contains("Timeout") && body.contains("0.2 s"), "{body}");
        // The overrunning evaluation holds one worker; the other answers.
        assert_eq!(
            post(server.addr(), "fast"),
            (200, r#"{"output":[[0.5]]}"#.into())
        );
    }

    /// Counts its evaluations, each taking the duration it holds.
    struct Counted(Duration, std::sync::atomic::AtomicUsize);

    impl Served for Counted {
        fn input_size(&self) -> usize {
            1
        }
        fn output_size(&self) -> usize {
            1
        }
        fn evaluate(&self, x: &[f64]) -> Result<Vec<f64>> {
            self.1.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(self.0);
            Ok(x.to_vec())
        }
        fn gradient(&self, _: &[f64], sens: &[f64]) -> Result<Vec<f64>> {
            Ok(sens.to_vec())
        }
        fn apply_jacobian(&self, _: &[f64], v: &[f64]) -> Result<Vec<f64>> {
            Ok(v.to_vec())
        }
    }

    /// An Evaluate's status, its Retry-After header, its body and how long it took.
    fn timed_post(addr: SocketAddr) -> (u16, Option<String>, String, Duration) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let start = Instant::now();
        let mut answer = agent
            .post(format!("http://{addr}/Evaluate"))
            .send(&br#"{"name": "m", "input": [[0.5]]}"#[..])
            .unwrap();
        let retry = answer
            .headers()
            .get("Retry-After")
            .map(|v| v.to_str().unwrap().to_string());
        let body = answer.body_mut().read_to_string().unwrap();
        (answer.status().as_u16(), retry, body, start.elapsed())
    }

    /// One worker, a queue of 2, evaluations of 0.6 s and a limit of 1 s, 12 requests (the
    /// first being evaluated when the other 11 come at once): the queue holds 2, the other 9
    /// are refused at once (503, Retry-After); the first is
    /// answered, the second overruns (500) and the third, still queued at its limit, is
    /// answered 503 and never evaluated. Before, the queue never filled, every request was
    /// answered 200, and those waiting in the HTTP library's own queue waited past the limit.
    #[test]
    fn a_full_queue_sheds_load_and_no_answer_comes_after_the_limit() {
        let model = Arc::new(Counted(Duration::from_millis(600), Default::default()));
        let settings = ServerSettings {
            port: 0,
            workers: 1,
            queue: 2,
            max_seconds: 1.0,
            ..ServerSettings::default()
        };
        let server = Server::start(vec![("m".into(), model.clone() as _)], &settings).unwrap();
        let addr = server.addr();
        // The first request alone, until the worker is evaluating it; then the other 11 at
        // once. (All 12 at once raced the worker: on a loaded machine it had not taken the
        // first from the queue before the rest came, so the queue held two, not three.)
        let first = std::thread::spawn(move || timed_post(addr));
        let waiting = std::time::Instant::now();
        while model.1.load(Ordering::SeqCst) == 0 {
            assert!(
                waiting.elapsed() < Duration::from_secs(10),
                "the worker never started"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let barrier = Arc::new(std::sync::Barrier::new(11));
        let rest: Vec<_> = (0..11)
            .map(|_| {
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    barrier.wait();
                    timed_post(addr)
                })
            })
            .collect();
        let answers: Vec<_> = std::iter::once(first)
            .chain(rest)
            .map(|t| t.join().unwrap())
            .collect();
        let count = |status| answers.iter().filter(|a| a.0 == status).count();
        assert_eq!(
            (count(200), count(500), count(503)),
            (1, 1, 10),
            "{answers:?}"
        );
        for (status, retry, body, took) in &answers {
            // The limit, and a margin for a loaded machine's scheduling (the old queue's answers
            // came up to 3 s).
            assert!(took.as_secs_f64() < 2.0, "{status} after {took:?}: {body}");
            assert_eq!(retry.is_some(), *status == 503, "{status}: {body}");
        }
        let expired = answers.iter().filter(|a| a.2.contains("not evaluated"));
        assert_eq!(expired.count(), 1, "{answers:?}");
        // The overrunning evaluation ends; the expired one is never started.
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(model.1.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn bad_settings_are_refused_before_listening() {
        let models = || -> Vec<(String, Arc<dyn Served>)> {
            vec![("m".into(), Arc::new(Sleepy(Duration::ZERO)))]
        };
        let start = |s: ServerSettings, m| Server::start(m, &s).err().unwrap().to_string();
        let base = ServerSettings {
            port: 0,
            ..ServerSettings::default()
        };
        assert_eq!(
            start(
                ServerSettings {
                    workers: 0,
                    ..base.clone()
                },
                models()
            ),
            "setting `workers` must be at least 1"
        );
        assert!(
            start(
                ServerSettings {
                    max_seconds: f64::NAN,
                    ..base.clone()
                },
                models()
            )
            .contains("max_seconds")
        );
        let mut twice = models();
        twice.extend(models());
        assert!(start(base, twice).contains("served twice"));
    }
}
