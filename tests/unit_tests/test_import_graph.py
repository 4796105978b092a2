"""The import graph of the package keeps its shape (docs/dev/plan-issue-26.md), read from the source by ``tests/import_graph.py``:

1. no import cycle (no strongly connected component; imports inside functions and class bodies count,
   ``TYPE_CHECKING`` blocks do not);
2. no module imports another module's private name, and no private module is imported from outside its package;
3. every non-private module defines ``__all__``;
4. no module of the package imports a shim (the old paths of moved modules, ``test_shims.SHIM_MODULES``);
5. layers: every module is in one layer of the ```` ```layers ```` table of ``docs/architecture.md`` (parsed here,
   so the page and the check cannot drift), and an import points only to its own layer or a lower one (imports
   inside functions count, ``TYPE_CHECKING`` blocks do not, as for rule 1).

And the leaves (:data:`LEAVES`, the settings) import nothing from the package at all, so every module may import them.

Each rule has an allowlist of today's exceptions: the ratchet.  A new exception fails (fix it, or — only when the
step says so — add the line the message gives); an exception that is gone fails too (delete the line the message
gives), so every list only shrinks.  The later steps of issue 26 empty them (R2 last).

The tool itself is tested on tiny synthetic packages, and each rule is shown to fail on a copy of the package with
one bad import added (or one exception fixed).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import langchain_ragspine
from tests.import_graph import ImportGraph, Layer, parse_layers, ratchet
from tests.unit_tests.test_shims import SHIM_MODULES

PACKAGE = Path(langchain_ragspine.__file__).parent
HERE = "tests/unit_tests/test_import_graph.py"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"

#: Rule 1: the imports inside a strongly connected component, ``"importer -> imported"`` (H1 removes most, H4 the
#: ``_gram_count`` pair, C1-C2 the ``config`` knot, P1 ``indexing`` <-> ``postgres``): empty now.
CYCLE_EDGES: frozenset[str] = frozenset()

#: Rule 2: ``"importer -> module._name"`` (another module's private name) or ``"importer -> pkg._module"`` (a private
#: module from outside its package).
PRIVATE_IMPORTS: frozenset[str] = frozenset()

#: Rule 3: the non-private modules without ``__all__``: empty since R2 (``cli`` and ``embeddings.e5_onnx`` were the
#: last).
WITHOUT_ALL: frozenset[str] = frozenset()

#: Rule 4: ``"importer -> shim"``.  Empty: the steps that move a module switch every importer in the same commit.
SHIM_IMPORTS: frozenset[str] = frozenset()

#: Rule 5: the imports of a higher layer, ``"importer -> imported"`` -> why it is there today and what removes it.
LAYER_EXCEPTIONS: dict[str, str] = {
}

#: The bottom of the package: modules that import nothing from it (not even under ``TYPE_CHECKING``), so that every
#: module may read them.  No allowlist: a leaf's import of the package is an error (C1: the settings).
LEAVES = frozenset({"settings"})


# -- the four checks (one function each, so the real package and a broken copy go through the same code) ---------
def cycles_check(graph: ImportGraph) -> str:
    return ratchet(graph.cycle_edges(), CYCLE_EDGES, allowlist=f"CYCLE_EDGES in {HERE}", what="import-cycle edge",
                   graph=graph)


def private_check(graph: ImportGraph) -> str:
    return ratchet(graph.private_imports(), PRIVATE_IMPORTS, allowlist=f"PRIVATE_IMPORTS in {HERE}",
                   what="private import", graph=graph)


def all_check(graph: ImportGraph) -> str:
    return ratchet(graph.modules_without_all(), WITHOUT_ALL, allowlist=f"WITHOUT_ALL in {HERE}",
                   what="module without __all__")


def shims_check(graph: ImportGraph) -> str:
    return ratchet(graph.imports_of(SHIM_MODULES), SHIM_IMPORTS, allowlist=f"SHIM_IMPORTS in {HERE}",
                   what="import of a shim", graph=graph)


def leaves_check(graph: ImportGraph) -> str:
    root = next(name for name in graph.modules if "." not in name)
    return "\n".join(
        f"{edge.importer} imports {edge.imported} ({graph.modules[edge.importer].path}:{edge.line}): it is a leaf "
        f"(LEAVES in {HERE}), which imports nothing from the package"
        for edge in sorted(graph.edges, key=lambda e: (e.importer, e.line))
        if edge.importer.removeprefix(f"{root}.") in LEAVES
    )


def layers_check(graph: ImportGraph, layers: list[Layer] | None = None) -> str:
    """Rule 5 over ``layers`` (default: the table of ``docs/architecture.md``)."""
    if layers is None:
        layers = parse_layers(ARCHITECTURE.read_text("utf-8"))
    table = f"the ```layers block of {ARCHITECTURE}"
    problems = [f"{module} is in no layer: add its prefix to {table}" for module in sorted(graph.unlayered(layers))]
    problems += [f"{prefix} names no module of the package: fix or delete it in {table}"
                 for prefix in sorted(graph.unused_prefixes(layers))]

    def explain(fact: str) -> str:
        low, high = (graph.layer_of(f"{graph.package}.{m}" if m != graph.package else m, layers)
                     for m in fact.split(" -> "))
        assert low is not None and high is not None
        return f"layer {low.number} {low.name} imports layer {high.number} {high.name}"

    found = ratchet(graph.upward_imports(layers), LAYER_EXCEPTIONS, allowlist=f"LAYER_EXCEPTIONS in {HERE}",
                    what="upward import", graph=graph, explain=explain)
    return "\n".join([*problems, *([found] if found else [])])


CHECKS: dict[str, Callable[[ImportGraph], str]] = {
    "cycles": cycles_check, "private": private_check, "all": all_check, "shims": shims_check,
    "leaves": leaves_check, "layers": layers_check,
}


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return ImportGraph.from_package(PACKAGE)


@pytest.mark.parametrize("rule", list(CHECKS))
def test_the_package_keeps_its_import_rules(graph: ImportGraph, rule: str) -> None:
    problems = CHECKS[rule](graph)
    assert not problems, "\n" + problems


def test_every_shim_is_a_module_of_the_package(graph: ImportGraph) -> None:
    """Rule 4 looks for these names among the edges: a misspelt or deleted shim would be looked for in vain."""
    assert sorted(SHIM_MODULES - set(graph.modules)) == []


def test_the_graph_reads_the_whole_package(graph: ImportGraph) -> None:
    assert set(graph.modules) == {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in PACKAGE.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert "langchain_ragspine.cli" in graph.adjacency()["langchain_ragspine.__main__"]


# -- each rule fails when broken: a copy of the package with one change -------------------------------------------
@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The package copied under ``tmp_path`` (same package name, so the allowlists apply)."""
    root = tmp_path / PACKAGE.name
    shutil.copytree(PACKAGE, root, ignore=lambda d, names: [n for n in names if n == "__pycache__"])
    return root


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text("utf-8") + text, "utf-8")


