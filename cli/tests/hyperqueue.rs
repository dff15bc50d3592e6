//! Model instances as the tasks of a real HyperQueue cluster (its Python API's server, and
//! workers in processes of their own, on this machine): `cluster/shmc_hq.py` submits
//! `shmc serve` instances, each writes its URL to a shared folder, and `shmc sample --url
//! dir:FOLDER` samples against them. Every test's name holds `hyperqueue`, so `cargo test
//! hyperqueue` runs them all.
//!
//! They need python3 with the hyperqueue package (`.ci/run` installs it): without it a test
//! says what is missing and passes, except under `CI=true`, where it fails.

mod binary;
use binary::{json_rows_without_seconds, masked_csv as masked, ranks_without_seconds, text};

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The driver in a process group of its own, the group killed and the driver reaped when
/// dropped: a failed assertion leaves no cluster behind.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill")
            .args(["-9", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.0.wait();
    }
}

/// Whether python3 with the hyperqueue package is here. Without it the test prints what is
/// missing and is skipped, unless `CI=true`: CI installs it, so there its absence fails.
fn python_hyperqueue() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import hyperqueue"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        let what = "python3 with the hyperqueue package (python3 -m pip install hyperqueue)";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{what} is missing, and CI needs it"
        );
        eprintln!("skipped: {what} is missing");
    }
    found
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = binary::temp_dir("hyperqueue", name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const SHMC: &str = env!("CARGO_BIN_EXE_shmc");

/// The driver script, `cluster/shmc_hq.py`.
fn hq_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../cluster/shmc_hq.py")
}

/// `python3 cluster/shmc_hq.py` with the driver's `options`, `instances` banana servers, and
/// `run` after `--` (a `shmc sample` of the served banana, its files in `out`).
fn driver(options: &[&str], folder: &Path, out: &Path, run: &[&str]) -> Command {
    let script = hq_script();
    let serve = format!("{SHMC} serve --model banana --workers 1");
    let mut command = Command::new("python3");
    command
        .arg(script)
        .args(options)
        .args(["--folder", folder.to_str().unwrap(), "--serve", &serve])
        .args(["--", SHMC, "sample", "--model", "umbridge", "--quiet"])
        .args(["--output", out.to_str().unwrap()])
        .args(run);
    command
}

/// The data rows of every chain's CSV in `dir` (`model-1.csv` ...): what a draw is, without
/// the header's comments and column names (the served banana names its inputs theta.N).
fn rows(dir: &Path, model: &str, chains: usize) -> Vec<Vec<String>> {
    (1..=chains)
        .map(|c| {
            let text =
                std::fs::read_to_string(dir.join(format!("{model}-{c}.csv"))).unwrap_or_default();
            text.lines()
                .filter(|l| !l.starts_with('#'))
                .skip(1)
                .map(str::to_string)
                .collect()
        })
        .collect()
}

/// The same sampler settings run in process on the built-in banana: the reference draws.
fn in_process(run: &[&str], chains: usize, name: &str) -> Vec<Vec<String>> {
    let dir = temp_dir(name);
    let out = dir.join("out");
    let mut args = vec!["sample", "--model", "banana", "--quiet", "--output"];
    args.push(out.to_str().unwrap());
    args.extend(run);
    let done = binary::shmc(&args);
    assert!(done.status.success(), "{}", text(&done.stderr));
    rows(&out, "banana", chains)
}

/// The Evaluate calls each instance answered, from the run's `model: Evaluate calls per
/// instance: URL N, URL N` line.
fn calls_per_instance(stdout: &str) -> Vec<u64> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("model: Evaluate calls per instance: "))
        .unwrap_or_else(|| panic!("no calls per instance in {stdout}"));
    line.split(", ")
        .map(|part| part.rsplit(' ').next().unwrap().parse().unwrap())
        .collect()
}

/// Waits for `child` at most `limit`, then kills it and fails; its output.
fn finish(mut child: Running, limit: Duration) -> Output {
    let start = Instant::now();
    while child.0.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < limit,
            "the driver did not end within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = child.0.wait().unwrap();
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    child
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    Output {
        status,
        stdout,
        stderr,
    }
}

fn spawn(mut command: Command) -> Running {
    Running(
        command
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3 runs"),
    )
}

