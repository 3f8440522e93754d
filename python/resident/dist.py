"""Arrays over several devices, and processes that combine values: ``resident.dist``.

A sharded array is one logical 1-D array cut into nearly equal shards, one per device, each an ordinary
``resident.Array`` on its device. Work applies per shard, all shards at once (each on its own device's
stream); reductions combine the shards' partial values (and, over a communicator spanning processes,
the processes' values through NCCL or MPI). CPU "devices" work the same, so the same code runs without
a GPU.

    import numpy as np, resident as rs
    x = rs.dist.shard(np.random.rand(1 << 28).astype(np.float32), ["cuda:0", "cuda:1"])
    rs.dist.apply(seed, x)                  # one kernel per GPU, concurrently
    s = rs.dist.sum(x)                      # partial per shard, combined on the host
    host = x.to_host()                      # one download per shard

    comm = rs.dist.Communicator.from_launcher()   # one rank per process: mpirun, torchrun or RESIDENT_*
    x = rs.dist.shard(whole, comm)                # this process's shard of the whole
    total = rs.dist.sum(x)                        # combined over every process
"""
import concurrent.futures
import inspect
import itertools
import math
import numbers
import operator
import os

import numpy as _np

from . import _compat, _core, _protocols, _typed
from ._typed import shown as _shown
from . import Error, LibraryError, InvalidArgument, InvalidType, ShapeMismatch

__all__ = ["ShardedArray", "Communicator", "Timeout", "shard", "from_shards", "apply", "sum", "min", "max",
           "copy", "extent_of", "random"]


class Timeout(LibraryError, TimeoutError):
    """A rank did not arrive (or a collective did not finish) within the communicator's timeout."""


_min, _max, _sum = min, max, sum  # the builtins, before this module's reductions shadow them


def _index(v, what, kind=InvalidType):
    """v as an int (operator.index): a bool, a value without __index__, or an __index__ that raises or
    gives no int is `kind` naming `what`; KeyboardInterrupt and SystemExit pass as they are."""
    if isinstance(v, (bool, _np.bool_)) or not hasattr(type(v), "__index__"):
        raise kind(f"{what}={_shown(v)} is not an integer")
    try:
        return operator.index(v)
    except Exception as e:  # noqa: BLE001 (named in the message)
        raise kind(f"{what}={_shown(v)} is not an integer: its __index__() raised {_shown(e)}") from None


def extent_of(n, shards, r):
    """(offset, count) of shard r of n elements cut into `shards` nearly equal parts: n // shards each,
    the first n % shards of them one more (as the C++ sharded_array cuts them)."""
    n, shards, r = (_index(v, f"extent_of: {name}", InvalidArgument) for name, v in (("n", n), ("shards", shards),
                                                                                   ("r", r)))
    if n < 0:
        raise InvalidArgument(f"extent_of: n={n} is negative; give the number of elements")
    if not 0 <= r < shards:
        raise InvalidArgument(f"shard {r} of {shards} does not exist")
    base, extra = divmod(n, shards)
    return r * base + _min(r, extra), base + (1 if r < extra else 0)


_extent = extent_of


_own_folder = _compat.rendezvous_folder  # the ranks' rendezvous folder, this user's alone


