"""Load a corpus of Markdown, plain-text and JSONL files as LangChain ``Document``s.

A corpus is one or more folders (walked recursively in sorted order; hidden files and folders, and ragspine store
directories, skipped) or
files:

* ``.md`` / ``.markdown`` / ``.txt`` — one document per file.  Optional YAML front matter (the Jekyll/Hugo
  convention: the file opens with a ``---`` line and the block ends at the next ``---`` or ``...`` line; lines
  may end in ``\\n``, ``\\r\\n`` or ``\\r``, and whitespace, a ``#`` comment or invisible characters such as a second
  BOM may stand around a fence) is parsed with ``yaml.safe_load``, removed from the text and merged into the
  metadata.  Anything else at the top of the body that looks like metadata is not front matter (its text is the
  body), and if it sets ``sensitivity`` the file is refused, naming that line: a ``---`` block after blank lines,
  another opener (``+++`` TOML, ``--- !!map``, ``%YAML 1.2``, ``----``, ``－－－``, ``———``, an HTML comment first), a
  bare ``sensitivity: RESTRICTED`` line, a first-line label in a prose form with its markup stripped
  (``**Sensitivity:** RESTRICTED``, ``[//]: # (sensitivity: RESTRICTED)``, ``<!-- sensitivity: RESTRICTED -->``)
  and a second block right after the front matter.  The rest of the file is
  the ``page_content``, verbatim: ``text[body_offset:] == page_content`` where ``text =
  path.read_bytes().decode(encoding)`` (no newline translation; a BOM and CRLFs count as stored) and
  ``body_offset`` is in the metadata, so chunk offsets index the file itself (the convention is defined in
  :mod:`langchain_ragspine.document_loaders.locators`).
* ``.jsonl`` — one document per non-blank line, each a JSON object with a string ``text`` (the JSON Lines
  format, https://jsonlines.org, as used by BEIR corpora: ``{"_id": ..., "title": ..., "text": ...}``).
  Chunk locators name the line and offsets within its decoded ``text``: ``"corpus.jsonl:3#0-412"``.
* ``<stem>.json`` and ``<stem>.<suffix>.json`` (``notes.json`` and ``notes.md.json`` for ``notes.md``) beside a
  document file are its *sidecars*: JSON objects merged into the metadata (a top-level ``"metadata"`` object too,
  LangChain's ``Document`` JSON shape, as on a JSONL line), winning over front matter (and, for a ``.jsonl``, over
  each line's fields) — except for ``sensitivity``, where the most restrictive label wins.  Both spellings are
  read; where they disagree the label is the most restrictive and any other key is the full name's, with a
  warning.  Names compare as a case-insensitive, normalizing file system compares them (NFC, case-folded):
  ``Notes.json``, ``notes.MD.json`` and a name in NFD (as files copied from macOS are) are read too, with a
  warning.  Sidecars are never documents themselves.  A sidecar that is there but cannot be read (a dangling
  symlink, a folder, a FIFO, no permission, invalid UTF-8), and a file named like one with the suffix spelled
  otherwise (``<stem>.JSON``, ``<stem>.JSОN`` with a Cyrillic ``О``, a space or a dot after it), is an error naming it: its
  label is never silently lost.
* Symlinks and hard links: a file is loaded once, however many names it has in the run (a symlink to it, a hard
  link, the file given twice: same device and inode), under its first name that is not a symlink, and its label is
  the most restrictive of the sidecars beside every one of its names and beside its real path — so it does not
  depend on which name is loaded.  Symlinked folders are not followed.  A symlink whose real path is outside the
  real path of its root is not loaded, with a :class:`LoaderWarning` naming it (``stats.outside``), the rule
  ``resolve_source_locator`` reads by (:func:`real_path_inside`).  A hard link is a name like any other: nothing
  tells it from the original; a hard link outside the run (outside the root) is not seen, so its sidecar is not
  read.

Sensitivity labels fail closed (the policy is :mod:`langchain_ragspine.sensitivity`): a key spelled in another
width, case or spacing (``Ｓｅｎｓｉｔｉｖｉｔｙ``), with look-alike letters (``sеnsitivity``), HTML references or its letters
split by separators (``S-E-N-S-I-T-I-V-I-T-Y``) is the label, at the top level or nested at any depth of front
matter, a sidecar or a JSONL line (``meta.sensitivity``, LangChain's serialised ``Document``: ``kwargs.metadata``),
where it sets the label too; an empty value (``sensitivity:``, ``null``, ``""``) refuses the file; a duplicate key (in front matter, a sidecar or a JSONL line), a value naming RESTRICTED among other words
(``"RESTRICTED, INTERNAL"``, ``Restricted.``), a list of labels, and sources that disagree all resolve to the most
restrictive reading, with a :class:`LoaderWarning` naming file and line.  Any other duplicate key keeps its last value (as ``yaml.safe_load`` and ``json.loads`` do) and is warned
about too.

Every document's metadata carries ``source`` (path relative to its root, POSIX slashes), ``doc_id`` (distinct and
stable; see :class:`CorpusLoader`), ``title``
and ``sensitivity`` (default ``"INTERNAL"``), and only JSON-serialisable values (YAML dates become ISO-8601
strings). Problems in the data raise :class:`~langchain_ragspine.errors.LoaderError` naming the file, line and
field, or — with ``on_error="skip"`` — warn with :class:`LoaderWarning`, skip the file (or JSONL line) and
record it in :attr:`CorpusLoader.stats`.
"""

from __future__ import annotations

import codecs
import datetime as _dt
import errno
import functools
import json
import math
import os
import re
import stat
import unicodedata
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml
from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document

from langchain_ragspine.errors import LoaderError, json_type_name, parse_json_object
from langchain_ragspine.sensitivity import (
    KNOWN_SENSITIVITIES,
    SENSITIVITY_KEY,
    is_blank_label,
    is_restricted_label,
    is_sensitivity_key,
    look_alike_capitals,
    most_restrictive,
    normalize_label,
    parse_label,
)
from langchain_ragspine.text.folding import file_name_key, normalize

__all__ = [
    "DEFAULT_SENSITIVITY",
    "JSONL_SUFFIX",
    "MARKDOWN_SUFFIXES",
    "SIDECAR_SUFFIX",
    "STORE_MARKER",
    "TEXT_SUFFIXES",
    "CorpusLoader",
    "first_h1",
    "LoaderWarning",
    "LoadStats",
    "names_of",
    "OnError",
    "PathArg",
    "real_path_inside",
]

#: Suffixes (compared case-insensitively) loaded as one document per file.
TEXT_SUFFIXES: tuple[str, ...] = (".md", ".markdown", ".txt")
#: Suffixes whose files get the Markdown ``# `` title fallback.
MARKDOWN_SUFFIXES: tuple[str, ...] = (".md", ".markdown")
#: Suffix loaded as one document per line.
JSONL_SUFFIX = ".jsonl"
#: Suffix of metadata sidecars (``a.md`` → ``a.json``).
SIDECAR_SUFFIX = ".json"
_SIDECAR_CAPITALS = SIDECAR_SUFFIX.upper()
#: ``sensitivity`` given to documents that do not set one.
DEFAULT_SENSITIVITY = "INTERNAL"

OnError = Literal["raise", "skip"]
PathArg = str | os.PathLike[str]

_UNDECODABLE = re.compile("[\udc80-\udcff]")  # bytes mapped by the "surrogateescape" error handler
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_H1 = re.compile(r"^ {0,3}#[ \t]+(.*)$")
_H1_CLOSING = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")


class LoaderWarning(UserWarning):
    """Emitted when a file or JSONL line is skipped (``on_error="skip"``, or an empty document)."""


@dataclass
class LoadStats:
    """What the last :meth:`CorpusLoader.lazy_load` pass saw; reset at the start of each pass.

    Attributes:
        files: document files seen (``.md``/``.markdown``/``.txt``/``.jsonl``; sidecars not counted),
            including the ones skipped.
        documents: documents yielded.
        skipped: ``(path, line, reason)`` for each file or JSONL line skipped because of a data problem
            (``on_error="skip"``); ``line`` is 1-based or ``None``; ``path`` is the file at fault (a sidecar's
            own path when the sidecar is broken).
        empty: locations of documents skipped because their text is empty or whitespace: ``"path"`` for a
            file, ``"path:line"`` for a JSONL line.
        outside: symlinks met in a folder walk (to a file or a folder) whose real path is outside the corpus root,
            left out with a :class:`LoaderWarning` naming them.
    """

    files: int = 0
    documents: int = 0
    skipped: list[tuple[str, int | None, str]] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Entry:
    """One document file to load: its path (as built from the user's input), its name in ``source`` (its path below
    its root, lengthened by the root's own folder names when two roots hold the same path) and the default
    ``doc_id`` of its document (JSONL: of its lines, before ``:<line>``); ``aliases`` are the file's other names
    in the run (symlinks, hard links), whose sidecars are read too; ``linked``: ``path`` is a symlink."""

    path: Path
    rel: PurePosixPath
    id_base: str
    aliases: tuple[Path, ...] = ()
    linked: bool = False


