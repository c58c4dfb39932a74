"""The exercises of notebook 09 (course_lib.exercises.hopper_pipelines): the ring's parity rule is
solved by the kernels' rule only, its starter is told to fill in the TODO lines, its named wrong
rules get their message and unnamed wrong rules a played problem; the register budget says what a
wrong answer means."""

from __future__ import annotations

import pytest

from course_lib.exercises import hopper_pipelines as ex
from course_lib.kernels import tensor_cores as tc
from course_lib.model import ring


def _check(puzzle, fn, capsys) -> tuple[bool, str]:
    verdict = puzzle.check(fn)
    out = capsys.readouterr().out
    assert all(len(line) <= 100 for line in out.splitlines()), out
    return bool(verdict), " ".join(out.split())


# ---- the puzzle: the parities of the ring ---------------------------------------------------------

def test_the_reference_is_the_kernels_rule_and_the_model_s():
    text = tc.source_path("tc_4_warp_specialized").read_text()
    assert "mbar_wait(&s.full[slot], (ks / STAGES) % 2)" in text
    assert "mbar_wait(&s.empty[slot], ((ks / STAGES) % 2) ^ 1)" in text
    for slots in range(1, 7):
        for k in range(30):
            u = k // slots
            assert ex.ring_parities(k, slots) == (u % 2, (u % 2) ^ 1) == ring.kernels_parities(k, slots)


