"""The HTML report's charts as inline SVG, drawn with matplotlib: Hit@k curves, rank changes, a sweep's heatmap.

matplotlib is imported only when a chart is drawn (a run without --html never loads it). The SVG is deterministic:
no date, a fixed hash salt, text left as text (svg.fonttype none), every element id prefixed with the chart's own
prefix so several charts share one page, and no URL in it (the XML header, namespaces and metadata are dropped).
Each chart names what a mark stands for in `<title>` elements: the browser shows them on hover, no script needed.
"""
from __future__ import annotations

import html
import io
import re
from typing import Any, Mapping, Sequence

CURVE_DEPTH = 20  # the Hit@k curves run from k = 1 to this
GREEN, RED, GREY = "#1a7f37", "#cf222e", "#8c959f"  # better, worse, the compared run
# Curve colours (matplotlib's tab10), the run itself first.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")  # one per curve of an ablation or sweep
MAX_MOVES = 60  # rank changes drawn; the page's table lists every one
RC = {"svg.hashsalt": "localrag", "svg.fonttype": "none", "text.parse_math": False, "font.size": 10,
      "font.family": "sans-serif", "font.sans-serif": ["DejaVu Sans"], "axes.spines.top": False,
      "axes.spines.right": False, "axes.edgecolor": "#57606a", "axes.labelcolor": "#24292f",
      "xtick.color": "#57606a", "ytick.color": "#57606a", "axes.titlesize": 11, "legend.frameon": False}


def hit_curve(ranks: Sequence[int | None], depth: int = CURVE_DEPTH) -> list[float]:
    """Hit@k for k = 1..`depth` from each question's first acceptable rank: the share of questions ranked at k or
    better; a rank of None (nothing acceptable within the retrieved list) is a miss at every k."""
    if not ranks:
        return [0.0] * depth
    return [sum(1 for rank in ranks if rank is not None and rank <= k) / len(ranks) for k in range(1, depth + 1)]


def draw(render: Any, prefix: str, label: str) -> str:
    """The SVG of the figure `render(figure)` draws, for inline use, titled `label`; `render` returns the hover
    titles by group id ({gid: text})."""
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    with matplotlib.rc_context(RC):
        figure = Figure(layout="constrained")
        FigureCanvasSVG(figure)
        titles = render(figure)
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    return inline_svg(buffer.getvalue(), prefix, label, titles)


def inline_svg(text: str, prefix: str, label: str, titles: Mapping[str, str]) -> str:
    """matplotlib's SVG file as an element of an HTML page: from `<svg` on, without namespaces or metadata (no URL
    left), ids prefixed by `prefix`, the chart's `label` and each group's hover title as `<title>`."""
    text = text[text.index("<svg"):]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)
    text = re.sub(r' xmlns(?::xlink)?="[^"]*"', "", text).replace("xlink:href=", "href=")
    text = re.sub(r'(?<=\s)id="', f'id="{prefix}-', text)
    text = text.replace('href="#', f'href="#{prefix}-').replace("url(#", f"url(#{prefix}-")
    text = text.replace("<svg ", '<svg role="img" ', 1)
    text = re.sub(r"(<svg [^>]*>)", lambda m: f"{m.group(1)}\n <title>{html.escape(label)}</title>", text, count=1)
    for gid, title in titles.items():
        text = text.replace(f'<g id="{prefix}-{gid}">', f'<g id="{prefix}-{gid}">\n<title>{html.escape(title)}'
                                                        f'</title>', 1)
    return text.rstrip() + "\n"


def curve_chart(curves: Sequence[tuple[str, Sequence[float]]], prefix: str, compared: bool = False) -> str:
    """Hit@k curves (label, values for k = 1..n): one line each, in PALETTE's colours; with `compared` the second
    curve is the compared run, drawn grey and dashed."""
    deepest = max(len(values) for _, values in curves)

    def render(figure: Any) -> dict[str, str]:
        figure.set_size_inches(7.0, 3.5)
        ax = figure.add_subplot()
        titles = {}
        for n, (label, values) in enumerate(curves):
            ks = range(1, len(values) + 1)
            old = compared and n == 1
            # Marker and dash differ from curve to curve: equal curves (union = dense) stay visible.
            style = "--" if old else "-" if compared else ("-", "--", "-.", ":")[n % 4]
            ax.plot(ks, values, color=GREY if old else PALETTE[n % len(PALETTE)], linestyle=style,
                    marker="o" if compared else MARKERS[n % len(MARKERS)], markersize=4 if compared else 5,
                    markerfacecolor="none" if n else None, linewidth=2 if n == 0 else 1.6, label=label,
                    gid=f"curve{n}")
            shown = ", ".join(f"@{k} {values[k - 1]:.3f}" for k in (1, 3, 5, 10, 20) if k <= len(values))
            titles[f"curve{n}"] = f"{label}: Hit{shown}"
        ax.set_xlim(0.5, deepest + 0.5)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xticks([k for k in (1, 3, 5, 10, 15, 20) if k <= deepest])
        ax.set_xlabel("k (results looked at)")
        ax.set_ylabel("Hit@k")
        ax.grid(True, color="#d0d7de", linewidth=0.6)
        ax.legend(loc="lower right", fontsize=9)
        return titles

    return draw(render, prefix, f"Hit@k for k = 1 to {deepest}: " + "; ".join(label for label, _ in curves))


