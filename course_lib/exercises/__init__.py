"""The notebooks' exercises: questions whose answer is checked, and puzzles where you write the code.

Each path notebook has a module here under its own name (``exercises.naive`` for ``01_naive``, ...)
holding its exercises. A notebook uses them in three cells, in this order:

1. the cell where you answer: ``my_loads = None`` (a number to set), or a starter kernel with
   ``# TODO`` lines to fill;
2. the check: ``ex.global_loads.check(my_loads)`` or ``ex.tiled_kernel.check(my_kernel)``;
3. below it, the solution: ``ex.tiled_kernel.solution()``, a button that shows the course's own
   code only when you press it (running every cell shows the button, not the code), or a collapsed
   text.

What a check compares with is computed here, from the course's models and kernels, never in the
notebook above the check. The likely wrong answers of a question come with what each means. A puzzle
runs your code on inputs you have not seen - every shape, edge shapes included - through the same
guard regions as ``course_lib.check`` (reads and writes outside the arrays are named) and, where the
notebook is about memory, traces it and compares with the course's kernel.

Checks print and return a :class:`~course_lib.learn.Verdict`; they never raise, so a notebook runs
top to bottom whatever you entered.
"""

from __future__ import annotations

import math
import numbers
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from course_lib import learn
from course_lib.model.layout import Shape
from course_lib.learn import Verdict, say


@dataclass(frozen=True)
class Question:
    """An exercise with one checked answer.

    ``expected`` computes the answer from the course's models when the check runs. ``wrong`` lists
    likely wrong answers, each with what it means: a value, or a function of the expected answer
    that gives one (e.g. the same count in the wrong unit). ``after_right``, given a right answer,
    gives a line printed below the verdict (the recorded working, or what a right answer left out),
    or None for nothing."""

    what: str
    expected: Callable[[], Any]
    rel_tol: float = 0.0
    hint: str = ""
    wrong: Sequence[tuple[Any, str]] = ()
    # Where several answers are right: whether an answer is one of them (``expected`` then gives
    # one right answer, for the tests and the solution).
    accepts: Callable[[Any], bool] | None = None
    # How an answer is read before it is compared (e.g. a list or a string of letters as a set).
    normalize: Callable[[Any], Any] | None = None
    after_right: Callable[[Any], str | None] | None = None

    def check(self, answer: Any) -> Verdict:
        if answer is not None and self.normalize is not None:
            answer = self.normalize(answer)
        verdict = self._verdict(answer)
        if verdict and self.after_right is not None:
            line = self.after_right(answer)
            if line:
                say(line)
        return verdict

    def _verdict(self, answer: Any) -> Verdict:
        if answer is not None and self.accepts is not None:
            ok = False
            try:
                ok = bool(self.accepts(answer))
            except Exception:  # noqa: BLE001 - an answer of the wrong kind is not right
                pass
            if ok:
                say(f"{self.what}: {learn.fmt(answer)} is right.")
                return Verdict(True)
        want = self.expected()
        if isinstance(want, dict):  # several parts, each checked on its own
            if not isinstance(answer, dict) or set(answer) != set(want):
                say(f"{self.what}: answer with a dict of {', '.join(map(repr, want))}, as in the cell above.")
                return Verdict(False)
            ok = [self._part(k, answer[k], v) for k, v in want.items()]
            return Verdict(all(ok))
        if isinstance(answer, str) and not isinstance(want, str):
            spelled = _literal(answer)
            if spelled is not None and not isinstance(spelled, str):
                say(f"{self.what}: {answer!r} is text: write it without the quotes, {answer.strip()}")
                return Verdict(False)
        wrong = [(v(want) if callable(v) else v, meaning) for v, meaning in self.wrong]
        return learn.check_answer(answer, want, what=self.what, rel_tol=self.rel_tol, hint=self.hint, wrong=wrong)

    def _part(self, key: str, answer: Any, want: Any) -> bool:
        """One part of a several-part answer; a part whose answer is a number is read as
        :class:`NumberQuestion` reads one (text such as "4" is told to be written as the number)."""
        what = f"{self.what}, {key}"
        if answer is not None and isinstance(want, numbers.Real) and not isinstance(want, bool):
            value = as_number(answer)
            if value is None:
                say(f"{what}: give a number, not {_not_a_number(answer)}; set it in the cell above and run the cell again.")
                return False
            answer = value
        return bool(learn.check_answer(answer, want, what=what, rel_tol=self.rel_tol, hint=self.hint))


