"""int8 weights that stay shared: each weight matrix of an fp32 graph quantised once, in place of its fp32 copy.

A matrix multiplied by activations (MatMul, Gemm) becomes an int8 initializer with one fp32 scale (symmetric, zero
point 0; or one per output column), used through DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul: the pattern
onnxruntime fuses into one int8 product (MatMulIntegerToFloat), and every runtime with the standard operators runs.
An embedding table (Gather) becomes int8 rows (one scale, or one per row), dequantised after the lookup. A matrix is
rewritten once however many nodes use it (ALBERT's shared layers reach it through Identity nodes), so the file holds
it once, in int8 alone. Written with the onnx package and numpy only.

The choices follow the agreement measured by benchmarks/quantization.py (docs/log.md): one scale per matrix and
every operator kind agreed with the fp32 graph on every Rotten Tomatoes dev review, per-column scales on all but one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MIN_ELEMENTS = 4096  # smaller matrices (the token-type table, a two-label classifier) stay fp32: nothing to gain
OPS = ("MatMul", "Gemm", "Gather")


@dataclass
class Quantized:
    """The int8 graph's bytes, and which initializers were quantised or kept in fp32 (and why)."""

    model_bytes: bytes
    quantized: list[str] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)


def _scales(w: np.ndarray, axis: int | None) -> np.ndarray:
    """Symmetric int8 scales: max |w| / 127 over the whole matrix (axis None) or per slice along the other axis."""
    peak = np.abs(w).max() if axis is None else np.abs(w).max(axis=axis)
    return np.maximum(np.asarray(peak, dtype=np.float32), np.float32(1e-12)) / np.float32(127.0)


def _int8(w: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(w / scale), -127, 127).astype(np.int8)


class _Graph:
    """The graph being rewritten: its initializers by name, new nodes and initializers, unique names."""

    def __init__(self, model):
        from onnx import numpy_helper

        self.model, self.graph = model, model.graph
        self.numpy = numpy_helper
        self.inits = {i.name: i for i in self.graph.initializer}
        self.count = 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}_q{self.count}"

    def add_init(self, array: np.ndarray, base: str) -> str:
        name = self.name(base)
        self.graph.initializer.append(self.numpy.from_array(array, name))
        return name

    def drop_identities(self) -> None:
        """Consumers of Identity(initializer) read the initializer itself: the exporter's way of reusing a shared
        parameter, which would otherwise hide that every layer multiplies by the same matrix."""
        alias = {
            n.output[0]: n.input[0] for n in self.graph.node if n.op_type == "Identity" and n.input[0] in self.inits
        }
        if not alias:
            return
        outputs = {o.name for o in self.graph.output}
        keep = [
            n
            for n in self.graph.node
            if not (n.op_type == "Identity" and n.output[0] in alias and n.output[0] not in outputs)
        ]
        for node in keep:
            for i, name in enumerate(node.input):
                if name in alias:
                    node.input[i] = alias[name]
        del self.graph.node[:]
        self.graph.node.extend(keep)


def _consumers(graph) -> dict[str, list[tuple[object, int]]]:
    uses: dict[str, list[tuple[object, int]]] = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            uses.setdefault(name, []).append((node, i))
    return uses


def _attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _role(node, index: int) -> str | None:
    """How a node uses a weight at input `index`: "matmul" (the right factor, (K, N)), "gemm" (Gemm's B with
    transB: (N, K)), "gather" (an embedding table), or None (a use the rewrite does not cover)."""
    if node.op_type == "MatMul" and index == 1:
        return "matmul"
    if node.op_type == "Gemm" and index == 1:
        a = _attrs(node)
        if (
            a.get("transB", 0) == 1
            and a.get("transA", 0) == 0
            and a.get("alpha", 1.0) == 1.0
            and a.get("beta", 1.0) == 1.0
        ):
            return "gemm"
        return None
    if node.op_type == "Gather" and index == 0 and _attrs(node).get("axis", 0) == 0:
        return "gather"
    return None


def _kind(init, roles: list, ops: tuple[str, ...]) -> tuple[str | None, str]:
    """How a matrix is quantised ("matmul", "gemm", "gather"), or None and why it stays fp32."""
    elements = int(np.prod(init.dims))
    if elements < MIN_ELEMENTS:
        return None, f"{elements} elements, below {MIN_ELEMENTS}"
    if not roles:
        return None, "unused"
    op = {"matmul": "MatMul", "gemm": "Gemm", "gather": "Gather"}
    if any(r is None or op[r] not in ops for _, r in roles):
        return None, "used by " + ", ".join(sorted({n.op_type for n, _ in roles}))
    kinds = {r for _, r in roles}
    if len(kinds) > 1:  # one layout per matrix: a table that is also a product's factor stays fp32
        return None, f"used as {sorted(kinds)}"
    return kinds.pop(), ""


