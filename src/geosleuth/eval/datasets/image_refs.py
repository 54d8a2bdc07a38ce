"""Image references of dataset rows -> image files: relative to a root or the table, by id or
stem, or inside a release's zip parts (extracted on first use)."""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path

from geosleuth.bounds.confined import write_confined

logger = logging.getLogger(__name__)

IMAGE_SUFFIXES: tuple[str, ...] = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff")
MAX_IMAGE_BYTES = 64 * 1024 * 1024
"""Cap on one image taken out of a zip part."""
ID_STEM_SUFFIXES: tuple[str, ...] = ("_panoramic",)
"""Image names a release adds to a row id (WhereCountry's ``<panoID>_panoramic.jpg``)."""


class ImageResolver:
    """Turns the image reference of a row into an absolute path: relative to a root, by id, or by stem.

    A relative reference is tried against the image root, then against ``base`` (the table's
    folder, where references such as ``images/a/1.jpg`` are usually relative to); the stem
    index is only a fallback, since two folders can hold images with the same stem. Paths are
    absolute so reports and exports find the images from any working directory.
    """

    def __init__(self, root: Path | None, base: Path | None = None, zip_parts: bool = False) -> None:
        self.root = root
        self.base = base
        self.zip_parts = zip_parts  # look inside released zip parts (OSV-5M) for images not yet extracted
        self._by_stem: dict[str, Path] | None = None
        self._zipped: dict[Path, tuple[Path, str]] = {}

    def _index(self) -> dict[str, Path]:
        if self._by_stem is None:
            self._by_stem = {}
            if self.root is not None and self.root.is_dir():
                for path in self.root.rglob("*"):
                    if path.suffix.lower() in IMAGE_SUFFIXES:
                        self._by_stem.setdefault(path.stem, path)
                    elif self.zip_parts and path.suffix.lower() == ".zip" and path.is_file():
                        self._index_zip(path)
        return self._by_stem

    def _index_zip(self, archive: Path) -> None:
        """Images inside a released zip part (OSV-5M's ``images/test/00.zip`` …), extracted on first use.

        Each member goes where the release's own instructions (``extractall`` into the zip's
        folder) put it; a member whose name would leave that folder is skipped.
        """
        assert self._by_stem is not None
        try:
            with zipfile.ZipFile(archive) as handle:
                members = [m for m in handle.infolist() if Path(m.filename).suffix.lower() in IMAGE_SUFFIXES]
        except (OSError, zipfile.BadZipFile):
            return
        for member in members:
            target = archive.parent / member.filename
            if member.is_dir() or Path(member.filename).is_absolute() or ".." in Path(member.filename).parts:
                continue
            if member.file_size <= MAX_IMAGE_BYTES:
                self._by_stem.setdefault(target.stem, target)
                self._zipped.setdefault(target, (archive, member.filename))

    def _extracted(self, path: Path) -> Path:
        """The image file, taken out of its zip part if it is still inside one.

        The member is written inside the zip's folder through real folders only (a link planted
        at the name, at ``<name>.part`` or on the way is never followed); a file already there
        counts only if it resolves inside that folder.
        """
        source = self._zipped.get(path)
        if source is None:
            return path
        archive, name = source
        folder = archive.parent.resolve()
        if path.is_file() and path.resolve().is_relative_to(folder):
            return path
        try:
            with zipfile.ZipFile(archive) as handle, handle.open(name) as src:
                data = src.read(MAX_IMAGE_BYTES + 1)
            if len(data) <= MAX_IMAGE_BYTES:
                write_confined(archive.parent, name, data)
        except (OSError, zipfile.BadZipFile, KeyError) as exc:
            logger.warning("%s: %s not extracted: %s", archive, name, exc)  # listed as missing / failed
        return path

    def resolve(self, reference: str | None, sample_id: str) -> str | None:
        if reference:
            ref = Path(reference).expanduser()
            if ref.is_absolute() or self.root is None:
                return str(ref.absolute())
            candidates = [self.root / ref] + ([self.base / ref] if self.base is not None else [])
            for path in candidates:
                if path.is_file():
                    return str(path.absolute())
            found = self._index().get(ref.stem)
            missing = candidates[-1] if len(ref.parts) > 1 else candidates[0]
            return str(self._extracted(found or missing).absolute())
        if self.root is None:
            return None
        index = self._index()
        stem = Path(sample_id).name
        found = next((index[k] for k in (stem, *(stem + s for s in ID_STEM_SUFFIXES)) if k in index), None)
        return str(self._extracted(found).absolute()) if found else None
