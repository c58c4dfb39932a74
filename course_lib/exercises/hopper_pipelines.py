"""Exercises of notebook ``09_hopper_pipelines``: the ring's parity rule (you write it) and the
register budget of warp specialisation.

The parity rule is checked by playing it: :func:`course_lib.model.ring.ring_handshake` runs a
producer and its consumers over rings of several sizes with your rule, and the check reports the
first wait that never returns, slot read before its copy landed, or slot overwritten while still
being read. The register budget comes from the register arithmetic of ``setmaxnreg``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

from course_lib import learn
from course_lib.exercises import NumberQuestion, Puzzle, call_on_every_case, nothing_yet
from course_lib.learn import Verdict, say
from course_lib.model import ring

# ---- the puzzle: which parity each side of the ring waits for ---------------------------------------


def ring_parities(k: int, slots: int) -> tuple[int, int]:
    """The parities slice k waits for in a ring of ``slots`` slots: (the readers on full[s], the
    producer on empty[s]), s = k % slots."""
    use = k // slots                  # slice k is the slot's use number k // slots (0, 1, 2, ...)
    full = use % 2                    # use u's copy completes phase u of full[s]
    empty = (use - 1) % 2             # the copy needs the release of use u - 1: phase u - 1 of empty[s]
    return full, empty                # (for u = 0, parity 1: a fresh barrier lets it through at once)


class Play(NamedTuple):
    """One ring the check plays: its size and the model's timing (steps of the model, not cycles)."""

    slices: int
    slots: int
    copy_steps: int
    mma_steps: int
    consumers: int


# Rings of 1 to 8 slots, each over more than two laps, with copies slower and faster than the
# multiplies, one or two consumer warpgroups: a rule that holds only for one ring size (stage 3's 5),
# or only on the first laps (the last two rings go round six times and more), goes wrong in one of them.
PLAYS = (Play(7, 1, 2, 2, 1), Play(9, 2, 3, 2, 1), Play(10, 3, 1, 4, 2), Play(13, 4, 3, 2, 2),
         Play(17, 5, 2, 3, 2), Play(20, 6, 4, 1, 1), Play(45, 7, 2, 2, 2), Play(55, 8, 3, 2, 1))


def _both_from_slice(k, slots):
    return k % 2, (k % 2) ^ 1


