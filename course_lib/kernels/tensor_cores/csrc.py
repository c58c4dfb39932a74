"""The CUDA C++ sources of the tensor-core stages as data: where they are, which stages the
extension's binding lists (:func:`entries`), and the constants the Python side reads from them by name.

Every number the Python model shares with the kernels - a tile size, a descriptor stride, a
threshold of stage 6's schedule - is written once, as a ``constexpr`` in ``course_lib/csrc``, and
read from there (:func:`constants`)::

    constants("tc_6_tma_store.cu")["STREAM_K_BELOW"]   # -> 0.8
    constants("tc_6_tma_store.cu")["THREADS"]          # -> 384, from (1 + CONSUMERS) * WARPGROUP

A declaration counts if it reads ``constexpr <type> NAME = <expression>;`` (several names may share
one ``constexpr``, separated by commas) at namespace scope - not inside a function or a struct. The
expression may use integer and floating-point literals, names declared before it (in the file or in
the headers it includes with ``#include "..."``), parentheses and ``+ - * / % << >>``, with C++'s
meaning (``/`` of two integers truncates). Anything else (``sizeof``, a function call) is left to
the compiler: such a name is listed with no value. A test compiles a ``static_assert`` for every
value read here, so a misreading cannot pass unnoticed where nvcc is installed.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import operator
import re
from pathlib import Path

CSRC = Path(__file__).resolve().parent.parent.parent / "csrc"
BINDING = "tc_binding.cu"  # the extension's entries (the one file of it that knows PyTorch)
SM90A_GUARD = "TC_WITH_SM90A"  # defined only where the extension is built for sm_90a


@dataclasses.dataclass(frozen=True)
class Constant:
    """One ``constexpr`` as the source declares it."""

    name: str
    namespace: str  # e.g. "tc::stage6"
    expression: str  # the C++ text after '='
    value: int | float | None  # None: not a value this reader computes (sizeof, a call, ...)
    file: str


# Comments, string and character literals, and preprocessor lines (with their continuations) go
# first: their braces and semicolons are not code.
_NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|^[ \t]*#(?:[^\n]*\\\n)*[^\n]*',
                       re.DOTALL | re.MULTILINE)
_INCLUDE = re.compile(r'^[ \t]*#include\s+"([^"]+)"', re.MULTILINE)
_TOKEN = re.compile(
    r"namespace\s+(?P<ns>\w+)\s*\{"
    r"|(?P<decl>\b(?:static\s+|inline\s+)*constexpr\s+(?:static\s+|inline\s+)*[\w:]+(?:\s+[\w:]+)*?\s+"
    r"(?P<body>\w+\s*=[^;{}]*);)"
    r"|(?P<open>\{)|(?P<close>\})"
)
_SUFFIX = re.compile(r"\b(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)(?:[uUlLfF]+)\b")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Mod: operator.mod,
        ast.LShift: operator.lshift, ast.RShift: operator.rshift}


def _split_top_level(text: str) -> list[str]:
    """``A = 1, B = f(2, 3)`` -> ["A = 1", "B = f(2, 3)"]: commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch in "([") - (ch in ")]")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


def _evaluate(expression: str, known: dict[str, int | float | None]) -> int | float | None:
    """The value of a C++ constant expression of literals, known names and arithmetic; None if it
    uses anything else."""
    try:
        tree = ast.parse(_SUFFIX.sub(r"\1", expression.strip()), mode="eval")
    except SyntaxError:
        return None

    def ev(node):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.Name) and known.get(node.id) is not None:
            return known[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Div):
                if isinstance(a, int) and isinstance(b, int):
                    return abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C++ truncates
                return a / b
            if type(node.op) in _OPS:
                return _OPS[type(node.op)](a, b)
        raise ValueError(ast.dump(node))

    try:
        return ev(tree.body)
    except (ValueError, ZeroDivisionError, TypeError):
        return None


def _path(file: str | Path) -> Path:
    path = file if isinstance(file, Path) else CSRC / file
    if not path.is_file():
        raise ValueError(f"no file {file!r} in {CSRC}")
    return path


