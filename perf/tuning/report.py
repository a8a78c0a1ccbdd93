# SPDX-License-Identifier: Apache-2.0
"""The tables and plot of one run in the dataset's schema (perf/compare.py prints and writes
them; tuning.data reads the same rows): every row beside the reference model of its shape, then
per shape, floor and planning auto against the best path meeting the floor (tuning.judge's
meaning, as in perf/RESULTS.md), against the reference, and 3xtf32 against strict auto."""
from . import judge
from .names import REFERENCE_PEER, parse_shape

SCALAR_BYTES = 4  # fp32: what the perf program and the fp32 peers measure
AUTO_SLACK = 0.05  # auto may be this much slower than the best path before it is flagged
SUMMARY_COLUMNS = [
    "shape",
    "floor",
    "planning",
    "auto_plan_ms",
    "auto_ran",
    "auto_ms",
    "best_path",
    "best_ms",
    "auto_vs_best_pct",
    "reference_ms",
    "auto_vs_reference",
    "strict_auto_ms",
    "vs_strict_auto",
    "flags",
]


def intensity(shape):
    """FLOP per byte of the minimum traffic: read X, W, b once, write Y once."""
    M, K, N = parse_shape(shape)
    return 2.0 * M * N * K / (SCALAR_BYTES * (M * K + N * K + N + M * N))


def tflops(row):
    M, K, N = parse_shape(row["shape"])
    return 2.0 * M * N * K / (row["median_ms"] * 1e9) if row["median_ms"] else None


def label(row):
    """A row's name in the table and the plot: the peer's name, or our path, how it was planned,
    what it ran and in which precision."""
    if row["source"] != "ours":
        return row["path"]
    name = f"FusedLinear {row['path']}" + (":measure" if row["planning"] == "measure" else "")
    name += f" {row['precision']}" if row["precision"] != "strict" else ""
    ran = (row["ran"], row["precision_ran"])
    if ran != (row["path"], row["precision"]):
        name += f" -> {ran[0]}" + (f" {ran[1]}" if ran[1] != row["precision"] else "")
    return name


def reference(rows, shape):
    return next(
        (r["median_ms"] for r in rows if r["shape"] == shape and r["path"] == REFERENCE_PEER), None
    )


def summarize(rows, shapes):
    """Per shape, floor and planning with an auto row: auto against the best explicit path
    meeting the floor (tuning.judge.cases), against the reference, and (tf32, 3xtf32) against
    strict auto. Flags: auto more than AUTO_SLACK behind the best path, auto slower than the
    reference, 3xtf32 auto slower than strict auto unless it ran strict auto's kernel (the
    floor: then a difference is the two processes' context, not the choice)."""
    cases = {(c["shape"], c["floor"]): c for c in judge.cases(rows, {})}
    autos = {
        (r["shape"], r["precision"], r["planning"]): r
        for r in rows
        if r["source"] == "ours" and r["path"] == "auto"
    }
    out = []
    for shape in shapes:
        ref = reference(rows, shape)
        for floor in ("strict", "tf32", "3xtf32"):
            for planning in ("estimate", "measure"):
                auto = autos.get((shape, floor, planning))
                if auto is None:
                    continue
                case = cases.get((shape, floor), {})
                s = dict(
                    shape=shape,
                    floor=floor,
                    planning=planning,
                    auto_plan_ms=auto["plan_ms"],
                    auto_ran=f"{auto['ran']}/{auto['precision_ran']}",
                    auto_ms=auto["median_ms"],
                    best_path=case.get("best"),
                    best_ms=case.get("best_ms"),
                    auto_vs_best_pct=case.get(planning),
                    reference_ms=ref,
                    auto_vs_reference=None,
                    strict_auto_ms=None,
                    vs_strict_auto=None,
                )
                flags = []
                gap = s["auto_vs_best_pct"]
                if gap is not None and gap > 100 * AUTO_SLACK:
                    flags.append(f"auto {gap:.1f}% behind {s['best_path']}")
                if ref:
                    s["auto_vs_reference"] = ref / auto["median_ms"]
                    if auto["median_ms"] > ref:
                        flags.append("auto slower than the eager reference")
                strict = autos.get((shape, "strict", planning))
                if floor != "strict" and strict is not None:
                    s["strict_auto_ms"] = strict["median_ms"]
                    s["vs_strict_auto"] = strict["median_ms"] / auto["median_ms"]
                    same = (auto["ran"], auto["precision_ran"]) == (strict["ran"], "strict")
                    if floor == "3xtf32" and auto["median_ms"] > strict["median_ms"] and not same:
                        flags.append("3xtf32 auto slower than strict auto")
                s["flags"] = "; ".join(flags)
                out.append(s)
    return out


# ------------------------------------------------------------------------- text


def fmt(value, spec):
    return "-" if value is None or value == "" else format(value, spec)


def pct(value):
    """A signed percentage, "+0.0%" rather than "-0.0%"."""
    if value is None:
        return "-"
    text = format(value, "+.1f")
    return ("+0.0" if text == "-0.0" else text) + "%"


