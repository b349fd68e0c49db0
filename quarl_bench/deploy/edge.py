"""LiteRT (``.tflite``) and ExecuTorch (``.pte``, XNNPACK) artifacts of a deployable policy, and how to play them.

- ``litert-fp32``: ``litert_torch.convert`` of the whole policy (normalisation, network, action head).
- ``litert-int8``: full-integer int8. PT2E calibration (per-channel symmetric weights, per-tensor activations,
  static ranges) on the fp32 policy's visited observations, then conversion. Its input and output tensors may be
  int8: a client quantizes the observation and dequantizes the output with the tensors' own (scale, zero point)
  (fed floats, it agreed with fp32 on 57.6% of argmaxes in the feasibility run). The graph takes batch 1.
- ``executorch-fp32`` / ``executorch-int8``: ``torch.export``, XNNPACK's PT2E quantizer for int8, lowered to the
  XNNPACK delegate; the ``.pte`` takes and returns float32 (and int64 action indices), batch 1.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch

from quarl_bench.errors import QuarlError

if TYPE_CHECKING:
    from quarl_bench.deploy.export import DeployablePolicy


def litert(
    module: DeployablePolicy, sample: np.ndarray, calibration: np.ndarray | None, fp32_first_layer: bool = False
) -> bytes:
    """The ``.tflite`` bytes: fp32, or int8 calibrated on ``calibration`` (raw observations), its first layer (and so
    the observation) in fp32 with ``fp32_first_layer``, its output layer's output in float, as the claim has them."""
    import tempfile

    import litert_torch

    example = (torch.as_tensor(sample[:1]),)
    with _quiet(), tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "policy.tflite")
        if calibration is None:
            litert_torch.convert(module.eval(), example).export(path)
        else:
            from litert_torch.quantize import pt2e_quantizer
            from litert_torch.quantize.quant_config import QuantConfig

            config = min_max_activations(
                pt2e_quantizer.get_symmetric_quantization_config(is_per_channel=True, is_dynamic=False)
            )
            quantizer = pt2e_quantizer.PT2EQuantizer().set_global(config)
            for name in output_module_names(module):
                quantizer.set_module_name(litert_module_key(name), float_output(config))
            if fp32_first_layer:
                quantizer.set_module_name(litert_module_key(first_module_name(module)), left_in_float(config))
            prepared = _calibrated(weights_on_grid(module), example, quantizer, calibration, fold=False)
            litert_torch.convert(prepared, example, quant_config=QuantConfig(pt2e_quantizer=quantizer)).export(path)
        with open(path, "rb") as file:
            return file.read()


def first_module_name(module: DeployablePolicy) -> str:
    """The name (in ``module``) of the policy's first acting layer, which takes the observation."""
    from quarl_bench.quant.layers import acting_layers

    first = next(iter(acting_layers(module.policy)))[1]
    return next(name for name, layer in module.named_modules() if layer is first)


def weights_on_grid(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``module`` whose Linear and Conv weights are rounded to the claim's symmetric int8 grid per output
    channel (step max|w| / 127), still in float: PT2E then calibrates the network the claim calibrates, and a layer
    left in fp32 computes with the claim's weights."""
    import copy

    twin = copy.deepcopy(module)
    with torch.no_grad():
        for layer in twin.modules():
            if isinstance(layer, torch.nn.Linear | torch.nn.Conv2d):
                weight = layer.weight
                flat = weight.reshape(weight.shape[0], -1)
                step = (flat.abs().amax(dim=1) / 127).clamp_min(torch.finfo(torch.float32).tiny)
                shape = (-1,) + (1,) * (weight.dim() - 1)
                weight.copy_(torch.clamp(torch.round(weight / step.reshape(shape)), -127, 127) * step.reshape(shape))
    return twin


def output_module_names(module: torch.nn.Module) -> list[str]:
    """The names (in ``module``) of the policy's output layers: the action mean, logits or Q-values, which the W8A8
    claim keeps in float (``quant.activations.output_layers``)."""
    from quarl_bench.quant.activations import output_layers

    policy = getattr(module, "policy", None)
    if policy is None:
        return []
    outputs = {id(layer) for layer in output_layers(policy)}
    return [name for name, layer in module.named_modules() if id(layer) in outputs]


def litert_module_key(name: str) -> str:
    """``name`` as litert's PT2E module filter spells it: it drops the first 10 characters of torch.export's
    ``L__self__NAME`` stack key (9 in torch 2.13) and turns underscores into dots."""
    return f"L__self__{name}"[len("L__self___") :].replace("_", ".")


def float_output(config):
    """``config`` with the layer's output left in float: litert-int8 rounded ddpg LunarLanderContinuous's pre-tanh
    action to int8 over [-49, 23] (a step of 0.28, up to 36 action steps near zero) where the claim keeps it float."""
    from dataclasses import replace

    return replace(config, output_activation=None)


def left_in_float(config):
    """``config`` quantizing nothing (litert's quantizer takes no None config)."""
    from dataclasses import replace

    return replace(config, input_activation=None, output_activation=None, weight=None, bias=None)


def executorch(module: torch.nn.Module, sample: np.ndarray, calibration: np.ndarray | None) -> bytes:
    """The ``.pte`` bytes lowered to XNNPACK: fp32, or PT2E int8 calibrated on ``calibration``."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    example = (torch.as_tensor(sample[:1]),)
    with _quiet():
        model = module.eval()
        if calibration is not None:
            from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
                XNNPACKQuantizer,
                get_symmetric_quantization_config,
            )

            quantizer = XNNPACKQuantizer().set_global(
                min_max_activations(get_symmetric_quantization_config(is_per_channel=True))
            )
            model = _calibrated(module, example, quantizer, calibration, fold=True)
        program = to_edge_transform_and_lower(torch.export.export(model, example), partitioner=[XnnpackPartitioner()])
        return program.to_executorch().buffer


def min_max_activations(config):
    """A PT2E quantization config with min-max activation ranges, as the W8A8 claim calibrates them. The quantizers'
    own HistogramObserver picks the range of least squared error instead: on sac Pendulum that put litert-int8's
    observation grid at a step of 0.0563 where its claim's is 0.0555, and its actions 13 steps from the claim."""
    from dataclasses import replace

    from torchao.quantization.pt2e.observer import MinMaxObserver

    if config.input_activation is None:
        return config
    activation = replace(config.input_activation, observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=2**-12))
    return replace(config, input_activation=activation, output_activation=activation)


