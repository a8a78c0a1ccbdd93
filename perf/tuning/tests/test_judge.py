# SPDX-License-Identifier: Apache-2.0
"""The held-out study on the fixture run gpu-random7, its numbers worked out by hand."""
import pytest

from tuning import data, judge


def by_case(cases):
    return {(c["shape"], c["floor"]): c for c in cases}


def test_cases_by_hand(dataset_dir):
    cases, _ = judge.study(data.Dataset(dataset_dir), ["gpu-random7"])
    c = by_case(cases)
    assert set(c) == {("2x64x64", "strict"), ("2x64x64", "3xtf32"), ("300x256x512", "strict")}
    strict = c[("2x64x64", "strict")]
    assert strict["set"] == "held-out" and strict["best"] == "fused_skinny/strict"
    assert strict["estimate"] == pytest.approx(110.0)  # vendor 0.021 vs fused_skinny 0.010
    assert strict["estimate_ran"] == "vendor/strict"
    assert strict["measure"] == pytest.approx(5.0)  # 0.0105 vs 0.010
    assert strict["m-choice"] == pytest.approx(0.0)
    # 3xtf32's floor admits strict paths: the best is still fused_skinny at 0.010.
    tf32x3 = c[("2x64x64", "3xtf32")]
    assert tf32x3["best"] == "fused_skinny/strict"
    assert tf32x3["estimate"] == pytest.approx(8.0)  # 0.0108
    assert tf32x3["measure"] == pytest.approx(140.0)  # 0.024
    assert tf32x3["m-choice"] == pytest.approx(150.0)  # explicit vendor 3xtf32: 0.025
    fit = c[("300x256x512", "strict")]
    assert fit["set"] == "fit" and fit["best"] == "fused/strict"
    assert (fit["estimate"], fit["measure"], fit["m-choice"]) == pytest.approx((0, 30, 25))


def test_summary_by_hand(dataset_dir):
    _, summary = judge.study(data.Dataset(dataset_dir), ["gpu-random7"])
    held = summary["held-out"]["estimate"]
    assert held["n"] == 2
    assert (held["median"], held["p95"], held["worst"]) == pytest.approx((8, 110, 110))
    assert (held["within_10"], held["within_25"]) == (0.5, 0.5)
    assert summary["held-out"]["measure"]["worst"] == pytest.approx(140)
    assert summary["fit"]["measure"]["within_25"] == 0.0
    assert "replay" not in summary["held-out"]


def test_same_precision(dataset_dir):
    cases, _ = judge.study(data.Dataset(dataset_dir), ["gpu-random7"], same_precision=True)
    tf32x3 = by_case(cases)[("2x64x64", "3xtf32")]
    assert tf32x3["best"] == "vendor/3xtf32"
    assert tf32x3["estimate"] == pytest.approx(100 * (0.0108 / 0.025 - 1))


def test_replay_is_timed_as_the_explicit_path():
    rows = data.read_run(__import__("conftest").FIXTURE / "runs" / "gpu-random7.csv")
    replayed = {
        ("2x64x64", "strict"): ("fused", "strict"),
        ("300x256x512", "strict"): ("vendor", "strict"),
    }
    c = by_case(judge.cases(rows, {}, replayed))
    assert c[("2x64x64", "strict")]["replay"] == pytest.approx(200.0)
    assert c[("300x256x512", "strict")]["replay"] == pytest.approx(25.0)
    assert "replay" not in c[("2x64x64", "3xtf32")]
    assert c[("2x64x64", "strict")]["set"] == "unlisted"


def test_replay_passes_the_devices_rates(tmp_path):
    # A stand-in tool that answers with the arguments it was given as the path.
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\nread shape\necho \"$shape strict $(echo $@ | tr ' ' _) strict\"\n")
    tool.chmod(0o755)
    gpu = judge.replay(tool, {"2x64x64"}, rates=["--memory-gbps", "3352.3"])
    assert gpu[("2x64x64", "strict")] == ("--memory-gbps_3352.3", "strict")
    host = judge.replay(tool, {"2x64x64"}, host_threads=2, rates=["--memory-gbps", "1"])
    assert host[("2x64x64", "strict")] == ("--host_generic_--threads_2", "strict")
