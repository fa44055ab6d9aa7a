"""Tracked numbers are written at a fixed precision (pipeline.base.files.SIGNIFICANT_DIGITS), the same decimal text
for a value on every machine. (That the values themselves have the same bits on every machine, CPU, BLAS kernel and
thread count is tests/test_machine_independence.py's.)"""

from __future__ import annotations

import json

import numpy as np

from pipeline.base.files import SIGNIFICANT_DIGITS, read_columns, round_significant, write_columns, write_json

# The same Procrustes disparity computed on two CPUs: they differ in the last bit.
DISPARITY_A, DISPARITY_B = 0.002125540759300926, 0.0021255407593009264


# ---------------------------------------------------------------- round_significant


def test_round_significant_keeps_twelve_digits():
    assert SIGNIFICANT_DIGITS == 12
    values = np.array([3.14159265358979323, -2718.28182845904523, 1.23456789012345e20, 6.0221407599e-5, 0.5])
    expected = [float(f"{v:.12g}") for v in values]
    assert round_significant(values).tolist() == expected
    assert round_significant(DISPARITY_A) == round_significant(DISPARITY_B) == 0.0021255407593


def test_round_significant_matches_decimal_formatting_on_random_values():
    rng = np.random.default_rng(0)
    values = rng.normal(size=20_000) * 10.0 ** rng.integers(-10, 15, size=20_000)
    values = values[np.abs(values) >= 1e-11]  # below, 10^shift is not exact: within an ulp only
    rounded = round_significant(values)
    formatted = np.array([float(f"{v:.12g}") for v in values])
    # the same double except, rarely, a value within an ulp of a rounding tie: then one unit of the 12th digit apart
    # (1e-11 relative at most); no machine enters (round_significant is portable, decimal formatting exact)
    assert np.mean(rounded == formatted) > 0.999
    np.testing.assert_allclose(rounded, formatted, rtol=1e-11, atol=0)
    assert np.array_equal(round_significant(rounded), rounded)  # idempotent


def test_round_significant_floor_counts_digits_from_the_floor():
    """With a floor, a small value keeps the absolute precision of the floor: 12 digits of 1 are 11 decimals."""
    assert round_significant(1.234567890123456e-7, floor=1.0) == 1.2346e-7
    assert round_significant(DISPARITY_A, floor=1.0) == 0.00212554076
    # per-frame floors broadcast: each (n, 2) frame rounded at its own largest magnitude
    frames = np.array([[[1.0, 1e-13], [0.5, 0.25]], [[100.0, 1e-11], [3.0, 2.0]]])
    floor = np.abs(frames).max(axis=(1, 2), keepdims=True)
    rounded = round_significant(frames, floor=floor)
    assert rounded[0, 0, 1] == 0.0 and rounded[1, 0, 1] == 0.0 and rounded[0, 1, 1] == 0.25
    assert rounded.shape == frames.shape


def test_round_significant_passes_special_values_and_keeps_shape():
    special = np.array([[0.0, -0.0], [np.nan, np.inf], [-np.inf, 1e-320]])
    rounded = round_significant(special)
    assert rounded.shape == special.shape and np.isnan(rounded[1, 0])
    assert rounded[1, 1] == np.inf and rounded[2, 0] == -np.inf and rounded[0, 0] == 0.0
    assert round_significant([]).shape == (0,)


# ---------------------------------------------------------------- JSON and CSV at fixed precision


def test_json_writes_last_bit_neighbours_as_the_same_bytes(tmp_path):
    write_json(tmp_path / "a.json", {"pca_disparity": DISPARITY_A, "n": 3, "ok": True, "none": None})
    write_json(tmp_path / "b.json", {"pca_disparity": DISPARITY_B, "n": 3, "ok": True, "none": None})
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert json.loads((tmp_path / "a.json").read_text()) == {
        "pca_disparity": 0.00212554076,
        "n": 3,
        "ok": True,
        "none": None,
    }


def test_json_rounds_nested_and_numpy_floats(tmp_path):
    write_json(
        tmp_path / "x.json",
        {"a": [np.float32(0.1), np.float64(7.0710678118654755), np.int64(4)], "b": {"c": (1 / 3, 2.0)}},
    )
    # float32 0.1 is 0.10000000149011612 as a double: written with 11 decimals, not 17 digits
    assert json.loads((tmp_path / "x.json").read_text()) == {
        "a": [0.10000000149, 7.07106781187, 4],
        "b": {"c": [0.33333333333, 2.0]},
    }


def test_json_finds_a_float_or_numpy_int_after_plain_values_at_any_depth(tmp_path):
    """Lists of ints, strings, bools and None alone are not walked value by value; a float or a numpy int anywhere
    among them still is rounded or converted."""
    write_json(
        tmp_path / "x.json",
        {"ids": [[1, 2, 3], [4, 5, 1 / 3]], "t": (1, "a", None, True), "m": [1, np.int64(2)], "n": [[[7, 2 / 3]]]},
    )
    assert json.loads((tmp_path / "x.json").read_text()) == {
        "ids": [[1, 2, 3], [4, 5, 0.33333333333]],
        "t": [1, "a", None, True],
        "m": [1, 2],
        "n": [[[7, 0.66666666667]]],
    }


def test_csv_writes_last_bit_neighbours_as_the_same_bytes(tmp_path):
    for name, value in (("a.csv", DISPARITY_A), ("b.csv", DISPARITY_B)):
        write_columns(
            tmp_path / name,
            {"k": [1, 2], "value": [value, np.float64(7.0710678118654755)], "missing": [float("nan"), None]},
        )
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert (tmp_path / "a.csv").read_text() == "k,value,missing\n1,0.00212554076,nan\n2,7.07106781187,None\n"
    table = read_columns(tmp_path / "a.csv")
    assert table["value"].tolist() == [0.00212554076, 7.07106781187] and np.isnan(table["missing"]).all()
