# SPDX-License-Identifier: Apache-2.0
import pytest

from tuning import data, host_model


def test_fit_on_the_fixture_through_the_tool(dataset_dir, fake_tool):
    ds = data.Dataset(dataset_dir)
    c, times, x = host_model.fit_runs(ds, ["host-grid"], fake_tool, 2)
    assert len(times) == 12
    assert c["fused"] == pytest.approx([0.01, 0.002, 0.0], abs=1e-12)
    assert c["fused_skinny"] == pytest.approx([0.005, 0.004, 0.001], rel=1e-9)
    lines = host_model.report_lines(c, times, x)
    assert lines[0] == "fused: 0.01, 0.002, 0"
    assert lines[2] == "fused_skinny: 0.005, 0.004, 0.001"


def test_runs_without_both_kernels(dataset_dir, fake_tool):
    with pytest.raises(data.DataError, match="none timed both host kernels"):
        host_model.fit_runs(data.Dataset(dataset_dir), ["gpu-sweep"], fake_tool, 2)
