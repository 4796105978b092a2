"""The import graph of a package, read from its source with ``ast`` (nothing is imported or run).

Usage::

    from tests.import_graph import ImportGraph

    graph = ImportGraph.from_package(Path(langchain_ragspine.__file__).parent)
    graph.cycle_edges()          # {"indexing -> postgres", ...}: the imports inside an import cycle
    graph.private_imports()      # {"postgres -> indexing._warn_stale", ...}
    graph.modules_without_all()  # {"cli", "config", ...}
    graph.imports_of({"langchain_ragspine.modes"})  # who imports these modules
    layers = parse_layers(Path("docs/architecture.md").read_text())  # its ```layers block
    graph.upward_imports(layers)  # {"backends.postgres.search -> retrievers.postgres", ...}: imports of a higher layer

    python tests/import_graph.py [PACKAGE_DIR]   # prints the facts above (default: langchain_ragspine, with the
                                                 # layers of docs/architecture.md)

What counts as an import: every ``import`` / ``from ... import`` statement, wherever it is (module level, inside a
function or a class body, in a ``try:``).  Imports under ``if TYPE_CHECKING:`` never run: they are kept as edges
(``where="type_checking"``, so :meth:`ImportGraph.imports_of` still sees a shim named there) but make no cycle and
no private import (their ``else:`` branch runs and counts).  ``import a.b`` is an edge to the module ``a.b``;
``from a import b`` an edge to ``a.b`` when that is a module of the package, else to ``a`` (the module that defines
``b``); a relative import is resolved against the importer's package.  Implicit parent imports (``import a.b`` runs
``a/__init__`` too) are not edges: the graph is about what each module names.  A module that calls
``importlib.import_module`` imports lazily: each string in it that is the dotted name of a package module (such as
the values of the root's PEP 562 name -> module map) is an edge too (``where="lazy"``; docstrings left out).

Facts are strings with names relative to the package (the package itself by its own name), so an allowlist reads
as the report does: an edge is ``"importer -> imported"``, a private import ``"importer -> module._name"`` (or
``"importer -> pkg._module"`` for a private module), a module ``"cli"``.  Line numbers are kept on the records
(:attr:`ImportGraph.edges`, :attr:`ImportGraph.private`) for messages, and left out of the facts so that an edit
elsewhere in a file does not change them.

Private names: ``from m import _x`` (``_x`` not a dunder, ``m`` another module), ``m._x`` (or ``pkg.m._x``) where
``m`` names a module of the package bound by an import, and a private module (any dotted part ``_x``) imported
from outside the package that holds it: a private module is private to its package, and any module inside that
package may import it.

Layers (:func:`parse_layers`): a fenced ```` ```layers ```` block of a Markdown file, one line per layer,
``NUMBER NAME: PREFIX PREFIX ...``, numbered from 0 up; a prefix is a module relative to the package and every
module below it (``retrievers`` is ``retrievers`` and ``retrievers.*``; the package's own name is its
``__init__`` only), and a module is in the layer of its longest prefix.  An import may point to its own layer or a
lower one: :meth:`ImportGraph.upward_imports` gives the others (``TYPE_CHECKING`` imports left out, as for cycles).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Edge", "ImportGraph", "Layer", "PrivateImport", "parse_layers", "ratchet"]


@dataclass(frozen=True)
class Edge:
    """One import statement's target: ``importer`` (a module of the package) imports ``imported`` at ``line``;
    ``where`` is ``"module"``, ``"class"`` or ``"function"`` (the innermost scope holding the statement),
    ``"lazy"`` (a module name given to ``importlib.import_module``) or ``"type_checking"`` (under
    ``if TYPE_CHECKING:``: never runs)."""

    importer: str
    imported: str
    line: int
    where: str


@dataclass(frozen=True)
class PrivateImport:
    """``importer`` uses ``target`` (``module._name`` or a private module) at ``line``; ``kind`` is ``"name"``
    (``from m import _x``), ``"attribute"`` (``m._x``) or ``"module"`` (a private module from outside its
    package)."""

    importer: str
    target: str
    line: int
    kind: str


@dataclass(frozen=True)
class Layer:
    """One line of a ``layers`` block: layer ``number`` (0 the bottom), its ``name``, the module ``prefixes`` it
    holds (relative to the package), and the ``line`` of the Markdown file it was read from."""

    number: int
    name: str
    prefixes: tuple[str, ...]
    line: int


_LAYER_LINE = re.compile(r"(?P<number>\d+)\s+(?P<name>[^:]+?)\s*:\s*(?P<prefixes>.*)")


def parse_layers(markdown: str, *, fence: str = "layers") -> list[Layer]:
    """The layers of the first fenced block ```` ```layers ```` of ``markdown``: each non-blank line not starting
    with ``#`` is ``NUMBER NAME: PREFIX PREFIX ...`` (prefixes separated by spaces or commas).

    Raises ``ValueError`` naming the line when there is no such block, it is not closed, a line does not parse,
    the numbers are not 0, 1, 2, ... in order, a layer holds no prefix, or a prefix is in two layers.
    """
    lines = markdown.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == f"```{fence}")
    except StopIteration:
        raise ValueError(f"no ```{fence} block") from None
    layers: list[Layer] = []
    seen: dict[str, int] = {}
    for i in range(start + 1, len(lines)):
        text, number = lines[i].strip(), i + 1
        if text.startswith("```"):
            break
        if not text or text.startswith("#"):
            continue
        match = _LAYER_LINE.fullmatch(text)
        if match is None:
            raise ValueError(f"line {number}: {text!r} is not 'NUMBER NAME: PREFIX ...'")
        prefixes = tuple(p for p in re.split(r"[\s,]+", match["prefixes"]) if p)
        if int(match["number"]) != len(layers):
            raise ValueError(f"line {number}: layer {match['number']} where layer {len(layers)} comes next")
        if not prefixes:
            raise ValueError(f"line {number}: layer {match['number']} holds no module")
        for prefix in prefixes:
            if prefix in seen:
                raise ValueError(f"line {number}: {prefix} is in layer {seen[prefix]} already")
            seen[prefix] = len(layers)
        layers.append(Layer(len(layers), match["name"], prefixes, number))
    else:
        raise ValueError(f"the ```{fence} block is not closed")
    return layers


