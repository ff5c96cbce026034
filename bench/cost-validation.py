#!/usr/bin/env python3
"""Validate flexpipe-tune's predicted iteration times against CPU runs.

For each model and each rank count R, the script

1. runs flexpipe-tune (--gpus R, with --top large enough that every candidate
   it may pick has a spec file) and reads its results.csv;
2. picks the tuner's best --top candidates and --sampled more, spread evenly
   over the remaining (lower-ranked) ones and preferring predicted times that
   differ from those already chosen, so that the set spans a range of
   predicted times;
3. compiles each one with flexpipe-compile --emit=exe (the spec's --dp, the
   cost time model, the tuner's per-candidate model file) and runs its
   run-mpi.sh --repeats times; the measured time is the median of the runs'
   "mean iteration time" lines, the noise the runs' spread (max - min) over
   that median;
4. prints one table per (model, R) with predicted and measured times and the
   signed relative error (predicted / measured - 1), then a summary per group
   and overall: mean and worst |error|, how many candidates are within the
   tolerance, Kendall's tau-b of predicted against measured times, and the
   ranking check (of the pairs whose predicted times differ by more than
   --pair-gap, how many the measurement orders the same way; the others are
   listed).

With --markdown it writes the same tables and summaries as Markdown (for
docs/Tuning.md), headed by the cluster file, models, ranks, iterations,
repeats and the machine.

Repeats are interleaved (every candidate's first run, then every second run,
...) so that a burst of background load spreads over candidates instead of
skewing one of them. Every run takes about the same time: before the
runs, a short probe of the group's rank-1 candidate (or the next one that
runs) measures how far the cluster file's predictions are off, and each
candidate then runs as many iterations as fit in about --run-seconds, at
least 3 and at most --iterations (--run-seconds 0: always --iterations).
Fast candidates so run many iterations: 12 iterations of the tiny GPT's
15 ms on 4 ranks differed by 16% between runs, 150 by 6%. The iterations
each candidate ran are in the tables.

Before and after each group's runs, flexpipe-profile --check runs the
group's model's 1-rank calibration job against the cluster file (a few
seconds) and the group's heading says how much slower (> 1) or faster the
machine ran it than the file says: on a machine shared with others the
speed moves by 10-20% within minutes, and every candidate of a group
moves with it.

With more ranks than CPUs (R = 4 on a 2-CPU machine) the ranks share cores,
and the measured times include that contention; the tables say so.

A candidate that fails to compile or run is listed as failed (with the reason
and a log file under --work) and left out of the statistics; the script then
exits with status 1.

Example (the nominal CPU cluster; its predictions are not calibrated):

  python3 bench/cost-validation.py build --cluster configs/clusters/cpu.yaml \\
      --markdown /tmp/cost-validation.md

Only the Python 3 standard library is used.
"""

import argparse
import csv
import dataclasses
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Two predicted times closer than this (relative) count as "the same" when
# the sampled candidates are picked.
DISTINCT_PREDICTION = 0.01


# --------------------------------------------------------------------------
# Small helpers.


def log(message):
    """A progress line on stderr (stdout holds the report)."""
    print(message, file=sys.stderr, flush=True)


def resolve(path, what, folder=""):
    """PATH as given, else relative to the repository root, else in FOLDER
    of the repository (configs/models/tiny.yaml as tiny.yaml or tiny)."""
    tries = [path, os.path.join(ROOT, path)]
    if folder:
        tries += [os.path.join(ROOT, folder, path),
                  os.path.join(ROOT, folder, path + ".yaml")]
    for candidate in tries:
        if os.path.exists(candidate):
            return os.path.abspath(candidate)
    sys.exit(f"{os.path.basename(sys.argv[0])}: {what} {path} does not "
             f"exist")


def tail(text, lines=3):
    """The last few non-empty lines of TEXT, joined, for error messages."""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:]) if kept else "(no output)"


def to_seconds(value, unit):
    return float(value) * {"s": 1.0, "ms": 1e-3, "us": 1e-6}[unit]


def fmt_ms(value):
    return "-" if value is None else f"{value:.3f}"


def fmt_pct(value, signed=False):
    if value is None:
        return "-"
    return f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}"