class CorpusLoader(BaseLoader):
    """Load Markdown / text / JSONL files, with YAML front matter and JSON sidecar metadata, as ``Document``s.

    Args:
        paths: one path or a sequence of paths; each a folder (walked to any depth, entries sorted by path,
            names starting with ``.`` skipped, symlinked folders not followed, symlinks leading out of the root
            left out with a warning) or a file.  Folder walks pick up ``.md``, ``.markdown``, ``.txt`` and
            ``.jsonl`` files (suffix case-insensitive) and ignore the rest. A file reached twice (a folder and a
            file inside it, a symlink, a hard link) is loaded once, under its first name that is not a symlink (at
            that name's position), with the labels of every name's sidecars (see the module docstring).
        root: the folder ``source`` and default ``doc_id`` are relative to.  Default: each folder given is its
            own root; a file given directly has its parent folder as root.  Every path must lie inside
            ``root``, also once symlinks are followed (its real path inside the real path of the root).
        on_error: ``"raise"`` (default) raises :class:`LoaderError` at the first data problem; ``"skip"``
            warns (:class:`LoaderWarning`), skips the file or JSONL line, and records it in :attr:`stats`.
        encoding: text encoding of every file, sidecars included (default ``"utf-8"``).

    Raises:
        FileNotFoundError: a path (or ``root``) does not exist; the message names it.
        LoaderError: a path's type cannot be read (``os.stat`` fails, e.g. permission denied on a folder above it),
            with ``on_error="raise"`` (with ``"skip"`` it is skipped when loading).
        ValueError: a file given explicitly has an unsupported suffix (a ``.json`` sidecar included), a path
            is not inside ``root`` (or resolves outside it through a symlink), ``root`` is not a folder, ``paths`` is empty, ``on_error`` is not
            ``"raise"``/``"skip"``, or ``encoding`` is unknown.
        TypeError: ``paths`` holds something that is not a ``str`` or ``os.PathLike``.

    Documents (``lazy_load``/``load``) come in a deterministic order: the paths in the order given, each
    folder's files sorted by their path below it, a JSONL file's lines in file order.  ``Document.id`` is the
    ``doc_id``.

    Metadata, for every document:
        * ``source``: path relative to its root, POSIX slashes (``"laws/labour.md"``).
        * ``doc_id``: sidecar / front matter ``doc_id``; else the relative path without suffix
          (``"laws/labour"``). For JSONL: the line's ``doc_id``, else ``id``, else ``_id`` (BEIR), else
          ``"<path without suffix>:<line>"``. Strings and integers are accepted (integers become strings).
          Default ids never collide: files of one run that would share one are told apart — the same stem with
          different suffixes keeps the suffix (``notes.md``, ``notes.txt``); the same path below two roots
          (``projA/README.md`` and ``projB/README.md`` given as two folders) is lengthened by the roots' folder
          names, in ``source`` too (``projA/README``, ``projB/README``).  Every other file keeps the plain
          default, and ids depend only on the files of the run, so re-ingesting the same paths keeps them.
        * ``title``: sidecar / front matter ``title`` (JSONL: sidecar / line ``title``); else, for Markdown,
          the text of the first ``# `` heading outside code fences; else the file stem (JSONL: the
          ``doc_id``). An empty title counts as missing.
        * ``sensitivity``: the label given (a string, or a list of strings), else ``"INTERNAL"``; a key in any
          width, case or spacing, with look-alike letters or HTML references counts
          (:func:`~langchain_ragspine.sensitivity.is_sensitivity_key`).  Ambiguity resolves to the most
          restrictive label, with a warning naming file and line: duplicate keys, a value naming RESTRICTED among
          other words or punctuation (``"RESTRICTED, INTERNAL"`` → ``"RESTRICTED"``), a list, front matter /
          JSONL line and sidecar that disagree, and a disagreement with an unknown label (no order known:
          ``"RESTRICTED"``).  A label outside ``PUBLIC``/``INTERNAL``/``CONFIDENTIAL``/``RESTRICTED`` is kept and
          warned about.
        * ``body_offset`` (``.md``/``.txt``): char offset of ``page_content`` in the decoded file text (after
          front matter and a BOM); ``ParagraphTextSplitter`` adds it to chunk offsets, so they index the file.
          A JSONL document has none (a line's field of that name is dropped): its offsets index its ``text``.
        * ``line`` (``.jsonl``): 1-based line number of the document in its file.
        * every other front-matter / sidecar / JSONL field, unchanged except that ``date``/``datetime`` values
          become ISO-8601 strings.  ``source``, ``body_offset`` and ``line`` are set by the loader and
          override fields of the same name.  Sidecar keys win over front matter and JSONL line fields (except
          ``sensitivity``, see above); within one source a duplicate key keeps its last value, with a warning.

    Data problems, each a :class:`LoaderError` naming file, line and field where known: a folder that cannot be
    listed or a document that cannot be read (an ``OSError`` such as permission denied or a name too long; with
    ``"skip"`` that folder or document is skipped), undecodable bytes
    (line of the first bad byte), binary content (NUL bytes), a sidecar that is not valid JSON or not a JSON
    object, a sidecar that is there but cannot be read (a symlink to nothing, a folder, a FIFO or other special
    file — never opened —, no permission, an I/O error) or whose suffix is spelled otherwise (``<stem>.JSON``,
    also beside a ``<stem>.json``; ``<stem>.json.``, a trailing dot or space), a sidecar of a ``.jsonl`` that sets ``doc_id`` (it would apply to every line),
    malformed or unclosed YAML front matter or front matter that is not a mapping, a ``sensitivity`` key at the
    top of the body outside front matter (a ``---`` block after blank lines, ``+++`` TOML, a second block, a bare
    ``sensitivity:`` line, ``**Sensitivity:** X``, ``<!-- sensitivity: X -->`` — the label would be lost), a
    metadata value that is not JSON-serialisable (a set, bytes, NaN, a non-string key), a
    ``doc_id``/``title``/``sensitivity`` of the wrong type (a sensitivity must be a string or a non-empty list of
    strings, at any depth; an empty one — ``null``, ``""`` — is refused, never read as the default), a JSONL line that is not valid
    JSON / not an object / has no string ``text``, and a ``doc_id`` already used by an earlier document (the
    message names both; with ``"skip"`` the later one is skipped).
    Empty or whitespace-only documents are always skipped with a :class:`LoaderWarning` and listed in
    ``stats.empty``.

    Attributes:
        paths: the paths given, as ``Path`` objects.
        root: the explicit root, or ``None``.
        on_error: ``"raise"`` or ``"skip"``.
        encoding: the text encoding.
        stats: :class:`LoadStats` of the current / last ``lazy_load`` pass.

    Example:
        >>> loader = CorpusLoader("docs/demo", on_error="skip")  # doctest: +SKIP
        >>> docs = loader.load()  # doctest: +SKIP
        >>> loader.stats.documents == len(docs)  # doctest: +SKIP
        True
    """

    def __init__(
        self,
        paths: PathArg | Sequence[PathArg],
        *,
        root: PathArg | None = None,
        on_error: OnError = "raise",
        encoding: str = "utf-8",
    ) -> None:
        if isinstance(paths, (str, os.PathLike)):
            items: list[Any] = [paths]
        elif isinstance(paths, (bytes, bytearray)):
            raise TypeError(f"paths must be str or os.PathLike[str], not bytes: {paths!r}")
        elif isinstance(paths, Sequence):
            items = list(paths)
        else:
            raise TypeError(
                f"paths must be a path or a sequence of paths, got {type(paths).__name__}: {paths!r}"
            )
        if not items:
            raise ValueError("paths is empty: give at least one file or folder")
        for item in items:
            if not isinstance(item, (str, os.PathLike)) or isinstance(os.fspath(item), bytes):
                raise TypeError(
                    f"each path must be a str or os.PathLike[str], got {type(item).__name__}: {item!r}"
                )
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        try:
            codecs.lookup(encoding)
        except (LookupError, TypeError) as exc:
            raise ValueError(f"unknown encoding {encoding!r}") from exc

        self.paths: tuple[Path, ...] = tuple(Path(p) for p in items)
        self.root: Path | None = Path(root) if root is not None else None
        self.on_error: OnError = on_error
        self.encoding: str = encoding
        self.stats: LoadStats = LoadStats()
        # folder -> stem (NFC, case-folded) -> names with a ".json" suffix in any spelling (for _sidecar_files)
        self._json_names: dict[str, dict[str, list[str]]] = {}
        # folder -> every name in it, NFC and case-folded (None: it cannot be listed), filled once per pass
        self._listed: dict[str, frozenset[str] | None] = {}
        if self.root is not None:
            if not self.root.exists():
                raise FileNotFoundError(errno.ENOENT, "corpus root does not exist", str(self.root))
            if not self.root.is_dir():
                raise ValueError(f"root must be a folder: {self.root}")
        for path in self.paths:
            try:
                self._check_path(path)
            except LoaderError:
                if on_error == "raise":
                    raise
                # with "skip", lazy_load reports (and skips) it like any other unreadable file

    # ------------------------------------------------------------------ public API

    def lazy_load(self) -> Iterator[Document]:
        """Yield the corpus's documents one at a time, in deterministic order (see the class docstring).

        ``stats`` is reset first.  Paths are checked (and folders walked) before the first document is
        yielded.

        Raises:
            FileNotFoundError, ValueError: as in the constructor, if the file system changed since.
            LoaderError: a data problem, with ``on_error="raise"``.
        """
        self.stats = LoadStats()
        self._json_names = {}
        self._listed = {}
        entries = self._collect()
        seen: dict[str, str] = {}  # doc_id -> location of its first document
        for entry in entries:
            self.stats.files += 1
            try:
                docs = self._open(entry)
            except LoaderError as err:
                self._problem(err)
                continue
            for doc, line in docs:
                doc_id = doc.metadata["doc_id"]
                here = str(entry.path) if line is None else f"{entry.path}:{line}"
                if doc_id in seen:
                    self._problem(
                        LoaderError(
                            f"duplicate doc_id {doc_id!r}: already used by {seen[doc_id]}",
                            path=entry.path,
                            line=line,
                            field="doc_id",
                        )
                    )
                    continue
                seen[doc_id] = here
                self.stats.documents += 1
                yield doc

    # ------------------------------------------------------------------ discovery

    def _check_path(self, path: Path) -> None:
        """Raise ``FileNotFoundError`` / ``ValueError`` for a top-level path that cannot be loaded, and
        ``LoaderError`` for one whose type cannot be read (``os.stat`` fails: permission denied on a parent folder,
        a name too long)."""
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            if exc.errno in _ABSENT:
                raise FileNotFoundError(errno.ENOENT, "corpus path does not exist", str(path)) from None
            raise _os_error(exc, path, "cannot read this path") from None
        if stat.S_ISDIR(mode):
            pass
        elif stat.S_ISREG(mode):
            suffix = path.suffix.lower()
            if suffix == SIDECAR_SUFFIX:
                raise ValueError(
                    f"{path} is a sidecar (metadata for the document file of the same stem), not a document; "
                    "pass the .md/.markdown/.txt/.jsonl file or its folder"
                )
            if suffix not in TEXT_SUFFIXES and suffix != JSONL_SUFFIX:
                raise ValueError(
                    f"unsupported file type {path.suffix or '(no suffix)'!r}: {path}; "
                    "supported: .md, .markdown, .txt, .jsonl"
                )
        else:
            raise ValueError(f"not a regular file or folder: {path}")
        if self.root is not None:
            _relative(path, self.root)  # raises ValueError when outside
        root = self._root_of(path)
        if real_path_inside(path, root) is None:
            raise ValueError(
                f"{path} resolves to {Path(os.path.abspath(path)).resolve()} (symlinks followed), outside its root "
                f"{root}: a file is loaded only from inside its root, as resolve_source_locator reads one; pass "
                "root= a folder that holds the file it points to"
            )

    def _collect(self) -> list[_Entry]:
        """All document files, in load order, each once, with distinct default ``doc_id``s (:func:`_default_ids`).

        The names of one file (a symlink, a hard link, a file given twice: :func:`_identity`) make one entry: the
        file is loaded under its first name that is not a symlink (else its first name), at that name's place, and
        its other names are kept as ``aliases`` (their sidecars are read too: :meth:`_read_sidecars`).
        """
        names: list[tuple[Path, Path, _Identity, bool]] = []
        for path in self.paths:
            try:
                self._check_path(path)
            except LoaderError as err:
                self._problem(err)
                continue
            root = self._root_of(path)
            if path.is_dir():
                walked = _walk(path, root, self._problem, functools.partial(self._outside, root=root))
                names.extend((file, root, ident, linked) for file, ident, linked in walked)
            else:
                try:
                    ident = _identity(path, path.stat())
                except OSError as exc:
                    self._problem(_os_error(exc, path, "cannot read this file"))
                    continue
                names.append((path, root, ident, path.is_symlink()))
        members: dict[_Identity, list[int]] = {}
        for i, (_, _, ident, _) in enumerate(names):
            members.setdefault(ident, []).append(i)
        chosen: dict[int, list[int]] = {}
        for group in members.values():
            first = next((i for i in group if not names[i][3]), group[0])
            chosen[first] = [i for i in group if i != first]
        found = [(names[i][0], names[i][1], _relative(names[i][0], names[i][1])) for i in sorted(chosen)]
        aliases = [_distinct_names(names[i][0], [names[j][0] for j in chosen[i]]) for i in sorted(chosen)]
        linked = [names[i][3] for i in sorted(chosen)]
        return [
            _Entry(path=e.path, rel=e.rel, id_base=e.id_base, aliases=others, linked=link)
            for e, others, link in zip(_default_ids(found), aliases, linked, strict=True)
        ]

    def _root_of(self, path: Path) -> Path:
        """The root of a path given: ``root`` if given, else the folder itself or a file's parent folder."""
        if self.root is not None:
            return self.root
        return path if path.is_dir() else path.parent

    def _outside(self, link: Path, root: Path) -> None:
        """Warn about (and record in ``stats.outside``) a symlink whose real path is outside its root."""
        real = Path(os.path.abspath(link)).resolve()
        warnings.warn(
            f"{link} is a symlink to {real}, outside the corpus root {root}: not loaded (a file is loaded only from "
            "inside its root, symlinks followed, as resolve_source_locator reads one)",
            LoaderWarning,
            stacklevel=4,
        )
        self.stats.outside.append(str(link))

    # ------------------------------------------------------------------ problems

    def _problem(self, err: LoaderError) -> None:
        """Raise ``err`` (``on_error="raise"``) or warn, and record it in ``stats.skipped``."""
        if self.on_error == "raise":
            raise err
        warnings.warn(f"{err} (skipped)", LoaderWarning, stacklevel=3)
        self.stats.skipped.append((err.path or "", err.line, err.reason))

    def _empty(self, location: str) -> None:
        """Warn about and record an empty document at ``location`` (``"path"`` or ``"path:line"``)."""
        warnings.warn(f"{location}: empty document (no text) (skipped)", LoaderWarning, stacklevel=3)
        self.stats.empty.append(location)

    # ------------------------------------------------------------------ reading

    def _read_text(self, path: Path, *, unreadable: str = "cannot read this file") -> str:
        """Decode ``path``; undecodable bytes are kept as surrogate escapes for the caller to locate.

        Raises:
            LoaderError: the file cannot be read (``"<unreadable>: <reason>"``: no permission, an I/O error), is
                binary (NUL bytes; line of the first one) or cannot be decoded at all.
        """
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise _os_error(exc, path, unreadable) from None
        try:
            text = raw.decode(self.encoding, errors="surrogateescape")
        except UnicodeDecodeError as exc:
            raise LoaderError(
                f"invalid {self.encoding} text: {exc.reason} at byte offset {exc.start}",
                path=path,
                line=raw.count(b"\n", 0, exc.start) + 1,
            ) from None
        nul = text.find("\x00")
        if nul != -1:
            raise LoaderError(
                "binary file (contains NUL bytes), expected text"
                + (
                    ""
                    if "16" in self.encoding or "32" in self.encoding
                    else "; if it is UTF-16 text, pass encoding='utf-16'"
                ),
                path=path,
                line=text.count("\n", 0, nul) + 1,
            )
        return text

    def _check_decoded(
        self, text: str, path: Path, start: int = 0, end: int | None = None, line: int = 1
    ) -> None:
        """Raise ``LoaderError`` at the first undecodable byte of ``text[start:end]`` (on ``line``)."""
        m = _UNDECODABLE.search(text, start, len(text) if end is None else end)
        if m is None:
            return
        bad = ord(m.group()) - 0xDC00
        line_start = max(text.rfind("\n", 0, m.start()) + 1, start)
        column = m.start() - line_start + 1
        raise LoaderError(
            f"invalid {self.encoding} text: undecodable byte 0x{bad:02X} at column {column}",
            path=path,
            line=line + text.count("\n", start, m.start()),
        )

    def _read_sidecars(self, entry: _Entry) -> _Sidecar:
        """The metadata of every sidecar of ``entry``'s file, merged (:func:`_merge_sidecars`; an empty
        :class:`_Sidecar` if none).

        A document file ``<stem>.<suffix>`` has two sidecar spellings, both read: ``<stem>.json`` and
        ``<stem>.<suffix>.json`` (the full file name plus ``.json``).  They are read beside the name the file is
        loaded under, beside its real path (symlinks followed) and beside each of its other names in the run
        (``entry.aliases``: symlinks and hard links), so its label does not depend on which name is loaded.

        Raises:
            LoaderError: a sidecar cannot be read (:meth:`_read_sidecar`).
        """
        # beside a file that is no symlink, its real path's sidecars are these same files
        real = [Path(os.path.abspath(entry.path)).resolve()] if entry.linked else []
        names = [entry.path, *real, *entry.aliases]
        found: list[_Sidecar] = []
        seen: set[str] = set()
        for name in names:
            for side in (name.with_name(name.name + SIDECAR_SUFFIX), name.with_suffix(SIDECAR_SUFFIX)):
                if not self._sidecar_names(side) and not self._may_exist(side):
                    continue  # (no file of that name, nor one spelled like it, in the folder's listing)
                files = self._sidecar_files(side, entry.path)
                for path in files:
                    if len(names) > 1 or len(files) > 1:
                        key = os.path.realpath(path)
                        if key in seen:
                            continue
                        seen.add(key)
                    sidecar = self._read_sidecar(path, entry.path)
                    if sidecar.paths:
                        found.append(sidecar)
        return _merge_sidecars(found, entry.path)

    def _sidecar_files(self, side: Path, doc_path: Path) -> list[Path]:
        """The files that are the sidecar ``side`` of ``doc_path``: the names of ``side``'s folder that equal
        ``side.name`` as a case-insensitive, normalizing file system compares them (:func:`_name_key`: NFC,
        case-folded — ``Notes.json`` and ``notes.MD.json`` for ``notes.md``, ``été.json`` in NFD for ``été.md`` in
        NFC, as files copied from macOS are), with their ``.json`` suffix as written; ``[side]`` when the folder
        cannot be listed.  A name that is read although it is not ``side.name`` is warned about.

        Raises:
            LoaderError: a name that would be this sidecar but for the spelling of its suffix (``<stem>.JSON``,
                ``<stem>.JSОN`` with a Cyrillic ``О``, ``"<stem>.json "``) or a trailing dot or space
                (``<stem>.json.``, which Windows and some tools read as ``<stem>.json``): its label would be lost.
        """
        names = self._sidecar_names(side)
        for name in names:
            if not name.endswith(SIDECAR_SUFFIX):
                beside = f", beside {side.name}" if side.name in names else ""
                trailing = " (a dot or space after it, which Windows drops)" if name.rstrip(". ") != name else ""
                raise LoaderError(
                    f"named like the sidecar of {doc_path.name} but with its suffix in another case or spelling"
                    f"{trailing}{beside}; a sidecar is named exactly "
                    f"{side.name}: rename or remove this file, so no label is ignored",
                    path=side.with_name(name),
                )
        for name in names:
            if name != side.name:
                _warn(
                    f"{side.with_name(name)}: read as the sidecar {side.name} of {doc_path.name} (the names differ "
                    "only in letter case or Unicode normalization, as a case-insensitive file system compares them)"
                )
        return [side.with_name(name) for name in names] or [side]

    def _read_sidecar(self, side: Path, doc_path: Path) -> _Sidecar:
        """The JSON object in the sidecar file ``side`` of ``doc_path`` (empty if there is none), made JSON-safe.

        A sidecar that is there but cannot be read is an error naming it, never ignored (its label would be lost):
        a symlink to nothing (or a loop), a folder, a FIFO, socket or device (never opened: a FIFO would block), and
        a file that cannot be opened or read (no permission, an I/O error); names spelled almost like it are
        refused by :meth:`_sidecar_files`.  A top-level ``metadata`` object (LangChain's ``Document`` JSON shape, as
        on a JSONL line) holds metadata too (:func:`_lift_metadata`), and a label nested deeper sets the label too
        (:meth:`_PairsHook.labels_and_duplicates`).
        """
        try:
            info = os.stat(side)
        except FileNotFoundError:
            if not os.path.lexists(side):
                return _Sidecar.empty()
            raise LoaderError(
                f"sidecar of {doc_path.name} is a symlink to nothing ({os.readlink(side)!r}); its labels cannot "
                "be read",
                path=side,
            ) from None
        except OSError as exc:
            raise _os_error(exc, side, f"sidecar of {doc_path.name} cannot be read") from None
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file (a FIFO, socket or device)"
            raise LoaderError(f"sidecar of {doc_path.name} is {kind}; it must be a JSON file", path=side)
        text = self._read_text(side, unreadable=f"sidecar of {doc_path.name} cannot be read")
        self._check_decoded(text, side)
        start = 1 if text.startswith("\ufeff") else 0
        hook = _PairsHook()
        try:
            data = json.loads(text[start:], object_pairs_hook=hook)
        except json.JSONDecodeError as exc:
            raise LoaderError(
                f"sidecar of {doc_path.name} is not valid JSON: {exc.msg} (column {exc.colno})",
                path=side,
                line=exc.lineno,
            ) from None
        if not isinstance(data, dict):
            first = len(text) - len(text.lstrip())
            raise LoaderError(
                f"sidecar of {doc_path.name} must be a JSON object, got {json_type_name(data)}",
                path=side,
                line=text.count("\n", 0, first) + 1,
            )
        line_of = _json_line_of(text[start:])
        data, labels = _lift_metadata(data, hook, side, line_of)
        out = _Sidecar(_to_metadata(data, side, lambda key: line_of(key, 0, True)))
        keys = sorted(_json_keys(text[start:]), key=lambda item: item[0] != 1)  # top-level keys first
        out.lines = {}
        for _, key, line in keys:
            out.lines.setdefault(key, line)
        label = _source_label(labels, side)
        if label is not None:
            out[SENSITIVITY_KEY] = label
            if labels[0][2] is not None:
                out.lines.setdefault(SENSITIVITY_KEY, labels[0][2])
        out.paths = dict.fromkeys(out, side)
        return out

    def _may_exist(self, side: Path) -> bool:
        """Whether ``side`` may be there: ``False`` only when one listing of its folder per pass has no name equal to
        it up to case and Unicode normalization (as a case-insensitive or normalizing file system would match it).
        Spares a ``stat`` per absent sidecar."""
        folder = str(side.parent)
        if folder not in self._listed:
            try:
                listing: frozenset[str] | None = frozenset(file_name_key(name) for name in os.listdir(folder))
            except OSError:
                listing = None
            self._listed[folder] = listing
        listed = self._listed[folder]
        return listed is None or file_name_key(side.name) in listed

    def _sidecar_names(self, side: Path) -> list[str]:
        """The names in ``side``'s folder that are ``side.name`` up to the spelling of its suffix — its case, width,
        look-alike letters, spaces or invisible characters around it (``a.json``, ``a.JSON``, ``a.JSОN`` with a
        Cyrillic ``О``, ``"a.json "``; :func:`~langchain_ragspine.sensitivity.look_alike_capitals``), dots or spaces
        after it (``a.json.``) — and of its stem as a case-insensitive, normalizing file system compares it
        (:func:`_name_key`: ``A.json``, NFD for NFC), from one listing of the folder per pass (``[]`` when the
        folder cannot be listed)."""
        folder = str(side.parent)
        names = self._json_names.get(folder)
        if names is None:
            names = {}
            try:
                listing = os.listdir(folder)
            except OSError:  # e.g. a folder that can be entered but not listed: only the exact name is looked up
                listing = []
            for name in listing:
                stem, suffix = os.path.splitext(name.rstrip(". ") or name)
                trailing = len(name) - len(stem) - len(suffix)  # dots and spaces after the suffix
                spelled = trailing or not suffix.isascii() or suffix != suffix.strip()  # else only its case differs
                if suffix.lower() == SIDECAR_SUFFIX or (spelled and look_alike_capitals(suffix) == _SIDECAR_CAPITALS):
                    names.setdefault(file_name_key(stem), []).append(name)
            self._json_names[folder] = names
        return sorted(names.get(file_name_key(side.stem), []))

    def _open(self, entry: _Entry) -> Iterator[tuple[Document, int | None]]:
        """Check the file (raising ``LoaderError``) and return an iterator of ``(document, line)``."""
        if entry.path.suffix.lower() == JSONL_SUFFIX:
            return self._open_jsonl(entry)
        return self._open_text(entry)

    def _open_text(self, entry: _Entry) -> Iterator[tuple[Document, int | None]]:
        path = entry.path
        text = self._read_text(path)
        self._check_decoded(text, path)
        start = 1 if text.startswith("\ufeff") else 0
        front, front_lines, body_offset = _split_front_matter(text, start, path)
        sidecar = self._read_sidecars(entry)
        body = text[body_offset:]
        if not body.strip():
            self._empty(str(path))
            return iter(())
        meta: dict[str, Any] = {**front, **sidecar}
        origin = _Origin(path, sidecar, front_lines=front_lines)
        doc_id = _id_value(meta.get("doc_id"), origin, "doc_id") or entry.id_base
        title = _title_value(meta.get("title"), origin)
        if title is None and path.suffix.lower() in MARKDOWN_SUFFIXES:
            title = first_h1(body)
        if title is None:
            title = path.stem
        meta.update(
            source=entry.rel.as_posix(),
            doc_id=doc_id,
            title=title,
            sensitivity=_merged_sensitivity(front, sidecar, origin),
            body_offset=body_offset,
        )
        return iter([(Document(id=doc_id, page_content=body, metadata=meta), None)])

    def _open_jsonl(self, entry: _Entry) -> Iterator[tuple[Document, int | None]]:
        path = entry.path
        text = self._read_text(path)
        sidecar = self._read_sidecars(entry)
        if sidecar.get("doc_id") is not None:
            raise LoaderError(
                "a sidecar of a .jsonl file applies to every line and cannot set doc_id "
                f"(set it per line in {path.name})",
                path=sidecar.paths["doc_id"],
                field="doc_id",
            )
        # check the sidecar's labels once here, rather than failing (or skipping) every line for them
        origin = _Origin(path, sidecar)
        _title_value(sidecar.get("title"), origin)  # (its sensitivity was read by _read_sidecar)
        if not text.lstrip("\ufeff").strip():
            self._empty(str(path))
            return iter(())
        return self._jsonl_lines(entry, text, sidecar)

    def _jsonl_lines(
        self, entry: _Entry, text: str, sidecar: _Sidecar
    ) -> Iterator[tuple[Document, int | None]]:
        for lineno, start, end in _line_spans(text):
            line = text[start:end]
            if lineno == 1 and line.startswith("\ufeff"):
                line = line[1:]
            if not line.strip():
                continue
            try:
                self._check_decoded(text, entry.path, start, end, lineno)
                doc = self._jsonl_doc(entry, line, lineno, sidecar)
            except LoaderError as err:
                self._problem(err)
                continue
            if doc is not None:
                yield doc, lineno

    def _jsonl_doc(self, entry: _Entry, line: str, lineno: int, sidecar: _Sidecar) -> Document | None:
        path = entry.path
        hook = _PairsHook()
        obj = parse_json_object(
            line, path=path, lineno=lineno, what="JSONL line", error=LoaderError, object_pairs_hook=hook
        )
        if "text" not in obj:
            raise LoaderError(
                "missing (every JSONL line needs a string 'text')", path=path, line=lineno, field="text"
            )
        body = obj.pop("text")
        if not isinstance(body, str):
            raise LoaderError(
                f"must be a string, got {json_type_name(body)}", path=path, line=lineno, field="text"
            )
        _check_surrogates(body, "text", path, lineno)
        if not body.strip():
            self._empty(f"{path}:{lineno}")
            return None
        obj, labels = _lift_metadata(obj, hook, path, lambda key, n, top: lineno)
        fields = _to_metadata(obj, path, lambda key: lineno)
        label = _source_label(labels, path)
        if label is not None:
            fields[SENSITIVITY_KEY] = label
        line_origin = _Origin(path, _Sidecar.empty(), line=lineno)
        doc_id: str | None = None
        for key in ("doc_id", "id", "_id"):
            doc_id = _id_value(fields.get(key), line_origin, key)
            if doc_id is not None:
                break
        if doc_id is None:
            doc_id = f"{entry.id_base}:{lineno}"
        meta: dict[str, Any] = {**fields, **sidecar}
        meta.pop("body_offset", None)  # reserved: a line's chunk offsets index its decoded text (see locators)
        origin = _Origin(path, sidecar, line=lineno)
        title = _title_value(meta.get("title"), origin)
        meta.update(
            source=f"{entry.rel.as_posix()}:{lineno}",
            doc_id=doc_id,
            title=doc_id if title is None else title,
            sensitivity=_merged_sensitivity(fields, sidecar, origin),
            line=lineno,
        )
        return Document(id=doc_id, page_content=body, metadata=meta)


