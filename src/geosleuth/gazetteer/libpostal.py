"""Addresses read on a sign, parsed by libpostal (the ``address`` extra), offline.

libpostal's bindings download about 2 GB of model files at run time, which cannot happen here.
The same files are on the package registry as xz-compressed wheels (``address-finder-data-p00``
to ``-p11``: one file each, the CRF parser model in five parts). The first parse assembles
libpostal's data directory from the installed wheels into the geosleuth cache, versioned by the
package versions (a temporary directory renamed into place, each part's SHA-256 and each file's
size checked), and loads the parser once per process (about 4 s, 1.9 GB resident).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import lzma
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

logger = logging.getLogger(__name__)

BINDING = "pypostal-multiarch"
DATA_PACKAGES = tuple(f"address-finder-data-p{i:02d}" for i in range(12))
LAYOUT = {
    "address_parser_crf.dat": "address_parser",
    "address_parser_postal_codes.dat": "address_parser",
    "address_parser_phrases.dat": "address_parser",
    "address_parser_vocab.trie": "address_parser",
    "language_classifier.dat": "language_classifier",
    "transliteration.dat": "transliteration",
    "address_dictionary.dat": "address_expansions",
    "numex.dat": "numex",
}
"""Each data file's folder in libpostal's data directory (``libpostal_setup_datadir``)."""
MAX_ADDRESS_CHARS = 1000
_CHUNK = 1 << 22


class AddressDataError(RuntimeError):
    """The installed data wheels do not assemble into libpostal's files."""


@dataclass(frozen=True)
class AddressParts:
    """The components libpostal labelled, each as it labelled it (lower-cased); None when absent."""

    house_number: str | None = None
    road: str | None = None
    postcode: str | None = None
    city: str | None = None
    state: str | None = None
    country: str | None = None


def components(labelled: list[tuple[str, str]]) -> AddressParts:
    """The first value of each label geosleuth uses, from libpostal's ``(value, label)`` list."""
    first: dict[str, str] = {}
    for value, label in labelled:
        first.setdefault(label, value)
    return AddressParts(**{name: first.get(name) for name in AddressParts.__dataclass_fields__})


def installed() -> bool:
    """Whether the ``address`` extra (the binding and every data wheel) is installed."""
    return importlib.util.find_spec("postal") is not None and all(
        importlib.util.find_spec(_module(p)) is not None for p in DATA_PACKAGES
    )


def data_fingerprint() -> str:
    """Changes whenever the binding or a data wheel changes, so a stale directory is rebuilt."""
    return "_".join(f"{p}-{version(p)}" for p in (BINDING, *DATA_PACKAGES))


def default_data_dir() -> Path:
    from geosleuth.gazetteer.build import default_data_dir as gazetteer_dir

    digest = hashlib.sha256(data_fingerprint().encode()).hexdigest()[:12]
    return gazetteer_dir().parent / f"libpostal-{digest}"


def ensure_data(target: Path | None = None) -> Path:
    """A ready libpostal data directory, assembled from the data wheels on first use."""
    target = target or default_data_dir()
    if (target / "DONE").exists():
        return target
    sys.stderr.write(f"geosleuth: assembling libpostal's data in {target} (first use, about a minute)\n")
    from geosleuth.gazetteer.build import publish_built

    return publish_built(target, _assemble_all, data_fingerprint(), "libpostal")


def _assemble_all(out: Path) -> None:
    files = _chunks_by_file()
    if set(files) != set(LAYOUT):
        raise AddressDataError(f"data wheels carry {sorted(files)}, libpostal needs {sorted(LAYOUT)}")
    for name, chunks in files.items():
        _assemble(chunks, out / LAYOUT[name] / name)


def _module(package: str) -> str:
    return package.replace("-", "_")


@dataclass(frozen=True)
class _Part:
    """One data wheel's part of a file, as its ``__init__.py`` declares it."""

    path: Path
    name: str
    index: int
    total: int
    sha256: str
    size: int


_DECLARED = re.compile(r"^([A-Z_0-9]+) = (.+)$", re.M)


def _part(package: str) -> _Part:
    """A data wheel's declared part, read as text: the wheels' ``__init__.py`` does not import
    (a ``try:`` follows a docstring on one line, a SyntaxError in 1.0.2)."""
    spec = importlib.util.find_spec(_module(package))
    if spec is None or spec.origin is None:
        raise AddressDataError(f"{package} is not installed")
    init = Path(spec.origin)
    declared = {k: v.strip().strip("'\"") for k, v in _DECLARED.findall(init.read_text(encoding="utf-8"))}
    try:
        return _Part(
            init.parent / "data" / "chunk.bin",
            declared["CANONICAL_NAME"],
            int(declared["FILE_CHUNK_INDEX"]),
            int(declared["TOTAL_FILE_CHUNKS"]),
            declared["CHUNK_SHA256"],
            int(declared["FILE_ORIGINAL_SIZE"]),
        )
    except (KeyError, ValueError) as exc:
        raise AddressDataError(f"{package}: its part declaration is unreadable ({exc})") from exc


def _chunks_by_file() -> dict[str, list[_Part]]:
    """Each data file's parts in their index order."""
    out: dict[str, list[_Part]] = {}
    for package in DATA_PACKAGES:
        part = _part(package)
        out.setdefault(part.name, []).append(part)
    for name, parts in out.items():
        parts.sort(key=lambda p: p.index)
        indexes = [p.index for p in parts]
        if indexes != list(range(parts[0].total)):
            raise AddressDataError(f"{name}: parts {indexes} of {parts[0].total} installed")
    return out


def _assemble(chunks: list[_Part], out: Path) -> None:
    """Decompress the parts' one xz stream, in order, into ``out``; each part's SHA-256 and the
    file's size are checked against what the part declares."""
    out.parent.mkdir(parents=True, exist_ok=True)
    decompressor = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    with out.open("wb") as sink:
        for part in chunks:
            digest = hashlib.sha256()
            with part.path.open("rb") as source:
                while block := source.read(_CHUNK):
                    digest.update(block)
                    sink.write(decompressor.decompress(block))
            if digest.hexdigest() != part.sha256:
                raise AddressDataError(f"part {part.index} of {out.name} fails its SHA-256 check")
    size = out.stat().st_size
    if not decompressor.eof or size != chunks[0].size:
        raise AddressDataError(f"{out.name}: {size} bytes assembled, {chunks[0].size} expected")


_LOAD_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _parser() -> Callable[[str], list[tuple[str, str]]] | None:
    """libpostal's parser, loaded once per process (the web app's worker threads share it);
    None without the ``address`` extra."""
    if not installed():
        return None
    with _LOAD_LOCK:
        start = time.perf_counter()
        os.environ["LIBPOSTAL_DATA_DIR"] = str(ensure_data())
        from postal.parser import parse_address

        logger.info("libpostal's parser loaded in %.1f s", time.perf_counter() - start)
    return parse_address  # type: ignore[no-any-return]


def parse_address(text: str) -> AddressParts | None:
    """The sign's address components (lines read as comma-separated parts); None without the
    ``address`` extra, so callers fall back to their own reading."""
    parse = _parser()
    if parse is None:
        return None
    lines = [" ".join(line.split()) for line in (text or "")[:MAX_ADDRESS_CHARS].splitlines()]
    return components(parse(", ".join(line for line in lines if line)))


def parser_name() -> str:
    """Which address parser geosleuth uses here, for the answer's notes."""
    try:
        return f"libpostal ({BINDING} {version(BINDING)})" if installed() else "geosleuth's line reading"
    except PackageNotFoundError:
        return "geosleuth's line reading"