def _literal(text: str) -> Any:
    """What Python would read ``text`` as when typed without quotes (a number, a tuple...), or None."""
    import ast  # noqa: PLC0415

    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def as_number(answer: Any) -> int | float | None:
    """An answer as a plain Python number: an int or a float as it is; a numpy scalar, a 0-d tensor
    or anything else with ``.item()`` that holds one real number, as that number. None for anything
    else: a bool, text (even text that spells a number), a function, a list, several elements."""
    if isinstance(answer, bool):
        return None
    item = getattr(answer, "item", None)
    if callable(item):
        try:
            answer = item()
        except (ValueError, RuntimeError, TypeError):  # numpy and torch refuse more than one element
            return None
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
        return None
    if isinstance(answer, float):
        return answer
    try:  # an int (or a Fraction) beyond a float's range compares as an infinite float would
        float(answer)
    except OverflowError:
        return math.inf if answer > 0 else -math.inf
    return answer if isinstance(answer, int) else float(answer)


def _not_a_number(answer: Any) -> str:
    """What an answer that is not one number is, in words, and how to write it as one."""
    if isinstance(answer, str):
        spelled = answer.replace(",", "").replace("_", "").strip()
        try:
            float(spelled)
        except ValueError:
            return f"the text {answer!r}"
        return f"the text {answer!r}: write the number without quotes, {spelled}"
    if isinstance(answer, tuple) and len(answer) > 1 and all(
            isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 999 for x in answer[1:]):
        typed = ",".join([str(answer[0])] + [f"{x:03d}" for x in answer[1:]])
        return (f"a tuple: Python reads {typed} as {len(answer)} numbers; write "
                f"{typed.replace(',', '')} or {typed.replace(',', '_')}")
    if callable(answer) and not hasattr(answer, "item"):
        return "a function"
    size = getattr(answer, "size", None)
    count = answer.numel() if callable(getattr(answer, "numel", None)) else size if isinstance(size, int) else None
    if count is not None and count != 1:
        return f"a {type(answer).__name__} of {count} elements"
    return f"a {type(answer).__name__}"


@dataclass(frozen=True)
class NumberQuestion(Question):
    """A question whose answer is one number. An int, a float, a numpy scalar or a one-element tensor
    is compared as that number; anything else (text, even "760"; a function; a bool; a list) is told
    to give a number, and not compared. ``wrong_when`` holds likely wrong answers that are ranges:
    (test, meaning) pairs, a test taking the answer and the expected answer (say, the right count
    in another unit, to the digits a learner may round it to); a right answer never reaches them."""

    unit: str = ""
    wrong_when: Sequence[tuple[Callable[[float, Any], bool], str]] = ()

    def check(self, answer: Any) -> Verdict:
        if answer is None:
            return super().check(None)
        value = as_number(answer)
        if value is None:
            unit = f" ({self.unit})" if self.unit else ""
            say(f"{self.what}: give a number{unit}, not {_not_a_number(answer)}; set it in the cell above "
                f"and run the cell again.")
            return Verdict(False)
        if self.said_wrong_when(value):
            return Verdict(False)
        return super().check(value)

    def said_wrong_when(self, value: float) -> bool:
        """Whether ``value``, not a right answer, is one of ``wrong_when``'s: then it says what it means."""
        if not self.wrong_when or (self.accepts is not None and self.accepts(value)):
            return False
        want = self.expected()
        if isinstance(want, numbers.Real) and learn.close_to(value, want, self.rel_tol):
            return False
        meaning = next((m for test, m in self.wrong_when if test(value, want)), None)
        if meaning is not None:
            say(f"{self.what}: {shown_apart(value, want)} is not it: {meaning}")
        return meaning is not None


def shown_apart(value: float, other: float) -> str:
    """``value`` as answers are printed, or in full where that would print as ``other`` (16384.000001
    is not shown as 16384)."""
    return repr(value) if value != other and learn.fmt(value) == learn.fmt(other) else learn.fmt(value)


# ---- the recorded roofs -------------------------------------------------------------------------
# The course's roofline (notebook 06): the copy bandwidth and the best cuBLAS rate per dtype that the
# H200 recording measured (its ``ceilings``), loaded when a check runs, not at import.

def recorded_copy_gbs() -> float:
    """The recorded copy bandwidth in GB/s (10^9 bytes per second): the course's memory roof."""
    from course_lib import results  # noqa: PLC0415

    return float(results.load().ceilings["copy_bandwidth_gbs"])


