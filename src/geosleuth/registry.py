"""Named extension points: one registry per kind (protocols, dataset formats, prompt styles, tools,
rewards, judges), each open to users without editing geosleuth.

A registry finds a name in four places, in this order:

1. entries registered at run time (``REGISTRY.register("name")`` as a decorator, or
   ``REGISTRY.register("name", obj)``);
2. geosleuth's own built-ins: a table of ``name -> module`` (the module that registers it),
   imported on first use, so that ``--help`` lists the names without importing NumPy or a
   tool's dependencies;
3. the entry-point group (``geosleuth.protocols`` …) of any installed package: a third-party
   package adds ``[project.entry-points."geosleuth.protocols"] mine = "pkg.module:MY_PROTOCOL"``;
4. a ``package.module:attribute`` spec given directly (``--protocol mypkg.rules:PROTOCOL``).

Names only are listed without importing anything heavy: ``names()`` reads the built-in table,
the entry points' metadata and the run-time entries.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from importlib import metadata
from typing import Any, Generic, TypeVar, overload

from geosleuth.plugins import load_object

log = logging.getLogger(__name__)

T = TypeVar("T")

GROUPS: dict[str, str] = {}
"""kind -> entry-point group, for every registry created (the docs and `geosleuth plugins` list them)."""


class RegistryError(ValueError):
    """An unknown name, a spec that does not load, or an object of the wrong kind."""


class Registry(Mapping[str, T], Generic[T]):
    """A name -> object table that users extend by decorator, function, entry point or spec."""

    def __init__(
        self,
        kind: str,
        group: str,
        builtins: Mapping[str, str] | None = None,
    ) -> None:
        self.kind = kind
        self.group = group
        self._builtins = dict(builtins or {})
        self._check: Callable[[str, Any], T] | None = None
        self._entries: dict[str, T] = {}
        self._loaded: set[str] = set()  # built-in modules imported (or being imported)
        self._eps: list[metadata.EntryPoint] | None = None
        self._from_eps: set[str] = set()  # entries loaded from entry points (forgotten on refresh)
        GROUPS[kind] = group

    def validator(self, check: Callable[[str, Any], T]) -> Callable[[str, Any], T]:
        """Decorate the function that checks (and may convert) every entry: the module that defines
        the kind's type sets it, so the light registry module needs no import of that type."""
        self._check = check
        return check

    @overload
    def register(self, name: str, obj: None = None, *, replace: bool = False) -> Callable[[T], T]: ...

    @overload
    def register(self, name: str, obj: T, *, replace: bool = False) -> T: ...

    def register(self, name: str, obj: T | None = None, *, replace: bool = False) -> Any:
        """Add ``obj`` under ``name`` (or return a decorator that does); a taken name needs ``replace``."""

        def add(value: T) -> T:
            if not name or not isinstance(name, str):
                raise RegistryError(f"a {self.kind} needs a non-empty name, got {name!r}")
            if name in self._builtins:
                self._load_builtin(name)  # a user's entry may replace a built-in, never race it
            if not replace and name in self._entries:
                raise RegistryError(f"{self.kind} {name!r} is already registered (pass replace=True)")
            self._entries[name] = self._checked(name, value)
            return value

        return add if obj is None else add(obj)

    def unregister(self, name: str) -> None:
        """Forget a run-time entry (tests and notebooks that register temporary ones)."""
        self._entries.pop(name, None)

    def names(self) -> list[str]:
        """Every name this registry answers to, without importing any entry's module."""
        out = dict.fromkeys(self._builtins)
        out.update(dict.fromkeys(self._entries))
        out.update(dict.fromkeys(ep.name for ep in self._entry_points()))
        return list(out)

    def get_entry(self, name: str) -> T:
        """The object registered as ``name``, or loaded from ``package.module:attribute``."""
        if name in self._builtins:
            self._load_builtin(name)
        if name in self._entries:
            return self._entries[name]
        for ep in self._entry_points():
            if ep.name == name:
                try:
                    loaded = ep.load()
                except Exception as exc:  # a broken plugin names itself, not a traceback
                    raise RegistryError(
                        f"{self.kind} {name!r} from {ep.value!r} failed to load: {exc}"
                    ) from exc
                value = self._checked(name, loaded)
                self._entries[name] = value
                self._from_eps.add(name)
                return value
        if ":" in name:
            try:
                return self._checked(name, load_object(name, self.kind))
            except RegistryError:
                raise
            except ValueError as exc:
                raise RegistryError(str(exc)) from exc
        raise RegistryError(
            f"unknown {self.kind} {name!r}; choose one of {', '.join(self.names())} "
            "or give 'package.module:name'"
        )

    def __getitem__(self, name: str) -> T:
        try:
            return self.get_entry(name)
        except RegistryError as exc:
            raise KeyError(name) from exc

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def _checked(self, name: str, value: Any) -> T:
        if self._check is None and self._builtins:
            self._load_builtin(next(iter(self._builtins)))  # the module that sets the validator
        if self._check is None:
            return value  # type: ignore[no-any-return]
        try:
            return self._check(name, value)
        except RegistryError:
            raise
        except (TypeError, ValueError) as exc:
            raise RegistryError(f"{self.kind} {name!r} is not usable: {exc}") from exc

    def refresh(self) -> None:
        """Read the installed packages' entry points again (they are read once per process, so a
        package installed, removed or put on ``sys.path`` while it runs needs this); entries loaded
        from them are forgotten, run-time and built-in ones kept."""
        self._eps = None
        for name in self._from_eps:
            self._entries.pop(name, None)
        self._from_eps.clear()

    def load_all(self) -> dict[str, T]:
        """Every entry, loaded: built-ins, run-time and installed plugins (a broken plugin raises)."""
        return {name: self.get_entry(name) for name in self.names()}

    def _load_builtin(self, name: str) -> None:
        module = self._builtins[name]
        if module in self._loaded:
            return
        self._loaded.add(module)
        if module in sys.modules:
            return  # imported already, or importing now: its entries are registered as it runs
        importlib.import_module(module)  # registers its entries
        if name not in self._entries:
            raise RegistryError(f"built-in {self.kind} {name!r}: {module} did not register it")

    def _entry_points(self) -> list[metadata.EntryPoint]:
        if self._eps is None:
            try:
                self._eps = list(metadata.entry_points(group=self.group))
            except Exception as exc:  # broken metadata of another package must not break geosleuth
                log.warning("cannot read entry points of %s: %s", self.group, exc)
                self._eps = []
        return self._eps
