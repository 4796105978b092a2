"""Settings (``RAGSPINE_*`` environment variables) and the one place where configured parts are made.

:class:`RagSpineSettings` reads, in order of precedence: explicit arguments, ``RAGSPINE_*`` environment variables,
a ``.env`` file in the working directory, then the defaults below.  The CLI takes its defaults from here, so
``RAGSPINE_TOKENIZER=cjk ragspine ingest docs --store S`` works like ``--tokenizer cjk``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from langchain_ragspine.text_splitters import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS
from langchain_ragspine.tokenizers import TOKENIZERS


class RagSpineSettings(BaseSettings):
    """Package settings.

    Attributes:
        tokenizer: BM25 tokenizer name (``RAGSPINE_TOKENIZER``; default ``"auto"``).
        chunk_size: chunk budget in characters (``RAGSPINE_CHUNK_SIZE``; default 480).
        chunk_overlap: overlap in characters (``RAGSPINE_CHUNK_OVERLAP``; default 80).
        store: default store directory for the CLI (``RAGSPINE_STORE``; default none, ``--store`` is then required).
        k: default number of search results (``RAGSPINE_K``; default 10).

    Raises:
        pydantic.ValidationError: a value of the wrong type or an unknown tokenizer name.
    """

    model_config = SettingsConfigDict(env_prefix="RAGSPINE_", env_file=".env", extra="ignore")

    tokenizer: str = "auto"
    chunk_size: int = Field(DEFAULT_CHUNK_CHARS, gt=0)
    chunk_overlap: int = Field(DEFAULT_OVERLAP_CHARS, ge=0)
    store: Path | None = None
    k: int = Field(10, gt=0)

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str) -> str:
        name = value.strip().lower()
        if name not in TOKENIZERS:
            raise ValueError(f"unknown tokenizer {value!r}; choose one of {sorted(TOKENIZERS)}")
        return name
