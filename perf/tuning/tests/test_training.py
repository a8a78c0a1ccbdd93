# SPDX-License-Identifier: Apache-2.0
"""The backward and training-step records: the perf program's and torch_peers.py's JSON of
--pass, compare.py --pass's folder, kernelbench_eval.py --train's rows, into the dataset and
RESULTS.md."""
import json

import pytest

import compare
from tuning import data, results
from tuning.names import REFERENCE_PEER


def perf_step_json(precision="strict"):
    """The perf program's --pass step JSON of one shape: auto and vendor ran, fused refused."""
    ran = dict(
        ran_y="vendor",
        precision_ran_y=precision,
        ran_dx="vendor",
        precision_ran_dx=precision,
        ran_dw="vendor",
        precision_ran_dw=precision,
    )
    return dict(
        config=dict(shape="4x8x16", M=4, K=8, N=16, precision=precision, **{"pass": "step"}),
        results=[
            dict(
                shape="4x8x16",
                algorithm_requested="auto",
                planning="estimate",
                median_ms=0.5,
                min_ms=0.45,
                rel_err=2e-7,
                **ran,
                **{"pass": "step"},
            ),
            dict(
                shape="4x8x16",
                algorithm_requested="vendor",
                planning="estimate",
                median_ms=0.625,
                min_ms=0.6,
                rel_err=3e-7,
                **ran,
                **{"pass": "step"},
            ),
            dict(shape="4x8x16", algorithm_requested="fused", refused="no gradient path"),
        ],
    )


def peers_step_json():
    return [
        dict(
            shape="4x8x16",
            peer=REFERENCE_PEER,
            source="peer",
            precision=None,
            ran=None,
            median_ms=1.0,
            min_ms=0.9,
            rel_err=1e-7,
            **{"pass": "step"},
        ),
        dict(
            shape="4x8x16",
            peer="fused_linear module strict",
            source="module",
            precision="strict",
            ran="y=fused/strict",
            median_ms=0.8,
            min_ms=0.7,
            rel_err=2e-7,
            **{"pass": "step"},
        ),
    ]


