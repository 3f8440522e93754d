"""The profile as an object: ``with resident.profile() as p:`` collects, for the calls made inside the
block (on any thread), what ``RESIDENT_PROFILE=1`` collects for a whole program: per call site (the
user's Python file:line), the calls, kernels, time, bytes, GB/s, the fraction of the device's measured
copy rate and the launch shape, and advice lines from measured conditions.

    with rs.profile() as p:
        seed(x)
        s = rs.sum(x)
    print(p)                      # an aligned table, then the advice
    p.rows[0]["gbps"], p.advice   # the figures, as dicts
    p.to_json("profile.json")     # schema "resident.profile" (docs/json.md)

Collecting times a site's first 64 calls in the block with two events each on a GPU, then one call in 16
(counting for the calls it stands for: ``timed_calls``); nothing is collected outside the block.
"""
import os
from collections import namedtuple

from . import _core, _typed
from ._typed import shown as _shown

__all__ = ["profile", "Row", "Advice"]

Row = namedtuple("Row", ["site", "file", "line", "name", "device", "transfer", "stages", "calls", "timed_calls",
                         "kernels", "seconds", "bytes", "bytes_read", "bytes_written", "gbps", "copy_fraction",
                         "h2d_bytes", "d2h_bytes", "d2d_bytes", "allocations", "shape", "occupancy"])
Row.__doc__ = """One call site's figures: every call made from one file:line, of one kind, on one device.
copy_fraction is gbps over the device's measured copy rate (None for transfers, whose rate is the bus's)."""
Advice = namedtuple("Advice", ["kind", "site", "message", "example"])
Advice.__doc__ = "One piece of advice: the guideline a measured condition breaks, where, and the example that shows the fix."


class profile:
    """Collects a profile over a ``with`` block (see the module's description). Inside the block the
    properties report the calls made so far; after it, those of the whole block."""

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise _core.InvalidType("resident.profile() takes no arguments; use it as `with resident.profile() as p:`")
        self._p = None

    def __enter__(self):
        if getattr(self, "_open", False):
            import resident
            raise resident.InvalidArgument("resident.profile: this profile is collecting already; nest another "
                                           "resident.profile() object instead of entering this one again")
        self._p = _core._profile_open()
        self._open = True
        return self

    def __exit__(self, *exc):
        if not getattr(self, "_open", False):
            import resident
            raise resident.InvalidArgument("resident.profile: __exit__ without __enter__; use it as "
                                           "`with resident.profile() as p:`")
        self._open = False
        self._p.close()
        return False

    def _core(self):
        if self._p is None:
            import resident
            raise resident.InvalidArgument("resident.profile: not started; use it as `with resident.profile() as p:`")
        return self._p

    @property
    def rows(self):
        """The call sites, longest total time first, as Row tuples."""
        return [Row(**r) for r in self._core().rows()]

    @property
    def advice(self):
        """What the measured figures call for, as Advice tuples (empty when nothing does)."""
        return [Advice(**a) for a in self._core().advice()]

    @property
    def copy_rates(self):
        """The measured copy rate (GB/s) of each device used, by name."""
        return self._core().copy_rates()

    def table(self):
        """The report as an aligned table with units, then one line per advice."""
        return self._core().table()

    def json(self):
        """The report as one JSON text (schema "resident.profile")."""
        return self._core().json()

    def to_json(self, path):
        """Writes the report as JSON to the file path (a str, bytes or os.PathLike; written under the bytes
        the file system encodes it to). @raises InvalidType for another type, InvalidArgument for a path
        holding a NUL or that cannot be written."""
        try:
            path = os.fsencode(path)  # a str's undecodable bytes (surrogates) are the name's own
        except TypeError:
            raise _core.InvalidType(f"resident.profile.to_json: path is a {type(path).__name__}; give a str, bytes "
                                    "or os.PathLike") from None
        except UnicodeEncodeError as e:
            raise _core.InvalidArgument(f"resident.profile.to_json: the path {_shown(path)} has no bytes in the file "
                                        f"system's encoding: {e.reason}") from None
        except Exception as e:  # noqa: BLE001 (a path object whose __fspath__ raised)
            raise _core.InvalidArgument(f"resident.profile.to_json: the path's __fspath__ raised "
                                        f"{type(e).__name__}: {str(e)[:200]}") from None
        if b"\0" in path:
            raise _core.InvalidArgument(f"resident.profile.to_json: the path {_shown(os.fsdecode(path))} holds a NUL "
                                        "character")
        self._core().save_json(path)

    def __copy__(self):
        # A shallow copy would share the live collector: its __exit__ would end this one's collection.
        if self._p is not None:
            raise _core.InvalidType("a resident.profile is not pickled or copied once started: its report "
                                    "travels as p.to_json(path) or the rows of p.rows; a new resident.profile() "
                                    "collects anew")
        return profile()

    def __str__(self):
        return self.table() if self._p is not None else "resident.profile (not started)"

    def __repr__(self):
        if self._p is None:
            return "resident.profile(not started)"
        return f"resident.profile({len(self.rows)} call sites, {len(self.advice)} advice)"


_typed.methods_typed(profile, "resident.profile")  # a missing argument or an unknown keyword: InvalidType
