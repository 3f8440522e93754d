"""Random fills of sharded arrays (resident.dist.random, the C++ dist::random): each shard filled at its
place in the whole, so a sharded fill equals the one-array fill of the same seed and offset bit for bit;
resident.random.fill_* given a sharded array fills it the same way."""
import numpy as np
import pytest

import resident as rs

_FILLS = [  # name, dtype, arguments after the seed (offset given apart)
    ("fill_uniform", "float32", dict(low=0.5, high=2.0)),
    ("fill_uniform", "float64", {}),
    ("fill_normal", "float64", dict(mean=1.0, sd=3.0)),
    ("fill_normal", "float32", {}),
    ("fill_bits", "uint32", {}),
    ("fill_integers", "int32", dict(low=-5, high=17)),
    ("fill_integers", "uint32", dict(low=3, high=1 << 31)),
]


def _one_array(name, dtype, n, seed, offset, kw):
    y = rs.empty(n, dtype, device="cpu")
    getattr(rs.random, name)(y, seed, offset=offset, **kw)
    return y.to_host()


@pytest.mark.parametrize("name,dtype,kw", _FILLS)
@pytest.mark.parametrize("n", [0, 1, 7, 1001])
@pytest.mark.parametrize("offset", [0, 3, (1 << 64) - 2])  # the last wraps past the stream's end
def test_a_sharded_fill_equals_the_one_array_fill_bit_for_bit(name, dtype, kw, n, offset):
    ref = _one_array(name, dtype, n, 42, offset, kw)
    x = rs.dist.shard(n, ["cpu", "cpu"], dtype=dtype)
    getattr(rs.dist.random, name)(x, 42, offset=offset, **kw)
    assert x.to_host().tobytes() == ref.tobytes()
    z = rs.dist.shard(n, ["cpu", "cpu", "cpu"], dtype=dtype)
    getattr(rs.random, name)(z, 42, offset=offset, **kw)  # delegated to resident.dist.random
    assert z.to_host().tobytes() == ref.tobytes()


def test_the_sharded_values_are_the_streams_values():
    x = rs.dist.shard(10_000, ["cpu", "cpu"], dtype="float64")
    rs.dist.random.fill_uniform(x, 7, low=-1.0, high=3.0)
    v = x.to_host()
    assert v.min() >= -1.0 and v.max() < 3.0 and abs(v.mean() - 1.0) < 0.05
    assert len(np.unique(v)) == v.size  # shards do not repeat one another's values
    # Shard 1 starts where shard 0 ends: its values are the stream's from that place.
    o, c = x.extents[1]
    part = rs.empty(c, "float64", device="cpu")
    rs.random.fill_uniform(part, 7, offset=o, low=-1.0, high=3.0)
    np.testing.assert_array_equal(part.to_host(), v[o:o + c])


def test_a_process_holding_no_shard_checks_the_parameters_too():
    # Another process would refuse them: this one went on alone (its later collectives then differ).
    c = rs.dist.Communicator(["cpu", "cpu"])
    x = rs.dist.ShardedArray([], 10, 0, 2, c)
    for fill, kw in ((rs.dist.random.fill_uniform, dict(low=1.0, high=0.0)), (rs.dist.random.fill_uniform,
                     dict(low=float("nan"))), (rs.dist.random.fill_normal, dict(sd=-1.0))):
        with pytest.raises(rs.InvalidArgument):
            fill(x, 7, **kw)
    rs.dist.random.fill_uniform(x, 7)  # good parameters: nothing to fill, no error


def test_sharded_fills_refuse_before_any_shard_is_written():
    x = rs.dist.shard(np.full(10, 5.0), ["cpu", "cpu"])
    with pytest.raises(rs.InvalidArgument, match="stream"):
        rs.dist.random.fill_uniform(x, 1, stream=1)
    with pytest.raises(rs.InvalidArgument, match="out of range"):
        rs.random.fill_uniform(x, 1, offset=-1)
    with pytest.raises(rs.InvalidArgument, match="out of range"):
        rs.dist.random.fill_normal(x, 1, offset=1 << 64)
    with pytest.raises(rs.InvalidType):
        rs.dist.random.fill_uniform(x, 1, offset=1.5)
    with pytest.raises(rs.InvalidArgument):
        rs.dist.random.fill_uniform(x, 1, low=2.0, high=1.0)
    with pytest.raises(rs.InvalidArgument):
        rs.dist.random.fill_bits(x, 1)  # float32 shards take no raw words
    with pytest.raises(rs.InvalidType):
        rs.dist.random.fill_uniform(x)  # no seed
    with pytest.raises(rs.InvalidArgument, match="ShardedArray"):
        rs.dist.random.fill_uniform(rs.empty(4, device="cpu"), 1)
    np.testing.assert_array_equal(x.to_host(), np.full(10, 5.0, np.float32))
    ro = np.full(5, 5.0, np.float32)
    ro.flags.writeable = False
    y = rs.dist.from_shards([np.zeros(5, np.float32), ro])
    with pytest.raises(rs.InvalidArgument, match="read-only"):
        rs.random.fill_uniform(y, 1)
    assert (y.shards[0].to_host() == 0).all()
