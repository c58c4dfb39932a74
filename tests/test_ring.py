"""course_lib.model.ring (a ring of slots handed over through mbarriers), its picture
(course_lib.viz.ring) and the source helpers notebooks 08 and 09 print the kernels with
(course_lib.kernels.tensor_cores.inspection: tc.cuda_function, tc.kernel_piece)."""

import re

import matplotlib.pyplot as plt
import pytest

import course_lib.viz._figure as figure
from course_lib.kernels import tensor_cores as tc
from course_lib.model.ring import MBarrier, consumer_parity, kernels_parities, producer_parity, ring_handshake
from course_lib.viz._figure import MAX_HEIGHT_PX, MAX_WIDTH_PX, MIN_FONT_PX
from course_lib.viz.ring import draw_ring_handshake


# ---- one mbarrier, as the PTX ISA describes it ------------------------------------------------------
def test_an_mbarrier_completes_a_phase_on_its_arrivals_and_bytes_and_flips_parity():
    bar = MBarrier("full", 1)
    assert bar.try_wait(1) and not bar.try_wait(0)  # fresh: phase 0 running, "phase -1" complete
    assert not bar.arrive(expect_tx=32)             # the arrival alone does not complete it
    assert not bar.complete_tx(16) and bar.complete_tx(16)
    assert bar.try_wait(0) and not bar.try_wait(1) and bar.phase == 1
    two = MBarrier("empty", 2)
    assert not two.arrive() and two.arrive() and two.phase == 1
    with pytest.raises(ValueError, match="parity is 0 or 1"):
        bar.try_wait(2)
    with pytest.raises(ValueError, match="at least one arrival"):
        MBarrier("x", 0)


def test_an_arrival_beyond_the_count_is_refused():
    bar = MBarrier("full", 1)
    bar.arrive(expect_tx=8)
    with pytest.raises(ValueError, match="more than 1 arrivals in phase 0"):
        bar.arrive(expect_tx=8)


# ---- the kernels' rule, played out ------------------------------------------------------------------
def test_the_kernels_parities_are_the_ones_in_the_source():
    text = tc.source_path("tc_4_warp_specialized").read_text()
    assert "mbar_wait(&s.full[slot], (ks / STAGES) % 2)" in text
    assert "mbar_wait(&s.empty[slot], ((ks / STAGES) % 2) ^ 1)" in text
    assert [consumer_parity(u) for u in range(4)] == [0, 1, 0, 1]
    assert [producer_parity(u) for u in range(4)] == [1, 0, 1, 0]


@pytest.mark.parametrize("slices, slots, copy, mma, consumers",
                         [(6, 2, 3, 2, 1), (20, 5, 3, 2, 2), (7, 3, 1, 5, 1), (1, 4, 2, 2, 2), (9, 1, 2, 2, 1)])
def test_the_kernels_rule_moves_every_slice_through_in_order_without_a_race(slices, slots, copy, mma, consumers):
    run = ring_handshake(slices, slots, copy_steps=copy, mma_steps=mma, consumers=consumers)
    assert run.ok, run.problems
    for k in range(slices):
        issue, land, start, end = (run.time_of(w, k) for w in ("issue", "land", "start", "end"))
        assert land == issue + copy and start >= land and end == start + mma
        if k >= slots:  # a slot is refilled only once the consumer has handed it back
            assert issue >= run.time_of("end", k - slots)
    # every use of a slot completes one phase of each of its barriers: the parity flips once a lap
    for s in range(slots):
        uses = len(range(s, slices, slots))
        for name in (f"full[{s}]", f"empty[{s}]"):
            flips = run.parities[name]
            assert [p for _, p in flips] == [u % 2 for u in range(uses + 1)], name


def test_on_its_first_lap_the_producer_never_waits():
    run = ring_handshake(6, 2, copy_steps=3, mma_steps=2)
    assert [run.time_of("issue", k) for k in (0, 1)] == [0, 1]
    assert run.time_of("issue", 2) == run.time_of("end", 0)  # then it waits for the release
    assert not [e for e in run.of("wait") if e.barrier.startswith("empty") and e.slice < 2]


