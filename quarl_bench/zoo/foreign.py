"""Policies that are no SB3 agent, as SB3 policies: a user's torch module and an ONNX graph.

The contract (README, "Your own policy"): the network maps a batch of observations, exactly as the env returns
them (float32; no normalisation or image scaling is added), to action logits for a ``Discrete`` action space (the
greedy action is their argmax) or to actions in the env's units for a ``Box`` one (clipped to its bounds, as SB3's
``predict`` does). Any preprocessing belongs inside the network.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import BasePolicy
from torch import nn

from quarl_bench.errors import QuarlError
from quarl_bench.zoo.onnx_chain import ChainReading, acting_nodes, read_chain

ONNX_FLOAT = 1  # onnx.TensorProto.FLOAT


def expected_output(action_space: spaces.Space) -> tuple[int, ...]:
    """The output shape of one observation: logits per action, or one action."""
    if isinstance(action_space, spaces.Discrete):
        return (int(action_space.n),)
    if isinstance(action_space, spaces.Box):
        return tuple(action_space.shape)
    raise QuarlError(f"cannot act in a {type(action_space).__name__} action space: expected Discrete or Box")


class UserModulePolicy(BasePolicy):
    """A torch module from observations to logits (``Discrete``) or actions (``Box``), acting like an SB3 policy.

    Its layers live under ``module``: that is what acts, and what PTQ quantizes (``quant/layers.py``).
    """

    torch_layers = True  # its layers run in torch (an ONNX graph played as itself: False)
    not_a_chain = ""  # why it has no torch twin, when it has none

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        module: nn.Module,
        outputs_actions: bool = False,
    ) -> None:
        super().__init__(observation_space, action_space, normalize_images=False)
        self.module = module
        # a Discrete policy whose output is the action itself (an exported graph, SB3's OnnxableSB3Policy): it acts
        # greedy only, and has no logits to measure margins on (set by :func:`check_output`)
        self.outputs_actions = outputs_actions

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {
            "observation_space": self.observation_space,
            "action_space": self.action_space,
            "module": copy.deepcopy(self.module),
            "outputs_actions": self.outputs_actions,
        }

    def decision_values(self, observation: torch.Tensor) -> torch.Tensor:
        """Logits (discrete) or actions (continuous) for a batch."""
        return self.module(observation.float())

    def forward(self, observation: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        return self._predict(observation, deterministic)

    def _predict(self, observation: torch.Tensor | dict[str, torch.Tensor], deterministic: bool = True) -> torch.Tensor:
        if isinstance(observation, dict):
            raise QuarlError("a torch module or ONNX policy takes one observation array: expected a Box observation")
        out = self.decision_values(observation)
        if isinstance(self.action_space, spaces.Discrete):
            return out.reshape(-1).round().long() if self.outputs_actions else out.argmax(dim=1)
        return out.reshape((-1, *(self.action_space.shape or ())))


def check_output(policy: UserModulePolicy, source: str) -> None:
    """Run the policy on two sampled observations; one line naming the shape when it is not the contract's. A
    ``Discrete`` policy returning one value per observation outputs actions: it is marked so (greedy play only).

    :raises QuarlError: for an output of the wrong shape, or a network that fails on the observations.
    """
    space = policy.observation_space  # a Dict's keys flat, in the space's order (what a chunked policy passes)
    sample = np.stack([np.asarray(spaces.flatten(space, space.sample())) for _ in range(2)]).astype(np.float32)
    expected = (2, *expected_output(policy.action_space))
    try:
        with torch.no_grad():
            out = policy.decision_values(torch.as_tensor(sample))
    except QuarlError:  # the policy's own refusal (a chunk of the wrong shape) says what is wrong
        raise
    except Exception as error:  # a user's network raises any type
        raise QuarlError(
            f"policy {source} fails on a batch of observations of shape {sample.shape}: "
            f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
        ) from error
    if isinstance(policy.action_space, spaces.Discrete) and tuple(out.shape) in ((2,), (2, 1)):
        policy.outputs_actions = True
        return
    if tuple(out.shape) != expected:
        what = "logits" if isinstance(policy.action_space, spaces.Discrete) else "actions"
        raise QuarlError(
            f"policy {source} returned shape {tuple(out.shape)} for 2 observations: expected {expected} "
            f"({what} for {policy.action_space})" + (" or (2,) (the actions)" if what == "logits" else "")
        )


# Torch modules handed to the Python API as objects, by weight hash: ``object:{hash}`` refers to one. Forked
# evaluation workers inherit them.
_OBJECTS: dict[str, nn.Module] = {}
OBJECT_PREFIX = "object:"


def register_module(key: str, module: nn.Module) -> str:
    """Keep ``module`` for this process under ``key``; returns the model path an agent refers to it by."""
    _OBJECTS[key] = module.eval()
    return OBJECT_PREFIX + key


def load_module_function(target: str) -> nn.Module:
    """Call ``FILE.py:FUNCTION`` (or look up an ``object:`` registered module) and return the ``nn.Module``.

    :raises QuarlError: for a missing file or function, or a function that returns no module.
    """
    if target.startswith(OBJECT_PREFIX):
        return _OBJECTS[target.removeprefix(OBJECT_PREFIX)]
    path_text, _, name = target.rpartition(":")
    path = Path(path_text)
    if not path_text or not name or path.suffix != ".py":
        raise QuarlError(f"bad --policy-module {target!r}: expected FILE.py:FUNCTION")
    if not path.is_file():
        raise QuarlError(f"policy module {str(path)!r} not found: expected FILE.py:FUNCTION")
    module_name = f"quarl_user_policy_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    user = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = user  # dataclasses and pickling look their module up
    try:
        spec.loader.exec_module(user)
    except Exception as error:  # the user's file raises any type
        raise QuarlError(f"cannot import policy module {str(path)!r}: {type(error).__name__}: {error}") from error
    function = getattr(user, name, None)
    if not callable(function):
        raise QuarlError(f"policy module {str(path)!r} has no function {name!r}: expected FILE.py:FUNCTION")
    module = function()
    if isinstance(module, torch.jit.ScriptModule):
        raise QuarlError(
            f"{target} returned a TorchScript module ({type(module).__name__}): its layers are compiled, so nothing "
            "can quantize them; expected the torch.nn.Module itself (build the class and load its state_dict, or "
            "save it with torch.onnx.export and pass --model FILE.onnx)"
        )
    if not isinstance(module, nn.Module):
        raise QuarlError(f"{target} returned {type(module).__name__}: expected a torch.nn.Module")
    return module.eval()


class OnnxLayers(nn.Module):
    """The ONNX graph's weight initializers as torch layers, so PTQ, statistics and per-layer precisions treat them
    as any other network's: Gemm/MatMul weights as ``nn.Linear`` (out x in), Conv weights as ``nn.ConvNd``. Never
    run in torch: :class:`UserOnnxPolicy` writes them back into the graph."""

    def __init__(self, graph_bytes: bytes) -> None:
        import onnx
        from onnx import numpy_helper

        super().__init__()
        graph = onnx.load_from_string(graph_bytes).graph
        initializers = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
        self.sources: dict[str, tuple[str, str, bool]] = {}  # layer -> (weight initializer, bias initializer, T)
        acting = acting_nodes(graph)
        for index, node in enumerate(graph.node):
            if index not in acting:  # e.g. the value head of SB3's OnnxableSB3Policy graph
                continue
            weight_name = node.input[1] if len(node.input) > 1 else ""
            if node.op_type not in ("Gemm", "MatMul", "Conv") or weight_name not in initializers:
                continue
            weight = initializers[weight_name]
            bias_name = node.input[2] if len(node.input) > 2 and node.input[2] in initializers else ""
            if node.op_type == "Conv":
                layer = _conv(weight, initializers.get(bias_name))
                transposed = False
            elif weight.ndim == 2:
                trans_b = any(a.name == "transB" and a.i == 1 for a in node.attribute)
                transposed = node.op_type == "MatMul" or not trans_b  # stored (in, out)
                matrix = weight.T if transposed else weight
                bias = initializers.get(bias_name)
                layer = nn.Linear(matrix.shape[1], matrix.shape[0], bias=bias is not None)
                with torch.no_grad():
                    layer.weight.copy_(torch.from_numpy(np.ascontiguousarray(matrix)))
                    if bias is not None:
                        layer.bias.copy_(torch.from_numpy(bias.reshape(-1)))
            else:
                continue
            name = f"layer{len(self.sources)}"
            self.add_module(name, layer)
            self.sources[name] = (weight_name, bias_name, transposed)

    def initializers(self) -> dict[str, np.ndarray]:
        """The current weights (quantized or not), keyed by their initializer names, in the graph's layout."""
        values: dict[str, np.ndarray] = {}
        for name, (weight_name, bias_name, transposed) in self.sources.items():
            layer = getattr(self, name)
            weight = layer.weight.detach().cpu().numpy()
            values[weight_name] = np.ascontiguousarray(weight.T if transposed else weight)
            if bias_name and layer.bias is not None:
                values[bias_name] = layer.bias.detach().cpu().numpy()
        return values


