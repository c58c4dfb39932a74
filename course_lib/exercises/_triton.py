"""Puzzles where you write a Triton kernel (notebook 04): what their checks share.

:class:`TritonPuzzle` checks a kernel that is not a GEMM (a vector add, the sums of a matrix's rows):
it runs the kernel through the course's wrapper on inputs of sizes you have not seen, each inside
guard regions (:mod:`course_lib.instruments.guard`: on the CPU backend Triton's interpreter names
every load or store outside the arrays), its output poisoned with NaN, and compares with a float64
reference within what rounding explains. :class:`TritonGemmPuzzle` checks a GEMM kernel with ``course_lib.check``'s
:func:`~course_lib.correctness.check_one`, case by case, and reads from the kernel's source which
precision its ``tl.dot`` asks for (Triton's interpreter multiplies in fp32 whatever it is told; a
GPU does not).

A kernel that takes strides must work for any strides, so some cases hand an operand over as a
view that is not row-major (:func:`place`): stored transposed, or a column slice of a wider matrix.

Both report every case that went wrong and why, then a *diagnosis*: a note that names the likely
mistake from which cases failed (only sizes that are not a multiple of the block: the tail; only the
operands that are not row-major: the strides) or how (one element past the end every time: off by
one). A diagnosis reads what each case found as data (:class:`CaseResult`, or for a GEMM the
:class:`~course_lib.correctness.Failure` of ``check_one``), never the sentences printed for it. The
inputs come from fixed seeds, so a check says the same thing on every run.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import inspect
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np
import torch

from course_lib import backend, dtypes, learn
from course_lib.exercises import Puzzle, Report, _first_line, nothing_yet, source_tree
from course_lib.instruments import guard, patches
from course_lib.learn import Verdict

patches.keep_triton_language_as_imported()  # as course_lib.kernels.coalescing_and_triton.common does

# {case: what was found wrong with it (a CaseResult, or a GEMM's Failure), false where it was right}
# -> a note naming the likely mistake, or None
Diagnosis = Callable[[dict], "str | None"]

SEED = 2024  # case i draws its inputs from SEED + i: the same hidden inputs on every run


def fails_exactly_where(applies: Callable[[Any], bool], note: str) -> Diagnosis:
    """A diagnosis: ``note`` when the cases that failed are exactly those for which ``applies`` is
    true (say, the sizes that are not a multiple of the block)."""
    def diagnose(results: dict) -> str | None:
        failing = {case for case, why in results.items() if why}
        return note if failing and failing == {case for case in results if applies(case)} else None

    return diagnose


def fails_every_time(found: Callable[[Any], bool], note: str) -> Diagnosis:
    """A diagnosis: ``note`` when what every failing case found satisfies ``found`` (say, one element
    read past the end of an array: :meth:`CaseResult.one_past_the_end`)."""
    def diagnose(results: dict) -> str | None:
        failing = [result for result in results.values() if result]
        return note if failing and all(found(result) for result in failing) else None

    return diagnose


def fails_only_where(applies: Callable[[Any], bool], note: str) -> Diagnosis:
    """A diagnosis: ``note`` when every case that failed is one for which ``applies`` is true."""
    def diagnose(results: dict) -> str | None:
        failing = [case for case, why in results.items() if why]
        return note if failing and all(applies(case) for case in failing) else None

    return diagnose


def fails_exactly_above(value: Callable[[Any], int], note: Callable[[int], str]) -> Diagnosis:
    """A diagnosis: ``note(largest)`` when the cases that failed are exactly those whose ``value``
    (say, K) is larger than ``largest``, the largest value of a case that was right (a loop that
    stops early)."""
    def diagnose(results: dict) -> str | None:
        failing = {case for case, why in results.items() if why}
        right = [value(case) for case, why in results.items() if not why]
        if not failing or not right:
            return None
        largest = max(right)
        return note(largest) if failing == {case for case in results if value(case) > largest} else None

    return diagnose


def fails_only_strided(note: Callable[[list[str]], str]) -> Diagnosis:
    """A diagnosis for :class:`GemmCase` results: ``note(operands)`` when every case that failed has
    an operand that is not row-major, naming those whose strides were not followed (the operands of
    the failing cases that are never right when laid out otherwise)."""
    def diagnose(results: dict) -> str | None:
        failing = [case for case, why in results.items() if why]
        if not failing or not all(case.strided for case in failing):
            return None
        fine = {x for case, why in results.items() if not why for x in case.strided}
        suspects = sorted({x for case in failing for x in case.strided})
        return note([x for x in suspects if x not in fine] or suspects)

    return diagnose


def _diagnose(diagnoses: Sequence[Diagnosis], results: dict) -> str | None:
    for diagnose in diagnoses:  # the most specific first: one note is enough
        note = diagnose(results)
        if note:
            return note
    return None


def _strays(violations: Sequence[guard.Violation], whole: set[str]) -> list[str]:
    """The guard's findings in words without the arrays' sizes (each case's line shows them), and the
    same stray access to several arrays in one sentence: "read 3 elements past the end of x and of y".
    The arrays of ``whole`` keep their own sentence, size included (the wider matrix a slice is cut
    from: no case's line shows its size), as do a changed guard region and a changed operand."""
    merged: dict[tuple[str, ...], list[str]] = {}
    for v in violations:
        if v.array in whole or not v.side:
            merged.setdefault((v.describe(),), [])
        else:
            merged.setdefault((v.verb, v.count_text, v.side_text), []).append(v.array + v.reach_text)
    return [key[0] if len(key) == 1 else f"{' '.join(key)} {' and of '.join(arrays)}" for key, arrays in merged.items()]


@dataclass(frozen=True)
class CaseResult:
    """What one case of a :class:`TritonPuzzle` found: ``text``, the sentence the report prints (""
    where the case was right: the result is then false), and what it rests on, for the diagnoses."""

    text: str = ""
    violations: tuple[guard.Violation, ...] = ()
    elements: int = 0  # elements of the output
    non_finite: int = 0  # of them, NaN or infinite after the run
    never_written: int = 0  # of those, the ones the report says were never written (0 if it does not)

    def __bool__(self) -> bool:
        return bool(self.text)

    @property
    def untouched(self) -> bool:
        """The output left as it was filled (NaN everywhere) and nothing else happened: not begun."""
        return bool(self.elements) and self.non_finite == self.elements and not self.violations

    @property
    def one_past_the_end(self) -> bool:
        """One element past the end of an array: read (Triton's interpreter names reads), or written
        into the memory around it (on a GPU only a write shows)."""
        return any(v.elements == 1 and (v.kind, v.side) in (("read", "after"), ("write", ""))
                   for v in self.violations)


# ---- how a case lays an operand out in memory ---------------------------------------------------
# The course's wrappers pass strides as they are, so a kernel that ignores them (row r at r * C
# instead of r * stride) is right on row-major matrices only. Some cases therefore hand a matrix over
# as a view whose rows are not packed one after another.
ROW_MAJOR = ""
TRANSPOSED = "stored transposed"  # the view .t() of a row-major copy of its transpose: strides (1, rows)
COLUMN_SLICE = "a column slice"  # columns of a wider row-major matrix: strides (columns + margins, 1)
SLICE_MARGINS = (3, 5)  # the wider matrix's columns before and after the slice


def place(g: guard.Guard, t: torch.Tensor, name: str, layout: str = ROW_MAJOR) -> torch.Tensor:
    """Matrix ``t`` inside ``g``'s guarded buffers (:meth:`course_lib.instruments.guard.Guard.place`),
    laid out as ``layout``: the same values with other strides. The guard names the array that holds
    them (:func:`stored_name`: "Aᵀ", stored row-major, for A stored transposed). The columns beside a
    slice hold :data:`course_lib.instruments.guard.INPUT_GUARD`, so a kernel that reads them computes
    from a value that shows."""
    if layout == ROW_MAJOR:
        return g.place(t, name)
    if layout == TRANSPOSED:
        return g.place(t.t().contiguous(), stored_name(name, layout)).t()
    if layout == COLUMN_SLICE:
        before, after = SLICE_MARGINS
        rows, cols = t.shape
        wide = torch.full((rows, before + cols + after), guard.INPUT_GUARD, dtype=t.dtype, device=t.device)
        wide[:, before:before + cols] = t
        return g.place(wide, stored_name(name, layout))[:, before:before + cols]
    raise ValueError(f"unknown layout {layout!r}")


def stored_name(name: str, layout: str) -> str:
    """What the guard calls the array that holds matrix ``name`` laid out as ``layout`` (another name
    than the row-major copy ``course_lib.check`` places, so that each array's accesses are its own)."""
    return {ROW_MAJOR: name, TRANSPOSED: f"{name}ᵀ", COLUMN_SLICE: f"the matrix {name} is a slice of"}[layout]


def strides(rows: int, cols: int, layout: str) -> tuple[int, int]:
    """The strides (elements to the next row, to the next column) of a rows x cols matrix laid out
    as ``layout`` by :func:`place`."""
    if layout == TRANSPOSED:
        return 1, rows
    if layout == COLUMN_SLICE:
        return sum(SLICE_MARGINS) + cols, 1
    return cols, 1


def layout_text(name: str, rows: int, cols: int, layout: str) -> str:
    """``"A stored transposed, strides (1, 33)"``; "" for a row-major matrix."""
    return f"{name} {layout}, strides {strides(rows, cols, layout)}" if layout else ""


class GemmCase(NamedTuple):
    """One hidden case of a GEMM puzzle: the shape, and how A (M x K), B (K x N) and C (M x N) lie in
    memory (:data:`ROW_MAJOR`, :data:`TRANSPOSED` or :data:`COLUMN_SLICE`; C is never a slice);
    ``blocks``, where given, the launch's (BLOCK_M, BLOCK_N, BLOCK_K) instead of the puzzle's own."""

    M: int
    N: int
    K: int
    a: str = ROW_MAJOR
    b: str = ROW_MAJOR
    c: str = ROW_MAJOR
    blocks: tuple[int, int, int] | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.M, self.N, self.K

    @property
    def strided(self) -> tuple[str, ...]:
        """The operands that are not row-major."""
        return tuple(name for name, layout in zip("ABC", (self.a, self.b, self.c)) if layout)

    def __str__(self) -> str:
        dims = {"A": (self.M, self.K, self.a), "B": (self.K, self.N, self.b), "C": (self.M, self.N, self.c)}
        blocks = [f"launched with BLOCK_M, BLOCK_N, BLOCK_K = {', '.join(map(str, self.blocks))}"] if self.blocks else []
        return ", ".join([str(self.shape)] + [layout_text(n, *d) for n, d in dims.items() if d[2]] + blocks)


class _DidNotRun(Exception):
    pass


def _did_not_run(where: str, e: Exception) -> str:
    """The message for a kernel that raised, with a hint where the error has a usual cause."""
    text = f"Not solved yet: on {where} your kernel did not run: {e}"
    if "make_shape_compatible" in str(e):  # two blocks of different shapes in one operation
        text += (" Two blocks of different shapes met in one operation. Check the axis of each tl.sum "
                 "(axis=0 sums down the columns, leaving one value per column; axis=1 one per row), and that "
                 "a 2-D mask or offset combines rows[:, None] with cols[None, :].")
    return text


@dataclass(frozen=True)
class TritonPuzzle(Puzzle):
    """A puzzle where you write a Triton kernel that is not a GEMM.

    ``check(kernel)`` calls ``launch(kernel, *inputs)`` (the course's wrapper with your kernel in it;
    it allocates the output with ``course_lib.gemm.new_array``) for every case of ``cases``, on the
    named inputs ``inputs(case, generator)`` (CPU tensors, moved to the backend's device), and
    compares the output with ``expected(*inputs)`` (what it must be, in float64) element by element
    within ``bound(case, expected, *inputs)``, the error rounding can explain. The inputs' guard regions hold
    :data:`course_lib.instruments.guard.INPUT_GUARD`, so on a GPU what a kernel computes from them shows.
    ``layouts(case)`` names the inputs that the case hands over in another layout than row-major
    (:func:`place`): ``{"x": TRANSPOSED}``. ``launch_options(case)``, where given, the keyword
    arguments of that case's launch (``{"block": 64}``: a case launched with other block sizes than
    the puzzle's, so that a kernel with a block size written as a number, or one block's name where
    another belongs, is wrong there)."""

    title: str
    launch: Callable
    inputs: Callable[[Any, torch.Generator], dict]
    expected: Callable[..., torch.Tensor]  # the output the inputs must give, in float64 (not a kernel)
    bound: Callable[..., torch.Tensor]
    cases: Sequence
    show: Callable[[Any], str]  # how one case reads in a message: "n = 129"
    unit: str = "sizes"  # what the cases are, in the report's first line
    output: str = "out"  # the name the wrapper gives its output
    diagnoses: Sequence[Diagnosis] = ()
    reveal: Any = None
    layouts: Callable[[Any], dict] | None = None
    launch_options: Callable[[Any], dict] | None = None
    precision: str | None = None  # what every tl.dot of the kernel must ask for, as TritonGemmPuzzle's

    def check(self, kernel) -> Verdict:
        if nothing_yet(self.title, kernel, "kernel"):
            return Verdict(False)
        cases = list(self.cases)
        report = Report(f"{self.title}, checked on {len(cases)} {self.unit} you have not seen:")
        results = {}
        recorded = _FirstLaunch(kernel)
        for i, case in enumerate(cases):
            try:
                results[case] = self._run(recorded, case, SEED + i)
            except _DidNotRun as e:
                report.add(_did_not_run(self.show(case), e))
                return report.show()
        if all(results[case].untouched for case in cases):
            report.add(f"Not solved yet: on every {self.unit.removesuffix('s')} {self.output} was never "
                       "written (every element still holds the NaN it was filled with). Fill in the TODO "
                       "lines.")
            return report.show()
        wrong = [case for case in cases if results[case]]
        precision = precision_notes(kernel, self.precision, "this puzzle") if self.precision else []
        if not wrong and (refused := gpu_compile_problem(recorded)):
            report.add(f"right on all {len(cases)} {self.unit}")
            report.add(refused)
            report.add("Right on every case here, but not solved yet: see the note above.", 0)
            return report.show()
        if not wrong and precision:
            report.add(f"right on all {len(cases)} {self.unit}")
            for note in precision:
                report.add(note)
            report.add("Right on every case here, but not solved yet: see the note above.", 0)
            return report.show()
        if not wrong:
            names = [*self.inputs(cases[0], torch.Generator().manual_seed(SEED)), self.output]
            report.add(f"Solved: right on all {len(cases)} {self.unit}, and nothing was read or written "
                       f"outside {', '.join(names[:-1])} and {names[-1]}.", 0)
            report.solved = True
            return report.show()
        note = _bf16_on_the_interpreter(kernel) or _diagnose(self.diagnoses, results)
        if note:  # the likely cause first: the list of cases below it can be long
            report.add(note)
        report.add(f"right on {len(cases) - len(wrong)} of {len(cases)} {self.unit}; wrong on these:")
        for case in wrong:
            report.add(f"{self.show(case)}: {results[case].text}", 4)
        for note in precision:
            report.add(note)
        return report.show()

    def _run(self, kernel, case, seed: int) -> CaseResult:
        """What was wrong with the output of one case (a false result if nothing)."""
        gen = torch.Generator().manual_seed(seed)
        device = backend.get().torch_device
        inputs = {name: t.to(device) for name, t in self.inputs(case, gen).items()}
        gpu = backend.get().is_gpu
        with guard.guarded() as g:
            layouts = self.layouts(case) if self.layouts else {}
            placed = [place(g, t, name, layouts.get(name, ROW_MAJOR)) for name, t in inputs.items()]
            try:
                out = self.launch(kernel, *placed, **(self.launch_options(case) if self.launch_options else {}))
            except Exception as e:  # noqa: BLE001 - the learner's kernel may fail to compile or run
                raise _DidNotRun(f"it raised {type(e).__name__}: {_first_line(str(e))}") from None
            violations = tuple(g.violations())
            undefined = g.undefined_note()
        stray = _strays(violations, {stored_name(name, COLUMN_SLICE) for name in inputs})
        ref = self.expected(*(t.double().cpu() for t in inputs.values()))
        unwritten = guard.never_written(out.detach().cpu())
        got = out.detach().double().cpu()
        problems = list(stray)
        bad = ~torch.isfinite(got)
        n_bad, n = int(bad.sum()), got.numel()
        never = 0
        outside = (got.abs() >= guard.INPUT_GUARD / 2) & ~bad if gpu else torch.zeros_like(bad)
        if bool(outside.any()):
            names = " and ".join(inputs)
            problems.append(f"so {int(outside.sum())} of {n} elements of {self.output} were computed from "
                            f"memory outside {names} (which holds {guard.INPUT_GUARD:.0f} during the check; "
                            "on a GPU a read outside an array raises no error)")
        elif n_bad:
            first = self._at(int(torch.nonzero(bad.reshape(-1))[0]), got.shape)
            computed = bad & ~unwritten  # NaN the kernel wrote, not the poison left in place
            if undefined and bool(computed.any()):
                problems.append(f"{n_bad} of {n} elements of {self.output} are NaN (first {first}): {undefined}")
            else:
                never = n_bad
                problems.append(f"never wrote {n_bad} of {n} elements of {self.output} (first {first}: still "
                                "the NaN it was filled with)")
        else:
            bound = self.bound(case, ref, *(t.double().cpu() for t in inputs.values()))
            excess = (got - ref).abs() / (bound + 1e-300)
            if bool((excess > 1).any()):
                k = int((excess > 1).sum())
                flat = int(torch.argmax(excess))
                worst = self._at(flat, got.shape)
                problems.append(f"{k} of {n} elements wrong, worst {worst} = "
                                f"{got.reshape(-1)[flat].item():.6g}, expected {ref.reshape(-1)[flat].item():.6g}")
        return CaseResult("; ".join(problems), violations, n, n_bad, never)

    def _at(self, flat: int, shape) -> str:
        index = np.unravel_index(flat, tuple(shape))
        return f"{self.output}[{', '.join(str(int(i)) for i in index)}]"

    def solution(self):
        return learn.show_source(self.reveal)

    @property
    def solved_by(self):
        return self.reveal


@dataclass(frozen=True)
class TritonGemmPuzzle(Puzzle):
    """A puzzle where you write a Triton GEMM kernel; ``launch(kernel, c_layout)`` makes it a GEMM
    ``fn(a, b) -> c`` (the course's wrapper, which allocates C with ``new_array``, laid out as
    ``c_layout``), which ``course_lib.check``'s :func:`~course_lib.correctness.check_one` runs on
    every case of ``cases`` (a :class:`GemmCase`, or a shape (M, N, K) for row-major operands): fresh
    inputs from fixed seeds, NaN-poisoned C, guard regions around A, B and C, A and B laid out as the
    case says. Every wrong case is listed, then the first diagnosis that recognises the pattern.

    ``precision``: the ``input_precision`` every ``tl.dot`` of the kernel must ask for, read from its
    source (:func:`dot_precisions`); Triton's interpreter multiplies fp32 in fp32 whatever it is
    asked, so on the CPU only the source can show that a GPU would use TF32."""

    title: str
    launch: Callable[..., Callable]
    cases: Sequence
    diagnoses: Sequence[Diagnosis] = ()
    reveal: Any = None
    dtype: str = "fp32"
    precision: str | None = None

    def check(self, kernel) -> Verdict:
        if nothing_yet(self.title, kernel, "kernel"):
            return Verdict(False)
        cases = [GemmCase(*c) for c in self.cases]
        report = Report(f"{self.title}, checked on {len(cases)} shapes and layouts you have not seen:")
        failures, errors = {}, {}
        recorded = _FirstLaunch(kernel)
        for i, case in enumerate(cases):
            try:
                failures[case], errors[case] = self._run(recorded, case, SEED + i)
            except _DidNotRun as e:
                report.add(_did_not_run(str(case), e))
                return report.show()
        wrong = [case for case in cases if failures[case] is not None]
        precision = precision_notes(kernel, self.precision) if self.precision else []
        if not wrong and (refused := gpu_compile_problem(recorded)):
            precision = [refused, *precision]
        if len(wrong) == len(cases) and all(failures[case].untouched for case in cases):
            report.add("Not solved yet: on every shape C was never written (every element still "
                       "holds the NaN it was filled with). Fill in the TODO lines.")
            return report.show()
        if wrong:
            if bf16 := _bf16_on_the_interpreter(kernel):
                report.add(bf16)
            elif not any(failures[case].undefined_loads for case in wrong):  # that note says it all
                note = _diagnose(self.diagnoses, failures)
                if not note and not precision:  # a tl.dot in TF32 errs like this on a GPU: said below
                    note = _rounding_note(kernel, failures, errors)
                if note:  # the likely cause first: the list of cases below it is long
                    report.add(note)
            report.add(f"right on {len(cases) - len(wrong)} of {len(cases)} cases; wrong on these:")
            notes: list[str] = []
            for case in wrong:  # a note reads the same at every case: said once, below them
                f = failures[case]
                report.add(f"{case}: {f.finding}", 4)
                if f.note and f.note not in notes:
                    notes.append(f.note)
            for note in notes:
                report.add(note[0].upper() + note[1:] + ".", 4)
        else:
            report.add(f"right on all {len(cases)} cases")
        for note in precision:
            report.add(note)
        if not wrong and not precision:
            report.solved = True
            exact = ", and tl.dot multiplies in exact fp32" if self.precision == "ieee" else ""
            report.add("Solved: right on every shape and layout (the edges of C, the K tail, operands "
                       "stored transposed or sliced), nothing was read or written outside A, B and "
                       f"C{exact}.", 0)
        elif not wrong:
            report.add("Right on every case here, but not solved yet: see the note above.", 0)
        return report.show()

    def _run(self, kernel, case: GemmCase, seed: int):
        """(what ``check_one`` found wrong, a :class:`~course_lib.correctness.Failure`, or None; the
        relative error of C where it is finite)."""
        from course_lib.correctness import CheckFailure, check_one  # noqa: PLC0415 - check imports kernels

        gemm = self.launch(kernel, case.c, **({"block": case.blocks} if case.blocks else {}))
        seen: dict[str, torch.Tensor] = {}

        def fn(a, b):
            g = guard.active()  # check_one's: A and B are row-major in it; lay them out as the case says
            seen["a"] = place(g, a, "A", case.a) if case.a else a
            seen["b"] = place(g, b, "B", case.b) if case.b else b
            seen["c"] = gemm(seen["a"], seen["b"])
            return seen["c"]

        label = getattr(gemm, "__name__", "kernel")
        try:
            check_one(fn, case.shape, self.dtype, seed=seed, label=label)
            return None, None
        except CheckFailure as f:
            failure = f.failures[0]
        except Exception as e:  # noqa: BLE001 - the learner's kernel may fail to compile or run
            raise _DidNotRun(f"it raised {type(e).__name__}: {_first_line(str(e))}") from None
        c = seen.get("c")
        if not isinstance(c, torch.Tensor) or c.shape != (case.M, case.N) or not bool(torch.isfinite(c).all()):
            return failure, None
        ref = seen["a"].double().cpu() @ seen["b"].double().cpu()
        return failure, float(torch.linalg.norm(c.double().cpu() - ref) / torch.linalg.norm(ref).clamp_min(1e-300))

    def solution(self):
        return learn.show_source(self.reveal)

    @property
    def solved_by(self):
        return self.reveal


# Relative errors of an fp32 GEMM at the puzzles' sizes stay near 1e-7; rounding to a 16-bit type (or
# TF32) somewhere gives 1e-4 to 1e-3, wrong elements of any other kind give far more.
_ROUNDING_ERRORS = (1e-6, 1e-2)


def _rounding_note(kernel, failures: dict, errors: dict) -> str | None:
    """A note for a kernel that is wrong on every case by a little, as a narrower type's rounding is."""
    rels = [errors.get(case) for case in failures]
    if not rels or any(f is None or f.stray for f in failures.values()):
        return None
    if any(r is None or not _ROUNDING_ERRORS[0] < r < _ROUNDING_ERRORS[1] for r in rels):
        return None
    named = sorted(_narrow_types(kernel))
    where = (f" Your kernel names {' and '.join(named)}: keep the loaded blocks and acc in tl.float32."
             if named else " Keep the loaded blocks and acc in tl.float32.")
    return (f"Wrong on every case by a little: relative errors from {min(rels):.0e} to {max(rels):.0e}, "
            "where exact fp32 stays near 1e-7. That is the rounding of a type narrower than fp32 (fp16 "
            "or bf16 inputs or sums; on a GPU also TF32 inside tl.dot)." + where)


def _bf16_on_the_interpreter(kernel) -> str | None:
    """On the CPU backend, a note for a kernel that names tl.bfloat16: Triton's interpreter computes
    with NumPy, which has no bfloat16, and a tl.dot on bf16 blocks gives numbers far off (1e8 and more
    where the answer is near 1, seen with Triton 3.7.1's interpreter), which read like wrong indexing.
    None on a GPU, or where the kernel names no bf16."""
    if backend.get().is_gpu or "tl.bfloat16" not in _narrow_types(kernel):
        return None
    return ("Your kernel names tl.bfloat16. Triton's interpreter on this CPU has no bf16 arithmetic (it "
            "computes with NumPy, which has no such type), so what it gives for bf16 blocks is far off "
            "and says nothing about your indexing; on a GPU bf16 would keep 8 bits of each input, far "
            "coarser than fp32. Keep the loaded blocks and acc in tl.float32.")


def _narrow_types(kernel) -> set[str]:
    """The 16-bit float types a kernel's source names (tl.float16, tl.bfloat16, ...)."""
    tree = source_tree(kernel)
    names = {"float16", "bfloat16", "fp16", "bf16", "half"}
    if tree is None:
        return set()
    return {f"tl.{node.attr}" for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr in names}


# ---- what a GPU's Triton makes of the kernel ------------------------------------------------------
# Triton's interpreter (the CPU backend) runs a kernel's body as Python, so it also runs what Triton's
# compiler refuses: `break`, a plain Python function called inside the kernel, a variable that changes
# type in a loop (acc = 0.0, then acc += a block), a noinline helper given a block. On the CPU backend a check therefore also
# gives the kernel, with the arguments of its first launch, to the compiler's front end (Python to
# Triton IR, for sm_90; what Triton's JIT does first on a GPU; milliseconds, no GPU needed).
class _FirstLaunch:
    """A kernel that remembers the arguments of its first launch ``kernel[grid](*args, **kwargs)``;
    everything else is the kernel's."""

    def __init__(self, kernel) -> None:
        self.kernel, self.launched = kernel, None

    def __getattr__(self, name):
        return getattr(self.kernel, name)

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def run(*args, **kwargs):
            if self.launched is None:
                self.launched = (args, kwargs)
            return launch(*args, **kwargs)

        return run


def _jit_copy(kernel, memo: dict, modules: dict):
    """A ``JITFunction`` of an interpreted kernel's Python function (with the options its @triton.jit
    gave, noinline=True and the like), with the interpreted ``@triton.jit`` functions its globals name
    made JIT functions alike (the interpreter leaves no JIT function to compile). The modules its
    globals name (and its helpers') go into ``modules``, for :func:`_jit_functions_of`."""
    import types  # noqa: PLC0415

    from triton.runtime.interpreter import InterpretedFunction  # noqa: PLC0415
    from triton.runtime.jit import JITFunction  # noqa: PLC0415

    fn = kernel.fn
    if id(fn) in memo:
        return memo[id(fn)]
    names = dict(fn.__globals__)
    copy = types.FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__, copy.__annotations__ = fn.__kwdefaults__, dict(fn.__annotations__)
    copy.__module__, copy.__qualname__, copy.__doc__ = fn.__module__, fn.__qualname__, fn.__doc__
    options = set(inspect.signature(JITFunction.__init__).parameters) - {"self", "fn"}
    memo[id(fn)] = jit = JITFunction(copy, **{k: v for k, v in getattr(kernel, "kwargs", {}).items() if k in options})
    for name, value in list(names.items()):
        if isinstance(value, InterpretedFunction):
            names[name] = _jit_copy(value, memo, modules)
        elif inspect.ismodule(value):
            modules[id(value)] = value
    return jit


@contextlib.contextmanager
def _jit_functions_of(modules: dict, memo: dict):
    """Within this block the @triton.jit functions that the interpreter made interpreted functions at
    import are JIT functions, as the compiler needs: triton.language's (tl.sum, tl.cdiv, ...), the
    tensor methods that call them (x.sum(axis=0)), and those of ``modules`` (a learner's helpers
    reached as ``helpers.f``)."""
    import triton.language as tl  # noqa: PLC0415
    from triton.runtime.interpreter import InterpretedFunction  # noqa: PLC0415

    undo = []  # (namespace or cell, name or None, value) to put back
    try:
        for module in (tl, tl.standard, tl.core, tl.math, *modules.values()):
            for name, value in list(vars(module).items()):
                if isinstance(value, InterpretedFunction):
                    undo.append((module, name, value))
                    setattr(module, name, _jit_copy(value, memo, {}))
        # tl.core._tensor_member_fn sets a JIT function itself as a tensor's method (x.sum), an
        # interpreted one inside a wrapper (its closure's cell): the method becomes the JIT copy.
        for name, method in list(vars(tl.tensor).items()):
            inner = [c.cell_contents for c in getattr(method, "__closure__", None) or ()
                     if isinstance(c.cell_contents, InterpretedFunction)]
            if len(inner) == 1:
                undo.append((tl.tensor, name, method))
                setattr(tl.tensor, name, _jit_copy(inner[0], memo, {}))
        yield
    finally:
        for where, name, value in reversed(undo):
            setattr(where, name, value)


# What the front end's message means for a learner, by a piece of its text.
_COMPILER_HINTS = (
    ("_semantic", "A kernel may call only tl.* functions and @triton.jit functions: a plain Python "
                  "function runs on the host, not in a kernel."),
    ("Break", "Triton has no break in a kernel: give the loop the bound it needs (range(start, stop, "
              "step)), or mask what lies past it."),
    ("Loop-carried variable", "A variable changes type in the loop: start it as the block it becomes, "
                              "e.g. acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), not acc = 0.0."),
)


def gpu_compile_problem(recorded: _FirstLaunch) -> str | None:
    """On the CPU backend, why Triton's compiler front end (for sm_90) refuses the kernel as it was
    first launched, or None: on a GPU (its JIT compiled the kernel already), where the kernel was
    never launched through ``kernel[grid]``, where it is no interpreted Triton kernel, or where the
    front end accepts it. Its own failures (the machinery, not the kernel) give None."""
    from triton.runtime.interpreter import InterpretedFunction  # noqa: PLC0415

    if backend.get().is_gpu or recorded.launched is None or not isinstance(recorded.kernel, InterpretedFunction):
        return None
    from triton._C.libtriton import ir  # noqa: PLC0415
    from triton.backends.compiler import GPUTarget  # noqa: PLC0415
    from triton.compiler import ASTSource, make_backend  # noqa: PLC0415
    from triton.compiler.errors import CompilationError  # noqa: PLC0415
    from triton.runtime.jit import create_function_from_signature  # noqa: PLC0415

    args, kwargs = recorded.launched
    memo, modules = {}, {}
    try:  # the steps of JITFunction.run (Triton 3.6 and 3.7) up to the front end
        fn = _jit_copy(recorded.kernel, memo, modules)
        target = GPUTarget("cuda", 90, 32)
        compiler = make_backend(target)
        options = dict(kwargs) | {"debug": False}
        bound, specialization, opts = create_function_from_signature(fn.signature, fn.params, compiler)(*args, **options)
        opts, signature, constexprs, attrs = fn._pack_args(compiler, options, bound, specialization, opts)
        source = ASTSource(fn, signature, constexprs, attrs)
        context = ir.context()
        ir.load_dialects(context)
        compiler.load_dialects(context)
    except Exception:  # noqa: BLE001 - the machinery's failure is no finding about the kernel
        return None
    try:
        with patches.triton_language_as_imported() as as_imported, _jit_functions_of(modules, memo):
            if not as_imported:  # the language may hold the interpreter's versions: no finding
                return None
            source.make_ir(target, opts, compiler.get_codegen_implementation(opts), compiler.get_module_map(), context)
        return None
    except CompilationError as e:
        said = [line.strip() for line in str(e).splitlines() if line.strip()]
        reason = said[-1] if said else type(e).__name__
    except Exception as e:  # noqa: BLE001 - the front end raises others too (an assertion, a type error)
        reason = f"{type(e).__name__}: {_first_line(str(e))}"
    hint = next((h for key, h in _COMPILER_HINTS if key in reason), "")
    return (f"Triton's interpreter runs your kernel as Python, and so ran it; but Triton's compiler, which "
            f"a GPU uses, refuses it: {reason}" + (f" {hint}" if hint else ""))


# ---- which precision tl.dot asks for --------------------------------------------------------------
# tl.dot(a, b, acc, input_precision, allow_tf32, ...): without either, fp32 inputs are multiplied in
# TF32 on every GPU with tensor cores (Triton's default, triton.language.dot); the interpreter
# multiplies in fp32 whatever it is asked.
_DEFAULT_PRECISION = "tf32"
_UNKNOWN = object()


def _unwrap(v: Any) -> Any:
    """The value a ``tl.constexpr`` holds; anything else as it is."""
    return v.value if type(v).__name__ == "constexpr" else v



@dataclass(frozen=True)
class _Scope:
    """What a name in a kernel's source can mean: its module's globals, the arguments a caller bound
    to the function's parameters (expressions in the caller's scope), the parameters' defaults."""

    globals: dict
    bound: dict
    defaults: dict


def _value(node: ast.AST, scope: _Scope) -> Any:
    """The value of a constant expression of a kernel's source, or _UNKNOWN."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in scope.bound:
            expr, caller = scope.bound[node.id]
            return _value(expr, caller)
        if node.id in scope.defaults:
            return _value(scope.defaults[node.id], _Scope(scope.globals, {}, {}))
        if node.id in scope.globals:
            return _unwrap(scope.globals[node.id])
        return getattr(builtins, node.id, _UNKNOWN)
    if isinstance(node, ast.Attribute):
        base = _value(node.value, scope)
        return _UNKNOWN if base is _UNKNOWN else getattr(base, node.attr, _UNKNOWN)
    return _UNKNOWN


def _scope_of(fn, tree: ast.Module, bound: dict) -> _Scope:
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    defaults = {}
    if defs:
        args = defs[0].args
        positional = args.posonlyargs + args.args
        defaults = {a.arg: d for a, d in zip(positional[len(positional) - len(args.defaults):], args.defaults)}
        defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
        # a local name given a constant once (P: tl.constexpr = "ieee"), read like a default
        assigned: dict[str, list] = {}
        for node in ast.walk(defs[0]):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AnnAssign, ast.AugAssign)) else []
            for target in targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(getattr(node, "value", None))
        defaults.update({name: values[0] for name, values in assigned.items()
                         if len(values) == 1 and isinstance(values[0], ast.Constant) and name not in defaults})
    return _Scope(getattr(fn, "__globals__", {}), bound, defaults)


def _asked_precision(call: ast.Call, scope: _Scope) -> tuple[str | None, str]:
    """(the precision a tl.dot call asks a GPU for with fp32 inputs, or None where the check cannot
    read it; how: "input_precision", "allow_tf32" or "default", Triton's choice)."""
    exprs = {"input_precision": call.args[3] if len(call.args) > 3 else None,
             "allow_tf32": call.args[4] if len(call.args) > 4 else None}
    exprs.update({k.arg: k.value for k in call.keywords if k.arg in exprs})
    given = {}
    for name, expr in exprs.items():
        if expr is not None:
            v = _value(expr, scope)
            if v is _UNKNOWN:
                return None, name
            given[name] = _unwrap(v)
    precision, allow = given.get("input_precision"), given.get("allow_tf32")
    if precision is not None:  # Triton reads the name in any case ("IEEE" is "ieee")
        return (precision.lower() if isinstance(precision, str) else None), "input_precision"
    if allow is not None:
        return ("tf32" if allow else "ieee"), "allow_tf32"
    return _DEFAULT_PRECISION, "default"


def dot_precisions(kernel, *, _bound: dict | None = None, _depth: int = 0) -> list[tuple[str, str | None, str]] | None:
    """Each ``tl.dot`` call in a Triton kernel's source and in the ``@triton.jit`` functions it calls:
    (the call as written; the precision it asks a GPU for when A and B are fp32: "ieee", "tf32",
    "tf32x3", or None where the source does not say it in a way the check can read; how it asks:
    "input_precision", "allow_tf32", or "default" where it names neither). None if the source cannot
    be read."""
    from triton.runtime.jit import KernelInterface  # noqa: PLC0415 - Triton loads after the backend choice

    tree = source_tree(kernel)
    if tree is None:
        return None
    fn = getattr(kernel, "fn", kernel)
    scope = _scope_of(fn, tree, _bound or {})
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = _value(node.func, scope)
        is_dot = getattr(target, "__name__", None) == "dot" and "triton" in getattr(target, "__module__", "")
        if is_dot or (target is _UNKNOWN and isinstance(node.func, ast.Attribute) and node.func.attr == "dot"):
            found.append((ast.unparse(node), *_asked_precision(node, scope)))
        elif isinstance(target, KernelInterface) and hasattr(target, "fn") and _depth < 4:
            try:
                params = list(inspect.signature(target.fn).parameters)
            except (TypeError, ValueError):
                continue
            bound = {p: (arg, scope) for p, arg in zip(params, node.args)}
            bound.update({k.arg: (k.value, scope) for k in node.keywords if k.arg})
            found += dot_precisions(target, _bound=bound, _depth=_depth + 1) or []
    return found


_PRECISION_WORDS = {
    "tf32": "TF32 keeps 10 of the 23 mantissa bits of each input: relative errors around 1e-3 instead "
            "of 1e-6 in exact fp32, far beyond check's fp32 tolerance of {tolerance}",
    "tf32x3": "tf32x3 splits each input into TF32 parts and multiplies three times: close to fp32, but "
              "neither exact nor as fast as one pass",
}


def precision_notes(kernel, want: str = "ieee", what: str = "this GEMM") -> list[str]:
    """What a GPU would do with the kernel's ``tl.dot`` calls that do not ask for ``want``, one note
    per kind of call; [] if every call asks for it (or there is none). ``what`` must be exact."""
    calls = dot_precisions(kernel)
    if calls is None:
        return [f"(The check could not read your kernel's source, so it cannot tell whether tl.dot "
                f'asks for input_precision="{want}".)']
    cpu = "" if backend.get().is_gpu else (
        " Triton's interpreter multiplies in full fp32 whatever tl.dot is asked, so on this CPU the "
        "results cannot show it; on a GPU they would.")
    fix = f'Write input_precision="{want}" in the call: exact fp32, which {what} must compute.'
    tolerance = f"{dtypes.FP32.tolerance:.0e}".replace("e-0", "e-")
    notes = []
    for call, precision, how in calls:
        if precision == want:
            continue
        if precision is None:
            text = (f"The check cannot read which precision `{call}` asks for: its {how} is not a "
                    f"constant, or the name of one, that it can find. {fix}")
        elif precision == "tf32":
            asks = {"default": "names no input_precision, so on a GPU with tensor cores Triton multiplies "
                               "fp32 inputs in TF32",
                    "allow_tf32": 'says allow_tf32=True, the old name of input_precision="tf32": on a GPU '
                                  "with tensor cores it multiplies in TF32",
                    "input_precision": 'asks for input_precision="tf32": on a GPU with tensor cores it '
                                       "multiplies in TF32"}[how]
            text = f"`{call}` {asks}. {_PRECISION_WORDS['tf32'].format(tolerance=tolerance)}.{cpu} {fix}"
        else:
            words = _PRECISION_WORDS.get(precision, "that is not exact fp32")
            text = f'`{call}` asks for input_precision="{precision}": {words}.{cpu} {fix}'
        if text not in notes:
            notes.append(text)
    return notes
