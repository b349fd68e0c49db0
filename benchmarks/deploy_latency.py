"""Latency and size per deployment backend at batch 1 on one thread, measured side by side in one run.

Policies: QuaRL Table 4's synthetic MLPs I-III and the zoo's ppo CartPole, dqn LunarLander and ppo Breakout (a
CNN: c-int8 writes MLPs only). For each policy and backend: the artifact's bytes, the median and p99 latency of
batch-1 calls, and int8's speed-up over the same runtime's fp32. For LiteRT and ExecuTorch also the runtime's own call with
its input set (``invoke`` / ``execute``), without the Python client's quantize, dequantize and copies. Then ONNX Runtime's per-operator profile of the
slowest policy (its fp32 and int8-static graphs).

    python benchmarks/deploy_latency.py --zoo ../shared/zoo --calls 500
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

from quarl_bench import AgentQuery, QuarlError, resolve
from quarl_bench.deploy.backends import build as build_artifact
from quarl_bench.deploy.backends import runner as artifact_runner
from quarl_bench.deploy.export import DeployablePolicy as Deployable
from quarl_bench.deploy.export import split_normalizer
from quarl_bench.deploy.synthetic import TABLE4_POLICIES, greedy_mlp
from quarl_bench.deploy.synthetic import observations as synthetic_observations
from quarl_bench.deploy.timing import latency
from quarl_bench.evaluation.calibration import visited_states
from quarl_bench.methods.deploy import deploy_calibration_states
from quarl_bench.zoo.forms import load_agent

BACKENDS = (
    "torch-fp32",
    "ort-fp32",
    "ort-int8-static",
    "litert-fp32",
    "litert-int8",
    "executorch-fp32",
    "executorch-int8",
    "c-int8",
)
PAIRS = (("ort-fp32", "ort-int8-static"), ("litert-fp32", "litert-int8"), ("executorch-fp32", "executorch-int8"))
ZOO_AGENTS = (("ppo", "CartPole-v1"), ("dqn", "LunarLander-v2"), ("ppo", "BreakoutNoFrameskip-v4"))


def synthetic(name: str) -> tuple[torch.nn.Module, np.ndarray, np.ndarray]:
    states = synthetic_observations()
    return greedy_mlp(TABLE4_POLICIES[name]), states, states


def zoo_policy(zoo: str, algo: str, env: str, count: int) -> tuple[torch.nn.Module, np.ndarray, np.ndarray]:
    agent = load_agent(resolve(AgentQuery(env=env, algo=algo, folder=zoo, use_hub=False)))
    made = agent.make_env(1, 0)
    raw, normalizer = split_normalizer(made)
    made.close()
    module = Deployable(agent.model.policy, raw.observation_space, normalizer).eval()
    return (
        module,
        deploy_calibration_states(agent, count, 1000),
        visited_states(agent.model.policy, agent.make_env, count),
    )


def time_backend(backend: str, module, raw: np.ndarray, network: np.ndarray, calls: int) -> dict:
    calibration = raw if backend == "ort-int8-static" else None
    artifact = build_artifact(backend, module, raw[:1], calibration, "minmax", network)
    run = artifact_runner(artifact, threads=1)
    timing = latency(run, raw[0], calls=calls, warmup=max(10, calls // 10))
    found = {"bytes": artifact.nbytes, "p50_us": timing["p50_ms"] * 1e3, "p99_us": timing["p99_ms"] * 1e3}
    if artifact.kind in ("tflite", "pte"):
        invoke = runtime_call(artifact, raw[:1] if artifact.info("normalization") is None else network[:1])
        found["runtime_p50_us"] = (
            latency(lambda _: invoke(), raw[0], calls=calls, warmup=max(10, calls // 10))["p50_ms"] * 1e3
        )
    return found


def runtime_call(artifact, observation: np.ndarray):
    """The runtime's own call with its input already set (what a C++ client pays): the interpreter's ``invoke``, or
    ExecuTorch's ``execute`` on a ready tensor; the Python client's quantize/dequantize and copies left out."""
    if artifact.kind == "tflite":
        from ai_edge_litert.interpreter import Interpreter

        interpreter = Interpreter(model_content=artifact.data, num_threads=1)
        interpreter.allocate_tensors()
        source = interpreter.get_input_details()[0]
        interpreter.set_tensor(source["index"], np.zeros(source["shape"], source["dtype"]))
        return interpreter.invoke
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime

    portable_lib._unsafe_reset_threadpool(1)
    method = Runtime.get().load_program(artifact.data).load_method("forward")
    tensor = torch.as_tensor(observation)
    return lambda: method.execute([tensor])


def ort_profile(module, raw: np.ndarray, network: np.ndarray, calls: int) -> dict[str, dict[str, float]]:
    """Per ONNX operator type: microseconds per call (ORT's own profiler), fp32 and int8-static graphs."""
    import onnxruntime as ort

    found = {}
    for backend in ("ort-fp32", "ort-int8-static"):
        artifact = build_artifact(
            backend, module, raw[:1], raw if backend.endswith("static") else None, "minmax", network
        )
        with tempfile.TemporaryDirectory() as folder:
            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
            options.enable_profiling, options.profile_file_prefix = True, os.path.join(folder, "profile")
            session = ort.InferenceSession(artifact.data, options, providers=["CPUExecutionProvider"])
            for _ in range(calls):
                session.run(None, {"obs": raw[:1]})
            events = json.loads(Path(session.end_profiling()).read_text())
        per_op: dict[str, float] = {}
        for event in events:
            if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
                op = event.get("args", {}).get("op_name", "?")
                per_op[op] = per_op.get(op, 0.0) + event["dur"] / calls
        found[backend] = dict(sorted(per_op.items(), key=lambda item: -item[1]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default=os.environ.get("QUARL_ZOO", "../shared/zoo"))
    parser.add_argument("--calls", type=int, default=500, help="timed batch-1 calls per policy and backend")
    parser.add_argument("--states", type=int, default=300, help="calibration states of the zoo agents")
    parser.add_argument("--json", default=None, help="also write the figures here")
    parser.add_argument("--only", nargs="+", default=None, help="policies whose name contains one of these (e.g. III)")
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    if args.quick:
        args.calls, args.states = 10, 50
    torch.set_num_threads(1)
    policies = {f"Table 4 {name}": (lambda name=name: synthetic(name)) for name in TABLE4_POLICIES}
    for algo, env in ZOO_AGENTS:
        policies[f"{algo} {env}"] = lambda algo=algo, env=env: zoo_policy(args.zoo, algo, env, args.states)
    if args.quick:
        policies = {"Table 4 III": policies["Table 4 III"]}
    elif args.only:
        policies = {name: load for name, load in policies.items() if any(part in name for part in args.only)}
    results: dict[str, dict[str, dict]] = {}
    loaded = {}
    for name, load in policies.items():
        try:
            loaded[name] = load()
        except QuarlError as error:
            print(f"{name}: skipped ({error})")
            continue
        module, raw, network = loaded[name]
        calls = args.calls if raw[0].size < 10_000 else max(50, args.calls // 5)
        results[name] = {}
        for backend in ("torch-fp32", "ort-fp32", "ort-int8-static") if args.quick else BACKENDS:
            try:
                results[name][backend] = time_backend(backend, module, raw, network, calls)
            except QuarlError as error:
                results[name][backend] = {"error": str(error)}
            figure = results[name][backend]
            shown = (
                f"{figure['p50_us']:9.1f} µs p50 {figure['p99_us']:9.1f} p99 {figure['bytes']:>10,d} B"
                if "p50_us" in figure
                else figure["error"][:90]
            )
            print(f"{name:32s} {backend:16s} {shown}", flush=True)
    print("\nint8 speed-up over the same runtime's fp32 (p50 ratio; < 1 means int8 is slower):")
    for name, by_backend in results.items():
        ratios = []
        for fp32, int8 in PAIRS:
            if "p50_us" in by_backend.get(fp32, {}) and "p50_us" in by_backend.get(int8, {}):
                ratio = f"{fp32.split('-')[0]} {by_backend[fp32]['p50_us'] / by_backend[int8]['p50_us']:.2f}x"
                if "runtime_p50_us" in by_backend[int8]:
                    bare = by_backend[fp32]["runtime_p50_us"] / by_backend[int8]["runtime_p50_us"]
                    ratio += f" ({bare:.2f}x runtime call)"
                ratios.append(ratio)
        if "p50_us" in by_backend.get("c-int8", {}):
            ratios.append(
                f"c-int8 vs torch-fp32 {by_backend['torch-fp32']['p50_us'] / by_backend['c-int8']['p50_us']:.2f}x"
            )
        print(f"  {name:32s} " + ", ".join(ratios))
    slowest = max(results, key=lambda name: results[name].get("ort-fp32", {}).get("p50_us", 0))
    module, raw, network = loaded[slowest]
    profile = ort_profile(module, raw, network, 100)
    print(f"\nONNX Runtime per-operator time of the slowest policy ({slowest}), µs per batch-1 call:")
    for backend, per_op in profile.items():
        print(f"  {backend}: " + ", ".join(f"{op} {us:.1f}" for op, us in per_op.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"latency": results, "ort_profile": {slowest: profile}}, indent=1))
    print(headline(results))


INT8_BACKENDS = ("ort-int8-static", "ort-int8-dynamic", "litert-int8", "executorch-int8", "c-int8", "c-int4")


def headline(results: dict[str, dict[str, dict]]) -> str:
    """The last line (docs/benchmarks.md): policy III's best int8 speed-up over torch fp32 (p50) and its size ratio
    over the fp32 ONNX artifact, beside the CPU's int8 kind (the speed-up depends on it)."""
    from quarl_bench.deploy.machine import cpu_kind

    timed = results.get("Table 4 III", {})
    fp32, onnx = timed.get("torch-fp32", {}), timed.get("ort-fp32", {})
    int8 = {name: timed[name] for name in INT8_BACKENDS if "p50_us" in timed.get(name, {})}
    if "p50_us" not in fp32 or "bytes" not in onnx or not int8:
        return "policy III: not timed (run without --only, or a backend failed)"
    best = min(int8, key=lambda name: int8[name]["p50_us"])
    speed = fp32["p50_us"] / int8[best]["p50_us"]
    return (
        f"policy III: int8 {speed:.1f}x faster than fp32, {onnx['bytes'] / int8[best]['bytes']:.1f}x smaller "
        f"({best}; CPU {cpu_kind()})"
    )


if __name__ == "__main__":
    main()