def _conv(weight: np.ndarray, bias: np.ndarray | None) -> nn.Module:
    kinds = {3: nn.Conv1d, 4: nn.Conv2d, 5: nn.Conv3d}
    if weight.ndim not in kinds:
        raise QuarlError(f"cannot read a Conv weight of shape {weight.shape}: expected 1-3 spatial dimensions")
    out_channels, in_per_group, *kernel = weight.shape
    size: Any = tuple(kernel)  # 1, 2 or 3 sizes, as the class of its dimension takes
    layer = kinds[weight.ndim](in_per_group, out_channels, size, bias=bias is not None)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(weight))
        if bias is not None and layer.bias is not None:
            layer.bias.copy_(torch.from_numpy(bias))
    return layer


class UserOnnxPolicy(UserModulePolicy):
    """An fp32 ONNX graph (one float observation input; first output: logits or actions; for a ``Discrete`` space
    the action index too, as quarl-bench's exports and SB3's ``OnnxableSB3Policy`` write it) played on ONNX Runtime.

    A graph that is one MLP chain is loaded as its torch twin instead (:func:`chain_reading`); this class plays the
    others. PTQ rewrites its weight initializers on the same grid as any torch layer (through :class:`OnnxLayers`);
    the session is built from the current weights at the first action, so quantize before acting.
    """

    torch_layers = False  # its layers are the graph's initializers: nothing to calibrate activations on in torch
    module: OnnxLayers

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        graph_bytes: bytes,
        outputs_actions: bool = False,
        not_a_chain: str = "",
    ) -> None:
        super().__init__(observation_space, action_space, OnnxLayers(graph_bytes), outputs_actions)
        self.graph_bytes = graph_bytes
        self.not_a_chain = not_a_chain  # why it has no torch twin (in the refusals of torch-only methods)
        self.input_name = graph_input(graph_bytes, "the ONNX graph")
        self.one_at_a_time = fixed_batch_of_one(graph_bytes, self.input_name)
        self._session: Any = None  # an ONNX Runtime session, built at the first action

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {
            "observation_space": self.observation_space,
            "action_space": self.action_space,
            "graph_bytes": self.graph_bytes,
            "outputs_actions": self.outputs_actions,
            "not_a_chain": self.not_a_chain,
        }

    def current_graph(self) -> bytes:
        """The graph with the current (possibly quantized) weights in its initializers."""
        return graph_with_weights(self.graph_bytes, self.module.initializers())

    def decision_values(self, observation: torch.Tensor) -> torch.Tensor:
        if self._session is None:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = options.inter_op_num_threads = 1
            self._session = ort.InferenceSession(self.current_graph(), options, providers=["CPUExecutionProvider"])
        batch = observation.detach().cpu().numpy().astype(np.float32)
        if self.one_at_a_time:  # exported with a fixed batch of 1 (SB3's recipe has no dynamic axes)
            outputs = [self._session.run(None, {self.input_name: row[None]})[0] for row in batch]
            return torch.from_numpy(np.concatenate(outputs))
        return torch.from_numpy(self._session.run(None, {self.input_name: batch})[0])


