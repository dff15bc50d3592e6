#!/usr/bin/env python3
"""Model instances as HyperQueue tasks, through HyperQueue's own Python API.

    python3 cluster/shmc_hq.py --instances 2 --folder RUN/instances \\
        --serve "shmc serve --model elliptic-pde --workers 1" \\
        -- shmc sample --model umbridge --umbridge-model elliptic-pde --chains 4 --output RUN

submits the instances as the tasks of one HyperQueue job; each, once listening, writes its URL
to FOLDER/url-N.txt (UM-Bridge's HyperQueue convention), and the run after `--` gets
`--url dir:FOLDER` and reads them there. A worker that dies takes its task with it; HyperQueue
starts the task again elsewhere (up to --crash-limit times), the new instance rewrites its
URL file, and the run drops the dead URL and takes the new one.

Where the engine runs:
  * default: a local cluster of this package (a HyperQueue server) and --local-workers worker
    processes of --worker-cpus CPUs each, stopped at the end;
  * --server-dir DIR: a running HyperQueue server (`hq server start`, on a SLURM or PBS login
    node with `hq alloc add` giving it workers); the instances' job is left for `hq job cancel`.

Why the Python API and not a dispatcher of our own: HyperQueue decides where and when a task
runs, restarts it when its worker is lost, and scales workers through its automatic
allocation; the `pip install hyperqueue` package carries the server and worker in its
extension, so the same code runs on a laptop and against a cluster's server.

A run's chains as HyperQueue tasks:

    python3 cluster/shmc_hq.py chains --chains 8 --per-task 2 --output RUN \\
        -- shmc sample --model banana --seed 7

submits one task per shard of --per-task chains: `shmc sample ... --chains 2 --chain-id 5
--output RUN/chains-5` and so on, each chain with the seed stream, file and checkpoint it has in
the one-process run; `shmc summary RUN` and `shmc report RUN` read the shards as one run. A task
whose worker is lost is started again by HyperQueue (--crash-limit), and goes on from its
chains' checkpoints with `shmc sample --resume` instead of starting over.

A calibration's replications as HyperQueue tasks:

    python3 cluster/shmc_hq.py sbc --parts 2 --output RUN \\
        -- shmc sbc --model gaussian-conjugate --reps 200 --thin 5

submits one task per part (`shmc sbc ... --first-replication N --count K --output
RUN/part-N`, each replication with its seeds of the whole run), waits, then merges the parts
(`shmc sbc ... --merge RUN/part-*  --output RUN`): the report and files of the one-process run.
`-- shmc bench sbc --quick --models ... --methods ...` splits the table's replications alike
(each part runs them for every cell) and prints the merged table.

`worker`, `instance` and `shard` are this script's own task modes, not for direct use.
"""

import argparse
import contextlib
import fcntl
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

MANIFEST = "instances.json"


@contextlib.contextmanager
def quiet_stdout():
    """Standard output sent to /dev/null: a server started through the API prints a table of
    its settings there, which is no concern of the run's."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def start_worker_process(server_dir, cpus):
    """A HyperQueue worker in a process of its own, joined to the server in `server_dir`.

    The Python API runs workers as threads of the process that started the server; a worker
    of its own process can die alone (killed, its node lost), which is what HyperQueue's crash
    limit is about. The API's worker joins the server its cluster directory points at, so a
    throw-away cluster's `hq-current` is pointed at ours first."""
    return subprocess.Popen(
        [sys.executable, __file__, "worker", str(server_dir), str(cpus)],
        stdout=subprocess.PIPE,
        text=True,
    )


def run_worker(server_dir, cpus):
    from hyperqueue.ffi.cluster import Cluster

    target = os.path.realpath(os.path.join(server_dir, "hq-current"))
    own = tempfile.mkdtemp(prefix="shmc-hq-worker-")
    with quiet_stdout():
        cluster = Cluster(own)
    link = os.path.join(own, "hq-current")
    os.remove(link)
    os.symlink(target, link)
    cluster.ctx.add_worker(int(cpus))
    print("worker ready", flush=True)
    # Until told to stop, or orphaned: a driver killed outright leaves no worker behind.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


