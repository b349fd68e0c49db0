"""One registry mechanism: names listed without importing implementations, an implementation found by its name
(from a name index, or by scanning its package on a miss), and an unknown name refused naming the accepted ones."""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from quarl_bench.deploy.targets import BACKENDS, KINDS
from quarl_bench.errors import QuarlError
from quarl_bench.registry import METHODS, Registry
from quarl_bench.types import FP32_TARGET, DeployTarget, Job, QuantSpec

PLUGIN = """
from {registry} import ENTRIES
ENTRIES.add("{name}", "{name} implementation")
"""


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A package of two modules, each registering one entry into ``ENTRIES`` when imported."""
    root = tmp_path / "plugins_pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (tmp_path / "plugins_registry.py").write_text(
        "from quarl_bench.registry import Registry\n"
        "ENTRIES = Registry('plugin', package='plugins_pkg', modules={'indexed': 'plugins_pkg.indexed'})\n"
    )
    for name in ("indexed", "dropped_in"):
        (root / f"{name}.py").write_text(PLUGIN.format(registry="plugins_registry", name=name))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield __import__("plugins_registry").ENTRIES
    for module in [m for m in sys.modules if m.startswith("plugins_")]:
        del sys.modules[module]


def test_names_are_listed_without_importing_and_found_by_name(package: Registry) -> None:
    assert package.names() == ("indexed",) and "plugins_pkg.indexed" not in sys.modules  # the index alone
    assert package.get("indexed") == "indexed implementation" and "plugins_pkg.dropped_in" not in sys.modules
    assert "dropped_in" in package  # in no index: the package is scanned on the miss
    assert package.get("dropped_in") == "dropped_in implementation"


def test_an_unknown_name_is_refused_naming_the_accepted_ones(package: Registry) -> None:
    with pytest.raises(QuarlError, match="^bad plugin 'nosuch': expected one of indexed, dropped_in$"):
        package.get("nosuch")


def test_the_built_in_registries_list_the_command_lines_names() -> None:
    assert METHODS.indexed()[:2] == ("ptq", "mixed") and "harden" in METHODS.indexed()
    assert BACKENDS.names()[0] == "torch-fp32" and BACKENDS.names()[-2:] == ("c-int8", "c-int4")  # --backend's order
    assert set(KINDS.names()) == {"torchscript", "torch", "onnx", "tflite", "pte", "c"}
    assert {n for n in BACKENDS.names() if not KINDS.get(BACKENDS.get(n).kind).runtime} == {"torchao-int8"}


def test_values_and_their_keys_import_no_implementation() -> None:
    """A job's key, a deployed artifact's and a calibrated rounding's included, is computed from the values and what
    sits below them: building them imports no module above the value types (a backend's lookup once imported
    ``deploy/targets/``, whose modules import the values: a cycle behind ``import_module``), and no torch."""
    code = (
        "import sys\n"
        "from quarl_bench.types import FP32_TARGET, DeployTarget, Job, QuantSpec\n"
        "job = Job('ppo', 'CartPole-v1', QuantSpec('int8'), 'h', method='deploy', target=DeployTarget('c-int8', 'int8'))\n"
        "assert job.spec == QuantSpec('int8') and job.key\n"
        "gptq = Job('ppo', 'CartPole-v1', QuantSpec('int4', ptq='gptq', calibration_states=100), 'h')\n"
        "assert gptq.identity()['calibration']['rounding'] == {'damping': 0.1}\n"
        "print(sorted(m for m in sys.modules if m.startswith(('quarl_bench.', 'torch'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    above = ("quant", "deploy", "methods", "zoo", "store", "jobs", "evaluation", "run", "api", "report", "certify")
    loaded = ast.literal_eval(done.stdout)
    assert "quarl_bench.rounding.gptq" in loaded and not [m for m in loaded if m.split(".")[1] in above or m == "torch"]


def test_a_job_names_no_method_and_each_method_states_its_reference() -> None:
    """``Job.reference`` asks the job's method (its module's rule, loaded by the registry's index where it is not
    yet): a deployed artifact against the torch-fp32 artifact, a mixed allocation against PTQ's fp32 row, a
    quantized-rollout run against its study's fp32 naive run; any other method against its own job at fp32."""
    source = (Path(__file__).resolve().parents[1] / "quarl_bench" / "types.py").read_text()
    job_class = source[source.index("class Job:") : source.index("class LayerStats")]
    assert not [name for name in METHODS.indexed() if f'"{name}"' in job_class]  # no method named in Job's code
    deploy = Job("ppo", "CartPole-v1", QuantSpec("int8"), "h", method="deploy", target=DeployTarget("c-int8", "int8"))
    assert deploy.reference() == replace(deploy, spec=QuantSpec("fp32"), target=FP32_TARGET)
    mixed = Job("ppo", "CartPole-v1", QuantSpec("int8", layer_precisions=("int8", "int4")), "h", method="mixed")
    assert mixed.reference() == replace(mixed, spec=QuantSpec("fp32"), method="ptq")
    rollout = Job("ppo", "CartPole-v1", QuantSpec("int8"), "", setting="study/tis", method="rollout")
    assert rollout.reference().setting == "study/none" and rollout.reference().spec == QuantSpec("fp32")
    qat = Job("ppo", "CartPole-v1", QuantSpec("int8"), "h", method="qat")
    assert qat.reference() == replace(qat, spec=QuantSpec("fp32"))


def test_a_backend_name_becomes_a_target_with_its_registered_facts() -> None:
    from quarl_bench.deploy.targets import deploy_target

    assert deploy_target("c-int8", 500, "minmax") == DeployTarget("c-int8", "int8")  # it calibrates on no states
    static = deploy_target("ort-int8-static", 500, "entropy")
    assert (static.precision, static.calibration_states, static.calibration_method) == ("int8", 500, "entropy")
    with pytest.raises(QuarlError, match="bad calibration states 0: expected an integer >= 1"):
        deploy_target("ort-int8-static", 0, "minmax")
    with pytest.raises(QuarlError, match="bad backend 'c-int9': expected one of torch-fp32"):
        deploy_target("c-int9")


def test_a_target_built_by_hand_that_misstates_its_backend_is_refused_before_anything_runs(tmp_path: Path) -> None:
    from quarl_bench import ResultStore, export_artifact
    from quarl_bench.methods.deploy import DeployConfig
    from quarl_bench.types import AgentRef

    ref = AgentRef("ppo", "CartPole-v1", "CartPole-v1", "folder", "/nowhere", "0" * 64)
    wrong = DeployTarget("c-int8", "fp32")  # its jobs would store fp32 rows of an int8 artifact
    with pytest.raises(QuarlError, match="bad deploy target .*backend c-int8 builds .*precision='int8'"):
        DeployConfig(ref, (wrong,))
    with ResultStore(tmp_path / "q.sqlite") as store, pytest.raises(QuarlError, match="backend c-int8 builds"):
        export_artifact(ref, wrong, tmp_path / "out", store)
    assert not (tmp_path / "out").exists()


def test_a_job_naming_no_registered_method_is_refused_where_it_is_run() -> None:
    from quarl_bench.methods.protocol import evaluator

    with pytest.raises(QuarlError, match="bad method 'nosuch': expected one of ptq, mixed"):
        evaluator("nosuch")