def graph_with_weights(graph_bytes: bytes, values: dict[str, np.ndarray]) -> bytes:
    """The graph with ``values`` (weights by initializer name, :meth:`OnnxLayers.initializers`) in its initializers."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(graph_bytes)
    for index, init in enumerate(model.graph.initializer):
        if init.name in values:
            array = values[init.name].astype(numpy_helper.to_array(init).dtype)
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(array, init.name))
    return model.SerializeToString()


def fixed_batch_of_one(graph_bytes: bytes, input_name: str) -> bool:
    """Whether the graph's observation input has a fixed batch dimension of 1."""
    import onnx

    graph = onnx.load_from_string(graph_bytes).graph
    dims = next(i for i in graph.input if i.name == input_name).type.tensor_type.shape.dim
    return bool(dims) and dims[0].HasField("dim_value") and dims[0].dim_value == 1


def graph_input(graph_bytes: bytes, source: str) -> str:
    """The graph's one observation input (inputs that are initializers do not count).

    :raises QuarlError: for a file that is not ONNX, or a graph with several inputs or a non-float input.
    """
    import onnx

    try:
        graph = onnx.load_from_string(graph_bytes).graph
    except Exception as error:  # protobuf's DecodeError and others
        raise QuarlError(f"cannot read {source}: {type(error).__name__}; expected an ONNX model file") from error
    initializers = {init.name for init in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    if len(inputs) != 1:
        names = ", ".join(i.name for i in inputs) or "none"
        raise QuarlError(f"{source} has {len(inputs)} inputs ({names}): expected one observation input")
    elem_type = inputs[0].type.tensor_type.elem_type
    if elem_type != ONNX_FLOAT:
        type_name = onnx.TensorProto.DataType.Name(elem_type) if elem_type else "unknown"
        raise QuarlError(f"{source} input {inputs[0].name!r} is {type_name}: expected a float (float32) input")
    return inputs[0].name


def chain_reading(graph_bytes: bytes, action_space: spaces.Space | None = None) -> ChainReading:
    """The graph's torch twin when its acting path is one MLP chain (:mod:`quarl_bench.zoo.onnx_chain`), else why
    not. A final clip to exactly ``action_space``'s bounds is left out: the contract clips to them anyway."""
    bounds = (action_space.low, action_space.high) if isinstance(action_space, spaces.Box) else None
    return read_chain(graph_bytes, graph_input(graph_bytes, "the ONNX graph"), bounds)