def _calibrated(module, example: tuple, quantizer, calibration: np.ndarray, fold: bool):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    prepared = prepare_pt2e(torch.export.export(module.eval(), example).module(), quantizer)
    with torch.no_grad():
        for row in range(len(calibration)):
            prepared(torch.as_tensor(calibration[row : row + 1]))
    return convert_pt2e(prepared, fold_quantize=fold)


def litert_runner(data: bytes, threads: int = 1) -> Callable[[np.ndarray], np.ndarray]:
    """Batch of raw observations -> actions through the LiteRT interpreter, one observation per call."""
    from ai_edge_litert.interpreter import Interpreter

    with _quiet():
        interpreter = Interpreter(model_content=data, num_threads=threads)
        interpreter.allocate_tensors()
    source, target = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    into, out_of = source["index"], target["index"]
    set_tensor, invoke, get_tensor = interpreter.set_tensor, interpreter.invoke, interpreter.get_tensor

    def act(row: np.ndarray) -> np.ndarray:  # one observation: the per-call Python cost is what a client pays
        set_tensor(into, quantized_input(row, source))
        invoke()
        return dequantized_output(get_tensor(out_of), target)

    def run(observations: np.ndarray) -> np.ndarray:
        observations = np.asarray(observations)
        if len(observations) == 1:
            return act(observations)
        return np.concatenate([act(observations[i : i + 1]) for i in range(len(observations))])

    return run


def quantized_input(observation: np.ndarray, detail: dict) -> np.ndarray:
    """The observation as the input tensor takes it: quantized with the tensor's (scale, zero point) when the
    tensor is quantized (a uint8 image's pixel values included)."""
    dtype = detail["dtype"]
    scale, zero = detail["quantization"]
    if scale and np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.clip(np.round(observation.astype(np.float32) / scale) + zero, info.min, info.max).astype(dtype)
    return observation.astype(dtype)


def dequantized_output(values: np.ndarray, detail: dict) -> np.ndarray:
    scale, zero = detail["quantization"]
    if scale and detail["dtype"] in (np.int8, np.uint8, np.int16):
        return (values.astype(np.float32) - zero) * scale
    return values


def executorch_runner(data: bytes, threads: int = 1) -> Callable[[np.ndarray], np.ndarray]:
    """Batch of raw observations -> actions through ExecuTorch's runtime, one observation per call."""
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime

    with _quiet():
        portable_lib._unsafe_reset_threadpool(threads)
        method = Runtime.get().load_program(data).load_method("forward")

    execute = method.execute

    def run(observations: np.ndarray) -> np.ndarray:
        observations = np.asarray(observations)
        if len(observations) == 1:
            return execute([torch.from_numpy(observations)])[0].numpy()
        return np.concatenate(
            [execute([torch.from_numpy(observations[i : i + 1])])[0].numpy() for i in range(len(observations))]
        )

    return run


@contextlib.contextmanager
def _quiet():
    """Converters print progress bars (Python) and logs (C++): both go to a buffer unless they fail."""
    from quarl_bench.zoo.quiet import native_output_silenced

    buffer = io.StringIO()
    try:
        with native_output_silenced(), contextlib.redirect_stdout(buffer):
            yield
    except Exception as error:
        text = str(error).strip().splitlines()
        raise QuarlError(f"conversion failed: {type(error).__name__}: {text[0] if text else ''}") from error