class Communicator:
    """Ranks that combine values, one per device. ``Communicator(devices)``: one process over several
    devices (GPUs joined by NCCL; CPU ranks combined by the host). ``Communicator.from_launcher()``: this
    process as one rank of several, started by mpirun, torchrun or the RESIDENT_* variables."""

    def __init__(self, devices=None, *, _core_comm=None):
        if _core_comm is None:
            if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__"):
                raise InvalidType(f"resident.dist.Communicator takes a list of device names, not "
                                  f"{type(devices).__name__}")
            devices = _bounded(devices, "resident.dist.Communicator: devices")
            if not devices:
                raise InvalidArgument("resident.dist.Communicator: give the devices, one rank each")
            _core_comm = _core._comm_local([str(d) for d in devices])
        self._c = _core_comm

    @classmethod
    def from_launcher(cls, timeout=120.0, device=None):
        """This process as one rank: mpirun's OMPI_COMM_WORLD_RANK / _SIZE (or MPI itself in a build with
        MPI), torchrun's RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE, or RESIDENT_RANK /
        RESIDENT_WORLD_SIZE; else a world of one. Ranks of several processes on GPUs exchange NCCL's id
        through the file RESIDENT_RENDEZVOUS names (fresh per job, on a file system every rank sees);
        under torchrun on one host it defaults to a file in the temporary folder named after the job.
        A rank that does not arrive within `timeout` seconds (a number, at most 1e9) raises Timeout in the
        others.
        @raises Timeout; InvalidType (a timeout that is not a number); InvalidArgument (a timeout not in
        (0, 1e9], inconsistent variables, CPU ranks of several processes without MPI); LibraryError (NCCL, MPI)."""
        if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
            raise InvalidType(f"resident.dist.Communicator.from_launcher: timeout={_shown(timeout)} is not a number of "
                              "seconds")
        added = {}
        env = os.environ
        if "WORLD_SIZE" in env and not any(k in env for k in ("RESIDENT_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")):
            added["RESIDENT_WORLD_SIZE"] = env["WORLD_SIZE"]
            added["RESIDENT_RANK"] = env.get("RANK", "")
            if "LOCAL_RANK" in env:
                added["RESIDENT_LOCAL_RANK"] = env["LOCAL_RANK"]
            if "LOCAL_WORLD_SIZE" in env:
                added["RESIDENT_LOCAL_SIZE"] = env["LOCAL_WORLD_SIZE"]
            if "RESIDENT_RENDEZVOUS" not in env:
                addr = env.get("MASTER_ADDR", "localhost")
                if addr not in ("localhost", "127.0.0.1", "::1") and env.get("LOCAL_WORLD_SIZE") != env["WORLD_SIZE"]:
                    raise InvalidArgument("resident.dist: torchrun over several hosts: set RESIDENT_RENDEZVOUS to a "
                                          "file path, fresh for each job, on a file system every rank sees")
                # torchrun's run id is "none" unless given: the master's address and port tell jobs apart
                job = f"{env.get('TORCHELASTIC_RUN_ID') or 'none'}-{addr}-{env.get('MASTER_PORT', '0')}"
                added["RESIDENT_RENDEZVOUS"] = os.path.join(_own_folder(), f"rendezvous-{job}")
        added = {k: v for k, v in added.items() if k not in env}  # what the user set stays, and is restored
        for k, v in added.items():
            env[k] = v
        try:
            return cls(_core_comm=_core._comm_from_launcher(float(timeout), device))
        except Error as e:
            if not added:
                raise
            # The variables the user set are torchrun's: the message names those, not their translation.
            text = str(e)
            for ours, theirs in (("RESIDENT_WORLD_SIZE", "WORLD_SIZE"), ("RESIDENT_RANK", "RANK"),
                                 ("RESIDENT_LOCAL_RANK", "LOCAL_RANK"), ("RESIDENT_LOCAL_SIZE", "LOCAL_WORLD_SIZE")):
                if ours in added:  # a RESIDENT_ variable the user set themselves keeps its name
                    text = text.replace(ours, theirs + " (torchrun's)")
            raise type(e)(text) from None
        finally:
            for k in added:
                env.pop(k, None)

    size = property(lambda self: self._c.size, doc="Ranks in all processes.")
    rank = property(lambda self: self._c.rank, doc="The rank of this process's first device.")
    devices = property(lambda self: list(self._c.devices), doc="This process's devices, one per rank it holds.")
    transport = property(lambda self: self._c.transport, doc="What joins the ranks: NCCL, MPI or the host.")
    launcher = property(lambda self: self._c.launcher, doc="in-process, environment or mpi.")
    timeout = property(lambda self: self._c.timeout, doc="Seconds a collective waits for the other ranks.")

    def barrier(self):
        """Blocks until every rank has called barrier. @raises Timeout."""
        self._c.barrier()

    def all_reduce(self, arrays, op="sum"):
        """In place: each array (one per rank this process holds, resident arrays on its devices) becomes
        the combination ("sum", "min", "max") of that array over all ranks. Waits for the result.
        @raises Timeout; ShapeMismatch; InvalidArgument."""
        if not isinstance(op, str):
            raise InvalidType(f"resident.dist.Communicator.all_reduce: op is a {type(op).__name__}; give 'sum', "
                              "'min' or 'max'")
        if not isinstance(arrays, (list, tuple)):
            arrays = [arrays]
        self._c.all_reduce(list(arrays), op)

    def close(self):
        """Releases the ranks (every process closes its own)."""
        self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __reduce_ex__(self, protocol=None):
        raise InvalidType("a resident.dist.Communicator is not pickled or copied: it joins this process's devices "
                          "(and processes); each process makes its own (Communicator.from_launcher())")

    closed = property(lambda self: self._c.closed, doc="Whether close() has released the ranks.")

    def __repr__(self):
        if self.closed:  # its ranks are gone: nothing else to say, and repr never raises
            return "resident.dist.Communicator(closed)"
        return f"resident.dist.Communicator(rank {self.rank} of {self.size}, {self.devices}, {self.transport})"


