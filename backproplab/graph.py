"""Read the autograd graph behind one or more tensors as plain, immutable data.

This is lesson 01's walk done for you. Every ``grad_fn`` node lists where its
gradients go in ``next_functions``; `describe` follows those links from the
outputs down to the leaves and returns a `Graph`: the nodes in a fixed order,
the edges between them, the leaf tensor behind every ``AccumulateGrad`` and
the tensors each node saved for its backward formula. ``print(graph)`` shows
it as a tree (`backproplab.render` writes the text and the DOT source).

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

* The walk uses a list of nodes still to visit, never recursion, so a chain
  of 100,000 operations is fine, and its time grows linearly with the graph.
* Only tensors are listed as saved values: integers, sizes and scalars that
  a node also keeps (``_saved_alpha``...) are skipped. A saved tuple of
  tensors gives one entry per element: ``tensors[0]``, ...
* A custom ``torch.autograd.Function`` lists ``ctx.saved_tensors`` as
  ``saved_tensors[0]``, ...; once freed, one ``saved_tensors`` entry.
* A saved tensor is *freed* after a backward pass released it, and
  *modified* when it was changed in place after it was saved (the backward
  pass would then fail: lesson 14).
* An output that is itself a leaf becomes a node named ``"Leaf"`` (kind
  ``"leaf"``, ``fn=None``), unless the same tensor already sits behind an
  ``AccumulateGrad`` of another output.
* Entries of ``names`` that are not leaves are accepted and ignored here
  (`backproplab.trace` uses them to name intermediate results).
"""

from __future__ import annotations

import contextlib
import gc
import html
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import NamedTuple

import torch

from . import render

__all__ = ["SMALL", "Edge", "Graph", "LeafInfo", "Node", "SavedMemory", "SavedTensor",
           "check_names", "cycle_collector_paused", "describe", "saved_attributes"]

# Values of tensors up to this many elements are copied into the description.
SMALL = 16


@dataclass(frozen=True)
class SavedTensor:
    """A tensor a node keeps for its backward formula.

    ``name`` is the attribute without its ``_saved_`` prefix ("self",
    "other", "result"); ``shape``/``dtype`` are ``None`` once ``freed``.
    ``nbytes`` is the size of the storage the tensor keeps alive (None when
    unknown); ``modified`` says it was changed in place after being saved,
    ``versions`` then holds (version when saved, version now).
    """

    name: str
    shape: tuple[int, ...] | None
    dtype: str | None
    freed: bool
    nbytes: int | None = field(default=None, compare=False, repr=False)
    modified: bool = field(default=False, repr=False)
    versions: tuple[int, int] | None = field(default=None, repr=False)
    storage: int | None = field(default=None, compare=False, repr=False)


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
        return f"[{self.id}] {render.node_text(self)}"


class Edge(NamedTuple):
    """``src`` (the consumer, nearer the output) sends a gradient to ``dst``.

    ``position`` indexes ``src.next_functions`` (and src's grad_inputs);
    ``input_nr`` says which output of ``dst`` the gradient belongs to. (A
    named tuple rather than a dataclass: a graph can have hundreds of
    thousands of edges, and tuples are made several times faster.)
    """

    src: int
    dst: int
    position: int
    input_nr: int


@dataclass(frozen=True)
class SavedMemory:
    """What the saved tensors of a graph keep in memory, in bytes.

    Each storage counts once, for the node that saved it first in the forward
    pass (the last in node order), so ``by_node`` and ``by_op`` add up to
    ``total``. ``leaf_bytes`` is
    the part of ``total`` held in the storage of the graph's leaf tensors
    (parameters, inputs that require grad), which exists anyway; the rest
    is memory kept only for the backward pass.
    """

    total: int
    by_node: dict[int, int]
    by_op: dict[str, int]
    leaf_bytes: int
    storages: int

    def to_text(self) -> str:
        """Bytes by op name, then the total."""
        width = max([len(name) for name in self.by_op] + [2])
        lines = [f"{name:<{width}}  {nbytes:>12,} bytes" for name, nbytes in self.by_op.items()]
        lines.append(
            f"total {self.total:,} bytes in {self.storages} storages "
            f"({self.leaf_bytes:,} bytes of them in leaf tensors)"
        )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()


