"""A ring of shared-memory slots handed between a producer and a consumer through mbarriers, played
step by step: the handshake of stages 3-6 (csrc/tc_3_pipeline.cu ... tc_6_tma_store.cu), small
enough to draw (:mod:`course_lib.viz.ring`, notebook 09).

An mbarrier (PTX ISA, "mbarrier") counts arrivals and the bytes an asynchronous copy announced;
when both are complete, its current *phase* completes and the next one begins. A waiter names the
parity (0 or 1) of the phase it waits for, and ``try_wait.parity`` returns true once the phase with
that parity has completed, i.e. while the barrier's current phase has the other parity. A fresh
barrier is in phase 0, so a wait for parity 1 returns at once. Each slot ``s`` has two barriers:

* ``full[s]``: one arrival (the producer's ``arrive.expect_tx``) plus the copy's bytes;
* ``empty[s]``: one arrival per consumer that has finished reading the slot.

Slice ``k`` goes into slot ``k % slots``; it is the slot's use ``u = k // slots``. The consumer
waits for parity ``u % 2`` of ``full``; the producer waits for parity ``(u % 2) ^ 1`` of ``empty``
(the consumers' release of use ``u - 1``; on the first lap a fresh barrier lets it through).
The kernels' own lines: ``mbar_wait(&s.full[slot], (ks / STAGES) % 2)`` and
``mbar_wait(&s.empty[slot], ((ks / STAGES) % 2) ^ 1)`` (csrc/tc_4_warp_specialized.cu).

Time is counted in steps of this model, not in cycles: a copy takes ``copy_steps``, a slice's
multiply ``mma_steps``, issuing a copy one step. A parity rule other than the kernels' can be
played too, as a function of the use (``producer_rule``, ``consumer_rule``) or of the slice and the
number of slots (``parities``, the form notebook 09's puzzle asks for): the run then reports what
goes wrong (a wait that never returns, a slot read before its copy landed, a slot overwritten while
read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

# A rule per slice: (k, slots) -> (the parity of full[k % slots] that slice k's readers wait for, the
# parity of empty[k % slots] the producer waits for before it copies slice k).
SliceParities = Callable[[int, int], "tuple[int, int]"]


def consumer_parity(use: int) -> int:
    """The parity of ``full[slot]`` that use ``use`` of a slot waits for (the kernels' rule)."""
    return use % 2


def producer_parity(use: int) -> int:
    """The parity of ``empty[slot]`` the producer waits for before refilling a slot for use ``use``
    (the kernels' rule): the release of use ``use - 1``; for use 0 the phase "before" a fresh
    barrier, which counts as complete."""
    return (use % 2) ^ 1


@dataclass
class MBarrier:
    """One mbarrier: arrivals expected per phase, the phases completed so far, what is pending."""

    name: str
    count: int
    phase: int = 0          # phases completed so far; the current phase's parity is phase % 2
    pending: int = -1       # arrivals still missing in the current phase
    tx: int = 0             # bytes announced and not yet delivered

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"{self.name}: an mbarrier expects at least one arrival per phase, not {self.count}")
        self.pending = self.count

    def arrive(self, expect_tx: int = 0) -> bool:
        """One arrival (announcing ``expect_tx`` bytes); True if it completed the phase. An arrival
        beyond the phase's count raises ValueError (the PTX ISA leaves it undefined)."""
        if self.pending == 0:
            raise ValueError(f"{self.name}: more than {self.count} arrivals in phase {self.phase}")
        self.tx += expect_tx
        self.pending -= 1
        return self._complete_if_done()

    def complete_tx(self, nbytes: int) -> bool:
        """The copy engine delivered ``nbytes``; True if that completed the phase."""
        self.tx -= nbytes
        return self._complete_if_done()

    def try_wait(self, parity: int) -> bool:
        """``mbarrier.try_wait.parity``: has the phase of this parity completed?"""
        if parity not in (0, 1):
            raise ValueError(f"{self.name}: a parity is 0 or 1, not {parity}")
        return self.phase % 2 != parity

    def _complete_if_done(self) -> bool:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count
            return True
        return False


