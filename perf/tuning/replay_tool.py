# SPDX-License-Identifier: Apache-2.0
"""The one wrapper of fused_linear_replay_rule (perf/replay_rule.cpp), the library's rule and
cost-model terms as a program: shapes go in on stdin, one a line; its answers come back as
whitespace-separated records, lines starting with '#' being comments.

  terms()    --terms: the cost model's terms per shape and path (tuning.host_model, gpu_model)
  choices()  the path the rule takes per shape and floor (tuning.judge --replay-tool)
  golden()   --golden: the dispatch table tuning.rules writes, where the tool has the option

Options select the device: `--host BLAS --threads T` for a host, the rate options
(`--multiprocessors`, `--fp32-gflops`, `--memory-gbps`) for a Hopper GPU."""
import subprocess
from pathlib import Path


def add_argument(parser, help="the fused_linear_replay_rule program", required=True):
    """The --replay-tool option of the commands that run the tool."""
    parser.add_argument("--replay-tool", type=Path, required=required, default=None, help=help)


def run(tool, options, shapes=None):
    """The tool's stdout for `options`, `shapes` on stdin; CalledProcessError when it fails."""
    stdin = None if shapes is None else "\n".join(shapes) + "\n"
    return subprocess.run(
        [str(tool)] + [str(o) for o in options],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def records(text):
    """The fields of each line that is neither blank nor a comment."""
    return [line.split() for line in text.splitlines() if line.strip() and line[0] != "#"]


def host_options(blas, threads):
    return ["--host", blas, "--threads", str(threads)]


def rate_options(facts):
    """A GPU's rates {multiprocessors, fp32_gflops, memory_gbps} as the tool's options."""
    return [
        "--multiprocessors",
        str(facts["multiprocessors"]),
        "--fp32-gflops",
        str(facts["fp32_gflops"]),
        "--memory-gbps",
        str(facts["memory_gbps"]),
    ]


def terms(tool, options, shapes, key_fields):
    """{key: [terms]} of --terms, the key being the first `key_fields` fields of a record (shape
    and algorithm on a host; shape, path and precision on a GPU)."""
    out = {}
    for fields in records(run(tool, list(options) + ["--terms"], shapes)):
        out[tuple(fields[:key_fields])] = [float(v) for v in fields[key_fields:]]
    return out


def choices(tool, options, shapes):
    """{(shape, floor): (algorithm, precision)} the rule takes."""
    out = {}
    for shape, floor, algorithm, precision in records(run(tool, options, sorted(shapes))):
        out[(shape, floor)] = (algorithm, precision)
    return out


def golden(tool):
    """`tool --golden`'s CSV, or None when the tool has no such option."""
    probe = subprocess.run([str(tool), "--help"], capture_output=True, text=True)
    if "--golden" not in probe.stdout + probe.stderr:
        return None
    return run(tool, ["--golden"])
