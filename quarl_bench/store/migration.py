"""Bringing a store written by an older release up to today's schema, keeping every row.

Schema 8 and before stored a spec as columns plus a label of its recipe (``a8 g32 gptq cal-minmax50``); schema 9
stores every field as JSON (``spec_json``). The label is read here, once, when such a store is opened: nothing
else parses it.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

from quarl_bench.store.spec_kinds import spec_json
from quarl_bench.types import DEFAULT_CALIBRATION_STATES, DeployTarget, QuantSpec

INPUT_TOKEN = re.compile(r"^(a|obs|out|h)(.+)$")
CALIBRATION_TOKEN = re.compile(r"^cal(?:-(\w+?))?(\d+)$")
INPUT_FIELDS = {"a": "act_bits", "obs": "obs_bits", "out": "out_bits", "h": "state_bits"}
LEGACY_COLUMNS = (
    "key",
    "precision",
    "granularity",
    "symmetric",
    "quantize_bias",
    "method",
    "layer_mode",
    "backend",
    "layer_bits",
    "recipe",
    "provenance",
)


def legacy_spec_json(row: dict[str, Any]) -> str:
    """The ``spec_json`` of a row stored before it: its columns, and its recipe label read token by token."""
    fields: dict[str, Any] = {
        "precision": row["precision"],
        "granularity": row["granularity"],
        "symmetric": bool(row["symmetric"]),
        "quantize_bias": bool(row["quantize_bias"]),
        "layers": row["layer_mode"],
    }
    if row["backend"]:
        calibration = json.loads(row["provenance"] or "{}").get("calibration", {})
        calibrated = row["backend"] == "ort-int8-static"
        target = DeployTarget(
            row["backend"],
            row["precision"],
            calibration.get("states", DEFAULT_CALIBRATION_STATES) if calibrated else 0,
            calibration.get("method", "minmax") if calibrated else "",
        )
        return spec_json(target.spec, row["method"], target)
    if row["layer_bits"]:
        fields["layer_precisions"] = tuple(json.loads(row["layer_bits"]))
    for token in (row["recipe"] or "").split():
        fields |= _recipe_token(token)
    return spec_json(QuantSpec(**fields), row["method"])


def _recipe_token(token: str) -> dict[str, Any]:
    """The fields one token of a legacy recipe label stands for (see ``QuantSpec.recipe_label``)."""
    if token in ("gptq", "learned-round"):
        return {"ptq": token}
    if token.startswith("prune"):
        share, _, structure = token.removeprefix("prune").partition("-")
        return {"prune": float(share), "prune_structure": structure or "unstructured"}
    if re.fullmatch(r"g\d+", token):
        return {"group_size": int(token[1:])}
    calibration = CALIBRATION_TOKEN.match(token)
    if calibration:
        method, states = calibration.groups()
        return {"calibration_states": int(states)} | ({"calibration_method": method} if method else {})
    found = INPUT_TOKEN.match(token)
    if found and found.group(1) in INPUT_FIELDS:
        width = found.group(2)
        return {INPUT_FIELDS[found.group(1)]: f"int{width}" if width.isdigit() else width}
    raise ValueError(f"unknown recipe token {token!r}")


def fill_spec_json(db: sqlite3.Connection) -> int:
    """Write ``spec_json`` for every row that lacks it (inside the caller's transaction); returns how many."""
    cursor = db.execute(f"SELECT {', '.join(LEGACY_COLUMNS)} FROM results WHERE spec_json = ''")
    rows = [dict(zip(LEGACY_COLUMNS, values, strict=True)) for values in cursor.fetchall()]
    db.executemany(
        "UPDATE results SET spec_json = ? WHERE key = ?", [(legacy_spec_json(row), row["key"]) for row in rows]
    )
    return len(rows)