def _lines(path: Path) -> int:
    return len(path.read_text("utf-8").splitlines())


def test_a_new_cycle_fails_naming_the_edge_and_where_it_is(copy: Path) -> None:
    _append(copy / "errors.py", "\n\ndef _late():\n    from langchain_ragspine import cli\n")  # cli imports errors
    problems = cycles_check(ImportGraph.from_package(copy))
    assert "new import-cycle edge: errors -> cli (" in problems
    assert f"{copy / 'errors.py'}:" in problems
    assert f"remove it, or add the line 'errors -> cli' to CYCLE_EDGES in {HERE}" in problems
    assert "stale" not in problems


def test_a_new_private_import_fails(copy: Path) -> None:
    _append(copy / "errors.py", "\nfrom langchain_ragspine.tokenizers import _fold_table as _f\n")
    _append(copy / "cli.py", "\nfrom langchain_ragspine.backends.directory import _sqlite\n")
    problems = private_check(ImportGraph.from_package(copy)).splitlines()
    assert [line.partition(" (")[0] for line in problems] == [
        "new private import: cli -> backends.directory._sqlite",
        "new private import: errors -> tokenizers._fold_table",
    ]
    assert problems[1].endswith(f"{copy / 'errors.py'}:{_lines(copy / 'errors.py')}): remove it, or add the line "
                                f"'errors -> tokenizers._fold_table' to PRIVATE_IMPORTS in {HERE}")


def test_a_module_without_all_fails(copy: Path) -> None:
    (copy / "pipeline" / "newcomer.py").write_text('"""A new module."""\n\nX = 1\n', "utf-8")
    (copy / "pipeline" / "_private_newcomer.py").write_text("X = 1\n", "utf-8")  # private: needs none
    cli = (copy / "cli.py").read_text("utf-8")
    start = cli.index("\n__all__ = [")
    (copy / "cli.py").write_text(cli[:start] + cli[cli.index("]\n", start) + 2:], "utf-8")  # cli loses its __all__
    assert all_check(ImportGraph.from_package(copy)).splitlines() == [
        f"new module without __all__: cli: remove it, or add the line 'cli' to WITHOUT_ALL in {HERE}",
        f"new module without __all__: pipeline.newcomer: remove it, or add the line 'pipeline.newcomer' to "
        f"WITHOUT_ALL in {HERE}",
    ]