const RUN: [&str; 8] = [
    "--chains", "4", "--seed", "8", "--warmup", "100", "--draws", "200",
];

#[test]
fn hyperqueue_instances_give_the_in_process_draws_and_share_the_calls() {
    if !python_hyperqueue() {
        return;
    }
    let dir = temp_dir("same-draws");
    let out = dir.join("out");
    let options = ["--instances", "2", "--local-workers", "2"];
    let run = spawn(driver(&options, &dir.join("instances"), &out, &RUN));
    let done = finish(run, Duration::from_secs(300));
    let stdout = text(&done.stdout);
    assert!(done.status.success(), "{stdout}{}", text(&done.stderr));
    assert!(
        stdout.contains("2 model instances submitted as HyperQueue job"),
        "{stdout}"
    );
    let served = rows(&out, "umbridge", 4);
    assert_eq!(served[0].len(), 200);
    assert!(served == in_process(&RUN, 4, "same-draws-reference"));
    let calls = calls_per_instance(&stdout);
    let total: u64 = calls.iter().sum();
    assert_eq!(calls.len(), 2, "{stdout}");
    assert!(calls.iter().all(|&n| n >= total / 5), "{calls:?}");
}

/// The most calls in flight at once over the instances, and the instances, from the run's
/// `model: at most K calls were in flight at once, over N instances` line.
fn peak_in_flight(stdout: &str) -> (usize, usize) {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("model: at most "))
        .unwrap_or_else(|| panic!("no calls in flight in {stdout}"));
    let numbers: Vec<usize> = line
        .split(' ')
        .filter_map(|word| word.parse().ok())
        .collect();
    (numbers[0], numbers[1])
}

/// One chain whose surrogate trains on 200 Laplace draws before it starts, and then only a few
/// exact calls: the draws are most of the run's calls.
const LAPLACE_RUN: [&str; 14] = [
    "--chains",
    "1",
    "--seed",
    "8",
    "--method",
    "rns-hmc",
    "--train-from",
    "laplace",
    "--train-states",
    "200",
    "--warmup",
    "0",
    "--draws",
    "20",
];

/// The Laplace draws (and the Hessian's columns before them), independent calls, are spread
/// over all 4 instances at once: the run names 4 calls in flight at once, where rayon's pool of
/// one thread per core had 2 on this 2-core machine (on 4 cores or more the mutant of the old
/// pool also reaches 4; the library's `the_laplace_draws_keep_every_served_instance_busy_at_once`
/// asks for more instances than cores). The draws are the in-process run's.
#[test]
fn hyperqueue_the_laplace_draws_run_on_every_instance_at_once() {
    if !python_hyperqueue() {
        return;
    }
    let dir = temp_dir("laplace-batch");
    let out = dir.join("out");
    let options = [
        "--instances",
        "4",
        "--local-workers",
        "2",
        "--worker-cpus",
        "2",
    ];
    let run = spawn(driver(&options, &dir.join("instances"), &out, &LAPLACE_RUN));
    let done = finish(run, Duration::from_secs(300));
    let stdout = text(&done.stdout);
    assert!(done.status.success(), "{stdout}{}", text(&done.stderr));
    assert_eq!(peak_in_flight(&stdout), (4, 4), "{stdout}");
    let calls = calls_per_instance(&stdout);
    assert_eq!(calls.len(), 4, "{stdout}");
    assert!(calls.iter().sum::<u64>() >= 201, "{calls:?}");
    assert!(calls.iter().all(|&n| n > 0), "{calls:?}");
    let reference = in_process(&LAPLACE_RUN, 1, "laplace-batch-reference");
    assert!(rows(&out, "umbridge", 1) == reference);
}