def recorded_ridge(dtype: str) -> float:
    """FLOP per byte where the recorded roofs meet: the best cuBLAS rate in ``dtype`` over the copy
    bandwidth."""
    from course_lib import results  # noqa: PLC0415

    peaks = results.load().ceilings["cublas_peak_tflops"]
    if dtype not in peaks:
        raise ValueError(f"the recording has no cuBLAS peak for {dtype!r}: one of {', '.join(peaks)}")
    return peaks[dtype] * 1e3 / recorded_copy_gbs()


class Puzzle:
    """A puzzle: you write code (a kernel, a function), ``check`` runs it on cases you do not see,
    ``solution`` shows the course's own code when you ask for it. (tests/test_exercises*.py give
    each puzzle wrong solutions it must reject.)

    A puzzle class's ``solution`` says what the course shows (``learn.show_source`` of its code, or
    a list of them); every one, in whichever module the class lives, is wrapped here so that
    ``puzzle.solution()`` returns a button that shows it only when pressed
    (:func:`course_lib.learn.solution_widget`), and ``puzzle.solution(c04.vector_add)`` also shows
    more of the course's code below it (the kernel's wrapper, say)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        shows = cls.__dict__.get("solution")
        if shows is not None and not getattr(shows, "shown_on_request", False):
            cls.solution = _shown_on_request(shows)

    def check(self, answer) -> Verdict:  # pragma: no cover - every puzzle defines it
        raise NotImplementedError

    def solution(self):  # pragma: no cover
        raise NotImplementedError

    @property
    def solved_by(self):
        """What ``check`` takes that solves it: the course's own kernel or function."""
        return self.reference


def _shown_on_request(shows: Callable):
    """``solution`` as a puzzle class writes it (what to show), made a button that shows it, and
    ``also`` (more of the course's code, through ``learn.show_source``) below it, only when pressed."""
    import functools  # noqa: PLC0415

    @functools.wraps(shows)
    def solution(self, *also):
        def show() -> list:
            shown = shows(self)
            return [*(shown if isinstance(shown, (list, tuple)) else [shown]), *map(learn.show_source, also)]

        return learn.solution_widget(show)

    solution.shown_on_request = True
    return solution


@dataclass(frozen=True)
class FunctionPuzzle(Puzzle):
    """A puzzle whose answer is a plain Python function, compared with the course's model on every
    input of ``cases``. A learner's function that agrees with one of the ``known_wrong`` functions
    on every case is told what that function does wrong."""

    title: str
    reference: Callable
    cases: Callable[[], Sequence[tuple]]
    show: Callable[[tuple], str]  # how one case reads in a message
    known_wrong: Sequence[tuple[Callable, str]] = ()
    reveal: Any = None  # what solution() shows (defaults to the reference)

    def check(self, fn: Callable) -> Verdict:
        if nothing_yet(self.title, fn):
            return Verdict(False)
        cases = list(self.cases())
        got = call_on_every_case(self.title, fn, cases, lambda case: f"for {self.show(case)}")
        if got is None:
            return Verdict(False)
        wrong = [c for c in cases if not _same(got[c], self.reference(*c))]
        if not wrong:
            say(f"{self.title}: solved — right on all {len(cases)} cases.")
            return Verdict(True)
        for known, meaning in self.known_wrong:
            if all(_same(got[c], known(*c)) for c in cases):
                say(f"{self.title}: not yet — {meaning}")
                break
        else:
            say(f"{self.title}: not yet — wrong on {len(wrong)} of {len(cases)} cases.")
        for c in wrong[:3]:
            say(f"  {self.show(c)}: yours gives {learn.fmt(got[c])}, the model {learn.fmt(self.reference(*c))}")
        return Verdict(False)

    def solution(self):
        return learn.show_source(self.reveal if self.reveal is not None else self.reference)


def nothing_yet(title: str, answer: Any, what: str = "function") -> bool:
    """Say so, and return True, when the learner has not given an answer yet (None)."""
    if answer is None:
        say(f"{title}: no {what} yet — write it in the cell above and run this cell again.")
    return answer is None


def call_on_every_case(title: str, fn: Callable, cases: Sequence[tuple], where: Callable[[tuple], str]) -> dict | None:
    """``fn(*case)`` for every case, asked in a shuffled order (the same every time: a function that
    counts its calls instead of reading its arguments is not right by the order of the cases) and
    returned in the cases' order; or None after saying why not: the function raised (``where`` says
    for which case, the first in the cases' order), or it returns None everywhere (the starter, as
    committed)."""
    order = list(cases)
    random.Random(len(order)).shuffle(order)
    results, raised = {}, {}
    for case in order:
        try:
            results[case] = plain_result(fn(*case))
        except Exception as e:  # noqa: BLE001 - a learner's function may raise anything
            raised[case] = e
    first = next((case for case in cases if case in raised), None)
    if first is not None:
        e = raised[first]
        floats = (" (a / gives a float in Python; // keeps whole numbers, as C++'s / on ints)"
                  if isinstance(e, TypeError) and "'float'" in str(e) else "")
        say(f"{title}: your function raised {type(e).__name__} {where(first)}: {e}{floats}")
        return None
    got = {case: results[case] for case in cases}
    if all(v is None for v in got.values()):
        say(f"{title}: not solved yet: your function returns None — fill in the TODO lines.")
        return None
    return got