@dataclass(frozen=True)
class Graph:
    """An immutable description of an autograd graph.

    ``nodes`` are in topological order from the roots (every node comes
    before the nodes it sends gradients to) and ``nodes[i].id == i``;
    ``edges`` are grouped by ``src`` in node order; ``roots`` holds one node
    id per output.

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
    def _out(self) -> list[list[Edge]]:
        out: list[list[Edge]] = [[] for _ in self.nodes]
        for e in self.edges:
            out[e.src].append(e)
        return out

    @cached_property
    def _in(self) -> list[list[Edge]]:
        into: list[list[Edge]] = [[] for _ in self.nodes]
        for e in self.edges:
            into[e.dst].append(e)
        return into

    def out_edges(self, id: int) -> tuple[Edge, ...]:
        """Edges leaving node ``id`` (towards the leaves), in position order."""
        return tuple(self._out[self.node(id).id])

    def in_edges(self, id: int) -> tuple[Edge, ...]:
        """Edges arriving at node ``id`` (from its consumers)."""
        return tuple(self._in[self.node(id).id])

    def children(self, id: int) -> tuple[Node, ...]:
        """Distinct nodes ``id`` sends gradients to, in position order."""
        return _distinct(self.nodes[e.dst] for e in self.out_edges(id))

    def parents(self, id: int) -> tuple[Node, ...]:
        """Distinct nodes that send gradients to ``id``."""
        return _distinct(self.nodes[e.src] for e in self.in_edges(id))

    def saved_memory(self) -> SavedMemory:
        """Bytes kept alive by the tensors the nodes saved for backward.

        >>> import torch
        >>> x = torch.ones(4, requires_grad=True)      # 4 float32 = 16 bytes
        >>> y = x.exp()                                  # saves its result: 16 bytes
        >>> m = describe((y * x).sum()).saved_memory()   # mul saves y and x: counted once
        >>> m.total, m.leaf_bytes, m.by_op
        (32, 16, {'MulBackward0': 16, 'ExpBackward0': 16})
        >>> print(m)
        MulBackward0            16 bytes
        ExpBackward0            16 bytes
        total 32 bytes in 2 storages (16 bytes of them in leaf tensors)
        """
        # A storage belongs to the node that saved it first in the forward
        # pass, which is the last one in node order.
        owner: dict[int, int] = {}
        for n in reversed(self.nodes):
            for s in n.saved:
                if s.storage is not None:
                    owner.setdefault(s.storage, n.id)
        by_node: dict[int, int] = {}
        by_op: dict[str, int] = {}
        for n in self.nodes:
            if not n.saved:
                continue
            mine = {s.storage: s.nbytes or 0 for s in n.saved if owner.get(s.storage) == n.id}
            by_node[n.id] = sum(mine.values())
            by_op[n.name] = by_op.get(n.name, 0) + by_node[n.id]
        sizes = {s.storage: s.nbytes or 0 for n in self.nodes for s in n.saved if s.storage}
        leaf_storages = {_storage(n.leaf.tensor)[0] for n in self.leaves()}
        return SavedMemory(
            total=sum(sizes.values()),
            by_node=by_node,
            by_op=by_op,
            leaf_bytes=sum(b for key, b in sizes.items() if key in leaf_storages),
            storages=len(sizes),
        )

    # -- renderers --------------------------------------------------------
    def to_text(self) -> str:
        """A tree from each root; shared nodes are shown once, then ``(see [id])``."""
        with cycle_collector_paused():
            return render.to_text(self)

    def to_dot(self) -> str:
        """Graphviz DOT source; arrows point the way gradients flow (output to leaves)."""
        with cycle_collector_paused():
            return render.to_dot(self)

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
# reading one node


class _BareLeaf:
    """Stands in for the missing grad_fn of an output that is a leaf."""

    next_functions: tuple = ()

    def __init__(self, tensor: torch.Tensor) -> None:
        self.variable = tensor


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _storage(t: torch.Tensor) -> tuple[int | None, int | None]:
    """(an id of the memory block a tensor lives in, that block's size in bytes)."""
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse and other storage-less tensors
        return None, None
    return storage.data_ptr(), storage.nbytes()


def _flat(t: torch.Tensor) -> tuple[float, ...] | None:
    if t.numel() > SMALL or t.is_sparse or t.device.type == "meta":
        return None
    values = t.detach().reshape(-1).tolist()
    try:
        return tuple(float(v) for v in values)
    except TypeError:  # complex values stay complex
        return tuple(values)


def _saved(name: str, t: torch.Tensor) -> SavedTensor:
    key, nbytes = _storage(t)
    return SavedTensor(name, tuple(t.shape), _dtype(t), False, nbytes, storage=key)


# "... is at version 1; expected version 0 instead": what torch says when a
# saved tensor was modified in place after it was saved.
_VERSIONS = re.compile(r"is at version (\d+); expected version (\d+)")


def _unreadable(name: str, err: RuntimeError) -> SavedTensor:
    """A saved tensor that cannot be read: modified in place, or freed by backward."""
    found = _VERSIONS.search(str(err))
    if found:
        now, then = int(found.group(1)), int(found.group(2))
        return SavedTensor(name, None, None, False, modified=True, versions=(then, now))
    return SavedTensor(name, None, None, True)


def _saved_tensors(fn: object) -> tuple[SavedTensor, ...]:
    """The tensors a node saved for backward, read through its ``_saved_*`` properties."""
    if isinstance(fn, torch.autograd.function.BackwardCFunction):  # a custom Function
        try:
            tensors = fn.saved_tensors
        except RuntimeError as err:
            return (_unreadable("saved_tensors", err),)
        return tuple(
            _saved(f"saved_tensors[{i}]", t)
            for i, t in enumerate(tensors)
            if isinstance(t, torch.Tensor)
        )
    saved = []
    for attr in saved_attributes(type(fn)):
        name = attr.removeprefix("_saved_")
        try:
            value = getattr(fn, attr)
        except RuntimeError as err:
            saved.append(_unreadable(name, err))
            continue
        if isinstance(value, torch.Tensor):
            saved.append(_saved(name, value))
        elif isinstance(value, (tuple, list)):
            tensors = [(i, t) for i, t in enumerate(value) if isinstance(t, torch.Tensor)]
            saved += [_saved(f"{name}[{i}]", t) for i, t in tensors]
    return tuple(saved)


@cache
def saved_attributes(node_type: type) -> list[str]:
    """The ``_saved_*`` properties of a node type: what its backward formula keeps.

    They are the same for every node of a type, so they are listed once per type.

    >>> saved_attributes(type((torch.ones(1, requires_grad=True) * 2).grad_fn))
    ['_saved_other', '_saved_self']
    """
    return [attr for attr in dir(node_type) if attr.startswith("_saved_")]


def _leaf_info(t: torch.Tensor, name: str) -> LeafInfo:
    g = t.grad
    return LeafInfo(
        name=name,
        shape=tuple(t.shape),
        dtype=_dtype(t),
        value=_flat(t),
        grad=None if g is None else _flat(g),
        has_grad=g is not None,
        tensor=t,
    )


# ---------------------------------------------------------------------------
# describe


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


def check_names(names: object) -> dict[int, str]:
    """``names`` as {id(tensor): name}; the first name given to a tensor wins."""
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
    leaves are called ``leaf0``, ``leaf1``... in node order, skipping any
    name already given.

    >>> import torch
    >>> a = torch.tensor(2.0, requires_grad=True)
    >>> g = describe(a + a, names={"a": a})
    >>> [(e.src, e.dst, e.position) for e in g.edges]
    [(0, 1, 0), (0, 1, 1)]
    """
    outs = _check_outputs(outputs)
    name_of = check_names(names)
    with cycle_collector_paused():
        return _describe(outs, name_of)


@contextlib.contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector for the block.

    Making hundreds of thousands of small objects (nodes, lines of text) sets
    it off again and again, each time walking every object alive, although
    none of them form a cycle: pausing it halves the time on big graphs.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _describe(outs: list[torch.Tensor], name_of: dict[int, str]) -> Graph:

    # 1. Find every node once. `fns` grows while we walk it: each node we
    #    reach for the first time is appended and visited later, like
    #    following next_functions by hand, with a to-do list instead of recursion.
    fns: list = []
    index: dict = {}  # node object -> its place in fns

    def visit(fn) -> int:
        if fn not in index:
            index[fn] = len(fns)
            fns.append(fn)
        return index[fn]

    root_of = [None if t.grad_fn is None else visit(t.grad_fn) for t in outs]
    links: list[list[tuple[int, int, int]]] = []  # per node: (position, child, input_nr)
    for fn in fns:
        links.append([
            (position, visit(child), input_nr)
            for position, (child, input_nr) in enumerate(fn.next_functions)
            if child is not None  # an input that needs no gradient
        ])

    # 2. Outputs that are leaves join the AccumulateGrad of the same tensor, if any.
    for k, t in enumerate(outs):
        if root_of[k] is None:
            same = [j for j, fn in enumerate(fns) if getattr(fn, "variable", None) is t]
            root_of[k] = same[0] if same else visit(_BareLeaf(t))
            if not same:
                links.append([])

    # 3. A topological order: a node is placed once every edge into it has
    #    been followed. Taking children in position order from a stack makes
    #    it read like a depth-first walk, and the same code always gives the
    #    same order.
    waiting = [0] * len(fns)
    for row in links:
        for _, child, _ in row:
            waiting[child] += 1
    order: list[int] = []
    stack = [j for j in dict.fromkeys(root_of) if waiting[j] == 0][::-1]
    while stack:
        j = stack.pop()
        order.append(j)
        for _, child, _ in reversed(links[j]):
            waiting[child] -= 1
            if waiting[child] == 0:
                stack.append(child)
    new_id = {j: k for k, j in enumerate(order)}

    # 4. The nodes and edges, numbered in that order; leaves named in it.
    given = set(name_of.values())
    default_names = (f"leaf{i}" for i in range(len(fns) + len(given) + 1))
    nodes, edges = [], []
    for k, j in enumerate(order):
        fn = fns[j]
        if isinstance(fn, _BareLeaf):
            name, kind, saved = "Leaf", "leaf", ()
        else:
            name = fn.name().rsplit("::", 1)[-1]  # "torch::autograd::AccumulateGrad"
            kind = "custom" if isinstance(fn, torch.autograd.function.BackwardCFunction) else "op"
            saved = _saved_tensors(fn)
        leaf = None
        if name in ("Leaf", "AccumulateGrad"):
            kind = "leaf"
            leaf_name = name_of.get(id(fn.variable))
            if leaf_name is None:
                leaf_name = next(n for n in default_names if n not in given)
            leaf = _leaf_info(fn.variable, leaf_name)
        nodes.append(Node(k, name, kind, saved, leaf, None if isinstance(fn, _BareLeaf) else fn))
        edges += [Edge(k, new_id[child], pos, nr) for pos, child, nr in links[j]]
    return Graph(tuple(nodes), tuple(edges), tuple(new_id[j] for j in root_of))