/// The pids of the local cluster's worker processes, as the driver lists them.
fn workers(folder: &Path) -> Vec<u32> {
    std::fs::read_to_string(folder.join("workers.txt"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

/// Whether process `pid` has a child (a worker running a task).
fn has_child(pid: u32) -> bool {
    Command::new("pgrep")
        .args(["-P", &pid.to_string()])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn hyperqueue_restarts_the_task_of_a_killed_worker_and_the_run_completes() {
    if !python_hyperqueue() {
        return;
    }
    let dir = temp_dir("killed");
    let (folder, out) = (dir.join("instances"), dir.join("out"));
    // Three workers for two instances: the killed one's task has a free worker to go to.
    let options = ["--instances", "2", "--local-workers", "3"];
    let long = [
        "--chains", "2", "--seed", "3", "--warmup", "100", "--draws", "3000",
    ];
    let run = spawn(driver(&options, &folder, &out, &long));
    let start = Instant::now();
    while rows(&out, "umbridge", 2).iter().any(|c| c.len() < 100) {
        assert!(start.elapsed() < Duration::from_secs(120), "no draws");
        std::thread::sleep(Duration::from_millis(50));
    }
    let busy = workers(&folder).into_iter().find(|&w| has_child(w));
    let busy = busy.expect("a worker runs an instance");
    // SIGKILL: the worker is lost as a node is, with no word to the server.
    let killed = Command::new("kill")
        .args(["-9", &busy.to_string()])
        .status();
    assert!(killed.unwrap().success());
    let done = finish(run, Duration::from_secs(300));
    let stdout = text(&done.stdout);
    assert!(done.status.success(), "{stdout}{}", text(&done.stderr));
    assert!(
        stdout.contains("stopped answering after")
            && stdout.contains("dropped, its calls answered by the other instances")
            && stdout.contains("is back at http://")
            && stdout.contains("(restarted by the engine)"),
        "{stdout}"
    );
    // Nothing lost: the call the dead instance dropped was answered elsewhere, so every draw
    // is the in-process run's.
    let served = rows(&out, "umbridge", 2);
    assert_eq!(served[1].len(), 3000);
    assert!(served == in_process(&long, 2, "killed-reference"));
    // The restart answered calls too: three instances in the count.
    let calls = calls_per_instance(&stdout);
    assert!(calls.len() == 3 && calls[2] > 0, "{calls:?}");
}

#[test]
fn hyperqueue_a_task_never_ready_stops_the_run_naming_it() {
    if !python_hyperqueue() {
        return;
    }
    let dir = temp_dir("never-ready");
    let folder = dir.join("instances");
    // One worker of one CPU for two one-CPU instances: the second stays queued.
    let options = [
        "--instances",
        "2",
        "--local-workers",
        "1",
        "--ready-seconds",
        "3",
    ];
    let run = spawn(driver(&options, &folder, &dir.join("out"), &RUN));
    let done = finish(run, Duration::from_secs(120));
    let stderr = text(&done.stderr);
    assert_eq!(done.status.code(), Some(1), "{stderr}");
    let url_file = folder.join("url-1.txt");
    assert_eq!(
        stderr,
        format!(
            "error: model instance 1 (HyperQueue job 1, task 1) wrote no URL to {} within 3 s: \
             it never became ready (still queued by the engine, or its server did not start: \
             see the task's stderr)\n",
            url_file.display()
        )
    );
}

#[test]
fn hyperqueue_instances_url_file_is_written_once_listening_and_removed_at_the_stop() {
    // No HyperQueue needed: this is the instance's half of the convention.
    let dir = temp_dir("url-file");
    let file = dir.join("url-0.txt");
    let serve = [
        "serve",
        "--model",
        "banana",
        "--port",
        "0",
        "--url-file",
        file.to_str().unwrap(),
    ];
    let mut command = Command::new(SHMC);
    command.args(serve).process_group(0).stdout(Stdio::null());
    let server = Running(command.spawn().unwrap());
    let start = Instant::now();
    while !file.exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "no URL file");
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = std::fs::read_to_string(&file).unwrap();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with('\n'),
        "{url:?}"
    );
    let info = ureq::get(&format!("{}/Info", url.trim())).call();
    assert_eq!(info.unwrap().status().as_u16(), 200);
    let stopped = Command::new("kill").arg(server.0.id().to_string()).status();
    assert!(stopped.unwrap().success());
    let start = Instant::now();
    while file.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the URL file stayed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // A folder that does not exist: one line naming the file, before anyone could call.
    let nowhere = dir.join("none/url-0.txt");
    let mut args = serve;
    let nowhere_text = nowhere.to_str().unwrap();
    args[6] = nowhere_text;
    let out = binary::shmc(&args);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert_eq!(
        stderr,
        format!("error: {nowhere_text}.partial: No such file or directory (os error 2)\n")
    );
}

/// `shmc_hq.py chains`: `--chains 4` as two HyperQueue tasks of two chains each, on two
/// workers of a local cluster: every chain's file is the one-process run's (paths and times
/// masked), and the summary the driver prints from the shards is that run's.
#[test]
fn hyperqueue_sharded_chains_give_the_one_process_files() {
    if !python_hyperqueue() {
        return;
    }
    let dir = temp_dir("sharded-chains");
    let (run_dir, whole) = (dir.join("run"), dir.join("whole"));
    let settings = ["--seed", "8", "--warmup", "100", "--draws", "200"];
    let command = chains_driver(&run_dir, 2, &settings);
    let done = finish(spawn(command), Duration::from_secs(300));
    let stdout = text(&done.stdout);
    assert!(done.status.success(), "{stdout}{}", text(&done.stderr));
    assert!(
        stdout.contains("4 chains submitted as HyperQueue job"),
        "{stdout}"
    );
    let whole = one_process_shards_equal(&run_dir, &whole, &settings);
    let summary = binary::shmc(&["summary", whole.to_str().unwrap()]);
    assert!(stdout.ends_with(&text(&summary.stdout)), "{stdout}");
}

/// `shmc_hq.py chains`: the banana's `--chains 4` with `settings` as two tasks of two chains
/// each, on `workers` workers of a local cluster, into `run_dir`.
fn chains_driver(run_dir: &Path, workers: usize, settings: &[&str]) -> Command {
    let script = hq_script();
    let mut command = Command::new("python3");
    command
        .arg(script)
        .args(["chains", "--chains", "4", "--per-task", "2"])
        .args(["--local-workers", &workers.to_string()])
        .args(["--output", run_dir.to_str().unwrap()])
        .args(["--", SHMC, "sample", "--model", "banana"])
        .args(settings);
    command
}

/// Runs the banana's `--chains 4` with `settings` in one process into `whole`, and asserts that
/// every chain's file in the shards of `run_dir` (`chains-1`, `chains-3`) is its file there,
/// paths and times masked; `whole`.
fn one_process_shards_equal<'a>(run_dir: &Path, whole: &'a Path, settings: &[&str]) -> &'a Path {
    let mut args = vec!["sample", "--model", "banana", "--chains", "4", "--quiet"];
    args.extend(["--output", whole.to_str().unwrap()]);
    args.extend(settings);
    let reference = binary::shmc(&args);
    assert!(reference.status.success(), "{}", text(&reference.stderr));
    for chain in 1..=4 {
        let shard = run_dir.join(format!("chains-{}", if chain <= 2 { 1 } else { 3 }));
        let csv = format!("banana-{chain}.csv");
        assert_eq!(
            masked(&shard.join(&csv)),
            masked(&whole.join(&csv)),
            "{csv}"
        );
    }
    whole
}

