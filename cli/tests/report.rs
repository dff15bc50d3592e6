//! End to end: `shmc report` on folders that `shmc sample` wrote (exact HMC, and two surrogate
//! methods, so that the surrogate's section and learning curve appear), rendered by headless
//! Chromium, which says whether every plot is on the page and drawn; and the report's answers to
//! bad folders.
//!
//! The rendering needs Chromium (`chromium` on the PATH; `.ci/run` installs Debian's package).
//! Without it the test says it is missing and passes, except under `CI=true`, where it fails.

mod binary;
use binary::{shmc, text};

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn temp_dir(name: &str) -> PathBuf {
    let dir = binary::temp_dir("report", name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `shmc` with `args` and expects it to succeed.
fn ok(args: &[&str]) -> Output {
    let out = shmc(args);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    out
}

/// Samples the banana into `dir/name` with `method` and its options.
fn sample(dir: &Path, name: &str, method: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let mut args = vec![
        "sample",
        "--model",
        "banana",
        "--chains",
        "2",
        "--draws",
        "300",
        "--warmup",
        "300",
        "--seed",
        "4",
        "--quiet",
        "--output",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(method);
    ok(&args);
    out
}

/// The Chromium binary, if there is one. Without it the test prints what is missing and is
/// skipped, unless `CI=true`: CI installs it, so there its absence fails.
fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"].into_iter().find(|name| {
        Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        let what = "chromium (apt-get install chromium)";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{what} is missing, and CI needs it"
        );
        eprintln!("skipped: {what} is missing");
    }
    found
}

/// Runs headless Chromium on `page` with `extra` arguments (a fresh profile in `profile`, no
/// network, no GPU) and returns its stdout; kills it after two minutes.
fn headless(chromium: &str, profile: &Path, extra: &[&str], page: &Path) -> String {
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "chromium on {}: {status}", page.display());
            break;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium on {} took over two minutes", page.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().unwrap()
}

/// Measures every figure once Chromium has laid the page out: its name, the size of its SVG,
/// and how many of its marks (lines, dots, bars in data colours: not the background, nor the
/// black axes and ticks) have a non-empty box.
const MEASURE: &str = r##"<script>
const rows = [...document.querySelectorAll("figure[data-plot]")].map(f => {
  const svg = f.querySelector("svg");
  if (!svg) return f.dataset.plot + "|0|0|0";
  const box = svg.getBoundingClientRect();
  const marks = [...svg.querySelectorAll("polyline, circle, rect, polygon")]
    .filter(e => e !== svg.firstElementChild)
    .filter(e => !["#000000", "#FFFFFF"].includes(e.getAttribute("stroke")))
    .filter(e => { const b = e.getBBox(); return b.width + b.height > 0; });
  return [f.dataset.plot, Math.round(box.width), Math.round(box.height), marks.length].join("|");
});
const pre = document.createElement("pre");
pre.id = "measured";
pre.textContent = rows.join("\n");
document.body.appendChild(pre);
</script>"##;

/// One figure as Chromium measured it.
#[derive(Debug)]
struct Measured {
    plot: String,
    width: u32,
    height: u32,
    marks: usize,
}

/// The figures of report `html`, rendered and measured by Chromium.
fn measure(chromium: &str, html: &Path, work: &Path) -> Vec<Measured> {
    let page = std::fs::read_to_string(html).unwrap();
    let measured_page = work.join(format!(
        "measured-{}",
        html.parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
    ));
    let with_script = page.replace("</body>", &format!("{MEASURE}\n</body>"));
    std::fs::write(measured_page.with_extension("html"), with_script).unwrap();
    let dom = headless(
        chromium,
        &work.join("profile"),
        &["--dump-dom"],
        &measured_page.with_extension("html"),
    );
    let rows = dom
        .split("<pre id=\"measured\">")
        .nth(1)
        .and_then(|rest| rest.split("</pre>").next())
        .unwrap_or_else(|| panic!("no measurements in the DOM: {dom}"));
    rows.lines()
        .map(|row| {
            let fields: Vec<&str> = row.split('|').collect();
            Measured {
                plot: fields[0].to_string(),
                width: fields[1].parse().unwrap(),
                height: fields[2].parse().unwrap(),
                marks: fields[3].parse().unwrap(),
            }
        })
        .collect()
}

/// The plots a banana report shows: sampler, a trace and histogram per parameter, the pair.
const BANANA_PLOTS: [&str; 7] = [
    "acceptance",
    "divergences",
    "trace beta.1",
    "histogram beta.1",
    "trace beta.2",
    "histogram beta.2",
    "pair beta.1 beta.2",
];

/// Asserts that `figures` are exactly `expected`, each laid out with a size and drawn marks.
fn assert_drawn(figures: &[Measured], expected: &[&str]) {
    let names: Vec<&str> = figures.iter().map(|f| f.plot.as_str()).collect();
    assert_eq!(names, expected);
    for f in figures {
        assert!(f.width >= 200 && f.height >= 150, "{f:?}");
        // A trace or the sampler plots: a line per chain; a histogram: bars; a pair: dots.
        assert!(f.marks >= 2, "{f:?}");
    }
}

