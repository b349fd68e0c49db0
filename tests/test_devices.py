"""Rows name the device they were timed on: a GPU run its GPU, compute capability and tensor-core dtypes (not the
CPU's features), and the report keeps rows of two devices apart."""

from __future__ import annotations

import pandas as pd

from quarl_bench.deploy.machine import device_units, tensor_core_dtypes
from quarl_bench.report.tables import amp_table

H200 = {"device": "cuda", "gpu": "NVIDIA H200", "capability": "9.0", "tensor_cores": list(tensor_core_dtypes((9, 0)))}


def test_a_gpu_s_tensor_cores_come_from_its_compute_capability() -> None:
    assert tensor_core_dtypes((9, 0)) == ("fp16", "bf16", "tf32", "fp8", "int8", "fp64")  # Hopper: fp8, no int4
    assert "fp8" in tensor_core_dtypes((8, 9)) and "fp8" not in tensor_core_dtypes((8, 6))
    assert tensor_core_dtypes((7, 0)) == ("fp16",) and tensor_core_dtypes((6, 1)) == ()
    assert device_units(H200) == "NVIDIA H200 (sm 9.0; tensor cores: fp16, bf16, tf32, fp8, int8, fp64)"
    assert device_units({"device": "cpu", "half_features": ["avx512_bf16", "amx_bf16"]}) == "avx512_bf16 amx_bf16"


def amp_row(dtype: str, ms: float, record: dict) -> dict:
    training = {"algo": "dqn", "env_id": "CartPole-v1", "arch": "large", "n_timesteps": 2000, "seed": 0}
    training |= {"dtype": dtype, "ms_per_update": ms, "updates": 100, "device": record["device"]}
    training |= {"half_features": ["avx512_bf16", "amx_bf16"], "device_record": record}
    return {"method": "amp", "provenance": {"training": training}, "mean_reward": 100.0, "key": dtype + ms.__str__()}


def test_amp_rows_on_two_gpus_are_two_devices_and_name_the_gpu_not_the_cpu() -> None:
    a100 = H200 | {"gpu": "NVIDIA A100", "capability": "8.0"}
    rows = [amp_row("fp32", 2.0, H200), amp_row("fp16", 1.0, H200), amp_row("fp32", 4.0, a100)]
    frame = pd.DataFrame([r | {"agent_hash": ""} for r in rows])
    table = amp_table(frame)
    assert sorted(set(table["device"])) == ["cuda: NVIDIA A100", "cuda: NVIDIA H200"]
    fp16 = table[table["dtype"] == "fp16"].iloc[0]
    assert fp16["speed-up"] == 2.0  # against the H200's fp32 row, not the A100's
    assert fp16["bf16/fp16 units"].startswith("NVIDIA H200 (sm 9.0") and "avx512" not in fp16["bf16/fp16 units"]
