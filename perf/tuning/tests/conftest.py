# SPDX-License-Identifier: Apache-2.0
"""The fixture dataset (fixture/: four runs of a few shapes) and a stand-in for
fused_linear_replay_rule, so that the tools are tested without a build."""
import shutil
import stat
import sys
import textwrap
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parent / "fixture"

# --terms: [1, M K N / 1e6, M N / 1e3] for both host kernels; with the GPU rates instead of
# --host, the same for four GPU paths, the second term counted at --memory-gbps (100: as is);
# --golden where FAKE_GOLDEN is set.
FAKE_TOOL = textwrap.dedent(
    """\
    import os, sys
    args = sys.argv[1:]
    golden = os.environ.get("FAKE_GOLDEN")
    if args == ["--help"]:
        sys.exit("usage: fused_linear_replay_rule [--host B [--threads T] [--terms]]"
                 + (" [--golden]" if golden else "") + " [SHAPE...]")
    if args == ["--golden"] and golden:
        print("profile,shape,floor,path")
        print("h200,1x64x64,strict,fused_skinny")
        sys.exit(0)
    if "--terms" not in args:
        sys.exit(2)
    print("# shape algorithm terms")
    host = "--host" in args
    gbps = float(args[args.index("--memory-gbps") + 1]) if "--memory-gbps" in args else 100
    paths = (("fused", ""), ("fused_skinny", "")) if host else (
        ("fused", " strict"), ("fused_skinny", " strict"), ("vendor", " strict"),
        ("vendor", " 3xtf32"))
    for line in sys.stdin.read().split():
        M, K, N = (int(v) for v in line.split("x"))
        for path, precision in paths:
            print(line, path + precision, 1, M * K * N / 1e6 * 100 / gbps, M * N / 1e3)
"""
)


@pytest.fixture
def dataset_dir(tmp_path):
    """A writable copy of the fixture dataset."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "data"))


@pytest.fixture
def fake_tool(tmp_path):
    path = tmp_path / "fake_replay_rule"
    path.write_text(f"#!{sys.executable}\n" + FAKE_TOOL)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path
