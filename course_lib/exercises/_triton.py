"""Puzzles where you write a Triton kernel (notebook 04): what their checks share.

:class:`TritonPuzzle` checks a kernel that is not a GEMM (a vector add, the sums of a matrix's rows):
it runs the kernel through the course's wrapper on inputs of sizes you have not seen, each inside
guard regions (:mod:`course_lib.guard`: on the CPU backend Triton's interpreter names every load or
store outside the arrays), its output poisoned with NaN, and compares with a float64 reference within
what rounding explains. :class:`TritonGemmPuzzle` checks a GEMM kernel with ``course_lib.check``
(through :func:`course_lib.exercises._gemm_shapes`, as the numba puzzles do).

Both report every case that went wrong and why, then a *diagnosis*: a note that names the likely
mistake from which cases failed (only sizes that are not a multiple of the block: the tail) or how
(one element past the end every time: off by one). The inputs come from fixed seeds, so a check says
the same thing on every run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch

from course_lib import backend, guard, learn
from course_lib.exercises import Puzzle, Report, _first_line, _gemm_shapes, nothing_yet
from course_lib.learn import Verdict

# {case: what was wrong with it, or "" where it was right} -> a note naming the likely mistake, or None
Diagnosis = Callable[[dict], "str | None"]

SEED = 2024  # case i draws its inputs from SEED + i: the same hidden inputs on every run


def fails_exactly_where(applies: Callable[[Any], bool], note: str) -> Diagnosis:
    """A diagnosis: ``note`` when the cases that failed are exactly those for which ``applies`` is
    true (say, the sizes that are not a multiple of the block)."""
    def diagnose(results: dict) -> str | None:
        failing = {case for case, why in results.items() if why}
        return note if failing and failing == {case for case in results if applies(case)} else None

    return diagnose


def fails_every_time_with(texts: str | Sequence[str], note: str) -> Diagnosis:
    """A diagnosis: ``note`` when what every failing case says holds one of ``texts`` (e.g. "read 1
    element past the end": on the CPU backend the interpreter names reads, on a GPU only writes show)."""
    texts = (texts,) if isinstance(texts, str) else tuple(texts)

    def diagnose(results: dict) -> str | None:
        whys = [why for why in results.values() if why]
        return note if whys and all(any(t in why for t in texts) for why in whys) else None

    return diagnose


def fails_only_where(applies: Callable[[Any], bool], note: str) -> Diagnosis:
    """A diagnosis: ``note`` when every case that failed is one for which ``applies`` is true."""
    def diagnose(results: dict) -> str | None:
        failing = [case for case, why in results.items() if why]
        return note if failing and all(applies(case) for case in failing) else None

    return diagnose


def _diagnose(diagnoses: Sequence[Diagnosis], results: dict) -> str | None:
    for diagnose in diagnoses:  # the most specific first: one note is enough
        note = diagnose(results)
        if note:
            return note
    return None


_STRAY = re.compile(r"^(read|wrote) (.+?) (past the end of|before the start of) (\w+)"
                    r"( \(up to \d+ (?:beyond its last|before its first) element\))?, which is [\d x]+$")


def _strays(violations: Sequence[str]) -> list[str]:
    """The guard's sentences without the arrays' sizes (each case's line shows them), and the same
    stray access to several arrays in one sentence: "read 3 elements past the end of x and of y"."""
    merged: dict[tuple[str, str, str], list[str]] = {}
    out: list[str | tuple] = []
    for text in violations:
        m = _STRAY.match(text)
        if not m:
            out.append(text)
            continue
        key = m.groups()[:3]
        if key not in merged:
            merged[key] = []
            out.append(key)
        merged[key].append(m.group(4) + (m.group(5) or ""))
    return [x if isinstance(x, str) else f"{x[0]} {x[1]} {x[2]} {' and of '.join(merged[x])}" for x in out]


class _DidNotRun(Exception):
    pass


@dataclass(frozen=True)
class TritonPuzzle(Puzzle):
    """A puzzle where you write a Triton kernel that is not a GEMM.

    ``check(kernel)`` calls ``launch(kernel, *inputs)`` (the course's wrapper with your kernel in it;
    it allocates the output with ``course_lib.gemm.new_array``) for every case of ``cases``, on the
    named inputs ``inputs(case, generator)`` (CPU tensors, moved to the backend's device), and
    compares the output with ``reference(*inputs)`` (float64) element by element within
    ``bound(reference, *inputs)``, the error rounding can explain. The inputs' guard regions hold
    :data:`course_lib.guard.INPUT_GUARD`, so on a GPU what a kernel computes from them shows."""

    title: str
    launch: Callable
    inputs: Callable[[Any, torch.Generator], dict]
    reference: Callable[..., torch.Tensor]
    bound: Callable[..., torch.Tensor]
    cases: Sequence
    show: Callable[[Any], str]  # how one case reads in a message: "n = 129"
    unit: str = "sizes"  # what the cases are, in the report's first line
    output: str = "out"  # the name the wrapper gives its output
    diagnoses: Sequence[Diagnosis] = ()
    reveal: Any = None

    def check(self, kernel) -> Verdict:
        if nothing_yet(self.title, kernel, "kernel"):
            return Verdict(False)
        cases = list(self.cases)
        report = Report(f"{self.title}, checked on {len(cases)} {self.unit} you have not seen:")
        results, untouched = {}, 0
        for i, case in enumerate(cases):
            try:
                results[case], never_written = self._run(kernel, case, SEED + i)
            except _DidNotRun as e:
                report.add(f"Not solved yet: on {self.show(case)} your kernel did not run: {e}")
                return report.show()
            untouched += never_written
        if untouched == len(cases):
            report.add(f"Not solved yet: on every {self.unit.removesuffix('s')} {self.output} was never "
                       "written (every element still holds the NaN it was filled with). Fill in the TODO "
                       "lines.")
            return report.show()
        wrong = [case for case in cases if results[case]]
        if not wrong:
            names = [*self.inputs(cases[0], torch.Generator().manual_seed(SEED)), self.output]
            report.add(f"Solved: right on all {len(cases)} {self.unit}, and nothing was read or written "
                       f"outside {', '.join(names[:-1])} and {names[-1]}.", 0)
            report.solved = True
            return report.show()
        report.add(f"right on {len(cases) - len(wrong)} of {len(cases)} {self.unit}; wrong on these:")
        for case in wrong:
            report.add(f"{self.show(case)}: {results[case]}", 4)
        note = _diagnose(self.diagnoses, results)
        if note:
            report.add(note)
        return report.show()

    def _run(self, kernel, case, seed: int) -> tuple[str, bool]:
        """(what was wrong, "" if nothing; whether not one element of the output was written)."""
        gen = torch.Generator().manual_seed(seed)
        device = backend.get().torch_device
        inputs = {name: t.to(device) for name, t in self.inputs(case, gen).items()}
        gpu = backend.get().is_gpu
        with guard.guarded() as g:
            placed = [g.place(t, name) for name, t in inputs.items()]
            try:
                out = self.launch(kernel, *placed)
            except Exception as e:  # noqa: BLE001 - the learner's kernel may fail to compile or run
                raise _DidNotRun(f"it raised {type(e).__name__}: {_first_line(str(e))}") from None
            stray = _strays(g.violations())
            undefined = g.undefined_note()
        ref = self.reference(*(t.double().cpu() for t in inputs.values()))
        got = out.detach().double().cpu()
        problems = list(stray)
        bad = ~torch.isfinite(got)
        n_bad, n = int(bad.sum()), got.numel()
        outside = (got.abs() >= guard.INPUT_GUARD / 2) & ~bad if gpu else torch.zeros_like(bad)
        if bool(outside.any()):
            names = " and ".join(inputs)
            problems.append(f"so {int(outside.sum())} of {n} elements of {self.output} were computed from "
                            f"memory outside {names} (which holds {guard.INPUT_GUARD:.0f} during the check; "
                            "on a GPU a read outside an array raises no error)")
        elif n_bad:
            first = self._at(int(torch.nonzero(bad.reshape(-1))[0]), got.shape)
            problems.append(f"{n_bad} of {n} elements of {self.output} are NaN (first {first}): {undefined}"
                            if undefined else
                            f"never wrote {n_bad} of {n} elements of {self.output} (first {first}: still "
                            "the NaN it was filled with)")
        else:
            bound = self.bound(ref, *(t.double().cpu() for t in inputs.values()))
            excess = (got - ref).abs() / (bound + 1e-300)
            if bool((excess > 1).any()):
                k = int((excess > 1).sum())
                flat = int(torch.argmax(excess))
                worst = self._at(flat, got.shape)
                problems.append(f"{k} of {n} elements wrong, worst {worst} = "
                                f"{got.reshape(-1)[flat].item():.6g}, expected {ref.reshape(-1)[flat].item():.6g}")
        return "; ".join(problems), (n_bad == n and not stray)

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
    """A puzzle where you write a Triton GEMM kernel; ``launch(kernel)`` makes it a GEMM ``fn(a, b)
    -> c`` (the course's wrapper, which allocates C with ``new_output``), which ``course_lib.check``
    runs on every shape of ``shapes``: fresh inputs, NaN-poisoned C, guard regions around A, B and C.
    Every wrong shape is listed, then the first diagnosis that recognises the pattern."""

    title: str
    launch: Callable[[Any], Callable]
    shapes: Sequence[tuple[int, int, int]]
    diagnoses: Sequence[Diagnosis] = ()
    reveal: Any = None

    def check(self, kernel) -> Verdict:
        if nothing_yet(self.title, kernel, "kernel"):
            return Verdict(False)
        report = Report(f"{self.title}, checked on {len(self.shapes)} shapes you have not seen:")
        right, failures = _gemm_shapes(report, self.launch(kernel), self.shapes)
        if right is False:
            results = {tuple(s): "" for s in self.shapes}
            results.update({f.shape: f.why for f in failures})
            undefined = any("without other=" in f.why for f in failures)  # that note says it all
            note = None if undefined else _diagnose(self.diagnoses, results)
            if note:
                report.add(note)
        if right:
            report.solved = True
            report.add("Solved: right on every shape, the edges of C and the K tail included, and "
                       "nothing was read or written outside A, B and C.", 0)
        return report.show()

    def solution(self):
        return learn.show_source(self.reveal)

    @property
    def solved_by(self):
        return self.reveal