def run_instance(url_file, command):
    """Runs a user's UM-Bridge server command on a free port (given as PORT and as {port} in
    the command) and writes its URL to `url_file` once /Info answers; exits with it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [part.replace("{port}", str(port)) for part in command]
    server = subprocess.Popen(command, env={**os.environ, "PORT": str(port)})
    url = f"http://127.0.0.1:{port}"
    while server.poll() is None:
        try:
            urllib.request.urlopen(url + "/Info", timeout=1).read()
            break
        except OSError:
            time.sleep(0.1)
    else:
        sys.exit(server.returncode)
    partial = url_file + ".partial"
    Path(partial).write_text(url + "\n")
    os.replace(partial, url_file)
    sys.exit(server.wait())


def instance_args(args, folder, i):
    url_file = str(folder / f"url-{i}.txt")
    if args.serve:
        return shlex.split(args.serve) + ["--port", "0", "--url-file", url_file]
    command = shlex.split(args.server_command)
    return [sys.executable, os.path.abspath(__file__), "instance", url_file, "--"] + command


def submit_instances(client, args, folder):
    from hyperqueue import Job

    job = Job(max_fails=None, name="shmc-instances")
    for i in range(args.instances):
        job.program(
            instance_args(args, folder, i),
            stdout=str(folder / f"instance-{i}.out"),
            stderr=str(folder / f"instance-{i}.err"),
            crash_limit=args.crash_limit,
            name=f"instance-{i}",
        )
    submitted = client.submit(job)
    names = [f"HyperQueue job {submitted.id}, task {i}" for i in range(args.instances)]
    manifest = {"instances": names, "ready_seconds": args.ready_seconds}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return submitted.id


def local_cluster(args, folder):
    from hyperqueue import LocalCluster

    with quiet_stdout():
        cluster = LocalCluster(server_dir=tempfile.mkdtemp(prefix="shmc-hq-server-"))
    workers = [
        start_worker_process(cluster.cluster.server_dir, args.worker_cpus)
        for _ in range(args.local_workers)
    ]
    for w in workers:
        if "worker ready\n" not in iter(w.stdout.readline, ""):
            sys.exit("error: a HyperQueue worker did not start")
    (folder / "workers.txt").write_text("".join(f"{w.pid}\n" for w in workers))
    return cluster, workers


def stop_local(cluster, workers):
    for w in workers:
        if w.poll() is None:
            w.send_signal(signal.SIGTERM)
    for w in workers:
        try:
            w.wait(timeout=10)
        except subprocess.TimeoutExpired:
            w.kill()
    cluster.stop()


def wait_for_earlier_attempt(folder):
    """Waits until no earlier attempt of the task holds the shard folder's lock (shmc's flock
    on FOLDER/.shmc.lock): the run of a task whose worker dies is sent a signal, and stops,
    saving its checkpoints, while the engine may already be starting the next attempt."""
    lock = Path(folder) / ".shmc.lock"
    if lock.is_file():
        with open(lock, "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)


def run_shard(folder, command):
    """One shard's task: the run `command` into `folder`, or, if an earlier attempt of the task
    (on a worker that was lost) saved its settings there, that run resumed from its chains'
    checkpoints (`shmc sample --resume` prints where each chain goes on from). An attempt lost
    before it saved them left no draw worth keeping: --overwrite.

    The run replaces this process (exec) rather than running as its child: HyperQueue kills a
    task's process when its worker dies, and a child would live on, writing into the folder
    the task's next attempt resumes from."""
    settings = Path(folder) / "shmc-run.json"
    wait_for_earlier_attempt(folder)
    if settings.is_file():
        print(f"shmc_hq: {folder}: an earlier attempt was stopped; resuming it", flush=True)
        command = [command[0], "sample", "--resume", folder, "--quiet"]
    else:
        command = command + ["--overwrite"]
    sys.stdout.flush()
    os.execvp(command[0], command)


def quiet(run):
    """The command line `run` with --quiet (no progress bars in a task's log), once."""
    return run if "--quiet" in run else run + ["--quiet"]


