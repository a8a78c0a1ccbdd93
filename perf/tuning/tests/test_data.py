# SPDX-License-Identifier: Apache-2.0
import json

import pytest

from tuning import data


def test_fixture_dataset_is_valid(dataset_dir):
    ds = data.Dataset(dataset_dir)
    assert ds.check() == 4
    rows = ds.rows("gpu-random7")
    assert len(rows) == 13
    assert rows[0]["shape"] == "2x64x64" and rows[0]["median_ms"] == 0.021
    assert ds.split("gpu-random7") == {"2x64x64": "held-out", "300x256x512": "fit"}
    assert ds.split("gpu-sweep") == {}
    assert [r["impl"] for r in ds.kernelbench()] == ["Model eager", "ModelNew"]


def test_round_trip_keeps_every_float(tmp_path):
    row = dict(
        M=3,
        K=5,
        N=7,
        precision="3xtf32",
        planning="measure",
        path="auto",
        source="ours",
        ran="fused_sm90",
        precision_ran="3xtf32",
        median_ms=0.1 + 0.2,
        min_ms=1 / 3,
        plan_ms=None,
        rel_err=2.267439873e-07,
        chosen="fused_sm90/3xtf32/0",
    )
    peer = dict(
        M=3,
        K=5,
        N=7,
        path="torch eager fp32 (reference model)",
        source="peer",
        median_ms=0.04999999999999999,
        min_ms=None,
        rel_err=None,
    )
    path = tmp_path / "run.csv"
    data.write_run(path, [row, peer])
    back = data.read_run(path)
    assert back[0]["median_ms"] == 0.1 + 0.2 and back[0]["min_ms"] == 1 / 3
    assert back[0]["plan_ms"] is None and back[0]["chosen"] == "fused_sm90/3xtf32/0"
    assert back[1]["median_ms"] == 0.04999999999999999 and back[1]["precision"] == ""
    assert data.run_text(back) == path.read_text()


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace("M,K,N,", "M,K,", 1), ":1: header"),
        (lambda t: t.replace("0.021,", "fast,", 1), ":2: median_ms 'fast' is not a number"),
        (
            lambda t: t.replace(",ours,vendor,strict,0.021", ",mine,vendor,strict,0.021"),
            ":2: source 'mine' is not one of ours, peer",
        ),
        (
            lambda t: t.replace("2,64,64,strict,measure", "2,64,64,fp16,measure"),
            ":3: precision 'fp16' is not one of strict, tf32, 3xtf32",
        ),
        (lambda t: t.replace(",0.0105,", ",,", 1), ":3: median_ms is empty"),
        (lambda t: t.replace("0.021,0.02,0.5,1e-07,\n", "0.021,0.02\n", 1), ":2: 11 cells"),
    ],
)
def test_malformed_run_file_is_named(dataset_dir, edit, message):
    path = dataset_dir / "runs" / "gpu-random7.csv"
    path.write_text(edit(path.read_text()))
    with pytest.raises(data.DataError) as e:
        data.Dataset(dataset_dir).rows("gpu-random7")
    assert str(path) + message in str(e.value)


def test_malformed_tables_are_named(dataset_dir):
    (dataset_dir / "splits.csv").write_text("seed,shape,set\n7,2x64x64,maybe\n")
    with pytest.raises(data.DataError, match=r"splits.csv:2: set 'maybe'"):
        data.Dataset(dataset_dir).check()
    runs = dataset_dir / "runs.csv"
    runs.write_text(runs.read_text().replace(",grid,", ",whatever,"))
    with pytest.raises(data.DataError, match=r"runs.csv:4: purpose 'whatever'"):
        data.Dataset(dataset_dir)


def test_unknown_run_and_stray_file(dataset_dir):
    ds = data.Dataset(dataset_dir)
    with pytest.raises(data.DataError, match="no run 'nope'"):
        ds.rows("nope")
    (dataset_dir / "runs" / "stray.csv").write_text("")
    with pytest.raises(data.DataError, match="stray"):
        data.Dataset(dataset_dir).check()


