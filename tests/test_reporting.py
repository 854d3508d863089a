"""The one Markdown table builder and the one machine description (respect_jax/reporting.py)."""

import pytest

from respect_jax.reporting import fmt, machine_description, machine_line, markdown_table


def test_markdown_table_formats_cells_and_aligns_numbers():
    table = markdown_table(["name", "n", "x", "ok"], [["a", 1234, 0.5, True], ["b", None, float("nan"), False]],
                           digits=2)
    assert table.splitlines() == [
        "| name | n | x | ok |",
        "| --- | ---: | ---: | --- |",
        "| a | 1,234 | 0.50 | yes |",
        "| b | - | - | no |",
    ]
    assert fmt(1.5e6) == "1.5e+06" and fmt("**0.5**") == "**0.5**"


def test_markdown_table_refuses_a_ragged_row():
    with pytest.raises(ValueError, match="row 1 has 1 cells, the header 2"):
        markdown_table(["a", "b"], [[1, 2], [3]])


def test_machine_description_and_line():
    desc = machine_description(packages=("jax", "no-such-distribution"), load_average=True)
    assert desc["cpu_count"] >= 1 and desc["jax_backend"] in ("cpu", "gpu", "tpu")
    assert desc["packages"]["jax"] == desc["jax"] and desc["packages"]["no-such-distribution"] is None
    assert machine_line(desc).startswith(f"Measured on {desc['processor']} ({desc['cpu_count']} CPUs")
    assert "packages" not in machine_description() and "load_average" not in machine_description()
