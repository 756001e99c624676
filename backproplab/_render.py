"""Turn a described graph into text or Graphviz DOT (what `Graph.to_text` and
`Graph.to_dot` return).

Rendering happens in two stages, so that a graph of a million nodes costs
little more than a loop over its ids:

1. `text_tail` and `dot_format` render what a node *reads*: its name, leaf and
   saved tensors, but not its id. `describe` calls them once per distinct
   description (``_Sig`` in `backproplab.graph`), which nodes of the same kind
   share.
2. `render_text` and `render_dot` walk the graph's columns (``_Cols``) and
   stitch those pieces together with the node ids and the edges.

>>> from backproplab.graph import SavedTensor
>>> text_tail("MulBackward0", "op", (SavedTensor("self", (), "float32", False),), None)
'MulBackward0  saved: self (float32, ())'
>>> dot_format("SinBackward0", "op", (), None).format(3)
'  n3 [label="[3] SinBackward0"];'
"""

from __future__ import annotations

from itertools import chain, repeat
from operator import attrgetter
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # graph.py imports this module: its names are for annotations only
    from .graph import LeafInfo, SavedTensor, _Cols

# The text tree indents at most this many levels; deeper subtrees are
# continued in a new block, which keeps the text linear in the graph size.
MAX_DEPTH = 24


def _fmt(v: float) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return f"{v:.1f}"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _shape(shape: tuple[int, ...] | None) -> str:
    return "?" if shape is None else str(tuple(shape))


def _values(vals: tuple[float, ...] | None, shape: tuple[int, ...]) -> str:
    if vals is None:
        return "?"
    if len(shape) == 0:
        return _fmt(vals[0])
    return "[" + ", ".join(map(_fmt, vals)) + "]"


def _saved_text(s: SavedTensor) -> str:
    return f"{s.name} (freed)" if s.freed else f"{s.name} ({s.dtype}, {_shape(s.shape)})"


def text_tail(name: str, kind: str, saved: tuple, leaf: LeafInfo | None) -> str:
    """A node's text line after its ``"[id] "``."""
    parts = [name]
    if kind == "custom":
        parts.append("(custom Function)")
    if leaf is not None:
        parts.append(leaf.name)
        parts.append(f"shape={_shape(leaf.shape)}")
        if leaf.dtype != "float32":
            parts.append(f"dtype={leaf.dtype}")
        if leaf.value is not None:
            parts.append(f"value={_values(leaf.value, leaf.shape)}")
        if leaf.has_grad:
            parts.append(
                "grad=" + (_values(leaf.grad, leaf.shape) if leaf.grad is not None else "(large)")
            )
    if saved:
        parts.append("saved: " + ", ".join(map(_saved_text, saved)))
    return "  ".join(parts)


def _dot_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def dot_format(name: str, kind: str, saved: tuple, leaf: LeafInfo | None) -> str:
    """A node's DOT line as a str.format template taking its id."""
    text = name
    attrs = ""
    if leaf is not None:
        text += f"\n{leaf.name}  {_shape(leaf.shape)}"
        if leaf.value is not None and len(leaf.value) == 1:
            text += f"  value={_fmt(leaf.value[0])}"
        attrs = ', style=filled, fillcolor="lightblue"'
    elif kind == "custom":
        attrs = ', style=filled, fillcolor="lightyellow"'
    if saved:
        text += "\nsaved: " + ", ".join(s.name + (" (freed)" if s.freed else "") for s in saved)
    body = _dot_escape(text).replace("{", "{{").replace("}", "}}")
    return f'  n{{0}} [label="[{{0}}] {body}"{attrs}];'


def render_text(c: _Cols, roots: tuple[int, ...]) -> str:
    sigs, off, dst, nrs = c.sigs, c.off, c.dst, c.nrs
    lines: list[str] = []
    add = lines.append
    shown = [False] * len(sigs)
    blocks = list(dict.fromkeys(roots))
    for k0 in blocks:  # grows when a deep subtree is continued in a block of its own
        # (node id, prefix of its line, prefix of its children's lines, depth, input_nr)
        stack = [(k0, "", "", 0, 0)]
        pop = stack.pop
        while stack:
            k, lead, cont, depth, nr = pop()
            while True:  # follows a node's only child without the stack
                tag = f"  (output {nr})" if nr else ""
                if shown[k]:
                    add(f"{lead}(see [{k}]) {sigs[k].ref}{tag}")
                    break
                a = off[k]
                z = off[k + 1]
                if a != z and depth >= MAX_DEPTH:
                    add(f"{lead}[{k}] {sigs[k].name}{tag}  (continued below)")
                    blocks.append(k)
                    break
                shown[k] = True
                add(f"{lead}[{k}] {sigs[k].text}{tag}")
                if a == z:
                    break
                depth += 1
                if z - a == 1:
                    k = dst[a]
                    nr = nrs[a] if nrs else 0
                    lead = cont + " └─"
                    cont += "   "
                    continue
                last = z - 1
                stack.append(
                    (dst[last], cont + " └─", cont + "   ", depth, nrs[last] if nrs else 0)
                )
                stack.extend(
                    zip(
                        reversed(dst[a:last]),
                        repeat(cont + " ├─"),
                        repeat(cont + " │ "),
                        repeat(depth),
                        reversed(nrs[a:last]) if nrs else repeat(0),
                    )
                )
                break
    return "\n".join(lines)


def render_dot(c: _Cols) -> str:
    lines = [
        "digraph autograd {",
        "  rankdir=TB;",
        '  node [shape=box, fontname="Helvetica", fontsize=10];',
    ]
    n = len(c.sigs)
    lines.extend(map(str.format, map(attrgetter("dot"), c.sigs), range(n)))
    if c.edge_order is not None:
        src = [e.src for e in c.edge_order]
        dst = [e.dst for e in c.edge_order]
        nrs = [e.input_nr for e in c.edge_order]
    else:
        off = c.off
        src = chain.from_iterable(map(repeat, range(n), map(int.__sub__, off[1:], off)))
        dst, nrs = c.dst, c.nrs
    if nrs is None or not any(nrs):
        lines.extend(map("  n{} -> n{};".format, src, dst))
    else:
        lines.extend(
            f'  n{s} -> n{d} [label="output {nr}"];' if nr else f"  n{s} -> n{d};"
            for s, d, nr in zip(src, dst, nrs, strict=True)
        )
    lines.append("}")
    return "\n".join(lines) + "\n"