def quantize(model_bytes: bytes, *, per_channel: bool = False, ops: tuple[str, ...] = OPS) -> Quantized:
    """The graph of `model_bytes` with int8 weights: every matrix of at least MIN_ELEMENTS used only by `ops`
    (MatMul, Gemm, Gather), quantised once; `per_channel` gives each output column (each table row) its own scale,
    else one scale per matrix."""
    import onnx
    from onnx import TensorProto

    model = onnx.load_from_string(model_bytes)
    if not any(o.domain in ("", "ai.onnx") and o.version >= 10 for o in model.opset_import):
        raise ValueError("the graph's opset is below 10, which has no MatMulInteger")
    g = _Graph(model)
    g.drop_identities()
    uses = _consumers(g.graph)
    result = Quantized(b"")
    new_nodes: dict[int, list] = {}  # id(node) -> the nodes replacing it
    activations: dict[str, tuple[str, str, str]] = {}  # an activation -> its DynamicQuantizeLinear outputs
    for name, init in list(g.inits.items()):
        if init.data_type != TensorProto.FLOAT or len(init.dims) != 2:
            continue
        roles = [(node, _role(node, i)) for node, i in uses.get(name, [])]
        kind, why = _kind(init, roles, ops)
        if kind is None:
            result.kept[name] = why
            continue
        w = g.numpy.to_array(init).astype(np.float32)
        if kind == "gemm":
            w = w.T  # Gemm with transB multiplies by wᵀ: store the (K, N) factor MatMulInteger takes
        # columns of a factor, rows of a table: the axis each output value is read along
        axis = None if not per_channel else (1 if kind == "gather" else 0)
        scale = _scales(w, axis)
        q = _int8(w, scale[:, None] if kind == "gather" and per_channel else scale)
        q_name, s_name = g.add_init(q, name), g.add_init(scale.reshape(-1), f"{name}_scale")
        for node, _ in roles:
            new_nodes[id(node)] = _rewrite(g, node, kind, q_name, s_name, per_channel, activations)
        result.quantized.append(name)
    nodes = []
    for node in g.graph.node:
        nodes.extend(new_nodes.get(id(node), [node]))
    del g.graph.node[:]
    g.graph.node.extend(nodes)
    used = {name for node in g.graph.node for name in node.input}
    kept = [i for i in g.graph.initializer if i.name in used]
    del g.graph.initializer[:]
    g.graph.initializer.extend(kept)
    result.model_bytes = model.SerializeToString()
    return result


def _rewrite(g: _Graph, node, kind: str, q_name: str, s_name: str, per_channel: bool, activations: dict) -> list:
    """The nodes computing `node`'s output from the int8 weight `q_name` and its scales `s_name`."""
    from onnx import TensorProto, helper

    out = node.output[0]
    if kind == "gather":
        rows, row_scales, fp = g.name("rows"), g.name("row_scales"), g.name("rows_fp")
        nodes = [
            helper.make_node("Gather", [q_name, node.input[1]], [rows], axis=0),
            helper.make_node("Cast", [rows], [fp], to=TensorProto.FLOAT),
        ]
        if per_channel:
            unsq, axes = g.name("row_scale"), g.add_init(np.asarray([-1], dtype=np.int64), "axes")
            nodes += [
                helper.make_node("Gather", [s_name, node.input[1]], [row_scales], axis=0),
                helper.make_node("Unsqueeze", [row_scales, axes], [unsq]),
                helper.make_node("Mul", [fp, unsq], [out]),
            ]
        else:
            nodes.append(helper.make_node("Mul", [fp, s_name], [out]))
        return nodes
    x = node.input[0]
    nodes = []
    if x not in activations:  # one quantisation of an activation, however many products read it
        activations[x] = (g.name("x_int8"), g.name("x_scale"), g.name("x_zero"))
        nodes.append(helper.make_node("DynamicQuantizeLinear", [x], list(activations[x])))
    xq, xs, xz = activations[x]
    product, fp, scale = g.name("product"), g.name("product_fp"), g.name("scale")
    target = g.name("matmul") if kind == "gemm" else out
    nodes += [
        helper.make_node("MatMulInteger", [xq, q_name, xz], [product]),
        helper.make_node("Cast", [product], [fp], to=TensorProto.FLOAT),
        helper.make_node("Mul", [xs, s_name], [scale]),
        helper.make_node("Mul", [fp, scale], [target]),
    ]
    if kind == "gemm":
        nodes.append(
            helper.make_node("Add", [target, node.input[2]], [out])
            if len(node.input) > 2 and node.input[2]
            else helper.make_node("Identity", [target], [out])
        )
    return nodes