def plain_result(value: Any) -> Any:
    """A learner's function's result as the course's models give theirs: a numpy array or a tensor of
    several elements as a tuple of them ((0, 0), not array([0, 0])); anything else as it is (one
    element stays a number to be read by :func:`as_number`)."""
    size = value.numel() if callable(getattr(value, "numel", None)) else getattr(value, "size", None)
    if getattr(value, "ndim", 0) and isinstance(size, int) and size > 1 and callable(getattr(value, "tolist", None)):
        return tuple(value.tolist())
    return value


def _same(a: Any, b: Any) -> bool:
    try:
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
            return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
        return bool(a == b)
    except Exception:  # noqa: BLE001
        return False


@dataclass
class Report:
    """What a kernel puzzle's check found, printed as a few short lines."""

    title: str
    lines: list[tuple[int, str]] = field(default_factory=list)
    solved: bool = False

    def add(self, text: str, indent: int = 2) -> None:
        self.lines.append((indent, text))

    def show(self) -> Verdict:
        say(self.title)
        for indent, text in self.lines:
            say(text, indent=indent)
        return Verdict(self.solved)


@dataclass(frozen=True)
class NumbaGemmPuzzle(Puzzle):
    """A puzzle where you write a numba GEMM kernel ``kernel(a, b, c)``.

    ``check(kernel)`` runs it through ``launch(kernel, a, b)`` on every shape of ``shapes`` with
    ``course_lib.check`` (fresh inputs, NaN-poisoned C, guard regions), then traces one launch of
    ``grid`` x ``block`` threads on ``trace_shape`` and compares its memory accesses with the course's
    kernel ``reference``: sectors per warp request for each global load and store, the bank-conflict
    degree of the shared-memory accesses, and shared-memory races (a missing barrier)."""

    title: str
    launch: Callable
    reference: Any
    shapes: Sequence[Shape]
    trace_shape: Shape
    grid: tuple[int, int]
    block: tuple[int, int]
    reveal: Any = None
    k_tile: int | None = None  # K per tile of shared memory: a note when only K % k_tile != 0 is wrong

    def check(self, kernel) -> Verdict:
        report = Report(f"{self.title}, checked on {len(self.shapes)} shapes you have not seen:")
        if nothing_yet(self.title, kernel, "kernel"):
            return Verdict(False)
        # The shapes, then the trace; a race the trace finds (a missing barrier) is said first, before
        # the wrong shapes it explains, and then no note guesses at the loop over K.
        found = Report(report.title)
        launched = _Launches(kernel)
        right, failures = _gemm_shapes(found, lambda a, b: self.launch(launched, a, b), self.shapes)
        if right is None:  # it never wrote C, or did not run at all: nothing to trace yet
            return found.show()
        after_shapes = len(found.lines)
        clean = _compare_traces(found, kernel, self.reference, self.trace_shape, self.grid, self.block, right,
                                races_to=report)
        if not report.lines and (not right or _barrier_under_if(kernel)):
            uneven = _uneven_barriers(kernel, self.trace_shape, self.grid, self.block)
            if uneven:
                report.add(uneven)
                clean = False
        short = None if right or report.lines else _k_stops_early(failures, self.shapes, self.k_tile)
        if short:
            found.lines.insert(after_shapes, (4, short))
        report.lines += found.lines
        if right:
            _compiled(report, kernel, self.reference, self._compile_reference)
        compiles = _source_notes(report, kernel, launched.args)
        report.solved = right and clean and compiles
        if report.solved:
            report.add("Solved: right on every shape, and its memory accesses cost no more than the "
                       "course's kernel.", 0)
        elif right and clean:
            report.add("Right on every shape here, but not solved yet: see the note above.", 0)
        elif right:
            report.add("Right on every shape, but not solved yet: where a line says (course ...), your "
                       "kernel makes more memory requests, or costlier ones, than it needs.", 0)
        return report.show()

    def solution(self):
        return learn.show_source(self.reveal if self.reveal is not None else self.reference)

    def _compile_reference(self) -> None:
        """Launch the course's kernel once, small, so that numba has compiled it for this GPU."""
        from course_lib.gemm import random_inputs  # noqa: PLC0415

        self.launch(self.reference, *random_inputs(*self.trace_shape, seed=0))


