# SPDX-License-Identifier: Apache-2.0
"""perf/compare.py's tables of a run, on the fixture run gpu-random7 (its numbers in
test_judge.py, worked out by hand)."""
import pytest

from tuning import data, report

SHAPES = ["2x64x64", "300x256x512"]


def rows(dataset_dir):
    return data.Dataset(dataset_dir).rows("gpu-random7")


def by_key(summary):
    return {(s["shape"], s["floor"], s["planning"]): s for s in summary}


def test_auto_vs_best_is_the_judges(dataset_dir):
    s = by_key(report.summarize(rows(dataset_dir), SHAPES))
    assert len(s) == 6
    strict = s[("2x64x64", "strict", "estimate")]
    assert strict["best_path"] == "fused_skinny/strict"
    assert strict["auto_vs_best_pct"] == pytest.approx(110.0)
    assert strict["auto_vs_reference"] == pytest.approx(0.05 / 0.021)
    assert strict["flags"] == "auto 110.0% behind fused_skinny/strict"
    # 3xtf32's floor admits the strict paths: the best is fused_skinny, not vendor 3xtf32.
    floor = s[("2x64x64", "3xtf32", "estimate")]
    assert floor["best_path"] == "fused_skinny/strict"
    assert floor["auto_vs_best_pct"] == pytest.approx(8.0)
    assert floor["auto_ran"] == "fused_skinny/strict"
    assert floor["vs_strict_auto"] == pytest.approx(0.021 / 0.0108)
    measured = s[("2x64x64", "3xtf32", "measure")]
    assert measured["flags"] == (
        "auto 140.0% behind fused_skinny/strict; " "3xtf32 auto slower than strict auto"
    )
    fit = s[("300x256x512", "strict", "estimate")]
    assert (
        fit["auto_vs_best_pct"] == pytest.approx(0)
        and fit["flags"] == ""
        and fit["reference_ms"] is None
    )


def test_a_floor_that_ran_strict_autos_kernel_is_not_flagged(dataset_dir):
    # 3xtf32 auto ran strict auto's kernel (vendor, strict) and was timed slower in its process.
    run = rows(dataset_dir)
    for r in run:
        if (r["shape"], r["precision"], r["planning"], r["path"]) == (
            "2x64x64",
            "3xtf32",
            "estimate",
            "auto",
        ):
            r.update(ran="vendor", precision_ran="strict", median_ms=0.022)
    s = by_key(report.summarize(run, SHAPES))[("2x64x64", "3xtf32", "estimate")]
    assert "3xtf32 auto slower than strict auto" not in s["flags"]


def test_labels_and_table(dataset_dir):
    run = rows(dataset_dir)
    labels = {report.label(r) for r in run if r["shape"] == "2x64x64"}
    assert {
        "FusedLinear auto -> vendor",
        "FusedLinear auto:measure -> fused_skinny",
        "FusedLinear auto 3xtf32 -> fused_skinny strict",
        "FusedLinear vendor 3xtf32",
        "FusedLinear fused",
        "torch eager fp32 (reference model)",
    } <= labels
    text = report.table(run, SHAPES)
    ref = next(x for x in text.splitlines() if "reference model" in x)
    assert ref.split()[0] == "2x64x64" and ref.split()[-2:] == ["1.00x", "2.00e-06"]
    assert "3xtf32 (measured): auto within 140.0% of the best path on 1 shape(s); 1 flagged" in (
        report.summary_lines(report.summarize(run, SHAPES))
    )


def test_intensity_and_rate():
    assert report.intensity("1x1x1") == pytest.approx(2.0 / 16)
    assert report.tflops(dict(shape="1000x1000x1000", median_ms=2.0)) == pytest.approx(1.0)