def _full_from_slice(k, slots):
    return k % 2, ((k // slots) % 2) ^ 1


def _empty_from_slice(k, slots):
    return (k // slots) % 2, (k % 2) ^ 1


def _both_use(k, slots):
    return (k // slots) % 2, (k // slots) % 2


def _five_slots(k, slots):
    return (k // 5) % 2, ((k // 5) % 2) ^ 1


def _from_slot(k, slots):
    return (k % slots) % 2, ((k % slots) % 2) ^ 1


def _swapped(k, slots):
    return ((k // slots) % 2) ^ 1, (k // slots) % 2


def _first_lap_only(k, slots):
    return 0, 1


def _both_flipped(k, slots):
    return ((k // slots) % 2) ^ 1, ((k // slots) % 2) ^ 1


@dataclass(frozen=True)
class RingPuzzle(Puzzle):
    """A puzzle whose answer is a rule ``fn(k, slots) -> (full parity, empty parity)``, checked by
    playing the handshake of a ring with it (:func:`course_lib.model.ring.ring_handshake`) for every
    ring of ``plays``. A rule that agrees with one of the ``known_wrong`` rules on every slice played
    is told what that rule does wrong; any other wrong rule is told the first thing that went wrong."""

    title: str
    reference: Callable[[int, int], tuple[int, int]]
    plays: Sequence[Play]
    known_wrong: Sequence[tuple[Callable, str]] = ()
    reveal: Any = None

    def cases(self) -> list[tuple[int, int]]:
        """Every (slice, ring size) played, in a shuffled order (the same every time): a rule is a
        function of k and slots, and one that counts its own calls is told so by going wrong."""
        cases = list(dict.fromkeys((k, p.slots) for p in self.plays for k in range(p.slices)))
        random.Random(9).shuffle(cases)
        return cases

    def check(self, fn) -> Verdict:
        if nothing_yet(self.title, fn):
            return Verdict(False)
        cases = self.cases()
        got = call_on_every_case(self.title, fn, cases, lambda c: f"for slice {c[0]} of {_ring(c[1])}")
        if got is None:
            return Verdict(False)
        pairs = {}
        for (k, slots), value in got.items():
            pair = _as_pair(value)
            if pair is None:
                say(f"{self.title}: return a pair (full parity, empty parity); for slice {k} of {_ring(slots)} "
                    f"yours returns {value!r}.")
                return Verdict(False)
            if any(p not in (0, 1) for p in pair):
                say(f"{self.title}: a parity is one bit, 0 or 1 (a phase number mod 2); for slice {k} of "
                    f"{_ring(slots)} yours gives {learn.fmt(pair)}.")
                return Verdict(False)
            pairs[k, slots] = pair
        failed = []
        for play in self.plays:
            run = ring.ring_handshake(play.slices, play.slots, copy_steps=play.copy_steps, mma_steps=play.mma_steps,
                                      consumers=play.consumers, parities=lambda k, s: pairs[k, s],
                                      max_steps=8 * play.slices * max(play.copy_steps, play.mma_steps))
            if not run.ok:
                failed.append((play, run.problems[0]))
        differs = [c for c in cases if pairs[c] != tuple(self.reference(*c))]
        if not failed and not differs:
            sizes = sorted({p.slots for p in self.plays})
            say(f"{self.title}: solved — played on rings of {sizes[0]} to {sizes[-1]} slots, "
                f"{sum(p.slices for p in self.plays)} slices in all: every slice read after its copy landed, "
                "no slot refilled before its release, no wait left hanging.")
            return Verdict(True)
        for known, meaning in self.known_wrong:
            if all(pairs[c] == tuple(known(*c)) for c in cases):
                say(f"{self.title}: not yet — {meaning}")
                break
        else:
            if failed:
                say(f"{self.title}: not yet — {len(failed)} of the {len(self.plays)} rings went wrong.")
            else:  # every ring played through: the model and the kernels' rule disagree (never seen)
                k, slots = differs[0]
                say(f"{self.title}: not yet — every ring played through, but for slice {k} of {_ring(slots)} "
                    f"yours gives {learn.fmt(pairs[k, slots])}, not the kernels' rule.")
        for play, problem in failed[:2]:
            say(f"{_ring(play.slots)}, {play.slices} slices: {problem}", indent=2)
        return Verdict(False)

    def solution(self):
        return learn.show_source(self.reveal if self.reveal is not None else self.reference)


def _ring(slots: int) -> str:
    return f"a ring of {slots} slot{'s' if slots != 1 else ''}"


def _as_pair(value) -> tuple[int, int] | None:
    """``value`` as a pair of integers, or None if it is not two whole numbers: a tuple, a list, or a
    one-dimensional array or tensor of two elements (numpy's and torch's integers are whole numbers)."""
    if not (isinstance(value, (tuple, list)) or getattr(value, "ndim", None) == 1) or len(value) != 2:
        return None
    out = []
    for v in value:
        try:
            i = int(v)
        except (TypeError, ValueError, OverflowError):  # inf too
            return None
        if i != v:
            return None
        out.append(i)
    return out[0], out[1]


parities = RingPuzzle(
    title="Your parities",
    reference=ring_parities,
    plays=PLAYS,
    known_wrong=[
        (_five_slots, "your rule takes every ring as 5 slots, stage 3's: the use of a slot is k // slots, "
                      "for whatever number of slots the ring has."),
        (_from_slot, "the parity comes from which use of its slot slice k is (k // slots), not from the "
                     "slot's number: each slot's barriers count their own phases, one per use."),
        (_both_from_slice, "the parity counts uses of a slot, k // slots, not slices: slot s's barriers "
                           "complete one phase per use, and slice k is use k // slots of its slot."),
        (_full_from_slice, "full[s] completes one phase per use of slot s, not one per slice: count the "
                           "slot's uses, k // slots."),
        (_empty_from_slice, "empty[s] completes one phase per use of slot s, not one per slice: count the "
                            "slot's uses, k // slots."),
        (_both_use, "the producer waits for the same parity as the readers: that is the release of this "
                    "use, which comes only after the copy it is waiting to make. It needs the release of the "
                    "previous use, u - 1."),
        # Counting a slot's uses from 1 (u = k // slots + 1) flips both parities, which is the same pair
        # as swapping them, on every slice (mod 2, u + 1 and u - 1 agree): the two causes cannot be told
        # apart from what the rule returns, so the message names both.
        (_swapped, "your rule gives the kernels' two parities swapped. Either the use is counted from 1 "
                   "(u = k // slots + 1): a slot's first use is use 0, u = k // slots, whose copy completes "
                   "phase 0 of full[s]; or the pair is in the wrong order: the first is what the readers "
                   "wait for on full[s], the second what the producer waits for on empty[s]."),
        (_first_lap_only, "right on the first lap only: from a slot's second use on, the phase that use "
                          "waits for is another one, so its parity changes from use to use."),
        (_both_flipped, "the readers wait for the phase their copy completes: use u's copy completes "
                        "phase u of full[s], parity u % 2 (a fresh barrier is in phase 0)."),
    ],
    reveal=ring_parities,
)


# ---- exercise: the register budget of a variant of stage 4 ------------------------------------------

REGS_PER_SM = 65536
THREADS = 384           # three warpgroups, __launch_bounds__(384, 1)
PRODUCER_THREADS, CONSUMER_THREADS = 128, 256
VARIANT_PRODUCER_REGS = 48


def _round8(x: float) -> int:
    return int(x) // 8 * 8


def registers_at_launch(threads: int = THREADS) -> int:
    """What ptxas gives each thread under __launch_bounds__(threads, 1): the SM's registers shared
    out, rounded down to a multiple of 8."""
    return _round8(REGS_PER_SM // threads)


def consumer_registers(producer_regs: int = VARIANT_PRODUCER_REGS, pool: int | None = None) -> int:
    """Registers per consumer thread that setmaxnreg can give when the producer keeps
    ``producer_regs``: what the CTA's pool (registers at launch x threads) has left, shared out over
    the consumers, rounded down to a multiple of 8."""
    pool = registers_at_launch() * THREADS if pool is None else pool
    return _round8((pool - PRODUCER_THREADS * producer_regs) / CONSUMER_THREADS)


register_budget = NumberQuestion(
    what="registers per consumer thread",
    unit="registers per thread",
    expected=consumer_registers,
    hint=("the pool is (registers at launch) x 384 threads; subtract the producer's 128 threads' "
          "registers, share the rest among the 256 consumer threads, round down to a multiple of 8"),
    wrong=[
        (consumer_registers(pool=REGS_PER_SM), f"that is section 3's split, for a producer at 40 (or the "
                                               f"SM's {REGS_PER_SM:,} registers shared out): the producer "
                                               f"keeps 48 here, and setmaxnreg moves registers within the "
                                               f"CTA's pool, {registers_at_launch()} x {THREADS}."),
        ((registers_at_launch() * THREADS - PRODUCER_THREADS * VARIANT_PRODUCER_REGS) / CONSUMER_THREADS,
         "setmaxnreg takes multiples of 8: round down."),
        (consumer_registers(producer_regs=0), f"the producer keeps its {VARIANT_PRODUCER_REGS} registers per "
                                              "thread: subtract them from the pool first."),
        (registers_at_launch(), "that is what every thread gets at launch; setmaxnreg moves what the "
                                "producer gives back to the consumers."),
    ],
)
