"""README's Python examples run as written (in a temporary directory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_readme_python_block_runs(number, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = BLOCKS[number]
    namespace: dict = {}
    if "pybroker.connect" not in code:  # a fragment on the tour's instance (first block)
        first = BLOCKS[0].replace('with pybroker.connect("broker.duckdb") as inst:',
                                  'if True:\n    inst = pybroker.connect("broker.duckdb")')
        exec(compile(first, "README.md python block 0", "exec"), namespace)
    exec(compile(code, f"README.md python block {number}", "exec"), namespace)


def test_the_readme_has_python_examples():
    assert len(BLOCKS) >= 2
