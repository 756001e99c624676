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
>>> dot_format("SinBackward0", "op", (), None) % (3, 3)
'  n3 [label="[3] SinBackward0"];\\n'
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
    """A node's DOT line, newline included, as a ``%`` template taking its id twice."""
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
    body = _dot_escape(text).replace("%", "%%")
    return f'  n%d [label="[%d] {body}"{attrs}];\n'


def render_text(c: _Cols, roots: tuple[int, ...]) -> str:
    sigs, off, dst, nrs = c.sigs, c.off, c.dst, c.nrs
    # Every line's prefix starts with its "\n", so the pieces are joined once
    # with no per-line formatting of the prefix; the leading "\n" is cut at the end.
    parts: list[str] = []
    add = parts.append
    shown = [False] * len(sigs)
    see: dict[int, str] = {}  # "(see [k]) ..." for nodes referred to again
    blocks = list(dict.fromkeys(roots))
    for k0 in blocks:  # grows when a deep subtree is continued in a block of its own
        # (node id, prefix of its line, prefix of its children's lines, depth, input_nr)
        stack = [(k0, "\n", "\n", 0, 0)]
        pop = stack.pop
        while stack:
            k, lead, cont, depth, nr = pop()
            while True:  # follows a node's only child without the stack
                add(lead)
                if shown[k]:
                    line = see.get(k)
                    if line is None:
                        line = see[k] = f"(see [{k}]) {sigs[k].ref}"
                    add(line)
                    if nr:
                        add(f"  (output {nr})")
                    break
                a = off[k]
                z = off[k + 1]
                if a != z and depth >= MAX_DEPTH:
                    tag = f"  (output {nr})" if nr else ""
                    add(f"[{k}] {sigs[k].name}{tag}  (continued below)")
                    blocks.append(k)
                    break
                shown[k] = True
                add(f"[{k}] {sigs[k].text}")
                if nr:
                    add(f"  (output {nr})")
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
    return "".join(parts)[1:]


def render_dot(c: _Cols) -> str:
    # One `%` over a template of the whole section formats every id in C: about
    # twice as fast as a Python-level format call per line.
    n = len(c.sigs)
    ids = range(n)
    twice = chain.from_iterable(zip(ids, ids, strict=True))
    nodes = "".join(map(attrgetter("dot"), c.sigs)) % tuple(twice)
    if c.edge_order is not None:
        src = [e.src for e in c.edge_order]
        dst = [e.dst for e in c.edge_order]
        nrs = [e.input_nr for e in c.edge_order]
    else:
        off = c.off
        src = chain.from_iterable(map(repeat, ids, map(int.__sub__, off[1:], off)))
        dst, nrs = c.dst, c.nrs
    if nrs is None or not any(nrs):
        pairs = chain.from_iterable(zip(src, dst, strict=True))
        edges = ("  n%d -> n%d;\n" * len(dst)) % tuple(pairs)
    else:
        edges = "".join(
            f'  n{s} -> n{d} [label="output {nr}"];\n' if nr else f"  n{s} -> n{d};\n"
            for s, d, nr in zip(src, dst, nrs, strict=True)
        )
    return (
        'digraph autograd {\n  rankdir=TB;\n  node [shape=box, fontname="Helvetica", '
        f"fontsize=10];\n{nodes}{edges}}}\n"
    )