class _Launches:
    """A numba kernel that keeps the arguments of its first launch (``kernel[grid, block](*args)``),
    from which :func:`_source_notes` asks numba for the types of its variables."""

    def __init__(self, kernel):
        self.kernel, self.args = kernel, None

    def __getitem__(self, config):
        launch = self.kernel[config]

        def run(*args):
            if self.args is None:
                self.args = args
            return launch(*args)

        return run


def source_tree(kernel):
    """The parsed source (``ast.Module``) of a learner's kernel or function: a numba kernel's Python
    function, a Triton kernel's, or the function itself; None where the source cannot be read."""
    import ast  # noqa: PLC0415
    import inspect  # noqa: PLC0415
    import textwrap  # noqa: PLC0415

    fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None


def _barrier_under_if(kernel) -> bool:
    """Whether the kernel's source has a cuda.syncthreads() inside an ``if`` (cheap: read, not run)."""
    import ast  # noqa: PLC0415

    tree = source_tree(kernel)
    return tree is not None and any(isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "syncthreads"
               for branch in ast.walk(tree) if isinstance(branch, ast.If) for n in ast.walk(branch))


def _uneven_barriers(kernel, shape: Shape, grid, block) -> str | None:
    """Traced on ``shape`` one row and one column short (the same blocks, some threads past the edge of
    C): a sentence when the threads of a block pass different numbers of barriers, else None."""
    M, N, K = shape
    try:
        tr = trace_gemm(kernel, (M - 1, N - 1, K), grid, block)
    except Exception:  # noqa: BLE001 - the shapes above already say what is wrong
        return None
    uneven = tr.uneven_barriers()
    if not uneven:
        return None
    where, counts = uneven[0]
    few, many = min(counts), max(counts)
    skipped = counts[few]
    who = ", ".join(str(t[:2]) for t in skipped[:2]) + (f" and {len(skipped) - 2} others" if len(skipped) > 2 else "")
    return (f"Barriers skipped: traced at M, N = {M - 1}, {N - 1}, threads {who} of block {where[:2]} passed "
            f"{few} cuda.syncthreads(), the others {many}. A barrier inside an `if` that some threads skip (or "
            f"after a `return`) lets them run ahead and refill a tile while others still read it; on a GPU such "
            f"a barrier is undefined. Keep every barrier outside the `if`s: put them around the loads and the "
            f"store of C only.")


def _gemm_shapes(report: Report, fn: Callable, shapes: Sequence[Shape]) -> tuple[bool | None, list]:
    """Check ``fn`` on ``shapes`` and report every wrong one. Returns (True if all were right, None if
    ``fn`` never wrote C or did not run, else False; the failures, :class:`course_lib.correctness.Failure`)."""
    from course_lib.correctness import CheckFailure, check  # noqa: PLC0415 - check imports exercises' peers

    try:
        check(fn, shapes=list(shapes))
    except CheckFailure as f:
        unwritten = [x for x in f.failures if x.untouched]
        if len(unwritten) == len(shapes):
            report.add("Not solved yet: on every shape C was never written (every element still "
                       "holds the NaN it was filled with). Fill in the TODO lines.")
            return None, list(f.failures)
        wrong_shapes = {x.shape for x in f.failures}
        right_shapes = [tuple(v) for v in shapes if tuple(v) not in wrong_shapes]
        passed = f" ({', '.join(map(str, right_shapes))})" if right_shapes else ""
        report.add(f"right on {len(right_shapes)} of {len(shapes)} shapes{passed}; wrong on these:")
        notes: list[str] = []
        for x in f.failures:  # the note is the same at every shape: said once, below them
            if x.note and x.note not in notes:
                notes.append(x.note)
            report.add(f"{x.shape}: {x.finding}", 4)
        for note in notes:
            report.add(note[0].upper() + note[1:] + ".", 4)
        return False, list(f.failures)
    except Exception as e:  # noqa: BLE001 - the learner's kernel may fail to compile or run
        from course_lib.instruments import simulator_message  # noqa: PLC0415

        who, text = simulator_message(str(e))
        report.add(f"Not solved yet: your kernel did not run: {who}raised {type(e).__name__}: {_first_line(text)}")
        return None, []
    report.add(f"right on all {len(shapes)} shapes")
    return True, []