@dataclass(frozen=True)
class _Module:
    name: str
    path: Path
    is_package: bool
    tree: ast.Module


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement with its innermost scope (``"type_checking"`` under ``if TYPE_CHECKING:``)."""
    todo: list[tuple[ast.AST, str]] = [(tree, "module")]
    while todo:
        node, where = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, where
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test) and where != "type_checking":
            todo.extend((child, where) for child in reversed(node.orelse))
            todo.extend((child, "type_checking") for child in reversed(node.body))
            continue
        # an import is a statement: expressions never hold one
        children = [
            c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt | ast.excepthandler | ast.match_case)
        ]
        if where == "type_checking":
            inner = where
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inner = "function"
        elif isinstance(node, ast.ClassDef):
            inner = "class"
        else:
            inner = where
        todo.extend((child, inner) for child in reversed(list(children)))


def _lazy_module_names(tree: ast.Module) -> list[ast.Constant]:
    """The string constants of a module that calls ``import_module`` (its docstrings left out): the names it may
    import lazily."""
    calls = any(
        isinstance(node, ast.Call)
        and (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
             or isinstance(node.func, ast.Name) and node.func.id == "import_module")
        for node in ast.walk(tree)
    )
    if not calls:
        return []
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


class ImportGraph:
    """The modules of one package and the imports between them (see the module docstring for what counts).

    Build it with :meth:`from_package`; every query returns the facts of today's source, so a test compares them
    with an allowlist (:func:`ratchet`).
    """

    def __init__(self, package: str, modules: dict[str, _Module]) -> None:
        self.package = package
        self.modules = modules
        #: every import of a package module by one of the package (itself included), in file and line order
        self.edges: list[Edge] = []
        #: every use of another module's private name or of a private module from outside its package
        self.private: list[PrivateImport] = []
        for module in modules.values():
            self._scan(module)

    @classmethod
    def from_package(cls, root: Path) -> ImportGraph:
        """The graph of the package in directory ``root`` (its name is the directory's name); every ``*.py``
        below it is a module (``__pycache__`` left out).  Raises ``SyntaxError`` naming a file that does not parse.
        """
        root = Path(root)
        modules: dict[str, _Module] = {}
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(root.parent).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            modules[name] = _Module(name, path, is_package, ast.parse(path.read_text("utf-8"), str(path)))
        return cls(root.name, modules)

    # -- names ----------------------------------------------------------------------------------------------------
    def short(self, name: str) -> str:
        """``name`` relative to the package (``"langchain_ragspine.cli"`` → ``"cli"``; the package: its name)."""
        return name.removeprefix(self.package + ".")

    def _in_package(self, dotted: str) -> bool:
        return dotted == self.package or dotted.startswith(self.package + ".")

    def _owner(self, dotted: str) -> str | None:
        """The longest prefix of ``dotted`` that is a module of the package."""
        parts = dotted.split(".")
        while parts:
            if (candidate := ".".join(parts)) in self.modules:
                return candidate
            parts.pop()
        return None

    # -- scanning -------------------------------------------------------------------------------------------------
    def resolve(
        self, node: ast.Import | ast.ImportFrom, importer: str, *, is_package: bool = False
    ) -> list[tuple[str, str, str]]:
        """The package modules one import statement names, as ``(module, name, bound)`` triples: ``name`` is what
        ``from m import name`` takes from ``module`` (``""`` when the module itself is imported), ``bound`` the
        local name the statement binds to ``module`` (``""`` when none: ``import a.b`` binds ``a``, not ``a.b``).
        ``importer`` (a dotted module name, a package if ``is_package``) resolves relative imports; imports of
        anything outside the package give nothing.
        """
        found: list[tuple[str, str, str]] = []
        if isinstance(node, ast.Import):
            for alias in node.names:
                if self._in_package(alias.name) and (target := self._owner(alias.name)) is not None:
                    found.append((target, "", alias.asname or (alias.name if "." not in alias.name else "")))
            return found
        if node.level:
            base = importer.split(".")[: len(importer.split(".")) - node.level + is_package]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        if not self._in_package(source):
            return found
        for alias in node.names:
            if f"{source}.{alias.name}" in self.modules:
                found.append((f"{source}.{alias.name}", "", alias.asname or alias.name))
            elif (target := self._owner(source)) is not None:
                found.append((target, alias.name, ""))
        return found

    def imports_in(self, path: Path, module: str = "") -> list[Edge]:
        """The imports of package modules in any Python file (a test, a script): edges from ``module`` (default:
        the file's path) to the package modules it names, in line order (``TYPE_CHECKING`` blocks included)."""
        tree = ast.parse(Path(path).read_text("utf-8"), str(path))
        return [
            Edge(module or str(path), target, node.lineno, where)
            for node, where in sorted(_imports(tree), key=lambda found: found[0].lineno)
            for target, _, _ in self.resolve(node, module or "__main__")
        ]

    def _scan(self, module: _Module) -> None:
        bound: dict[str, str] = {}  # local name -> the package module it names (for m._x)
        for node, where in _imports(module.tree):
            for target, name, local in self.resolve(node, module.name, is_package=module.is_package):
                self.edges.append(Edge(module.name, target, node.lineno, where))
                if where == "type_checking":
                    continue  # never runs: binds nothing at run time, uses no private name
                if local:
                    bound[local] = target
                elif isinstance(node, ast.Import) and not name:
                    bound.setdefault(self.package, self.package)  # import pkg.a.b binds pkg
                self._check_private_module(module, target, node.lineno)
                if name and _is_private(name) and target != module.name:
                    self.private.append(PrivateImport(module.name, f"{target}.{name}", node.lineno, "name"))
        for lazy in _lazy_module_names(module.tree):
            if lazy.value in self.modules and lazy.value != module.name:
                self.edges.append(Edge(module.name, lazy.value, lazy.lineno, "lazy"))
                self._check_private_module(module, lazy.value, lazy.lineno)
        for use in ast.walk(module.tree) if bound else ():
            if isinstance(use, ast.Attribute) and _is_private(use.attr):
                owner = self._bound_module(use.value, bound)  # m._x, pkg.m._x
                if owner is not None and owner != module.name and f"{owner}.{use.attr}" not in self.modules:
                    target = f"{owner}.{use.attr}"
                    self.private.append(PrivateImport(module.name, target, use.lineno, "attribute"))

    def _bound_module(self, value: ast.expr, bound: dict[str, str]) -> str | None:
        """The package module an expression such as ``m`` or ``pkg.sub.m`` names through the import bindings
        ``bound`` (local name -> module), else ``None``.  (A private module reached as an attribute is a module,
        not a name: the private-module check covers it where it is imported.)"""
        parts: list[str] = []
        while isinstance(value, ast.Attribute):
            parts.append(value.attr)
            value = value.value
        if not isinstance(value, ast.Name) or value.id not in bound:
            return None
        dotted = ".".join([bound[value.id], *reversed(parts)])
        return dotted if dotted in self.modules else None

    def _check_private_module(self, module: _Module, target: str, line: int) -> None:
        parts = target.split(".")
        for i, part in enumerate(parts):
            if _is_private(part):
                holder = ".".join(parts[:i])  # the package the private module (or package) is private to
                if module.name != holder and not module.name.startswith(holder + "."):
                    self.private.append(PrivateImport(module.name, target, line, "module"))
                return

    # -- facts ----------------------------------------------------------------------------------------------------
    def adjacency(self) -> dict[str, set[str]]:
        """Module → the other modules it imports when it runs (``TYPE_CHECKING`` edges left out)."""
        adjacent: dict[str, set[str]] = {name: set() for name in self.modules}
        for edge in self.edges:
            if edge.imported != edge.importer and edge.where != "type_checking":
                adjacent[edge.importer].add(edge.imported)
        return adjacent

    def cycles(self) -> list[list[str]]:
        """The strongly connected components of more than one module (Tarjan's algorithm, iterative), each sorted,
        largest first: the import cycles, imports inside functions included."""
        adjacent = {name: sorted(targets) for name, targets in self.adjacency().items()}
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        components: list[list[str]] = []
        for start in sorted(adjacent):
            if start in index:
                continue
            work: list[tuple[str, int]] = [(start, 0)]
            while work:
                node, i = work.pop()
                if i == 0:
                    index[node] = low[node] = len(index)
                    stack.append(node)
                    on_stack.add(node)
                if i < len(adjacent[node]):
                    work.append((node, i + 1))
                    nxt = adjacent[node][i]
                    if nxt not in index:
                        work.append((nxt, 0))
                    elif nxt in on_stack:
                        low[node] = min(low[node], index[nxt])
                    continue
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
        return sorted(components, key=lambda c: (-len(c), c))

    def cycle_edges(self) -> set[str]:
        """``"importer -> imported"`` for every edge inside a cycle (both ends in one strongly connected
        component)."""
        component_of = {name: i for i, component in enumerate(self.cycles()) for name in component}
        return {
            f"{self.short(e.importer)} -> {self.short(e.imported)}"
            for e in self.edges
            if e.where != "type_checking"
            and e.importer != e.imported
            and component_of.get(e.importer, -1) == component_of.get(e.imported, -2)
        }

    def private_imports(self) -> set[str]:
        """``"importer -> target"`` for every :attr:`private` use (``target``: ``module._name`` or
        ``pkg._module``)."""
        return {f"{self.short(p.importer)} -> {self.short(p.target)}" for p in self.private}

    def modules_without_all(self) -> set[str]:
        """The non-private modules (no dotted part ``_x``; ``__main__`` left out) whose top level never assigns
        ``__all__``."""
        missing = set()
        for name, module in self.modules.items():
            parts = name.split(".")
            if parts[-1] == "__main__" or any(_is_private(part) for part in parts):
                continue
            targets = [
                target
                for node in module.tree.body
                for target in (
                    node.targets if isinstance(node, ast.Assign)
                    else [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign)
                    else []
                )
            ]
            if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                missing.add(self.short(name))
        return missing

    def imports_of(self, modules: Iterable[str]) -> set[str]:
        """``"importer -> imported"`` for every edge into ``modules`` (dotted names) from a module not among them,
        ``TYPE_CHECKING`` imports included (a type checker reads them)."""
        wanted = set(modules)
        return {
            f"{self.short(e.importer)} -> {self.short(e.imported)}"
            for e in self.edges
            if e.imported in wanted and e.importer not in wanted
        }

    def layer_of(self, module: str, layers: Sequence[Layer]) -> Layer | None:
        """The layer of ``module`` (a dotted name): the one holding its longest prefix, else ``None``."""
        by_prefix = {prefix: layer for layer in layers for prefix in layer.prefixes}
        parts = self.short(module).split(".")
        while parts:
            if (layer := by_prefix.get(".".join(parts))) is not None:
                return layer
            parts.pop()
        return None

    def unlayered(self, layers: Sequence[Layer]) -> set[str]:
        """The modules in no layer (relative names)."""
        return {self.short(name) for name in self.modules if self.layer_of(name, layers) is None}

    def unused_prefixes(self, layers: Sequence[Layer]) -> set[str]:
        """The prefixes of ``layers`` that name no module of the package (misspelt, or the module is gone)."""
        modules = {self.short(name) for name in self.modules}
        return {
            prefix for layer in layers for prefix in layer.prefixes
            if not any(m == prefix or m.startswith(prefix + ".") for m in modules)
        }

    def upward_imports(self, layers: Sequence[Layer]) -> set[str]:
        """``"importer -> imported"`` for every import that runs (``TYPE_CHECKING`` left out; inside functions
        and lazy ones included) whose target is in a higher layer than its importer (modules in no layer left
        out: :meth:`unlayered` names them)."""
        found = set()
        for e in self.edges:
            if e.where == "type_checking" or e.importer == e.imported:
                continue
            low, high = self.layer_of(e.importer, layers), self.layer_of(e.imported, layers)
            if low is not None and high is not None and high.number > low.number:
                found.add(f"{self.short(e.importer)} -> {self.short(e.imported)}")
        return found

    def lines_of(self, fact: str) -> list[str]:
        """Where an edge or private-import fact comes from: ``"path:line"`` of each statement behind it."""
        places = [
            (self.modules[e.importer].path, e.line)
            for e in self.edges
            if f"{self.short(e.importer)} -> {self.short(e.imported)}" == fact
        ] + [
            (self.modules[p.importer].path, p.line)
            for p in self.private
            if f"{self.short(p.importer)} -> {self.short(p.target)}" == fact
        ]
        return [f"{path}:{line}" for path, line in sorted(set(places))]


def ratchet(
    found: Iterable[str], allowed: Iterable[str], *, allowlist: str, what: str, graph: ImportGraph | None = None,
    explain: Callable[[str], str] | None = None,
) -> str:
    """The ratchet of an allowlist: ``""`` when ``found`` (today's facts) equals ``allowed``, else a message naming
    each new fact (``explain(fact)`` first when given, then where it comes from when ``graph`` is given) and each
    stale allowlist line, and what to do: fix a new one (or add its line to ``allowlist``), delete a stale one's line.
    """
    found, allowed = set(found), set(allowed)
    lines = []
    for fact in sorted(found - allowed):
        notes = [*([explain(fact)] if explain is not None else []), *(graph.lines_of(fact) if graph else [])]
        where = f" ({', '.join(notes)})" if notes else ""
        lines.append(f"new {what}: {fact}{where}: remove it, or add the line {fact!r} to {allowlist}")
    for fact in sorted(allowed - found):
        lines.append(f"stale entry in {allowlist}: {fact} is gone: delete the line {fact!r}")
    return "\n".join(lines)


def _report(root: Path, architecture: Path | None = None) -> str:
    graph = ImportGraph.from_package(root)
    layers = parse_layers(architecture.read_text("utf-8")) if architecture is not None else []
    out = [f"{len(graph.modules)} modules, {len(graph.edges)} import edges"]
    cycles = graph.cycles()
    sizes = ", ".join(str(len(c)) for c in cycles)
    out.append(f"\nstrongly connected components: {len(cycles)} ({sizes} modules)")
    for title, facts in (
        ("cycle edges", graph.cycle_edges()),
        ("private imports", graph.private_imports()),
        ("modules without __all__", graph.modules_without_all()),
        *([("modules in no layer", graph.unlayered(layers)), ("upward imports", graph.upward_imports(layers))]
          if layers else []),
    ):
        out.append(f"\n{title}: {len(facts)}")
        out.extend(f"    {fact!r}," for fact in sorted(facts))
    return "\n".join(out)


if __name__ == "__main__":
    repo = Path(__file__).resolve().parents[1]
    docs = repo / "docs" / "architecture.md"
    if len(sys.argv) > 1:
        print(_report(Path(sys.argv[1])))
    else:  # the package of this repository, and the layers of its docs/architecture.md
        print(_report(repo / "langchain_ragspine", docs if docs.exists() else None))