@dataclass(frozen=True)
class Event:
    """Something that happened at step ``t``. ``what``: "issue" (the producer asks for slice
    ``slice`` into ``slot``), "land" (its bytes arrive), "start" / "end" (the consumer's multiply of
    the slice), "phase" (``barrier`` completed a phase and now has parity ``parity``), "wait" (an
    actor found ``barrier`` not yet at the phase of ``parity`` it waits for)."""

    t: int
    what: str
    slice: int = -1
    slot: int = -1
    barrier: str = ""
    parity: int = -1


@dataclass
class RingRun:
    """What one run of the handshake did: its events in order, the phases every barrier went
    through (name -> [(step, parity after that step)], starting with (0, 0)), and the problems found
    (empty for the kernels' parity rule)."""

    slots: int
    slices: int
    events: list[Event] = field(default_factory=list)
    parities: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    steps: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def of(self, what: str) -> list[Event]:
        return [e for e in self.events if e.what == what]

    def time_of(self, what: str, slice_: int) -> int:
        """The step at which slice ``slice_`` was issued / landed / started / ended."""
        found = [e.t for e in self.events if e.what == what and e.slice == slice_]
        if not found:
            raise KeyError(f"slice {slice_} was never {what!r} in this run ({'; '.join(self.problems) or 'no problem'})")
        return found[0]


def kernels_parities(k: int, slots: int) -> tuple[int, int]:
    """The kernels' rule as a function of the slice: (full, empty) parities of slice ``k``."""
    use = k // slots
    return consumer_parity(use), producer_parity(use)