def short_stp(cell):
    """A stage-priority cell as the tuner prints it: depth_first:2 -> df:2."""
    name, _, interval = cell.partition(":")
    name = {"breadth_first": "bf", "depth_first": "df"}.get(name, name)
    return f"{name}:{interval}" if interval else name


def describe(row):
    """The schedule column, in flexpipe-tune's words (docs/Tuning.md)."""
    text = row["placement"]
    if int(row["chunks"]) > 1:
        text += f" v{row['chunks']}"
    if row["vocab_parallel"] == "1":
        text += " +vocab"
    text += (f", {row['cttp']} {short_stp(row['fstp'])}/"
             f"{short_stp(row['bstp'])}")
    if row["separation"] == "1":
        text += ", separation"
    return text


def cpus():
    """Logical CPUs this process may use (what nproc prints)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def machine():
    """Logical CPUs and the CPU model."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpus()} CPUs (nproc), {model}"


def commit():
    """The repository's commit, '+dirty' with local changes, or None."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short",
                               "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True,
                               text=True, check=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


# --------------------------------------------------------------------------
# One candidate and one (model, R) group.


@dataclasses.dataclass
class Candidate:
    rank: int                 # the tuner's rank (1 = predicted fastest)
    row: dict                 # its results.csv row
    predicted_s: float        # predicted iteration time (results.csv)
    spec: str                 # rank-K.mlir
    model_yaml: str           # rank-K.model.yaml
    how: str                  # "top" or "sampled"
    dp: int = 0               # from the spec's flexpipe-compile line
    exe_dir: str = ""         # flexpipe-compile's output
    iterations: int = 0       # iterations per run (after the cap)
    runs_ms: list = dataclasses.field(default_factory=list)
    error: str = ""           # why it failed; empty when it did not
    model_label: str = ""     # its group, e.g. "tiny R=4", for messages

    @property
    def ok(self):
        return not self.error and bool(self.runs_ms)

    @property
    def predicted_ms(self):
        return 1e3 * self.predicted_s

    @property
    def measured_ms(self):
        return statistics.median(self.runs_ms) if self.ok else None

    @property
    def rel_error(self):
        """predicted / measured - 1 (negative: the tuner is optimistic)."""
        return self.predicted_ms / self.measured_ms - 1 if self.ok else None

    @property
    def noise(self):
        if not self.ok:
            return None
        return (max(self.runs_ms) - min(self.runs_ms)) / self.measured_ms


@dataclasses.dataclass
class Group:
    model: str                # model name (the YAML's file stem)
    ranks: int                # R
    candidates: list = dataclasses.field(default_factory=list)
    ok_count: int = 0         # status-ok rows in results.csv
    spec_count: int = 0       # rank-K.mlir files written
    tune_s: float = 0.0       # flexpipe-tune's wall time
    ratio: float = None       # probe: measured / predicted of rank 1
    # flexpipe-profile --check before and after the runs: the machine's
    # speed now against the cluster file's (None: not checked).
    drift: list = dataclasses.field(default_factory=list)
    error: str = ""           # why the whole group failed (the tuner)

    @property
    def label(self):
        return f"{self.model} R={self.ranks}"


# --------------------------------------------------------------------------
# Tuning and picking candidates.


def run_tuner(args, group, model_path, out_dir):
    """flexpipe-tune into OUT_DIR; returns results.csv's rows (or None)."""
    if os.path.isdir(out_dir):  # no stale rank-K files from an earlier run
        shutil.rmtree(out_dir)
    command = [os.path.join(args.build_dir, "bin", "flexpipe-tune"),
               "--model", model_path, "--cluster", args.cluster,
               "--gpus", str(group.ranks), "--top", str(args.tune_top),
               "-o", out_dir]
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    group.tune_s = time.monotonic() - started
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tune.log"), "w") as f:
        f.write(" ".join(command) + "\n\n" + result.stdout + result.stderr)
    if result.returncode != 0:
        group.error = (f"flexpipe-tune failed (exit {result.returncode}): "
                       f"{tail(result.stderr or result.stdout)}")
        return None
    with open(os.path.join(out_dir, "results.csv"), newline="") as f:
        return list(csv.DictReader(f))


