"""Build a tiny random ColBERT checkpoint on disk, in the layouts :class:`ColBERTCheckpoint` reads.

No ColBERT weights can be downloaded here, so tests build one: a random BERT encoder of a few thousand parameters
(the vocabulary of :mod:`tests.unit_tests.tiny_cross_encoder` plus the marker tokens), saved with
``save_pretrained``, and

* ``style="plain"``: nothing more (MaxSim over the hidden states);
* ``style="pylate"``: a ``Dense`` projection module (``modules.json``, ``1_Dense/config.json`` +
  ``model.safetensors`` holding ``linear.weight``) and ``config_sentence_transformers.json`` with the ``[Q] `` /
  ``[D] `` prefixes, query expansion to ``query_length`` and a skip list;
* ``style="stanford"``: ``linear.weight`` beside the ``bert.*`` weights in one ``model.safetensors`` and an
  ``artifact.metadata`` naming ``[unused0]`` / ``[unused1]`` as markers (no query expansion, no punctuation mask).

Its scores mean nothing; it exercises the loading, tokenising, truncating and projecting code path offline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from tests.unit_tests.tiny_cross_encoder import ASCII, KANA, KANJI, SPECIAL

MARKERS = ["[unused0]", "[unused1]", "[Q]", "[D]"]
PROJECTION_DIM = 8


def build_tiny_colbert(
    path: str | Path,
    *,
    style: Literal["plain", "pylate", "stanford"] = "plain",
    max_position_embeddings: int = 128,
    query_length: int = 12,
    seed: int = 0,
) -> Path:
    """Write a random ColBERT checkpoint of ``style`` to ``path`` (see the module docstring) and return ``path``.

    ``max_position_embeddings`` is small on purpose, so a long input must be truncated to fit it.
    """
    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig, BertModel, BertTokenizer

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    vocab = SPECIAL + MARKERS + ASCII + ["##" + c for c in ASCII] + KANA + KANJI
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", "utf-8")
    tokenizer = BertTokenizer(str(path / "vocab.txt"))
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=max_position_embeddings,
        initializer_range=0.5,
    )
    model = BertModel(config)
    tokenizer.save_pretrained(path)
    linear = torch.nn.Linear(config.hidden_size, PROJECTION_DIM, bias=False)
    torch.nn.init.normal_(linear.weight)
    if style == "stanford":
        config.architectures = ["HF_ColBERT"]
        config.save_pretrained(path)
        state = {f"bert.{k}": v.contiguous() for k, v in model.state_dict().items()}
        state["linear.weight"] = linear.weight.detach().contiguous()
        save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
        metadata = {"query_token_id": "[unused0]", "doc_token_id": "[unused1]", "query_maxlen": 0,
                    "mask_punctuation": False, "dim": PROJECTION_DIM}
        (path / "artifact.metadata").write_text(json.dumps(metadata), "utf-8")
        return path
    model.save_pretrained(path)
    if style == "pylate":
        modules = [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"},
        ]
        (path / "modules.json").write_text(json.dumps(modules), "utf-8")
        (path / "1_Dense").mkdir(exist_ok=True)
        dense = {"in_features": config.hidden_size, "out_features": PROJECTION_DIM, "bias": False,
                 "activation_function": "torch.nn.modules.linear.Identity"}
        (path / "1_Dense" / "config.json").write_text(json.dumps(dense), "utf-8")
        save_file({"linear.weight": linear.weight.detach().contiguous()}, str(path / "1_Dense" / "model.safetensors"))
        st = {"query_prefix": "[Q] ", "document_prefix": "[D] ", "query_length": query_length,
              "document_length": 64, "do_query_expansion": True, "attend_to_expansion_tokens": False,
              "skiplist_words": [".", ","]}
        (path / "config_sentence_transformers.json").write_text(json.dumps(st), "utf-8")
    return path
