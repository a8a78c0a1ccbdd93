# SPDX-License-Identifier: Apache-2.0
import argparse

import pytest

from tuning import data, names


def test_shapes_are_spelled_one_way():
    assert names.parse_shape("1024x8192x8192") == (1024, 8192, 8192)
    assert names.parse_shape("01X2x3") == (1, 2, 3)
    assert names.shape_arg("01X2x3") == "1x2x3"
    assert names.shape_name((4, 5, 6)) == "4x5x6"


@pytest.mark.parametrize("text", ["1x2", "1x2x3x4", "0x2x3", "-1x2x3", "ax2x3", ""])
def test_what_is_not_a_shape(text):
    with pytest.raises(ValueError, match="is not a shape MxKxN"):
        names.parse_shape(text)
    with pytest.raises(argparse.ArgumentTypeError, match="is not a shape MxKxN"):
        names.shape_arg(text)
    # The dataset's reader names it as a schema error.
    with pytest.raises(data.DataError, match="is not a shape MxKxN"):
        data.parse_shape(text)
