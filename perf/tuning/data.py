# SPDX-License-Identifier: Apache-2.0
"""The dataset of measured runs (perf/data/): its one reader and writer.

perf/data/runs.csv        one row per run (RUNS_COLUMNS)
perf/data/runs/<id>.csv   the run's rows, ours and the PyTorch peers' (RUN_COLUMNS)
perf/data/splits.csv      the random-shapes studies' sets: seed, shape, set (fit|held-out)
perf/data/kernelbench.csv the KernelBench-style evaluations (KERNELBENCH_COLUMNS)
perf/data/training.csv    the backward and training-step runs (TRAINING_COLUMNS)

perf/data/README.md says what each column means. The perf program's JSON (ours_*.json, as
perf/compare.py leaves it in its --out folder) is read here too (parse_perf_json), so a new run
joins the dataset with:

    PYTHONPATH=perf python3 -m tuning.data add OUT_DIR --run-id h200-2027-01-05-random40 \\
        --machine h200 --purpose held-out --seed 40
    PYTHONPATH=perf python3 -m tuning.data add OUT_DIR --run-id h200-2027-01-06-step \\
        --machine h200                                    # compare.py --pass step's folder
    PYTHONPATH=perf python3 -m tuning.data add-kernelbench KB_DIR --run-id kernelbench-h200-... \\
        --machine h200                                    # kernelbench_eval.py's --out folder
    PYTHONPATH=perf python3 -m tuning.data check          # validate every file
"""
import argparse
import csv
import datetime
import io
import json
import math
import subprocess
import sys
from pathlib import Path

from . import names

DATA = Path(__file__).resolve().parent.parent / "data"

RUN_COLUMNS = [
    "M",
    "K",
    "N",
    "precision",
    "planning",
    "path",
    "source",
    "ran",
    "precision_ran",
    "median_ms",
    "min_ms",
    "plan_ms",
    "rel_err",
    "chosen",
]
RUNS_COLUMNS = [
    "run_id",
    "date",
    "machine",
    "device",
    "threads",
    "kokkos",
    "commit",
    "dirty",
    "purpose",
    "seed",
    "command",
]
SPLIT_COLUMNS = ["seed", "shape", "set"]
KERNELBENCH_COLUMNS = [
    "run_id",
    "problem",
    "M",
    "K",
    "N",
    "impl",
    "precision",
    "ran",
    "correct",
    "mean_ms",
    "std_ms",
    "min_ms",
    "max_ms",
]
# The backward (dX, dW, db) and the training step (forward + backward), timed by the perf
# program (--pass) and compare.py (--pass), one row per path or peer: kept apart from the forward
# runs, which auto's rule is fitted and judged on.
TRAINING_COLUMNS = [
    "run_id",
    "M",
    "K",
    "N",
    "pass",
    "precision",
    "path",
    "source",
    "ran",
    "median_ms",
    "min_ms",
    "rel_err",
]

PRECISIONS = ("strict", "tf32", "3xtf32")
# The precisions that meet each floor (the precision asked): strict meets every floor, 3xtf32
# meets tf32's. The best path of a floor is the fastest explicit path in one of them.
FLOORS = {
    "strict": {"strict"},
    "3xtf32": {"strict", "3xtf32"},
    "tf32": {"strict", "3xtf32", "tf32"},
}
PLANNINGS = ("estimate", "measure")
SOURCES = ("ours", "peer")
PURPOSES = ("sweep", "grid", "fit", "held-out", "before", "after", "kernelbench", "training")
PASSES = ("backward", "step")
# ours: the perf program (C++); module: fused_linear's module from PyTorch; peer: PyTorch's own.
TRAINING_SOURCES = ("ours", "module", "peer")
SETS = ("fit", "held-out")
INTS = ("M", "K", "N")
FLOATS = ("median_ms", "min_ms", "plan_ms", "rel_err", "mean_ms", "std_ms", "max_ms")


class DataError(ValueError):
    """A dataset file that does not follow its schema; the message names the file and line."""


def shape_name(row):
    return f"{row['M']}x{row['K']}x{row['N']}"


