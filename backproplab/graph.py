"""Read the autograd graph behind one or more tensors as plain, immutable data.

`describe` walks ``grad_fn.next_functions`` iteratively (never recursively, so
a chain of 100,000 ops or a graph of a million nodes is fine) and returns a
`Graph`: nodes in a deterministic topological order, the edges between them,
the leaf tensor behind every ``AccumulateGrad`` and the tensors each node
saved for its backward formula. `Graph.to_text` (what ``print`` shows) and
`Graph.to_dot` render it; that code lives in `backproplab._render`.

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
from dataclasses import FrozenInstanceError, dataclass, field
from itertools import accumulate, chain, repeat

import torch

from ._render import dot_format, render_dot, render_text, text_tail

__all__ = ["SavedTensor", "LeafInfo", "Node", "Edge", "Graph", "describe"]

# Values of tensors up to this many elements are copied into the description.
SMALL = 16


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
        return f"[{self.id}] " + text_tail(self.name, self.kind, self.saved, self.leaf)


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


_new = object.__new__
_setattr = object.__setattr__


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

    `describe` keeps the graph in a compact column form and builds the
    `Node` and `Edge` objects the first time ``nodes`` / ``edges`` is read;
    the renderers work from the columns, so ``to_text()`` / ``to_dot()`` of
    a huge graph never create them.
    """

    __slots__ = ("_nodes", "_edges", "roots", "_cols", "_out_c", "_in_c", "__weakref__")

    def __init__(self, nodes: tuple[Node, ...], edges: tuple[Edge, ...], roots: tuple[int, ...]):
        self._fill(nodes, edges, roots, None)

    @classmethod
    def _of(cls, cols: _Cols, roots: tuple[int, ...]) -> Graph:
        g = _new(cls)
        g._fill(None, None, roots, cols)
        return g

    def _fill(self, nodes, edges, roots, cols) -> None:
        # Either nodes/edges or cols is given; the other side is built on demand.
        for k, v in (
            ("_nodes", nodes),
            ("_edges", edges),
            ("roots", roots),
            ("_cols", cols),
            ("_out_c", None),
            ("_in_c", None),
        ):
            _setattr(self, k, v)

    @property
    def nodes(self) -> tuple[Node, ...]:
        """All nodes, ``nodes[i].id == i``, in topological order from the roots."""
        nodes = self._nodes
        if nodes is None:
            with _GCPaused():
                nodes = self._cols.make_nodes()
            _setattr(self, "_nodes", nodes)
        return nodes

    @property
    def edges(self) -> tuple[Edge, ...]:
        """All edges, grouped by ``src`` in node order, each group in position order."""
        edges = self._edges
        if edges is None:
            with _GCPaused():
                edges = self._cols.make_edges()
            _setattr(self, "_edges", edges)
        return edges

    @property
    def _columns(self) -> _Cols:
        cols = self._cols
        if cols is None:
            cols = _Cols.of_objects(self.nodes, self.edges)
            _setattr(self, "_cols", cols)
        return cols

    # -- immutability and value semantics (as a frozen dataclass would) ----
    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.nodes, self.edges, self.roots) == (other.nodes, other.edges, other.roots)

    def __hash__(self) -> int:
        return hash((self.nodes, self.edges, self.roots))

    def __reduce__(self):
        return (Graph, (self.nodes, self.edges, self.roots))

    # -- queries ---------------------------------------------------------
    def node(self, key: int | str) -> Node:
        """The node with this id, or the one whose leaf name or node name is ``key``."""
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise TypeError(
                f"key: expected a node id (int) or a name (str), got {type(key).__name__}"
            )
        nodes = self.nodes
        if isinstance(key, int):
            if not 0 <= key < len(nodes):
                raise ValueError(f"key: expected a node id in 0..{len(nodes) - 1}, got {key}")
            return nodes[key]
        hits = [n for n in nodes if n.leaf is not None and n.leaf.name == key]
        if not hits:
            hits = [n for n in nodes if n.name == key]
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
        if self._nodes is None:
            return [s.name for s in self._cols.sigs]
        return [n.name for n in self._nodes]

    @property
    def _out(self) -> tuple[tuple[Edge, ...], ...]:
        out = self._out_c
        if out is None:
            lists: list[list[Edge]] = [[] for _ in self.nodes]
            for e in self.edges:
                lists[e.src].append(e)
            out = tuple(map(tuple, lists))
            _setattr(self, "_out_c", out)
        return out

    @property
    def _in(self) -> tuple[tuple[Edge, ...], ...]:
        inc = self._in_c
        if inc is None:
            lists: list[list[Edge]] = [[] for _ in self.nodes]
            for e in self.edges:
                lists[e.dst].append(e)
            inc = tuple(map(tuple, lists))
            _setattr(self, "_in_c", inc)
        return inc

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

    # -- renderers (the work is in backproplab._render) -------------------
    def to_text(self) -> str:
        """A tree from each root; shared nodes are shown once, then ``(see [id])``."""
        with _GCPaused():
            return render_text(self._columns, self.roots)

    def to_dot(self) -> str:
        """Graphviz DOT source; arrows point the way gradients flow (output to leaves)."""
        with _GCPaused():
            return render_dot(self._columns)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"Graph({len(self.nodes)} nodes, {len(self.edges)} edges, roots={self.roots})"

    def _repr_pretty_(self, p, cycle: bool) -> None:  # IPython/Jupyter text display
        p.text(self.to_text())

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(self.to_text())}</pre>"