def test_each_layer_exception_gives_one_line_of_reason() -> None:
    assert [edge for edge, why in LAYER_EXCEPTIONS.items() if not why.strip() or "\n" in why] == []


def test_the_layers_are_the_table_of_the_architecture_page() -> None:
    layers = parse_layers(ARCHITECTURE.read_text("utf-8"))
    assert [layer.number for layer in layers] == list(range(len(layers))) and len(layers) >= 2
    assert set(LEAVES) <= set(layers[0].prefixes)  # the leaves at the bottom
    assert "cli" in layers[-1].prefixes  # the entry point at the top


def test_an_upward_import_fails_naming_the_layers_and_where_it_is(copy: Path) -> None:
    _append(copy / "served.py", "\n\ndef _late():\n    from langchain_ragspine.graphs import prompts\n")
    _append(copy / "errors.py", "\nif TYPE_CHECKING:\n    from langchain_ragspine import cli\n")  # never runs: fine
    problems = layers_check(ImportGraph.from_package(copy)).splitlines()
    assert problems == [
        f"new upward import: served -> graphs.prompts (layer 1 documents imports layer 4 composition, "
        f"{copy / 'served.py'}:{_lines(copy / 'served.py')}): remove it, or add the line 'served -> graphs.prompts' "
        f"to LAYER_EXCEPTIONS in {HERE}"
    ]


