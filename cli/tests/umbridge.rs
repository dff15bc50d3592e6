//! UM-Bridge end to end, on loopback only: `shmc sample --model umbridge` against a real
//! UM-Bridge server (the umbridge Python package's, serving the banana), `shmc serve` against
//! the umbridge Python client, bad requests and faults, and every method on a served model.
//!
//! The Python parts need python3 with the umbridge package (`.ci/run` installs it): without
//! them a test says what is missing and passes, except under `CI=true`, where it fails.

mod binary;
use binary::{shmc, text};

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use shmc::Model;
use shmc::core::Potential;
use shmc::diagnostics::{Draws, mcse_mean};
use shmc::models::banana::Banana;
use shmc::models::elliptic_pde::{EllipticPde, PdeSettings};
use shmc::models::umbridge::{GradientRoute, Likelihood, ServedPosterior, ServedSettings};
use shmc::output::read_stan_csv;
use shmc::sampler::{DrawSink, NullSink, SampleConfig, sample};
use shmc::serve::served::served_maps;
use shmc::serve::server::{Server, ServerSettings};
use shmc::umbridge::client::Patience;

/// A child process, killed and reaped when dropped: a failed assertion leaves no server behind.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/umbridge")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = binary::temp_dir("umbridge", name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether python3 with the umbridge package is here. Without it the test prints what is
/// missing and is skipped, unless `CI=true`: CI installs it, so there its absence fails.
fn python_umbridge() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import umbridge"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        let what = "python3 with the umbridge package (python3 -m pip install umbridge)";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{what} is missing, and CI needs it"
        );
        eprintln!("skipped: {what} is missing");
    }
    found
}

/// Starts `command` with stdout piped and returns it with the first stdout line for which
/// `found` says something, reading at most 50 lines.
fn start_and_read<T>(mut command: Command, found: impl Fn(&str) -> Option<T>) -> (Running, T) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the server starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut running = Running(child);
    for _ in 0..50 {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(value) = found(&line) {
                    // Keep draining stdout so that the server never blocks on a full pipe.
                    std::thread::spawn(move || lines.for_each(drop));
                    return (running, value);
                }
            }
            _ => break,
        }
    }
    let mut stderr = String::new();
    let _ = running.0.kill();
    let _ = running.0.stderr.take().unwrap().read_to_string(&mut stderr);
    panic!("the server did not say where it listens: {stderr}");
}

/// `shmc serve ARGS --port 0`, and its URL.
fn shmc_serve(args: &[&str]) -> (Running, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shmc"));
    command.arg("serve").args(args).args(["--port", "0"]);
    start_and_read(command, |line| {
        let start = line.find("http://")?;
        let url = line[start..].split_whitespace().next()?;
        Some(url.to_string())
    })
}

/// The umbridge package's server with the banana on `y`, supporting `support`; its URL.
fn python_banana(y: &[f64], support: &str, dir: &Path) -> (Running, String) {
    let data = dir.join(format!("y-{support}.json"));
    std::fs::write(&data, serde_json::to_string(y).unwrap()).unwrap();
    let mut command = Command::new("python3");
    command
        .arg(scripts().join("banana_server.py"))
        .arg(&data)
        .args(["--support", support]);
    start_and_read(command, |line| {
        let port: u16 = line.trim().parse().ok()?;
        Some(format!("http://127.0.0.1:{port}"))
    })
}

/// Banana data: any will do, they only have to be the same on both sides.
fn banana_data() -> Vec<f64> {
    (0..100)
        .map(|i| 1.0 + 2.0 * ((i as f64) * 0.77).sin())
        .collect()
}

/// Per chain, the kept draws of `column` in the CSV files `dir/MODEL-k.csv`.
fn csv_column(dir: &Path, model: &str, chains: usize, column: &str) -> Vec<Vec<f64>> {
    (1..=chains)
        .map(|k| {
            let csv = read_stan_csv(&dir.join(format!("{model}-{k}.csv"))).unwrap();
            csv.column(column).unwrap().to_vec()
        })
        .collect()
}

/// The mean of the pooled chains and its MCSE.
fn mean_and_mcse(chains: &[Vec<f64>]) -> (f64, f64) {
    let draws = Draws::new(chains).unwrap();
    let values = draws.values();
    (
        values.iter().sum::<f64>() / values.len() as f64,
        mcse_mean(&draws),
    )
}