def _distinct(nodes) -> tuple[Node, ...]:
    return tuple({n.id: n for n in nodes}.values())


# ---------------------------------------------------------------------------
# the column form shared by describe, the lazy nodes/edges and the renderers


class _Sig:
    """Everything about a node except its id and fn, with its rendered pieces.

    Nodes that read the same (same type, same saved shapes) share one, so
    each piece is rendered once per distinct description, not once per node.
    """

    __slots__ = ("name", "kind", "saved", "leaf", "text", "dot", "ref")

    def __init__(
        self, name: str, kind: str, saved: tuple[SavedTensor, ...], leaf: LeafInfo | None
    ) -> None:
        self.name = name
        self.kind = kind
        self.saved = saved
        self.leaf = leaf
        self.text = text_tail(name, kind, saved, leaf)  # the text line after "[id] "
        self.dot = dot_format(name, kind, saved, leaf)  # the DOT node line, "%d" twice for the id
        self.ref = name if leaf is None else f"{name} {leaf.name}"


class _Cols:
    """A graph as columns in node-id order.

    ``sigs[k]``/``fns[k]`` describe node k; its edges are
    ``off[k]:off[k + 1]`` in the flat ``dst`` (node ids), ``pos`` and ``nrs``
    (``None`` when every position is the index within the node and every
    input_nr is 0, the usual case).
    """

    __slots__ = ("sigs", "fns", "off", "dst", "pos", "nrs", "edge_order")

    def __init__(self, sigs, fns, off, dst, pos, nrs, edge_order=None) -> None:
        self.sigs = sigs
        self.fns = fns
        self.off = off
        self.dst = dst
        self.pos = pos
        self.nrs = nrs
        self.edge_order = edge_order  # edges in given order, when not grouped by src

    @classmethod
    def of_objects(cls, nodes: Sequence[Node], edges: Sequence[Edge]) -> _Cols:
        """Columns for a Graph built from Node and Edge objects directly."""
        sigs = [_Sig(n.name, n.kind, n.saved, n.leaf) for n in nodes]
        groups: list[list[Edge]] = [[] for _ in nodes]
        for e in edges:
            groups[e.src].append(e)
        flat = [e for grp in groups for e in grp]
        off = [0, *accumulate(map(len, groups))]
        return cls(
            sigs,
            [n.fn for n in nodes],
            off,
            [e.dst for e in flat],
            [e.position for e in flat],
            [e.input_nr for e in flat],
            None if flat == list(edges) else list(edges),
        )

    def make_nodes(self) -> tuple[Node, ...]:
        return tuple(
            _make(
                Node,
                {
                    "id": k,
                    "name": s.name,
                    "kind": s.kind,
                    "saved": s.saved,
                    "leaf": s.leaf,
                    "fn": fn,
                },
            )
            for k, (s, fn) in enumerate(zip(self.sigs, self.fns, strict=True))
        )

    def make_edges(self) -> tuple[Edge, ...]:
        off, dst, pos, nrs = self.off, self.dst, self.pos, self.nrs
        edges = []
        add = edges.append
        for k in range(len(self.sigs)):
            a = off[k]
            for i in range(a, off[k + 1]):
                add(
                    _make(
                        Edge,
                        {
                            "src": k,
                            "dst": dst[i],
                            "position": i - a if pos is None else pos[i],
                            "input_nr": 0 if nrs is None else nrs[i],
                        },
                    )
                )
        return tuple(edges)


