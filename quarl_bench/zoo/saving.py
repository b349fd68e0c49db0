"""Writing a policy back in its form's files: a fine-tuned torch module as its parent's function plus its weights, or
as an ONNX graph; an SB3 copy's saved hyperparameters and normalisation beside it (rl-zoo3's layout)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# what an SB3 agent's ``{stem}/`` folder holds beside its zip, copied to a saved copy
COPIED_FILES = ("config.yml", "args.yml", "env_kwargs.yml", "vecnormalize.pkl")

TORCH_MODULE = '''"""The policy hardened by quarl-bench, as a torch module: the parent's {function}() with the hardened weights
(weights.pt beside this file). `quarl-bench export --policy-module THIS_FILE:make` takes it to c-int8 or c-int4."""
import importlib.util
from pathlib import Path

import torch

PARENT = {parent!r}
FUNCTION = {function!r}


def make():
    spec = importlib.util.spec_from_file_location("quarl_hardened_parent", PARENT)
    parent = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(parent)
    module = getattr(parent, FUNCTION)()
    module.load_state_dict(torch.load(Path(__file__).with_name("weights.pt"), weights_only=True))
    return module.eval()
'''


def save_module(policy: Any, parent: Any, folder: Path) -> None:
    """The hardened module as its parent's function plus the hardened state dict: ``folder/module.py:make``."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    path, _, function = parent.model_path.rpartition(":")
    torch.save(policy.module.state_dict(), folder / "weights.pt")
    (folder / "module.py").write_text(TORCH_MODULE.format(parent=str(Path(path).resolve()), function=function))


def save_onnx(policy: Any, path: Path) -> None:
    import torch

    sample = torch.as_tensor(policy.observation_space.sample()[None], dtype=torch.float32)
    module = policy.module.eval()
    with torch.no_grad():
        torch.onnx.export(
            module,
            (sample,),
            str(path),
            input_names=["obs"],
            output_names=["out"],
            dynamic_axes={"obs": {0: "batch"}, "out": {0: "batch"}},
            dynamo=False,
        )