def rank_change_chart(moves: Sequence[tuple[str, str, int | None, int | None]], depth: int, prefix: str) -> str:
    """One row per changed question (its short label, question, old rank, new rank): an arrow from the old rank to
    the new, green when better, red when worse; "not found" to the right of the deepest rank."""
    moves = moves[:MAX_MOVES]
    missing = depth + 2

    def render(figure: Any) -> dict[str, str]:
        figure.set_size_inches(5.0, 0.9 + 0.26 * len(moves))
        ax = figure.add_subplot()
        titles = {}
        for n, (label, question, old, new) in enumerate(moves):
            x0, x1 = old or missing, new or missing
            better = x1 < x0
            colour = GREEN if better else RED
            ax.plot([x0, x1], [n, n], color=colour, linewidth=2.2, solid_capstyle="round", gid=f"move{n}")
            ax.plot([x0], [n], marker="o", markersize=5, markerfacecolor="white", markeredgecolor=colour)
            ax.plot([x1], [n], marker="<" if better else ">", markersize=7, color=colour)
            titles[f"move{n}"] = (f"{label}: {question} (rank {old if old else 'not found'} -> "
                                  f"{new if new else 'not found'}, {'better' if better else 'worse'})")
        ticks = sorted({1, *range(5, depth + 1, 5 if depth <= 30 else 10 if depth <= 100 else 50), depth})
        ax.set_xticks([*ticks, missing], [*map(str, ticks), "not\nfound"])
        ax.set_xlim(0.3, missing + 0.7)
        ax.set_yticks(range(len(moves)), [label for label, *_ in moves])
        ax.set_ylim(len(moves) - 0.5, -0.5)
        ax.set_xlabel("rank of the first acceptable location (old ○ -> new ▸)")
        ax.grid(True, axis="x", color="#d0d7de", linewidth=0.6)
        return titles

    return draw(render, prefix, f"Rank changes of {len(moves)} questions, old rank to new")


def heatmap_chart(panels: Sequence[tuple[str, Sequence[Sequence[float | None]]]], rows: Sequence[str],
                  columns: Sequence[str], axis_labels: tuple[str, str], names: Sequence[Sequence[str]],
                  prefix: str) -> str:
    """One heatmap per (metric label, grid of values by row and column; None: not evaluated), side by side; each
    cell shows its value and names its configuration (`names`, by row and column) on hover. Colours span 0 to 1."""
    import matplotlib
    from matplotlib.colors import to_hex
    from matplotlib.patches import Rectangle

    colours = matplotlib.colormaps["viridis"]

    def render(figure: Any) -> dict[str, str]:
        figure.set_size_inches(min(11.0, 1.6 + len(panels) * (1.2 + 1.05 * len(columns))), 1.3 + 0.5 * len(rows))
        titles = {}
        for p, (metric, grid) in enumerate(panels):
            ax = figure.add_subplot(1, len(panels), p + 1)
            for r, row in enumerate(grid):
                for c, value in enumerate(row):
                    gid = f"cell{p}-{r}-{c}"
                    fill = "#eaeef2" if value is None else to_hex(colours(value))
                    ax.add_patch(Rectangle((c, r), 1, 1, facecolor=fill, edgecolor="white", linewidth=2, gid=gid))
                    ax.text(c + 0.5, r + 0.5, "–" if value is None else f"{value:.3f}", ha="center", va="center",
                            fontsize=9, color="black" if value is None or value > 0.55 else "white")
                    titles[gid] = f"{names[r][c]}: {metric} " + ("not evaluated" if value is None else f"{value:.3f}")
            ax.set_xlim(0, len(columns))
            ax.set_ylim(len(rows), 0)
            ax.set_xticks([c + 0.5 for c in range(len(columns))], columns)
            ax.set_yticks([r + 0.5 for r in range(len(rows))], rows if p == 0 else [""] * len(rows))
            ax.tick_params(length=0)
            ax.set_xlabel(axis_labels[1])
            if p == 0 and axis_labels[0]:
                ax.set_ylabel(axis_labels[0])
            ax.set_title(metric)
            for side in ("left", "bottom"):
                ax.spines[side].set_visible(False)
        return titles

    return draw(render, prefix, "Heatmap of " + ", ".join(metric for metric, _ in panels) + " by setting")