def _make(cls: type, fields: dict) -> object:
    # Frozen dataclass without its __init__: about 3x faster for millions of nodes.
    obj = _new(cls)
    _setattr(obj, "__dict__", fields)
    return obj


# ---------------------------------------------------------------------------
# describe


class _BareLeaf:
    """Stands in for the missing grad_fn of a leaf output."""

    next_functions: tuple = ()

    def __init__(self, tensor: torch.Tensor) -> None:
        self.variable = tensor


class _TypeInfo:
    """What is fixed for every autograd node of one Python type."""

    __slots__ = ("name", "kind", "attrs", "sig", "one", "memo", "memo1")

    def __init__(self, name: str | None, kind: str, attrs: list) -> None:
        self.name = name  # None: ask each node (its name is not fixed by its type)
        self.kind = kind
        self.memo: dict = {}  # what the nodes read -> _Sig
        self.memo1: dict = {}  # (shape, dtype) of the only saved attribute -> _Sig
        self.set_attrs(attrs)

    def set_attrs(self, attrs: list) -> None:
        self.attrs = attrs  # [(attr, short), ...] that may hold tensors
        plain = self.name is not None and self.kind == "op"
        # The one description all nodes of this type share, when nothing varies.
        self.sig = _Sig(self.name, "op", (), None) if plain and not attrs else None
        # The attribute to read first when it is the only one (e.g. SinBackward0).
        self.one = attrs[0][0] if plain and len(attrs) == 1 else None
        self.memo1.clear()


_BACKWARD_CFUNCTION = torch.autograd.function.BackwardCFunction
_ACC = "AccumulateGrad"
_TYPES: dict[type, _TypeInfo] = {}
_DTYPES: dict[torch.dtype, str] = {}
_Tensor = torch.Tensor


def _type_info(fn: object) -> _TypeInfo:
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
        info = _TypeInfo(name if name == cls.__name__ or name == _ACC else None, kind, attrs)
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


def _sig_of(fn: object, info: _TypeInfo) -> _Sig:
    """The shared description of one node whose type does not fix it."""
    name = info.name or _norm(fn.name())
    if info.kind == "custom":
        saved = _custom_saved(fn)
        key = (name, saved)
    else:
        # Read each saved attribute once; the key is what varies between
        # nodes of this type (shapes, dtypes, freed or not).
        attrs = info.attrs
        parts: list = [name]
        add = parts.append
        drop = None
        for attr, _ in attrs:
            try:
                v = getattr(fn, attr)
            except RuntimeError:  # released by a backward pass
                add(None)
                continue
            if isinstance(v, _Tensor):
                add((v.shape, v.dtype))
            elif isinstance(v, (tuple, list)):
                ts = tuple((i, t.shape, t.dtype) for i, t in enumerate(v) if isinstance(t, _Tensor))
                add(("seq", ts))
                if v and not ts and all(t is not None for t in v):
                    drop = (drop or set()) | {attr}  # e.g. sizes: never a tensor for this type
            else:
                add(False)
                if v is not None:
                    drop = (drop or set()) | {attr}  # ints, floats, dtypes... fixed per type
        if drop:
            info.set_attrs([a for a in attrs if a[0] not in drop])
        key = tuple(parts)
        sig = info.memo.get(key)
        if sig is not None:
            return sig
        saved = []
        for (_, short), part in zip(attrs, parts[1:], strict=True):
            if part is None:
                saved.append(SavedTensor(short, None, None, True))
            elif part is False:
                pass
            elif part[0] == "seq":
                for i, shape, dt in part[1]:
                    saved.append(SavedTensor(f"{short}[{i}]", tuple(shape), _dtype(dt), False))
            else:
                saved.append(SavedTensor(short, tuple(part[0]), _dtype(part[1]), False))
        saved = tuple(saved)
    sig = info.memo.get(key)
    if sig is None:
        sig = info.memo[key] = _Sig(name, info.kind, saved, None)
    return sig


