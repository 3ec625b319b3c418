"""What the two quick-start commands install, and that the docs agree on timings."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {name: [re.split(r"[<>=\[ ]", d)[0].lower() for d in deps]
            for name, deps in project["optional-dependencies"].items()}


def test_the_demo_installs_only_what_it_needs() -> None:
    script = (ROOT / "tools" / "demo.sh").read_text()
    (extra,) = re.findall(r"source tools/_venv\.sh (\w+)", script)
    needs = _extras()[extra]
    assert {"pyspark", "matplotlib"} <= set(needs)
    assert not {"ruff", "mypy", "raet", "pytest", "hypothesis"} & set(needs)
    assert re.findall(r"source tools/_venv\.sh (\w+)",
                      (ROOT / "tools" / "test.sh").read_text()) == ["test"]


def test_readme_quickstart_and_cli_docs_give_the_demo_and_bench_the_same_timings() -> None:
    texts = {name: (ROOT / name).read_text()
             for name in ("README.md", "docs/quickstart.md", "docs/cli.md")}
    demo = {name: re.findall(r"about (\d+) s in all|demo +# about (\d+) s", text)
            for name, text in texts.items()}
    seconds = {int(a or b) for found in demo.values() for a, b in found}
    assert len(seconds) == 1, demo
    bench = {name: re.findall(r"`raetlike bench`(?:(?!\n\n).){0,300}?about (\d+) s|"
                              r"default\s+run takes about (\d+) s", text, flags=re.S)
             for name, text in texts.items()}
    assert bench["README.md"], "the README gives the bench's time"
    bench_seconds = {int(a or b) for found in bench.values() for a, b in found}
    assert len(bench_seconds) == 1, bench
