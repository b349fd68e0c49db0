"""Console output of the commands: rich tables and the sweep progress bar. Reads rows, never computes results."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from quarl_bench.precision import precision_bits
from quarl_bench.store.agent_names import ref_title
from quarl_bench.store.spec_kinds import spec_extras, spec_of

# Pipes and CI logs get 80 columns by default, which wraps every row of the result table (140 fits it).
console = Console(width=None if sys.stdout.isatty() else 140)


def format_number(value: float | None, pattern: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else pattern.format(value)


def fixed_state_text(agreement: dict[str, float]) -> tuple[str, str]:
    """Fidelity on the fixed fp32-visited states (the same for every width): the flip rate (or the continuous action
    error), and the flip rates on near-ties / clear decisions."""
    if "fixed_flip_rate" in agreement:
        split = (
            f"{100 * agreement['fixed_flip_near_tie']:.0f} / {100 * agreement['fixed_flip_clear']:.0f} %"
            if "fixed_flip_near_tie" in agreement
            else "-"
        )
        return f"{100 * agreement['fixed_flip_rate']:.1f} %", split
    if "fixed_action_range_error" in agreement:
        return f"{100 * agreement['fixed_action_range_error']:.2f} % of range", "-"
    if "fixed_action_rel_error" in agreement:  # rows stored before the range error
        return f"L2 {agreement['fixed_action_l2']:.3f} ({100 * agreement['fixed_action_rel_error']:.1f} %)", "-"
    return "-", "-"


def agreement_text(agreement: dict[str, float]) -> str:
    if "action_agreement" in agreement:
        return f"{100 * agreement['action_agreement']:.1f} %"
    if "action_range_error" in agreement:
        return f"{100 * agreement['action_range_error']:.2f} % of range"
    if "action_l2" in agreement:  # rows stored before the range error
        return f"L2 {agreement['action_l2']:.3f} ({100 * agreement['action_rel_error']:.1f} %)"
    return "-"


def spec_text(row: dict[str, Any]) -> str:
    """``int8``, or ``int8 symmetric per-channel quarl-code`` when the row's spec is not the default; a deploy row's
    backend."""
    if row.get("backend"):
        return row["backend"]
    if row.get("method") == "random":
        return "random policy"
    if row.get("layer_bits"):
        return "layers " + "/".join(json.loads(row["layer_bits"]))
    return " ".join([row["precision"], *spec_extras(spec_of(row["spec_json"]))])


def result_line(row: dict[str, Any], reused: bool) -> str:
    how = "reused from the store" if reused else f"{row['wall_seconds']:.1f} s"
    return f"  {spec_text(row):>5}: {row['mean_reward']:.2f} ± {row['std_reward']:.2f} ({how})"


def not_quantized_line(rows: list[dict[str, Any]]) -> str:
    """The acting modules the rows' quantized policies left in fp32 (their stored ``not_quantized``), or ''."""
    left = dict.fromkeys(name for row in rows for name in row["provenance"].get("not_quantized", []))
    return f"Not quantized (stay fp32): {', '.join(left)}" if left else ""


def result_table(rows: list[dict[str, Any]], title: str) -> Table:
    """One agent's rows; the fp32 reward and E% of each come from its own reference row (joined by the store)."""
    first = rows[0]
    seeds = sorted({row["seed"] for row in rows})
    noise = f", observation noise {first['obs_noise']:g}" if first.get("obs_noise") else ""
    table = Table(
        title=f"{title}: {first['episodes']} episodes, seed{'s' if len(seeds) > 1 else ''} "
        f"{', '.join(map(str, seeds))}, actions {action_text(first)}{noise}"
    )
    columns = (
        "precision",
        *(("seed",) if len(seeds) > 1 else ()),
        "reward",
        "fp32 reward",
        "E %",
        "flips, fp32 states",
        "near-tie / clear",
        "same, own states",
        "episodes",
        "seconds",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "precision" else "right")
    for row in rows:
        table.add_row(
            spec_text(row),
            *((str(row["seed"]),) if len(seeds) > 1 else ()),
            f"{row['mean_reward']:.2f} ± {row['std_reward']:.2f}",
            format_number(row["fp32_reward"] if row["key"] != row["reference_key"] else row["mean_reward"], "{:.2f}"),
            format_number(row["error_pct"], "{:+.2f}"),
            *fixed_state_text(row["agreement"]),
            agreement_text(row["agreement"]),
            str(row["episodes"]),
            f"{row['wall_seconds']:.1f}",
        )
    return table