# ---------------------------------------------------------------------- helpers


def first_h1(markdown: str) -> str | None:
    """Text of the first ATX level-1 heading (``# Title``) outside code fences, or ``None``.

    A closing run of ``#`` is dropped; ``## `` and deeper, Setext headings and fenced code are ignored.

    Example:
        >>> first_h1("```\\n# not this\\n```\\n# 労働基準法 #\\n")
        '労働基準法'
    """
    fence: str | None = None
    for raw in markdown.split("\n"):
        line = raw.rstrip("\r")
        m = _FENCE.match(line)
        if m is not None:
            marker = m.group(1)
            if fence is None:
                fence = marker
            elif (
                marker[0] == fence[0]
                and len(marker) >= len(fence)
                and not line.strip()[len(marker) :].strip()
            ):
                fence = None
            continue
        if fence is not None:
            continue
        h = _H1.match(line)
        if h is not None:
            title = _H1_CLOSING.sub("", h.group(1)).strip()
            if title:
                return title
    return None


#: A folder holding this file is a ragspine store directory (see ``langchain_ragspine.backends.directory.layout``); the walk skips
#: it, so a store kept inside the corpus is never read back as documents.
STORE_MARKER = "ragspine-store.json"


#: ``errno`` values of ``os.stat`` that mean "nothing there" (as ``Path.exists`` / ``Path.is_file`` read them).
_ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})


