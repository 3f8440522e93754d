"""Whether the GPU slowed its clocks while a batch was timed, as nvbench's throttle detection does:
NVML's counters of time spent capped by the power limit or by heat (nvmlDeviceGetViolationStatus),
read before and after each batch, and the SM clock after it. A batch during which a counter moved is
set aside and timed again after a pause (nvbench's recovery delay), so that rows timed moments apart
compare the same GPU; each row says how many batches were set aside.

Where NVML cannot be read (no driver library, a CPU run) the guard reports nothing and sets nothing
aside."""
import ctypes
import time

_POWER, _THERMAL = 0, 1  # nvmlPerfPolicyType_t: NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL
_CLOCK_SM = 1            # nvmlClockType_t: NVML_CLOCK_SM


class _Violation(ctypes.Structure):
    _fields_ = [("reference_time", ctypes.c_ulonglong), ("violation_time", ctypes.c_ulonglong)]


class Guard:
    """Reads device `pci_bus_id`'s throttle counters (or NVML device 0 when no id is given)."""

    def __init__(self, pci_bus_id=None, recovery_s=0.2):
        self.recovery_s = recovery_s
        self.why_not = None
        self._nvml = self._device = None
        try:
            nvml = ctypes.CDLL("libnvidia-ml.so.1")
            if nvml.nvmlInit_v2() != 0:
                raise OSError("nvmlInit_v2 failed")
            device = ctypes.c_void_p()
            rc = (nvml.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id.encode(), ctypes.byref(device)) if pci_bus_id
                  else nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(device)))
            if rc != 0:
                raise OSError(f"no NVML device for {pci_bus_id or 'index 0'} (NVML error {rc})")
            self._nvml, self._device = nvml, device
            self.counters()  # a driver without the counters: said here, once
        except (OSError, AttributeError) as e:
            self._nvml, self.why_not = None, str(e)

    @property
    def active(self):
        return self._nvml is not None

    def counters(self):
        """Nanoseconds spent capped by power and by heat so far (a tuple), or None without NVML."""
        if not self.active:
            return None
        out = []
        for policy in (_POWER, _THERMAL):
            v = _Violation()
            rc = self._nvml.nvmlDeviceGetViolationStatus(self._device, policy, ctypes.byref(v))
            if rc != 0:
                raise OSError(f"nvmlDeviceGetViolationStatus: NVML error {rc}")
            out.append(v.violation_time)
        return tuple(out)

    def sm_mhz(self):
        if not self.active:
            return None
        mhz = ctypes.c_uint()
        return mhz.value if self._nvml.nvmlDeviceGetClockInfo(self._device, _CLOCK_SM, ctypes.byref(mhz)) == 0 else None


def timed_batches(batch, reps, guard=None, retries=None):
    """Seconds of `reps` clean runs of batch() (a function that runs and times one batch, returning its
    seconds), and what the guard saw: {"set_aside": batches timed while the clocks were capped, timed
    again after the guard's pause (at most `retries`, default reps), "capped_kept": capped batches kept
    once the retries were spent, "sm_mhz": the lowest SM clock read after a batch}."""
    retries = reps if retries is None else retries
    times, set_aside, kept, lowest = [], 0, 0, None
    while len(times) < reps:
        before = guard.counters() if guard and guard.active else None
        t = batch()
        if before is None:
            times.append(t)
            continue
        mhz = guard.sm_mhz()
        lowest = mhz if lowest is None or (mhz is not None and mhz < lowest) else lowest
        capped = guard.counters() != before
        if capped and set_aside < retries:
            set_aside += 1
            time.sleep(guard.recovery_s)
            continue
        kept += capped
        times.append(t)
    return times, {"set_aside": set_aside, "capped_kept": kept, "sm_mhz": lowest}