def _fixed(*_):
    raise InvalidType("resident.dist.ShardedArray: its shards and layout are fixed when it is made (checked "
                      "then); make a new one, e.g. rs.dist.ShardedArray(shards, size) with the arrays you want")


class _Shards(tuple):
    """A sharded array's shards, fixed when it is made: the checks made then (one element type, the
    layout's counts, no shared memory) hold for every later call."""

    __setitem__ = __delitem__ = _fixed


def _layout(name, doc):
    return property(lambda self: self.__dict__[name], _fixed, _fixed, doc=doc)


class ShardedArray:
    """One logical 1-D array over several devices: this process's shards (``shards``, resident Arrays)
    and where each lies in the whole (``extents``: (offset, count)), fixed when it is made."""

    shards = _layout("_shards", "This process's shards, a tuple of resident Arrays.")
    extents = _layout("_extents", "(offset, count) of each of this process's shards in the whole.")
    size = _layout("_size", "The elements of the whole array.")
    first = _layout("_first", "The number of this process's first shard.")
    shard_count = _layout("_count", "The shards of the whole array, over every process.")
    comm = _layout("_comm", "The Communicator joining the processes that hold shards, or None.")

    def __init__(self, shards, size, first=0, count=None, comm=None, *, what="resident.dist.ShardedArray"):
        if "_shards" in self.__dict__:  # made: its checks hold for its layout, which stays as it is
            _fixed()
        shards = _Shards(_bounded(shards, what) if not isinstance(shards, list) else shards)
        if not all(isinstance(s, _core.Array) for s in shards):
            raise InvalidType(f"{what}: shards are resident Arrays (resident.dist.shard makes them)")
        if len({s.dtype for s in shards}) > 1:
            raise InvalidArgument(f"{what}: the shards hold {sorted({s.dtype for s in shards})}; give one type")
        size, first = _index(size, f"{what}: size"), _index(first, f"{what}: first")
        count = len(shards) if count is None else _index(count, f"{what}: count")
        if size < 0 or first < 0 or count < 1 or first + len(shards) > count:
            raise InvalidArgument(f"{what}: shards {first} to {first + len(shards) - 1} of {count}, {size} elements; "
                                  "give at least one shard, each there")
        if comm is not None and not isinstance(comm, Communicator):
            raise InvalidType(f"{what}: comm is a {type(comm).__name__}; give a resident.dist.Communicator or "
                              "leave it out")
        if (comm is None and count != len(shards)) or (comm is not None and comm.size != count):
            # Shards held by other processes are reached through their communicator; without one a
            # reduction over this process's shards would present a part as the whole.
            raise InvalidArgument(f"{what}: {len(shards)} shards here of {count} with "
                                  f"{'no communicator' if comm is None else f'a communicator of {comm.size}'}; "
                                  "the shards of other processes come with the Communicator joining them")
        extents = tuple(_extent(size, count, first + i) for i in range(len(shards)))
        for i, (s, (_, c)) in enumerate(zip(shards, extents)):
            if s.size != c or len(s.shape) != 1:
                raise ShapeMismatch(f"{what}: shard {first + i} has shape {tuple(s.shape)} where the layout "
                                    f"puts {c} elements in one dimension")
        # Shards that share memory would see every element-wise call twice there.
        spans = sorted((m.device, m.data_ptr, m.data_ptr + m.nbytes, i) for i, m in enumerate(shards) if m.nbytes)
        for (d0, _, end0, i0), (d1, start1, _, i1) in zip(spans, spans[1:]):
            if d0 == d1 and start1 < end0:
                raise InvalidArgument(f"{what}: arrays {_min(i0, i1)} and {_max(i0, i1)} share memory; give each "
                                      "shard memory of its own")
        self.__dict__.update(_shards=shards, _extents=extents, _size=size, _first=first, _count=count, _comm=comm)

    dtype = property(lambda self: self.shards[0].dtype if self.shards else "float32")
    devices = property(lambda self: [s.device for s in self.shards])
    nbytes = property(lambda self: self.size * _np.dtype(self.dtype).itemsize)

    def _all_local(self, what):
        if len(self.shards) != self.shard_count:
            raise InvalidArgument(f"resident.dist.{what}: this process holds {len(self.shards)} of the "
                                  f"{self.shard_count} shards; each process reads its own (x.shards)")

    def to_host(self, out=None):
        """The whole array in a NumPy array: a new one, or `out` (a writable C-contiguous NumPy array of
        its size and dtype, filled and returned). One download per shard, into its place. Synchronizes.
        @raises InvalidArgument when other processes hold shards, or for an out it cannot fill (before
        any download)."""
        self._all_local("to_host")
        flat = _np.empty(self.size, dtype=self.dtype) if out is None else self._host_out(out, "to_host")
        for s, (o, c) in zip(self.shards, self.extents):
            s.to_host(out=flat[o:o + c])
        return flat if out is None else out

    def to_host_async(self, out):
        """Each shard's download into its place in `out` (as to_host's), queued on the shard's stream:
        from page-locked memory (resident.streaming.pinned_empty) the host goes on meanwhile; keep out
        alive and unread until every shard's device is synchronized (resident.synchronize(device))."""
        self._all_local("to_host_async")
        flat = self._host_out(out, "to_host_async")
        for s, (o, c) in zip(self.shards, self.extents):
            s.to_host_async(flat[o:o + c])
        return out

    def _host_out(self, out, what):
        """out's elements as one flat NumPy view, checked whole before any shard is downloaded."""
        where = f"resident.dist.ShardedArray.{what}"
        if not isinstance(out, _np.ndarray) or isinstance(out, _np.ma.MaskedArray):
            raise InvalidType(f"{where}: out is a {type(out).__name__}; give a NumPy array (not a masked one)")
        if out.size != self.size or out.dtype != _np.dtype(self.dtype):
            raise InvalidArgument(f"{where}: out holds {out.size} {out.dtype}; give {self.size} {self.dtype}")
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise InvalidArgument(f"{where}: out is not writable C-contiguous memory; give such an array (e.g. "
                                  "numpy.empty)")
        flat = _np.asarray(out).reshape(-1)  # a base-class view: np.matrix keeps two dimensions
        start = flat.__array_interface__["data"][0]
        for i, s in enumerate(self.shards):
            if s.device == "cpu" and s.nbytes and start < s.data_ptr + s.nbytes and s.data_ptr < start + flat.nbytes:
                raise InvalidArgument(f"{where}: out overlaps shard {self.first + i}'s own memory; give separate "
                                      "memory")
        return flat

    def apply(self, work, out=None):
        """work applied per shard, every shard at once: see resident.dist.apply."""
        return apply(work, self, out)

    def copy_to(self, devices):
        """A new sharded array of the same layout with shard i on devices[i]: peer copies between GPUs
        (asynchronous, never through the host), explicit transfers between a GPU and the CPU."""
        devices = _device_names(devices)
        if len(devices) != len(self.shards):
            raise InvalidArgument(f"resident.dist.copy_to: {len(devices)} devices for {len(self.shards)} shards")
        made = [_core.empty(c, self.dtype, d) for (_, c), d in zip(self.extents, devices)]
        for s, m in zip(self.shards, made):
            _core._copy_array(s, m)
        return ShardedArray(made, self.size, self.first, self.shard_count, self.comm)

    def __len__(self):
        return self.size

    def __array__(self, dtype=None, copy=None):
        raise InvalidType("resident.dist.ShardedArray: NumPy reads one host array; x.to_host() gathers the "
                          "shards into one (a counted download per shard)")

    def item(self):
        raise InvalidType("resident.dist.ShardedArray has no item(): x.to_host() gathers its values")

    def __reduce_ex__(self, protocol=None):
        raise InvalidType("a resident.dist.ShardedArray is not pickled or copied: its shards stay on their "
                          "devices; pickle x.to_host() (a NumPy array) and resident.dist.shard it there")

    def __repr__(self):
        return (f"resident.dist.ShardedArray(size={self.size}, dtype={self.dtype}, "
                f"shards={list(zip(self.devices, self.extents))})")