def _k_stops_early(failures, shapes: Sequence[Shape], tile: int | None = None) -> str | None:
    """A note when the wrong shapes, each wrong in value only (no access outside the arrays, nothing
    left unwritten), are exactly those with the longest K, or exactly those whose K is not a multiple
    of ``tile``: the sum over K is incomplete."""
    wrong = {x.shape for x in failures}
    if not all(x.wrong_elements and not (x.non_finite or x.stray or x.out_of_bounds) for x in failures):
        return None
    right = [tuple(s) for s in shapes if tuple(s) not in wrong]
    if tile and right and wrong == {tuple(s) for s in shapes if s[2] % tile}:
        return (f"Every shape it gets wrong has a K that is not a multiple of the tile ({tile}): the last, "
                f"partial tile of K is left out. Walk ceil(K / {tile}) tiles, and fill the slots past K "
                f"with zeros.")
    if not right or min(s[2] for s in wrong) <= max(s[2] for s in right):
        return None
    ks = sorted({s[2] for s in wrong})
    return (f"Only the shapes with the longest K are wrong (K = {', '.join(map(str, ks))}; right up to "
            f"K = {max(s[2] for s in right)}): the sum over K is incomplete. Does your loop over K run to K "
            f"itself, whatever its length, not to a fixed number of steps or tiles? Does the sum start "
            f"once, before the loop, not again inside it?")


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 300 else line[:297] + "..."


_REFERENCE_TRACES: dict = {}


def trace_gemm(kernel, shape: Shape, grid, block):
    import torch  # noqa: PLC0415

    from course_lib.gemm import random_inputs  # noqa: PLC0415
    from course_lib.instruments import trace_kernel  # noqa: PLC0415

    M, N, K = shape
    a, b = random_inputs(M, N, K, seed=0)
    args = [t.cpu().numpy() for t in (a, b, torch.zeros(M, N))]
    return trace_kernel(kernel, grid, block, *args, names=("A", "B", "C"))


def _memory_costs(trace) -> dict[tuple[str, str], tuple[int, float]]:
    """Per global array and load/store: (warp requests, mean sectors per request); for shared
    memory, per load/store over all its arrays: (warp requests, worst conflict degree)."""
    out: dict[tuple[str, str], list[float]] = {}
    for r in trace.requests():
        if r.space == "global":
            out.setdefault((r.array, r.kind), []).append(r.coalescing().n_sectors)
        else:
            out.setdefault(("shared", r.kind), []).append(r.banks().conflict_degree)
    return {k: (len(v), max(v) if k[0] == "shared" else sum(v) / len(v)) for k, v in out.items()}


def _cost_text(key: tuple[str, str], mine: tuple[int, float] | None, course: tuple[int, float]) -> tuple[str, bool]:
    """One measure of the trace in words, and whether it is worse than the course's kernel's."""
    array, kind = key
    what = f"{'shared' if array == 'shared' else array} {kind}s"
    if mine is None:
        return f"{what}: none (the course's kernel makes {course[0]})", True
    (n, cost), (n_ref, cost_ref) = mine, course
    unit = "-way" if array == "shared" else (" sector" if cost == 1 else " sectors")
    more, worse_cost = n > n_ref * 1.01, cost > cost_ref * 1.01
    text = f"{what}: {n} request{'s' if n != 1 else ''}{' (course ' + str(n_ref) + ')' if more else ''}, "
    text += f"{cost:.3g}{unit}{' (course ' + format(cost_ref, '.3g') + ')' if worse_cost else ''}"
    return text, more or worse_cost


def _why_costlier(key: tuple[str, str], mine: tuple[int, float], course: tuple[int, float],
                  wide_shared: bool = False) -> list[str]:
    """What a costlier line of the trace usually means, in the course's words (``wide_shared``: the
    kernel's shared arrays hold 8-byte elements, where the course's hold 4)."""
    array, kind = key
    out = []
    if mine[0] > course[0] * 1.01:
        out.append("More stores: an element of C is written more than once; a store inside the loop over K "
                   "writes it at every step. Keep the sum in a register and store it once, after the loop."
                   if array != "shared" and kind == "store" else
                   "More requests: a value read once could serve several multiply-adds from a register "
                   "(or a tile in shared memory) instead of being read again.")
    if mine[1] > course[1] * 1.01:
        if array == "shared" and wide_shared:
            out.append("More passes through the banks: your shared arrays hold 8-byte (float64) elements, and "
                       "a bank serves 4 bytes a pass, so a warp's 32 elements take at least two passes; padding "
                       "cannot remove that, a float32 tile can.")
        else:
            out.append("More passes through the banks: lanes of a warp want different words of one bank (a bank "
                       "conflict); padding or a swizzle spreads them." if array == "shared" else
                       "More sectors per request: the lanes of a warp touch addresses that are not "
                       "consecutive, so the access is not coalesced (notebook 01).")
    return out


