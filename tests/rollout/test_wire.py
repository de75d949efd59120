"""The wire encoding of env answers: what an env returns comes back exactly, tuples and arrays included."""

from __future__ import annotations

import json
import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from agentbench_crbc.rollout.hosting.wire import decode, encode, error_line

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


@given(values)
def test_json_round_trip_is_exact(v):
    back = decode(json.loads(json.dumps(encode(v))))
    assert back == v and type(back) is type(v)


def test_tuples_arrays_numpy_scalars_and_non_finite_floats():
    anchor = (28, (27, 33))
    img = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    info = {"anchor": anchor, "n": np.int64(3), "x": math.inf, "bad": float("nan"), "obj": object}
    back = decode(json.loads(json.dumps(encode({"obs": img, "info": info}))))
    assert back["info"]["anchor"] == anchor and isinstance(back["info"]["anchor"][1], tuple)
    assert back["obs"].dtype == np.uint8 and np.array_equal(back["obs"], img) and back["obs"].flags.writeable
    assert back["info"]["n"] == 3 and type(back["info"]["n"]) is int
    assert back["info"]["x"] == math.inf and math.isnan(back["info"]["bad"])
    assert back["info"]["obj"] == repr(object)


def test_error_lines_keep_only_the_last_line():
    tb = 'Traceback (most recent call last):\n  File "/secret/path.py", line 3\nValueError: bad move\n'
    assert error_line(tb) == "ValueError: bad move" and error_line("") == "error"