def _os_error(exc: OSError, path: Path, message: str) -> LoaderError:
    """The :class:`LoaderError` for an ``OSError`` met while loading ``path``: ``"<message>: <reason>"``
    (``"cannot read this file: Permission denied"``), naming the path."""
    return LoaderError(f"{message}: {_os_reason(exc)}", path=path)


#: What names one file: ``(st_dev, st_ino)`` (the path's real path where the file system gives no inode number).
_Identity = tuple[int, int] | str


def _identity(path: Path, info: os.stat_result) -> _Identity:
    """The identity of the file ``path`` names (``info`` is its ``os.stat``, symlinks followed): every name of one
    file — the file itself, a symlink to it, a hard link — has the same one."""
    return (info.st_dev, info.st_ino) if info.st_ino else os.path.realpath(path)


def real_path_inside(path: PathArg, root: PathArg) -> Path | None:
    """The real path of ``path`` (every symlink followed, ``Path.resolve``) when it lies inside the real path of
    ``root``, else ``None``: the one rule for "inside the corpus root", shared by :class:`CorpusLoader` (which loads
    no file outside its root) and ``resolve_source_locator`` (which reads none).

    Example:
        >>> real_path_inside("corpus/link.md", "corpus")  # doctest: +SKIP
        PosixPath('/data/corpus/notes/link-target.md')
    """
    real_root = Path(root).resolve()
    real = Path(os.path.abspath(path)).resolve()
    return real if real.is_relative_to(real_root) else None