/// The worker (of `workers`) whose task runs the shard writing to `shard`: the one with a child
/// process whose command line names that folder.
fn worker_running(workers: &[u32], shard: &Path) -> Option<u32> {
    let shard = shard.to_str().unwrap();
    workers.iter().copied().find(|w| {
        let children = Command::new("pgrep")
            .args(["-P", &w.to_string()])
            .output()
            .map(|o| text(&o.stdout))
            .unwrap_or_default();
        children.lines().any(|child| {
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            text(&cmdline).split('\0').any(|arg| arg == shard)
        })
    })
}

/// A worker killed (SIGKILL) while its task runs a shard that has saved a checkpoint: the engine
/// starts the task again on another worker, it resumes the shard's chains from their
/// checkpoints (its log says after which draw), and every chain's file is the one-process
/// run's.
#[test]
fn hyperqueue_a_killed_workers_shard_resumes_from_its_checkpoint() {
    if !python_hyperqueue() {
        return;
    }
    let dir = temp_dir("shard-killed");
    let (run_dir, whole) = (dir.join("run"), dir.join("whole"));
    // Three workers for two tasks: the killed one's task has a free worker to go to.
    let settings = ["--seed", "5", "--warmup", "100", "--draws", "60000"];
    let run = spawn(chains_driver(&run_dir, 3, &settings));
    let shard = run_dir.join("chains-1");
    let checkpoint = shard.join("banana-1.checkpoint.json");
    let start = Instant::now();
    while !checkpoint.exists() {
        assert!(start.elapsed() < Duration::from_secs(120), "no checkpoint");
        std::thread::sleep(Duration::from_millis(20));
    }
    let busy = worker_running(&workers(&run_dir), &shard).expect("a worker runs chains-1");
    // SIGKILL: the worker is lost as a node is, with no word to the server.
    let killed = Command::new("kill")
        .args(["-9", &busy.to_string()])
        .status();
    assert!(killed.unwrap().success());
    let done = finish(run, Duration::from_secs(300));
    let stdout = text(&done.stdout);
    assert!(done.status.success(), "{stdout}{}", text(&done.stderr));
    let log = std::fs::read_to_string(run_dir.join("chains-1.out")).unwrap();
    let resumed = |chain: usize| {
        log.lines().any(|l| {
            l.strip_prefix(&format!("chain {chain}: resumed after draw "))
                .and_then(|rest| rest.split(' ').next()?.parse::<usize>().ok())
                .is_some_and(|draw| draw > 0 && draw < 60000)
        })
    };
    assert!(
        log.contains("an earlier attempt was stopped; resuming it") && resumed(1),
        "{log}"
    );
    one_process_shards_equal(&run_dir, &whole, &settings);
}

