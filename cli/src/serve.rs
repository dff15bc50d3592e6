//! `shmc serve`: a built-in model as an UM-Bridge server, until Ctrl-C.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::ModelArgs;
use shmc::models::elliptic_pde::EllipticPde;
use shmc::serve::served::served_maps;
use shmc::serve::server::{QUEUE_PER_WORKER, Server, ServerSettings};
use shmc::umbridge::protocol::DEFAULT_PORT;
use shmc::{Error, Model, Result, models};

/// Arguments of `shmc serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Port to listen on; 0 picks a free one (printed at start).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Address to listen on. The default serves this machine only; any other (0.0.0.0 for
    /// every interface) lets whoever reaches it evaluate the model: there is no
    /// authentication.
    #[arg(long, default_value = "127.0.0.1", value_name = "ADDR")]
    bind: IpAddr,
    /// Evaluations run at once [default: one per core].
    #[arg(long, value_name = "N")]
    workers: Option<usize>,
    /// Evaluations that may wait for a worker; a request finding the queue full is answered
    /// 503 with Retry-After at once [default: 4 per worker].
    #[arg(long, value_name = "N")]
    queue: Option<usize>,
    /// Largest request body read, in bytes; a larger one is refused (413).
    #[arg(long, default_value_t = 1 << 20, value_name = "BYTES")]
    max_body_bytes: usize,
    /// Longest wait for one evaluation, measured from the request's arrival, queueing
    /// included: a request still queued then is answered 503 without being evaluated, one
    /// being evaluated 500 (the worker finishes it regardless).
    #[arg(
        long,
        default_value_t = 60.0,
        value_name = "SECONDS",
        allow_negative_numbers = true
    )]
    max_seconds: f64,
    /// Once listening, write this server's URL to FILE (whole, by a rename), and remove it at
    /// the stop: how an instance that a cluster engine started (a HyperQueue task) tells the
    /// sampler where it is (`shmc sample --url dir:FOLDER` reads FOLDER/url-N.txt).
    #[arg(long, value_name = "FILE")]
    url_file: Option<PathBuf>,
}

/// Runs `shmc serve`.
pub fn run(args: &ServeArgs) -> Result<i32> {
    let spec = args
        .model
        .spec(super::surrogate_args::default_memory_limit());
    if spec.name == "umbridge" {
        return Err(Error::invalid(
            "shmc serve serves the built-in models (see shmc models); a model behind \
             --model umbridge is served already",
        ));
    }
    // The PDE model is served twice, as its posterior and as its forward map: one instance.
    let (model, pde): (Arc<dyn Model>, Option<Arc<EllipticPde>>) = if spec.name == "elliptic-pde" {
        let pde = Arc::new(models::elliptic_pde::from_spec(&spec)?);
        (pde.clone(), Some(pde))
    } else {
        (Arc::from(models::build(&spec)?), None)
    };
    super::print_notes(model.notes());
    let defaults = ServerSettings::default();
    let workers = args.workers.unwrap_or(defaults.workers);
    let settings = ServerSettings {
        bind: args.bind,
        port: args.port,
        workers,
        queue: args
            .queue
            .unwrap_or(workers.saturating_mul(QUEUE_PER_WORKER)),
        max_body_bytes: args.max_body_bytes,
        max_seconds: args.max_seconds,
    };
    let maps = served_maps(&spec.name, model, pde);
    let described: Vec<String> = maps
        .iter()
        .map(|(name, m)| format!("{name} ({} -> {})", m.input_size(), m.output_size()))
        .collect();
    let server = Server::start(maps, &settings)?;
    let addr = server.addr();
    println!(
        "serving {} at http://{addr} (UM-Bridge 1.0; {} workers, a queue of {}, bodies up to \
         {} bytes, {} s per evaluation from arrival)",
        described.join(", "),
        settings.workers,
        settings.queue,
        settings.max_body_bytes,
        settings.max_seconds
    );
    if !addr.ip().is_loopback() {
        eprintln!(
            "warning: listening on {addr}, reachable from other machines: anyone who can \
             reach it can evaluate the model (there is no authentication)"
        );
    }
    let mut signals = Signals::new([SIGINT, SIGTERM]).map_err(|e| {
        Error::invalid(format!(
            "cannot install the handlers of Ctrl-C and SIGTERM: {e}"
        ))
    })?;
    if let Some(file) = &args.url_file {
        write_url(file, addr)?;
    }
    println!("stop with Ctrl-C");
    // Ctrl-C or SIGTERM (a service manager's stop); the iterator ends only with the process.
    let _ = signals.forever().next();
    if let Some(file) = &args.url_file {
        let _ = std::fs::remove_file(file);
    }
    server.stop();
    println!("stopped");
    Ok(0)
}

/// Writes `http://HOST:PORT` of a server listening at `addr` to `file`, whole: a temporary file
/// renamed over it, so a reader never sees half a URL. An unspecified address (0.0.0.0) is
/// written as this machine's host name, which the other machines of a cluster can reach.
fn write_url(file: &Path, addr: SocketAddr) -> Result<()> {
    let url = if addr.ip().is_unspecified() {
        let path = Path::new("/proc/sys/kernel/hostname");
        let name = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        format!("http://{}:{}", name.trim(), addr.port())
    } else {
        format!("http://{addr}")
    };
    let mut partial = file.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, format!("{url}\n")).map_err(|e| Error::io(&partial, e))?;
    std::fs::rename(&partial, file).map_err(|e| Error::io(file, e))
}
