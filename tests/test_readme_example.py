"""The README's asyncio example runs as printed and shows the message it promises."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)


def test_readme_asyncio_example_is_about_15_lines_and_runs() -> None:
    example = next(block for block in _python_blocks() if "asyncio.run" in block)
    assert len([line for line in example.splitlines() if line.strip()]) <= 15
    result = subprocess.run([sys.executable, "-c", example], cwd=ROOT, capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "minion {'hello': 'main'}"