/// `shmc_hq.py sbc`: 40 replications as two HyperQueue tasks on two workers, merged: the ranks
/// (seeds, ESS, divergences and ranks of every replication) of the one-process calibration.
#[test]
fn hyperqueue_sbc_parts_merge_to_the_one_process_ranks() {
    if !python_hyperqueue() {
        return;
    }
    let dir = temp_dir("sbc-parts");
    let (run_dir, whole) = (dir.join("run"), dir.join("whole"));
    let script = hq_script();
    let sbc = [
        "sbc",
        "--model",
        "gaussian-conjugate",
        "--reps",
        "40",
        "--draws",
        "200",
        "--warmup",
        "200",
        "--thin",
        "5",
        "--seed",
        "3",
        "--quiet",
    ];
    let mut command = Command::new("python3");
    command
        .arg(script)
        .args(["sbc", "--parts", "2", "--local-workers", "2"])
        .args(["--output", run_dir.to_str().unwrap(), "--", SHMC])
        .args(sbc);
    let done = finish(spawn(command), Duration::from_secs(300));
    let stdout = text(&done.stdout);
    assert!(done.status.success(), "{stdout}{}", text(&done.stderr));
    let mut args = sbc.to_vec();
    args.extend(["--output", whole.to_str().unwrap()]);
    let reference = binary::shmc(&args);
    assert!(reference.status.success(), "{}", text(&reference.stderr));
    assert_eq!(
        ranks_without_seconds(&run_dir),
        ranks_without_seconds(&whole)
    );
    assert!(
        stdout.contains("40 replications submitted as HyperQueue job"),
        "{stdout}"
    );
}

/// `--server-command`: a user's own UM-Bridge server command (here `shmc serve` itself, told
/// its port through `{port}`) launched as the tasks; the script's instance mode waits for its
/// /Info and writes its URL file, and the run gives the in-process draws.
#[test]
fn hyperqueue_a_users_server_command_runs_as_the_instances() {
    if !python_hyperqueue() {
        return;
    }
    let dir = temp_dir("server-command");
    let (folder, out) = (dir.join("instances"), dir.join("out"));
    let script = hq_script();
    let server = format!("{SHMC} serve --model banana --workers 1 --port {{port}}");
    let mut command = Command::new("python3");
    command
        .arg(script)
        .args(["--instances", "2", "--local-workers", "2"])
        .args([
            "--folder",
            folder.to_str().unwrap(),
            "--server-command",
            &server,
        ])
        .args(["--", SHMC, "sample", "--model", "umbridge", "--quiet"])
        .args(["--output", out.to_str().unwrap()])
        .args(RUN);
    let done = finish(spawn(command), Duration::from_secs(300));
    let stdout = text(&done.stdout);
    assert!(done.status.success(), "{stdout}{}", text(&done.stderr));
    assert!(rows(&out, "umbridge", 4) == in_process(&RUN, 4, "server-command-reference"));
    assert_eq!(calls_per_instance(&stdout).len(), 2, "{stdout}");
}