#[test]
fn reports_of_exact_and_surrogate_runs_render_every_plot_in_chromium() {
    let dir = temp_dir("render");
    let hmc = sample(&dir, "hmc", &[]);
    // RNS-HMC fits at the end of warmup: its curve is one point per chain, for sampling.
    let rns = sample(&dir, "rns", &["--method", "rns-hmc", "--hidden", "100"]);
    // ARNS-HMC proposes from 50 states on and learns online: a curve over the states.
    let arns = sample(
        &dir,
        "arns",
        &[
            "--method",
            "arns-hmc",
            "--hidden",
            "100",
            "--start-after",
            "50",
            "--start-error",
            "1",
        ],
    );
    for run in [&hmc, &rns, &arns] {
        let out = ok(&["report", run.to_str().unwrap()]);
        assert!(text(&out.stdout).contains("report written to"), "{out:?}");
        let html = std::fs::read_to_string(run.join("report.html")).unwrap();
        // Self-contained: no script, stylesheet, image or font from elsewhere.
        for outside in ["<script", "<link", "<img", "src=", "@import", "url("] {
            assert!(!html.contains(outside), "{outside} in {}", run.display());
        }
        assert!(html.contains("ESS bulk") && html.contains("R̂"));
        assert!(html.len() < 600_000, "{} bytes", html.len());
    }
    let arns_html = std::fs::read_to_string(arns.join("report.html")).unwrap();
    assert!(arns_html.contains("surrogate acceptance vs states learned"));
    assert!(arns_html.contains("surrogate: trained on"));
    assert!(
        !std::fs::read_to_string(hmc.join("report.html"))
            .unwrap()
            .contains(">Surrogate<")
    );

    let Some(chromium) = chromium() else {
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    assert_drawn(
        &measure(chromium, &hmc.join("report.html"), &dir),
        &BANANA_PLOTS,
    );
    let with_learning: Vec<&str> = BANANA_PLOTS.iter().copied().chain(["learning"]).collect();
    for run in [&rns, &arns] {
        assert_drawn(
            &measure(chromium, &run.join("report.html"), &dir),
            &with_learning,
        );
    }
    // And as a person sees it: a screenshot of the page's first screen.
    let png = dir.join("arns.png");
    headless(
        chromium,
        &dir.join("profile"),
        &[
            "--window-size=1200,1400",
            &format!("--screenshot={}", png.display()),
        ],
        &arns.join("report.html"),
    );
    let bytes = std::fs::read(&png).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 20_000,
        "{} bytes",
        bytes.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `shmc` with `args`, expecting exit code 1 and a single stderr line containing `needle`.
fn assert_one_line_error(args: &[&str], needle: &str) {
    let out = shmc(args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(
        err.starts_with("error: ") && err.contains(needle),
        "{args:?}: {err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
}

#[test]
fn bad_folders_get_one_line_or_a_report_that_says_what_it_left_out() {
    let dir = temp_dir("bad");
    let missing = dir.join("missing");
    assert_one_line_error(
        &["report", missing.to_str().unwrap()],
        "No such file or directory",
    );
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    assert_one_line_error(&["report", empty.to_str().unwrap()], "no .csv files");

    let run = sample(&dir, "run", &[]);
    let r = run.to_str().unwrap();
    assert_one_line_error(
        &["report", r, "--parameters", "beta.1,nope"],
        "--parameters names \"nope\", which the run does not have (its parameters: beta.1, beta.2)",
    );
    // A chain killed mid-row (its last line cut short, no end block) and one cut to 200 draws.
    let cut = |name: &str, keep: usize, partial: bool| {
        let path = run.join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        let draws: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        let header_end = text.find(draws[1]).unwrap();
        let mut kept = text[..header_end].to_string();
        for row in &draws[1..=keep] {
            kept.push_str(row);
            kept.push('\n');
        }
        if partial {
            kept.push_str(&draws[keep + 1][..10]);
        }
        std::fs::write(&path, kept).unwrap();
    };
    cut("banana-1.csv", 250, true);
    cut("banana-2.csv", 200, false);
    let output = dir.join("page.html");
    let out = ok(&[
        "report",
        r,
        "--output",
        output.to_str().unwrap(),
        "--parameters",
        "beta.2",
    ]);
    let notes = text(&out.stderr);
    let html = std::fs::read_to_string(&output).unwrap();
    for needle in [
        "banana-1.csv:",
        "the last line is cut short",
        "its last 50 draws left out, to the common length 200",
        "has no end block",
    ] {
        assert!(notes.contains(needle), "{needle} in {notes}");
        assert!(html.contains(needle), "{needle} in the page");
    }
    assert!(html.contains("2 chain(s) of 200 draws"));
    assert!(html.contains("trace beta.2") && !html.contains("trace beta.1"));
    // No pairs for a single parameter.
    assert!(!html.contains("data-plot=\"pair"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The issue's reports written over files that are not reports: `--output RUN/banana-1.csv`
/// and a user's own `report.html` are refused naming the file, their bytes unchanged; an
/// earlier report is replaced by the new one.
#[test]
fn a_report_writes_over_an_earlier_report_and_nothing_else() {
    let dir = temp_dir("owned");
    let run = sample(&dir, "run", &["--method", "hmc"]);
    let run_arg = run.to_str().unwrap();
    for (file, bytes) in [
        (run.join("banana-1.csv"), None),
        (
            run.join("report.html"),
            Some(&b"<html>my own report</html>"[..]),
        ),
    ] {
        if let Some(bytes) = bytes {
            std::fs::write(&file, bytes).unwrap();
        }
        let before = std::fs::read(&file).unwrap();
        let name = file.to_str().unwrap();
        let mut args = vec!["report", run_arg];
        if bytes.is_none() {
            args.extend(["--output", name]);
        }
        assert_one_line_error(&args, &format!("{name}: not a report shmc wrote"));
        assert!(std::fs::read(&file).unwrap() == before, "{name} changed");
    }
    std::fs::remove_file(run.join("report.html")).unwrap();
    ok(&["report", run_arg]);
    let first = std::fs::read_to_string(run.join("report.html")).unwrap();
    ok(&["report", run_arg, "--parameters", "beta.2"]);
    let second = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(first != second, "the earlier report was not replaced");
    let _ = std::fs::remove_dir_all(&dir);
}