def pick(ok_rows, top, sampled):
    """The best TOP rows and SAMPLED more from the rest, as (row, how).

    The sampled ones aim at evenly spaced positions in the remaining rows
    (in rank order, the last one at the worst); near each position the first
    row, nearest first, whose predicted time differs by more than
    DISTINCT_PREDICTION from every row already chosen is taken, else the
    nearest row not yet taken. Deterministic: no randomness.
    """
    chosen = [(row, "top") for row in ok_rows[:top]]
    pool = ok_rows[top:]
    if sampled == 0:
        return chosen
    if len(pool) <= sampled:
        return chosen + [(row, "sampled") for row in pool]

    def time_of(row):
        return float(row["iteration_s"])

    def distinct(row):
        t = time_of(row)
        return all(abs(t - time_of(other)) >
                   DISTINCT_PREDICTION * time_of(other) for other, _ in chosen)

    n = len(pool)
    window = n / sampled / 2
    taken = set()
    for i in range(1, sampled + 1):
        target = round(i * (n - 1) / sampled)
        order = sorted((j for j in range(n) if j not in taken),
                       key=lambda j: (abs(j - target), j))
        near = [j for j in order if abs(j - target) <= window]
        j = next((j for j in near if distinct(pool[j])), order[0])
        taken.add(j)
        chosen.append((pool[j], "sampled"))
    return chosen


PREDICTED = re.compile(r"^// predicted: iteration ([0-9.]+) (s|ms|us)\b")
DP = re.compile(r"--dp (\d+)")


def read_spec(candidate):
    """The spec's predicted time and --dp, checked against results.csv."""
    predicted = dp = None
    with open(candidate.spec) as f:
        for _, line in zip(range(20), f):  # the header comment lines
            if predicted is None and (m := PREDICTED.match(line)):
                predicted = to_seconds(m.group(1), m.group(2))
            if dp is None and line.startswith("// flexpipe-compile") and (
                    m := DP.search(line)):
                dp = int(m.group(1))
    if predicted is None or dp is None:
        return "spec has no '// predicted: iteration' or '--dp N' line"
    # The spec prints 3 decimals; results.csv has 10 significant digits.
    if abs(predicted - candidate.predicted_s) > max(
            1e-3 * candidate.predicted_s, 1e-6):
        return (f"spec predicts {predicted * 1e3:.3f} ms but results.csv "
                f"{candidate.predicted_ms:.3f} ms for rank {candidate.rank}")
    if dp != int(candidate.row["dp"]):
        return f"spec has --dp {dp} but results.csv dp {candidate.row['dp']}"
    candidate.dp = dp
    return ""


# --------------------------------------------------------------------------
# Compiling and running.


def compile_candidate(args, candidate, out_dir):
    candidate.exe_dir = out_dir
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    command = [os.path.join(args.build_dir, "bin", "flexpipe-compile"),
               candidate.spec, "--model", candidate.model_yaml,
               "--cluster", args.cluster, "--time-model=cost",
               "--dp", str(candidate.dp), "--emit=exe", "-o", out_dir]
    result = subprocess.run(command, capture_output=True, text=True)
    log_path = out_dir + ".compile.log"
    with open(log_path, "w") as f:
        f.write(" ".join(command) + "\n\n" + result.stdout + result.stderr)
    if result.returncode != 0:
        return (f"compile failed (exit {result.returncode}, {log_path}): "
                f"{tail(result.stderr or result.stdout)}")
    if not os.path.exists(os.path.join(out_dir, "run-mpi.sh")):
        return f"compile wrote no run-mpi.sh ({log_path})"
    return ""


MEAN = re.compile(r"mean iteration time ([0-9.]+) ms")


def run_once(args, candidate, iterations, log_name):
    """One run-mpi.sh run; returns (mean iteration ms or None, error)."""
    command = [os.path.join(candidate.exe_dir, "run-mpi.sh"),
               "--iterations", str(iterations)]
    log_path = os.path.join(candidate.exe_dir, log_name)
    # A session of its own, so that a run past the timeout is ended with
    # all of its processes (mpirun and the ranks), and nothing else.
    process = subprocess.Popen(command, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=args.run_timeout)
        rc = process.returncode
    except subprocess.TimeoutExpired:
        output = ""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                pass
            try:
                output, _ = process.communicate(timeout=5)
                break
            except subprocess.TimeoutExpired:
                continue
        rc = None
    with open(log_path, "w") as f:
        f.write(" ".join(command) + "\n\n" + output)
    if rc is None:
        return None, f"timed out after {args.run_timeout} s ({log_path})"
    if rc != 0:
        return None, f"exit {rc} ({log_path}): {tail(output)}"
    m = MEAN.search(output)
    if not m:
        return None, f"no 'mean iteration time' line ({log_path})"
    return float(m.group(1)), ""


