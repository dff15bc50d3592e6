//! An UM-Bridge server for [`Served`] models, on `tiny_http`.
//!
//! Safe by default: it listens on loopback unless told otherwise; it reads at most
//! [`ServerSettings::max_body_bytes`] of a request; every evaluation runs on a fixed pool of
//! [`ServerSettings::workers`] threads and is answered within [`ServerSettings::max_seconds`]
//! of being queued (or with an error; the pool stays bounded, an evaluation that overran keeps
//! its worker until it ends), and a full queue answers 503 at once. The requests name only a
//! served model and numbers: `config` is accepted and ignored, and nothing a request says can
//! make the server touch a file or run anything but the model.
//!
//! Errors follow the protocol (`{"error": {"type", "message"}}`): 400 for malformed JSON,
//! wrong sizes, an unknown model or an input where the model has no finite value, 404 for an
//! unknown path, 405 for a wrong method, 413 for an oversized body, 500 for an evaluation past
//! the time limit, 503 for a full queue.

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tiny_http::{Header, Method, Request, Response};

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
    /// The largest request body read, in bytes.
    pub max_body_bytes: usize,
    /// The longest wait for one evaluation, queueing included, in seconds.
    pub max_seconds: f64,
}

impl Default for ServerSettings {
    /// Loopback, port 4242, one worker per core, 1 MiB bodies, 60 s per evaluation.
    fn default() -> Self {
        Self {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: crate::umbridge::protocol::DEFAULT_PORT,
            workers: std::thread::available_parallelism().map_or(1, usize::from),
            max_body_bytes: 1 << 20,
            max_seconds: 60.0,
        }
    }
}

/// Threads waiting for requests beyond the workers: enough that Info and size queries are
/// answered while every worker is busy.
const SPARE_HANDLERS: usize = 4;
/// How often idle request threads look whether the server is stopping.
const POLL: Duration = Duration::from_millis(100);

/// An evaluation queued for a worker.
type Job = Box<dyn FnOnce() + Send>;

/// What the request threads share.
struct Shared {
    http: tiny_http::Server,
    models: Vec<(String, Arc<dyn Served>)>,
    jobs: SyncSender<Job>,
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
        let handlers = settings.workers + SPARE_HANDLERS;
        // Workers end when the queue closes, which is when the server is dropped.
        let (jobs, queue) = sync_channel::<Job>(handlers);
        let queue = Arc::new(Mutex::new(queue));
        for _ in 0..settings.workers {
            let queue = Arc::clone(&queue);
            std::thread::spawn(move || work(&queue));
        }
        let shared = Arc::new(Shared {
            http,
            models,
            jobs,
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

/// A worker: runs queued evaluations until the queue closes.
fn work(queue: &Mutex<Receiver<Job>>) {
    loop {
        let job = match queue.lock() {
            Ok(receiver) => receiver.recv(),
            Err(_) => return,
        };
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

/// A request thread: answers requests until the server stops.
fn serve(shared: &Shared) {
    while !shared.stop.load(Ordering::Relaxed) {
        // An error here is one client's failed connection: nothing to answer.
        if let Ok(Some(mut request)) = shared.http.recv_timeout(POLL) {
            let (status, body) = match handle(shared, &mut request) {
                Ok(body) => (200, body),
                Err(refusal) => (refusal.status, refusal.body()),
            };
            let json = Header::from_bytes(&b"Content-Type"[..], &b"application/json"[..])
                .expect("a valid header");
            // The client may have gone; there is no one to tell.
            let _ = request.respond(
                Response::from_string(body)
                    .with_status_code(status)
                    .with_header(json),
            );
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

/// The JSON answer to `request`, or why there is none.
fn handle(shared: &Shared, request: &mut Request) -> Result<String, Refusal> {
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
            let output = run(shared, move || served.evaluate(&x))?;
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
            let output = run(shared, move || served.gradient(&x, &sens))?;
            reply(&VectorResponse { output })
        }
        Endpoint::ApplyJacobian => {
            let request: ApplyJacobianRequest = parse(&body)?;
            let served = model(shared, &request.name)?;
            check_wrt(request.out_wrt, request.in_wrt)?;
            let x = one_input(request.input, served.input_size())?;
            check_length("vec", &request.vec, served.input_size())?;
            let v = request.vec;
            let output = run(shared, move || served.apply_jacobian(&x, &v))?;
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

/// Runs `evaluation` on the worker pool and waits for it at most the time limit.
fn run(
    shared: &Shared,
    evaluation: impl FnOnce() -> Result<Vec<f64>> + Send + 'static,
) -> Result<Vec<f64>, Refusal> {
    let (done, result) = sync_channel(1);
    let job: Job = Box::new(move || {
        // A model that panics fails its request, not the worker.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(evaluation))
            .unwrap_or_else(|_| Err(Error::invalid("the model panicked at this input")));
        // The request may have timed out and gone.
        let _ = done.send(outcome);
    });
    match shared.jobs.try_send(job) {
        Ok(()) => {}
        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
            return Err(Refusal::new(
                503,
                "Busy",
                "every worker is busy and the queue is full: try again shortly",
            ));
        }
    }
    let limit = shared.settings.max_seconds;
    match result.recv_timeout(Duration::from_secs_f64(limit)) {
        Ok(Ok(output)) => Ok(output),
        Ok(Err(e)) => Err(Refusal::invalid(e.to_string())),
        Err(_) => Err(Refusal::new(
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
