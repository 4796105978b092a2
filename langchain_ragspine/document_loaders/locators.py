"""Source locators: which characters of which file a chunk is, and how a reader gets them back.

The offsets convention (defined here, once, for the whole package):

* **Files** (``.md`` / ``.markdown`` / ``.txt``). ``start_index`` / ``end_index`` are character offsets (code
  points, end exclusive) into the file's text *as stored*: its bytes decoded as UTF-8 (the loader's ``encoding``)
  with no newline translation — ``read_source_text(path)`` = ``path.read_bytes().decode("utf-8")`` =
  ``open(path, encoding="utf-8", newline="").read()``.  A leading byte-order mark (U+FEFF) counts as one
  character and a CRLF as two, exactly as stored; YAML front matter counts too, so the first chunk of a file
  with front matter starts after it.  ``source_locator`` is ``f"{source}#{start}-{end}"`` with ``source`` the
  path relative to the corpus root (POSIX slashes), e.g. ``"laws/labour.md#120-598"``.  For every chunk
  ``read_source_text(root / source)[start:end] == page_content``.
* **JSONL lines** (``.jsonl``). A line's document is the decoded JSON string of its ``text`` field, which is not
  a slice of the file (JSON escapes), so the locator names the line and offsets *within that decoded string*:
  ``f"{path}:{line}#{start}-{end}"`` (``line`` 1-based, lines separated by ``\\n``), e.g.
  ``"corpus.jsonl:3#0-412"``; ``source`` is ``f"{path}:{line}"`` and ``start_index`` / ``end_index`` index the
  ``text`` value.
* Documents from elsewhere (no loader metadata) get offsets into their ``page_content``.

The loader records where the page content starts in the file as ``metadata["body_offset"]``
(``read_source_text(path)[body_offset:] == page_content``); ``ParagraphTextSplitter`` adds it to every chunk's
offsets.  :func:`resolve_source_locator` turns a locator back into the text a reader should see — only from inside
the corpus root (real paths: a symlink out of it is refused) and never the text of a RESTRICTED source unless the
caller passes ``allow_restricted=True`` (:class:`RestrictedSourceError` otherwise).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from langchain_ragspine.document_loaders.corpus import CorpusLoader, names_of, real_path_inside
from langchain_ragspine.errors import LoaderError, json_type_name
from langchain_ragspine.sensitivity import is_restricted

__all__ = [
    "parse_source_locator",
    "read_source_text",
    "resolve_source_locator",
    "RestrictedSourceError",
    "source_locator_for",
    "SourceLocator",
]

_LOCATOR = re.compile(r"(?P<source>.+)#(?P<start>\d+)-(?P<end>\d+)", re.S)
_JSONL_SOURCE = re.compile(r"(?P<path>.+\.jsonl):(?P<line>\d+)", re.S | re.I)


def source_locator_for(source: str, start: int, end: int) -> str:
    """The source locator convention: ``f"{source}#{start}-{end}"`` (char offsets, end exclusive).

    Example:
        >>> source_locator_for("laws/labour.md", 120, 598)
        'laws/labour.md#120-598'
    """
    return f"{source}#{start}-{end}"


@dataclass(frozen=True)
class SourceLocator:
    """A parsed source locator.

    Attributes:
        path: the file, relative to the corpus root (POSIX slashes).
        line: the 1-based JSONL line, or ``None`` for a whole file.
        start / end: char offsets (end exclusive) into the file's text, or into the line's decoded ``text``.
    """

    path: str
    line: int | None
    start: int
    end: int

    @property
    def source(self) -> str:
        """The ``source`` metadata value this locator was built from (``path`` or ``f"{path}:{line}"``)."""
        return self.path if self.line is None else f"{self.path}:{self.line}"

    def __str__(self) -> str:
        return source_locator_for(self.source, self.start, self.end)


def parse_source_locator(locator: str) -> SourceLocator:
    """Parse ``"path#start-end"`` or ``"path.jsonl:line#start-end"`` (see the module docstring).

    The range is the text after the last ``#``, so a ``#`` in a file name is fine.

    Raises:
        TypeError: ``locator`` is not a string.
        ValueError: it has no ``#start-end`` range, or ``start > end``.
    """
    if not isinstance(locator, str):
        raise TypeError(f"a source locator must be a string, got {type(locator).__name__}: {locator!r}")
    m = _LOCATOR.fullmatch(locator)
    if m is None:
        raise ValueError(f"not a source locator (expected 'path#start-end'): {locator!r}")
    start, end = int(m["start"]), int(m["end"])
    if start > end:
        raise ValueError(f"source locator range is reversed ({start} > {end}): {locator!r}")
    source = m["source"]
    j = _JSONL_SOURCE.fullmatch(source)
    if j is not None:
        if int(j["line"]) < 1:
            raise ValueError(f"source locator line numbers of a JSONL file start at 1, got {j['line']}: {locator!r}")
        return SourceLocator(path=j["path"], line=int(j["line"]), start=start, end=end)
    return SourceLocator(path=source, line=None, start=start, end=end)


def read_source_text(path: str | os.PathLike[str], encoding: str = "utf-8") -> str:
    """The text chunk offsets index: the file's bytes decoded with ``encoding``, no newline translation.

    Equivalent to ``open(path, encoding=encoding, newline="").read()``: a BOM and CRLFs stay as stored.

    Raises:
        OSError: the file cannot be read (``FileNotFoundError`` when missing).
        UnicodeDecodeError: the bytes are not valid ``encoding``.
    """
    return Path(path).read_bytes().decode(encoding)


class RestrictedSourceError(PermissionError):
    """:func:`resolve_source_locator` refused to return the text of a RESTRICTED source (or of one whose labels
    cannot be read, which counts as RESTRICTED); the message names the locator and says why.

    Attributes:
        locator: the locator asked for, as a string.
    """

    def __init__(self, message: str, *, locator: str) -> None:
        super().__init__(message)
        self.locator = locator


def resolve_source_locator(
    locator: str | SourceLocator,
    root: str | os.PathLike[str],
    *,
    encoding: str = "utf-8",
    allow_restricted: bool = False,
) -> str:
    """The text a locator names: ``read_source_text(root / path)[start:end]``, or for a JSONL line its decoded
    ``text`` field sliced ``[start:end]`` — never from outside ``root``, and never from a RESTRICTED source unless
    asked for by name.

    Args:
        locator: a ``source_locator`` string (or a parsed :class:`SourceLocator`).
        root: the folder the locator's path is relative to: the folder given to ``CorpusLoader`` / ``ingest``
            (a file's parent folder when a file was given).  When two given folders hold the same path, the
            loader lengthens ``source`` by the folders' own names (``projA/README.md``); pass their parent then.
        encoding: the loader's encoding (default ``"utf-8"``).
        allow_restricted: return the text of a RESTRICTED source too (default ``False``).  The source's labels are
            read as :class:`~langchain_ragspine.document_loaders.CorpusLoader` reads them (front matter, sidecar,
            the JSONL line's fields; :func:`~langchain_ragspine.sensitivity.is_restricted` decides), from every
            name the file has below ``root`` — the locator's path, symlinks and hard links to the same file, its real
            path — as the loader reads them when it loads ``root``, so the locator of any name is refused when the
            loader labels the file RESTRICTED.  Finding the other names walks ``root`` (as the loader does).

    Returns:
        The cited text; equal to the chunk's ``page_content`` while the file is unchanged since it was loaded.

    Raises:
        ValueError: a malformed locator; a path that is absolute, has a ``..`` part, or whose real path (symlinks
            followed) is outside the real path of ``root``; a range past the end of the text (the file changed
            since it was loaded?).
        RestrictedSourceError: the source is RESTRICTED, or its labels cannot be read (the loader refuses the file
            or yields no document for the line), and ``allow_restricted`` is ``False``.
        OSError, UnicodeDecodeError: as :func:`read_source_text`.
        LoaderError: the JSONL line is missing, not JSON, or has no string ``text``; the file's metadata cannot be
            read (bad front matter, a bad sidecar), unless ``allow_restricted``.

    Example:
        >>> resolve_source_locator("laws/labour.md#120-598", "corpus")  # doctest: +SKIP
    """
    loc = parse_source_locator(locator) if isinstance(locator, str) else locator
    path = _inside_root(loc, root)
    text = read_source_text(path, encoding)
    if loc.line is not None:
        text = _jsonl_text(text, loc.line, path)
    if loc.end > len(text):
        where = "file" if loc.line is None else f"text of line {loc.line}"
        raise ValueError(
            f"source locator {str(loc)!r} ends past the {where} ({len(text)} characters): changed since it was loaded?"
        )
    if not allow_restricted:
        _refuse_restricted(loc, root, encoding)
    return text[loc.start : loc.end]


def _inside_root(loc: SourceLocator, root: str | os.PathLike[str]) -> Path:
    """The real path (symlinks followed) of ``root / loc.path``, refusing one outside the real path of ``root`` (the
    loader's rule: :func:`~langchain_ragspine.document_loaders.corpus.real_path_inside`).

    Raises:
        ValueError: the path is absolute, has a ``..`` part, or resolves outside ``root``.
    """
    rel = PurePosixPath(loc.path)
    if rel.is_absolute() or ".." in rel.parts:
        raise ValueError(f"source locator path must be relative to the corpus root, got {loc.path!r}")
    path = real_path_inside(Path(root) / rel, root)
    if path is None:
        raise ValueError(
            f"source locator {str(loc)!r} leaves the corpus root {os.fspath(root)!r}: {loc.path!r} resolves to a "
            "file outside it (through a symlink)"
        )
    return path


def _refuse_restricted(loc: SourceLocator, root: str | os.PathLike[str], encoding: str) -> None:
    """Raise :class:`RestrictedSourceError` when the source is RESTRICTED as the loader labels it, or the loader
    yields no document for it (its labels cannot be read).

    The loader is given the path as the locator names it and every other name of the same file below ``root``
    (:func:`~langchain_ragspine.document_loaders.corpus.names_of`: symlinks, hard links), so it reads the sidecars
    of all of them — and of the real path — as it does when it loads ``root``."""
    given = Path(root) / loc.path
    # one file is loaded as a whole (its metadata problem is raised); a JSONL file up to the line, skipping problems
    # of other lines (the loader warns about them), as an ingest with on_error="skip" would
    loader = CorpusLoader(
        [given, *names_of(given, root)],
        root=root,
        encoding=encoding,
        on_error="raise" if loc.line is None else "skip",
    )
    doc = next(
        (d for d in loader.lazy_load() if loc.line is None or d.metadata.get("line") == loc.line), None
    )
    if doc is None:
        why = "; ".join(reason for _, line, reason in loader.stats.skipped if line in (None, loc.line))
        raise RestrictedSourceError(
            f"source locator {str(loc)!r}: the loader yields no document for {loc.source!r}"
            f"{f' ({why})' if why else ''}, so its sensitivity label cannot be read; refusing its text (pass "
            "allow_restricted=True to read it anyway)",
            locator=str(loc),
        )
    if is_restricted(doc.metadata):
        raise RestrictedSourceError(
            f"source locator {str(loc)!r} names a RESTRICTED source ({loc.source!r}); its text is returned only "
            "with allow_restricted=True",
            locator=str(loc),
        )


def _jsonl_text(text: str, line: int, path: Path) -> str:
    """The decoded ``text`` field of 1-based ``line`` of a JSONL file (lines split on ``\\n``, as the loader does)."""
    lines = text.split("\n")
    count = len(lines) - (lines[-1] == "")  # a final line end ends the last line, it opens none
    if line > count:
        raise LoaderError(f"no line {line} (the file has {count})", path=path, line=line)
    raw = lines[line - 1]
    if line == 1 and raw.startswith("\ufeff"):
        raw = raw[1:]
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise LoaderError(f"not valid JSON: {exc.msg} (column {exc.colno})", path=path, line=line) from None
    value = obj.get("text") if isinstance(obj, dict) else None
    if not isinstance(value, str):
        raise LoaderError(f"expected a string 'text', got {json_type_name(value)}", path=path, line=line, field="text")
    return value
