"""How each agent's precisions hold up under the conditions it was played under (``--perturb``): one line per agent,
episode count and condition (the nominal simulator first), one column per precision, the mean return with its
bootstrap 95% interval, and the stored rows behind every cell. Certify's verdicts under a condition are in the
grid of certified verdicts (its ``condition`` column); this table is the fixed-episode picture beside it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from quarl_bench.precision import precision_bits
from quarl_bench.report.estimators import bootstrap_ci
from quarl_bench.report.objects import Table
from quarl_bench.report.outcomes import SECTION
from quarl_bench.store.agent_names import name_of


def robustness_report(rows: pd.DataFrame) -> list[Table]:
    """The robustness table, or nothing when no stored row was played under a condition."""
    if rows.empty or "perturbation" not in rows or not (rows["perturbation"] != "").any():
        return []
    played = rows[(rows["method"] == "ptq") & (rows["layer_bits"] == "")]
    agents = played[played["perturbation"] != ""]["agent_hash"].unique()
    played = played[played["agent_hash"].isin(agents)]
    precisions = sorted(played["precision"].unique(), key=lambda p: -precision_bits(p))
    records = []
    keys = ["agent_hash", "episodes", "recipe", "perturbation"]
    for (_, episodes, recipe, condition), line in played.groupby(keys, sort=False):
        record = {"agent": name_of(line.iloc[0]), "episodes": episodes, "recipe": recipe or "-"}
        record["condition"] = condition or "nominal"
        for precision in precisions:
            cells = line[line["precision"] == precision]
            if cells.empty:
                record[precision] = "-"
                continue
            rewards = np.concatenate([np.asarray(r, dtype=float) for r in cells["episode_rewards"]])
            low, high = bootstrap_ci(rewards)
            record[precision] = f"{rewards.mean():.2f} [{low:.2f}, {high:.2f}]"
        record["rows"] = " ".join(line["key"])
        records.append(record)
    frame = pd.DataFrame.from_records(records).sort_values(
        ["agent", "episodes", "condition"], key=lambda column: column.map(lambda v: (v != "nominal", v))
    )
    caption = (
        "Mean return [bootstrap 95% CI] per precision under each condition the agent was played under (--perturb), "
        "the nominal simulator first; every condition's episodes are paired across precisions"
    )
    return [Table("robustness", SECTION, frame.reset_index(drop=True), caption, console=True)]