_protocols.refuse_elements(ShardedArray)

_MOST_SHARDS = 4096  # beyond any machine's devices: an iterable that never ends is refused, not read forever


def _bounded(items, what):
    """The items of an iterable as a list, at most _MOST_SHARDS of them (else InvalidArgument)."""
    try:
        got = list(itertools.islice(items, _MOST_SHARDS + 1))
    except Exception as e:  # noqa: BLE001 (what the iterable's own code raised)
        raise InvalidType(f"{what}: reading the items raised {type(e).__name__}: {str(e)[:120]}") from None
    if len(got) > _MOST_SHARDS:
        raise InvalidArgument(f"{what}: more than {_MOST_SHARDS} given (an iterable that never ends?); give a list "
                              "with one entry per shard")
    return got


def _name(d):
    """A device's name: a string, or what an object says it is (a torch.device)."""
    try:
        return d if isinstance(d, str) else str(d)
    except Exception as e:  # noqa: BLE001 (what the object's own __str__ raised)
        raise InvalidType(f"resident.dist: a device's name raised {type(e).__name__}: {str(e)[:120]}; give names "
                          "such as 'cuda:0'") from None


def _device_names(devices):
    # A count is an integer that is not a bool and not iterable (a NumPy array of names has __index__ too;
    # a 0-d array, iterable by its type but not in fact, is a count).
    zero_d = isinstance(devices, _np.ndarray) and devices.ndim == 0
    is_count = hasattr(devices, "__index__") and (zero_d or not hasattr(devices, "__iter__"))
    if isinstance(devices, (str, bytes, bool, _np.bool_)) or not (is_count or hasattr(devices, "__iter__")):
        raise InvalidType(f"resident.dist: devices={_shown(devices)}; give a list of devices (e.g. [\"cuda:0\", "
                          f"\"cuda:1\"] or [\"cpu\", \"cpu\"]), a count or a Communicator")
    if is_count:
        devices = _index(devices, "resident.dist: devices")
        if devices < 1:
            raise InvalidArgument("resident.dist: give at least one device")
        n = _core.cuda_device_count()
        if n >= devices:
            return [f"cuda:{i}" for i in range(devices)]
        # Without that many GPUs, CPU shards: one per core at most.
        cores = os.cpu_count() or 1
        if devices > cores:
            raise InvalidArgument(f"resident.dist: {devices} devices, but this machine has {n} GPUs and {cores} "
                                  f"CPU cores; give at most {_max(n, cores)}")
        return ["cpu"] * devices
    names = [_name(d) for d in _bounded(devices, "resident.dist: devices")]
    if not names:
        raise InvalidArgument("resident.dist: give at least one device")
    return names


