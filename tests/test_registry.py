"""`geosleuth.registry.Registry`: run-time entries, validation, `package.module:name` specs, entry
points read once and forgotten on `refresh`, clear errors."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from geosleuth.registry import Registry, RegistryError


def _numbers(group: str) -> Registry[int]:
    registry: Registry[int] = Registry("number", group)

    @registry.validator
    def _int(name: str, value: Any) -> int:
        if not isinstance(value, int):
            raise TypeError(f"expected an int, got {type(value).__name__}")
        return value

    return registry


def test_register_decorate_replace_and_errors() -> None:
    numbers = _numbers("geosleuth.tests.none")
    numbers.register("one", 1)
    assert numbers["one"] == 1 and "one" in numbers and numbers.names() == ["one"]
    with pytest.raises(RegistryError, match="already registered"):
        numbers.register("one", 2)
    numbers.register("one", 2, replace=True)
    assert numbers.get_entry("one") == 2
    with pytest.raises(RegistryError, match="number 'bad' is not usable: expected an int, got str"):
        numbers.register("bad", "x")  # type: ignore[arg-type]
    with pytest.raises(RegistryError, match="unknown number 'two'; choose one of one"):
        numbers.get_entry("two")
    with pytest.raises(KeyError):
        numbers["two"]
    numbers.unregister("one")
    assert "one" not in numbers


def test_a_spec_loads_and_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "reg_spec_mod.py").write_text("SEVEN = 7\nWORD = 'seven'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    numbers = _numbers("geosleuth.tests.none")
    assert numbers.get_entry("reg_spec_mod:SEVEN") == 7
    with pytest.raises(RegistryError, match="expected an int, got str"):
        numbers.get_entry("reg_spec_mod:WORD")
    with pytest.raises(RegistryError, match="cannot import number 'reg_spec_mod:NOPE'"):
        numbers.get_entry("reg_spec_mod:NOPE")
    sys.modules.pop("reg_spec_mod", None)


def test_entry_points_are_read_once_and_forgotten_on_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = "geosleuth.tests.numbers"
    numbers = _numbers(group)
    numbers.register("one", 1)
    assert numbers.names() == ["one"]  # entry points read now, before the package exists
    dist = tmp_path / "reg_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: reg-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{group}]\nforty_two = reg_plugin_mod:ANSWER\n")
    (tmp_path / "reg_plugin_mod.py").write_text("ANSWER = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "forty_two" not in numbers  # read once per process
    numbers.refresh()
    assert numbers.names() == ["one", "forty_two"] and numbers["forty_two"] == 42
    monkeypatch.undo()  # the package is gone again
    sys.modules.pop("reg_plugin_mod", None)
    numbers.refresh()
    assert numbers.names() == ["one"]  # its entry is forgotten, the run-time one kept


def test_a_broken_plugin_names_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    group = "geosleuth.tests.broken"
    dist = tmp_path / "reg_broken-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: reg-broken\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{group}]\nbad = reg_broken_mod:MISSING\n")
    (tmp_path / "reg_broken_mod.py").write_text("raise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    numbers = _numbers(group)
    with pytest.raises(
        RegistryError, match=r"number 'bad' from 'reg_broken_mod:MISSING' failed to load: boom"
    ):
        numbers.get_entry("bad")