def shard_tasks(args, run, output):
    """Each shard's task: its name (`chains-K`, K its first chain) and command line."""
    tasks = []
    for first in range(1, args.chains + 1, args.per_task):
        count = min(args.per_task, args.chains + 1 - first)
        folder = str(output / f"chains-{first}")
        command = quiet(run) + ["--chains", str(count), "--chain-id", str(first),
                                "--output", folder]
        tasks.append((f"chains-{first}", [sys.executable, os.path.abspath(__file__), "shard",
                                          folder, "--"] + command))
    return tasks


def run_tasks(args, output, name, tasks, what):
    """Submits `tasks` ((name, command line) pairs) as the tasks of one HyperQueue job called
    `name`, each logging to OUTPUT/NAME.out and .err and surviving --crash-limit lost workers,
    on the engine of `args` (a local cluster, stopped after, or --server-dir's); prints
    `what` with the job's id, waits for the job, and says whether every task succeeded."""
    from hyperqueue import Client, Job

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cluster, workers = (None, [])
    if args.server_dir:
        client = Client(args.server_dir)
    else:
        cluster, workers = local_cluster(args, output)
        client = cluster.client()
    try:
        job = Job(max_fails=None, name=name)
        for task, command in tasks:
            job.program(command, stdout=str(output / f"{task}.out"),
                        stderr=str(output / f"{task}.err"),
                        crash_limit=args.crash_limit, name=task)
        submitted = client.submit(job)
        print(f"shmc_hq: {what} submitted as HyperQueue job {submitted.id}, {len(tasks)} "
              f"tasks, into {output}", flush=True)
        return client.wait_for_jobs([submitted], raise_on_error=False)
    finally:
        if cluster is not None:
            stop_local(cluster, workers)


def run_chains(argv):
    """`chains` mode: the run after `--` as shards of --per-task chains, one task each, waited
    for; then `shmc summary` of the run folder."""
    args, run = parse_chains(argv)
    output = Path(args.output).resolve()
    output.mkdir(parents=True, exist_ok=True)
    tasks = shard_tasks(args, run, output)
    if not run_tasks(args, output, "shmc-chains", tasks, f"{args.chains} chains"):
        print(f"error: a shard's task failed (see {output}/chains-N.err)", file=sys.stderr)
        return 1
    return subprocess.run([run[0], "summary", str(output)]).returncode


def is_bench(run):
    """Whether `run` is `shmc bench sbc` (the table), not `shmc sbc` (one calibration)."""
    return run[1:3] == ["bench", "sbc"]


def replications_of(run):
    """The --reps (or --replications) of a `shmc sbc` command line, 200 if not given; `shmc
    bench sbc`'s 30 with --quick, else 200."""
    if is_bench(run):
        return 30 if "--quick" in run else 200
    for i, arg in enumerate(run):
        for flag in ("--reps", "--replications"):
            if arg == flag and i + 1 < len(run):
                return int(run[i + 1])
            if arg.startswith(flag + "="):
                return int(arg.split("=", 1)[1])
    return 200


def run_sbc(argv):
    """`sbc` mode: the calibration after `--` as --parts tasks of its replications, waited
    for, then merged into the whole run's result in --output."""
    if "--" not in argv:
        sys.exit("error: give the calibration after `--`, e.g. `-- shmc sbc --model banana`")
    cut = argv.index("--")
    p = argparse.ArgumentParser(prog="shmc_hq.py sbc")
    p.add_argument("--parts", type=int, default=2, help="tasks the replications are split into")
    p.add_argument("--output", required=True, help="the run's folder (one subfolder a part)")
    engine_options(p)
    args, run = p.parse_args(argv[:cut]), argv[cut + 1:]
    reps = replications_of(run)
    if not 1 <= args.parts <= reps or args.local_workers < 1:
        sys.exit(f"error: --parts must lie in 1..{reps} (the replications), --local-workers >= 1")
    output = Path(args.output).resolve()
    output.mkdir(parents=True, exist_ok=True)
    part_run = run if is_bench(run) else quiet(run)
    folders, tasks = [], []
    for k in range(args.parts):
        first = 1 + k * reps // args.parts
        count = (k + 1) * reps // args.parts - k * reps // args.parts
        folders.append(str(output / f"part-{first}"))
        tasks.append((f"part-{first}", part_run + ["--first-replication", str(first),
                                                   "--count", str(count),
                                                   "--output", folders[-1]]))
    if not run_tasks(args, output, "shmc-sbc", tasks, f"{reps} replications"):
        print(f"error: a part's task failed (see {output}/part-N.err)", file=sys.stderr)
        return 1
    merge = run + ["--merge"] + folders
    if not is_bench(run):
        merge += ["--output", str(output)]
    return subprocess.run(merge).returncode