def names_of(path: PathArg, root: PathArg) -> list[Path]:
    """Every name below ``root`` that a folder walk of :class:`CorpusLoader` loads as the same file as ``path`` (a
    symlink to it, a hard link, the file itself), in walk order: the names whose sidecars give the file's label
    when ``root`` is loaded.  ``resolve_source_locator`` reads them, so it refuses what the loader labels
    RESTRICTED, whichever name a locator uses.  Folders that cannot be listed are left out.

    Raises:
        OSError: ``path`` cannot be read (``FileNotFoundError`` when missing).
    """
    target = _identity(Path(path), os.stat(path))
    root = Path(root)
    walked = _walk(root, root, lambda err: None, lambda link: None)
    return [file for file, ident, _ in walked if ident == target]


def _walk(
    folder: Path, root: Path, problem: Callable[[LoaderError], None], outside: Callable[[Path], None]
) -> list[tuple[Path, _Identity, bool]]:
    """``(file, identity, is a symlink)`` for each supported document file under ``folder``, hidden names and store
    directories skipped, sorted by path.

    The walk keeps its own stack of folders (no recursion), so any depth the file system allows is walked. A folder
    that cannot be listed, or a file whose type cannot be read (``OSError``: permission denied, a name too long), is
    passed to ``problem`` as a :class:`LoaderError` naming it — which raises, or records it and the walk goes on
    without it (``on_error="skip"``).  Symlinked folders are not followed; a symlink (to a file or a folder) whose
    real path is outside the real path of ``root`` (:func:`real_path_inside`) is passed to ``outside`` and left out.
    """
    found: list[tuple[tuple[str, ...], Path, _Identity, bool]] = []
    todo = [folder]
    while todo:
        base = todo.pop()
        try:
            with os.scandir(base) as listing:
                entries = list(listing)
        except OSError as exc:
            problem(_os_error(exc, base, "cannot list this folder (none of its files were loaded)"))
            continue
        if any(entry.name == STORE_MARKER for entry in entries):
            continue  # a ragspine store directory
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            try:
                linked = entry.is_symlink()
                is_dir = entry.is_dir()
            except OSError:
                linked = is_dir = False  # as os.walk: read as a file below
            suffix = os.path.splitext(name)[1].lower()
            supported = suffix in TEXT_SUFFIXES or suffix == JSONL_SUFFIX
            if linked and (is_dir or supported) and real_path_inside(base / name, root) is None:
                outside(base / name)
                continue
            if is_dir:
                if not linked:  # symlinked folders are not followed
                    todo.append(base / name)
                continue
            if supported:
                file = base / name
                try:
                    info = file.stat()
                except OSError as exc:
                    if exc.errno not in _ABSENT:
                        problem(_os_error(exc, file, "cannot read this file"))
                    continue  # else a dangling symlink or a symlink loop (as Path.is_file), or removed since
                if stat.S_ISREG(info.st_mode):
                    found.append((file.relative_to(folder).parts, file, _identity(file, info), linked))
    found.sort(key=lambda item: item[0])
    return [(file, ident, linked) for _, file, ident, linked in found]


def _distinct_names(path: Path, others: Sequence[Path]) -> tuple[Path, ...]:
    """``others`` without ``path`` and without repeats (the same path given twice is one name), in order."""
    seen = {os.path.abspath(path)}
    out: list[Path] = []
    for other in others:
        key = os.path.abspath(other)
        if key not in seen:
            seen.add(key)
            out.append(other)
    return tuple(out)


def _default_ids(found: Sequence[tuple[Path, Path, PurePosixPath]]) -> list[_Entry]:
    """Entries for ``(file, root, path below root)`` triples, each with a default ``doc_id`` no other one shares.

    The default id is the path below the root without its suffix (``laws/labour``).  Files whose default ids would
    be equal (JSONL files apart from the others, since their ids end in ``:<line>``) are told apart, in this order:

    1. the same stem with different suffixes (``notes.md``, ``notes.txt``): the id keeps the suffix
       (``notes.md``, ``notes.txt``);
    2. the same path below different roots (``projA/README.md``, ``projB/README.md`` given as two folders): the
       path is lengthened by the roots' own trailing folder names until the paths differ, in ``source`` as in the
       id (``projA/README``, ``projB/README``), keeping the suffix only if that is still needed.

    Only colliding files change, and the ids depend only on the set of files in the run, so a re-ingest of the same
    paths keeps the same ids, and a store whose ids never collided keeps them.
    """
    groups: dict[tuple[str, bool], list[int]] = {}
    for i, (file, _root, rel) in enumerate(found):
        groups.setdefault((rel.with_suffix("").as_posix(), file.suffix.lower() == JSONL_SUFFIX), []).append(i)
    names = [rel for _, _, rel in found]
    ids = [rel.with_suffix("").as_posix() for rel in names]
    for members in groups.values():
        if len(members) < 2:
            continue
        root_parts = [Path(os.path.abspath(found[i][1])).parts[1:] for i in members]  # without the anchor "/"
        longest = max(len(parts) for parts in root_parts)
        for extra in range(longest + 1):
            candidates = [
                PurePosixPath(*parts[len(parts) - min(extra, len(parts)) :], *found[i][2].parts)
                for i, parts in zip(members, root_parts, strict=True)
            ]
            if len({c.as_posix() for c in candidates}) == len(candidates):
                break
        else:
            continue  # not told apart (cannot happen for distinct files); the duplicate doc_id error names both
        stems = [c.with_suffix("").as_posix() for c in candidates]
        keep_suffix = len(set(stems)) < len(stems)
        for i, candidate, stem in zip(members, candidates, stems, strict=True):
            names[i] = candidate
            ids[i] = candidate.as_posix() if keep_suffix else stem
    return [
        _Entry(path=file, rel=name, id_base=doc_id)
        for (file, _, _), name, doc_id in zip(found, names, ids, strict=True)
    ]


def _relative(path: Path, root: Path) -> PurePosixPath:
    """``path`` relative to ``root`` (lexically, else after resolving symlinks), as a POSIX path.

    Raises:
        ValueError: ``path`` is not inside ``root``.
    """
    abs_path, abs_root = Path(os.path.abspath(path)), Path(os.path.abspath(root))
    try:
        rel = abs_path.relative_to(abs_root)
    except ValueError:
        try:
            rel = abs_path.resolve().relative_to(abs_root.resolve())
        except ValueError:
            raise ValueError(f"{path} is not inside root {root}") from None
    return PurePosixPath(rel.as_posix())


def _os_reason(exc: OSError) -> str:
    """An ``OSError``'s reason without the path (the ``LoaderError`` names it): ``"Permission denied"``."""
    return exc.strerror or str(exc) or type(exc).__name__


def _line_spans(text: str) -> Iterator[tuple[int, int, int]]:
    """``(lineno, start, end)`` of each ``\\n``-separated line (``\\r`` kept; no other line breaks)."""
    pos, lineno, n = 0, 1, len(text)
    while pos < n:
        end = text.find("\n", pos)
        if end == -1:
            end = n
        yield lineno, pos, end
        pos, lineno = end + 1, lineno + 1


#: Where a line ends, for front matter: ``\n``, ``\r\n``, a lone ``\r`` and the other line boundaries of
#: ``str.splitlines`` (VT, FF, FS, GS, RS, NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR).
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
#: What ends a key on a line that looks like metadata: a ``:`` (YAML's needs whitespace after it; a reader's does
#: not: ``sensitivity:RESTRICTED``) or TOML's ``=``; and the flow indicators that start a new key
#: (``{title: T, sensitivity: X}``, ``[params]``).
_KEY_END = re.compile(r"[:=]|[{},\[\]]")
#: Where a YAML comment starts: a ``#`` at the start of a line or after whitespace.
_YAML_COMMENT = re.compile(r"(?:^|\s)#")