/// `shmc_hq.py sbc` with `shmc bench sbc`: a quick table of two cells as two HyperQueue tasks on
/// two workers, merged: every row (thinning, kept draws, p-values, ESS) is the one-process
/// table's.
#[test]
fn hyperqueue_bench_sbc_parts_merge_to_the_one_process_table() {
    if !python_hyperqueue() {
        return;
    }
    let dir = temp_dir("bench-sbc-parts");
    let run_dir = dir.join("run");
    let (merged, whole) = (dir.join("merged.json"), dir.join("whole.json"));
    let table = [
        "bench",
        "sbc",
        "--quick",
        "--models",
        "gaussian-conjugate",
        "--methods",
        "hmc,nuts",
        "--seed",
        "2",
        "--json",
    ];
    let script = hq_script();
    let mut command = Command::new("python3");
    command
        .arg(script)
        .args(["sbc", "--parts", "2", "--local-workers", "2"])
        .args(["--output", run_dir.to_str().unwrap(), "--", SHMC])
        .args(table)
        .arg(&merged);
    let done = finish(spawn(command), Duration::from_secs(300));
    let stdout = text(&done.stdout);
    assert!(done.status.success(), "{stdout}{}", text(&done.stderr));
    assert!(
        stdout.contains("30 replications submitted as HyperQueue job")
            && stdout.contains("2 cells in"),
        "{stdout}"
    );
    let mut args = table.to_vec();
    args.push(whole.to_str().unwrap());
    let reference = binary::shmc(&args);
    assert!(reference.status.success(), "{}", text(&reference.stderr));
    assert_eq!(
        json_rows_without_seconds(&merged),
        json_rows_without_seconds(&whole)
    );
}

/// Whether a Stan toolchain is here; a line saying it is not otherwise (a failure under CI).
fn stan_toolchain() -> bool {
    match shmc::models::stan::Toolchain::find(None) {
        Ok(_) => true,
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "no Stan toolchain, and CI installs one: {e}"
            );
            eprintln!("skipped: {e}");
            false
        }
    }
}

/// A Stan program's chains as HyperQueue tasks (`shmc_hq.py chains`): each task loads the
/// library the one-process run compiled into the cache, and every chain's file is that run's
/// (Stan's names, its generated quantity, paths and times masked).
#[test]
fn hyperqueue_a_stan_programs_chains_give_the_one_process_files() {
    if !python_hyperqueue() || !stan_toolchain() {
        return;
    }
    let dir = temp_dir("stan-chains");
    let stan = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/tests/stan");
    let (program, data) = (stan.join("correlated.stan"), stan.join("correlated.json"));
    let settings = [
        "--model",
        "stan",
        "--stan-file",
        program.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
        "--method",
        "nuts",
        "--seed",
        "3",
        "--warmup",
        "200",
        "--draws",
        "200",
    ];
    let whole = dir.join("whole");
    let mut args = vec!["sample", "--chains", "4", "--quiet", "--output"];
    args.push(whole.to_str().unwrap());
    args.extend(settings);
    let reference = binary::shmc(&args);
    assert!(reference.status.success(), "{}", text(&reference.stderr));
    let run_dir = dir.join("run");
    let mut command = Command::new("python3");
    command
        .arg(hq_script())
        .args([
            "chains",
            "--chains",
            "4",
            "--per-task",
            "2",
            "--local-workers",
            "2",
        ])
        .args(["--output", run_dir.to_str().unwrap()])
        .args(["--", SHMC, "sample"])
        .args(settings);
    let done = finish(spawn(command), Duration::from_secs(300));
    assert!(
        done.status.success(),
        "{}{}",
        text(&done.stdout),
        text(&done.stderr)
    );
    for chain in 1..=4 {
        let shard = run_dir.join(format!("chains-{}", if chain <= 2 { 1 } else { 3 }));
        let csv = format!("stan-{chain}.csv");
        let rows = masked(&shard.join(&csv));
        assert!(rows.contains("theta.1,theta.2,sq_dist"), "{rows}");
        assert_eq!(rows, masked(&whole.join(&csv)), "{csv}");
    }
}
