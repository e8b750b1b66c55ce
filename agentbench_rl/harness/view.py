"""``agentbench-rl view RUN``: what the agent did, as one static HTML page.

Reads the episode records ``eval --save-trajectories`` wrote and renders, per task, the step graph
of the task's episodes (one per seed: the same task played under different seeds is a group, the
structure GiGPO and BiPACE exploit; drawn as an inline SVG from
:class:`~agentbench_rl.core.graph.StepGraph`, states as circles laid out by their first step,
canonical actions as arrows) and then every episode step by step: observation (the frame, for
visual Sokoban), raw and canonical action, validity and reward. No script, no external file:
the page opens from disk. Every text from the run is HTML-escaped.
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from agentbench_rl.core.atomic import atomic_write_text
from agentbench_rl.core.batch import StepBatch
from agentbench_rl.core.graph import TERMINAL, StepGraph
from agentbench_rl.harness.trajectories import read_episodes
from agentbench_rl.spec.results_folder import ResultsFolder

STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
td, th { border: 1px solid #ccc; padding: 0.2em 0.5em; vertical-align: top; text-align: left; }
pre { margin: 0; font-size: 0.85em; white-space: pre-wrap; max-width: 60em; }
img.frame { image-rendering: pixelated; width: 96px; }
tr.invalid td { background: #fde8e8; }
.won { color: #1a7f37; } .lost { color: #b42318; }
svg text { font-size: 10px; }
"""


def _escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _observation_cell(observation: dict[str, Any]) -> str:
    cell = ""
    image = observation.get("image")
    if isinstance(image, str) and image.startswith("data:image/png;base64,"):
        cell += f'<img class="frame" alt="frame" src="{_escape(image)}"><br>'
    return cell + f"<pre>{_escape(observation.get('text', ''))}</pre>"


def step_graph(records: list[dict[str, Any]]) -> StepGraph | None:
    """The step graph of one task's episodes (one trajectory per seed); ``None`` if no steps.

    Example:
        >>> step = {"t": 0, "state": "s0", "action": "up", "valid": True, "reward": 1.0}
        >>> graph = step_graph([{"task_id": "t", "seed": 0, "steps": [step]}])
        >>> graph.summary()["nodes"]
        1
    """
    rows = [
        {"group": record["task_id"], "traj": int(record["seed"]), "t": step["t"],
         "reward": step["reward"], "obs_key": step["state"], "state_key": step["state"],
         "action_key": step["action"], "valid": step["valid"]}
        for record in records
        for step in record["steps"]
    ]  # fmt: skip
    if not rows:
        return None
    return next(iter(StepGraph.from_batch(StepBatch.from_records(rows)).values()))


def graph_svg(graph: StepGraph) -> str:
    """The graph as SVG: columns by the first step a state was seen at, arrows per action."""
    depth: dict[str, int] = {}
    frontier = [state for state in graph.node_visits if not _has_parent(graph, state)]
    frontier = frontier or list(graph.node_visits)[:1]
    for state in frontier:
        depth[state] = 0
    while frontier:
        following = []
        for state in frontier:
            for (source, _), edge in graph.edges.items():
                if source != state:
                    continue
                for successor in edge.successors:
                    if successor != TERMINAL and successor not in depth:
                        depth[successor] = depth[state] + 1
                        following.append(successor)
        frontier = following
    columns: dict[int, list[str]] = defaultdict(list)
    for state, level in depth.items():
        columns[level].append(state)
    position = {
        state: (40 + 80 * level, 30 + 36 * row)
        for level, states in columns.items()
        for row, state in enumerate(states)
    }
    width = 80 + 80 * max(columns, default=0)
    height = 60 + 36 * max((len(states) for states in columns.values()), default=1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">']
    parts.append(
        '<defs><marker id="arrow" markerWidth="8" markerHeight="8" refX="8" refY="4" '
        'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#888"/></marker></defs>'
    )
    for (source, action), edge in sorted(graph.edges.items()):
        for successor, count in sorted(edge.successors.items()):
            if successor == TERMINAL or source not in position or successor not in position:
                continue
            (x1, y1), (x2, y2) = position[source], position[successor]
            title = f"{action} x{count} (mean return {edge.mean_return:.2f})"
            parts.append(
                f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#888" '
                f'stroke-width="{min(1 + count, 5)}" marker-end="url(#arrow)">'
                f"<title>{_escape(title)}</title></line>"
            )
    for state, (x, y) in sorted(position.items()):
        visits = graph.node_visits.get(state, 0)
        parts.append(
            f'<circle cx="{x}" cy="{y}" r="{6 + min(visits, 8)}" fill="#4c78a8">'
            f"<title>{_escape(state)}: {visits} visits</title></circle>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _has_parent(graph: StepGraph, state: str) -> bool:
    return any(state in edge.successors for edge in graph.edges.values())


def _episode_table(record: dict[str, Any]) -> str:
    outcome = "won" if record.get("success") else "lost"
    lines = [
        f'<h3>seed {_escape(record["seed"])}: <span class="{outcome}">{outcome}</span>, '
        f"{len(record['steps'])} steps, return "
        f"{_escape(record.get('return'))}</h3>",
        "<table><tr><th>t</th><th>raw action</th><th>canonical</th><th>valid</th>"
        "<th>reward</th><th>observation after</th></tr>",
        f'<tr><td>reset</td><td colspan="4"></td><td>{_observation_cell(record["reset"])}</td>'
        "</tr>",
    ]
    for step in record["steps"]:
        row_class = "" if step["valid"] else ' class="invalid"'
        lines.append(
            f"<tr{row_class}><td>{_escape(step['t'])}</td>"
            f"<td><pre>{_escape(step['action_raw'])}</pre></td>"
            f"<td>{_escape(step['action'])}</td><td>{'yes' if step['valid'] else 'no'}</td>"
            f"<td>{_escape(step['reward'])}</td><td>{_observation_cell(step['observation'])}</td>"
            "</tr>"
        )
    lines.append("</table>")
    return "\n".join(lines)


def render_view(run: Path) -> Path:
    """Write ``run/view.html`` from ``run/trajectories``; return its path.

    Raises:
        ValueError: the folder holds no saved trajectories (one line: what to run).
    """
    records = read_episodes(run)
    if not records:
        raise ValueError(
            f"{run} holds no trajectories; run eval with --save-trajectories --out {run}"
        )
    config_path = ResultsFolder(run).config_file
    config = json.loads(config_path.read_text("utf-8")) if config_path.exists() else {}
    title = f"{config.get('env', '?')} / {config.get('split', '?')} / {config.get('agent', '?')}"
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_task[str(record["task_id"])].append(record)
    body = [f"<h1>{_escape(title)}</h1>", f"<p>{len(records)} episodes, {len(by_task)} tasks</p>"]
    for task_id, episodes in sorted(by_task.items()):
        body.append(
            f'<section class="task" data-task="{_escape(task_id)}">'
            f"<h2>{_escape(task_id)} ({_escape(episodes[0].get('category', ''))})</h2>"
        )
        graph = step_graph(episodes)
        if graph is not None:
            summary = graph.summary()
            body.append(
                f"<p>step graph of the {len(episodes)} episode(s): {summary['nodes']:.0f} "
                f"states, {summary['edges']:.0f} state-action pairs</p>{graph_svg(graph)}"
            )
        body.extend(_episode_table(record) for record in episodes)
        body.append("</section>")
    page = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_escape(title)}</title><style>{STYLE}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
    path = ResultsFolder(run).view_page
    atomic_write_text(path, page)
    return path
