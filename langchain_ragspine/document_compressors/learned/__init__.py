"""The learned reranker: LambdaMART over cheap features of a first stage's candidates.

``LearnedReranker`` (the compressor, :mod:`.reranker`), its features (:mod:`.features`) and its model file
(:mod:`.model`: LightGBM's text model + a JSON sidecar, training, loading).  ``make_reranker("learned")`` /
``--rerank learned`` build it; ``ragspine fit-reranker`` fits one to a team's own questions.
"""

from langchain_ragspine.document_compressors.learned.features import FEATURE_NAMES, candidate_features
from langchain_ragspine.document_compressors.learned.model import (
           LearnedModel,
           ModelFileError,
           train_lambdarank,
)
from langchain_ragspine.document_compressors.learned.reranker import DEFAULT_MODEL, LearnedReranker

__all__ = ["DEFAULT_MODEL", "FEATURE_NAMES", "LearnedModel", "LearnedReranker", "ModelFileError",
           "candidate_features", "train_lambdarank"]
