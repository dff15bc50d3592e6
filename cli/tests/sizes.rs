//! Sizes a user (or a server) drives that no machine could hold: each is refused before anything
//! of that size is allocated, in one line naming the option to change, where the allocator
//! used to abort the process (exit 134, "memory allocation of … bytes failed").

mod binary;
use binary::shmc;

use std::path::PathBuf;

fn temp_dir(name: &str) -> PathBuf {
    let dir = binary::temp_dir("sizes", name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `shmc sample ARGS --output DIR/out --quiet` and asserts one line on stderr, exit 1,
/// containing each of `needles`, and no output folder left behind.
fn assert_refused(name: &str, args: &[&str], needles: &[&str]) {
    let dir = temp_dir(name);
    let out_dir = dir.join("out");
    let mut full = vec!["sample"];
    full.extend(args);
    full.extend(["--quiet", "--output", out_dir.to_str().unwrap()]);
    let out = shmc(&full);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{full:?}: {err}");
    assert!(err.starts_with("error: "), "{full:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for needle in needles {
        assert!(err.contains(needle), "{full:?}: {needle:?} not in {err}");
    }
    assert!(!out_dir.exists(), "a refused run leaves no files");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_huge_n_is_refused_naming_n() {
    assert_refused(
        "n",
        &["--model", "banana", "--n", "100000000000"],
        &[
            "the banana's 100000000000 simulated points would need 800000000000 bytes",
            "raise --memory-limit or change --n",
        ],
    );
}

#[test]
fn a_huge_dimension_is_refused_naming_d() {
    assert_refused(
        "d",
        &["--model", "gaussian-32", "--d", "1000000000000"],
        &[
            "a 1000000000000-dimensional Gaussian's parameters and chain state would need",
            "raise --memory-limit or change --d",
        ],
    );
}

#[test]
fn a_huge_projection_is_refused_naming_project() {
    let dir = temp_dir("project-data");
    let csv = dir.join("small.csv");
    std::fs::write(&csv, "a,b,y\n0.1,2,1\n-0.3,1,0\n0.5,0,1\n").unwrap();
    assert_refused(
        "project",
        &[
            "--model",
            "logistic",
            "--data",
            csv.to_str().unwrap(),
            "--project",
            "1000000000000",
        ],
        &[
            "a random projection of 3 rows × 2 columns to 1000000000000 would need",
            "raise --memory-limit or change --project",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_huge_chain_count_is_refused_before_its_progress_bars() {
    assert_refused(
        "chains",
        &["--model", "banana", "--chains", "1000000000000"],
        &[
            "1000000000000 chains of 2 parameters each would need",
            "raise --memory-limit or change --chains",
        ],
    );
}

#[test]
fn a_compare_pilot_too_large_is_refused_before_the_run_naming_its_option() {
    assert_refused(
        "compare",
        &[
            "--model",
            "banana",
            "--compare",
            "hmc",
            "--compare-draws",
            "1000000000000",
        ],
        &["raise --memory-limit or change --compare-draws"],
    );
}

/// `--warmup 18000000000000000000` overflowed the warmup schedule, which then grew a list
/// until the kernel killed the process (22.5 GB). Over 4 chains its iterations are more than
/// a run's counters hold: refused at once.
#[test]
fn a_warmup_no_run_can_count_is_refused_naming_warmup() {
    assert_refused(
        "warmup",
        &[
            "--model",
            "banana",
            "--warmup",
            "18000000000000000000",
            "--draws",
            "1",
        ],
        &[
            "--warmup (18000000000000000000) with 1 draws per chain, over 4 chains, is more \
           iterations than a run can count",
        ],
    );
}

/// A UM-Bridge server that answers InputSizes with `input_sizes` (and serves one model `m`
/// otherwise, never evaluating it); it lives as long as the test process. Returns its URL.
fn server_declaring(input_sizes: &'static str) -> String {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}", server.server_addr().to_ip().unwrap());
    std::thread::spawn(move || {
        while let Ok(request) = server.recv() {
            let body = match request.url() {
                "/Info" => r#"{"protocolVersion": 1.0, "models": ["m"]}"#.to_string(),
                "/ModelInfo" => r#"{"support": {"Evaluate": true}}"#.to_string(),
                "/InputSizes" => format!(r#"{{"inputSizes": {input_sizes}}}"#),
                "/OutputSizes" => r#"{"outputSizes": [1]}"#.to_string(),
                _ => r#"{"output": [[0.0]]}"#.to_string(),
            };
            let _ = request.respond(tiny_http::Response::from_string(body));
        }
    });
    url
}

/// A remote server's word could crash the client: InputSizes [10¹²] made every chain's
/// vectors (and the parameter names) 10¹² long.
#[test]
fn a_server_declaring_a_huge_input_is_refused_naming_the_url() {
    let url = server_declaring("[1000000000000]");
    assert_refused(
        "umbridge",
        &["--model", "umbridge", "--url", &url],
        &[
            "the 1000000000000 inputs model \"m\" declares (its InputSizes) would need",
            "raise --memory-limit or change --url",
        ],
    );
    // Written as a float, the size is no count at all.
    let url = server_declaring("[1e12]");
    assert_refused(
        "umbridge-float",
        &["--model", "umbridge", "--url", &url],
        &[&format!("UM-Bridge server {url}, /InputSizes")],
    );
}
