# SPDX-License-Identifier: Apache-2.0
import json

from tuning import rules


def generate(dataset_dir, tool, tmp_path):
    out = tmp_path / "rules"
    out.mkdir(exist_ok=True)
    return out, rules.generate(dataset_dir, tool, out)


def test_gpu_header(dataset_dir, fake_tool, tmp_path):
    out, (files, notes) = generate(dataset_dir, fake_tool, tmp_path)
    text = files[out / "GpuRule.hpp"]
    lines = text.splitlines()
    assert lines[0] == "// SPDX-License-Identifier: Apache-2.0"
    assert (
        "// Provenance: library bbbbbbb, NVIDIA H200; coefficients fitted on the runs "
        "(perf/data/runs.csv)" in lines
    )
    assert "//   gpu-random7." in lines
    assert "struct GpuRule {" in lines
    assert "  static constexpr int terms = 3;" in lines
    # Every model's array, in gpu.json's order, then the rates of the fit and the constants.
    names = [line.split("double ")[1].split("[")[0] for line in lines if "[terms]" in line]
    assert names == ["fused_ms", "fused_skinny_ms", "vendor_ms", "vendor_tf32x3_ms"]
    assert "  static constexpr double fitted_memory_gbps = 100.0;" in lines
    assert "  static constexpr double fitted_fp32_gflops = 1000.0;" in lines
    # Exact fits: the best path is the least predicted, Measure's margin the slack alone.
    assert "  static constexpr double measure_within = 1.1;" in lines
    i = lines.index("  static constexpr std::int64_t tile = 128;")
    assert lines[i - 1] == "  /// GPUs: the tile the model counts waves in."
    assert max(len(line) for line in lines) <= 100
    assert text.endswith("#endif\n")
    assert notes == [f"{fake_tool} has no --golden: dispatch-golden.csv not generated"]


def test_host_header_carries_the_fit(dataset_dir, fake_tool, tmp_path):
    out, (files, _) = generate(dataset_dir, fake_tool, tmp_path)
    lines = files[out / "HostRule.hpp"].splitlines()
    assert "  static constexpr int terms = 3;" in lines
    assert "  static constexpr double fused_ms[terms] = {0.01, 0.002, 0};" in lines
    assert "  static constexpr double skinny_ms[terms] = {0.005, 0.004, 0.001};" in lines
    assert "  /// Rows from which an optimised BLAS wins." in lines
    assert "//   host-grid." in lines


def test_long_arrays_wrap():
    lines = rules.array_lines(
        "fused_ms",
        [0.004649, 1.05e-07, 4.961e-08, 1.245e-08, 2.578e-07, 0.0001683, 3.244e-07, 0, 0],
    )
    assert lines == [
        "  static constexpr double fused_ms[terms] = {",
        "      0.004649, 1.05e-07, 4.961e-08, 1.245e-08, 2.578e-07, 0.0001683, "
        "3.244e-07, 0, 0};",
    ]


def test_write_then_check(dataset_dir, fake_tool, tmp_path, capsys):
    out = tmp_path / "rules"
    out.mkdir()
    args = ["--replay-tool", str(fake_tool), "--data", str(dataset_dir), "--rules-dir", str(out)]
    assert rules.main(["--check"] + args) == 1
    assert rules.main(["--write"] + args) == 0
    assert rules.main(["--check"] + args) == 0
    # A re-fit: new times give new coefficients, and the committed header is then stale.
    grid = dataset_dir / "runs" / "host-grid.csv"
    grid.write_text(grid.read_text().replace("0.0102,0.0102", "0.0302,0.0302"))
    capsys.readouterr()
    assert rules.main(["--check"] + args) == 1
    assert "-  static constexpr double fused_ms[terms]" in capsys.readouterr().out


def test_golden_table_where_the_tool_has_it(dataset_dir, fake_tool, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_GOLDEN", "1")
    out, (files, notes) = generate(dataset_dir, fake_tool, tmp_path)
    assert notes == []
    assert (
        files[out / "dispatch-golden.csv"]
        == "profile,shape,floor,path\nh200,1x64x64,strict,fused_skinny\n"
    )


def test_provenance_runs_must_exist(dataset_dir, fake_tool, tmp_path):
    spec = json.loads((dataset_dir / "rules" / "gpu.json").read_text())
    spec["fit"]["runs"].append("gone")
    (dataset_dir / "rules" / "gpu.json").write_text(json.dumps(spec))
    assert (
        rules.main(
            [
                "--check",
                "--replay-tool",
                str(fake_tool),
                "--data",
                str(dataset_dir),
                "--rules-dir",
                str(tmp_path),
            ]
        )
        == 1
    )
