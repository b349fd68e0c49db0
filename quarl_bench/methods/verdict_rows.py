"""A certified verdict as the verdicts table stores it (``methods/certify.py`` decides it, ``export`` too)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from quarl_bench.types import AgentRef, Job, QuantSpec

VERDICT_FIELDS = ("precision", "spec", "verdict", "episodes", "mean", "lower", "upper", "delta", "alpha")


def verdict_row(
    found: Any,
    ref: AgentRef,
    spec: QuantSpec,
    config: Any,
    tolerance: str,
    driver: dict[str, Any],
    baseline: AgentRef | None = None,
) -> dict[str, Any]:
    """The verdicts table's row of one verdict (``found``: a ``certification_result.Verdict``; ``config``: its ``CertifyConfig``) (``settings`` names the baseline agent where there is one)."""
    settings = config.identity() | ({"baseline": baseline.content_hash} if baseline is not None else {})
    return {
        "key": found.key,
        "algo": ref.algo,
        "env_id": ref.env_id,
        "agent_hash": ref.content_hash,
        **{name: getattr(found, name) for name in VERDICT_FIELDS},
        "spec_json": Job(ref.algo, ref.env_id, spec, ref.content_hash).identity()["spec"],
        "tolerance": tolerance,
        "settings": settings,
        "rows": list(found.rows),
        "evidence": dict(found.evidence),
        "provenance": driver,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
    }
