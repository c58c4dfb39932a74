"""The three levels of a register-tiled GEMM's output, as one picture: the block tile (what one block of
threads computes), the warp tiles inside it (what one warp computes), and the thread tiles inside one
warp tile (what one thread computes, from registers)."""

from __future__ import annotations

from typing import Any

from course_lib.model.hardware import WARP_SIZE
from course_lib.model.tiles import tile_hierarchy


def draw_tile_hierarchy(cfg: Any, thread: int = 0):
    """The block tile of ``cfg`` cut into warp tiles, warp 0's tile cut into its thread tiles, one per lane, and
    the thread tile of lane ``thread`` of warp 0 filled. Returns the figure."""
    from course_lib.viz._figure import subplots
    from matplotlib.patches import Rectangle

    if not 0 <= thread < WARP_SIZE:
        raise ValueError(f"thread is a lane of warp 0, 0..{WARP_SIZE - 1}; got {thread}")
    h = tile_hierarchy(cfg)
    (bm, bn), (wm, wn), (tm, tn) = h["block"], h["warp"], h["thread"]
    lanes_m, lanes_n = h["lanes"]
    fig, (ax_block, ax_warp) = subplots(1, 2, figsize=(9.5, 4.4), gridspec_kw={"width_ratios": [bn / bm, wn / wm]})
    for r in range(h["warps"][0]):
        for c in range(h["warps"][1]):
            first = r == 0 and c == 0
            ax_block.add_patch(Rectangle((c * wn, r * wm), wn, wm, facecolor="tab:orange" if first else "0.92",
                                         edgecolor="black", lw=1))
            ax_block.text(c * wn + wn / 2, r * wm + wm / 2, f"warp {r * h['warps'][1] + c}", ha="center",
                          va="center", fontsize=9)
    ax_block.set_xlim(0, bn)
    ax_block.set_ylim(bm, 0)
    ax_block.set_title(f"block tile {bm} x {bn}: {h['threads']} threads = {h['threads'] // WARP_SIZE} warps,\n"
                       f"each warp a {wm} x {wn} warp tile", fontsize=10)
    lane_m, lane_n = divmod(thread, lanes_n)
    for lr in range(lanes_m):
        for lc in range(lanes_n):
            mine = (lr, lc) == (lane_m, lane_n)
            ax_warp.add_patch(Rectangle((lc * tn, lr * tm), tn, tm, facecolor="tab:blue" if mine else "white",
                                        edgecolor="tab:orange", lw=1))
            ax_warp.text(lc * tn + tn / 2, lr * tm + tm / 2, str(lr * lanes_n + lc), ha="center", va="center",
                         fontsize=9, color="white" if mine else "black")
    ax_warp.set_xlim(0, wn)
    ax_warp.set_ylim(wm, 0)
    ax_warp.set_title(f"warp 0's tile: {lanes_m} x {lanes_n} lanes,\neach a {tm} x {tn} thread tile "
                      f"({tm * tn} accumulators in registers)", fontsize=10)
    for ax in (ax_block, ax_warp):
        ax.set_aspect("equal")
        ax.set_xlabel("columns of C", fontsize=9)
        ax.tick_params(labelsize=8)
    ax_block.set_ylabel("rows of C", fontsize=9)
    fig.tight_layout()
    return fig