def _custom_saved(fn: object) -> tuple[SavedTensor, ...]:
    try:
        ts = fn.saved_tensors
    except RuntimeError:
        return (SavedTensor("saved_tensors", None, None, True),)
    return tuple(
        SavedTensor(f"saved_tensors[{i}]", tuple(t.shape), _dtype(t.dtype), False)
        for i, t in enumerate(ts)
        if isinstance(t, _Tensor)
    )


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
    #    each node's children by discovery index, how many edges reach it,
    #    and its shared description (_Sig; leaves get theirs in step 3).
    #    Nodes are keyed by the node object itself: fns keeps them alive.
    fns: list = []
    index: dict = {}
    rows: list[list[int]] = []
    indeg: list[int] = []
    sigs: list = []
    leaves: list[int] = []
    special: list[int] = []  # nodes with an input_nr != 0 or a None before a child
    root_disc: list[int | None] = []
    for t in outs:
        fn = t.grad_fn
        if fn is None:
            root_disc.append(None)  # leaf output: resolved after the walk
            continue
        j = index.get(fn)
        if j is None:
            j = index[fn] = len(fns)
            fns.append(fn)
            indeg.append(0)
        root_disc.append(j)
    types = _TYPES
    get = index.get
    add_fn = fns.append
    add_deg = indeg.append
    add_row = rows.append
    add_sig = sigs.append
    j = 0
    for fn in fns:  # fns grows while we walk it
        row = []
        hole = False
        for child, nr in fn.next_functions:
            if child is None:
                hole = True  # an input that needs no gradient
                continue
            i = get(child)
            if i is None:
                i = index[child] = len(fns)
                add_fn(child)
                add_deg(1)
            else:
                indeg[i] += 1
            row.append(i)
            if nr or hole:
                special.append(j)
        add_row(row)
        info = types.get(type(fn)) or _type_info(fn)
        sig = info.sig
        if sig is None:
            if info.kind == "leaf":
                leaves.append(j)
            elif info.one is not None:  # one saved attribute: read it inline
                try:
                    v = getattr(fn, info.one)
                except RuntimeError:
                    v = None
                if type(v) is _Tensor:
                    key = (v.shape, v.dtype)
                    sig = info.memo1.get(key)
                    if sig is None:
                        sig = _sig_of(fn, info)
                        if info.one is not None:
                            info.memo1[key] = sig
                else:
                    sig = _sig_of(fn, info)
            else:
                sig = _sig_of(fn, info)
        add_sig(sig)
        j += 1

    # 2. Leaf outputs join the AccumulateGrad of the same tensor, if any.
    if None in root_disc:
        variables: dict[int, int] = {}
        for j in leaves:
            variables.setdefault(id(fns[j].variable), j)
        for k, t in enumerate(outs):
            if root_disc[k] is None:
                j = variables.get(id(t))
                if j is None:
                    j = variables[id(t)] = len(fns)
                    fns.append(_BareLeaf(t))
                    rows.append([])
                    indeg.append(0)
                    sigs.append(None)
                    leaves.append(j)
                root_disc[k] = j

    # 3. Topological order (Kahn's algorithm with a stack, children taken in
    #    position order): deterministic, and reads like a depth-first walk.
    order: list[int] = []
    add = order.append
    stack = [j for j in dict.fromkeys(root_disc) if indeg[j] == 0][::-1]
    push = stack.append
    pop = stack.pop
    while stack:
        j = pop()
        add(j)
        for c in reversed(rows[j]):
            d = indeg[c] - 1
            indeg[c] = d
            if not d:
                push(c)
    n = len(order)
    new_id = [0] * n
    for k, j in enumerate(order):
        new_id[j] = k

    # Leaves, named in node order.
    n_default = 0
    for j in sorted(leaves, key=new_id.__getitem__):
        fn = fns[j]
        var = fn.variable
        lname = name_of.get(id(var))
        if lname is None:
            lname = f"leaf{n_default}"
            n_default += 1
        if type(fn) is _BareLeaf:
            fns[j] = None
            name, saved = "Leaf", ()
        else:
            info = types[type(fn)]
            name = info.name or _norm(fn.name())
            saved = _sig_of(fn, info).saved if info.attrs else ()
        sigs[j] = _Sig(name, "leaf", saved, _leaf_info(var, lname))

    # 4. The columns, in node-id order.
    rows_new = list(map(rows.__getitem__, order))
    off = [0, *accumulate(map(len, rows_new))]
    dst = list(map(new_id.__getitem__, chain.from_iterable(rows_new)))
    pos = nrs = None
    if special:
        special_set = set(special)
        pos, nrs = [], []
        for j in order:
            if j in special_set:
                for p, (child, nr) in enumerate(fns[j].next_functions):
                    if child is not None:
                        pos.append(p)
                        nrs.append(nr)
            else:
                pos.extend(range(len(rows[j])))
                nrs.extend(repeat(0, len(rows[j])))
    cols = _Cols(
        list(map(sigs.__getitem__, order)), list(map(fns.__getitem__, order)), off, dst, pos, nrs
    )
    return Graph._of(cols, tuple(new_id[j] for j in root_disc))
