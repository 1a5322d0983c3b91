"""Draws the load soak's RSS samples (load_soak.py) as a PNG with matplotlib: RSS over time with the
phases shaded (opening, writing, checking), the steady-state band (the first sample
after the first third of writing, plus and minus 5%) and the window it is checked over (the last third of the writing phase); below it,
the edits acknowledged each second.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PHASE_COLOURS = {"idle": "#eeeeee", "opening": "#cfe2f3", "writing": "#d9ead3", "checking": "#fce5cd",
                 "shutdown": "#eeeeee"}


def draw(path: str, samples, phases, steady, title_extra: str = "") -> None:
    """samples: (t, VmRSS KiB, RssAnon KiB, phase, edits acknowledged, documents opened); phases:
    (name, start, end)."""
    if not samples:
        raise ValueError("no RSS samples to draw")
    t = [s[0] for s in samples]
    rss = [s[1] / 1024 for s in samples]
    anon = [s[2] / 1024 for s in samples]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 7.5), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 1]})
    for name, start, end in phases:
        colour = PHASE_COLOURS.get(name)
        if colour and end > start:
            for axis in (top, bottom):
                axis.axvspan(start, end, color=colour, zorder=0)
        if name in ("opening", "writing", "checking"):
            top.text(start, 0.985, " " + name, transform=top.get_xaxis_transform(), ha="left", va="top",
                     fontsize=9, color="#333333", rotation=90 if end - start < 0.06 * (phases[-1][2] - phases[0][1]) else 0)
    top.plot(t, rss, color="#1f4e79", linewidth=1.4, label="VmRSS (resident set)")
    top.plot(t, anon, color="#7f7f7f", linewidth=0.9, linestyle=":", label="RssAnon (heap and stacks)")
    if steady:
        first = steady["first_kib"] / 1024
        top.axhspan(steady["low_kib"] / 1024, steady["high_kib"] / 1024, xmin=0, xmax=1, color="#38761d", alpha=0.12,
                    zorder=1, label="steady state's first sample ± 5%")
        top.axhline(first, color="#38761d", linewidth=0.8, linestyle="--")
        top.axvspan(steady["from_t"], steady["to_t"], ymin=0.96, ymax=1.0, color="#38761d", alpha=0.6, zorder=2,
                    label="last third of writing (checked)")
        verdict = "met" if steady["met"] else "MISSED"
        top.set_title("docsession RSS under load: no growth at steady state %s\n%s" % (verdict, title_extra),
                      fontsize=11)
    else:
        top.set_title("docsession RSS under load\n%s" % title_extra, fontsize=11)
    top.set_ylabel("server memory (MiB)")
    top.set_ylim(bottom=0, top=max(rss) * 1.15)
    top.grid(True, linewidth=0.3)
    top.legend(loc="lower right", fontsize=8)

    # Edits acknowledged and documents opened per second, from the cumulative counts in the samples.
    rate_t, edits, opens = [], [], []
    for before, after in zip(samples, samples[1:]):
        dt = after[0] - before[0]
        if dt > 0:
            rate_t.append(after[0])
            edits.append((after[4] - before[4]) / dt)
            opens.append((after[5] - before[5]) / dt)
    bottom.plot(rate_t, edits, color="#b45f06", linewidth=0.9, label="edits acknowledged/s (left)")
    bottom.set_ylabel("edits/s")
    right = bottom.twinx()
    right.plot(rate_t, opens, color="#1f4e79", linewidth=0.9, label="documents opened/s (right)")
    right.set_ylabel("opens/s")
    right.set_ylim(bottom=0)
    handles = bottom.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    bottom.legend(handles, [h.get_label() for h in handles], loc="upper left", fontsize=8)
    bottom.set_xlabel("time since the server started (s)")
    bottom.set_ylim(bottom=0)
    bottom.grid(True, linewidth=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
