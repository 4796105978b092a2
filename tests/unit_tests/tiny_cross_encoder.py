"""Build a tiny random BERT cross-encoder on disk, loadable with ``sentence_transformers.CrossEncoder(path)``.

No cross-encoder weights can be downloaded here, so tests (and the latency benchmark) build one: a BERT of a few
thousand parameters with random weights and a WordPiece vocabulary of ASCII characters, kana and a few kanji,
saved with ``save_pretrained``.  Its scores mean nothing; it exercises the real loading, tokenising, truncating
and batching code path of sentence-transformers offline.
"""

from __future__ import annotations

from pathlib import Path

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
ASCII = list("abcdefghijklmnopqrstuvwxyz0123456789.,?!")
KANA = [chr(c) for c in range(0x3041, 0x3097)] + [chr(c) for c in range(0x30A1, 0x30FB)] + ["ー"]
KANJI = list("梅雨北海道東京日本検索文書天気山川高最何年")


def build_tiny_cross_encoder(
    path: str | Path, *, num_labels: int = 1, max_position_embeddings: int = 128, seed: int = 0
) -> Path:
    """Write a random BERT sequence classifier (``num_labels`` logits) and its tokenizer to ``path``.

    ``max_position_embeddings`` is kept small on purpose, so a long input must be truncated to fit it.
    """
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    vocab = SPECIAL + ASCII + ["##" + c for c in ASCII] + KANA + KANJI
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
        num_labels=num_labels,
        initializer_range=0.5,  # spread the random logits, so different inputs get visibly different scores
    )
    BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