def iterations_for(args, group, candidate):
    """The iterations that fit in --run-seconds (3 to --iterations)."""
    if args.run_seconds <= 0 or group.ratio is None:
        return args.iterations
    estimate = candidate.predicted_s * group.ratio  # seconds per iteration
    fit = int(args.run_seconds / estimate) if estimate > 0 else 0
    return max(3, min(args.iterations, fit))


# --------------------------------------------------------------------------
# Statistics.


def kendall_tau_b(xs, ys):
    """Kendall's tau-b (ties in either list count in neither direction and
    shrink the denominator); None when undefined (n < 2 or all tied)."""
    n = len(xs)
    concordant = discordant = ties_x = ties_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx = (xs[i] > xs[j]) - (xs[i] < xs[j])
            dy = (ys[i] > ys[j]) - (ys[i] < ys[j])
            if dx == 0:
                ties_x += 1
            if dy == 0:
                ties_y += 1
            if dx and dy:
                if dx == dy:
                    concordant += 1
                else:
                    discordant += 1
    pairs = n * (n - 1) // 2
    denominator = math.sqrt((pairs - ties_x) * (pairs - ties_y))
    return (concordant - discordant) / denominator if denominator else None


def ranking_check(candidates, gap):
    """Pairs whose predicted times differ by more than GAP (slower / faster
    - 1): (agreeing count, disagreeing pairs as (faster, slower) by
    prediction). A tie in the measurement counts as disagreeing."""
    agree, disagree = 0, []
    for i, a in enumerate(candidates):
        for b in candidates[i + 1:]:
            fast, slow = sorted((a, b), key=lambda c: c.predicted_s)
            if slow.predicted_s <= (1 + gap) * fast.predicted_s:
                continue
            if fast.measured_ms < slow.measured_ms:
                agree += 1
            else:
                disagree.append((fast, slow))
    return agree, disagree


@dataclasses.dataclass
class Summary:
    measured: int
    failed: int
    mean_abs: float = None
    mean_signed: float = None
    worst: Candidate = None
    within: int = 0
    tau: float = None
    tau_groups: int = 1       # overall: the groups whose taus are averaged
    agree: int = 0
    disagree: list = dataclasses.field(default_factory=list)


def summarize(candidates, args):
    ok = [c for c in candidates if c.ok]
    s = Summary(measured=len(ok), failed=len(candidates) - len(ok))
    if not ok:
        return s
    s.mean_abs = statistics.mean(abs(c.rel_error) for c in ok)
    s.mean_signed = statistics.mean(c.rel_error for c in ok)
    s.worst = max(ok, key=lambda c: abs(c.rel_error))
    s.within = sum(abs(c.rel_error) <= args.tolerance for c in ok)
    s.tau = kendall_tau_b([c.predicted_s for c in ok],
                          [c.measured_ms for c in ok])
    s.agree, s.disagree = ranking_check(ok, args.pair_gap)
    return s


# --------------------------------------------------------------------------
# Output: the same tables and summaries as text and as Markdown.

COLUMNS = ["rank", "pp", "dp", "mbs", "m", "schedule", "predicted ms",
           "measured ms", "error %", "noise %", "iters", "runs ms"]


def table_rows(group):
    rows = []
    for c in group.candidates:
        r = c.row
        rank = f"{c.rank}" + ("" if c.how == "top" else "*")
        runs = " ".join(f"{t:.1f}" for t in c.runs_ms)
        rows.append([rank, r["pp"], r["dp"], r["mbs"], r["microbatches"],
                     describe(r), fmt_ms(c.predicted_ms),
                     fmt_ms(c.measured_ms) if c.ok else "FAILED",
                     fmt_pct(c.rel_error, signed=True), fmt_pct(c.noise),
                     str(c.iterations or "-"), runs or "-"])
    return rows