def parse_shape(text):
    """(M, K, N) of a shape MxKxN; a DataError otherwise."""
    try:
        return names.parse_shape(text)
    except ValueError as e:
        raise DataError(str(e)) from None


def fmt(value):
    """A cell: floats as repr (they read back to the same float), None as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


# ------------------------------------------------------------------------- reading


def _read(path, columns):
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror})") from None
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header != columns:
        raise DataError(f"{path}:1: header {header} is not the schema's {columns}")
    rows = []
    for line, cells in enumerate(reader, 2):
        if len(cells) != len(columns):
            raise DataError(f"{path}:{line}: {len(cells)} cells, the schema has {len(columns)}")
        rows.append((line, dict(zip(columns, cells))))
    return path, rows


def _number(path, line, row, key, kind, required):
    text = row[key]
    if text == "":
        if required:
            raise DataError(f"{path}:{line}: {key} is empty")
        row[key] = None
        return
    try:
        value = kind(text)
    except ValueError:
        raise DataError(f"{path}:{line}: {key} '{text}' is not a number") from None
    if kind is int and value < 1:
        raise DataError(f"{path}:{line}: {key} {value} is not positive")
    if kind is float and key.endswith("_ms") and value < 0:
        raise DataError(f"{path}:{line}: {key} {value} is negative")
    row[key] = value


def _choice(path, line, row, key, allowed):
    if row[key] not in allowed:
        raise DataError(f"{path}:{line}: {key} '{row[key]}' is not one of {', '.join(allowed)}")


def read_run(path):
    """The rows of one run file, typed (ints, floats, None for an empty cell)."""
    path, rows = _read(path, RUN_COLUMNS)
    out = []
    for line, r in rows:
        for key in INTS:
            _number(path, line, r, key, int, True)
        _choice(path, line, r, "source", SOURCES)
        _number(path, line, r, "median_ms", float, True)
        for key in ("min_ms", "plan_ms", "rel_err"):
            _number(path, line, r, key, float, False)
        if not r["path"]:
            raise DataError(f"{path}:{line}: path is empty")
        if r["source"] == "ours":
            _choice(path, line, r, "precision", PRECISIONS)
            _choice(path, line, r, "planning", PLANNINGS)
            _choice(path, line, r, "precision_ran", PRECISIONS)
            if not r["ran"]:
                raise DataError(f"{path}:{line}: ran is empty on a row of ours")
        r["shape"] = shape_name(r)
        out.append(r)
    return out


def write_run(path, rows):
    Path(path).write_text(run_text(rows))


def run_text(rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(RUN_COLUMNS)
    for r in rows:
        w.writerow([fmt(r.get(c)) for c in RUN_COLUMNS])
    return buf.getvalue()


class Dataset:
    """perf/data/ (or another folder of the same layout, e.g. the tests' fixture)."""

    def __init__(self, root=DATA):
        self.root = Path(root)
        path, rows = _read(self.root / "runs.csv", RUNS_COLUMNS)
        self.runs = {}
        for line, r in rows:
            if not r["run_id"] or r["run_id"] in self.runs:
                raise DataError(f"{path}:{line}: run_id '{r['run_id']}' empty or repeated")
            _choice(path, line, r, "purpose", PURPOSES)
            _number(path, line, r, "threads", int, False)
            r["seed"] = r["seed"] or None
            self.runs[r["run_id"]] = r
        self._rows = {}
        self._splits = None

    def run(self, run_id):
        if run_id not in self.runs:
            raise DataError(f"{self.root / 'runs.csv'}: no run '{run_id}'")
        return self.runs[run_id]

    def rows(self, run_id):
        self.run(run_id)
        if run_id not in self._rows:
            self._rows[run_id] = read_run(self.root / "runs" / f"{run_id}.csv")
        return self._rows[run_id]

    def splits(self):
        """{seed: {shape: set}}"""
        if self._splits is None:
            path, rows = _read(self.root / "splits.csv", SPLIT_COLUMNS)
            self._splits = {}
            for line, r in rows:
                _choice(path, line, r, "set", SETS)
                parse_shape(r["shape"])
                self._splits.setdefault(r["seed"], {})[r["shape"]] = r["set"]
        return self._splits

    def split(self, run_id):
        """{shape: set} of the run's seed ({} when it has none)."""
        seed = self.run(run_id)["seed"]
        return self.splits().get(seed, {}) if seed else {}

    def kernelbench(self):
        path = self.root / "kernelbench.csv"
        if not path.exists():
            return []
        path, rows = _read(path, KERNELBENCH_COLUMNS)
        out = []
        for line, r in rows:
            if r["run_id"] not in self.runs:
                raise DataError(f"{path}:{line}: run '{r['run_id']}' is not in runs.csv")
            for key in INTS:
                _number(path, line, r, key, int, True)
            for key in ("mean_ms", "std_ms", "min_ms", "max_ms"):
                _number(path, line, r, key, float, key == "mean_ms")
            out.append(r)
        return out

    def training(self, run_id=None):
        """The rows of training.csv (of one run, if given), typed; [] when there is none."""
        path = self.root / "training.csv"
        if not path.exists():
            return []
        path, rows = _read(path, TRAINING_COLUMNS)
        out = []
        for line, r in rows:
            if r["run_id"] not in self.runs:
                raise DataError(f"{path}:{line}: run '{r['run_id']}' is not in runs.csv")
            out.append(_training_row(path, line, r))
        return [r for r in out if run_id is None or r["run_id"] == run_id]

    def check(self):
        """Reads every file; a DataError on the first that breaks the schema."""
        names = {p.stem for p in (self.root / "runs").glob("*.csv")}
        kb = {r["run_id"] for r in self.kernelbench()}
        trained = {r["run_id"] for r in self.training()}
        for run_id, run in self.runs.items():
            if run["purpose"] in ("kernelbench", "training"):
                table = "kernelbench" if run["purpose"] == "kernelbench" else "training"
                if run_id not in (kb if table == "kernelbench" else trained):
                    raise DataError(f"run '{run_id}' has no rows in {table}.csv")
                continue
            self.rows(run_id)
            if run["seed"] and run["seed"] not in self.splits():
                raise DataError(f"run '{run_id}': seed {run['seed']} not in splits.csv")
        extra = names - set(self.runs)
        if extra:
            raise DataError(f"runs/ holds files of no run in runs.csv: {sorted(extra)}")
        return len(self.runs)

    def add(self, run_id, rows, entry):
        """Writes runs/<run_id>.csv and appends (or replaces) its row of runs.csv."""
        (self.root / "runs").mkdir(parents=True, exist_ok=True)
        write_run(self.root / "runs" / f"{run_id}.csv", rows)
        read_run(self.root / "runs" / f"{run_id}.csv")
        self.runs[run_id] = dict(entry, run_id=run_id)
        self._rows.pop(run_id, None)
        write_table(self.root / "runs.csv", RUNS_COLUMNS, self.runs.values())

    def add_table(self, table, columns, run_id, rows, entry):
        """Puts `rows` as run_id's rows of `table` (training.csv, kernelbench.csv), replacing
        any it had, and appends (or replaces) its row of runs.csv."""
        path = self.root / table
        kept = []
        if path.exists():
            _, old = _read(path, columns)
            kept = [r for _, r in old if r["run_id"] != run_id]
        write_table(path, columns, kept + [dict(r, run_id=run_id) for r in rows])
        self.runs[run_id] = dict(entry, run_id=run_id)
        write_table(self.root / "runs.csv", RUNS_COLUMNS, self.runs.values())


def _training_row(path, line, r):
    for key in INTS:
        _number(path, line, r, key, int, True)
    _choice(path, line, r, "pass", PASSES)
    _choice(path, line, r, "source", TRAINING_SOURCES)
    _number(path, line, r, "median_ms", float, True)
    for key in ("min_ms", "rel_err"):
        _number(path, line, r, key, float, False)
    if not r["path"]:
        raise DataError(f"{path}:{line}: path is empty")
    if r["source"] != "peer":
        _choice(path, line, r, "precision", PRECISIONS)
    r["shape"] = shape_name(r)
    return r


def read_training(path):
    """The rows of compare.py --pass's training.csv (TRAINING_COLUMNS less run_id), typed."""
    path, rows = _read(path, TRAINING_COLUMNS[1:])
    return [_training_row(path, line, dict(r, run_id="")) for line, r in rows]


def training_text(rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(TRAINING_COLUMNS[1:])
    for r in rows:
        w.writerow([fmt(r.get(c)) for c in TRAINING_COLUMNS[1:]])
    return buf.getvalue()


def explicit_paths(rows):
    """{(shape, ran, precision ran): least median} of our explicit paths among rows of runs."""
    paths = {}
    for r in rows:
        if r["source"] == "ours" and r["path"] != "auto":
            key = (r["shape"], r["ran"], r["precision_ran"])
            paths[key] = min(paths.get(key, math.inf), r["median_ms"])
    return paths


def write_table(path, columns, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([fmt(r.get(c)) for c in columns])
    Path(path).write_text(buf.getvalue())


# ------------------------------------------------------------------------- the perf program


def parse_perf_json(path):
    """(config, results) of one perf-program JSON file (fused_linear_perf --json): each result
    with its shape, planning and algorithm_ran filled in where the file leaves them out."""
    data = json.loads(Path(path).read_text())
    config = data.get("config", {})
    config.setdefault("precision", "strict")
    results = []
    for r in data.get("results", []):
        r = dict(r)
        r.setdefault("shape", config.get("shape"))
        r["planning"] = r.get("planning") or "estimate"
        r["algorithm_ran"] = r.get("algorithm_ran") or r.get("algorithm_requested", "?")
        results.append(r)
    return config, results


def chosen_candidate(result):
    """algorithm/precision/variant of the candidate a measured plan kept, or None."""
    for m in result.get("measurements") or []:
        if m.get("chosen"):
            return f"{m['algorithm']}/{m['precision']}/{m.get('variant', 0)}"
    return None


def _timed_row(r, **fields):
    """A row's shape, times and error from one JSON result, with `fields` beside them."""
    M, K, N = parse_shape(r["shape"])
    timed = dict(median_ms=float(r["median_ms"]), min_ms=_float(r.get("min_ms")))
    return dict(M=M, K=K, N=N, **fields, **timed, rel_err=_float(r.get("rel_err")))


def ours_row(config, r):
    """One dataset row of a perf-program result; None for a path that did not run."""
    if r.get("refused") or r.get("median_ms") is None:
        return None
    return _timed_row(
        r,
        precision=config["precision"],
        planning=r["planning"],
        path=r.get("algorithm_requested"),
        source="ours",
        ran=r["algorithm_ran"],
        precision_ran=r.get("precision_ran") or config["precision"],
        plan_ms=_float(r.get("plan_ms")),
        chosen=chosen_candidate(r),
    )


def peer_row(r):
    """One dataset row of torch_peers.py's JSON."""
    if r.get("median_ms") is None:
        return None
    return _timed_row(r, path=r["peer"], source="peer")


# The products a training result names, in the order its `ran` cell lists them: the forward's
# (step only), then dX's and dW's.
TRAINING_PRODUCTS = ("y", "dx", "dw")


def training_ours_row(config, r):
    """One training.csv row (less run_id) of a perf-program --pass result; None for a path
    that did not run. `ran`: "y=vendor_lt/strict dx=vendor/strict dw=vendor/strict"."""
    if r.get("refused") or r.get("median_ms") is None:
        return None
    ran = " ".join(
        f"{p}={r['ran_' + p]}/{r.get('precision_ran_' + p) or '?'}"
        for p in TRAINING_PRODUCTS
        if r.get("ran_" + p)
    )
    return dict(
        _timed_row(r),
        **{"pass": r.get("pass") or config.get("pass")},
        precision=config["precision"],
        path=r.get("algorithm_requested"),
        source="ours",
        ran=ran,
    )


def training_peer_row(r):
    """One training.csv row (less run_id) of torch_peers.py --pass's JSON: PyTorch's own step
    (source peer) or fused_linear's module (source module, with the precision it was asked)."""
    if r.get("median_ms") is None:
        return None
    source = r.get("source") or "peer"
    return dict(
        _timed_row(r),
        **{"pass": r["pass"]},
        precision=r.get("precision") if source == "module" else None,
        path=r["peer"],
        source=source,
        ran=r.get("ran"),
    )


def training_from_compare_dir(out):
    """The training rows of a compare.py --pass folder: every <pass>_*.json of the perf program,
    then peers-<pass>.json."""
    out = Path(out)
    rows = []
    for kind in PASSES:
        for f in sorted(out.glob(f"{kind}_*.json")):
            config, results = parse_perf_json(f)
            rows += [r for r in (training_ours_row(config, x) for x in results) if r]
        peers = out / f"peers-{kind}.json"
        if peers.exists():
            rows += [r for r in map(training_peer_row, json.loads(peers.read_text())) if r]
    return rows


def kernelbench_rows(out):
    """kernelbench.csv's rows (less run_id) and runs.csv's entry (less machine, purpose) of a
    perf/kernelbench_eval.py --out folder (its kernelbench.json)."""
    doc = json.loads((Path(out) / "kernelbench.json").read_text())
    ran = {}
    for d in doc.get("details", []):
        info = d.get("run_info")
        if info:
            key = (d["problem"], d["precision"], d.get("algorithm", "auto"))
            ran[key] = f"{info.get('algorithm')}/{info.get('precision')}"
    rows = []
    for r in doc["rows"]:
        if r.get("mean_ms") in (None, ""):
            continue  # not timed (torch.compile unavailable, or the model failed)
        left, _, N = r["shape"].partition("->")
        M, K = left.split("x")
        algorithm = r["impl"].split(" ", 1)[1] if r["impl"].startswith("ModelNew ") else "auto"
        step = r["problem"].endswith("-step")
        problem = r["problem"][: -len("-step")] if step else r["problem"]
        rows.append(
            dict(
                problem=r["problem"],
                M=int(M),
                K=int(K),
                N=int(N),
                impl=r["impl"],
                precision=r["precision"],
                ran=ran.get((problem, r["precision"], algorithm)) if r["correct"] else None,
                correct=r["correct"] or None,
                **{k: _float(r.get(k)) for k in ("mean_ms", "std_ms", "min_ms", "max_ms")},
            )
        )
    env = doc.get("environment", {})
    status = env.get("fused_linear") or {}
    entry = dict(
        date=(env.get("date") or "")[:10],
        device=env.get("gpu") or env.get("cpu"),
        threads=env.get("threads"),
        kokkos=status.get("kokkos_version") if isinstance(status, dict) else None,
        commit=env.get("commit") or None,
        dirty=None,
        seed=None,
        command=" ".join(["python3 perf/kernelbench_eval.py"] + env.get("argv", [])),
    )
    return rows, entry


def add_argument(parser):
    """The --data option of the package's commands: the dataset's folder."""
    parser.add_argument("--data", type=Path, default=DATA, help="the dataset (perf/data)")


def _float(v):
    return None if v is None or v == "" else float(v)


def from_compare_dir(out):
    """The rows of a perf/compare.py --out folder: every ours_*.json, then peers.json."""
    out = Path(out)
    rows = []
    for f in sorted(out.glob("ours_*.json")):
        config, results = parse_perf_json(f)
        rows += [r for r in (ours_row(config, x) for x in results) if r]
    peers = out / "peers.json"
    if peers.exists():
        rows += [r for r in (peer_row(x) for x in json.loads(peers.read_text())) if r]
    return rows


def entry_from_meta(meta, machine, purpose, seed):
    """runs.csv's row (less run_id) from compare.py's compare-meta.json."""
    m = meta.get("machine") or {}
    return dict(
        date=(meta.get("date") or "")[:10],
        machine=machine,
        device=m.get("name") if m.get("kind") == "gpu" else m.get("cpu"),
        threads=meta.get("threads"),
        kokkos=(meta.get("kokkos") or {}).get("kokkos_version"),
        commit=meta.get("git_commit"),
        dirty=meta.get("git_dirty"),
        purpose=purpose,
        seed=seed,
        command=meta.get("command"),
    )


# ------------------------------------------------------------------------- command line


def main(argv=None):
    p = argparse.ArgumentParser(description="the dataset of measured runs (perf/data/)")
    add_argument(p)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="validate every file of the dataset")
    a = sub.add_parser("add", help="add a perf/compare.py --out folder as a run")
    a.add_argument("out", type=Path, help="compare.py's --out folder")
    a.add_argument("--run-id", required=True, help="e.g. h200-2027-01-05-random40")
    a.add_argument("--machine", required=True, help="e.g. h200, host-2c")
    a.add_argument(
        "--purpose",
        choices=PURPOSES,
        default=None,
        help="default: training for a compare.py --pass folder, else held-out",
    )
    a.add_argument("--seed", default=None, help="the tuning.shapes seed its shapes were drawn with")
    k = sub.add_parser("add-kernelbench", help="add a perf/kernelbench_eval.py --out folder")
    k.add_argument("out", type=Path, help="kernelbench_eval.py's --out folder")
    k.add_argument("--run-id", required=True, help="e.g. kernelbench-h200-2027-01-06")
    k.add_argument("--machine", required=True, help="e.g. h200, host-2c")
    args = p.parse_args(argv)
    try:
        ds = Dataset(args.data)
        if args.command == "check":
            print(f"{args.data}: {ds.check()} runs, every file follows the schema")
            return 0
        if args.command == "add-kernelbench":
            rows, entry = kernelbench_rows(args.out)
            entry.update(machine=args.machine, purpose="kernelbench")
            entry["commit"] = entry["commit"] or _git_head()
            ds.add_table("kernelbench.csv", KERNELBENCH_COLUMNS, args.run_id, rows, entry)
            print(f"added {args.run_id}: {len(rows)} rows to kernelbench.csv")
            return 0
        meta_path = args.out / "compare-meta.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        training_csv = args.out / "training.csv"
        perf_files = sorted(f for kind in PASSES for f in args.out.glob(f"{kind}_*.json"))
        if training_csv.exists() or meta.get("pass") in PASSES or perf_files:
            rows = (
                read_training(training_csv)
                if training_csv.exists()
                else training_from_compare_dir(args.out)
            )
            if not rows:
                raise DataError(f"{args.out}: no training rows")
            entry = entry_from_meta(meta, args.machine, args.purpose or "training", args.seed)
            if not meta and perf_files:
                # The perf program's JSON alone (no compare.py around it): its own config.
                config, _ = parse_perf_json(perf_files[0])
                ran_on = datetime.datetime.fromtimestamp(
                    perf_files[0].stat().st_mtime, datetime.timezone.utc
                )
                entry.update(
                    date=ran_on.strftime("%Y-%m-%d"),
                    kokkos=config.get("kokkos_version"),
                    threads=None,
                    command="fused_linear_perf --pass ... --json ("
                    + ", ".join(f.name for f in perf_files)
                    + ")",
                )
            entry["commit"] = entry["commit"] or _git_head()
            ds.add_table("training.csv", TRAINING_COLUMNS, args.run_id, rows, entry)
            print(f"added {args.run_id}: {len(rows)} rows to training.csv")
            return 0
        args.purpose = args.purpose or "held-out"
        run_csv = args.out / "run.csv"
        rows = read_run(run_csv) if run_csv.exists() else from_compare_dir(args.out)
        if not rows:
            raise DataError(f"{args.out}: no run.csv and no ours_*.json")
        entry = entry_from_meta(meta, args.machine, args.purpose, args.seed)
        if not entry["commit"]:
            entry["commit"] = _git_head()
        ds.add(args.run_id, rows, entry)
        print(f"added {args.run_id}: {len(rows)} rows")
        return 0
    except DataError as e:
        print(f"tuning.data: {e}", file=sys.stderr)
        return 1


def _git_head():
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=DATA.parent
    )
    return done.stdout.strip() or None


if __name__ == "__main__":
    sys.exit(main())
