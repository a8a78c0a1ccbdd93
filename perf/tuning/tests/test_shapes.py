# SPDX-License-Identifier: Apache-2.0
from tuning import data, shapes


def test_same_seed_same_shapes():
    a, _ = shapes.draw(40, 5, "cuda", 0.5)
    b, _ = shapes.draw(40, 5, "cuda", 0.5)
    c, _ = shapes.draw(40, 6, "cuda", 0.5)
    assert a == b and a != c
    assert len({s["shape"] for s in a}) == 40
    assert {s["split"] for s in a} == {"fit", "held-out"}


def test_bounds_hold():
    drawn, limits = shapes.draw(60, 11, "cpu", 1.0, max_work=1 << 31)
    assert limits["max_work"] == 1 << 31
    for s in drawn:
        assert s["M"] * s["K"] * s["N"] <= 1 << 31
        assert shapes.bytes_needed(s["M"], s["K"], s["N"]) <= limits["max_bytes"]
        assert 1 <= s["M"] <= 16384 and 16 <= s["K"] <= 65536 and 16 <= s["N"] <= 65536
        assert s["split"] == "held-out"


def test_the_studies_splits_regenerate():
    """perf/data/splits.csv is what the generator draws for the studies' seeds and bounds."""
    splits = data.Dataset().splits()
    for seed, count, device, held_out, max_work in (
        (21, 48, "cuda", 0.5, None),
        (33, 24, "cuda", 1.0, None),
        (39, 48, "cpu", 1.0, 1 << 31),
    ):
        drawn, _ = shapes.draw(count, seed, device, held_out, max_work=max_work)
        assert {s["shape"]: s["split"] for s in drawn} == splits[str(seed)]


def test_command_line(capsys):
    assert shapes.main(["--seed", "3", "--count", "4", "--csv"]) == 0
    lines = capsys.readouterr().out.split()
    drawn, _ = shapes.draw(4, 3, "cuda", 0.5)
    assert lines == [f"3,{s['shape']},{s['split']}" for s in drawn]