def test_wrong_parities_are_caught_as_a_deadlock_or_a_race():
    hang = ring_handshake(producer_rule=lambda u: u % 2)
    assert len(hang.problems) == 1 and "deadlock" in hang.problems[0] and "empty[0] for parity 0" in hang.problems[0]
    early = ring_handshake(consumer_rule=lambda u: (u % 2) ^ 1)
    assert "reads slice 0 from slot 0 before its copy has landed" in early.problems[0]
    overwrite = ring_handshake(producer_rule=lambda u: 1)
    assert "overwrites slot 0 with slice 2 while the consumer has not yet read slice 0" in overwrite.problems[0]
    with pytest.raises(KeyError, match="never 'start'"):
        hang.time_of("start", 0)


def test_a_rule_per_slice_plays_as_the_rules_per_use():
    """``parities(k, slots)`` (the form notebook 09's puzzle asks for) is the same handshake as the
    two rules of the use, and the kernels' rule written that way plays through."""
    for args in [(6, 2), (20, 5), (9, 1)]:
        by_use, by_slice = ring_handshake(*args), ring_handshake(*args, parities=kernels_parities)
        assert by_slice.ok and by_slice.events == by_use.events
    hang = ring_handshake(parities=lambda k, slots: ((k // slots) % 2, (k // slots) % 2))
    assert hang.problems == ring_handshake(producer_rule=lambda u: u % 2).problems
    with pytest.raises(ValueError, match="not both"):
        ring_handshake(parities=kernels_parities, producer_rule=lambda u: 1)


@pytest.mark.parametrize("slices, slots, copy, mma", [(7, 1, 2, 2), (9, 2, 3, 2), (10, 3, 1, 4), (11, 4, 4, 1)])
def test_a_ring_plays_through_only_with_the_kernels_parities(slices, slots, copy, mma):
    """Whatever the timing, a wrong parity for any slice shows: a wait that returns too early reads or
    overwrites a slot, one that waits for the other phase never returns. Every rule that differs
    from the kernels' on one slice (each bit flipped, in turn) fails."""
    right = [kernels_parities(k, slots) for k in range(slices)]
    for k in range(slices):
        for side in (0, 1):
            wrong = [list(p) for p in right]
            wrong[k][side] ^= 1
            run = ring_handshake(slices, slots, copy_steps=copy, mma_steps=mma,
                                 parities=lambda i, s, w=wrong: tuple(w[i]))
            assert not run.ok, (k, side)


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(ValueError, match="at least 1"):
        ring_handshake(0)
    with pytest.raises(RuntimeError, match="raise max_steps"):
        ring_handshake(50, 2, max_steps=20)


# ---- the picture ------------------------------------------------------------------------------------
def _smallest_text_px(fig) -> float:
    from matplotlib.text import Text

    return min(t.get_fontsize() * figure.DPI / 72 for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip())


@pytest.mark.parametrize("run", [ring_handshake(6, 2, copy_steps=3, mma_steps=2),
                                 ring_handshake(producer_rule=lambda u: u % 2),
                                 ring_handshake(12, 4, copy_steps=3, mma_steps=2)], ids=["notebook", "deadlock", "4 slots"])
def test_the_picture_shows_every_row_and_fits_the_output_area(run):
    from io import BytesIO

    from PIL import Image

    fig = draw_ring_handshake(run)
    ax = fig.axes[0]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert rows[0] == "producer" and rows[-1] == "consumer"
    assert sorted(rows[1:-1]) == sorted([f"full[{s}]" for s in range(run.slots)] + [f"empty[{s}]" for s in range(run.slots)])
    texts = [t.get_text() for t in ax.texts]
    assert sum(f"slice {k}" in texts for k in range(run.slices)) == len(run.of("start"))
    if run.problems:
        assert any("deadlock" in t for t in texts) and any(t.endswith("forever") for t in texts)
    smallest = _smallest_text_px(fig)
    width, height = Image.open(BytesIO(figure.figure_png(fig))).size
    assert width <= MAX_WIDTH_PX and height <= MAX_HEIGHT_PX and smallest >= MIN_FONT_PX, (width, height, smallest)


def test_the_picture_refuses_more_slots_than_it_has_colours():
    with pytest.raises(ValueError, match="at most 5 slots"):
        draw_ring_handshake(ring_handshake(12, 6))
    plt.close("all")


# ---- the helpers' source, as notebooks 08 and 09 print it -------------------------------------------------
@pytest.mark.parametrize("name", ["mbar_init", "fence_barrier_init", "mbar_arrive_expect_tx", "mbar_wait", "mbar_try_wait",
                                  "wgmma_fence", "wgmma_commit", "wgmma_wait", "fence_accumulators", "wgmma_slice",
                                  "tma_load_slice", "mbar_init_ring", "mbar_arrive", "setmaxnreg_dec", "setmaxnreg_inc",
                                  "cluster_sync", "mbar_arrive_cluster", "named_barrier_sync",
                                  "fence_proxy_async_shared", "bulk_wait_read_all"])
def test_every_helper_the_notebook_prints_is_one_whole_definition(name):
    text = tc.cuda_function(name)
    code = [line for line in text.splitlines() if not line.startswith("//")]
    assert re.search(rf"\b{name}\s*\(", "\n".join(code[:3])), text
    assert text.rstrip().endswith("}") and text.count("[excerpt") == 0
    strip = tc.inspection._strip_code
    braces = sum(strip(line).count("{") - strip(line).count("}") for line in text.splitlines())
    assert braces == 0, text


def test_a_helper_comes_with_its_template_line_and_comment_and_braces_in_strings_do_not_count():
    wait = tc.cuda_function("wgmma_wait")
    assert wait.splitlines()[0].startswith("// Wait until at most N groups") and "template <int N>" in wait
    try_wait = tc.cuda_function("mbar_try_wait")  # its asm holds "{\n" and "}\n"
    assert try_wait.rstrip().endswith("return done != 0;\n}")
    assert tc.cuda_function("mbar_arrive").count("__device__") == 1  # not mbar_arrive_expect_tx nor _cluster


def test_source_helpers_name_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="defines 0 functions named 'no_such_helper'"):
        tc.cuda_function("no_such_helper")
    with pytest.raises(ValueError, match="0 paragraphs of tc_2_wgmma_tma.cu hold"):
        tc.kernel_piece("tc_2_wgmma_tma", "no such line")
    with pytest.raises(ValueError, match="paragraphs of tc_2_wgmma_tma.cu hold 'BLOCK_N'"):
        tc.kernel_piece("tc_2_wgmma_tma", "BLOCK_N")
    src = tmp_path / "two.cuh"
    src.write_text("__device__ void f(int) {\n}\n__device__ void f(float) {\n}\n")
    with pytest.raises(ValueError, match="defines 2 functions named 'f'"):
        tc.cuda_function("f", file=src)


def test_stage_2_read_in_pieces_is_the_whole_kernel():
    """The pieces notebook 08 prints hold every line of stage 2's kernel and launcher."""
    pieces = ["constexpr int BLOCK_M", "struct Smem", "kernel(const", "mbar_init(&s.full", "float acc[",
              "tma_load_slice<", "wgmma_slice<", "store_accumulators", "launch_tile_per_cta"]
    shown = "\n".join(tc.kernel_piece("tc_2_wgmma_tma", p) for p in pieces)
    text = tc.source_path("tc_2_wgmma_tma").read_text()
    body = text[text.index("namespace stage2 {"):]
    code = [line.strip() for line in body.splitlines()
            if line.strip() and not re.match(r"\s*(//|namespace|}\s*//|\}$)", line)]
    missing = [line for line in code if line not in {s.strip() for s in shown.splitlines()}]
    assert not missing, missing
