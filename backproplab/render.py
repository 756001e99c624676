"""Write a described graph as a text tree or as Graphviz DOT.

Both renderers take a `backproplab.graph.Graph` and use only its public
fields, so this module can be read on its own; it imports nothing of the
package (``graph`` imports it), and its annotations say ``Any`` where they
mean a Graph, a Node, a LeafInfo or a SavedTensor of that module.

>>> import torch
>>> from backproplab.graph import describe
>>> x = torch.tensor(1.0, requires_grad=True)
>>> print(to_text(describe(x.sin(), names={"x": x})))
[0] SinBackward0  saved: self (float32, ())
 └─[1] AccumulateGrad  x  shape=()  value=1.0
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_DEPTH", "WIDTH", "node_text", "saved_text", "to_dot", "to_text"]

# The text tree indents at most this many levels; a deeper subtree is
# continued in a block of its own, so the text stays linear in the graph size.
MAX_DEPTH = 12


def _fmt(v: float) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return f"{v:.1f}"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _shape(shape: tuple[int, ...] | None) -> str:
    return "?" if shape is None else str(tuple(shape))


# Lines of the text tree stay within this width where they can (a notebook
# wraps longer ones, mid-word): long value lists are cut short with "...", and
# saved tensors move to a line of their own.
WIDTH = 88


def _values(
    values: tuple[float, ...] | None, shape: tuple[int, ...], shown: int | None = None
) -> str:
    """The values as a list; only the first ``shown`` of them, then "...", when given."""
    if values is None:
        return "?"
    if len(shape) == 0:
        return _fmt(values[0])
    if shown is None or shown >= len(values):
        return "[" + ", ".join(map(_fmt, values)) + "]"
    return "[" + ", ".join(map(_fmt, values[:shown])) + ", ...]"


def saved_text(s: Any) -> str:
    """One saved tensor as the text tree shows it, e.g. ``self (float32, (3,))``."""
    if s.modified:
        then, now = s.versions or ("?", "?")
        return f"{s.name} (modified in place: saved at version {then}, now {now})"
    if s.freed:
        return f"{s.name} (freed)"
    return f"{s.name} ({s.dtype}, {_shape(s.shape)})"


def _leaf_text(leaf: Any, room: int) -> list[str]:
    parts = [leaf.name, f"shape={_shape(leaf.shape)}"]
    if leaf.dtype != "float32":
        parts.append(f"dtype={leaf.dtype}")
    # Show every value and grad entry that fits in the room left: drop one at
    # a time from the longer of the two lists until the line fits.
    n = len(leaf.value) if leaf.value is not None else 0
    value_shown, grad_shown = n, (n if leaf.grad is not None else 0)

    def numbers() -> list[str]:
        out = []
        if leaf.value is not None:
            out.append(f"value={_values(leaf.value, leaf.shape, value_shown)}")
        if leaf.has_grad:
            grad = "(large)" if leaf.grad is None else _values(leaf.grad, leaf.shape, grad_shown)
            out.append(f"grad={grad}")
        return out

    while len("  ".join(parts + numbers())) > room and max(value_shown, grad_shown) > 1:
        if value_shown >= grad_shown:
            value_shown -= 1
        else:
            grad_shown -= 1
    return parts + numbers()


def node_text(node: Any, room: int | None = None) -> str:
    """A node's line of the text tree after its ``[id] ``.

    When the line would not fit in ``room`` characters, the saved tensors go
    on a second line (the caller indents it).
    """
    parts = [node.name]
    if node.kind == "custom":
        parts.append("(custom Function)")
    if node.leaf is not None:
        left = 10**9 if room is None else room - len(node.name) - 2
        parts += _leaf_text(node.leaf, left)
    line = "  ".join(parts)
    if node.saved:
        saved = "saved: " + ", ".join(map(saved_text, node.saved))
        if room is not None and len(line) + 2 + len(saved) > room:
            return f"{line}\n{saved}"
        line += "  " + saved
    return line


def _reference(node: Any) -> str:
    return node.name if node.leaf is None else f"{node.name} {node.leaf.name}"


def to_text(graph: Any) -> str:
    """A tree from each root, drawn with a stack (no recursion).

    A node already drawn is shown again as ``(see [id])``; an edge to the
    second output of a node says ``(output 1)``.
    """
    children: list[list[tuple[int, int]]] = [[] for _ in graph.nodes]
    for e in graph.edges:
        children[e.src].append((e.dst, e.input_nr))
    lines: list[str] = []
    shown = [False] * len(graph.nodes)
    blocks = list(dict.fromkeys(graph.roots))
    for root in blocks:  # grows when a deep subtree is continued below
        # (node id, prefix of its own line, prefix of its children's lines, depth, input_nr)
        stack = [(root, "", "", 0, 0)]
        while stack:
            k, lead, cont, depth, nr = stack.pop()
            node = graph.nodes[k]
            output = f"  (output {nr})" if nr else ""
            if shown[k]:
                lines.append(f"{lead}(see [{k}]) {_reference(node)}{output}")
                continue
            if children[k] and depth >= MAX_DEPTH:
                lines.append(f"{lead}[{k}] {node.name}{output}  (continued below)")
                blocks.append(k)
                continue
            shown[k] = True
            head = f"{lead}[{k}] "
            text = node_text(node, WIDTH - len(head) - len(output))
            first, _, saved = text.partition("\n")
            lines.append(f"{head}{first}{output}")
            if saved:  # under the node, inside the tree's own indentation
                bar = " │ " if children[k] else "   "
                lines.append(f"{cont}{bar}    {saved}")
            # Push the last child first, so the first child is drawn next.
            last = len(children[k]) - 1
            for i in range(last, -1, -1):
                child, child_nr = children[k][i]
                branch, more = (" └─", "   ") if i == last else (" ├─", " │ ")
                stack.append((child, cont + branch, cont + more, depth + 1, child_nr))
    return "\n".join(lines)


def _dot_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _dot_node(node: Any) -> str:
    text = node.name
    style = ""
    if node.leaf is not None:
        leaf = node.leaf
        text += f"\n{leaf.name}  {_shape(leaf.shape)}"
        if leaf.value is not None and len(leaf.value) == 1:
            text += f"  value={_fmt(leaf.value[0])}"
        style = ', style=filled, fillcolor="lightblue"'
    elif node.kind == "custom":
        style = ', style=filled, fillcolor="lightyellow"'
    if node.saved:
        notes = {True: " (freed)", False: ""}
        text += "\nsaved: " + ", ".join(
            s.name + (" (modified in place)" if s.modified else notes[s.freed]) for s in node.saved
        )
    return f'  n{node.id} [label="[{node.id}] {_dot_escape(text)}"{style}];\n'


def to_dot(graph: Any) -> str:
    """Graphviz DOT source; arrows point the way gradients flow (output to leaves)."""
    nodes = "".join(_dot_node(n) for n in graph.nodes)
    edges = "".join(
        f'  n{e.src} -> n{e.dst} [label="output {e.input_nr}"];\n'
        if e.input_nr
        else f"  n{e.src} -> n{e.dst};\n"
        for e in graph.edges
    )
    return (
        'digraph autograd {\n  rankdir=TB;\n  node [shape=box, fontname="Helvetica", '
        f"fontsize=10];\n{nodes}{edges}}}\n"
    )
