# SPDX-License-Identifier: Apache-2.0
import pytest

from tuning import data, gpu_model, spec


def gpu_spec(dataset_dir):
    return spec.load(dataset_dir / "rules" / "gpu.json")


def fit(dataset_dir, tool, facts=None):
    s = gpu_spec(dataset_dir)
    return gpu_model.fit_runs(
        data.Dataset(dataset_dir),
        s["fit"]["runs"],
        tool,
        facts or s["fit"]["facts"],
        gpu_model.models_of(s),
    )


def test_every_timed_path_is_fitted_through_the_tool(dataset_dir, fake_tool):
    c, times, x = fit(dataset_dir, fake_tool)
    assert sorted(times) == ["2x64x64", "300x256x512"]
    assert times["2x64x64"][("vendor", "3xtf32")] == 0.025
    # Two shapes, three terms: each path's fit goes through its measured times.
    for shape, t in times.items():
        for model, ms in t.items():
            assert gpu_model.predicted(c[model], x[(shape,) + model]) == pytest.approx(ms)
            assert min(c[model]) >= 0
    # Exact fits choose the best path meeting each floor: no gap.
    assert [gap for gap, *_ in gpu_model.choices(c, times, x)] == [0.0, 0.0, 0.0, 0.0]
    lines = gpu_model.report_lines(c, times, x, gpu_model.measure_within(c, times, x))
    assert lines[0].startswith("fused/strict: ")
    assert "within 10% 100.0%" in lines[2 * len(c)]


def test_the_devices_rates_reach_the_terms(dataset_dir, fake_tool):
    facts = dict(gpu_spec(dataset_dir)["fit"]["facts"])
    _, _, x = fit(dataset_dir, fake_tool)
    facts["memory_gbps"] = 200.0
    _, _, half = fit(dataset_dir, fake_tool, facts)
    key = ("300x256x512", "fused", "strict")
    assert half[key][1] == pytest.approx(x[key][1] / 2)
    assert half[key][2] == x[key][2]


def test_runs_of_a_device_named_in_devices_count_in_its_rates(dataset_dir, fake_tool):
    # Both fixture runs were made on "NVIDIA H200": named in `devices` with half the bandwidth,
    # their terms count in it, and their shapes are keyed apart as "SHAPE@DEVICE".
    s = gpu_spec(dataset_dir)
    facts = s["fit"]["facts"]
    _, _, x = fit(dataset_dir, fake_tool)
    devices = {"NVIDIA H200": dict(facts, memory_gbps=facts["memory_gbps"] / 2)}
    _, times, half = gpu_model.fit_runs(
        data.Dataset(dataset_dir),
        s["fit"]["runs"],
        fake_tool,
        facts,
        gpu_model.models_of(s),
        devices,
    )
    assert sorted(times) == ["2x64x64@NVIDIA H200", "300x256x512@NVIDIA H200"]
    key = ("300x256x512", "fused", "strict")
    assert half[("300x256x512@NVIDIA H200",) + key[1:]][1] == pytest.approx(2 * x[key][1])


def test_a_model_never_timed_is_an_error(dataset_dir, fake_tool):
    s = gpu_spec(dataset_dir)
    with pytest.raises(data.DataError, match="vendor/tf32 never timed"):
        gpu_model.fit_runs(
            data.Dataset(dataset_dir),
            s["fit"]["runs"],
            fake_tool,
            s["fit"]["facts"],
            [("vendor", "tf32")],
        )


def test_main_prints_the_fit(dataset_dir, fake_tool, capsys):
    assert gpu_model.main(["--replay-tool", str(fake_tool), "--data", str(dataset_dir)]) == 0
    out = capsys.readouterr().out
    assert "vendor/3xtf32: " in out and "model error median" in out


def test_held_out_runs_are_judged_with_the_fitted_coefficients(dataset_dir, fake_tool, capsys):
    args = ["--replay-tool", str(fake_tool), "--data", str(dataset_dir)]
    assert gpu_model.main(args + ["--held-out", "gpu-sweep", "--memory-gbps", "200"]) == 0
    out = capsys.readouterr().out
    # The sweep timed vendor/strict alone among the fitted models, at one shape.
    assert out.splitlines()[0].startswith("vendor/strict: ")
    assert "(1 shapes)" in out.splitlines()[1]