fn squares(chains: &[Vec<f64>]) -> Vec<Vec<f64>> {
    chains
        .iter()
        .map(|c| c.iter().map(|x| x * x).collect())
        .collect()
}

#[test]
fn python_served_banana_gives_the_in_process_moments_with_hmc_and_rns_hmc() {
    if !python_umbridge() {
        return;
    }
    let dir = temp_dir("python-banana");
    let y = banana_data();
    let (_server, url) = python_banana(&y, "gradient", &dir);

    // The in-process reference: longer, so that its MCSE is the smaller one.
    let banana = Banana::new(&y).unwrap();
    let config = SampleConfig {
        chains: 4,
        warmup: 500,
        draws: 2000,
        seed: 21,
        ..SampleConfig::default()
    };
    let sinks: Vec<Box<dyn DrawSink>> = (0..4).map(|_| Box::new(NullSink) as _).collect();
    let reference = sample(&banana, &config, sinks, &|_, _| {}, None).unwrap();
    let in_process: Vec<Vec<Vec<f64>>> = (0..2)
        .map(|p| reference.series(p).iter().map(|s| s.to_vec()).collect())
        .collect();

    for (method, extra) in [
        ("hmc", vec![]),
        ("rns-hmc", vec!["--hidden", "200", "--train-after", "60"]),
    ] {
        let out_dir = dir.join(method);
        let mut args = vec![
            "sample",
            "--model",
            "umbridge",
            "--url",
            &url,
            "--umbridge-model",
            "banana",
            "--umbridge-output",
            "log-density",
            "--method",
            method,
            "--chains",
            "2",
            "--warmup",
            "300",
            "--draws",
            "600",
            "--steps",
            "10",
            "--seed",
            "5",
            "--quiet",
            "--output",
            out_dir.to_str().unwrap(),
        ];
        args.extend(extra);
        let out = shmc(&args);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{method}: {}", text(&out.stderr));
        assert!(
            stdout.contains("gradient by /Gradient")
                && stdout.contains("served Evaluate calls")
                && stdout.contains("per effective sample"),
            "{method}: {stdout}"
        );
        let work = stdout
            .lines()
            .find(|l| l.starts_with("exact model work"))
            .unwrap_or_default();
        eprintln!("{method}: {work}");
        for (p, reference) in in_process.iter().enumerate() {
            let served = csv_column(&out_dir, "umbridge", 2, &format!("theta.{}", p + 1));
            for (what, a, b) in [
                ("mean", served.clone(), reference.clone()),
                ("second moment", squares(&served), squares(reference)),
            ] {
                let ((ma, sa), (mb, sb)) = (mean_and_mcse(&a), mean_and_mcse(&b));
                let tolerance = 4.0 * (sa * sa + sb * sb).sqrt();
                assert!(
                    (ma - mb).abs() < tolerance,
                    "{method}, theta.{}: {what} {ma} served, {mb} in process, 4 MCSE {tolerance}",
                    p + 1
                );
            }
        }
    }
}

#[test]
fn without_gradient_calls_the_gradient_comes_from_jacobian_actions_or_differences() {
    if !python_umbridge() {
        return;
    }
    let dir = temp_dir("routes");
    let y = banana_data();
    let banana = Banana::new(&y).unwrap();
    for (support, route, tolerance) in [
        ("jacobian", GradientRoute::ApplyJacobian, 1e-12),
        ("evaluate", GradientRoute::FiniteDifferences, 1e-6),
    ] {
        let (_server, url) = python_banana(&y, support, &dir);
        let served = ServedPosterior::connect(ServedSettings {
            url,
            model: None,
            likelihood: Likelihood::LogDensity,
            patience: Patience::default(),
            config: serde_json::json!({}),
            memory_limit: u64::MAX,
        })
        .unwrap();
        assert_eq!(served.gradient_route(), route);
        let note = served.notes().join(" ");
        assert_eq!(
            note.contains("FINITE DIFFERENCES"),
            route == GradientRoute::FiniteDifferences,
            "{note}"
        );
        for q in [[0.3, -0.8], [-1.2, 0.4]] {
            let (mut g, mut expected) = ([0.0; 2], [0.0; 2]);
            let u = served.value_and_gradient(&q, &mut g);
            let v = banana.value_and_gradient(&q, &mut expected);
            // U up to the constant the sufficient statistics drop (exact in both).
            assert!((u - v).abs() <= 1e-12 * v.abs(), "{support}: U {u} vs {v}");
            for i in 0..2 {
                assert!(
                    (g[i] - expected[i]).abs() <= tolerance * expected[i].abs().max(1.0),
                    "{support}: gradient {g:?} vs {expected:?}"
                );
            }
        }
        let work = served.work();
        let calls = |name: &str| work.iter().find(|(n, _)| *n == name).unwrap().1;
        let (jacobian, evaluations) = (
            calls("served ApplyJacobian calls"),
            calls("served Evaluate calls"),
        );
        match route {
            GradientRoute::ApplyJacobian => assert_eq!((evaluations, jacobian), (2, 4)),
            _ => assert_eq!((evaluations, jacobian), (2 + 2 * 4, 0)),
        }
    }
}