def times(value):
    return fmt(value, ".2f") + ("x" if value else "")


def text_table(head, body, left):
    """Columns sized to their content; `left`: indices of text columns (numbers align right).
    A blank line wherever the first column changes."""
    widths = [max(len(line[c]) for line in [head] + body) for c in range(len(head))]

    def line(cells):
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    lines = [line(head), line(["-" * w for w in widths])]
    previous = None
    for cells in body:
        if previous is not None and cells[0] != previous:
            lines.append("")
        previous = cells[0]
        lines.append(line(cells))
    return "\n".join(lines)


def table(rows, shapes):
    """Every row, by shape in the order asked (ours first), with its speed relative to the
    reference model of its shape (> 1: faster than PyTorch eager fp32)."""
    head = ["shape", "path", "median ms", "TFLOP/s", "vs ref", "rel err"]
    body = []
    for shape in shapes:
        ref = reference(rows, shape)
        for r in (r for r in rows if r["shape"] == shape):
            vs = ref / r["median_ms"] if ref and r["median_ms"] else None
            body.append(
                [
                    shape,
                    label(r),
                    fmt(r["median_ms"], ".4f"),
                    fmt(tflops(r), ".3g"),
                    times(vs),
                    fmt(r["rel_err"], ".2e"),
                ]
            )
    return text_table(head, body, {0, 1})


def summary_table(summary):
    head = [
        "shape",
        "floor",
        "planning",
        "plan ms",
        "auto ->",
        "auto ms",
        "best path",
        "best ms",
        "auto vs best",
        "vs ref",
        "vs strict auto",
        "flags",
    ]
    body = [
        [
            s["shape"],
            s["floor"],
            s["planning"],
            fmt(s["auto_plan_ms"], ".2f"),
            s["auto_ran"],
            fmt(s["auto_ms"], ".4f"),
            s["best_path"] or "-",
            fmt(s["best_ms"], ".4f"),
            pct(s["auto_vs_best_pct"]),
            times(s["auto_vs_reference"]),
            times(s["vs_strict_auto"]),
            s["flags"],
        ]
        for s in summary
    ]
    return text_table(head, body, {0, 1, 2, 4, 6, 11})


def summary_lines(summary):
    """One sentence per floor and planning: how close auto is to the best path, and what is
    flagged."""
    lines = []
    for floor in ("strict", "tf32", "3xtf32"):
        for planning in ("estimate", "measure"):
            group = [s for s in summary if s["floor"] == floor and s["planning"] == planning]
            if not group:
                continue
            gaps = [s["auto_vs_best_pct"] for s in group if s["auto_vs_best_pct"] is not None]
            flagged = sum(1 for s in group if s["flags"])
            worst = (
                f"auto within {max(0.0, max(gaps)):.1f}% of the best path"
                if gaps
                else "no explicit path meets the floor"
            )
            name = floor if planning == "estimate" else f"{floor} (measured)"
            lines.append(f"{name}: {worst} on {len(group)} shape(s); {flagged} flagged")
    return lines


# ------------------------------------------------------------------------- plot


def plot(rows, shapes, path, peak_tflops, bandwidth_tbs, rough):
    """TFLOP/s of every path per shape, shapes ordered by arithmetic intensity; the fp32 peak as
    a line and each shape's roofline bound min(peak, bandwidth x intensity) as a marker. False
    (and no file) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display on the GPU machines
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    order = sorted(shapes, key=intensity)
    x = {shape: i for i, shape in enumerate(order)}
    fig, ax = plt.subplots(figsize=(max(8, 1.4 * len(order) + 4), 6))
    series = {}
    for r in rows:
        if r["shape"] in x and tflops(r) is not None:
            series.setdefault(label(r), []).append((x[r["shape"]], tflops(r)))
    markers = "os^vD<>pPhX*"
    for i, (name, points) in enumerate(series.items()):
        points.sort()
        ax.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            marker=markers[i % len(markers)],
            linestyle="-" if name.startswith("FusedLinear") else ":",
            linewidth=1,
            label=name,
        )
    note = " (rough)" if rough else ""
    ax.axhline(
        peak_tflops,
        color="black",
        linestyle="--",
        linewidth=1,
        label=f"fp32 peak {peak_tflops:g} TFLOP/s{note}",
    )
    ax.scatter(
        range(len(order)),
        [min(peak_tflops, bandwidth_tbs * intensity(s)) for s in order],
        marker="_",
        s=600,
        linewidths=2.5,
        color="black",
        zorder=3,
        label=f"roofline: min(peak, {bandwidth_tbs:g} TB/s x intensity){note}",
    )
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels([f"{s}\n{intensity(s):.3g} FLOP/B" for s in order], fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("shape MxKxN and arithmetic intensity (fp32, minimum traffic)")
    ax.set_ylabel("TFLOP/s (2MNK / median time)")
    ax.set_title("Y = LeakyReLU(multiplier * (X W^T + b), slope)")
    ax.grid(True, which="both", axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
