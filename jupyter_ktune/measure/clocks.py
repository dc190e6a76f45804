"""SM and memory clocks through NVML, read beside every timing.

Clocks are never changed (the GPU may be shared); they are recorded so a number taken while the
SM clock was ramping or throttled can be recognised as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any


@dataclass(frozen=True)
class Clocks:
    """One NVML reading."""

    sm_mhz: int
    mem_mhz: int
    sm_max_mhz: int


@cache
def _nvml_handle(pci_bus_id: str | None) -> Any:
    import pynvml  # nvidia-ml-py

    pynvml.nvmlInit()
    if pci_bus_id:
        return pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
    return pynvml.nvmlDeviceGetHandleByIndex(0)


@cache
def _max_sm_mhz(pci_bus_id: str | None) -> int:
    """The SM clock's maximum: a property of the part, read once (each NVML query of it took
    1.6 ms on the H200, twice per timed config, bench/results/sweep_profile/2026-12-01-2309)."""
    import pynvml

    return int(pynvml.nvmlDeviceGetMaxClockInfo(_nvml_handle(pci_bus_id), pynvml.NVML_CLOCK_SM))


def read_clocks(pci_bus_id: str | None = None) -> Clocks | None:
    """Read the SM/memory clocks of the device with that PCI bus id; None where NVML is absent."""
    try:
        import pynvml

        h = _nvml_handle(pci_bus_id)
        return Clocks(sm_mhz=int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
                      mem_mhz=int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)),
                      sm_max_mhz=_max_sm_mhz(pci_bus_id))
    except Exception:  # noqa: BLE001 - NVML missing or not permitted: record nothing, say so upstream
        return None


#: A reading within this share of the maximum counts as "the clock is up" (boost bins wobble a
#: few MHz below it under load; a ramping or idle clock reads 345-1200 MHz on the H200).
CLOCK_UP_SHARE = 0.9


def clock_is_up(clocks: Clocks | None) -> bool:
    """Whether a reading shows the SM clock at (about) its maximum, so timing needs no ramp-up
    warm-up; False when nothing was read (no NVML: warm up in full, as always)."""
    return bool(clocks and clocks.sm_max_mhz
                and clocks.sm_mhz >= CLOCK_UP_SHARE * clocks.sm_max_mhz)


def driver_version() -> str | None:
    """Return the NVIDIA driver version string, or None without NVML."""
    try:
        import pynvml

        _nvml_handle(None)
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # noqa: BLE001
        return None