def parse_chains(argv):
    if "--" not in argv:
        sys.exit("error: give the run after `--`, e.g. `-- shmc sample --model banana`")
    cut = argv.index("--")
    p = argparse.ArgumentParser(prog="shmc_hq.py chains")
    p.add_argument("--chains", type=int, required=True, help="chains of the whole run")
    p.add_argument("--per-task", type=int, default=2, help="chains per task (shard)")
    p.add_argument("--output", required=True, help="the run's folder (one subfolder a shard)")
    engine_options(p)
    args = p.parse_args(argv[:cut])
    if args.chains < 1 or args.per_task < 1 or args.local_workers < 1:
        sys.exit("error: --chains, --per-task and --local-workers must be at least 1")
    return args, argv[cut + 1:]


def engine_options(p):
    """The options of where the engine runs and how often a task survives a lost worker."""
    p.add_argument("--crash-limit", type=int, default=3,
                   help="worker losses a task survives (HyperQueue's crash limit)")
    p.add_argument("--server-dir", help="a running HyperQueue server's directory")
    p.add_argument("--local-workers", type=int, default=2, help="workers of the local cluster")
    p.add_argument("--worker-cpus", type=int, default=1, help="CPUs of each local worker")


def main(argv):
    if argv[:1] == ["worker"]:
        return run_worker(argv[1], argv[2])
    if argv[:1] == ["instance"]:
        return run_instance(argv[1], argv[3:])
    if argv[:1] == ["shard"]:
        return run_shard(argv[1], argv[3:])
    if argv[:1] == ["chains"]:
        return run_chains(argv[1:])
    if argv[:1] == ["sbc"]:
        return run_sbc(argv[1:])
    args, run = parse(argv)
    folder = Path(args.folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    for old in list(folder.glob("url-*.txt")) + [folder / MANIFEST]:
        old.unlink(missing_ok=True)
    from hyperqueue import Client

    cluster, workers, sampler, job = (None, [], None, None)
    # A SIGTERM (a test's or a scheduler's stop) goes through the clean-up below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.server_dir:
        client = Client(args.server_dir)
    else:
        cluster, workers = local_cluster(args, folder)
        client = cluster.client()
    try:
        job = submit_instances(client, args, folder)
        print(f"shmc_hq: {args.instances} model instances submitted as HyperQueue job {job}, "
              f"their URLs in {folder}", flush=True)
        sampler = subprocess.Popen(run + ["--url", f"dir:{folder}"])
        code = sampler.wait()
    finally:
        if sampler is not None and sampler.poll() is None:
            sampler.terminate()
            sampler.wait()
        if cluster is not None:
            stop_local(cluster, workers)
        elif job is not None:
            print(f"shmc_hq: the instances run on: `hq job cancel {job}` stops them")
    return code


def parse(argv):
    if "--" not in argv:
        sys.exit("error: give the run after `--`, e.g. `-- shmc sample --model umbridge ...`")
    cut = argv.index("--")
    p = argparse.ArgumentParser(prog="shmc_hq.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--instances", type=int, default=2, help="model instances (tasks)")
    p.add_argument("--folder", required=True, help="shared folder of the instances' URL files")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--serve", help="a `shmc serve ...` command (--port/--url-file added)")
    what.add_argument("--server-command",
                      help="any UM-Bridge server command; it listens on $PORT or {port}")
    p.add_argument("--ready-seconds", type=float, default=60.0,
                   help="longest wait for an instance's URL, at the start and after a death")
    engine_options(p)
    args = p.parse_args(argv[:cut])
    if args.instances < 1 or args.ready_seconds <= 0 or args.local_workers < 1:
        sys.exit("error: --instances and --local-workers must be at least 1, "
                 "--ready-seconds positive")
    return args, argv[cut + 1:]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