def shard(x, devices, dtype="float32"):
    """A sharded array over `devices` (a list of names such as "cuda:0", "cpu" (repeatable), a count (GPUs
    when there are that many, else CPU shards, at most one per core), or a Communicator: this process's
    shards of the whole). x: a host array (uploaded, one copy per shard; a sharded array is 1-D, so one of
    several dimensions is taken in C order, as x.reshape(-1)) or a size (uninitialized shards of dtype). @raises InvalidType for devices of another kind (a single name among them)."""
    comm = devices if isinstance(devices, Communicator) else None
    names = comm.devices if comm else _device_names(devices)
    count = comm.size if comm else len(names)
    first = comm.rank if comm else 0
    if isinstance(x, (int, _np.integer)) and not isinstance(x, (bool, _np.bool_, _np.timedelta64)):  # a size
        x = int(x)
        if x < 0:
            raise InvalidArgument(f"resident.dist.shard: size {x} is negative")
        n = x
        try:
            dtype = _np.dtype(dtype).name  # a NumPy dtype or a name
        except Exception:  # noqa: BLE001 (NumPy's TypeError or ValueError, or the object's own code)
            raise InvalidType(f"resident.dist.shard: dtype={_shown(dtype)}; give a NumPy dtype or its name, such as "
                              "'float32'") from None
        made = [_core.empty(_extent(n, count, first + i)[1], dtype, d) for i, d in enumerate(names)]
        return ShardedArray(made, n, first, count, comm)
    from .streaming import _host
    h = _host(x, "x", who="resident.dist.shard")
    n = h.size
    made = []
    for i, d in enumerate(names):
        o, c = _extent(n, count, first + i)
        made.append(_core.to_device(h[o:o + c], d))
    return ShardedArray(made, n, first, count, comm)


