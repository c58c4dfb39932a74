"""The grouped order's check (notebook 05): how it reads a returned pair, and the older tutorial's bug.
(tests/test_exercises_triton.py holds the rest of notebook 05's checks.)"""

import numpy as np
import torch

from course_lib.exercises import triton_fast_kernel as ex05
from course_lib.model import schedules


def _out(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


def test_a_right_order_returned_as_an_array_or_tensor_passes(capsys):
    for wrap in (np.array, list, lambda p: torch.tensor(p), lambda p: (np.int64(p[0]), np.int32(p[1]))):
        assert ex05.grouped_order.check(lambda *c, w=wrap: w(schedules.grouped_order(*c))), _out(capsys)
    assert "solved" in _out(capsys)


def test_a_return_that_is_not_two_whole_numbers_is_told_to_return_a_pair(capsys):
    for bad in (lambda *c: np.array([schedules.grouped_order(*c)]), lambda *c: (*schedules.grouped_order(*c), 0),
                lambda *c: np.array(schedules.grouped_order(*c)) + 0.5):
        assert not ex05.grouped_order.check(bad)
        assert "return a tuple (pid_m, pid_n)" in _out(capsys)


def test_the_older_tutorials_pid_mod_rows_is_named(capsys):
    def older_tutorial(pid, num_pid_m, num_pid_n, group_m):
        in_group = group_m * num_pid_n
        first_m = (pid // in_group) * group_m
        rows = min(num_pid_m - first_m, group_m)
        return first_m + pid % rows, (pid % in_group) // rows

    assert not ex05.grouped_order.check(older_tutorial)
    out = _out(capsys)
    assert "(pid % num_pid_in_group) % (the band's tile rows)" in out and "must use that number" not in out
