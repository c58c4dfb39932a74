"""The producer/consumer handshake of a ring of slots on mbarriers, as one picture (notebook 09).

Notebook 09 calls::

    from course_lib.model.ring import ring_handshake
    from course_lib.viz.ring import draw_ring_handshake
    draw_ring_handshake(ring_handshake(slices=6, slots=2))

The run itself (who waits on which barrier for which parity, when each phase completes) is
:mod:`course_lib.model.ring`'s; this module only draws it: one row for the producer, one per
barrier (``full[s]`` and ``empty[s]``, shaded by the parity of their current phase), one for the
consumer; arrows for the copies in flight and for the consumer's release of a slot.
"""

from __future__ import annotations

from course_lib.model.ring import RingRun

SLOT_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown")
PARITY_SHADE = ("white", "0.82")  # a barrier's current phase has parity 0 / 1
FONT = 7.5  # points: 10.4 px at the notebooks' 100 dpi


def draw_ring_handshake(run: RingRun, title: str | None = None):
    """Rows: the producer (its copies, and its waits on ``empty``), the barriers ``full[s]`` and
    ``empty[s]`` of every slot (shaded by the parity of their current phase, which flips at each
    completed phase), the consumer (its multiplies, and its waits on ``full``). Returns the figure."""
    from course_lib.viz._figure import subplots
    from matplotlib.patches import Patch

    if run.slots > len(SLOT_COLOURS):
        raise ValueError(f"the picture colours at most {len(SLOT_COLOURS)} slots, not {run.slots}")
    end = max(run.steps, 4)
    names = ["producer"] + [f"empty[{s}]" for s in range(run.slots)] + [f"full[{s}]" for s in range(run.slots)] + ["consumer"]
    y = {name: len(names) - 1 - i for i, name in enumerate(names)}
    fig, ax = subplots(figsize=(9.5, min(0.5 * len(names) + 1.4, 5.3)))
    h = 0.6

    # ---- barriers: the parity of the current phase, flipping at each completed phase
    for name, changes in run.parities.items():
        bounds = changes + [(end, None)]
        for (t0, parity), (t1, _) in zip(bounds, bounds[1:]):
            ax.broken_barh([(t0, t1 - t0)], (y[name] - h / 2, h), facecolors=PARITY_SHADE[parity],
                           edgecolors="0.5", linewidth=0.6)
            if t1 - t0 >= 1:
                ax.text((t0 + t1) / 2, y[name], f"parity {parity}" if t1 - t0 >= 3 else str(parity),
                        ha="center", va="center", fontsize=FONT, color="0.25")

    def wait_bar(row: str, t0: int, t1: int, label: str) -> None:
        if t1 > t0:
            ax.broken_barh([(t0, t1 - t0)], (y[row] - h / 2, h), facecolors="none", edgecolors="0.45",
                           hatch="///", linewidth=0.6)
            ax.text((t0 + t1) / 2, y[row] + h / 2 + 0.05, label, ha="center", va="bottom", fontsize=FONT, color="0.3")

    waits = {(e.barrier, e.slice): e for e in run.of("wait")}
    # ---- producer: a copy issued per slice (after its wait on empty), the bytes landing in full[s]
    for e in run.of("issue"):
        colour = SLOT_COLOURS[e.slot]
        w = waits.get((e.barrier, e.slice))
        if w is not None:
            wait_bar("producer", w.t, e.t, f"waits {e.barrier}: {e.parity}")
        ax.broken_barh([(e.t, 1)], (y["producer"] - h / 2, h), facecolors=colour, edgecolors="black", linewidth=0.6)
        ax.text(e.t + 0.5, y["producer"], str(e.slice), ha="center", va="center", fontsize=FONT, color="white",
                fontweight="bold")
        landed = [x.t for x in run.of("land") if x.slice == e.slice]
        if landed:
            ax.annotate("", xy=(landed[0], y[f"full[{e.slot}]"] + h / 2), xytext=(e.t + 0.5, y["producer"] - h / 2),
                        arrowprops=dict(arrowstyle="->", color=colour, linewidth=1.0, shrinkA=0, shrinkB=0))
    # ---- consumer: a multiply per slice (after its wait on full), then the release of empty[s]
    for e in run.of("start"):
        colour = SLOT_COLOURS[e.slot]
        w = waits.get((e.barrier, e.slice))
        if w is not None:
            wait_bar("consumer", w.t, e.t, f"waits {e.barrier}: {e.parity}")
        ends = [x.t for x in run.of("end") if x.slice == e.slice]
        t1 = ends[0] if ends else end
        ax.broken_barh([(e.t, t1 - e.t)], (y["consumer"] - h / 2, h), facecolors=colour, edgecolors="black",
                       linewidth=0.6)
        ax.text((e.t + t1) / 2, y["consumer"], f"slice {e.slice}", ha="center", va="center", fontsize=FONT,
                color="white", fontweight="bold")
        if ends:
            ax.annotate("", xy=(t1, y[f"empty[{e.slot}]"] - h / 2), xytext=(t1, y["consumer"] + h / 2),
                        arrowprops=dict(arrowstyle="->", color=colour, linewidth=1.0, linestyle=":", shrinkA=0,
                                        shrinkB=0))

    # ---- waits that never returned (a deadlock): hatched to the end
    done = {(e.barrier, e.slice) for e in run.of("issue") + run.of("start")}
    for (barrier, slice_), w in waits.items():
        if (barrier, slice_) not in done:
            wait_bar("producer" if barrier.startswith("empty") else "consumer", w.t, end,
                     f"waits {barrier}: {w.parity}, forever")

    ax.set_yticks([y[n] for n in names], names, fontsize=FONT + 0.5)
    ax.set_ylim(-0.7, len(names) - 0.2)
    ax.set_xlim(0, end)
    ax.set_xticks(range(0, end + 1, 1 if end <= 24 else 5))
    ax.tick_params(axis="x", labelsize=FONT)
    ax.set_xlabel("time (steps of the model, not cycles)", fontsize=FONT + 0.5)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    handles = [Patch(facecolor=SLOT_COLOURS[s], edgecolor="black", label=f"slot {s}") for s in range(run.slots)]
    handles += [Patch(facecolor=PARITY_SHADE[p], edgecolor="0.5", label=f"barrier's phase: parity {p}") for p in (0, 1)]
    handles += [Patch(facecolor="none", edgecolor="0.45", hatch="///", label="waiting (barrier: parity)")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=len(handles), fontsize=FONT,
              frameon=False, handlelength=1.5, columnspacing=1.0)
    if title is None:
        title = (f"{run.slices} slices through a ring of {run.slots} slots: solid arrows the copies in flight "
                 "(issue to landing), dotted the consumer's release")
    ax.set_title(title, fontsize=FONT + 0.5)
    if run.problems:
        ax.text(0.5, 1.08, "; ".join(run.problems[:2]), transform=ax.transAxes, ha="center", fontsize=FONT, color="tab:red")
    fig.tight_layout()
    return fig
