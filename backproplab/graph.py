"""Read the autograd graph behind one or more tensors as plain, immutable data.

`describe` walks ``grad_fn.next_functions`` iteratively (never recursively, so
a chain of 100,000 ops or a graph of a million nodes is fine) and returns a
`Graph`: nodes in a deterministic topological order, the edges between them,
the leaf tensor behind every ``AccumulateGrad`` and the tensors each node
saved for its backward formula.

>>> import torch
>>> a = torch.tensor(2.0, requires_grad=True)
>>> b = torch.tensor(3.0, requires_grad=True)
>>> d = torch.tensor(4.0, requires_grad=True)
>>> g = describe((a + b) * d, names={"a": a, "b": b, "d": d})
>>> g.names()
['MulBackward0', 'AddBackward0', 'AccumulateGrad', 'AccumulateGrad', 'AccumulateGrad']
>>> print(g)
[0] MulBackward0  saved: other (float32, ()), self (float32, ())
 ├─[1] AddBackward0
 │  ├─[2] AccumulateGrad  a  shape=()  value=2.0
 │  └─[3] AccumulateGrad  b  shape=()  value=3.0
 └─[4] AccumulateGrad  d  shape=()  value=4.0

Choices worth knowing:

* Only tensors are listed as saved values. Non-tensor saved attributes
  (integers, sizes such as ``_saved_self_sym_sizes``, scalars such as
  ``_saved_alpha``) are skipped, and so are attributes holding ``None``. A
  saved tuple of tensors gives one entry per element: ``tensors[0]``, ...
* A custom ``torch.autograd.Function`` node lists ``ctx.saved_tensors`` as
  ``saved_tensors[0]``, ...; once freed, a single ``saved_tensors`` entry
  with ``freed=True`` (its length is no longer known).
* An output that is itself a leaf (no ``grad_fn``) becomes a node named
  ``"Leaf"`` of kind ``"leaf"`` with ``fn=None``, unless the same tensor
  already appears behind an ``AccumulateGrad`` of another output.
* Outputs that do not require grad have no graph: ``ValueError`` naming
  ``outputs``.
* Entries of ``names`` that are not leaves are accepted and ignored here
  (`backproplab.trace` uses them to name intermediate results).
"""

from __future__ import annotations

import gc
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import torch

__all__ = ["SavedTensor", "LeafInfo", "Node", "Edge", "Graph", "describe"]

# Values of tensors up to this many elements are copied into the description.
SMALL = 16
# The text tree indents at most this many levels; deeper subtrees are
# continued in a new block, which keeps the text linear in the graph size.
MAX_DEPTH = 24


@dataclass(frozen=True)
class SavedTensor:
    """A tensor a node keeps for its backward formula.

    ``name`` is the attribute without its ``_saved_`` prefix ("self",
    "other", "result"); ``shape``/``dtype`` are ``None`` once ``freed``.
    """

    name: str
    shape: tuple[int, ...] | None
    dtype: str | None
    freed: bool


