"""The README's table of figures is the committed suite's, not typed by hand: regenerating it
from bench/results/suite/bench.json and the kind records changes nothing; every ratio in it
divides two figures of the same run; a row whose figures are missing is left out."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bench import readme_table
from bench.kind import kind_faults

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "bench" / "results" / "suite" / "bench.json"


def test_the_readme_table_is_the_committed_runs() -> None:
    results = json.loads(SUITE.read_text())
    expected = readme_table.table(results, kind_faults.load())
    readme = (ROOT / "README.md").read_text()
    found = re.search(re.escape(readme_table.START) + "\n(.*?)\n" + re.escape(readme_table.END),
                      readme, re.DOTALL)  # fmt: skip
    assert found is not None, "the README lost its bench-table markers"
    assert found.group(1) == expected, "run `python -m bench.report bench/results/suite/bench.json`"


def test_a_ratio_divides_the_two_sides_of_one_run() -> None:
    recovery = {"scenarios": {
        "worker": {"seconds": [1.0, 1.0, 1.0]}, "torchrun": {"seconds": [6.0, 6.0, 6.0]},
        "worker-large": {"seconds": [5.0]},  # its baseline missing: no row
    }}  # fmt: skip
    rows = readme_table.recovery_rows({"recovery": recovery})
    assert len(rows) == 1
    assert rows[0][4] == "6.0x"


def test_no_figures_no_rows() -> None:
    assert readme_table.table({}, []).splitlines()[2:3] == [""]
