"""A topology (topology.py) as text a renderer draws: Graphviz DOT (``dot -Tsvg``) and
Mermaid (a README, a wiki). Both carry the same elements and arrows; an element or arrow a
finding names is drawn red (error) or orange (warning) with the finding's codes in its
label; an expired route and a link one side does not trust are dashed. ``as_json`` gives the
same picture as data."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pybroker.apps.diagnose.topology import Edge, Element, Topology

_COLOURS = {"error": "#d62728", "warning": "#ff7f0e", "info": "#1f77b4"}
_SHAPES = {"endpoint": "box", "database": "folder", "service": "ellipse",
           "address": "box", "transport": "box"}
_EDGE_COLOURS = {"forwarded": "#1f77b4", "mirror": "#9467bd", "dynamic": "#2ca02c",
                 "transport": "#8c564b", "partner": "#9467bd"}


def _label(item: Element | Edge) -> str:
    return item.label + (f"\n{' '.join(item.codes)}" if item.codes else "")


def _dot_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def dot(picture: Topology) -> str:
    """The picture as a Graphviz digraph: an instance is a cluster around its endpoint,
    databases and services."""
    lines = ["digraph broker_network {", "  rankdir=LR;", "  compound=true;",
             '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9];']

    def node(e: Element, indent: str) -> None:
        attrs = [f"shape={_SHAPES.get(e.kind, 'box')}", f"label={_dot_text(_label(e))}"]
        if e.kind == "address":
            attrs.append("style=dashed")
        if e.severity:
            attrs += [f'color="{_COLOURS[e.severity]}"', "penwidth=2"]
        lines.append(f"{indent}{e.id} [{', '.join(attrs)}];")

    for inst in (e for e in picture.elements if e.kind == "instance"):
        lines.append(f"  subgraph cluster_{inst.id} {{")
        lines.append(f"    label={_dot_text(_label(inst))};")
        if inst.severity:
            lines.append(f'    color="{_COLOURS[inst.severity]}"; penwidth=2;')
        for e in picture.elements:
            if e.parent == inst.id:
                node(e, "    ")
        lines.append("  }")
    for e in picture.elements:
        if e.parent is None and e.kind != "instance":
            node(e, "  ")
    for edge in picture.edges:
        attrs = []
        if edge.label or edge.codes:
            attrs.append(f"label={_dot_text(_label(edge))}")
        if edge.kind == "hosts":
            attrs += ["arrowhead=none", "style=dotted"]
        elif edge.kind == "arrivals":
            attrs += ["style=dotted"]
        elif edge.kind == "partner":  # the pair itself, no direction (R9)
            attrs += ["dir=none", "style=bold"]
        elif edge.dashed:
            attrs.append("style=dashed")
        if edge.kind == "mirror" or edge.kind == "forwarded":
            attrs.append("penwidth=2" if edge.kind == "mirror" else "penwidth=1.5")
        colour = _COLOURS.get(edge.severity or "") or _EDGE_COLOURS.get(edge.kind)
        if colour:
            attrs.append(f'color="{colour}"')
            if edge.severity:
                attrs += [f'fontcolor="{colour}"', "penwidth=2.5"]
        lines.append(f"  {edge.source} -> {edge.target}"
                     + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    return '"' + text.replace('"', "#quot;").replace("\n", "<br/>") + '"'


def mermaid(picture: Topology) -> str:
    """The picture as a Mermaid flowchart: an instance is a subgraph; a finding's element
    takes the class of its severity, a finding's arrow a linkStyle of its colour."""
    lines = ["flowchart LR"]
    shapes = {"database": ("[(", ")]"), "service": ("([", "])"), "endpoint": ("[", "]"),
              "address": ("[/", "/]"), "transport": ("{{", "}}")}

    def node(e: Element, indent: str) -> None:
        start, end = shapes.get(e.kind, ("[", "]"))
        lines.append(f"{indent}{e.id}{start}{_mermaid_text(_label(e))}{end}")

    for inst in (e for e in picture.elements if e.kind == "instance"):
        lines.append(f"  subgraph {inst.id}[{_mermaid_text(_label(inst))}]")
        for e in picture.elements:
            if e.parent == inst.id:
                node(e, "    ")
        lines.append("  end")
    for e in picture.elements:
        if e.parent is None and e.kind != "instance":
            node(e, "  ")
    styles = []
    for index, edge in enumerate(picture.edges):
        arrow = ("---" if edge.kind == "hosts" else "===" if edge.kind == "partner"
                 else "-.->" if edge.dashed
                 or edge.kind == "arrivals" else "==>" if edge.kind in ("mirror", "forwarded")
                 else "-->")
        label = _label(edge)
        lines.append(f"  {edge.source} {arrow}" + (f"|{_mermaid_text(label)}|" if label else "")
                     + f" {edge.target}")
        if edge.severity:
            styles.append(f"  linkStyle {index} stroke:{_COLOURS[edge.severity]},"
                          "stroke-width:3px")
    lines += styles
    for severity, colour in _COLOURS.items():
        lines.append(f"  classDef {severity} stroke:{colour},stroke-width:3px")
    for e in picture.elements:
        if e.severity:
            lines.append(f"  class {e.id} {e.severity}")
    return "\n".join(lines) + "\n"


def as_json(picture: Topology) -> dict[str, Any]:
    """The picture as data for programs (``topology --format json``): its elements, its
    arrows and the findings drawn on them, each with the fields of its dataclass."""
    return {"elements": [asdict(e) for e in picture.elements],
            "edges": [asdict(e) for e in picture.edges],
            "findings": [f.as_dict() for f in picture.findings]}