def ring_handshake(slices: int = 6, slots: int = 2, *, copy_steps: int = 3, mma_steps: int = 2,
                   consumers: int = 1, producer_rule: Callable[[int], int] = producer_parity,
                   consumer_rule: Callable[[int], int] = consumer_parity,
                   parities: SliceParities | None = None, max_steps: int = 200) -> RingRun:
    """Plays a producer filling a ring of ``slots`` slots with ``slices`` K slices and ``consumers``
    consumer warpgroups (moving together) multiplying them, each side waiting on the barriers with
    its parity rule: ``consumer_rule(use)`` and ``producer_rule(use)``, or, where ``parities`` is
    given, ``parities(k, slots)`` -> (full, empty) for slice ``k``. Stops when every slice is
    multiplied, or when nothing can move any more (a wait that never returns: a problem)."""
    if slices < 1 or slots < 1 or copy_steps < 1 or mma_steps < 1 or consumers < 1:
        raise ValueError("slices, slots, copy_steps, mma_steps and consumers are at least 1 "
                         f"(got {slices}, {slots}, {copy_steps}, {mma_steps}, {consumers})")
    if parities is None:
        def full_parity(k: int) -> int:
            return consumer_rule(k // slots)

        def empty_parity(k: int) -> int:
            return producer_rule(k // slots)
    elif producer_rule is not producer_parity or consumer_rule is not consumer_parity:
        raise ValueError("give either parities (a rule per slice) or producer_rule / consumer_rule, not both")
    else:
        def full_parity(k: int) -> int:
            return parities(k, slots)[0]

        def empty_parity(k: int) -> int:
            return parities(k, slots)[1]
    full = [MBarrier(f"full[{s}]", 1) for s in range(slots)]
    empty = [MBarrier(f"empty[{s}]", consumers) for s in range(slots)]
    run = RingRun(slots, slices, parities={b.name: [(0, 0)] for b in full + empty})
    landing: dict[int, list[int]] = {}          # step -> slices whose bytes land then
    in_slot: list[int | None] = [None] * slots  # which slice's bytes are in each slot (landed)
    reading: int | None = None                  # the slice the consumer is multiplying
    released: set[int] = set()                  # slices the consumer has finished and handed back
    next_copy = next_mma = 0
    mma_ends = -1
    producer_waiting = consumer_waiting = None  # (barrier, parity) last reported, to report once

    def completed(bar: MBarrier, t: int) -> None:
        run.parities[bar.name].append((t, bar.phase % 2))
        run.events.append(Event(t, "phase", barrier=bar.name, parity=bar.phase % 2))

    t = 0
    idle = 0
    while next_mma < slices or reading is not None:
        if t > max_steps:
            raise RuntimeError(f"the handshake ran past {max_steps} steps; raise max_steps for {slices} slices")
        moved = False
        # ---- the copy engine delivers what lands now
        for k in landing.pop(t, []):
            slot = k % slots
            in_slot[slot] = k
            run.events.append(Event(t, "land", k, slot))
            if full[slot].complete_tx(1):
                completed(full[slot], t)
            moved = True
        # ---- the consumer finishes a slice: it hands the slot back
        if reading is not None and t == mma_ends:
            slot = reading % slots
            run.events.append(Event(t, "end", reading, slot))
            released.add(reading)
            for _ in range(consumers):
                if empty[slot].arrive():
                    completed(empty[slot], t)
            reading, moved = None, True
        # ---- the producer: wait for the slot to be free, then announce the bytes and ask for them
        if next_copy < slices:
            slot = next_copy % slots
            parity = empty_parity(next_copy)
            if empty[slot].try_wait(parity):
                before = next_copy - slots  # the slice this copy overwrites
                if before >= 0 and before not in released:
                    state = "still reads" if reading == before else "has not yet read"
                    run.problems.append(f"step {t}: the producer overwrites slot {slot} with slice {next_copy} "
                                        f"while the consumer {state} slice {before} there")
                run.events.append(Event(t, "issue", next_copy, slot, empty[slot].name, parity))
                try:
                    if full[slot].arrive(expect_tx=1):
                        completed(full[slot], t)
                except ValueError as e:
                    run.problems.append(f"step {t}: {e}: the copy of slice {next_copy} can never complete it")
                landing.setdefault(t + copy_steps, []).append(next_copy)
                in_slot[slot] = None  # the slot's old bytes are being overwritten
                next_copy, producer_waiting, moved = next_copy + 1, None, True
            elif producer_waiting != (slot, parity):
                producer_waiting = (slot, parity)
                run.events.append(Event(t, "wait", next_copy, slot, empty[slot].name, parity))
        # ---- the consumer: wait for the slice's bytes, then multiply it
        if reading is None and next_mma < slices:
            slot = next_mma % slots
            parity = full_parity(next_mma)
            if full[slot].try_wait(parity):
                if in_slot[slot] != next_mma:
                    run.problems.append(f"step {t}: the consumer reads slice {next_mma} from slot {slot} "
                                        "before its copy has landed")
                run.events.append(Event(t, "start", next_mma, slot, full[slot].name, parity))
                reading, mma_ends = next_mma, t + mma_steps
                next_mma, consumer_waiting, moved = next_mma + 1, None, True
            elif consumer_waiting != (slot, parity):
                consumer_waiting = (slot, parity)
                run.events.append(Event(t, "wait", next_mma, slot, full[slot].name, parity))
        busy = bool(landing) or reading is not None
        idle = 0 if (moved or busy) else idle + 1
        if idle > 1:  # nothing in flight, nobody moved: every wait left can never return
            who = []
            if next_copy < slices:
                who.append(f"the producer waits forever on empty[{producer_waiting[0]}] for parity {producer_waiting[1]}")
            if next_mma < slices:
                who.append(f"the consumer waits forever on full[{consumer_waiting[0]}] for parity {consumer_waiting[1]}")
            run.problems.append(f"step {t}: deadlock: " + " and ".join(who))
            break
        t += 1
    run.steps = t
    return run