def _lines(text: str, start: int) -> Iterator[tuple[int, int, int]]:
    """``(start, end, next)`` of each line of ``text[start:]``: ``text[start:end]`` is the line without its break
    (:data:`_LINE_BREAK`), ``next`` where the next line starts."""
    pos, n = start, len(text)
    while pos < n:
        m = _LINE_BREAK.search(text, pos)
        if m is None:
            yield pos, n, n
            return
        yield pos, m.start(), m.end()
        pos = m.end()


def _invisible(ch: str) -> bool:
    """Whether ``ch`` shows nothing: whitespace (a no-break space included) or Unicode category Cf (a BOM,
    zero-width characters, bidi controls)."""
    return ch.isspace() or (not ch.isascii() and unicodedata.category(ch) == "Cf")


def _blank(line: str) -> bool:
    """Whether ``line`` shows nothing (:func:`_invisible` characters only); stops at the first visible one."""
    return all(_invisible(ch) for ch in line)


def _fence(line: str) -> str | None:
    """``"---"`` or ``"..."`` when ``line`` is a front matter fence, else ``None``: the three characters, with
    invisible characters (:func:`_invisible`) around or between them and an optional ``#`` comment after them
    (``"--- # metadata"``, ``"\\ufeff---\\u00a0"``, ``"-\\u200b--"``); whitespace between them makes no fence
    (``"- - -"`` is a Markdown rule).  Reads the line only up to its first character that rules a fence out."""
    mark = ""
    for ch in line:
        if ch.isspace():
            if 0 < len(mark) < 3:
                return None
            continue
        if _invisible(ch):
            continue
        if len(mark) == 3:
            return mark if ch == "#" else None
        mark += ch
        if mark not in ("-", "--", "---", ".", "..", "..."):
            return None
    return mark if len(mark) == 3 else None


def _line_keys(line: str) -> Iterator[str]:
    """The keys a line that looks like metadata sets, as a reader would take them: YAML ``key: value`` (block or flow
    style, quoted or not, after a ``-`` or ``?`` indicator; also ``key:value``), TOML ``key = value`` (a dotted key
    also gives its last part: ``params.sensitivity``), in any width (NFKC: ``sensitivity：`` with a full-width
    colon); a ``#`` comment is not read.  Linear in the line's length."""
    line = normalize(line)
    if ":" not in line and "=" not in line:
        return
    comment = _YAML_COMMENT.search(line)
    if comment is not None:
        line = line[: comment.start()]
    key_start = 0
    for m in _KEY_END.finditer(line):
        if m.group() in ":=":
            key = line[key_start : m.start()].strip().lstrip("-? \t").strip()
            if key[:1] == '"' and key[-1:] == '"':
                try:
                    key = json.loads(key)
                except ValueError:
                    key = key[1:-1]
            elif key[:1] == "'" and key[-1:] == "'":
                key = key[1:-1].replace("''", "'")
            yield key
            if "." in key:
                yield key.rsplit(".", 1)[1]
        key_start = m.end()


def _prose(line: str) -> bool:
    """Whether ``line`` is text of a document's body rather than a line of metadata: its first visible character is
    a letter, a digit or a ``#`` (a Markdown heading), and it sets no key (:func:`_line_keys`).  A blank line, a
    line of marks (``---``, ``+++``, ``----``, ``－－－``, ``———``), a directive (``%YAML 1.2``), a comment
    (``<!-- x -->``) and a ``key: value`` line are not prose."""
    first = next((ch for ch in line if not _invisible(ch)), None)
    if first is None or not (first == "#" or unicodedata.category(first)[0] in "LN"):
        return False
    return next(_line_keys(line), None) is None


def _head_label(text: str, start: int, first_line: int) -> tuple[int, str] | None:
    """``(line, key)`` of the first line of the *head* of ``text[start:]`` (lines numbered from ``first_line``) that
    sets a key naming the sensitivity label (:func:`~langchain_ragspine.sensitivity.is_sensitivity_key`), else
    ``None``.  The head is every line before the first line of prose (:func:`_prose`): where a reader, or another
    tool (Hugo's ``+++`` TOML, a YAML document with a directive or a tag, MultiMarkdown's ``Key: value`` lines),
    would look for a document's metadata.  Reads only the head."""
    for n, (s, e, _) in enumerate(_lines(text, start)):
        line = text[s:e]
        shown_key = _displayed_label(line)  # before the prose test: a heading is prose, and may still show the label
        if shown_key is not None:
            return first_line + n, shown_key
        if _prose(line):
            return None
        for shown in (line, *_unmarked(line)):
            for key in _line_keys(shown):
                if is_sensitivity_key(key):
                    return first_line + n, key
    return None


#: Markup around a line's text that a reader does not see (:func:`_unmarked`): a Markdown link reference definition
#: used as a comment (``[//]: # (text)``, ``[comment]: <> "text"``) and an HTML comment (``<!-- text -->``).
_LINK_REFERENCE = re.compile(r"^\s*\[[^\]]*\]:\s*(?:<[^>]*>|\S*)\s*[(\"'](.*)[)\"']\s*$")
_HTML_COMMENT = re.compile(r"<!--(.*?)(?:-->|$)")
#: A Markdown ATX heading written as a label (``# Sensitivity: RESTRICTED``) and a table row (``| sensitivity |
#: RESTRICTED |``): key and value as a reader sees them (:func:`_displayed_label`).
_ATX_LABEL = re.compile(r"^\s{0,3}#{1,6}\s+([^:：=]+)[:：=](.*?)(?:\s+#+)?\s*$")
_TABLE_ROW = re.compile(r"^\s*\|([^|]+)\|([^|]+)\|")


def _displayed_label(line: str) -> str | None:
    """The key of ``line`` when it is a heading or a table row that a reader sees as a RESTRICTED label (a sensitivity key
    (:func:`~langchain_ragspine.sensitivity.is_sensitivity_key`) whose value reads RESTRICTED).  Other values in these
    forms are prose (``# Sensitivity: what the label means``), and losing a weaker label fails closed (the default
    is ``INTERNAL``), else ``None``."""
    m = _ATX_LABEL.match(line) or _TABLE_ROW.match(line)
    if m is None or not is_sensitivity_key(key := m.group(1).strip()) or not is_restricted_label(m.group(2).strip()):
        return None
    return key


def _unmarked(line: str) -> list[str]:
    """The texts of ``line`` hidden in markup, markup stripped: a link reference definition's title
    (``[//]: # (sensitivity: RESTRICTED)`` → ``sensitivity: RESTRICTED``) and an HTML comment's text; separators such
    as ``**`` around a key (``**Sensitivity:** RESTRICTED``) are read by
    :func:`~langchain_ragspine.sensitivity.is_sensitivity_key` itself."""
    if "[" not in line and "<!--" not in line:
        return []
    found = [m.group(1) for m in _HTML_COMMENT.finditer(line)]
    link = _LINK_REFERENCE.match(line)
    if link is not None:
        found.append(link.group(1))
    return found


def _split_front_matter(text: str, start: int, path: Path) -> tuple[dict[str, Any], dict[str, int], int]:
    """Parse YAML front matter at ``text[start:]``; return ``(metadata, key_lines, body_offset)``.

    ``metadata`` holds the JSON-safe values (``{}`` when there is no front matter); ``key_lines`` maps each
    top-level key to its 1-based line in the file (for error messages); ``body_offset`` is where the body
    starts.

    Front matter opens when the first line is a ``---`` fence (:func:`_fence`: whitespace, a no-break space and
    invisible characters such as a second BOM or a zero-width space around it, and a ``#`` comment after it, are
    ignored) and closes at the next ``---`` or ``...`` fence line.  Lines end at ``\\n``, ``\\r\\n``, a lone ``\\r``
    or another Unicode line boundary (:data:`_LINE_BREAK`), so a file with classic Mac line ends has front matter
    too; the offsets count the file as stored.

    Anything else that looks like metadata is not front matter, and a label in it would be indexed as the body of a
    document with the default label, so the file is refused when the head of its body (:func:`_head_label`: the
    lines before its first line of prose) sets a sensitivity key: a ``---`` block after blank lines (in Jekyll, body
    text), another opener (``+++`` TOML, ``--- !!map``, ``%YAML 1.2`` then ``---``, ``----``, ``－－－``, ``———``, a
    ``<!-- comment -->`` first), ``sensitivity: RESTRICTED`` as the first line, and a second ``---`` block right
    after the front matter.

    Raises:
        LoaderError: the YAML is malformed (its line), the block is never closed, it is not a mapping, a value
            is not JSON-serialisable (the field and its line), or the head of the body sets the sensitivity label
            outside front matter (that line, field ``sensitivity``).
    """
    lines = _lines(text, start)
    first = next(
        ((n, s, e, after) for n, (s, e, after) in enumerate(lines, 1) if not _blank(text[s:e])), None
    )
    if first is None:
        return {}, {}, start  # empty, or blank lines only
    opened, s, e, block_start = first
    if opened > 1 or _fence(text[s:e]) != "---":
        _refuse_head_label(text, start, 1, path, text[s:e], opened)
        return {}, {}, start
    block: list[tuple[int, int, int]] = []
    closed_at: int | None = None
    for s, e, after in lines:
        if _fence(text[s:e]) is not None:
            closed_at = after
            break
        block.append((s, e, after))
    if closed_at is None:
        raise LoaderError(
            "YAML front matter opened on this line is never closed by a '---' or '...' line", path=path, line=1
        )
    yaml_text = text[block_start : block[-1][2] if block else block_start]
    meta, key_lines = _parse_front_matter(yaml_text, path)
    _refuse_head_label(text, closed_at, len(block) + 3, path, None, 0)
    return meta, key_lines, closed_at