@dataclass(frozen=True)
class LeafInfo:
    """The leaf tensor behind an ``AccumulateGrad`` node, with its name."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    value: tuple[float, ...] | None
    grad: tuple[float, ...] | None
    has_grad: bool
    tensor: torch.Tensor = field(compare=False, repr=False)


@dataclass(frozen=True)
class Node:
    """One node of the graph; ``id`` is its index in `Graph.nodes`.

    ``kind`` is "op", "leaf" (``AccumulateGrad`` or a bare leaf output) or
    "custom" (a ``torch.autograd.Function``).
    """

    id: int
    name: str
    kind: str
    saved: tuple[SavedTensor, ...]
    leaf: LeafInfo | None
    fn: object = field(compare=False, repr=False)

    def label(self) -> str:
        """One line of the text tree, e.g. ``"[2] AccumulateGrad  a  shape=()  value=2.0"``."""
        parts = [f"[{self.id}] {self.name}"]
        if self.kind == "custom":
            parts.append("(custom Function)")
        leaf = self.leaf
        if leaf is not None:
            parts.append(leaf.name)
            parts.append(f"shape={_shape(leaf.shape)}")
            if leaf.dtype != "float32":
                parts.append(f"dtype={leaf.dtype}")
            if leaf.value is not None:
                parts.append(f"value={_values(leaf.value, leaf.shape)}")
            if leaf.has_grad:
                parts.append(
                    "grad="
                    + (_values(leaf.grad, leaf.shape) if leaf.grad is not None else "(large)")
                )
        if self.saved:
            parts.append("saved: " + ", ".join(map(_saved_text, self.saved)))
        return "  ".join(parts)


@dataclass(frozen=True)
class Edge:
    """``src`` (the consumer, nearer the output) sends a gradient to ``dst``.

    ``position`` indexes ``src.next_functions`` (and src's grad_inputs);
    ``input_nr`` says which output of ``dst`` the gradient belongs to.
    """

    src: int
    dst: int
    position: int
    input_nr: int


@dataclass(frozen=True, repr=False)
class Graph:
    """An immutable description of an autograd graph.

    ``nodes`` are in topological order from the roots (every node comes
    before the nodes it sends gradients to) and ``nodes[i].id == i``;
    ``roots`` holds one node id per output.

    >>> import torch
    >>> x = torch.tensor(1.0, requires_grad=True)
    >>> g = describe(x.sin(), names={"x": x})
    >>> g.names(), g.node("x").id, [n.name for n in g.children(0)]
    (['SinBackward0', 'AccumulateGrad'], 1, ['AccumulateGrad'])
    """

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    roots: tuple[int, ...]

    # -- queries ---------------------------------------------------------
    def node(self, key: int | str) -> Node:
        """The node with this id, or the one whose leaf name or node name is ``key``."""
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise TypeError(
                f"key: expected a node id (int) or a name (str), got {type(key).__name__}"
            )
        if isinstance(key, int):
            if not 0 <= key < len(self.nodes):
                raise ValueError(f"key: expected a node id in 0..{len(self.nodes) - 1}, got {key}")
            return self.nodes[key]
        hits = [n for n in self.nodes if n.leaf is not None and n.leaf.name == key]
        if not hits:
            hits = [n for n in self.nodes if n.name == key]
        if len(hits) != 1:
            what = (
                "no node"
                if not hits
                else f"{len(hits)} nodes ({', '.join(f'[{n.id}]' for n in hits[:5])})"
            )
            raise ValueError(
                f"key: expected a unique leaf or node name, got {key!r} which matches {what}"
            )
        return hits[0]

    def leaves(self) -> tuple[Node, ...]:
        """The nodes of kind "leaf", in node order."""
        return tuple(n for n in self.nodes if n.kind == "leaf")

    def names(self) -> list[str]:
        """Node names in topological order (what `check_graph` compares with)."""
        return [n.name for n in self.nodes]

    @cached_property
    def _out(self) -> tuple[tuple[Edge, ...], ...]:
        out: list[list[Edge]] = [[] for _ in self.nodes]
        for e in self.edges:
            out[e.src].append(e)
        return tuple(map(tuple, out))

    @cached_property
    def _in(self) -> tuple[tuple[Edge, ...], ...]:
        inc: list[list[Edge]] = [[] for _ in self.nodes]
        for e in self.edges:
            inc[e.dst].append(e)
        return tuple(map(tuple, inc))

    def out_edges(self, id: int) -> tuple[Edge, ...]:
        """Edges leaving node ``id`` (towards the leaves), in position order."""
        return self._out[self.node(id).id]

    def in_edges(self, id: int) -> tuple[Edge, ...]:
        """Edges arriving at node ``id`` (from its consumers)."""
        return self._in[self.node(id).id]

    def children(self, id: int) -> tuple[Node, ...]:
        """Distinct nodes ``id`` sends gradients to, in position order."""
        return _distinct(self.nodes[e.dst] for e in self.out_edges(id))

    def parents(self, id: int) -> tuple[Node, ...]:
        """Distinct nodes that send gradients to ``id``."""
        return _distinct(self.nodes[e.src] for e in self.in_edges(id))

    # -- renderers -------------------------------------------------------
    def to_text(self) -> str:
        """A tree from each root; shared nodes are shown once, then ``(see [id])``."""
        with _GCPaused():
            return _render_text(self)

    def to_dot(self) -> str:
        """Graphviz DOT source; arrows point the way gradients flow (output to leaves)."""
        with _GCPaused():
            return _render_dot(self)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"Graph({len(self.nodes)} nodes, {len(self.edges)} edges, roots={self.roots})"

    def _repr_pretty_(self, p, cycle: bool) -> None:  # IPython/Jupyter text display
        p.text(self.to_text())

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(self.to_text())}</pre>"


# ---------------------------------------------------------------------------
# describe


class _BareLeaf:
    """Stands in for the missing grad_fn of a leaf output."""

    next_functions: tuple = ()

    def __init__(self, tensor: torch.Tensor) -> None:
        self.variable = tensor


_BACKWARD_CFUNCTION = torch.autograd.function.BackwardCFunction
_ACC = "AccumulateGrad"
# type(fn) -> [name or None (per instance), kind, [(attr, short), ...], set of non-tensor attrs]
_TYPES: dict[type, list] = {}
_DTYPES: dict[torch.dtype, str] = {}


def _type_info(fn: object) -> list:
    cls = type(fn)
    info = _TYPES.get(cls)
    if info is None:
        name = _norm(fn.name())
        if isinstance(fn, _BACKWARD_CFUNCTION):
            kind, attrs = "custom", []
        else:
            kind = "leaf" if name == _ACC else "op"
            # _saved_* are class-level properties: list them once per type.
            attrs = [(a, a[7:]) for a in dir(cls) if a.startswith("_saved_")]
        # C++ node names are fixed per class; anything else is asked per node.
        info = [name if name == cls.__name__ or name == _ACC else None, kind, attrs, set()]
        _TYPES[cls] = info
    return info


def _norm(name: str) -> str:
    return name.rsplit("::", 1)[-1]


def _dtype(dt: torch.dtype) -> str:
    s = _DTYPES.get(dt)
    if s is None:
        s = _DTYPES[dt] = str(dt).removeprefix("torch.")
    return s


def _flat(t: torch.Tensor) -> tuple[float, ...] | None:
    if t.numel() > SMALL or t.is_sparse or t.device.type == "meta":
        return None
    vals = t.detach().reshape(-1).tolist()
    try:
        return tuple(float(v) for v in vals)
    except TypeError:  # complex values stay complex
        return tuple(vals)


def _saved_of(fn: object, info: list, memo: dict) -> tuple[SavedTensor, ...]:
    if info[1] == "custom":
        try:
            ts = fn.saved_tensors
        except RuntimeError:
            return (SavedTensor("saved_tensors", None, None, True),)
        return tuple(
            SavedTensor(f"saved_tensors[{i}]", tuple(t.shape), _dtype(t.dtype), False)
            for i, t in enumerate(ts)
            if isinstance(t, torch.Tensor)
        )
    skip = info[3]
    out = []
    for attr, short in info[2]:
        if attr in skip:
            continue
        try:
            v = getattr(fn, attr)
        except RuntimeError:  # released by a backward pass
            out.append(_intern(memo, short, None, None))
            continue
        if isinstance(v, torch.Tensor):
            out.append(_intern(memo, short, tuple(v.shape), v.dtype))
        elif isinstance(v, (tuple, list)):
            tensors = [(i, t) for i, t in enumerate(v) if isinstance(t, torch.Tensor)]
            for i, t in tensors:
                out.append(_intern(memo, f"{short}[{i}]", tuple(t.shape), t.dtype))
            if v and not tensors and all(t is not None for t in v):
                skip.add(attr)  # e.g. sizes: never a tensor for this node type
        elif v is not None:
            skip.add(attr)  # ints, floats, dtypes... fixed per node type
    # Equal tuples are shared: saves memory and lets renderers cache by id.
    key = tuple(map(id, out))
    got = memo.get(key)
    if got is None:
        got = memo[key] = tuple(out)
    return got


def _intern(memo: dict, name: str, shape: tuple | None, dtype: torch.dtype | None) -> SavedTensor:
    key = (name, shape, dtype)
    st = memo.get(key)
    if st is None:
        freed = shape is None
        st = memo[key] = SavedTensor(name, shape, None if freed else _dtype(dtype), freed)
    return st


_new = object.__new__
_setattr = object.__setattr__


def _make(cls: type, fields: dict) -> object:
    # Frozen dataclass without its __init__: about 3x faster for millions of nodes.
    obj = _new(cls)
    _setattr(obj, "__dict__", fields)
    return obj


class _GCPaused:
    """Pause the cyclic GC: building millions of small objects triggers it
    over and over although none of them form cycles."""

    def __enter__(self) -> None:
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was:
            gc.enable()


def _leaf_info(t: torch.Tensor, name: str) -> LeafInfo:
    g = t.grad
    return LeafInfo(
        name=name,
        shape=tuple(t.shape),
        dtype=_dtype(t.dtype),
        value=_flat(t),
        grad=None if g is None else _flat(g),
        has_grad=g is not None,
        tensor=t,
    )


def _check_outputs(outputs: object) -> list[torch.Tensor]:
    expected = "outputs: expected a torch.Tensor or a sequence of tensors"
    if isinstance(outputs, torch.Tensor):
        outs = [outputs]
    elif isinstance(outputs, Sequence) and not isinstance(outputs, (str, bytes)):
        outs = list(outputs)
        if not outs:
            raise ValueError(f"{expected}, got an empty {type(outputs).__name__}")
        for i, t in enumerate(outs):
            if not isinstance(t, torch.Tensor):
                raise TypeError(
                    f"{expected}, got a {type(outputs).__name__} holding "
                    f"{type(t).__name__} at index {i}"
                )
    else:
        raise TypeError(f"{expected}, got {type(outputs).__name__}")
    for i, t in enumerate(outs):
        if not t.requires_grad:
            where = "" if isinstance(outputs, torch.Tensor) else f" at index {i}"
            raise ValueError(
                f"outputs: expected tensors that require grad, got a tensor{where} with "
                "requires_grad=False, so it has no autograd graph (make its inputs with "
                "requires_grad=True, outside torch.no_grad())"
            )
    return outs


def _check_names(names: object) -> dict[int, str]:
    if names is None:
        return {}
    if not isinstance(names, Mapping):
        raise TypeError(
            f"names: expected a mapping from str to torch.Tensor, got {type(names).__name__}"
        )
    by_id: dict[int, str] = {}
    for k, v in names.items():
        if not isinstance(k, str):
            raise TypeError(f"names: expected str keys, got {type(k).__name__} key {k!r}")
        if not isinstance(v, torch.Tensor):
            raise TypeError(
                f"names: expected torch.Tensor values, got {type(v).__name__} for key {k!r}"
            )
        by_id.setdefault(id(v), k)
    return by_id


def describe(
    outputs: torch.Tensor | Sequence[torch.Tensor], names: Mapping[str, torch.Tensor] | None = None
) -> Graph:
    """Describe the autograd graph behind ``outputs``.

    ``names`` maps a display name to a leaf tensor (``{"w": w}``); other
    leaves are called ``leaf0``, ``leaf1``... in node order.

    >>> import torch
    >>> a = torch.tensor(2.0, requires_grad=True)
    >>> g = describe(a + a, names={"a": a})
    >>> [(e.src, e.dst, e.position) for e in g.edges]
    [(0, 1, 0), (0, 1, 1)]
    """
    outs = _check_outputs(outputs)
    name_of = _check_names(names)
    with _GCPaused():
        return _describe(outs, name_of)


def _describe(outs: list[torch.Tensor], name_of: dict[int, str]) -> Graph:

    # 1. Discover every node once (a work list, not recursion), remembering
    #    each node's children by discovery index and how many edges reach it.
    fns: list = []
    index: dict[int, int] = {}
    kids: list[list] = []
    indeg: list[int] = []
    root_disc: list[int | None] = []
    for t in outs:
        fn = t.grad_fn
        if fn is None:
            root_disc.append(None)  # leaf output: resolved after the walk
            continue
        j = index.get(id(fn))
        if j is None:
            j = index[id(fn)] = len(fns)
            fns.append(fn)
            indeg.append(0)
        root_disc.append(j)
    i = 0
    while i < len(fns):
        row = []
        for child, nr in fns[i].next_functions:
            if child is None:
                row.append(None)  # an input that needs no gradient
                continue
            j = index.get(id(child))
            if j is None:
                j = index[id(child)] = len(fns)
                fns.append(child)
                indeg.append(0)
            indeg[j] += 1
            row.append((j, nr))
        kids.append(row)
        i += 1

    # 2. Leaf tensors behind AccumulateGrad nodes; leaf outputs join them.
    infos = [_type_info(fn) for fn in fns]
    variables: dict[int, int] = {}
    for j, fn in enumerate(fns):
        if infos[j][1] == "leaf":
            variables.setdefault(id(fn.variable), j)
    for k, t in enumerate(outs):
        if root_disc[k] is None:
            j = variables.get(id(t))
            if j is None:
                j = variables[id(t)] = len(fns)
                fns.append(_BareLeaf(t))
                infos.append(["Leaf", "leaf", [], set()])
                kids.append([])
                indeg.append(0)
            root_disc[k] = j

    # 3. Topological order (Kahn's algorithm with a stack, children taken in
    #    position order): deterministic, and reads like a depth-first walk.
    order: list[int] = []
    stack = [j for j in dict.fromkeys(root_disc) if indeg[j] == 0][::-1]
    while stack:
        j = stack.pop()
        order.append(j)
        for entry in reversed(kids[j]):
            if entry is not None:
                c = entry[0]
                indeg[c] -= 1
                if indeg[c] == 0:
                    stack.append(c)
    new_id = [0] * len(fns)
    for k, j in enumerate(order):
        new_id[j] = k

    # 4. Build the immutable description.
    nodes = []
    edges = []
    append_edge = edges.append
    n_default = 0
    memo: dict = {}
    for k, j in enumerate(order):
        fn = fns[j]
        info = infos[j]
        kind = info[1]
        leaf = None
        if kind == "leaf":
            var = fn.variable
            lname = name_of.get(id(var))
            if lname is None:
                lname = f"leaf{n_default}"
                n_default += 1
            leaf = _leaf_info(var, lname)
            if type(fn) is _BareLeaf:
                fn = None
        saved = _saved_of(fn, info, memo) if info[2] or kind == "custom" else ()
        nodes.append(
            _make(
                Node,
                {
                    "id": k,
                    "name": info[0] or _norm(fn.name()),
                    "kind": kind,
                    "saved": saved,
                    "leaf": leaf,
                    "fn": fn,
                },
            )
        )
        for pos, entry in enumerate(kids[j]):
            if entry is not None:
                append_edge(
                    _make(
                        Edge,
                        {"src": k, "dst": new_id[entry[0]], "position": pos, "input_nr": entry[1]},
                    )
                )
    return Graph(tuple(nodes), tuple(edges), tuple(new_id[j] for j in root_disc))


# ---------------------------------------------------------------------------
# renderers


def _distinct(nodes) -> tuple[Node, ...]:
    return tuple({n.id: n for n in nodes}.values())


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


def _ref(node: Node) -> str:
    return f"(see [{node.id}]) {node.name}" + (
        f" {node.leaf.name}" if node.leaf is not None else ""
    )


def _render_text(g: Graph) -> str:
    nodes = g.nodes
    out = g._out
    lines: list[str] = []
    add = lines.append
    shown = [False] * len(nodes)
    saved_text: dict[int, str] = {}  # id(saved tuple) -> text; describe shares equal tuples
    blocks = list(dict.fromkeys(g.roots))
    b = 0
    while b < len(blocks):
        # (node id, prefix of its line, prefix of its children's lines, depth, input_nr)
        stack = [(blocks[b], "", "", 0, 0)]
        b += 1
        while stack:
            k, lead, cont, depth, nr = stack.pop()
            node = nodes[k]
            tag = f"  (output {nr})" if nr else ""
            if shown[k]:
                add(lead + _ref(node) + tag)
                continue
            es = out[k]
            if es and depth >= MAX_DEPTH:
                add(f"{lead}[{k}] {node.name}{tag}  (continued below)")
                blocks.append(k)
                continue
            shown[k] = True
            if node.kind == "op":  # the common case, without building a parts list
                saved = node.saved
                if saved:
                    st = saved_text.get(id(saved))
                    if st is None:
                        st = saved_text[id(saved)] = "  saved: " + ", ".join(
                            map(_saved_text, saved)
                        )
                    add(f"{lead}[{k}] {node.name}{st}{tag}")
                else:
                    add(f"{lead}[{k}] {node.name}{tag}")
            else:
                add(lead + node.label() + tag)
            last = len(es) - 1
            for i in range(last, -1, -1):
                e = es[i]
                if i == last:
                    stack.append((e.dst, cont + " └─", cont + "   ", depth + 1, e.input_nr))
                else:
                    stack.append((e.dst, cont + " ├─", cont + " │ ", depth + 1, e.input_nr))
    return "\n".join(lines)


def _dot_quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _render_dot(g: Graph) -> str:
    lines = [
        "digraph autograd {",
        "  rankdir=TB;",
        '  node [shape=box, fontname="Helvetica", fontsize=10];',
    ]
    for n in g.nodes:
        text = f"[{n.id}] {n.name}"
        attrs = ""
        if n.leaf is not None:
            text += f"\n{n.leaf.name}  {_shape(n.leaf.shape)}"
            if n.leaf.value is not None and len(n.leaf.value) == 1:
                text += f"  value={_fmt(n.leaf.value[0])}"
            attrs = ', style=filled, fillcolor="lightblue"'
        elif n.kind == "custom":
            attrs = ', style=filled, fillcolor="lightyellow"'
        if n.saved:
            text += "\nsaved: " + ", ".join(
                s.name + (" (freed)" if s.freed else "") for s in n.saved
            )
        lines.append(f"  n{n.id} [label={_dot_quote(text)}{attrs}];")
    for e in g.edges:
        extra = f' [label="output {e.input_nr}"]' if e.input_nr else ""
        lines.append(f"  n{e.src} -> n{e.dst}{extra};")
    lines.append("}")
    return "\n".join(lines) + "\n"
