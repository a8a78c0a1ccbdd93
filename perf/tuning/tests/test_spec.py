# SPDX-License-Identifier: Apache-2.0
import json

import pytest

from tuning import data, spec


def test_the_fixture_specs_load(dataset_dir):
    gpu = spec.load(dataset_dir / "rules" / "gpu.json")
    host = spec.load(dataset_dir / "rules" / "host.json")
    assert gpu["fit"]["runs"] and host["fit"]["runs"]


@pytest.mark.parametrize(
    "constant, message",
    [
        (dict(name="x", type="double", value=1.0), "needs name, type"),
        (dict(name="x", type="float", value=1.0, why=""), "needs name, type"),
    ],
)
def test_a_constant_needs_every_field(tmp_path, constant, message):
    path = tmp_path / "rule.json"
    path.write_text(json.dumps(dict(constants=[constant])))
    with pytest.raises(data.DataError, match=message):
        spec.load(path)


def test_unreadable_spec_names_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{")
    with pytest.raises(data.DataError, match="broken.json"):
        spec.load(path)
    with pytest.raises(data.DataError, match="missing.json"):
        spec.load(tmp_path / "missing.json")