def test_a_fixed_upward_import_leaves_a_stale_line_and_a_new_module_needs_a_layer(
    copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edge = "backends.postgres.backend -> postgres"  # the upward import that moved down with backends.postgres.versions
    monkeypatch.setitem(LAYER_EXCEPTIONS, edge, "PostgresBackend wrote through postgres.write_versions")
    (copy / "newcomer.py").write_text('"""A module in no layer."""\n\n__all__: list[str] = []\n', "utf-8")
    problems = layers_check(ImportGraph.from_package(copy)).splitlines()
    assert problems == [
        f"newcomer is in no layer: add its prefix to the ```layers block of {ARCHITECTURE}",
        f"stale entry in LAYER_EXCEPTIONS in {HERE}: {edge} is gone: delete the line {edge!r}",
    ]


def test_every_leaf_is_a_module_of_the_package(graph: ImportGraph) -> None:
    assert sorted(f"{PACKAGE.name}.{leaf}" for leaf in LEAVES if f"{PACKAGE.name}.{leaf}" not in graph.modules) == []


def test_a_leaf_importing_the_package_fails(copy: Path) -> None:
    _append(copy / "settings.py", "\nif TYPE_CHECKING:\n    from langchain_ragspine import errors\n")
    problems = leaves_check(ImportGraph.from_package(copy)).splitlines()
    assert [line.partition(" (")[0] for line in problems] == [
        f"{PACKAGE.name}.settings imports {PACKAGE.name}.errors"  # under TYPE_CHECKING too
    ]
    assert problems[0].endswith(f"{copy / 'settings.py'}:{_lines(copy / 'settings.py')}): it is a leaf (LEAVES in "
                                f"{HERE}), which imports nothing from the package")


def test_a_module_importing_a_shim_fails(copy: Path) -> None:
    _append(copy / "cli.py", "\n\ndef _old():\n    from langchain_ragspine.modes import RetrievalMode\n")
    _append(copy / "errors.py", "\nimport langchain_ragspine.stores.lock\n")
    problems = shims_check(ImportGraph.from_package(copy)).splitlines()
    assert [line.partition(" (")[0] for line in problems] == [
        "new import of a shim: cli -> modes", "new import of a shim: errors -> stores.lock"
    ]


# -- the tool on tiny synthetic packages ---------------------------------------------------------------------------
def make_package(root: Path, files: dict[str, str]) -> ImportGraph:
    """A package ``pkg`` under ``root`` with ``files`` (relative path -> source; ``__init__.py`` files added)."""
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    for directory in [root / "pkg", *(p for p in (root / "pkg").rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()
    return ImportGraph.from_package(root / "pkg")


def test_imports_inside_functions_and_classes_make_cycles_type_checking_does_not(tmp_path: Path) -> None:
    graph = make_package(tmp_path, {
        "a.py": "import pkg.b\nimport os\n",
        "b.py": "def f():\n    from pkg import a\n",                      # a -> b -> a: a cycle
        "c.py": "class C:\n    from pkg.d import x\n",
        "d.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg import c\nelse:\n    import pkg.e\n",
        "e.py": "import pkg.c\n",                                       # c -> d -> e -> c (the else branch runs)
        "f.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.g\nimport pkg.a\n",
        "g.py": "import pkg.f\n",                                       # f -> g only under TYPE_CHECKING: no cycle
    })
    assert graph.cycles() == [["pkg.c", "pkg.d", "pkg.e"], ["pkg.a", "pkg.b"]]
    assert graph.cycle_edges() == {"a -> b", "b -> a", "c -> d", "d -> e", "e -> c"}  # not f -> a, g -> f
    assert {(e.importer, e.imported, e.where) for e in graph.edges if e.importer in {"pkg.b", "pkg.c", "pkg.d"}} == {
        ("pkg.b", "pkg.a", "function"), ("pkg.c", "pkg.d", "class"),
        ("pkg.d", "pkg.c", "type_checking"), ("pkg.d", "pkg.e", "module"),
    }


def test_a_module_name_given_to_import_module_is_a_lazy_edge(tmp_path: Path) -> None:
    graph = make_package(tmp_path, {
        "__init__.py": (
            '"""Names from pkg.c, imported when first used."""\nimport importlib\n'
            '_LAZY = {"A": "pkg.a", "Other": "os.path"}\n\n'
            "def __getattr__(name):\n    return getattr(importlib.import_module(_LAZY[name]), name)\n"
        ),
        "a.py": "import pkg\nA = 1\n",                      # pkg -> a (lazily) -> pkg: a cycle
        "b.py": 'NAME = "pkg.a"\n',                          # a string, but no import_module: no edge
        "c.py": "",
    })
    assert [(e.importer, e.imported, e.line, e.where) for e in graph.edges if e.where == "lazy"] == [
        ("pkg", "pkg.a", 3, "lazy")
    ]
    assert graph.cycles() == [["pkg", "pkg.a"]]


def test_relative_imports_are_resolved_against_the_importers_package(tmp_path: Path) -> None:
    graph = make_package(tmp_path, {
        "top.py": "X = 1\n",
        "sub/one.py": "from . import two\nfrom .two import f\nfrom ..top import X\nfrom .. import top\n",
        "sub/two.py": "def f(): pass\n",
        "sub/__init__.py": "from .one import two\nfrom . import one\n",
    })
    assert {e.imported for e in graph.edges if e.importer == "pkg.sub.one"} == {"pkg.sub.two", "pkg.top"}
    assert {e.imported for e in graph.edges if e.importer == "pkg.sub"} == {"pkg.sub.one"}


def test_a_long_import_chain_needs_no_deep_recursion(tmp_path: Path) -> None:
    n = 3000  # deeper than Python's default recursion limit
    files = {f"m{i}.py": f"import pkg.m{i + 1}\n" for i in range(n)}
    files[f"m{n}.py"] = "import pkg.m0\n"
    assert [len(c) for c in make_package(tmp_path, files).cycles()] == [n + 1]


def test_private_names_and_private_modules(tmp_path: Path) -> None:
    graph = make_package(tmp_path, {
        "a.py": "_x = 1\n__version__ = '1'\ny = _x\n",
        "b.py": (
            "from pkg.a import _x, __version__, y\n"          # _x: private; a dunder is not
            "import pkg.a as mod\n"
            "def f():\n    return mod._x, mod.y\n"            # attribute use of a private name
        ),
        # its own private name; a private module of its own package
        "c.py": "from pkg.c import _self\n_self = 1\nfrom . import _helpers\n",
        "d.py": "import pkg.a\nv = pkg.a._x, pkg._root_private, pkg.a.y\n",  # import pkg.a binds pkg
        "_helpers.py": "",
        "sub/_inner.py": "",
        "sub/deep/user.py": "from pkg.sub import _inner\n",  # inside sub: allowed
        "other.py": "from pkg.sub import _inner\nimport pkg.sub._inner\n",  # outside sub: private
    })
    assert graph.private_imports() == {"b -> a._x", "d -> a._x", "d -> _root_private", "other -> sub._inner"}
    assert {(p.importer, p.kind) for p in graph.private} == {
        ("pkg.b", "name"), ("pkg.b", "attribute"), ("pkg.d", "attribute"), ("pkg.other", "module")
    }
    assert len([p for p in graph.private if p.importer == "pkg.other"]) == 2  # one per statement


def test_modules_without_all(tmp_path: Path) -> None:
    graph = make_package(tmp_path, {
        "listed.py": "__all__ = ['x']\nx = 1\n",
        "annotated.py": "__all__: list[str] = []\n",
        "grown.py": "__all__ = []\n__all__ += ['y']\n",
        "in_function.py": "def f():\n    __all__ = []\n",       # not at the top level
        "missing.py": "x = 1\n",
        "_private.py": "x = 1\n",
        "_hidden/public_name.py": "x = 1\n",                    # inside a private package
        "__main__.py": "print()\n",
    })
    assert graph.modules_without_all() == {"pkg", "in_function", "missing"}  # the empty __init__ too


def test_imports_of_and_imports_in(tmp_path: Path) -> None:
    graph = make_package(tmp_path, {
        "old.py": "from pkg.new import x\n",
        "new.py": "x = 1\n",
        "user.py": "def f():\n    from pkg import old\n",
        "typed.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg.old import x\n",
    })
    assert graph.imports_of({"pkg.old"}) == {"user -> old", "typed -> old"}
    script = tmp_path / "script.py"
    script.write_text(
        "import pkg.old\nfrom pkg import new\nfrom pkg.old import x\nimport os\nfrom .local import y\n"
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.user\n",
        "utf-8",
    )
    assert [(e.imported, e.line) for e in graph.imports_in(script)] == [
        ("pkg.old", 1), ("pkg.new", 2), ("pkg.old", 3), ("pkg.user", 8)  # a type checker reads line 8 too
    ]


LAYERS_DOC = """\
Some text.

```layers
# number name: prefixes
0 bottom: low, sub.low
1 middle: sub
2 top: pkg top
```
"""


def test_layers_on_a_synthetic_package(tmp_path: Path) -> None:
    graph = make_package(tmp_path, {
        "__init__.py": "from pkg import top\n",                      # the package itself: layer 2
        "low.py": "import typing\nif typing.TYPE_CHECKING:\n    import pkg.top\n",  # never runs: not upward
        "sub/__init__.py": "",
        "sub/low.py": "def f():\n    from pkg.sub import mid\n",    # layer 0 -> 1, inside a function: upward
        "sub/mid.py": "from pkg import low\nfrom pkg.sub import low as sublow\n",  # 1 -> 0: down
        "top.py": "from pkg.sub import mid\nclass C:\n    import pkg.low\n",
        "lost.py": "import pkg.top\n",                               # in no layer
    })
    layers = parse_layers(LAYERS_DOC)
    assert [(layer.number, layer.name, layer.prefixes, layer.line) for layer in layers] == [
        (0, "bottom", ("low", "sub.low"), 5), (1, "middle", ("sub",), 6), (2, "top", ("pkg", "top"), 7),
    ]
    names = [getattr(graph.layer_of(m, layers), "name", None) for m in ("pkg", "pkg.low", "pkg.sub", "pkg.sub.low",
                                                                         "pkg.sub.mid", "pkg.lost")]
    assert names == ["top", "bottom", "middle", "bottom", "middle", None]  # the longest prefix wins
    assert graph.upward_imports(layers) == {"sub.low -> sub.mid"}
    assert graph.unlayered(layers) == {"lost"}
    assert graph.unused_prefixes([*layers, Layer(3, "gone", ("nothing", "su"), 9)]) == {"nothing", "su"}


@pytest.mark.parametrize("doc, error", [
    ("no block\n", "no ```layers block"),
    ("```layers\n0 a: x\n", "not closed"),
    ("```layers\n0 a x\n```\n", "line 2: '0 a x' is not 'NUMBER NAME: PREFIX ...'"),
    ("```layers\n0 a: x\n2 b: y\n```\n", "line 3: layer 2 where layer 1 comes next"),
    ("```layers\n0 a:\n```\n", "line 2: layer 0 holds no module"),
    ("```layers\n0 a: x\n1 b: y x\n```\n", "line 3: x is in layer 0 already"),
])
def test_a_layers_table_that_does_not_parse_is_an_error_naming_its_line(doc: str, error: str) -> None:
    with pytest.raises(ValueError, match=re.escape(error)):
        parse_layers(doc)


def test_the_ratchet_names_new_and_stale_entries(tmp_path: Path) -> None:
    assert ratchet({"a", "b"}, {"b", "a"}, allowlist="L", what="thing") == ""
    assert ratchet({"a", "new"}, {"a", "old"}, allowlist="L", what="thing").splitlines() == [
        "new thing: new: remove it, or add the line 'new' to L",
        "stale entry in L: old is gone: delete the line 'old'",
    ]
    graph = make_package(tmp_path, {"a.py": "\n\nimport pkg.b\n", "b.py": "import pkg.a\n"})
    assert f"new cycle: a -> b ({tmp_path / 'pkg' / 'a.py'}:3)" in ratchet(
        graph.cycle_edges(), set(), allowlist="L", what="cycle", graph=graph
    )
