"""The tokens of plain data in a transform's recipe (:func:`guideloom.export.recipe.values.
data_token`): made without dask, each value with its type, the same in every interpreter, and
an older recipe's dask-made tokens told apart in the update's words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from guideloom.export.recipe.compare import differences
from guideloom.export.recipe.values import DATA_TOKEN_PREFIX, data_token, value_token

ROOT = Path(__file__).resolve().parents[1]

#: Values that differ from each other, some only by type, order, framing or sign.
DISTINCT = {
    "int 1": 1, "True": True, "float 1.0": 1.0, "np.float64(1)": np.float64(1),
    "np.int64(1)": np.int64(1), "str '1'": "1", "bytes b'1'": b"1", "None": None,
    "complex 1": 1 + 0j, "list [1, 2]": [1, 2], "tuple (1, 2)": (1, 2),
    "set {1, 2}": {1, 2}, "frozenset {1, 2}": frozenset({1, 2}),
    "dict a, b": {"a": 1, "b": 2}, "dict b, a": {"b": 2, "a": 1},
    "0.0": 0.0, "-0.0": -0.0, "('ab', 'c')": ("ab", "c"), "('a', 'bc')": ("a", "bc"),
    "[[1], 2]": [[1], 2], "[1, [2]]": [1, [2]], "int64 arange(4)": np.arange(4, dtype=np.int64),
    "int64 (2, 2)": np.arange(4, dtype=np.int64).reshape(2, 2),
    "int32 arange(4)": np.arange(4, dtype=np.int32), "'>i8' arange(4)": np.arange(4, dtype=">i8"),
    "dtype f8": np.dtype("f8"), "dtype f4": np.dtype("f4"), "empty list": [], "empty tuple": (),
    "empty str": "", "empty array": np.empty(0),
}

#: Plain data whose token must not depend on the process: sets of strings (their order follows
#: the string hash seed), equal strings that are distinct objects, arrays, nested containers.
STABLE = {
    "set of strings": {"alpha", "beta", "gamma", "delta"},
    "strings": ["".join(["ab", "c"]), "abc", "abc"],
    "nested": {"limits": (-1.0, 1.0), "names": frozenset({"x", "y"}), "w": np.linspace(0, 1, 5)},
    "fortran array": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
    "scalars": [np.float32(0.1), np.uint8(7), 2**70, -3, "é", b"\x00"],
}

PRINT_TOKENS = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from tests.test_recipe_data_tokens import STABLE
from guideloom.export.recipe.values import value_token
print(json.dumps({k: value_token(v) for k, v in STABLE.items()}))
print(json.dumps("dask" in sys.modules))
"""


def test_plain_values_of_other_types_order_or_framing_get_other_tokens() -> None:
    tokens = {name: data_token(value) for name, value in DISTINCT.items()}
    assert len(set(tokens.values())) == len(tokens), tokens
    assert all(t.startswith(DATA_TOKEN_PREFIX) for t in tokens.values())
    assert value_token([1, 2]) == data_token([1, 2])  # the recipe takes this path for data
    assert data_token({2, 1}) == data_token({1, 2})  # a set has no order of its own
    c_order = np.arange(6.0).reshape(2, 3)
    assert data_token(np.asfortranarray(c_order)) == data_token(c_order)  # the same values
    assert data_token(c_order) != data_token(c_order + 1)


def test_another_interpreter_with_another_hash_seed_gives_the_same_tokens_without_dask() -> None:
    here = {k: value_token(v) for k, v in STABLE.items()}
    for seed in ("1", "2"):
        done = subprocess.run([sys.executable, "-c", PRINT_TOKENS, str(ROOT)],
                              capture_output=True, text=True, timeout=120, cwd=ROOT,
                              env={**os.environ, "PYTHONHASHSEED": seed,
                                   "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, done.stderr
        tokens, dask_loaded = (json.loads(line) for line in done.stdout.splitlines())
        assert tokens == here, seed
        assert dask_loaded is False  # plain data never loads dask


def test_a_recipe_recorded_with_dask_tokens_says_why_it_differs() -> None:
    """A recipe recorded before plain data was hashed here has dask's token for the same
    value: the update names it as hashed another way, not as a changed value."""
    old = {"name": "m:t", "value m.SCALE": "5d41402abc4b2a76b9719d911017c592"}
    new = {"name": "m:t", "value m.SCALE": data_token(2.0)}
    said = differences("transform 'force'", old, new)
    assert said == ("transform 'force': m.SCALE: recorded by an older guideloom "
                    "(hashed another way)")
    changed = differences("transform 'force'", {**new}, {**new, "value m.SCALE": data_token(3.0)})
    assert changed == "transform 'force': m.SCALE changed"