def from_shards(arrays, comm=None):
    """Arrays of any library (DLPack or the CUDA Array Interface), each on its own device, taken in place
    as the shards of one sharded array, in order (no copy). Their sizes must be those shard() gives."""
    if isinstance(arrays, (str, bytes)) or not hasattr(arrays, "__iter__"):
        raise InvalidType(f"resident.dist.from_shards takes a list of arrays, not {type(arrays).__name__}")
    if comm is not None and not isinstance(comm, Communicator):
        raise InvalidType(f"resident.dist.from_shards: comm is a {type(comm).__name__}; give a "
                          "resident.dist.Communicator or leave it out")
    made = [_core._taken(a, "resident.dist.from_shards")
            for a in _bounded(arrays, "resident.dist.from_shards: arrays")]
    if not made:
        raise InvalidArgument("resident.dist.from_shards: give at least one array")
    count = comm.size if comm else len(made)
    first = comm.rank if comm else 0
    local = [m.size for m in made]
    n = _sum(local) if not comm or comm.size == len(made) else None
    if n is None:
        raise InvalidArgument("resident.dist.from_shards over processes: use shard(size, comm) and fill the shards")
    for i, m in enumerate(made):
        if len(m.shape) != 1:
            raise InvalidArgument(f"resident.dist.from_shards: array {i} has shape {tuple(m.shape)}; shards are "
                                  "one-dimensional (pass a.reshape(-1) for a contiguous array)")
        if m.size != _extent(n, count, first + i)[1]:
            raise ShapeMismatch(f"resident.dist.from_shards: array {i} holds {m.size} elements; shard {i} of {n} "
                                f"elements over {count} holds {_extent(n, count, first + i)[1]}")
        if m.dtype != made[0].dtype:
            raise InvalidArgument("resident.dist.from_shards: the arrays differ in element type")
    return ShardedArray(made, n, first, count, comm, what="resident.dist.from_shards")


def _check(x, what):
    if not isinstance(x, ShardedArray):
        raise InvalidArgument(f"resident.dist.{what} takes a ShardedArray (resident.dist.shard), not {type(x).__name__}")


def apply(work, x, out=None):
    """work (a resident.op program, a resident.stage chain, a plain function of values (a stage), or any
    callable taking an array and out=) on every shard: in place, or into the shards of `out` (a sharded array of the same layout). Asynchronous on
    each shard's stream for GPUs, so every shard runs at once. Returns out (or x)."""
    _check(x, "apply")
    if not callable(work) or isinstance(work, type):
        raise InvalidType(f"resident.dist.apply: work is a {type(work).__name__ if not isinstance(work, type) else 'class'}; give a resident.op program, a "
                          "resident.stage chain or a callable taking an array and out=")
    from . import jit
    if isinstance(work, _np.ufunc):
        raise InvalidType(f"resident.dist.apply: work is NumPy's {work.__name__}, which makes NumPy arrays rather "
                          f"than writing the shards; use a resident.op program (rs.op.{work.__name__}() where it "
                          f"exists) or a stage (lambda v: math.{work.__name__}(v))")
    if isinstance(work, jit.Chain):
        if work._reduces():
            raise InvalidArgument("resident.dist.apply: the chain ends in a reduction, whose value apply would drop; "
                                  "use resident.dist.sum, min or max (they take the chain's maps as work)")
        if work._generates():
            raise InvalidArgument("resident.dist.apply: a generator chain would start every shard at the stream's "
                                  "value 0 (shards with equal values); fill each shard with resident.random.fill_* "
                                  "at the offset of its first element (x.extents) instead")
    elif not isinstance(work, (_core.program, _core.op)) and jit._is_plain_function(work) and \
            "out" not in inspect.signature(work).parameters:
        work = jit.stage(work)  # a function of values (no out=) is a stage, as in resident.stream
    if out is not None:
        _check(out, "apply")
        if out.extents != x.extents or out.devices != x.devices:
            raise ShapeMismatch("resident.dist.apply: out's shards are not laid out as x's")
    _writable(x if out is None else out)
    if out is not None:
        for i, o in enumerate(out.shards):  # shard i's output must not be what another shard reads
            for j, s in enumerate(x.shards):
                if i != j and _overlap(o, s):
                    raise InvalidArgument(f"resident.dist.apply: out's shard {i} is memory of x's shard {j}, "
                                          "which another shard's work would read after it was written; give out "
                                          "memory of its own (or x itself, in place)")
                if i == j and _overlap(o, s) and (o.data_ptr, o.nbytes) != (s.data_ptr, s.nbytes):
                    # Each shard's own call would refuse it, after the shards before it were written.
                    raise InvalidArgument(f"resident.dist.apply: out's shard {i} overlaps x's shard {i} without "
                                          "being the same memory; give out memory of its own, or x itself (in place)")
        for s, o in zip(x.shards, out.shards):
            work(s, out=o)
        return out
    for s in x.shards:
        made = work(s)
        if made is not None and made is not s and not isinstance(work, (_core.program, _core.op, jit.Chain)) \
                and not _same_memory(made, s):
            # A callable that returned a new array left the shard as it was: its result would be dropped.
            raise InvalidArgument(f"resident.dist.apply: work returned a {type(made).__name__} rather than writing "
                                  "the shard in place; give work that writes its array (or takes out=), e.g. a "
                                  "resident.op program or a stage")
    return x


