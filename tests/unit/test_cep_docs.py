"""The examples of ``docs/reference/cep.md`` run: each Python block, in order, in one
namespace (each block asserts what the page says it gives)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cep.md"


def test_every_example_of_the_cep_reference_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 6
    namespace: dict[str, object] = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{DOC.name}[block {i}]", "exec"), namespace)  # noqa: S102