/// The umbridge Python client's view of model `name` at `url`.
fn python_client(
    url: &str,
    name: &str,
    points: &[Vec<f64>],
    sens: &[f64],
    vec: &[f64],
) -> serde_json::Value {
    let dir = temp_dir(&format!("client-{name}"));
    let queries = dir.join("queries.json");
    let query = serde_json::json!({"model": name, "points": points, "sens": sens, "vec": vec});
    std::fs::write(&queries, query.to_string()).unwrap();
    let out = Command::new("python3")
        .arg(scripts().join("check_client.py"))
        .arg(url)
        .arg(&queries)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn numbers(value: &serde_json::Value) -> Vec<f64> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

#[test]
fn shmc_serve_gives_the_umbridge_python_client_the_in_process_values() {
    if !python_umbridge() {
        return;
    }
    // The banana's log-density.
    let (_banana_server, url) = shmc_serve(&["--model", "banana"]);
    let banana = Banana::simulate(100, 1).unwrap();
    let points = vec![vec![0.3, -0.7], vec![-1.5, 1.25], vec![2.0, 0.0]];
    let answer = python_client(&url, "banana", &points, &[1.0], &[0.5, -1.5]);
    assert_eq!(answer["input_sizes"], serde_json::json!([2]));
    assert_eq!(answer["output_sizes"], serde_json::json!([1]));
    assert_eq!(answer["gradient"], true);
    for (k, q) in points.iter().enumerate() {
        let mut g = [0.0; 2];
        banana.value_and_gradient(q, &mut g);
        assert_eq!(numbers(&answer["outputs"][k]), [-banana.value(q)]);
        assert_eq!(numbers(&answer["gradients"][k]), [-g[0], -g[1]]);
        assert_eq!(
            numbers(&answer["jacobian_actions"][k]),
            [-g[0] * 0.5 + -g[1] * -1.5]
        );
    }

    // The PDE model's posterior and its forward map.
    let settings = PdeSettings {
        mesh: 10,
        modes: 4,
        prior_sd: 0.5,
        data_seed: 1,
    };
    let (_pde_server, url) =
        shmc_serve(&["--model", "elliptic-pde", "--mesh", "10", "--kl-modes", "4"]);
    let pde = EllipticPde::simulate(settings).unwrap();
    let points = vec![vec![0.1, -0.2, 0.3, 0.05], vec![-0.4, 0.0, 0.2, 0.6]];
    let answer = python_client(&url, "elliptic-pde", &points, &[1.0], &[1.0, 0.0, 0.0, 0.0]);
    for (k, q) in points.iter().enumerate() {
        let mut g = [0.0; 4];
        pde.value_and_gradient(q, &mut g);
        assert_eq!(numbers(&answer["outputs"][k]), [-pde.value(q)]);
        assert_eq!(
            numbers(&answer["gradients"][k]),
            g.iter().map(|v| -v).collect::<Vec<_>>()
        );
    }
    let m = pde.observation_count();
    let sens: Vec<f64> = (0..m).map(|j| ((j as f64) * 0.3).cos()).collect();
    let direction = [0.5, -0.25, 1.0, 0.0];
    let answer = python_client(&url, "elliptic-pde-forward", &points, &sens, &direction);
    assert_eq!(answer["output_sizes"], serde_json::json!([m]));
    for (k, q) in points.iter().enumerate() {
        assert_eq!(numbers(&answer["outputs"][k]), pde.forward(q).unwrap());
        assert_eq!(
            numbers(&answer["gradients"][k]),
            pde.forward_gradient(q, &sens).unwrap()
        );
        assert_eq!(
            numbers(&answer["jacobian_actions"][k]),
            pde.forward_jacobian_action(q, &direction).unwrap()
        );
    }
}

/// An HTTP agent that reports error statuses instead of failing on them.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// POSTs `body` to `url/endpoint`: the status and the answer.
fn post(url: &str, endpoint: &str, body: &[u8]) -> (u16, String) {
    match agent().post(format!("{url}{endpoint}")).send(body) {
        Ok(mut answer) => {
            let status = answer.status().as_u16();
            (
                status,
                answer.body_mut().read_to_string().unwrap_or_default(),
            )
        }
        Err(e) => panic!("{endpoint}: no answer: {e}"),
    }
}

#[test]
fn bad_requests_get_clear_4xx_answers_and_the_server_serves_on() {
    let (_server, url) = shmc_serve(&[
        "--model",
        "banana",
        "--max-body-bytes",
        "2000",
        "--workers",
        "1",
    ]);
    let banana = Banana::simulate(100, 1).unwrap();
    let good = br#"{"name": "banana", "input": [[0.5, 0.5]], "config": {}}"#;
    let expected = serde_json::json!({"output": [[-banana.value(&[0.5, 0.5])]]}).to_string();
    assert_eq!(post(&url, "/Evaluate", good), (200, expected.clone()));

    let padded = format!(
        r#"{{"name": "banana", "input": [[0.5, 0.5]], "pad": "{}"}}"#,
        "x".repeat(5000)
    );
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("/Evaluate", padded.into_bytes(), 413, "limit of 2000 bytes"),
        (
            "/Evaluate",
            b"{\"name\": \"banana\", \"input\": [[0.5".to_vec(),
            400,
            "malformed request",
        ),
        (
            "/Evaluate",
            br#"{"name": "banana", "input": [[1, 2, 3]]}"#.to_vec(),
            400,
            "has 3 entries, the model expects 2",
        ),
        (
            "/Evaluate",
            br#"{"name": "banana", "input": [[NaN, 1]]}"#.to_vec(),
            400,
            "NaN and Infinity",
        ),
        (
            "/Evaluate",
            br#"{"name": "banana", "input": [[1e999, 1]]}"#.to_vec(),
            400,
            "out of range",
        ),
        (
            "/Evaluate",
            br#"{"name": "nope", "input": [[1, 1]]}"#.to_vec(),
            400,
            "ModelNotFound",
        ),
        (
            "/Gradient",
            br#"{"name": "banana", "outWrt": 0, "inWrt": 0, "input": [[1, 1]], "sens": [1, 2]}"#
                .to_vec(),
            400,
            "the sens has 2 entries",
        ),
        (
            "/ApplyHessian",
            br#"{"name": "banana"}"#.to_vec(),
            400,
            "UnsupportedFeature",
        ),
        ("/../../etc/passwd", b"{}".to_vec(), 404, "no endpoint"),
    ];
    for (endpoint, body, status, says) in cases {
        let (got, answer) = post(&url, endpoint, &body);
        assert_eq!(got, status, "{endpoint}: {answer}");
        assert!(
            answer.contains(says) && answer.starts_with(r#"{"error":{"type":"#),
            "{endpoint}: {answer}"
        );
    }
    let (status, _) = agent()
        .get(format!("{url}/Evaluate"))
        .call()
        .map(|a| (a.status().as_u16(), ()))
        .unwrap();
    assert_eq!(status, 405);

    // A flood: 48 requests at once against one worker. Each is answered, with the value or
    // with "busy"; none hangs or kills the server.
    let start = Arc::new(Barrier::new(48));
    let answers: Vec<(u16, String)> = (0..48)
        .map(|_| {
            let (url, start) = (url.clone(), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                post(&url, "/Evaluate", good)
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    for (status, answer) in &answers {
        assert!(
            (*status == 200 && *answer == expected) || (*status == 503 && answer.contains("Busy")),
            "{status}: {answer}"
        );
    }
    assert_eq!(post(&url, "/Evaluate", good), (200, expected));
}

/// Polls `done` every 50 ms for at most `limit`; panics with `what` if it never holds.
fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kept draws in a chain's CSV file so far (rows that are not comments or the header).
fn rows(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| {
            t.lines()
                .filter(|l| !l.starts_with('#'))
                .count()
                .saturating_sub(1)
        })
        .unwrap_or(0)
}

/// A 2-chain run against `url` (one or several instances) that would go on for a million
/// draws, its CSVs in `dir`, once both chains have written 100 draws.
fn start_endless_run(url: &str, dir: &Path) -> Running {
    let sampler = Command::new(env!("CARGO_BIN_EXE_shmc"))
        .args([
            "sample",
            "--model",
            "umbridge",
            "--url",
            url,
            "--chains",
            "2",
            "--warmup",
            "50",
            "--draws",
            "1000000",
            "--retries",
            "1",
            "--quiet",
            "--output",
            dir.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sampler = Running(sampler);
    let files = [dir.join("umbridge-1.csv"), dir.join("umbridge-2.csv")];
    wait_for("100 draws per chain", Duration::from_secs(120), || {
        files.iter().all(|f| rows(f) >= 100)
    });
    sampler
}

#[test]
fn a_server_that_dies_mid_run_stops_it_cleanly_with_the_draws_so_far() {
    let dir = temp_dir("dies");
    let (server, url) = shmc_serve(&["--model", "banana"]);
    let mut sampler = start_endless_run(&url, &dir);
    drop(server);
    let mut status = None;
    wait_for("the run to stop", Duration::from_secs(60), || {
        status = sampler.0.try_wait().unwrap();
        status.is_some()
    });
    let mut stderr = String::new();
    sampler
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.unwrap().code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the model failed during the run, so every chain stopped")
            && stderr.contains("cannot reach the server")
            && stderr.contains("gave up after 2 attempts")
            && stderr.contains("keep the draws made before"),
        "{stderr}"
    );
    for file in [dir.join("umbridge-1.csv"), dir.join("umbridge-2.csv")] {
        let csv = read_stan_csv(&file).unwrap();
        let kept = csv.column("theta.1").unwrap();
        assert!(kept.len() >= 100 && kept.iter().all(|x| x.is_finite()));
    }
}

/// A hand-made server that speaks UM-Bridge for a one-input, one-output model of 2 inputs and
/// answers Evaluate with `evaluate` (status, body) after `delay`, counting the calls; it lives
/// as long as the test process. Returns its URL and the count.
fn fake_server(delay: Duration, evaluate: (u16, &'static str)) -> (String, Arc<AtomicUsize>) {
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
    let url = format!("http://{}", server.server_addr().to_ip().unwrap());
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    std::thread::spawn(move || {
        while let Ok(request) = server.recv() {
            let counted = Arc::clone(&counted);
            std::thread::spawn(move || {
                let (status, body) = match request.url() {
                    "/Info" => (200, r#"{"protocolVersion": 1.0, "models": ["m"]}"#),
                    "/ModelInfo" => (200, r#"{"support": {"Evaluate": true}}"#),
                    "/InputSizes" => (200, r#"{"inputSizes": [2]}"#),
                    "/OutputSizes" => (200, r#"{"outputSizes": [1]}"#),
                    _ => {
                        counted.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(delay);
                        evaluate
                    }
                };
                let _ = request
                    .respond(tiny_http::Response::from_string(body).with_status_code(status));
            });
        }
    });
    (url, calls)
}

#[test]
fn a_server_too_slow_is_retried_then_named() {
    let (url, calls) = fake_server(Duration::from_secs(5), (200, r#"{"output": [[1.0]]}"#));
    let dir = temp_dir("slow");
    let out = shmc(&[
        "sample",
        "--model",
        "umbridge",
        "--url",
        &url,
        "--chains",
        "1",
        "--timeout",
        "0.5",
        "--retries",
        "1",
        "--quiet",
        "--output",
        dir.to_str().unwrap(),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "/Evaluate: no complete answer within the 0.5 s timeout (gave up after 2 attempts)"
        ),
        "{stderr}"
    );
    // The first attempt and one retry, both of which reached the server.
    wait_for("the retry to arrive", Duration::from_secs(5), || {
        calls.load(Ordering::SeqCst) >= 2
    });
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[test]
fn garbage_answers_are_clear_errors_naming_the_endpoint() {
    for (answer, says) in [
        ((200, "<html>oops</html>"), "/Evaluate: a malformed answer"),
        (
            (200, r#"{"output": [[1.0, 2.0]]}"#),
            "/Evaluate: answered 2 numbers where 1 were expected",
        ),
        (
            (200, r#"{"output": [[nan]]}"#),
            "/Evaluate: a non-finite number (NaN, Infinity or null)",
        ),
        (
            (200, r#"{"output": [1.0]}"#),
            "/Evaluate: a malformed answer",
        ),
        (
            (418, "teapot"),
            "/Evaluate: the server refused (HTTP 418): \"teapot\"",
        ),
    ] {
        let (url, _) = fake_server(Duration::ZERO, answer);
        let dir = temp_dir("garbage");
        let out = shmc(&[
            "sample",
            "--model",
            "umbridge",
            "--url",
            &url,
            "--chains",
            "1",
            "--quiet",
            "--output",
            dir.to_str().unwrap(),
        ]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.starts_with("error: the model failed during the run")
                && stderr.contains(&format!("UM-Bridge server {url}, {says}")),
            "{says}: {stderr}"
        );
    }
}

#[test]
fn chains_keep_their_calls_in_flight_at_once() {
    // Every call takes 20 ms; 4 chains on however many cores should all be waiting at once.
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
    let url = format!("http://{}", server.server_addr().to_ip().unwrap());
    let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    {
        let (now, most) = (Arc::clone(&now), Arc::clone(&most));
        std::thread::spawn(move || {
            while let Ok(request) = server.recv() {
                let (now, most) = (Arc::clone(&now), Arc::clone(&most));
                std::thread::spawn(move || {
                    let body = match request.url() {
                        "/Info" => r#"{"protocolVersion": 1.0, "models": ["m"]}"#,
                        "/ModelInfo" => r#"{"support": {"Evaluate": true, "Gradient": true}}"#,
                        "/InputSizes" => r#"{"inputSizes": [1]}"#,
                        "/OutputSizes" => r#"{"outputSizes": [1]}"#,
                        "/Evaluate" => r#"{"output": [[-0.5]]}"#,
                        _ => r#"{"output": [0.0]}"#,
                    };
                    let in_flight = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(in_flight, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(20));
                    now.fetch_sub(1, Ordering::SeqCst);
                    let _ = request.respond(tiny_http::Response::from_string(body));
                });
            }
        });
    }
    let dir = temp_dir("in-flight");
    let out = shmc(&[
        "sample",
        "--model",
        "umbridge",
        "--url",
        &url,
        "--chains",
        "4",
        "--warmup",
        "10",
        "--draws",
        "10",
        "--steps",
        "2",
        "--quiet",
        "--output",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(most.load(Ordering::SeqCst), 4);
}

#[test]
fn every_method_on_a_served_banana_draws_what_the_in_process_banana_draws() {
    // shmc serve answers with the in-process values bit for bit, so the same seed makes the
    // same draws: whatever a method does with the model, it does the same over HTTP.
    let (_server, url) = shmc_serve(&["--model", "banana"]);
    let common = [
        "--chains", "1", "--warmup", "150", "--draws", "150", "--seed", "3", "--quiet",
    ];
    for (method, extra) in [
        ("hmc", vec![]),
        ("rns-hmc", vec!["--hidden", "100"]),
        ("arns-hmc", vec!["--hidden", "100", "--start-after", "60"]),
        ("vhmc", vec!["--hidden", "100"]),
        ("grid-hmc", vec!["--cell", "0.25", "--domain=-3:3,-3:3"]),
        ("sg-hmc", vec!["--level", "4"]),
    ] {
        let dirs = [
            temp_dir(&format!("{method}-local")),
            temp_dir(&format!("{method}-served")),
        ];
        let mut draws = Vec::new();
        for (dir, model) in dirs
            .iter()
            .zip([["--model", "banana"], ["--model", "umbridge"]])
        {
            let mut args = vec![
                "sample",
                "--method",
                method,
                "--output",
                dir.to_str().unwrap(),
            ];
            args.extend(model);
            if model[1] == "umbridge" {
                args.extend(["--url", url.as_str()]);
            }
            args.extend(common);
            args.extend(&extra);
            let out = shmc(&args);
            assert!(
                out.status.success(),
                "{method} {}: {}",
                model[1],
                text(&out.stderr)
            );
            let stdout = text(&out.stdout);
            assert_eq!(
                model[1] == "umbridge",
                stdout.contains("served Evaluate calls"),
                "{method}: {stdout}"
            );
            let csv = read_stan_csv(&dir.join(format!("{}-1.csv", model[1]))).unwrap();
            let names = if model[1] == "banana" {
                ["beta.1", "beta.2"]
            } else {
                ["theta.1", "theta.2"]
            };
            draws.push(names.map(|n| csv.column(n).unwrap().to_vec()));
        }
        assert_eq!(draws[0][0].len(), 150, "{method}");
        assert_eq!(
            draws[0], draws[1],
            "{method}: served and in-process draws differ"
        );
    }
}

#[test]
fn a_served_forward_model_with_gaussian_noise_is_the_pde_posterior() {
    let settings = PdeSettings {
        mesh: 10,
        modes: 4,
        prior_sd: 0.5,
        data_seed: 2,
    };
    let pde = Arc::new(EllipticPde::simulate(settings).unwrap());
    let server = Server::start(
        served_maps("elliptic-pde", pde.clone(), Some(pde.clone())),
        &ServerSettings {
            port: 0,
            ..ServerSettings::default()
        },
    )
    .unwrap();
    let served = ServedPosterior::connect(ServedSettings {
        url: format!("http://{}", server.addr()),
        model: Some("elliptic-pde-forward".into()),
        likelihood: Likelihood::Gaussian {
            data: pde.observations().to_vec(),
            noise_sd: EllipticPde::NOISE_SD,
            prior_mean: 0.0,
            prior_sd: 0.5,
        },
        patience: Patience::default(),
        config: serde_json::json!({}),
        memory_limit: u64::MAX,
    })
    .unwrap();
    assert_eq!(served.gradient_route(), GradientRoute::Gradient);
    for q in [[0.1, -0.2, 0.3, 0.05], [-0.4, 0.0, 0.2, 0.6]] {
        let (mut g, mut expected) = ([0.0; 4], [0.0; 4]);
        let u = served.value_and_gradient(&q, &mut g);
        let v = pde.value_and_gradient(&q, &mut expected);
        assert!((u - v).abs() <= 1e-12 * v, "U {u} vs {v}");
        let scale = expected.iter().fold(0.0f64, |a, x| a.max(x.abs()));
        for i in 0..4 {
            assert!(
                (g[i] - expected[i]).abs() <= 1e-10 * scale,
                "gradient {g:?} vs {expected:?}"
            );
        }
    }
    assert!(served.failure().is_none());
    // A wrong number of observations is refused at connection, naming the setting.
    let err = ServedPosterior::connect(ServedSettings {
        url: format!("http://{}", server.addr()),
        model: Some("elliptic-pde-forward".into()),
        likelihood: Likelihood::Gaussian {
            data: vec![0.0; 3],
            noise_sd: 0.1,
            prior_mean: 0.0,
            prior_sd: 0.5,
        },
        patience: Patience::default(),
        config: serde_json::json!({}),
        memory_limit: u64::MAX,
    })
    .err()
    .unwrap()
    .to_string();
    assert_eq!(
        err,
        "setting `data` holds 3 observations, but model \"elliptic-pde-forward\" outputs 121 numbers"
    );
}

/// Kept draws of every parameter of every chain of `config` on the banana served at `url`,
/// and the Evaluate calls each instance answered.
fn banana_draws(url: &str, config: &SampleConfig) -> (Vec<Vec<Vec<f64>>>, Vec<u64>) {
    let served = ServedPosterior::connect(ServedSettings {
        url: url.to_string(),
        model: None,
        likelihood: Likelihood::LogDensity,
        patience: Patience::default(),
        config: serde_json::json!({}),
        memory_limit: u64::MAX,
    })
    .unwrap();
    let sinks: Vec<Box<dyn DrawSink>> = (0..config.chains)
        .map(|_| Box::new(NullSink) as _)
        .collect();
    let run = sample(&served, config, sinks, &|_, _| {}, None).unwrap();
    assert!(served.failure().is_none());
    let draws = (0..2)
        .map(|p| run.series(p).iter().map(|s| s.to_vec()).collect())
        .collect();
    let per_instance: Vec<u64> = served
        .evaluations_per_instance()
        .iter()
        .map(|(_, n)| *n)
        .collect();
    let work = served.work();
    let evaluations = work
        .iter()
        .find(|(n, _)| *n == "served Evaluate calls")
        .unwrap()
        .1;
    assert_eq!(per_instance.iter().sum::<u64>(), evaluations);
    (draws, per_instance)
}

#[test]
fn two_shmc_serve_processes_share_a_run_and_give_the_draws_of_one() {
    // Each process evaluates the same banana bit for bit, so where a call goes cannot change
    // a draw; what the pool changes is only which process answered.
    let (_a, a) = shmc_serve(&["--model", "banana", "--workers", "1"]);
    let (_b, b) = shmc_serve(&["--model", "banana", "--workers", "1"]);
    let config = SampleConfig {
        chains: 4,
        warmup: 100,
        draws: 200,
        seed: 8,
        ..SampleConfig::default()
    };
    let (one, alone) = banana_draws(&a, &config);
    let (two, shared) = banana_draws(&format!("{a}, {b}"), &config);
    assert_eq!(alone.len(), 1);
    assert_eq!(one[0][0].len(), 200);
    assert!(one == two, "draws differ between one instance and two");
    // Both processes answered a real share (ties alone would give each about half).
    let total: u64 = shared.iter().sum();
    assert_eq!(total, alone[0]);
    assert!(
        shared.iter().all(|&n| n >= total / 5),
        "Evaluate calls per instance {shared:?}"
    );
}

#[test]
fn instances_of_different_models_are_refused_naming_the_one_that_differs() {
    let (_banana, banana) = shmc_serve(&["--model", "banana", "--workers", "1"]);
    let (_gaussian, gaussian) = shmc_serve(&["--model", "gaussian-32", "--workers", "1"]);
    let pde = |modes: &'static str| {
        shmc_serve(&[
            "--model",
            "elliptic-pde",
            "--mesh",
            "4",
            "--kl-modes",
            modes,
            "--workers",
            "1",
        ])
    };
    let ((_three, three), (_four, four)) = (pde("3"), pde("4"));
    for (urls, model, says) in [
        (
            format!("{banana},{gaussian}"),
            None,
            format!(
                "UM-Bridge server {gaussian}, /Info: serves no model named \"banana\"; it serves: \
                 gaussian-32"
            ),
        ),
        (
            format!("{three},{four}"),
            Some("elliptic-pde"),
            format!(
                "UM-Bridge server {four}, /InputSizes: model \"elliptic-pde\" has input size 4 \
                 where {three} has input size 3: every URL must serve the same model"
            ),
        ),
    ] {
        let dir = temp_dir("mismatch");
        let mut args = vec![
            "sample",
            "--model",
            "umbridge",
            "--url",
            &urls,
            "--quiet",
            "--output",
            dir.to_str().unwrap(),
        ];
        if let Some(model) = model {
            args.extend(["--umbridge-model", model]);
        }
        let out = shmc(&args);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{urls}: {stderr}");
        assert_eq!(stderr.trim_end(), format!("error: {says}"), "{urls}");
    }
}

/// A batch runs a thread per instance, so the instances' count is sized against the memory
/// limit (each thread's stack) before any is started: three of one server under 5 MB.
#[test]
fn more_instances_than_the_memory_limit_has_thread_stacks_for_are_refused_naming_url() {
    let (_server, url) = shmc_serve(&["--model", "banana", "--workers", "1"]);
    let urls = format!("{url},{url},{url}");
    let dir = temp_dir("instances-memory");
    let out = shmc(&[
        "sample",
        "--model",
        "umbridge",
        "--url",
        &urls,
        "--memory-limit",
        "5000000",
        "--quiet",
        "--output",
        dir.to_str().unwrap(),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(
            "error: the stacks of 3 threads, one per instance of model \"banana\" would need \
             6291456 bytes"
        ) && stderr
            .trim_end()
            .ends_with("raise --memory-limit or change --url"),
        "{stderr}"
    );
}

#[test]
fn an_instance_that_dies_mid_run_stops_it_naming_that_instance() {
    let dir = temp_dir("instance-dies");
    let (a_server, a) = shmc_serve(&["--model", "banana", "--workers", "1"]);
    let (b_server, b) = shmc_serve(&["--model", "banana", "--workers", "1"]);
    let urls = format!("{a},{b}");
    let mut sampler = start_endless_run(&urls, &dir);
    drop(b_server);
    let mut status = None;
    wait_for("the run to stop", Duration::from_secs(60), || {
        status = sampler.0.try_wait().unwrap();
        status.is_some()
    });
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let child = &mut sampler.0;
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.unwrap().code(), Some(1), "{stderr}");
    assert!(
        stdout.contains(&format!("at 2 instances ({a}, {b},")),
        "{stdout}"
    );
    assert!(
        stderr.contains(&format!("UM-Bridge server {b}, /"))
            && stderr.contains("cannot reach the server")
            && !stderr.contains(&format!("UM-Bridge server {a}")),
        "{stderr}"
    );
    drop(a_server);
}