def _refuse_head_label(
    text: str, start: int, first_line: int, path: Path, opener: str | None, opened: int
) -> None:
    """Raise the :class:`LoaderError` for a sensitivity key in the head of ``text[start:]`` (:func:`_head_label`),
    saying why it is not front matter: ``opener`` is the first visible line of a file without front matter (on line
    ``opened``), ``None`` for the body after front matter (which closed on line ``first_line - 1``)."""
    found = _head_label(text, start, first_line)
    if found is None:
        return
    line, key = found
    if opener is None:
        why = f"after the front matter closed on line {first_line - 1}, which is not front matter (one block is read)"
    elif opened > 1 and _fence(opener) == "---":
        why = (
            f"in a '---' block (line {opened}) that is not front matter because {opened - 1} blank line(s) come "
            "before it — remove the blank lines"
        )
    else:
        why = (
            f"before the document's text, which is not front matter: line {opened} ({opener.strip()[:40]!r}) does "
            "not open front matter, a YAML block opened by a '---' line alone as the first line and closed by '---' "
            "or '...'"
        )
    raise LoaderError(
        f"sets {key!r} {why}; this label would be indexed as text of a document with the default label, so the "
        f"file is refused: move the label into front matter or a sidecar {path.stem}.json (if the line is text, "
        "start the document with a heading or other text)",
        path=path,
        line=line,
        field=SENSITIVITY_KEY,
    )