def summary_lines(label, s, args):
    """The summary as plain sentences (shared by the text and Markdown)."""
    lines = [f"{label}: {s.measured} measured, {s.failed} failed"]
    if s.measured:
        w = s.worst
        lines.append(
            f"mean |error| {100 * s.mean_abs:.1f}%, worst |error| "
            f"{100 * abs(w.rel_error):.1f}% ({w.model_label} rank {w.rank}: "
            f"predicted {w.predicted_ms:.3f} ms, measured "
            f"{w.measured_ms:.3f} ms); mean signed error "
            f"{100 * s.mean_signed:+.1f}%")
        lines.append(f"within {100 * args.tolerance:g}% error: "
                     f"{s.within} of {s.measured}")
        tau = "n/a" if s.tau is None else f"{s.tau:+.3f}"
        what = ("Kendall tau-b (predicted vs measured)"
                if s.tau_groups <= 1
                else f"Kendall tau-b (mean over {s.tau_groups} groups)")
        lines.append(f"{what}: {tau}")
        pairs = s.agree + len(s.disagree)
        lines.append(
            f"ranking check: {s.agree} of {pairs} pairs whose predicted times "
            f"differ by more than {100 * args.pair_gap:.0f}% are measured in "
            f"the same order" + ("" if pairs else " (no such pairs)"))
    return lines


def disagreement_lines(s):
    return [f"{a.model_label} rank {a.rank} predicted {a.predicted_ms:.3f} ms "
            f"< rank {b.rank} predicted {b.predicted_ms:.3f} ms, but measured "
            f"{a.measured_ms:.3f} ms >= {b.measured_ms:.3f} ms"
            for a, b in s.disagree]


def failure_lines(group):
    return [f"rank {c.rank}: {c.error}" for c in group.candidates if c.error]


def text_table(rows):
    widths = [max(len(str(x)) for x in column)
              for column in zip(COLUMNS, *rows)]
    numeric = {i for i, name in enumerate(COLUMNS)
               if name not in ("schedule", "runs ms")}
    out = []
    for row in [COLUMNS] + rows:
        cells = [str(x).rjust(w) if i in numeric else str(x).ljust(w)
                 for i, (x, w) in enumerate(zip(row, widths))]
        out.append("  ".join(cells).rstrip())
    return out


