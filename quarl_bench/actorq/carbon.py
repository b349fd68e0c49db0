"""Energy and carbon of a run with codecarbon, offline (no network), saying whether it is measured or estimated."""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

HARDWARE_MODES = ("intel_rapl", "intel_power_gadget", "apple_powermetrics", "nvml")


@dataclass
class Energy:
    kwh: float = 0.0
    emissions_kg: float = 0.0
    source: str = "not measured"


@contextlib.contextmanager
def track_energy(country_iso_code: str = "USA") -> Iterator[Energy]:
    """Measure the block; ``source`` says "hardware counters" (RAPL, NVML) or "estimate (TDP x CPU load)"."""
    from codecarbon import OfflineEmissionsTracker

    logging.getLogger("codecarbon").setLevel(logging.ERROR)
    energy = Energy()
    with warnings.catch_warnings():  # codecarbon 3 deprecates save_to_file; older ones lack what replaces it
        warnings.simplefilter("ignore", DeprecationWarning)
        tracker = OfflineEmissionsTracker(
            country_iso_code=country_iso_code, save_to_file=False, log_level="error", measure_power_secs=5
        )
    tracker.start()
    try:
        yield energy
    finally:
        energy.emissions_kg = float(tracker.stop() or 0.0)
        energy.kwh = float(tracker.final_emissions_data.energy_consumed)
        modes = {getattr(hardware, "_mode", None) for hardware in tracker._hardware}
        energy.source = "hardware counters" if modes & set(HARDWARE_MODES) else "estimate (TDP x CPU load)"