def action_text(row: dict[str, Any]) -> str:
    return f"epsilon-greedy({row['epsilon']:g})" if row["action_mode"] == "epsilon-greedy" else row["action_mode"]


def summary_table(rows: list[dict[str, Any]], title: str) -> Table:
    table = Table(title=title)
    for column in ("algo", "env", "method", "precision", "seed", "reward", "E %", "same, own states", "episodes"):
        table.add_column(column)
    ordered = sorted(rows, key=lambda r: (r["algo"], r["env_id"], r["method"], r["seed"], -r["bits"], spec_text(r)))
    for row in ordered:
        table.add_row(
            row["algo"],
            row["env_id"],
            row["method"],
            spec_text(row),
            str(row["seed"]),
            f"{row['mean_reward']:.2f} ± {row['std_reward']:.2f}",
            format_number(row["error_pct"], "{:+.2f}"),
            agreement_text(row["agreement"]),
            str(row["episodes"]),
        )
    return table


def amp_console_table(title: str, rows: list[dict[str, Any]]) -> Table:
    """:func:`quarl_bench.report.tables.amp_summary` of the runs' stored rows."""
    import pandas as pd

    from quarl_bench.report.tables import AMP_SPREAD, amp_summary, amp_table

    summary = amp_summary(amp_table(pd.DataFrame(rows)))
    table = Table(title=title)
    for column in ("policy", "dtype", "seeds", "ms / update", "speed-up", "final reward", AMP_SPREAD):
        table.add_column(column, justify="left" if column in ("policy", "dtype") else "right")
    for _, row in summary.iterrows():
        table.add_row(
            row["arch"],
            row["dtype"],
            str(row["seeds"]),
            f"{row['ms_per_update']:.2f}",
            format_number(row["speed-up"], "{:.2f}x"),
            f"{row['reward']:.1f} ± {row['reward std']:.1f}",
            row[AMP_SPREAD],
        )
    return table


def breakdown_table(phases: dict[str, float]) -> Table:
    table = Table(title="Actor runtime breakdown (seconds, summed over actors)")
    for phase in phases:
        table.add_column(phase, justify="right")
    table.add_row(*[f"{seconds:.1f}" for seconds in phases.values()])
    return table


@contextmanager
def progress_bar(total: float, what: str = "jobs") -> Iterator[Any]:
    """A long command's progress on the console: a bar on a terminal, a line per finished unit when redirected;
    yields ``update(completed=None, last=None)``."""
    from quarl_bench.progress import progress

    with progress(total, what, stream=console.file) as update:
        yield update


def sensitivity_table(sensitivity) -> Table:
    """Layer x precision from :func:`quarl_bench.report.layers.sensitivity_frame`: E %, action agreement and the
    median change of the decision margin, means over seeds."""
    precisions = sorted(set(sensitivity["precision"]), key=lambda p: -precision_bits(p))
    seeds = sorted({s for text in sensitivity["seed list"] for s in text.split()}, key=int)
    table = Table(
        title=f"One layer quantized at a time (others fp32): E % / same actions / margin change, "
        f"seeds {', '.join(seeds)}"
    )
    table.add_column("layer")
    for precision in precisions:
        table.add_column(precision, justify="right")
    for (_, name), layer in sensitivity.groupby(["layer", "name"]):
        by_precision = layer.set_index("precision")
        texts = []
        for precision in precisions:
            if precision not in by_precision.index:
                texts.append("-")
                continue
            cell = by_precision.loc[precision]
            texts.append(
                f"{cell['E %']:+.1f} % / {format_number(100 * cell['agreement'], '{:.0f}')} % / "
                f"{format_number(cell['margin change'], '{:+.3g}')}"
            )
        table.add_row(name, *texts)
    return table