def test_the_solution_and_other_spellings_of_it_pass(capsys):
    ok, out = _check(ex.parities, ex.ring_parities, capsys)
    assert ok and "solved" in out and "rings of 1 to 8 slots" in out
    spellings = [
        lambda k, slots: ((k // slots) & 1, 1 - (k // slots) & 1),
        lambda k, slots: [(k // slots) % 2, ((k // slots) - 1) % 2],       # a list, (u - 1) % 2
        lambda k, slots: (bool((k // slots) % 2), not (k // slots) % 2),    # bools
        lambda k, slots: (float((k // slots) % 2), 1.0 - (k // slots) % 2),
    ]
    for fn in spellings:
        assert _check(ex.parities, fn, capsys)[0]


def test_the_starter_is_told_to_fill_in_the_todo_lines(capsys):
    def my_parities(k, slots):
        return None

    ok, out = _check(ex.parities, my_parities, capsys)
    assert not ok and "fill in the TODO lines" in out
    ok, out = _check(ex.parities, None, capsys)
    assert not ok and "no function yet" in out


@pytest.mark.parametrize("fn, words", [
    (lambda k, slots: (k % 2, (k % 2) ^ 1), "counts uses of a slot, k // slots, not slices"),  # slices, not uses
    (lambda k, slots: (k % 2, ((k // slots) % 2) ^ 1), "not one per slice"),               # full k % 2
    (lambda k, slots: ((k // slots) % 2, (k // slots) % 2), "the release of this use"),   # u % 2 for both
    (lambda k, slots: ((k // 5) % 2, ((k // 5) % 2) ^ 1), "every ring as 5 slots"),       # stage 3's 5 slots
    (lambda k, slots: ((k % slots) % 2, ((k % slots) % 2) ^ 1), "not from the slot's number"),
    (lambda k, slots: (((k // slots) % 2) ^ 1, (k // slots) % 2), "swapped"),
    (lambda k, slots: (0, 1), "right on the first lap only"),
    (lambda k, slots: ((k // slots) % 2, (k % 2) ^ 1), "not one per slice"),              # empty from k
    (lambda k, slots: (((k // slots) % 2) ^ 1, ((k // slots) % 2) ^ 1), "phase u of full[s]"),
], ids=["k-mod-2-for-both", "full-k-mod-2", "u-mod-2-for-both", "slots-fixed-at-5", "from-the-slot", "swapped", "first-lap",
        "empty-from-k", "readers-flipped"])
def test_named_wrong_rules_get_their_message_and_a_played_problem(fn, words, capsys):
    ok, out = _check(ex.parities, fn, capsys)
    assert not ok and words in out, out
    assert "deadlock" in out or "before its copy has landed" in out or "overwrites slot" in out, out


def _uses_from_1(k, slots):
    u = k // slots + 1           # the first use counted as use 1
    return u % 2, (u - 1) % 2


def test_uses_counted_from_1_are_named_as_well_as_a_swapped_pair(capsys):
    """Counting a slot's uses from 1 gives, on every slice, the pair a swapped rule gives (mod 2, u + 1 and
    u - 1 agree), so the message names both causes; it told only "swapped" before."""
    cases = ex.parities.cases()
    assert all(_uses_from_1(*c) == tuple(reversed(ex.ring_parities(*c))) for c in cases)
    for fn in (_uses_from_1, lambda k, slots: tuple(reversed(ex.ring_parities(k, slots)))):
        ok, out = _check(ex.parities, fn, capsys)
        assert not ok and "counted from 1 (u = k // slots + 1)" in out and "in the wrong order" in out, out


def test_a_pair_returned_as_an_array_or_tensor_passes(capsys):
    import numpy as np
    import torch

    for wrap in (np.array, torch.tensor, lambda p: np.array(p, dtype=np.float64), lambda p: np.array(p, dtype=np.int8)):
        ok, out = _check(ex.parities, lambda k, slots: wrap(ex.ring_parities(k, slots)), capsys)
        assert ok and "solved" in out, out
    for wrong in (np.array([0.5, 1.0]), np.zeros((2, 1)), np.array([0, 1, 0]), torch.tensor([[0, 1]])):
        ok, out = _check(ex.parities, lambda k, slots: wrong, capsys)
        assert not ok and "return a pair" in out, out


@pytest.mark.parametrize("fn", [
    lambda k, slots: ((k // slots) % 2, ((k // slots) % 2) ^ 1) if k < 7 else (0, 1),     # right for a while
    lambda k, slots: ((k // slots) % 2, ((k // slots) % 2) ^ (k % slots != 2)),           # one slot wrong
    lambda k, slots: ((k // max(slots - 1, 1)) % 2, ((k // max(slots - 1, 1)) % 2) ^ 1),  # one slot too few
    lambda k, slots: (((k + 1) // slots) % 2, (((k + 1) // slots) % 2) ^ 1),              # off by one slice
    lambda k, slots: ((k // slots) % 2, 1),                                                # empty never flips
    lambda k, slots: ((k // slots) % 2, ((k // slots) % 2) ^ 1) if slots < 6 else (0, 1),  # small rings only
], ids=["late-lap", "one-slot", "slots-minus-1", "off-by-one", "empty-always-1", "big-ring"])
def test_wrong_rules_no_one_listed_are_rejected_with_what_went_wrong(fn, capsys):
    ok, out = _check(ex.parities, fn, capsys)
    assert not ok and "not yet" in out, out
    assert "a ring of" in out and ("deadlock" in out or "before its copy has landed" in out
                                   or "overwrites slot" in out), out


@pytest.mark.parametrize("fn, words", [
    (lambda k, slots: k // slots % 2, "return a pair (full parity, empty parity)"),
    (lambda k, slots: (0, 1, 0), "return a pair"),
    (lambda k, slots: ("0", "1"), "return a pair"),
    (lambda k, slots: (k // slots, k // slots + 1), "a parity is one bit, 0 or 1"),
    (lambda k, slots: (0.5, 1), "return a pair"),
    (lambda k, slots: 1 // (k - 3), "raised ZeroDivisionError for slice 3 of a ring of"),
])
def test_answers_of_the_wrong_kind_say_so(fn, words, capsys):
    ok, out = _check(ex.parities, fn, capsys)
    assert not ok and words in out, out


def test_every_named_wrong_rule_is_wrong_somewhere_and_none_is_another():
    """A listed rule that the check accepts, or two listed rules that agree on every slice, would
    give a learner the wrong message."""
    cases = ex.parities.cases()
    rules = [fn for fn, _ in ex.parities.known_wrong]
    for fn in rules:
        assert any(tuple(fn(*c)) != ex.ring_parities(*c) for c in cases), fn.__name__
    for i, f in enumerate(rules):
        for g in rules[i + 1:]:
            assert any(tuple(f(*c)) != tuple(g(*c)) for c in cases), (f.__name__, g.__name__)


def test_the_plays_cover_one_to_six_slots_and_more_than_two_laps():
    assert sorted(p.slots for p in ex.PLAYS) == list(range(1, 9))
    assert all(p.slices > 2 * p.slots for p in ex.PLAYS)


def test_the_solution_button_shows_the_reference(capsys):
    box = ex.parities.solution()
    box.button.click()
    shown = "".join(str(o.get("data", {}).get("text/plain", "")) for o in box.output.outputs)
    assert "def ring_parities" in shown


# ---- the register budget -------------------------------------------------------------------------

def test_register_budget_question(capsys):
    at_launch = 65536 // 384 // 8 * 8
    assert ex.registers_at_launch() == at_launch == 168
    assert ex.register_budget.expected() == (at_launch * 384 - 128 * 48) // 256 // 8 * 8 == 224
    assert ex.register_budget.check(224)
    assert ex.consumer_registers(producer_regs=40) == ex.consumer_registers(pool=65536) == 232  # both readings
    for answer, words in [(232, "SM's 65,536 registers"), (232, "section 3's split, for a producer at 40"),
                          (228, "round down"), (248, "subtract them"), (168, "at launch"),
                          ("224", "give a number (registers per thread), not the text '224'"),
                          (ex.consumer_registers, "give a number (registers per thread), not a function"),
                          (True, "give a number")]:
        verdict = ex.register_budget.check(answer)
        out = " ".join(capsys.readouterr().out.split())
        assert not verdict and words in out, (answer, out)
    assert ex.register_budget.check(224.0)
    ex.register_budget.check(None)
    assert "no answer yet" in capsys.readouterr().out


def test_a_rule_that_counts_its_own_calls_or_forgets_after_a_few_laps_is_refused(capsys):
    """A fresh adversarial learner's rules: the right parities from a count of calls per slot (right
    only when the slices come in order), and a use number one off from the fourth lap on."""
    calls = {}

    def counting(k, slots):
        u = calls.get((slots, k % slots), 0)
        calls[slots, k % slots] = u + 1
        return u % 2, (u % 2) ^ 1

    def late_lap(k, slots):
        u = k // slots + (k // slots >= 4 and slots >= 3)
        return u % 2, (u % 2) ^ 1

    for rule in (counting, late_lap):
        ok, out = _check(ex.parities, rule, capsys)
        assert not ok and "went wrong" in out