def _called_on_shards(work, inputs, out, stream):
    """work(*inputs, out=out) where an argument is a sharded array: resident.dist.apply's work, per shard;
    None where none is."""
    if not any(isinstance(a, ShardedArray) for a in (*inputs, out)):
        return None
    if len(inputs) != 1 or not isinstance(inputs[0], ShardedArray) or \
            (out is not None and not isinstance(out, ShardedArray)):
        raise InvalidArgument("resident: work on a sharded array takes that one array (and out=, a sharded array "
                              "of the same layout); shard the other arrays alike and combine them per shard")
    if stream is not None:
        raise InvalidArgument("resident: work on a sharded array runs on each shard's device stream; stream= is "
                              "for an array on one device")
    return apply(work, inputs[0], out)


def _writable(x):
    """Refuses a sharded array with a read-only shard before any shard is written."""
    for i, s in enumerate(x.shards):
        if s._readonly:
            raise InvalidArgument(f"resident.dist: shard {i} is read-only (its producer marked it so), so nothing "
                                  "was written; give shards that may be written")


def _overlap(a, b):
    """Whether two arrays share memory on one device."""
    return a.device == b.device and a.nbytes and b.nbytes and a.data_ptr < b.data_ptr + b.nbytes and \
        b.data_ptr < a.data_ptr + a.nbytes


def _same_memory(a, shard):
    """Whether a (another library's view, e.g. a tensor's in-place method's result) is the shard's memory."""
    try:
        v = a if isinstance(a, _core.Array) else _core.from_dlpack(a)
    except Error:
        return False
    return (v.data_ptr, v.nbytes, v.device) == (shard.data_ptr, shard.nbytes, shard.device)


_POOL = None


def _each(f, items):
    """f over items at once: one thread per item (the calls release the GIL while their device works)."""
    global _POOL
    if len(items) == 1:
        return [f(items[0])]
    if _POOL is None or _POOL._max_workers < len(items):
        _POOL = concurrent.futures.ThreadPoolExecutor(max_workers=_max(len(items), 8), thread_name_prefix="resident-dist")
    # The workers' calls are the caller's line's (a profile's rows), not the pool's frames.
    site = _core._call_site()
    done = [_POOL.submit(_core._at_site, site, f, item) for item in items]
    # Every shard finished before one's error is raised: none still runs (or reports a stage's raise
    # into the caller's next call) after it.
    concurrent.futures.wait(done)
    return [d.result() for d in done]


def _combine(values, op):
    if op == "sum":
        return _sum(values)
    if any(isinstance(v, float) and math.isnan(v) for v in values):
        return math.nan
    return (_min if op == "min" else _max)(values)


def _identity(dtype, op):
    """The value that changes no min (max): this process's part when all its shards are empty."""
    d = _np.dtype(dtype)
    if d.kind == "f":
        return math.inf if op == "min" else -math.inf
    info = _np.iinfo(d)
    return int(info.max if op == "min" else info.min)


def _wrap64(v, signed):
    """v modulo 2^64, as a 64-bit sum of integers wraps (signed: into [-2^63, 2^63))."""
    v %= 1 << 64
    return v - (1 << 64) if signed and v >= 1 << 63 else v


