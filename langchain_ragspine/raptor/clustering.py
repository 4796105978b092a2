"""Seeded, deterministic clustering of unit vectors for the RAPTOR tree (:mod:`langchain_ragspine.raptor.tree`).

::

    groups = cluster_vectors(vectors, cluster_size=8, seed=0)   # [[row, ...], ...], every row in one group

RAPTOR (Sarthi et al., "RAPTOR: Recursive Abstractive Processing for Tree-Organized Retrieval", ICLR 2024, section
3) clusters with a Gaussian mixture over UMAP-reduced embeddings, the number of clusters chosen by BIC, memberships
soft.  Here the clustering is spherical k-means (cosine), seeded by the rows' ids (the tree builder's choice: a
hash of each node's id picks the initial centres, so one changed chunk leaves the other clusters' starts where they
were) or by k-means++ from ``numpy.random.default_rng(seed)`` — no new dependency (scikit-learn and umap-learn are not dependencies of the package; a GMM taken from
scikit-learn only when it happens to be installed would give two trees for one corpus), and the same rows in the
same order give the same groups on every run.  Two deliberate simplifications, documented in
``docs/architecture.md``: the number of clusters is ``ceil(n / cluster_size)`` (a size target instead of BIC), and
memberships are hard (a chunk summarised once per level).  A group larger than ``2 * cluster_size`` is split again
the same way (RAPTOR's "recursive clustering" of an over-large cluster), so every summary reads a bounded number of
children.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np

from langchain_ragspine.arguments import check_int

__all__ = ["cluster_vectors", "spherical_kmeans"]

#: Lloyd iterations of :func:`spherical_kmeans` at most (it stops earlier when no assignment changes).
MAX_ITERATIONS = 30


def _key_rank(key: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}\x00{key}".encode()).hexdigest()


def spherical_kmeans(
    vectors: np.ndarray, n_clusters: int, *, seed: int = 0, keys: Sequence[str] | None = None
) -> np.ndarray:
    """Cluster the rows of ``vectors`` (float32 ``(n, d)``, unit L2 norm) into ``n_clusters`` by cosine.

    Seeding: with ``keys`` (one stable id per row), the initial centres are the rows whose
    ``sha256(seed, key)`` is smallest — a uniform sample that depends on no other row, so a changed or added row
    moves the start of no other cluster (what keeps a rebuild's clusters where they were); without, k-means++
    (Arthur & Vassilvitskii 2007) with ``numpy.random.default_rng(seed)``, distances ``1 - cos``.  Lloyd iterations (at most :data:`MAX_ITERATIONS`) with centroids renormalised; an emptied cluster takes the row
    farthest from its centroid.  Ties (equal cosines) go to the lower cluster index.

    Returns:
        int64 array ``(n,)``: each row's cluster in ``0..n_clusters-1``; every cluster is non-empty when
        ``n >= n_clusters``.

    Raises:
        ValueError: ``n_clusters < 1`` or ``vectors`` is not 2-D.
    """
    check_int(n_clusters, "n_clusters")
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"vectors must be 2-D (rows, dimensions), got shape {x.shape}")
    n = x.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    n_clusters = min(n_clusters, n)
    if n_clusters == 1:
        return np.zeros(n, dtype=np.int64)
    if keys is not None:
        if len(keys) != n:
            raise ValueError(f"keys must name every row: {len(keys)} keys for {n} rows")
        order = sorted(range(n), key=lambda i: _key_rank(str(keys[i]), seed))
        return _lloyd(x, x[order[:n_clusters]].copy(), n_clusters)
    rng = np.random.default_rng(seed)
    centres = [int(rng.integers(n))]
    dist = np.clip(1.0 - x @ x[centres[0]], 0.0, None).astype(np.float64)
    for _ in range(1, n_clusters):
        total = float(dist.sum())
        if total <= 0:  # every row on a centre already: the next rows not chosen yet, in order
            rest = [i for i in range(n) if i not in set(centres)]
            pick = rest[0]
        else:
            pick = int(np.searchsorted(np.cumsum(dist), rng.random() * total, side="right"))
            pick = min(pick, n - 1)
        centres.append(pick)
        dist = np.minimum(dist, np.clip(1.0 - x @ x[pick], 0.0, None))
    return _lloyd(x, x[centres].copy(), n_clusters)


def _lloyd(x: np.ndarray, c: np.ndarray, n_clusters: int) -> np.ndarray:
    """Lloyd iterations from the centres ``c`` (see :func:`spherical_kmeans`)."""
    n = x.shape[0]
    labels = np.full(n, -1, dtype=np.int64)
    for _ in range(MAX_ITERATIONS):
        new = np.argmax(x @ c.T, axis=1).astype(np.int64)
        counts = np.bincount(new, minlength=n_clusters)
        for empty in np.flatnonzero(counts == 0):  # the row least like its centre (of a cluster of 2+) starts it
            movable = counts[new] > 1
            if not movable.any():
                break
            sims = np.where(movable, np.einsum("ij,ij->i", x, c[new]), np.inf)
            far = int(np.argmin(sims))
            counts[new[far]] -= 1
            new[far] = empty
            counts[empty] += 1
        if np.array_equal(new, labels):
            break
        labels = new
        for j in range(n_clusters):
            rows = x[labels == j]
            if not len(rows):
                continue  # keeps its centre
            mean = rows.sum(axis=0)
            norm = float(np.linalg.norm(mean))
            c[j] = mean / norm if norm > 0 else rows[0]
    return labels


def cluster_vectors(
    vectors: np.ndarray, *, cluster_size: int = 8, seed: int = 0, keys: Sequence[str] | None = None
) -> list[list[int]]:
    """Group the rows of ``vectors`` (unit L2 norm) into clusters of about ``cluster_size`` rows (``keys``: a stable
    id per row, which seeds the clustering as :func:`spherical_kmeans` says).

    ``ceil(n / cluster_size)`` clusters by :func:`spherical_kmeans`; a cluster of more than ``2 * cluster_size``
    rows is clustered again the same way (``seed + 1`` …) until none is, or splitting no longer divides it (then
    it is cut into consecutive runs of ``cluster_size`` in row order).

    Returns:
        The groups, each a sorted list of row positions, ordered by their first row; every row in exactly one.

    Raises:
        ValueError: ``cluster_size < 2``.
    """
    check_int(cluster_size, "cluster_size", minimum=2)
    x = np.asarray(vectors, dtype=np.float32)
    n = x.shape[0] if x.ndim == 2 else 0
    if n == 0:
        return []
    out: list[list[int]] = []
    pending: list[tuple[list[int], int]] = [(list(range(n)), seed)]
    while pending:
        rows, s = pending.pop()
        if len(rows) <= 2 * cluster_size and (len(rows) <= cluster_size or s != seed):
            out.append(rows)
            continue
        labels = spherical_kmeans(x[rows], math.ceil(len(rows) / cluster_size), seed=s,
                                  keys=None if keys is None else [keys[i] for i in rows])
        groups = [[rows[i] for i in np.flatnonzero(labels == j)] for j in range(int(labels.max()) + 1)]
        groups = [g for g in groups if g]
        if len(groups) == 1:  # k-means could not divide it (identical rows): consecutive runs
            out.extend(rows[i : i + cluster_size] for i in range(0, len(rows), cluster_size))
            continue
        for g in groups:
            if len(g) > 2 * cluster_size:
                pending.append((g, s + 1))
            else:
                out.append(g)
    return sorted((sorted(g) for g in out), key=lambda g: g[0])