@functools.lru_cache(maxsize=None)
def _declarations(path: Path, mtime_ns: int) -> tuple[Constant, ...]:
    """Every namespace-scope constexpr of ``path`` and of the local headers it includes (first),
    with its value computed from those declared before it."""
    text = path.read_text()
    out: list[Constant] = []
    for header in _INCLUDE.findall(text):
        if (path.parent / header).is_file():
            out += [c for c in declarations(path.parent / header) if c not in out]
    known = {c.name: c.value for c in out}
    scopes: list[str | None] = []  # a namespace's name, or None for any other block
    for m in _TOKEN.finditer(_NOT_CODE.sub(" ", text)):
        if m.group("ns"):
            scopes.append(m.group("ns"))
        elif m.group("open"):
            scopes.append(None)
        elif m.group("close"):
            if scopes:
                scopes.pop()
        elif None not in scopes:  # a declaration at namespace scope
            for part in _split_top_level(m.group("body")):
                name, _, expression = part.partition("=")
                name, value = name.strip(), _evaluate(expression, known)
                known[name] = value
                out.append(Constant(name, "::".join(scopes), expression.strip(), value, path.name))
    return tuple(out)


def declarations(file: str | Path) -> tuple[Constant, ...]:
    """The constexprs a source file declares or includes from csrc/ (its own last), in order."""
    path = _path(file)
    return _declarations(path, path.stat().st_mtime_ns)


def constants(file: str | Path) -> dict[str, int | float]:
    """Name -> value of every constexpr with a value this reader computes, in ``file`` (a stage's
    .cu, a header) and the headers it includes; the file's own declaration wins over a header's."""
    return {c.name: c.value for c in declarations(file) if c.value is not None}


def constant(file: str | Path, name: str) -> int | float:
    """One constant of ``file``, by name; KeyError saying what the file declares otherwise."""
    table = constants(file)
    if name not in table:
        found = {c.name: c for c in declarations(file)}
        why = (f"its value, {found[name].expression}, is left to the compiler" if name in found
               else f"it declares {', '.join(sorted(table))}")
        raise KeyError(f"{Path(file).name} has no constexpr {name} this reader can evaluate: {why}")
    return table[name]


@dataclasses.dataclass(frozen=True)
class Entry:
    """One entry of the extension, as its binding lists it: a stage, its source ``<stage>.cu``."""

    stage: str
    sm90a: bool  # bound (and its source compiled) only in a build for sm_90a (#ifdef TC_WITH_SM90A)
    one_signature: bool  # bind(m, "<stage>", launcher): a bf16 GEMM c = a @ b; else tc::bind_<stage>(m), its own


_ENTRY = re.compile(r'^[ \t]*#(?P<directive>ifdef|ifndef|if|else|elif|endif)\b(?P<rest>[^\n]*)'
                    r'|\bbind\(\s*m\s*,\s*"(?P<bound>\w+)"|\btc::bind_(?P<own>\w+)\(\s*m\s*\)', re.MULTILINE)


def entries(binding: str | Path = BINDING) -> tuple[Entry, ...]:
    """The stages the binding's ``PYBIND11_MODULE`` lists, in its order. The binding is where C++
    needs each stage named (its launcher's type picks the entry's arguments), so the Python side
    reads the list from it rather than writing it again: which sources a build compiles, which
    stages need sm_90a (those inside ``#ifdef TC_WITH_SM90A``), which are GEMMs of the one signature."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", _path(binding).read_text(), flags=re.DOTALL)
    text = text[text.index("PYBIND11_MODULE("):]
    out: list[Entry] = []
    guards: list[bool] = []  # per open #if: whether its branch is the sm_90a build's
    for m in _ENTRY.finditer(text):
        directive = m.group("directive")
        if directive in ("ifdef", "ifndef", "if"):
            guards.append(directive == "ifdef" and m.group("rest").strip() == SM90A_GUARD)
        elif directive in ("else", "elif"):
            guards[-1] = False
        elif directive == "endif":
            guards.pop()
        else:
            stage = m.group("bound") or m.group("own")
            if guards and not all(guards):
                raise ValueError(f"{Path(binding).name}: the entry {stage} is under a condition other than "
                                 f"#ifdef {SM90A_GUARD}, the only one a build plan knows")
            out.append(Entry(stage, bool(guards), m.group("bound") is not None))
    return tuple(out)