def _reduce(x, op, work):
    _check(x, op)
    from . import jit
    chain = None
    if work is None:
        part = getattr(_core, op)
    elif isinstance(work, (_core.program, _core.op)):
        p = work if isinstance(work, _core.program) else _core.program([work])
        # The sum in one pass of the program's own kernel; min and max through the program as one stage.
        from . import _program
        # Float32 shards' sums join unrounded: the whole is rounded once, as one array's sum would be.
        part = ((lambda s: _program.total(p, s, unrounded=True)) if op == "sum"
                else _program.chain_of(p, str(x.dtype)) | getattr(jit, op)())
    else:
        chain = jit.stage(work) if not isinstance(work, jit.Chain) else work
        if chain._generates():
            raise InvalidArgument(f"resident.dist.{op}: a generator chain would start every shard at the stream's "
                                  "value 0 (shards with equal values); fill each shard with resident.random.fill_* at "
                                  "the offset of its first element (x.extents), then reduce the maps")
        if chain._reduces():
            raise InvalidArgument(f"resident.dist.{op}: the work ends in a reduction already; give its maps (the "
                                  f"{op} is resident.dist.{op}'s own)")
        chain = chain | getattr(jit, op)()
        part = chain._unrounded if op == "sum" else chain
    shards = x.shards
    if op != "sum":
        # An empty shard has no least or greatest element: the others decide. With every element empty,
        # part raises as resident.min of an empty array does (in every process: x.size is the whole's).
        shards = [s for s in shards if s.size > 0] or (x.shards[:1] if x.size == 0 else [])
    made = _np.dtype(_values_dtype(x, chain, work))  # what work makes of x's values (x's own without work)
    if not shards:
        value = _identity(made, op)
    elif work is None:  # every shard's reduction launched at once, then read (devices side by side)
        value = _combine(_core._reduce_each(list(shards), op), op)
    else:
        value = _combine(_each(part, shards), op)
    if op == "sum" and isinstance(value, int) and not isinstance(value, bool):
        # Integer sums add in 64 bits and wrap, as resident.sum (and a chain's sum) of the whole would,
        # signed or not as the values summed are.
        value = _wrap64(value, made.kind != "u")
    if x.comm is not None and x.comm.size > len(x.shards):
        # The processes' parts in the type the value has (a sum of floats in double, of integers in 64 bits).
        if isinstance(value, float):
            wide = "float64"
        elif op == "sum" or made.kind not in "iu":
            wide = "uint64" if made.kind == "u" else "int64"
        else:
            wide = made
        buf = _core.to_device(_np.array([value], dtype=wide), x.comm.devices[0])
        x.comm.all_reduce([buf], op)
        value = buf.to_host()[0].item()
        if op == "sum" and wide in ("int64", "uint64"):
            value = _wrap64(value, wide == "int64")
    if op == "sum" and made == _np.float32:
        with _np.errstate(over="ignore"):  # past float32's range it is inf, as a chain's sum is; no warning
            value = float(_np.float32(value))  # the whole rounded once, as a chain's float32 sum is
    return value


def _values_dtype(x, chain, work):
    """The dtype of the values work makes from x's (a program keeps x's)."""
    if chain is None:
        return str(x.dtype)
    # A process holding no shard types the values as the others do (the type is the target's alike): the
    # processes' parts then meet in one type.
    target = tuple(_core._jit_target(x.shards[0])) if x.shards else ("cpu", 0, 0)
    return chain.build([str(x.dtype)], target)[1] or str(x.dtype)


def sum(x, work=None):  # noqa: A001
    """The sum of x's elements (of work(x) when work is given: a program, a stage chain), shard partials
    computed at once and combined on the host (and over every process of x's communicator)."""
    return _reduce(x, "sum", work)


def min(x, work=None):  # noqa: A001
    """The least element (NaN propagates); see sum."""
    return _reduce(x, "min", work)


def max(x, work=None):  # noqa: A001
    """The greatest element (NaN propagates); see sum."""
    return _reduce(x, "max", work)


def copy(src, dst):
    """dst = src for two resident arrays of one size and type on any devices: a peer copy between two
    GPUs (asynchronous, NVLink or PCIe, never through the host, counted as peer bytes), an explicit
    transfer between a GPU and the CPU. Another library's arrays are taken in place (from_dlpack).
    @raises InvalidType for anything that is not an array; InvalidArgument for a read-only dst."""
    _core._copy_array(src, dst)


from . import random as _random  # noqa: E402
from . import _dist_random as random  # noqa: E402 (resident.dist.random: fills of sharded arrays)

_random._SHARDED = (ShardedArray,)  # resident.random.fill_* of a sharded array fills it as one

# A missing argument or an unknown keyword: InvalidType, as the core's functions raise.
_typed.functions_typed(globals(), ["shard", "from_shards", "apply", "sum", "min", "max", "copy", "extent_of"],
                       "resident.dist.")
_typed.methods_typed(Communicator, "resident.dist.Communicator")
_typed.methods_typed(ShardedArray, "resident.dist.ShardedArray")
