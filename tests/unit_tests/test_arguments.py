"""The one integer-argument check (``arguments.check_int`` and its pydantic field types) and its callers.

Issue 26 (H3): seven validators and a dozen hand-written checks accepted different values (numpy integers refused
by some, ``True`` or ``2.5`` let through by others), raised different errors (``ValueError`` for ``"3"`` in some,
``TypeError`` in others) and said so in five formats.  Now one check: ``int`` and numpy integers accepted (returned
as ``int``), ``bool`` / ``float`` / ``str`` / ``None`` refused with a ``TypeError``, a value below the minimum with
a ``ValueError``, and one message, ``"<name> must be an int >= <minimum>[ or None][ (<hint>)], got <value>"``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from pydantic import BaseModel, ConfigDict, ValidationError

from langchain_ragspine.arguments import (
    OptionalPositiveIntField,
    PositiveIntField,
    check_int,
    check_k,
    int_field,
)


# -- the check ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [1, 7, 10**12, np.int64(3), np.int32(3), np.uint8(3), np.intp(3)])
def test_ints_and_numpy_ints_are_accepted_as_plain_ints(value):
    got = check_int(value, "k")
    assert got == int(value) and type(got) is int


@pytest.mark.parametrize(
    ("value", "shown"),
    [(True, "bool True"), (False, "bool False"), (2.0, "float 2.0"), (2.5, "float 2.5"), ("3", "str '3'"),
     (None, "NoneType None"), (np.float64(2.0), "float64 np.float64(2.0)"), ([3], "list [3]")],
)
def test_a_non_integer_is_a_type_error_naming_the_argument_and_the_value(value, shown):
    with pytest.raises(TypeError, match=rf"^fetch_k must be an int >= 1, got {re.escape(shown)}$"):
        check_int(value, "fetch_k")


@pytest.mark.parametrize(("value", "minimum"), [(0, 1), (-1, 1), (-1, 0), (1, 2), (np.int64(0), 1)])
def test_a_value_below_the_minimum_is_a_value_error_naming_the_bound(value, minimum):
    with pytest.raises(ValueError, match=rf"^batch_size must be an int >= {minimum}, got {int(value)}$"):
        check_int(value, "batch_size", minimum=minimum)


def test_the_minimum_itself_is_accepted():
    assert check_int(0, "workers", minimum=0) == 0
    assert check_int(2, "size", minimum=2) == 2


def test_none_only_when_allowed_and_the_message_says_so():
    assert check_int(None, "top_n", allow_none=True) is None
    assert check_int(4, "top_n", allow_none=True) == 4
    with pytest.raises(TypeError, match=r"^top_n must be an int >= 1, got NoneType None$"):
        check_int(None, "top_n")
    with pytest.raises(ValueError, match=r"^top_n must be an int >= 1 or None, got 0$"):
        check_int(0, "top_n", allow_none=True)
    with pytest.raises(TypeError, match=r"^top_n must be an int >= 1 or None, got bool True$"):
        check_int(True, "top_n", allow_none=True)


def test_a_hint_follows_the_bound():
    with pytest.raises(ValueError, match=r"^workers must be an int >= 0 \(0: automatic\), got -2$"):
        check_int(-2, "workers", minimum=0, hint="0: automatic")


def test_check_k_is_the_result_count_check():
    assert check_k(np.int64(5)) == 5
    with pytest.raises(ValueError, match=r"^k must be an int >= 1, got 0$"):
        check_k(0)
    with pytest.raises(TypeError, match=r"^n_queries must be an int >= 1, got str '2'$"):
        check_k("2", "n_queries")


# -- the pydantic field types ---------------------------------------------------------------------------------------
class _Model(BaseModel):
    model_config = ConfigDict(validate_assignment=True)

    k: PositiveIntField = 4
    top_n: OptionalPositiveIntField = None


def test_field_types_check_construction_and_assignment_naming_the_field():
    m = _Model(k=np.int64(2), top_n=3)
    assert (m.k, m.top_n) == (2, 3) and type(m.k) is int
    with pytest.raises(TypeError, match=r"^k must be an int >= 1, got float 2\.0$"):  # not wrapped by pydantic
        _Model(k=2.0)
    with pytest.raises(ValidationError, match=r"top_n must be an int >= 1 or None, got 0"):  # a ValueError
        _Model(top_n=0)
    with pytest.raises(TypeError, match=r"^k must be an int >= 1, got bool True$"):
        m.k = True
    assert m.k == 2


def test_int_field_takes_the_same_options():
    from typing import Annotated

    class Pool(BaseModel):
        workers: Annotated[int | None, int_field(minimum=0, allow_none=True, hint="0: automatic")] = None

    assert Pool().workers is None and Pool(workers=0).workers == 0
    with pytest.raises(ValidationError, match=r"workers must be an int >= 0 or None \(0: automatic\), got -1"):
        Pool(workers=-1)


# -- the callers: one format everywhere -----------------------------------------------------------------------------
def _doc() -> list[Document]:
    return [Document("梅雨は六月。", metadata={"chunk_id": "a#0"})]


def _callers() -> dict[str, Callable[[Any], object]]:
    from langchain_ragspine.backends.directory.bm25_parallel import resolve_workers
    from langchain_ragspine.chains.answer import extractive_answer, prepare_context
    from langchain_ragspine.embeddings import HashingEmbeddings
    from langchain_ragspine.embeddings.batching import embed_in_batches
    from langchain_ragspine.evaluation.metrics import recall_at_k
    from langchain_ragspine.evaluation.significance import paired_bootstrap_interval
    from langchain_ragspine.graphs.adaptive import adaptive_rag_max_llm_calls
    from langchain_ragspine.graphs.conversation import check_history_turns
    from langchain_ragspine.retrievers import BM25Retriever, GlossaryQueryRewriter
    from langchain_ragspine.retrievers.hybrid import fuse

    return {
        "k": lambda v: BM25Retriever.from_documents(_doc(), k=v),
        "recall k": lambda v: recall_at_k(["a"], {"a": 1}, v),
        "context k": lambda v: prepare_context(_doc(), k=v),
        "max_sentences": lambda v: extractive_answer("梅雨", _doc(), max_sentences=v),
        "max_queries": lambda v: GlossaryQueryRewriter([["梅雨", "つゆ"]], max_queries=v),
        "c": lambda v: fuse([_doc()], c=v),
        "workers": lambda v: resolve_workers(v, 10),
        "batch_size": lambda v: embed_in_batches(HashingEmbeddings(8), ["x"], batch_size=v, progress=False),
        "size": lambda v: HashingEmbeddings(v),
        "n_resamples": lambda v: paired_bootstrap_interval([0.1, 0.2], [0.2, 0.3], n_resamples=v),
        "history_turns": check_history_turns,
        "adaptive k": lambda v: adaptive_rag_max_llm_calls(k=v),
    }


#: ``caller -> (argument name, minimum, a value below it)``.
BOUNDS = {
    "k": ("k", 1, 0), "recall k": ("k", 1, 0), "context k": ("k", 1, 0),
    "max_sentences": ("max_sentences", 1, 0), "max_queries": ("max_queries", 1, 0), "c": ("c", 0, -1),
    "workers": ("workers", 0, -1), "batch_size": ("batch_size", 1, 0), "size": ("size", 2, 1),
    "n_resamples": ("n_resamples", 1, 0), "history_turns": ("history_turns", 1, 0), "adaptive k": ("k", 0, -1),
}


@pytest.mark.parametrize("caller", list(BOUNDS))
def test_every_caller_says_the_same_thing_for_a_value_below_its_minimum(caller):
    name, minimum, low = BOUNDS[caller]
    pattern = rf"{name} must be an int >= {minimum}( or None)?( \([^)]*\))?, got {low}( \[|$)"
    with pytest.raises(ValueError, match=pattern):
        _callers()[caller](low)


@pytest.mark.parametrize("bad", [2.0, True, "3"])
@pytest.mark.parametrize("caller", list(BOUNDS))
def test_every_caller_refuses_a_non_integer_with_a_type_error(caller, bad):
    """Before: ``max_docs=2.0``, ``max_sentences=2.0``, ``size=2.5``-like floats or ``k=True`` went through
    (failing later, or never), and ``"3"`` was a ``ValueError`` for some arguments and a ``TypeError`` for others."""
    name, minimum, _ = BOUNDS[caller]
    with pytest.raises(TypeError, match=rf"^{name} must be an int >= {minimum}( or None)?( \([^)]*\))?, got "):
        _callers()[caller](bad)


@pytest.mark.parametrize("caller", ["k", "recall k", "context k", "max_queries", "batch_size", "n_resamples"])
def test_every_caller_takes_a_numpy_integer(caller):
    _callers()[caller](np.int64(3))


# -- renamed arguments (issue 26, O2): one rule, three ways in ----------------------------------------------------
def test_rename_moves_an_old_name_with_a_warning_naming_the_new_one(recwarn):
    import warnings

    from langchain_ragspine.arguments import rename_arguments

    warnings.simplefilter("always")
    given = {"candidate_k": 30, "k": 3}
    assert rename_arguments("Owner", given, ["candidate_k"]) == {"k": 3, "fetch_k": 30}
    assert given == {"candidate_k": 30, "k": 3}  # not modified
    (w,) = recwarn.list
    assert w.category is DeprecationWarning and w.filename == __file__
    assert str(w.message) == ("Owner(candidate_k=...) is deprecated: pass fetch_k= instead (candidate_k is removed in "
                              "the next release)")


def test_rename_same_value_twice_warns_only_and_different_values_name_both():
    from langchain_ragspine.arguments import rename_arguments

    with pytest.warns(DeprecationWarning, match="pass k= instead"):
        assert rename_arguments("f", {"k": 3, "max_docs": 3}, ["max_docs"]) == {"k": 3}
    with pytest.warns(DeprecationWarning), pytest.raises(
        TypeError, match=r"^f got k=3 and max_docs=4: max_docs is the deprecated name of k; pass k only$"
    ):
        rename_arguments("f", {"k": 3, "max_docs": 4}, ["max_docs"])
    assert rename_arguments("f", {"k": 3}, ["max_docs"]) == {"k": 3}  # nothing old: nothing said


def test_a_kept_name_is_accepted_silently_and_a_conflict_is_still_an_error(recwarn):
    from langchain_ragspine.arguments import rename_arguments

    assert rename_arguments("R", {"top_n": 2}, ["top_n"], kept=["top_n"]) == {"k": 2}
    assert rename_arguments("R", {"top_n": 2, "k": 2}, ["top_n"], kept=["top_n"]) == {"k": 2}
    assert not recwarn.list
    with pytest.raises(TypeError, match=r"^R got k=1 and top_n=2: top_n is another name of k; pass one$"):
        rename_arguments("R", {"top_n": 2, "k": 1}, ["top_n"], kept=["top_n"])


def test_an_unknown_old_name_is_a_mistake_of_the_package():
    from langchain_ragspine.arguments import (
        rename_arguments,
        renamed_fields,
        renamed_keywords,
        renamed_property,
    )

    for make in (lambda: rename_arguments("f", {}, ["num_docs"]), lambda: renamed_fields("num_docs"),
                 lambda: renamed_keywords("num_docs"), lambda: renamed_property("num_docs")):
        with pytest.raises(KeyError):
            make()


def test_renamed_fields_and_property_on_a_pydantic_model():
    from langchain_ragspine.arguments import renamed_fields, renamed_property

    class Model(BaseModel):
        k: PositiveIntField = 6
        _renamed = renamed_fields("top_n")
        top_n = renamed_property("top_n")

    with pytest.warns(DeprecationWarning, match=r"^Model\(top_n=\.\.\.\) is deprecated: pass k= instead") as seen:
        m = Model(top_n=3)
    assert m.k == 3 and seen[0].filename == __file__
    with pytest.warns(DeprecationWarning, match=r"^Model\.top_n is deprecated: use k"):
        assert m.top_n == 3
    with pytest.warns(DeprecationWarning, match=r"^Model\.top_n is deprecated: use k"):
        m.top_n = 5
    assert m.k == 5 and set(Model.model_fields) == {"k"}
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="got k=2 and top_n=3"):
        Model(top_n=3, k=2)
    with pytest.warns(DeprecationWarning), pytest.raises(ValidationError, match="top_n|k must be an int >= 1"):
        Model(top_n=0)  # the value is checked under its new name


def test_renamed_keywords_keeps_the_new_signature():
    import inspect

    from langchain_ragspine.arguments import renamed_keywords

    @renamed_keywords("max_docs")
    def shown(docs: list[int], *, k: int | None = 6) -> list[int]:
        return docs[:k]

    assert list(inspect.signature(shown).parameters) == ["docs", "k"]
    with pytest.warns(DeprecationWarning, match=r"shown\(max_docs=\.\.\.\) is deprecated: pass k= instead") as seen:
        assert shown([1, 2, 3], max_docs=1) == shown([1, 2, 3], k=1) == [1]
    assert seen[0].filename == __file__
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="got k=1 and max_docs=2"):
        shown([1, 2, 3], k=1, max_docs=2)
