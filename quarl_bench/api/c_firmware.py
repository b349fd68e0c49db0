"""What ``export`` adds to a C artifact (``c-int8``, ``c-int4``): its public names, the firmware folder's files
(test vectors on the agent's fixed states, check program, Makefile, Cortex-M4 startup), ``policy.json``'s ``c``
block, and its Cortex-M4 flash, RAM and instructions per action where the cross tools are installed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

INSTRUCTION_SAMPLE = 200  # recorded observations the Cortex-M4 instruction count averages over


@dataclass(frozen=True)
class CFirmware:
    """The named artifact, the folder's extra files, the ``c`` block and the ``cortex_m4`` block."""

    artifact: Any
    files: dict[str, bytes]
    contract: dict[str, Any]
    cortex_m4: dict[str, Any]


def c_firmware(agent: Any, module: Any, artifact: Any, prefix: str) -> CFirmware:
    """The C artifact named with ``prefix`` and what a firmware engineer gets with it."""
    from quarl_bench.deploy.backends import program_artifact
    from quarl_bench.deploy.c_folder import c_contract, firmware_files, test_vectors
    from quarl_bench.deploy.c_source import CNames
    from quarl_bench.deploy.export import raw_observations
    from quarl_bench.evaluation.fixed_states import fixed_states

    states = fixed_states(agent.ref.content_hash, agent.model.policy, agent.make_env)
    recorded = raw_observations(module, states, np.float32)
    program, names = artifact.info("program"), CNames(prefix)
    vectors = test_vectors(recorded, program.mlp.obs_dim)
    files = firmware_files(dict(artifact.files), vectors, program, names)
    return CFirmware(
        program_artifact(program, prefix),
        files,
        c_contract(program, names, len(vectors)),
        cortex_m4(artifact, recorded),
    )


def cortex_m4(artifact: Any, recorded: np.ndarray) -> dict[str, Any]:
    """Flash, RAM and instructions per action of the C artifact on a Cortex-M4 (QEMU), where the tools are here."""
    from quarl_bench.deploy.c_build import APT_PACKAGES, cortex_m4_instructions, cortex_m4_size, cross_tools_missing

    missing = cross_tools_missing()
    if missing:
        return {"skipped": f"{', '.join(missing)} not found: apt-get install {APT_PACKAGES}"}
    weight_bytes = int(artifact.info("weight_bytes"))
    files, sample = dict(artifact.files), recorded[:INSTRUCTION_SAMPLE]
    dsp, plain = cortex_m4_instructions(files, sample), cortex_m4_instructions(files, sample, ("-DQUARL_NO_DSP",))
    macs = artifact.info("program").macs
    return cortex_m4_size(files) | {
        "weight_bytes": weight_bytes,
        "flash_limit_bytes": int(1.2 * (weight_bytes + 4096)),
        "build": "arm-none-eabi-gcc -mcpu=cortex-m4 -mfloat-abi=hard -Os, minimal startup, no libc",
        "instructions_per_action": round(dsp, 1),
        "instructions_per_action_plain": round(plain, 1),
        "macs_per_action": macs,
        "macs_per_instruction": round(macs / dsp, 3),
        "instructions_measured": (
            f"QEMU -icount shift=0 over {len(sample)} recorded observations, -O2, the DSP path (SXTB16/SADD16/SMLAD; "
            "_plain: -DQUARL_NO_DSP); Cortex-M4 cycles ~ instructions x CPI (CPI >= 1; not measured here); flash "
            "wait states and bus stalls are left out"
        ),
    }