@pytest.fixture
def step_folder(tmp_path):
    """compare.py --pass step's --out folder, before tabulating (no training.csv yet)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "step_4x8x16.json").write_text(json.dumps(perf_step_json()))
    (out / "peers-step.json").write_text(json.dumps(peers_step_json()))
    (out / "compare-meta.json").write_text(
        json.dumps(
            dict(
                date="2026-02-03T04:05:06Z",
                machine=dict(kind="cpu", cpu="AMD EPYC", name="AMD EPYC, 2 cores"),
                threads=2,
                kokkos=dict(kokkos_version="3.4.1"),
                git_commit="fffffff",
                git_dirty=False,
                command="python3 perf/compare.py --device cpu --pass step 4x8x16",
                **{"pass": "step"},
            )
        )
    )
    return out


def add(dataset_dir, out, run_id="host-step", *more):
    argv = ["--data", str(dataset_dir), "add", str(out), "--run-id", run_id, "--machine"]
    return data.main(argv + ["host-2c", *more])


def test_rows_of_the_perf_program_and_the_peers(step_folder):
    rows = data.training_from_compare_dir(step_folder)
    assert [(r["source"], r["path"], r["precision"]) for r in rows] == [
        ("ours", "auto", "strict"),
        ("ours", "vendor", "strict"),
        ("peer", REFERENCE_PEER, None),
        ("module", "fused_linear module strict", "strict"),
    ]
    assert rows[0]["ran"] == "y=vendor/strict dx=vendor/strict dw=vendor/strict"
    assert rows[0]["pass"] == "step" and (rows[0]["M"], rows[0]["K"], rows[0]["N"]) == (4, 8, 16)
    # The forward's reader leaves a training folder alone: no ours_*.json there.
    assert data.from_compare_dir(step_folder) == []


def test_compare_tabulates_and_the_dataset_adds_it(step_folder, dataset_dir, capsys):
    argv = ["--device", "cpu", "--pass", "step", "--no-run", "--out", str(step_folder), "4x8x16"]
    assert compare.main(argv) == 0
    out = capsys.readouterr().out
    assert "C++ auto 0.5000 ms (x2.00 eager), module 0.8000 ms (x1.25 eager)" in out
    assert len(data.read_training(step_folder / "training.csv")) == 4
    assert add(dataset_dir, step_folder) == 0
    ds = data.Dataset(dataset_dir)
    assert ds.check() == 5
    run = ds.run("host-step")
    assert (run["purpose"], run["commit"], run["threads"]) == ("training", "fffffff", 2)
    assert [r["median_ms"] for r in ds.training("host-step")] == [0.5, 0.625, 1.0, 0.8]
    # Added again: its rows are replaced, not repeated.
    assert add(dataset_dir, step_folder) == 0
    assert len(data.Dataset(dataset_dir).training()) == 4


def test_results_show_the_step_and_name_the_missing_runs(step_folder, dataset_dir):
    assert add(dataset_dir, step_folder) == 0
    lines = results.render(data.Dataset(dataset_dir)).splitlines()
    host = lines.index("## Host: AMD EPYC, 2 cores")
    assert "### Backward and training step" in lines[host:]
    assert (
        "| 4x8x16 | step | strict | y=vendor/strict dx=vendor/strict dw=vendor/strict | 0.5000 "
        "| 0.8000 | 1.0000 | 2.00 | 1.25 |"
    ) in lines
    # The H200 has a sweep and no training run: the page says so.
    h200 = lines[lines.index("## NVIDIA H200") : host]
    assert any(x.startswith("No backward or training-step run of this machine") for x in h200)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace(",step,", ",sideways,", 1), ":2: pass 'sideways' is not one of"),
        (lambda t: t.replace(",ours,", ",theirs,", 1), ":2: source 'theirs' is not one of"),
        (lambda t: t.replace("host-step,", "nobody,", 1), ":2: run 'nobody' is not in runs.csv"),
    ],
)
def test_malformed_training_rows_are_named(step_folder, dataset_dir, edit, message):
    assert add(dataset_dir, step_folder) == 0
    path = dataset_dir / "training.csv"
    path.write_text(edit(path.read_text()))
    with pytest.raises(data.DataError) as e:
        data.Dataset(dataset_dir).check()
    assert str(path) + message in str(e.value)


def test_a_training_run_without_rows_fails_the_check(dataset_dir):
    runs = dataset_dir / "runs.csv"
    runs.write_text(runs.read_text() + "lonely,2026-01-09,h200,H200,,4.6.1,a,false,training,,x\n")
    with pytest.raises(data.DataError, match="run 'lonely' has no rows in training.csv"):
        data.Dataset(dataset_dir).check()


def test_add_kernelbench_with_the_step_problem(dataset_dir, tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    timing = dict(mean_ms=3.0, std_ms=0.1, min_ms=2.9, max_ms=3.2)
    rows = [
        dict(problem=p, shape="1024x8192->8192", impl=i, precision="strict", correct=c, **timing)
        for p in ("seed", "seed-step")
        for i, c in (("Model eager", ""), ("ModelNew", "5/5"))
    ]
    # Not timed (no torch.compile): no row in the dataset.
    untimed = dict(mean_ms="", std_ms="", min_ms="", max_ms="")
    rows.insert(1, dict(rows[0], impl="Model compile", **untimed))
    info = dict(algorithm="vendor_lt", precision="strict")
    details = [
        dict(problem=p, precision="strict", algorithm="auto", run_info=info)
        for p in ("seed", "seed-step")
    ]
    env = dict(
        date="2026-02-04T01:02:03Z",
        gpu="NVIDIA H200",
        threads=16,
        fused_linear=dict(kokkos_version="4.6.1"),
        commit="abcdef0",
        argv=["--train", "--out", "kb"],
    )
    doc = dict(environment=env, rows=rows, details=details)
    (kb / "kernelbench.json").write_text(json.dumps(doc))
    argv = ["--data", str(dataset_dir), "add-kernelbench", str(kb), "--run-id", "kb-step"]
    assert data.main(argv + ["--machine", "h200"]) == 0
    ds = data.Dataset(dataset_dir)
    assert ds.check() == 5
    assert ds.run("kb-step")["command"] == "python3 perf/kernelbench_eval.py --train --out kb"
    mine = [r for r in ds.kernelbench() if r["run_id"] == "kb-step"]
    assert [(r["problem"], r["impl"], r["ran"], r["M"]) for r in mine] == [
        ("seed", "Model eager", "", 1024),
        ("seed", "ModelNew", "vendor_lt/strict", 1024),
        ("seed-step", "Model eager", "", 1024),
        ("seed-step", "ModelNew", "vendor_lt/strict", 1024),
    ]
    # The step's speed-up is over the step's own eager baseline.
    text = results.render(ds)
    assert "| seed-step | 1024x8192x8192 | ModelNew | strict | vendor_lt/strict | 5/5 |" in text


def test_add_the_perf_programs_json_alone(dataset_dir, tmp_path):
    out = tmp_path / "gpu"
    out.mkdir()
    doc = perf_step_json("3xtf32")
    doc["config"]["kokkos_version"] = "4.6.1"
    (out / "step_4x8x16_3xtf32.json").write_text(json.dumps(doc))
    assert add(dataset_dir, out, "gpu-step") == 0
    ds = data.Dataset(dataset_dir)
    assert ds.check() == 5
    assert ds.run("gpu-step")["kokkos"] == "4.6.1" and len(ds.run("gpu-step")["date"]) == 10
    assert [(r["path"], r["precision"]) for r in ds.training("gpu-step")] == [
        ("auto", "3xtf32"),
        ("vendor", "3xtf32"),
    ]