def _compare_traces(report: Report, kernel, reference, shape: Shape, grid, block, right: bool,
                    races_to: Report | None = None) -> bool:
    """Trace ``kernel`` and the course's ``reference`` on one launch; report races (to ``races_to``
    where given) and memory costs (and, for a kernel already found wrong, nothing if the trace itself
    cannot run it)."""
    key = (id(reference), shape, tuple(grid), tuple(block))
    if key not in _REFERENCE_TRACES:
        _REFERENCE_TRACES[key] = trace_gemm(reference, shape, grid, block)
    ref = _REFERENCE_TRACES[key]
    try:
        mine = trace_gemm(kernel, shape, grid, block)
    except Exception as e:  # noqa: BLE001 - reported, the check goes on
        if not right:  # the shapes above already say what went wrong
            return False
        from course_lib.instruments import simulator_message  # noqa: PLC0415

        who, text = simulator_message(str(e))
        report.add(f"The trace stopped: {who}raised {type(e).__name__}: {_first_line(text)}")
        return False
    clean = True
    races = mine.races(limit=2)
    if races:
        clean = False
        to = report if races_to is None else races_to
        to.add("Races in shared memory (a barrier is missing; on a GPU the result can change "
               "from run to run):")
        for race in races:
            to.add(race.describe(), 4)
    want, got = _memory_costs(ref), _memory_costs(mine)
    report.add("Traced on one launch, per warp request (course = the course's kernel, where yours costs more):")
    reasons = []
    wide_shared = any(a["space"] == "shared" and a["itemsize"] > 4 for a in mine.arrays.values())
    for key, course in want.items():
        text, worse = _cost_text(key, got.get(key), course)
        clean = clean and not worse
        report.add(text, 4)
        mine_cost = got.get(key)
        if worse and mine_cost is not None:
            reasons += [r for r in _why_costlier(key, mine_cost, course, wide_shared) if r not in reasons]
    if right:  # for a wrong kernel the values come first: a costlier access may be the wrong index
        for r in reasons:
            report.add(r, 4)
    return clean


def _compiled(report: Report, kernel, reference, compile_reference: Callable[[], None]) -> None:
    """On a GPU: the registers and local memory (spills) per thread the compiler gave your kernel and
    the course's. (Without a GPU numba compiles nothing: the simulator runs the Python source.)"""
    from course_lib import backend  # noqa: PLC0415

    if not backend.get().is_gpu:
        return
    try:
        if not reference.overloads:  # not launched in this process yet: nothing compiled to read
            compile_reference()
        mine, course = (_resources(k) for k in (kernel, reference))
    except Exception as e:  # noqa: BLE001 - an optional extra: say why it is missing
        report.add(f"(the compiler's report could not be read: {type(e).__name__}: {_first_line(str(e))})")
        return
    report.add(f"Compiled for this GPU: {mine[0]} registers per thread, {mine[1]} bytes of local memory "
               f"(spills); the course's kernel: {course[0]} and {course[1]}.")


def _resources(kernel) -> tuple[int, int]:
    """(registers, local-memory bytes) per thread of a numba kernel's one compiled specialisation."""
    regs, local = kernel.get_regs_per_thread(), kernel.get_local_mem_per_thread()
    pick = (lambda v: max(v.values())) if isinstance(regs, dict) else (lambda v: v)
    return int(pick(regs)), int(pick(local))


