# SPDX-License-Identifier: Apache-2.0
"""The rule specs (perf/data/rules/gpu.json, host.json): their loader and the C++ types their
constants may have. tuning.rules writes the headers from them; the models read which runs to fit
and with which facts."""
import json
from pathlib import Path

from .data import DataError

CPP_TYPES = {"int64": "std::int64_t", "double": "double", "int": "int"}


def load(path):
    """The spec at `path`, each constant and threshold checked for name, type, value and why."""
    try:
        spec = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: {e}") from None
    for c in spec.get("thresholds", []) + spec.get("constants", []):
        missing = {"name", "type", "value", "why"} - set(c)
        if missing or c["type"] not in CPP_TYPES:
            raise DataError(
                f"{path}: constant {c.get('name')}: needs name, type "
                f"({', '.join(CPP_TYPES)}), value and why"
            )
    return spec


def gpu_models(spec):
    """The (path, precision) models of gpu.json."""
    return [(m["path"], m["precision"]) for m in spec["models"]]
