"""What a stored spec is, read from its fields: a stored row's spec is JSON of :class:`QuantSpec`'s fields (the
store's ``spec_json``), so reports group and name rows by those fields, never by parsing a label."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from quarl_bench.precision import precision
from quarl_bench.rounding import NEAREST, ROUNDINGS
from quarl_bench.types import DeployTarget, QuantSpec, spec_identity

MX_METHOD = "MX (mxfp8/6/4)"


def spec_of(fields: dict[str, Any] | str) -> QuantSpec:
    """The spec of a stored row (its ``spec_json``, decoded or not)."""
    return _spec(fields if isinstance(fields, str) else json.dumps(fields, sort_keys=True))


@lru_cache(maxsize=4096)
def _spec(text: str) -> QuantSpec:
    fields = json.loads(text)
    if fields.pop("backend", ""):  # a deployed artifact: its precision; the calibration was the backend's
        fields = {"precision": fields["precision"]}
    fields.pop("method", None)
    return QuantSpec(**fields)


def method_of(fields: dict[str, Any] | str) -> str:
    """The method a stored spec's row was evaluated by (``ptq`` where the JSON names none)."""
    return str((json.loads(fields) if isinstance(fields, str) else fields).get("method", "ptq"))


def target_of(fields: dict[str, Any] | str) -> DeployTarget | None:
    """The deployed artifact a stored spec names (with its backend's calibration), else None."""
    fields = json.loads(fields) if isinstance(fields, str) else fields
    if not fields.get("backend"):
        return None
    states, method = fields.get("calibration_states", 0), fields.get("calibration_method", "")
    return DeployTarget(fields["backend"], fields["precision"], states, method, fields.get("artifact", ""))


def spec_json(spec: QuantSpec, method: str = "ptq", target: DeployTarget | None = None) -> str:
    """A spec as the store keeps it, in both the results and the verdicts table: its identity as job keys record
    it, method and backend included (:func:`quarl_bench.types.spec_identity`), as JSON. :func:`spec_of` reads the
    spec back, and also the every-field form that rows stored before kept (the fields it leaves out are at their
    defaults)."""
    return json.dumps(spec_identity(spec, method, target), sort_keys=True)


SPEC_GRID, SPEC_RECIPE = "grid", "recipe"  # what a spec sets beyond its precision, by the flags that set it


def spec_options(spec: QuantSpec) -> dict[str, list[str]]:
    """What a spec sets beyond its precision, by option group: ``grid`` (granularity, symmetric, bias, layer mode)
    and ``recipe`` (activations, groups, rounding, pruning, calibration: its recipe label)."""
    grid = [spec.granularity] if spec.granularity != "auto" else []
    grid += [name for name in ("symmetric", "quantize_bias") if getattr(spec, name)]
    grid += [spec.layers] if spec.layers != "paper" else []
    return {SPEC_GRID: grid, SPEC_RECIPE: [spec.recipe_label()] if spec.recipe_label() else []}


def spec_extras(spec: QuantSpec) -> list[str]:
    """What sets a spec apart from plain weight PTQ at its precision: grid options, layer mode, recipe."""
    options = spec_options(spec)
    return options[SPEC_GRID] + options[SPEC_RECIPE]


def variant_label(spec: QuantSpec) -> str:
    """A spec's options without its precision (``per-channel gptq cal1000``); ``default`` for plain RTN."""
    return " ".join(spec_extras(spec)) or "default"


def weight_method(spec: QuantSpec) -> str | None:
    """The weight-quantization method a spec measures (``RTN``, ``GPTQ per-channel``, ``RTN group 32``, ``nvfp4``,
    the MX ladder); None for specs that change more than weights (activations, pruning) and for fp32."""
    if spec.activations or spec.prune or spec.precision == "fp32":
        return None
    plain = not spec_extras(spec)
    number = spec.number_format
    if not number.is_int:
        if not plain:
            return None
        return MX_METHOD if number.ladder == "MX" else spec.precision
    rounding = ROUNDINGS.get(spec.ptq).label
    grid = f"group {spec.group_size}" if spec.group_size else "per-channel" if spec.granularity == "per-channel" else ""
    rest = [spec.granularity] if spec.granularity not in ("auto", "per-channel") else []
    rest += [name for name in ("symmetric", "quantize_bias") if getattr(spec, name)]
    rest += [spec.layers] if spec.layers != "paper" else []
    return " ".join([rounding, *([grid] if grid else []), *rest])


def input_quantization(spec: QuantSpec, method: str = "ptq") -> tuple[str, int] | None:
    """For the weight x activation heatmap: ``("A", bits)`` when only every layer's input is quantized (at an
    integer width), ``("obs", bits)`` for the observation only, ``("A", 32)`` for integer weights alone; None for
    anything else (formats, outputs, groups, rounding, pruning, several inputs at once)."""
    if method != "ptq" or not (spec.number_format.is_int or spec.precision == "fp32"):
        return None
    inputs = [
        (kind, getattr(spec, name)) for kind, name in (("A", "act_bits"), ("obs", "obs_bits")) if getattr(spec, name)
    ]
    if spec.out_bits or len(inputs) > 1:
        return None
    bare = QuantSpec(
        spec.precision,
        layers=spec.layers,
        act_bits=spec.act_bits,
        obs_bits=spec.obs_bits,
        calibration_states=spec.calibration_states,
        calibration_method=spec.calibration_method,
    )
    if spec != bare:  # another option changed too
        return None
    if not inputs:
        return ("A", 32) if spec.precision != "fp32" else None
    kind, width = inputs[0]
    number = precision(width)
    return (kind, number.bits) if number.is_int else None


def legend_family(spec: QuantSpec) -> str:
    """The compression frontier's legend group of a spec."""
    if spec.prune:
        return "pruned"
    if spec.ptq != NEAREST:
        return ROUNDINGS.get(spec.ptq).label
    if spec.activations:
        return "activations"
    if spec.group_size:
        return "group-wise"
    label = variant_label(spec)
    return "RTN / formats" if label == "default" else "RTN " + label