def _source_notes(report: Report, kernel, args: Sequence | None = None) -> bool:
    """What the simulator lets pass but a GPU's compiler would not, or not as meant: a shared array's
    shape that is not made of constants (numba compiles only those, read from the source), and
    variables numba computes in float64 (a sum started as a Python number, or a term made float64;
    a float64 shared tile), decided by numba's own type inference for a launch with ``args``
    (:mod:`course_lib.instruments.numba_types`); where that cannot be run, a sum started as ``0.0`` in
    the source. True if nothing stops the kernel from compiling as meant."""
    import ast  # noqa: PLC0415

    from course_lib.instruments.numba_types import float64_locals  # noqa: PLC0415

    tree = source_tree(kernel)
    if tree is None:
        return True
    compiles = True
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "array"
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "shared" and node.args):
            shape = node.args[0]
            parts = shape.elts if isinstance(shape, ast.Tuple) else [shape]
            if any(not isinstance(p, (ast.Constant, ast.Name, ast.Attribute)) for p in parts):
                compiles = False
                report.add(f"On a GPU this kernel would not compile: numba needs a shared array's shape "
                           f"made of constants (numbers or global names), and `{ast.unparse(shape)}` holds "
                           f"an expression; write the number, or a global constant such as PAD = TILE + 1.")
    if compiles and args is not None:
        refused = _cuda_refusal(kernel, args)
        if refused:
            report.add(refused)
            return False
    wide = float64_locals(kernel, args) if args is not None and compiles else None
    if wide is None:
        wide = _started_as_float(tree)
    if wide:
        names = ", ".join(f"`{n}`" for n in wide)
        report.add(f"Not solved yet: numba computes {names} in float64 here, half speed or worse on a GPU and "
                   f"not the fp32 the course compares. A variable is float64 when it starts as a Python number "
                   f"(`acc = 0`, `0.0`, `float(0)`) and then takes float32 terms, or when a term is made float64 "
                   f"(`float64(x)`); a shared array is float64 when declared so. Start a sum as float32(0.0), "
                   f"and keep every term and tile float32.")
        compiles = False
    return compiles


def _cuda_refusal(kernel, args) -> str | None:
    """On the CPU backend, a sentence when numba's CUDA compiler refuses the kernel that the simulator
    ran (:mod:`course_lib.instruments.numba_cuda_front`), with what to write instead; else None. On a
    GPU numba has compiled it already."""
    from course_lib import backend  # noqa: PLC0415
    from course_lib.instruments.numba_cuda_front import cuda_compile_problem  # noqa: PLC0415

    if backend.get().is_gpu:
        return None
    problem = cuda_compile_problem(kernel, args)
    if not problem:
        return None
    lines = [ln.strip() for ln in problem.splitlines() if ln.strip()]
    said = next((ln for ln in lines if not ln.startswith(("Failed in ", "File ", "During:", "<source", ">>>", "- "))),
                lines[0])
    if "yield" in problem or "generator" in problem.lower():
        hint = ("a generator expression (`sum(... for k in ...)`) is not compiled for the GPU: write the loop "
                "out, adding into a float32 variable.")
    elif "NRT required" in problem or "reflected list" in problem or "build_list" in problem:
        hint = ("a Python list (or anything numba must allocate) cannot be made inside a kernel: use float32 "
                "variables, or cuda.local.array(n, float32).")
    else:
        hint = "the simulator runs any Python, but numba compiles only part of it for the GPU."
    return (f"Not solved yet: on a GPU this kernel would not compile. numba's CUDA compiler says: \"{said}\". "
            f"In short, {hint}")


def _started_as_float(tree) -> list[str]:
    """Local variables that a sum accumulates in (``acc += ...`` or ``acc = acc + ...``) and that
    start as a Python float (``0.0``, ``float(0)``), or as a Python int (``0``) where what is added
    reads an array (an element is float32, and int + float32 is float64 in numba; a counter that
    adds ints stays an int): read from the source, where numba's types cannot be had."""
    import ast  # noqa: PLC0415

    additions: dict[str, list] = {}  # variable -> what is added to it
    for n in ast.walk(tree):
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and isinstance(n.target, ast.Name):
            additions.setdefault(n.target.id, []).append(n.value)
        elif isinstance(n, ast.Assign) and isinstance(n.value, ast.BinOp) and isinstance(n.value.op, ast.Add):
            for t in n.targets:
                if isinstance(t, ast.Name) and any(isinstance(x, ast.Name) and x.id == t.id for x in ast.walk(n.value)):
                    additions.setdefault(t.id, []).append(n.value)

    def start(v) -> type | None:  # the Python type a variable starts as: int, float, or None (not a number)
        if isinstance(v, ast.Constant) and type(v.value) in (int, float):
            return type(v.value)
        if (isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in ("float", "int")
                and all(isinstance(x, ast.Constant) for x in v.args)):
            return float if v.func.id == "float" else int
        return None

    def reads_an_array(name: str) -> bool:
        return any(isinstance(x, ast.Subscript) for value in additions[name] for x in ast.walk(value))

    # Only a local variable that is then summed into: `c[row, col] = 0.0` stores into C, whose
    # elements are float32 whatever Python value is stored.
    return [t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) and start(n.value) is not None
            for t in n.targets if isinstance(t, ast.Name) and t.id in additions
            and (start(n.value) is float or reads_an_array(t.id))]