def mixed_table(rows: list[dict[str, Any]], layer_names: list[str], tolerance_pct: float, delta: float) -> Table:
    """The verified allocation next to uniform PTQ: reward over the verify seeds, E%, bytes, and whether the mean
    stays within the search's tolerance δ (``tolerance_pct``% of R_fp32 - R_random) of fp32 on these seeds."""
    by_spec: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_spec.setdefault(f"{row['method']} {spec_text(row)}", []).append(row)
    table = Table(
        title=f"Verified on seeds {', '.join(map(str, sorted({r['seed'] for r in rows})))} "
        f"(layers: {', '.join(layer_names)}); tolerance δ = {delta:.2f} ({tolerance_pct:g}% of R_fp32 - R_random)"
    )
    # a point mean against fp32 - δ: descriptive (the search's own check), not certify's verdict
    for column in ("policy", "mean reward", "E %", "acting bytes", "mean ≥ fp32 - δ (descriptive, not a verdict)"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for label, group in by_spec.items():
        rewards = [x for row in group for x in row["episode_rewards"]]
        errors = [row["error_pct"] for row in group if row["error_pct"] is not None]
        error = sum(errors) / len(errors) if errors else float("nan")
        mean = sum(rewards) / len(rewards)
        fp32 = [row["fp32_reward"] for row in group if row["key"] != row["reference_key"]]
        within = "-" if not fp32 else ("yes" if mean >= sum(fp32) / len(fp32) - delta else "no")
        table.add_row(
            label,
            f"{mean:.2f}",
            format_number(error, "{:+.2f}"),
            str(group[0]["weights"].get("acting_bytes", "-")),
            within,
        )
    return table


def fidelity_table(frame) -> Table:
    """Per precision: how many episodes parted from fp32 and the median step where actions and observations did."""
    import numpy as np

    from quarl_bench.report.divergence import spec_label

    table = Table(title="Side by side with fp32 from the same seeds (first action / observation divergence)")
    for column in (
        "precision",
        "episodes",
        "actions differ",
        "median first action step",
        "trajectories part",
        "median first obs step",
        "median fp32 length",
        "threshold",
        "obs noise",
        "fp32 trajectories: flips (h error), first → last tenth",
    ):
        table.add_column(column, justify="left" if column == "precision" else "right")
    for _, row in frame.iterrows():
        actions = [s for s in row["first_action"] if s is not None]
        observations = [s for s in row["first_obs"] if s is not None]
        table.add_row(
            spec_label(row),
            str(row["episodes"]),
            f"{len(actions)}/{row['episodes']}",
            format_number(float(np.median(actions)) if actions else None, "{:.0f}"),
            f"{len(observations)}/{row['episodes']}",
            format_number(float(np.median(observations)) if observations else None, "{:.0f}"),
            f"{np.median(row['lengths']):.0f}",
            f"{row['threshold']:g}",
            f"{row['obs_noise']:g}",
            early_and_late(row["over_time"]),
        )
    return table


def early_and_late(steps: dict) -> str:
    """The flip rate (continuous: action error) over the first and the last tenth of the fp32 episodes' steps, and
    the hidden-state error likewise for a recurrent policy: does the error build up?"""
    from quarl_bench.evaluation.fidelity_over_time import per_step_rates

    if not steps.get("alive"):
        return "-"
    tenth = max(1, len(steps["alive"]) // 10)
    what = "action_error" if steps["action_error"] else "flips"
    _, rates = per_step_rates(steps, what, tenth)
    text = f"{100 * rates[0]:.1f}% → {100 * rates[-1]:.1f}%"
    if steps["hidden_error"]:
        _, hidden = per_step_rates(steps, "hidden_error", tenth)
        text += f" (h {hidden[0]:.3f} → {hidden[-1]:.3f})"
    return text


def rollout_line(row: dict[str, Any]) -> str:
    """One finished quantized-rollout run: its setting, the trained policy's reward, its mismatch at the end."""
    training = row["provenance"].get("training") or {}
    curve = training.get("curve") or [{}]
    last = curve[-1]
    label = row["setting"].split("/", 1)[-1]
    mismatch = (
        f", last update: KL {last['kl']:.2e}, ratio max {last['ratio_max']:.3f}, agreement {last['agreement']:.3f}"
        if "kl" in last
        else ""
    )
    seconds = sum((training.get("seconds") or {}).values())
    return (
        f"  {row['algo']}/{row['env_id']} {row['precision']} {label} seed {row['seed']}: "
        f"{row['mean_reward']:.1f} ± {row['std_reward']:.1f} over {row['episodes']} episodes "
        f"({training.get('training_steps', '?')} steps, {seconds:.0f} s{mismatch})"
    )


def rollout_summary(rows: list[dict[str, Any]]) -> Table:
    """The rollout table (``report/rollout.py``) of these rows."""
    import pandas as pd

    from quarl_bench.report.rollout import rollout_runs, rollout_table

    table = rollout_table(rollout_runs(pd.DataFrame(rows)))
    shown = ["env", "rollout precision", "correction", "seeds", "final reward IQM", "vs fp32 rollouts", "paired CI"]
    shown += ["steps to threshold (median)", "KL(π_q‖π)", "share outside [1/C, C]", "entropy π_q - π"]
    result = Table(title="Quantized rollouts: the trained fp32 policy's reward over seeds, vs fp32 rollouts (paired)")
    for column in shown:
        result.add_column(column)
    for _, row in table.iterrows():
        result.add_row(*[_cell(row[c]) for c in shown])
    return result


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return format_number(value, "{:.3g}" if value and abs(value) < 0.01 else "{:.2f}")
    return "" if value is None else str(value)


VERDICT_STYLE = {
    "safe": "green",
    "equivalent": "green",
    "unsafe": "red",
    "different": "red",
    "undetermined": "yellow",
}


def verdict_line(found: Any) -> str:
    """One certified verdict as it is decided (or found stored)."""
    style = VERDICT_STYLE[found.verdict]
    unpaired = found.evidence.get("design") == "unpaired"
    unit = "trials" if found.evidence.get("method") == "trials" else "episodes"  # a robot's recorded trials
    where = "stored" if found.reused else f"{found.episodes} {'unpaired' if unpaired else 'paired'} {unit}"
    extra = "".join(f"; {text}" for text in (found.catastrophe_text(), found.guarantee) if text)
    label = " [dim](exploratory)[/]" if found.exploratory else ""
    from quarl_bench.statistics.wording import interval_against, outside_note

    evidence = found.evidence
    if not found.episodes:
        return f"  {found.spec}: [{style}]{found.verdict}[/]{label} (no pairs yet)"
    if "walk" in evidence:  # the finite-horizon test of success rates: a walk against its boundary, no interval
        bound = evidence["boundary"]
        interval = (
            f"candidate-only minus reference-only {evidence['walk']:+d} of {evidence['discordant_pairs']} discordant "
            + (f"pairs, deciding at ±{bound}" if bound is not None else "pairs, too few to decide")
        )
        note = ""
    else:
        interval = interval_against(
            found.lower, found.upper, evidence.get("delta_low", found.delta), evidence.get("delta_high", found.delta)
        )
        note = outside_note(found.mean, found.lower, found.upper)
    rates = _success_rates(evidence)
    warning = f"\n    [yellow]note[/]: {evidence['warning']}" if evidence.get("warning") else ""
    return (
        f"  {found.spec}: [{style}]{found.verdict}[/]{label} (mean difference {found.mean:+.2f}, "
        f"{interval}; {where}{rates}{extra}{note}){warning}"
    )


def _success_rates(evidence: dict[str, Any]) -> str:
    """Each policy's own success rate over the pairs, with its Wilson 95% interval: ``; fp32 38/40 (0.95 [0.83,
    0.99]), quantized 37/40 (...)``; '' for another outcome (or a verdict stored without them)."""
    if "reference_successes" not in evidence:
        return ""
    from quarl_bench.report.outcomes import wilson_interval

    parts, pairs = [], int(evidence["outcome_pairs"])
    for name, key in (("fp32", "reference"), ("quantized", "quantized")):
        successes = int(evidence[f"{key}_successes"])
        low, high = wilson_interval([1.0] * successes + [0.0] * (pairs - successes))
        parts.append(f"{name} {successes}/{pairs} ({successes / pairs:.2f} [{low:.2f}, {high:.2f}])")
    return "; " + ", ".join(parts)


def certification_table(result: Any) -> Table:
    """A certify run's verdicts, widest first, titled with the certified minimum safe precision."""
    ref = result.agent
    minimum = result.minimum_safe_text
    alpha = result.verdicts[0].alpha if result.verdicts else 0.05
    condition = result.verdicts[0].evidence.get("perturbation") if result.verdicts else ""
    unpaired = bool(result.verdicts) and result.verdicts[0].evidence.get("design") == "unpaired"
    two_sided = any(found.verdict in ("equivalent", "different") for found in result.verdicts)
    table = Table(
        title=f"{escape(ref_title(ref))}: certified minimum {'equivalent' if two_sided else 'safe'} precision {minimum}\n"
        + (f"under {condition} (every paired episode, fp32's alike)\n" if condition else "")
        + ("unpaired: the quantized policy played other episodes than fp32 (independent trials)\n" if unpaired else "")
        + f"tolerance δ = {result.delta:.2f} ({result.tolerance}), confidence {1 - alpha:.2f}, "
        f"{guarantee_text(result.verdicts)}",
    )
    for column in ("precision", "verdict", "episodes", "mean q - fp32", "lower", "upper", "catastrophes"):
        table.add_column(column, justify="left" if column in ("precision", "verdict") else "right")
    for found in result.verdicts:
        style = VERDICT_STYLE[found.verdict]
        upper = found.evidence.get("catastrophe_rate_upper")
        table.add_row(
            found.spec,
            f"[{style}]{found.verdict}[/]" + (" (exploratory)" if found.exploratory else ""),
            str(found.episodes),
            f"{found.mean:+.2f}",
            f"{found.lower:.2f}",
            f"{found.upper:.2f}",
            f"≤ {upper:.1%}" if upper is not None else catastrophe_missing(found.evidence),
        )
    return table


def catastrophe_missing(evidence: dict) -> str:
    """The catastrophes cell of a verdict without a rate bound: not computed (no threshold), or '-' (stored before)."""
    return "not computed" if str(evidence.get("catastrophe_source", "")).startswith("not computed") else "-"


def guarantee_text(verdicts: list) -> str:
    """What the verdicts guarantee, in one phrase: the sequence, the bounds it rests on and the α split."""
    if not verdicts:
        return "no verdict"
    evidence = verdicts[0].evidence
    if not evidence:
        return "asymptotic (stored before guarantees were recorded)"
    shares = f"α per test {evidence['alpha_test']:.3g}" + (
        f" over {evidence['families']} families" if evidence.get("families", 1) > 1 else ""
    )
    if evidence["guarantee"] == "finite-sample":
        low, high = evidence["bounds"]
        what = "returns" if evidence.get("outcome", "return") == "return" else f"each episode's {evidence['outcome']}"
        return f"finite-sample (betting, {what} in [{low:g}, {high:g}]: {evidence['bounds_source']}), {shares}"
    return f"asymptotic (no return bounds; no decision before {evidence['min_pairs']} pairs), {shares}"