def perf_json(shape, precision, results):
    M, K, N = (int(v) for v in shape.split("x"))
    return dict(config=dict(shape=shape, M=M, K=K, N=N, precision=precision), results=results)


def test_add_a_compare_folder(dataset_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    measured = [
        dict(algorithm="fused", precision="strict", variant=0, chosen=False),
        dict(algorithm="vendor_lt", precision="strict", variant=2, chosen=True),
    ]
    (out / "ours_4x8x16_3xtf32.json").write_text(
        json.dumps(
            perf_json(
                "4x8x16",
                "3xtf32",
                [
                    dict(
                        shape="4x8x16",
                        algorithm_requested="auto",
                        planning="measure",
                        algorithm_ran="vendor_lt",
                        precision_ran="strict",
                        median_ms=0.0336959995,
                        min_ms=0.03,
                        plan_ms=79.0,
                        rel_err=2.9e-07,
                        measurements=measured,
                    ),
                    dict(
                        shape="4x8x16",
                        algorithm_requested="fused_sm90",
                        algorithm_ran="fused_sm90",
                        precision_ran="3xtf32",
                        median_ms=0.075,
                        min_ms=0.07,
                        refused="",
                    ),
                    dict(
                        shape="4x8x16",
                        algorithm_requested="skinny_sm90",
                        refused="needs sm_90a",
                        median_ms=None,
                    ),
                ],
            )
        )
    )
    (out / "peers.json").write_text(
        json.dumps(
            [
                dict(
                    shape="4x8x16",
                    peer="torch eager tf32",
                    median_ms=0.02,
                    min_ms=0.019,
                    rel_err=3e-4,
                )
            ]
        )
    )
    (out / "compare-meta.json").write_text(
        json.dumps(
            dict(
                date="2026-02-03T04:05:06Z",
                machine=dict(kind="gpu", name="NVIDIA H200"),
                kokkos=dict(kokkos_version="4.6.1"),
                git_commit="eeeeeee",
                git_dirty=False,
                command="python3 perf/compare.py 4x8x16",
            )
        )
    )
    assert (
        data.main(
            [
                "--data",
                str(dataset_dir),
                "add",
                str(out),
                "--run-id",
                "new-run",
                "--machine",
                "h200",
                "--purpose",
                "sweep",
            ]
        )
        == 0
    )
    ds = data.Dataset(dataset_dir)
    assert ds.check() == 5
    run = ds.run("new-run")
    assert (run["date"], run["commit"], run["kokkos"], run["dirty"]) == (
        "2026-02-03",
        "eeeeeee",
        "4.6.1",
        "false",
    )
    rows = ds.rows("new-run")
    assert [(r["path"], r["source"], r["ran"], r["precision_ran"]) for r in rows] == [
        ("auto", "ours", "vendor_lt", "strict"),
        ("fused_sm90", "ours", "fused_sm90", "3xtf32"),
        ("torch eager tf32", "peer", "", ""),
    ]
    assert rows[0]["median_ms"] == 0.0336959995 and rows[0]["chosen"] == "vendor_lt/strict/2"
    assert rows[1]["planning"] == "estimate" and rows[1]["precision"] == "3xtf32"


def test_add_without_results_fails(dataset_dir, tmp_path, capsys):
    assert (
        data.main(
            ["--data", str(dataset_dir), "add", str(tmp_path), "--run-id", "x", "--machine", "h200"]
        )
        == 1
    )
    assert "no run.csv and no ours_*.json" in capsys.readouterr().err


def test_explicit_paths_keep_the_least_median_of_what_ran(dataset_dir):
    rows = data.Dataset(dataset_dir).rows("gpu-random7")
    paths = data.explicit_paths(rows + [dict(rows[2], median_ms=0.008)])
    # auto and the peers are no explicit paths; a path timed twice keeps its least median.
    assert paths[("2x64x64", "fused_skinny", "strict")] == 0.008
    assert paths[("2x64x64", "vendor", "3xtf32")] == 0.025
    assert len(paths) == 6
    assert all(
        data.FLOORS[f] <= set(data.PRECISIONS) and f in data.FLOORS[f] for f in data.PRECISIONS
    )