def _parse_front_matter(yaml_text: str, path: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """``yaml.safe_load`` front matter (from file line 2): ``(JSON-safe metadata, key → file line)``."""
    try:
        data = yaml.safe_load(yaml_text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        parts = [p for p in (getattr(exc, "context", None), getattr(exc, "problem", None)) if p]
        reason = ", ".join(parts) if parts else str(exc)
        raise LoaderError(
            f"malformed YAML front matter: {reason}", path=path, line=2 + mark.line if mark is not None else 1
        ) from None
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise LoaderError(
            f"YAML front matter must be a mapping, got {type(data).__name__}", path=path, line=2
        )
    lines: dict[str, int] = {}
    node = yaml.compose(yaml_text, Loader=yaml.SafeLoader)
    labels: list[_LabelAt] = []
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                lines.setdefault(str(key_node.value), 2 + key_node.start_mark.line)
        labels = _yaml_labels_and_duplicates(node, path)
    meta = _to_metadata(data, path, lines.get)
    label = _source_label(labels, path)
    if label is not None:
        meta[SENSITIVITY_KEY] = label
        if labels[0][2] is not None:
            lines.setdefault(SENSITIVITY_KEY, labels[0][2])
    return meta, lines


@dataclass(frozen=True)
class _Origin:
    """Where a metadata key came from, for messages: the sidecar if it has the key, else the document."""

    path: Path
    sidecar: _Sidecar
    front_lines: Mapping[str, int] | None = None
    line: int | None = None

    def error(self, key: str, reason: str) -> LoaderError:
        if key in self.sidecar:
            return LoaderError(reason, path=self.sidecar.paths[key], field=key)
        line = self.line if self.front_lines is None else self.front_lines.get(key)
        return LoaderError(reason, path=self.path, line=line, field=key)


def _id_value(value: Any, origin: _Origin, key: str) -> str | None:
    """A ``doc_id`` candidate as a string, ``None`` when absent (``None``)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise origin.error(key, f"a document id must be a string or an integer, got {json_type_name(value)}")
    text = str(value)
    if not text.strip():
        raise origin.error(key, "a document id must not be empty")
    return text


def _title_value(value: Any, origin: _Origin) -> str | None:
    """The ``title`` as a string (numbers are converted), ``None`` when absent or blank."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise origin.error("title", f"must be a string, got {json_type_name(value)}")
    text = str(value)
    return text if text.strip() else None


# ---------------------------------------------------------------------- sensitivity labels and duplicate keys
#
# The policy (folding, "most restrictive wins") lives in langchain_ragspine.sensitivity; the functions below find
# every place a source sets the label and say where, so that each warning names the file and line.

#: ``(key as written, value, 1-based line or None)``: one occurrence of a sensitivity key in a source.
_LabelAt = tuple[str, Any, int | None]


def _warn(message: str) -> None:
    warnings.warn(message, LoaderWarning, stacklevel=3)


def _at(path: Path, line: int | None) -> str:
    return f"{path}:{line}" if line is not None else str(path)


def _source_label(occurrences: Sequence[_LabelAt], path: Path) -> str | None:
    """The one label of a source (front matter, sidecar, JSONL line) from every sensitivity key it holds.

    Each value is read with :func:`~langchain_ragspine.sensitivity.parse_label`; several keys (a duplicate key, ``Sensitivity`` beside ``sensitivity``) give the most restrictive.  Every
    ambiguity is warned about, naming file and line.  ``None`` when the source sets no label.

    Raises:
        LoaderError: a value is empty (``null``, ``""``, blank), not a string or a list of strings, or is an empty
            list (field ``sensitivity``).
    """
    labels: list[str] = []
    for key, value, line in occurrences:
        if key != SENSITIVITY_KEY:
            _warn(f"{_at(path, line)}: key {key!r} is read as {SENSITIVITY_KEY!r}")
        if is_blank_label(value):
            raise LoaderError(
                f"{key!r} has no label ({'null' if value is None else repr(value)}); an empty label is never read as the default: write a "
                "label such as 'INTERNAL', or remove the key",
                path=path,
                line=line,
                field=SENSITIVITY_KEY,
            )
        try:
            label, why = parse_label(value)
        except (TypeError, ValueError) as exc:
            reason = str(exc) if isinstance(value, (list, tuple)) else f"got {json_type_name(value)}"
            raise LoaderError(
                f"must be a string label such as 'INTERNAL' (or a list of them): {reason}",
                path=path,
                line=line,
                field=SENSITIVITY_KEY,
            ) from None
        if why:
            _warn(f"{_at(path, line)}: ambiguous sensitivity: {why}; read as {label}")
        labels.append(label)
    if not labels:
        return None
    label = most_restrictive(labels)
    if len(occurrences) > 1:
        where = ", ".join(
            f"{key!r}: {value!r}" + ("" if line is None else f" (line {line})") for key, value, line in occurrences
        )
        _warn(
            f"{_at(path, occurrences[1][2])}: sensitivity is set {len(occurrences)} times ({where}); "
            f"keeping {label}"
        )
    return label


def _merged_sensitivity(document: Mapping[str, Any], sidecar: _Sidecar, origin: _Origin) -> str:
    """The label of a document whose own metadata and sidecar may both set one (each already read by
    :func:`_source_label`).

    Where they disagree the most restrictive wins (a warning names both places) — unlike every other key, where the
    sidecar wins.  A label outside ``KNOWN_SENSITIVITIES`` is kept and warned about.
    """
    own, side = document.get(SENSITIVITY_KEY), sidecar.get(SENSITIVITY_KEY)
    present = [label for label in (own, side) if label is not None]
    label = most_restrictive(present) if present else DEFAULT_SENSITIVITY
    own_at = _at(origin.path, origin.line if origin.front_lines is None else origin.front_lines.get(SENSITIVITY_KEY))
    if own is not None and side is not None and normalize_label(own) != normalize_label(side):
        side_at = _at(sidecar.paths[SENSITIVITY_KEY], sidecar.lines.get(SENSITIVITY_KEY))
        _warn(
            f"{own_at}: sensitivity {own!r} in the document and {side!r} in its sidecar {side_at} disagree; "
            f"keeping {label} (the most restrictive)"
        )
    if normalize_label(label) not in KNOWN_SENSITIVITIES:
        _warn(
            f"{own_at}: unknown sensitivity label {label!r} (known: {', '.join(KNOWN_SENSITIVITIES)}); "
            "it is kept as is and is not treated as RESTRICTED"
        )
    return label


class _Sidecar(dict[str, Any]):
    """A sidecar's metadata (of one file, or of several merged), with the 1-based line of each key in :attr:`lines`
    and the file each key comes from in :attr:`paths` (for messages)."""

    lines: dict[str, int]
    paths: dict[str, Path]

    @classmethod
    def empty(cls) -> _Sidecar:
        """No sidecar: no metadata."""
        out = cls()
        out.lines, out.paths = {}, {}
        return out


def _merge_sidecars(sidecars: Sequence[_Sidecar], doc_path: Path) -> _Sidecar:
    """The metadata of several sidecars of one document, the first one first (:meth:`CorpusLoader._read_sidecars`:
    ``<name>.json`` before ``<stem>.json``, the name loaded before the real path and the other names).

    For ``sensitivity`` the most restrictive label wins; for every other key, the first sidecar that sets it.  When
    two sidecars set a key to different values, a :class:`LoaderWarning` names both files.
    """
    if len(sidecars) == 1:
        return sidecars[0]
    out = _Sidecar.empty()
    labels: list[str] = []
    for sidecar in sidecars:
        for key, value in sidecar.items():
            if key == SENSITIVITY_KEY:
                labels.append(value)
            if key not in out:
                out[key], out.paths[key] = value, sidecar.paths[key]
                if key in sidecar.lines:
                    out.lines[key] = sidecar.lines[key]
            elif out[key] != value:
                keep = most_restrictive(labels) if key == SENSITIVITY_KEY else out[key]
                _warn(
                    f"{doc_path}: its sidecars {out.paths[key]} and {sidecar.paths[key]} set {key!r} to "
                    f"{out[key]!r} and {value!r}; keeping {keep!r}"
                    + (" (the most restrictive)" if key == SENSITIVITY_KEY else " (the first)")
                )
    if labels:
        out[SENSITIVITY_KEY] = most_restrictive(labels)
    return out


def _lift_metadata(
    obj: dict[str, Any], hook: _PairsHook, path: Path, line_of: Callable[[str, int, bool], int | None]
) -> tuple[dict[str, Any], list[_LabelAt]]:
    """``(fields, labels)`` of a JSON object holding metadata (a JSONL line, a sidecar): a top-level ``metadata``
    object — LangChain's ``Document`` JSON shape, ``{"page_content"/"text": ..., "metadata": {...}}`` — holds
    metadata too, under the top-level keys (which win); any other ``metadata`` value stays a field.  ``labels`` are
    the sensitivity keys of both objects, top level first (:meth:`_PairsHook.labels_and_duplicates`, which warns
    about duplicate keys)."""
    nested = obj.pop("metadata", None)
    labels = hook.labels_and_duplicates([obj, nested], path, line_of)
    if isinstance(nested, dict):
        obj = {**nested, **obj}
    elif nested is not None:
        obj["metadata"] = nested
    return obj, labels


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:]')


def _json_keys(text: str) -> list[tuple[int, str, int]]:
    """``(depth, key, line)`` of every object key in valid JSON ``text``, in order; top-level keys have depth 1."""
    out: list[tuple[int, str, int]] = []
    depth, line, last = 0, 1, 0
    previous: tuple[str, int] | None = None
    for m in _JSON_TOKEN.finditer(text):
        token = m.group()
        if token[0] == '"':
            line += text.count("\n", last, m.start())
            last = m.start()
            previous = (json.loads(token), line)
            continue
        if token in "{[":
            depth += 1
        elif token in "}]":
            depth -= 1
        elif previous is not None:  # ":" after a string: that string was a key
            out.append((depth, previous[0], previous[1]))
        previous = None
    return out


class _PairsHook:
    """``object_pairs_hook`` for ``json.loads`` that records every object's pairs, duplicate keys included (the
    plain ``dict`` it returns keeps the last value, as ``json.loads`` does)."""

    def __init__(self) -> None:
        self.pairs: dict[int, list[tuple[str, Any]]] = {}
        self._objects: list[dict[str, Any]] = []  # keeps every object alive, so ids stay unique

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        self.pairs[id(obj)] = pairs
        self._objects.append(obj)
        return obj

    def labels_and_duplicates(
        self, label_objects: Sequence[Any], path: Path, line_of: Callable[[str, int, bool], int | None]
    ) -> list[_LabelAt]:
        """Warn about every duplicate key (the last value is used); return the sensitivity keys of
        ``label_objects`` (the objects whose keys become metadata, in that order), duplicates included, then those
        of every other object at any depth (LangChain's serialised ``Document``, ``kwargs.metadata``; a
        ``metadata.metadata``; any nested mapping), each under its dotted path (``"kwargs.metadata.sensitivity"``),
        so that a label the loader can see is never ignored.

        ``line_of(key, n, top)`` is the line of the ``n``-th (0-based) occurrence of ``key`` among the top-level
        keys (``top``) or the nested ones, or ``None``.
        """
        label_ids = [id(obj) for obj in label_objects if isinstance(obj, dict)]
        root = next(reversed(self.pairs), None)  # json.loads finishes the outermost object last
        places: dict[int, str] = {}
        # the top level, and its lifted "metadata" object
        for obj, prefix in zip(label_objects, ("", "metadata."), strict=False):
            places.update(_object_paths(obj, prefix))
        found: dict[int, list[_LabelAt]] = {}
        for obj_id, pairs in self.pairs.items():
            counts: dict[str, int] = {}
            for key, value in pairs:
                n = counts[key] = counts.get(key, -1) + 1
                if is_sensitivity_key(key):
                    written = key if obj_id in label_ids else places.get(obj_id, "") + key
                    found.setdefault(obj_id, []).append((written, value, line_of(key, n, obj_id == root)))
                elif n == 1:
                    where = _at(path, line_of(key, n, obj_id == root))
                    _warn(f"{where}: duplicate key {key!r}; the last value is used")
        others = [obj_id for obj_id in found if obj_id not in label_ids]
        return [label for obj_id in [*label_ids, *others] for label in found.get(obj_id, [])]


def _object_paths(root: Any, prefix: str) -> dict[int, str]:
    """``id`` of every mapping in ``root`` (parsed JSON) → ``prefix`` + its dotted path + ``"."``
    (``"kwargs.metadata."``, ``"items[2]."``); the root's is ``prefix``."""
    out: dict[int, str] = {}
    todo: list[tuple[Any, str]] = [(root, prefix.rstrip("."))]
    while todo:
        value, where = todo.pop()
        if isinstance(value, dict):
            out.setdefault(id(value), f"{where}." if where else "")
            todo.extend((v, f"{where}.{k}" if where else str(k)) for k, v in value.items())
        elif isinstance(value, list):
            todo.extend((v, f"{where}[{i}]") for i, v in enumerate(value))
    return out


def _json_line_of(text: str) -> Callable[[str, int, bool], int | None]:
    """``line_of`` for :meth:`_PairsHook.labels_and_duplicates` over a JSON file's ``text``."""
    keys = _json_keys(text)

    def line_of(key: str, n: int, top: bool) -> int | None:
        lines = [line for depth, k, line in keys if k == key and (depth == 1) == top]
        return lines[n] if n < len(lines) else (lines[-1] if lines else None)

    return line_of


def _yaml_labels_and_duplicates(root: yaml.Node, path: Path) -> list[_LabelAt]:
    """Warn about every duplicate key in front matter (the last value is used, as ``yaml.safe_load`` does; file
    line = node line + 2); return the sensitivity keys: the top-level ones, duplicates and ``<<`` merges included,
    then those nested at any depth, each under its dotted path (``"meta.sensitivity"``), so that a label the loader
    can see is never ignored."""
    labels: list[_LabelAt] = []
    nested: list[_LabelAt] = []
    visited: set[int] = set()
    todo: list[tuple[yaml.Node, str]] = [(root, "")]
    for node, where in todo:  # breadth first (the list grows as it is read), so shallower keys come first
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            todo.extend((item, f"{where}[{i}]") for i, item in enumerate(node.value))
        if not isinstance(node, yaml.MappingNode):
            continue
        first: dict[tuple[str, str], int] = {}
        for key_node, value_node in node.value:
            name = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
            todo.extend(((key_node, f"{where}{{key}}"), (value_node, f"{where}.{name}" if where else name)))
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            line = 2 + key_node.start_mark.line
            if node is not root and is_sensitivity_key(key_node.value):
                nested.append((f"{where}.{key_node.value}", _construct(value_node), line))
            if node is root and key_node.tag == "tag:yaml.org,2002:merge":
                merged = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                labels.extend(
                    (str(k.value), _construct(v), 2 + k.start_mark.line)
                    for source in merged
                    if isinstance(source, yaml.MappingNode)
                    for k, v in source.value
                    if isinstance(k, yaml.ScalarNode) and is_sensitivity_key(k.value)
                )
            elif node is root and is_sensitivity_key(key_node.value):
                labels.append((str(key_node.value), _construct(value_node), line))
            elif (key_node.tag, str(key_node.value)) in first:
                _warn(
                    f"{_at(path, line)}: duplicate key {key_node.value!r} (first on line "
                    f"{first[(key_node.tag, str(key_node.value))]}); the last value is used"
                )
            else:
                first[(key_node.tag, str(key_node.value))] = line
    return labels + nested


def _construct(node: yaml.Node) -> Any:
    """The Python value of a composed YAML node, as ``yaml.safe_load`` builds it."""
    return yaml.constructor.SafeConstructor().construct_document(node)


def _key_error(message: str, path: Path, line: int | None, field: str) -> LoaderError:
    """The error for a metadata key that is not a string: ``message`` + ``" (quote it)"``, naming file, line, field."""
    return LoaderError(f"{message} (quote it)", path=path, line=line, field=field)


def _to_metadata(data: Mapping[Any, Any], path: Path, line_of: Callable[[str], int | None]) -> dict[str, Any]:
    """Top-level mapping → JSON-safe metadata dict (string keys; dates as ISO strings).

    Raises:
        LoaderError: a key is not a string or a value is not JSON-serialisable (field = the dotted key path).
    """
    out: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(key, str):
            raise _key_error(f"metadata keys must be strings, got {type(key).__name__}", path, line_of(str(key)), str(key))
        _check_surrogates(key, key, path, line_of(key))  # a key is text too (it could be the label's)
        converted = _jsonable(value, key, path, line_of(key))
        # `Ｓｅｎｓｉｔｉｖｉｔｙ:` is still the label; the caller sets its value from every such key (_source_label)
        out[SENSITIVITY_KEY if is_sensitivity_key(key) else key] = converted
    return out


def _jsonable(value: Any, where: str, path: Path, line: int | None) -> Any:
    """``value`` as JSON data (``date``/``datetime`` → ISO-8601 string, tuple → list) or ``LoaderError``."""
    if isinstance(value, str):
        _check_surrogates(value, where, path, line)
        return value
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise LoaderError(f"{value!r} is not valid JSON", path=path, line=line, field=where)
        return value
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, f"{where}[{i}]", path, line) for i, v in enumerate(value)]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _key_error(f"nested key {k!r} is a {type(k).__name__}; JSON keys must be strings", path, line, where)
            _check_surrogates(k, f"{where}.{k}", path, line)
            out[k] = _jsonable(v, f"{where}.{k}", path, line)
        return out
    raise LoaderError(
        f"a {type(value).__name__} value is not JSON-serialisable", path=path, line=line, field=where
    )


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_surrogates(text: str, where: str, path: Path, line: int | None) -> None:
    """Reject strings holding a lone UTF-16 surrogate (e.g. from a JSON ``"\\ud800"`` escape): it is not text,
    cannot be stored as UTF-8, and would fail far from its source."""
    m = _LONE_SURROGATE.search(text)
    if m is not None:
        raise LoaderError(
            f"contains a lone UTF-16 surrogate U+{ord(m.group()):04X}, which is not text (an unpaired \\u escape, or "
            "a pair in YAML, which reads each \\u escape alone: write the character itself or a \\U escape)",
            path=path,
            line=line,
            field=where,
        )