def md_table(rows):
    right = {i for i, name in enumerate(COLUMNS)
             if name not in ("schedule", "runs ms")}
    out = ["| " + " | ".join(COLUMNS) + " |",
           "|" + "|".join("---:" if i in right else "---"
                          for i in range(len(COLUMNS))) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def header(args, models):
    capped = (f" at most (about {args.run_seconds:g} s per run)"
              if args.run_seconds > 0 else "")
    rev = commit()
    cluster = args.cluster
    if cluster.startswith(ROOT + os.sep):
        cluster = os.path.relpath(cluster, ROOT)
    return (f"cluster {cluster}, models "
            f"{', '.join(models)}, ranks "
            f"{', '.join(str(r) for r in args.ranks)}, {args.iterations} "
            f"iterations{capped}, {args.repeats} "
            f"repeat{'' if args.repeats == 1 else 's'}; machine: "
            f"{machine()}" + (f"; commit {rev}" if rev else ""))


LEGEND = ("rank: the tuner's rank (* sampled below the top); "
          "m: micro-batches; error: predicted / measured - 1; "
          "noise: (max - min) / median of the repeats; "
          "measured: median of the repeats' mean iteration times "
          "(iterations after the first)")


def report(groups, overall, args, models, elapsed, markdown):
    """The whole report as lines of text or Markdown."""
    out = []
    if markdown:
        out += ["## Predicted vs measured iteration times", "",
                header(args, models) + ".", "", LEGEND + ".", ""]
    else:
        out += ["cost validation: " + header(args, models), LEGEND, ""]
    for g in groups:
        title = (f"{g.model}, R = {g.ranks}: {g.ok_count} ok candidates, "
                 f"specs for ranks 1..{g.spec_count}")
        if g.ratio is not None:
            title += f", probe measured / predicted {g.ratio:.2f}"
        if g.drift:
            title += ("; the model's 1-rank job against the cluster file "
                      "before and after the runs " +
                      " and ".join(f"{d:.2f}x" for d in g.drift))
        if g.ranks > cpus():
            title += f"; {g.ranks} ranks oversubscribe {cpus()} CPUs"
        if markdown:
            out += [f"### {g.model}, R = {g.ranks}", ""]
            if g.error:
                out += [f"**failed**: {g.error}", ""]
                continue
            text = title[title.index(":") + 2:]
            out += [text[0].upper() + text[1:] + ".", ""]
            out += md_table(table_rows(g)) + [""]
            out += [f"- {line}" for line in summary_lines(
                g.label, g.summary, args)]
            out += [f"- disagreeing pair: {line}"
                    for line in disagreement_lines(g.summary)]
            out += [f"- **failed** {line}" for line in failure_lines(g)]
            out.append("")
        else:
            out += [f"== {title}" if not g.error else
                    f"== {g.label}: FAILED: {g.error}"]
            if g.error:
                out.append("")
                continue
            out += text_table(table_rows(g))
            out += ["failed " + line for line in failure_lines(g)]
            out += ["  " + line for line in summary_lines(
                g.label, g.summary, args)]
            out += ["  disagreeing pair: " + line
                    for line in disagreement_lines(g.summary)]
            out.append("")
    lines = summary_lines("overall", overall, args)
    failed_groups = sum(bool(g.error) for g in groups)
    if failed_groups:
        lines.append(f"{failed_groups} group(s) failed in flexpipe-tune")
    lines.append(f"wall time {elapsed:.0f} s")
    if markdown:
        out += ["### Overall", ""] + [f"- {line}" for line in lines] + [""]
    else:
        out += ["== overall"] + ["  " + line for line in lines]
    return out


# --------------------------------------------------------------------------
# Driver.


def validate_group(args, group, model_path, work):
    """Tune, pick, compile, probe and measure one (model, R) group."""
    label = f"[{group.label}]"
    tune_dir = os.path.join(work, f"{group.model}-{group.ranks}", "tune")
    rows = run_tuner(args, group, model_path, tune_dir)
    if rows is None:
        log(f"{label} {group.error}")
        return
    ok = sorted((r for r in rows if r["status"] == "ok"),
                key=lambda r: int(r["rank"]))
    group.ok_count = len(ok)
    # Spec files exist for ranks 1..min(ok, --tune-top); sample only there.
    with_spec = [r for r in ok if os.path.exists(
        os.path.join(tune_dir, f"rank-{r['rank']}.mlir"))]
    group.spec_count = len(with_spec)
    log(f"{label} flexpipe-tune: {len(rows)} rows, {len(ok)} ok, specs for "
        f"{len(with_spec)} ({group.tune_s:.2f} s)")
    if group.ranks > cpus():
        log(f"{label} note: {group.ranks} ranks on {cpus()} CPUs are "
            f"oversubscribed; measured times include the contention")
    if len(with_spec) < len(ok):
        log(f"{label} note: only ranks 1..{len(with_spec)} have specs; raise "
            f"--tune-top to sample all {len(ok)}")
    if not with_spec:
        group.error = "flexpipe-tune found no ok candidate"
        return
    for row, how in pick(with_spec, args.top, args.sampled):
        stem = os.path.join(tune_dir, f"rank-{row['rank']}")
        c = Candidate(rank=int(row["rank"]), row=row,
                      predicted_s=float(row["iteration_s"]),
                      spec=stem + ".mlir", model_yaml=stem + ".model.yaml",
                      how=how, model_label=group.label)
        group.candidates.append(c)
    n = len(group.candidates)
    log(f"{label} candidates: " + ", ".join(
        f"{c.rank} ({c.predicted_ms:.2f} ms)" for c in group.candidates))

    for i, c in enumerate(group.candidates, 1):
        c.error = read_spec(c) or compile_candidate(
            args, c, os.path.join(work, f"{group.model}-{group.ranks}",
                                  f"cand-{c.rank}"))
        if c.error:
            log(f"{label} {i}/{n} rank {c.rank}: {c.error}")

    # The probe: rank 1 (or the best that compiled), one timed iteration,
    # for how far off the predictions are, to size the runs.
    if args.run_seconds > 0:
        for probe in (c for c in group.candidates if not c.error):
            ms, error = run_once(args, probe, 2, "probe.log")
            if ms:
                group.ratio = ms / probe.predicted_ms
                log(f"{label} probe rank {probe.rank}: {ms:.3f} ms measured, "
                    f"{probe.predicted_ms:.3f} ms predicted "
                    f"(x{group.ratio:.2f})")
                break
            log(f"{label} probe rank {probe.rank} failed: {error}")
    for c in group.candidates:
        c.iterations = iterations_for(args, group, c) if not c.error else 0

    check_drift(args, group, model_path)
    # Interleaved repeats: every candidate once, then again, ...
    for repeat in range(1, args.repeats + 1):
        for i, c in enumerate(group.candidates, 1):
            if c.error:
                continue
            ms, error = run_once(args, c, c.iterations, f"run-{repeat}.log")
            if error:
                c.error = f"run {repeat} failed: {error}"
                log(f"{label} repeat {repeat}/{args.repeats}, {i}/{n} rank "
                    f"{c.rank}: {c.error}")
                continue
            c.runs_ms.append(ms)
            log(f"{label} repeat {repeat}/{args.repeats}, {i}/{n} rank "
                f"{c.rank}: {ms:.3f} ms ({c.iterations} iterations; "
                f"predicted {c.predicted_ms:.3f} ms)")
    check_drift(args, group, model_path)


def check_drift(args, group, model_path):
    """flexpipe-profile --check of the cluster file for the group's model:
    how much slower (> 1) or faster the machine runs the model's 1-rank
    calibration job now than the file says, appended to group.drift.
    Nothing for a cluster file without measured layers of the model (the
    nominal ones) or with --no-drift-check."""
    if not args.drift_check:
        return
    command = [os.path.join(args.build_dir, "bin", "flexpipe-profile"),
               "--check", args.cluster, "--model", model_path,
               "--tolerance", "1000"]
    result = subprocess.run(command, capture_output=True, text=True)
    match = re.search(r": ([0-9.]+)x$", result.stdout.strip())
    if result.returncode != 0 or not match:
        log(f"[{group.label}] no drift check: "
            f"{tail(result.stderr or result.stdout, 1)}")
        return
    group.drift.append(float(match.group(1)))
    log(f"[{group.label}] {result.stdout.strip()}")


def parse_args():
    parser = argparse.ArgumentParser(
        description="Validate flexpipe-tune's predicted iteration times "
                    "against measured CPU training runs (see the module "
                    "docstring for the method).")
    add = parser.add_argument
    add("build_dir", metavar="BUILD_DIR",
        help="build directory with bin/flexpipe-tune and bin/flexpipe-compile")
    add("--no-drift-check", dest="drift_check", action="store_false",
        help="do not run flexpipe-profile --check before and after each "
             "group's runs (it says how far the machine has moved from a "
             "measured cluster file; a few seconds each)")
    add("--cluster", required=True, metavar="YAML",
        help="cluster file for the tuner and the compiler (a bare name is "
             "looked up in configs/clusters)")
    add("--models", nargs="+", metavar="YAML",
        default=["configs/models/tiny.yaml", "configs/models/gpt-h256.yaml"],
        help="model files (a bare name is looked up in configs/models; "
             "default: tiny.yaml and gpt-h256.yaml there)")
    add("--ranks", nargs="+", type=int, default=[2, 4], metavar="R",
        help="rank counts, flexpipe-tune --gpus (default: 2 4)")
    add("--top", type=int, default=5,
        help="the tuner's best candidates to measure (default: %(default)s)")
    add("--sampled", type=int, default=5,
        help="more candidates sampled below the top (default: %(default)s)")
    add("--iterations", type=int, default=200,
        help="iterations per run at most (at least 3), the first not timed "
             "(default: %(default)s)")
    add("--repeats", type=int, default=3,
        help="runs per candidate; measured = their median (default: "
             "%(default)s)")
    add("--run-seconds", type=float, default=3.0, metavar="S",
        help="run each candidate for as many iterations (at least 3, at "
             "most --iterations) as take about S seconds, estimated from a "
             "probe; 0: always --iterations (default: %(default)s)")
    add("--tune-top", type=int, default=1000, metavar="K",
        help="flexpipe-tune --top: specs for ranks 1..K are written and "
             "candidates are picked only among them (default: %(default)s)")
    add("--tolerance", type=float, default=15, metavar="PCT",
        help="count the candidates whose |error| is at most PCT percent "
             "(default: %(default)s)")
    add("--pair-gap", type=float, default=15, metavar="PCT",
        help="ranking check: the pairs whose predicted times differ by more "
             "than PCT percent (default: %(default)s)")
    add("--run-timeout", type=float, default=300, metavar="S",
        help="seconds before a run counts as failed (default: %(default)s)")
    add("--markdown", metavar="OUT.md",
        help="also write the report as Markdown")
    add("--work", metavar="DIR",
        help="where specs, executables and logs go (default: a new directory "
             "under the system's temporary directory, kept)")
    args = parser.parse_args()
    if args.iterations < 3:
        parser.error("--iterations must be at least 3 (a run times the "
                     "iterations after its first, and its estimate needs two)")
    for name in ("top", "sampled", "repeats"):
        if getattr(args, name) < (1 if name != "sampled" else 0):
            parser.error(f"--{name} is too small")
    if args.iterations < 2:
        parser.error("--iterations must be at least 2 (the first is not "
                     "timed)")
    if args.tune_top < args.top:
        parser.error("--tune-top must be at least --top")
    if any(r < 1 for r in args.ranks):
        parser.error("--ranks must be positive")
    args.tolerance /= 100
    args.pair_gap /= 100
    args.build_dir = resolve(args.build_dir, "build directory")
    args.cluster = resolve(args.cluster, "cluster file", "configs/clusters")
    args.models = [resolve(m, "model file", "configs/models")
                   for m in args.models]
    for tool in ("flexpipe-tune", "flexpipe-compile"):
        if not os.access(os.path.join(args.build_dir, "bin", tool), os.X_OK):
            parser.error(f"{args.build_dir}/bin/{tool} is missing")
    return args


def main():
    args = parse_args()
    started = time.monotonic()
    work = os.path.abspath(args.work) if args.work else tempfile.mkdtemp(
        prefix="flexpipe-cost-validation-")
    os.makedirs(work, exist_ok=True)
    log(f"cost-validation: work directory {work}")
    models = [os.path.splitext(os.path.basename(m))[0] for m in args.models]

    groups = []
    for name, path in zip(models, args.models):
        for ranks in args.ranks:
            group = Group(model=name, ranks=ranks)
            groups.append(group)
            validate_group(args, group, path, work)
            group.summary = summarize(group.candidates, args)

    # Overall: errors and pairs pooled over the groups (pairs only within a
    # group: comparing different models' times says nothing about ranking),
    # tau-b averaged over the groups where it is defined.
    every = [c for g in groups for c in g.candidates]
    overall = summarize([], args)
    ok = [c for c in every if c.ok]
    overall.measured, overall.failed = len(ok), len(every) - len(ok)
    if ok:
        overall.mean_abs = statistics.mean(abs(c.rel_error) for c in ok)
        overall.mean_signed = statistics.mean(c.rel_error for c in ok)
        overall.worst = max(ok, key=lambda c: abs(c.rel_error))
        overall.within = sum(abs(c.rel_error) <= args.tolerance for c in ok)
        taus = [g.summary.tau for g in groups if g.summary.tau is not None]
        overall.tau = statistics.mean(taus) if taus else None
        overall.tau_groups = len(taus)
        overall.agree = sum(g.summary.agree for g in groups)
        overall.disagree = [p for g in groups for p in g.summary.disagree]
    elapsed = time.monotonic() - started

    print("\n".join(report(groups, overall, args, models, elapsed, False)))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(report(groups, overall, args, models, elapsed,
                                     True)))
        log(f"cost-validation: wrote {args.markdown}")
    log(f"cost-validation: {elapsed:.0f} s; work directory {work}")
    failed = overall.failed + sum(bool(g.error) for g in groups)
    if failed:
        log(f"cost-validation: {failed} candidate(s) or group(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
