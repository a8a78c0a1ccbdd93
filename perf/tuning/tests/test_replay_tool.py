# SPDX-License-Identifier: Apache-2.0
import subprocess

import pytest

from tuning import replay_tool


def test_records_skip_comments_and_blank_lines():
    text = "# shape floor path precision\n\n2x64x64 strict fused strict\n  \n"
    assert replay_tool.records(text) == [["2x64x64", "strict", "fused", "strict"]]


def test_terms_through_the_tool(fake_tool):
    host = replay_tool.terms(fake_tool, replay_tool.host_options("generic", 2), ["2x1000x1000"], 2)
    assert host[("2x1000x1000", "fused")] == pytest.approx([1.0, 2.0, 2.0])
    facts = dict(multiprocessors=132, fp32_gflops=60000, memory_gbps=50)
    gpu = replay_tool.terms(fake_tool, replay_tool.rate_options(facts), ["2x1000x1000"], 3)
    # The fake tool counts the second term at --memory-gbps: the rates reached it.
    assert gpu[("2x1000x1000", "vendor", "3xtf32")] == pytest.approx([1.0, 4.0, 2.0])


def test_golden_only_where_the_tool_has_it(fake_tool, monkeypatch):
    assert replay_tool.golden(fake_tool) is None
    monkeypatch.setenv("FAKE_GOLDEN", "1")
    assert replay_tool.golden(fake_tool).startswith("profile,shape,floor,path\n")


def test_a_failing_tool_raises(fake_tool):
    # Without --terms the fake tool exits with 2.
    with pytest.raises(subprocess.CalledProcessError):
        replay_tool.choices(fake_tool, [], ["2x64x64"])
