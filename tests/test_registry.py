"""One registry mechanism: names listed without importing implementations, an implementation found by its name
(from a name index, or by scanning its package on a miss), and an unknown name refused naming the accepted ones."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from quarl_bench.errors import QuarlError
from quarl_bench.registry import BACKENDS, KINDS, METHODS, Registry

PLUGIN = """
from {registry} import ENTRIES
ENTRIES.add("{name}", "{name} implementation")
"""


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A package of two modules, each registering one entry into ``ENTRIES`` when imported."""
    root = tmp_path / "plugins_pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (tmp_path / "plugins_registry.py").write_text(
        "from quarl_bench.registry import Registry\n"
        "ENTRIES = Registry('plugin', package='plugins_pkg', modules={'indexed': 'plugins_pkg.indexed'})\n"
    )
    for name in ("indexed", "dropped_in"):
        (root / f"{name}.py").write_text(PLUGIN.format(registry="plugins_registry", name=name))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield __import__("plugins_registry").ENTRIES
    for module in [m for m in sys.modules if m.startswith("plugins_")]:
        del sys.modules[module]


def test_names_are_listed_without_importing_and_found_by_name(package: Registry) -> None:
    assert package.names() == ("indexed",) and "plugins_pkg.indexed" not in sys.modules  # the index alone
    assert package.get("indexed") == "indexed implementation" and "plugins_pkg.dropped_in" not in sys.modules
    assert "dropped_in" in package  # in no index: the package is scanned on the miss
    assert package.get("dropped_in") == "dropped_in implementation"


def test_an_unknown_name_is_refused_naming_the_accepted_ones(package: Registry) -> None:
    with pytest.raises(QuarlError, match="^bad plugin 'nosuch': expected one of indexed, dropped_in$"):
        package.get("nosuch")


def test_the_built_in_registries_list_the_command_lines_names() -> None:
    assert METHODS.indexed()[:2] == ("ptq", "mixed") and "harden" in METHODS.indexed()
    assert BACKENDS.names()[0] == "torch-fp32" and BACKENDS.names()[-2:] == ("c-int8", "c-int4")  # --backend's order
    assert set(KINDS.names()) == {"torchscript", "torch", "onnx", "tflite", "pte", "c"}
    assert {n for n in BACKENDS.names() if not KINDS.get(BACKENDS.get(n).kind).runtime} == {"torchao-int8"}
