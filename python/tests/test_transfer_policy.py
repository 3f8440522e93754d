"""rs.transfer_policy as a context manager: one policy object entered on two threads keeps each thread's
blocks apart, a block entered on one thread closes on another, entering again stacks, and an exit with
no enter is refused; copies and pickles of a policy are policies; what is no single policy name is
refused."""
import threading

import numpy as np
import pytest

import resident as rs
from _support import DEVICES


def test_one_transfer_policy_entered_on_two_threads_keeps_each_threads_blocks_apart():
    forbid = rs.transfer_policy("forbid")
    entered, main_left, seen = threading.Event(), threading.Event(), []

    def worker():
        with forbid:
            entered.set()
            main_left.wait(30)
            seen.append(rs.transfer_policy.current())
            try:
                rs.to_device(np.ones(2, np.float32), device="cpu")
                seen.append("allowed")
            except rs.TransferForbidden:
                seen.append("forbidden")
        seen.append(rs.transfer_policy.current())

    with forbid:
        t = threading.Thread(target=worker)
        t.start()
        assert entered.wait(30)
    after_main = rs.transfer_policy.current()
    main_left.set()
    t.join(30)
    assert after_main == "allow"
    assert seen == ["forbid", "forbidden", "allow"]
    with pytest.raises(rs.InvalidArgument, match="without __enter__"):
        forbid.__exit__(None, None, None)


def test_an_exit_on_a_third_thread_closes_no_other_threads_block():
    forbid = rs.transfer_policy("forbid")
    inside, leave, seen = threading.Barrier(3), threading.Event(), {}

    def worker(name):
        with forbid:
            inside.wait(30)
            leave.wait(30)
            seen[name] = rs.transfer_policy.current()

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    inside.wait(30)
    with pytest.raises(rs.InvalidArgument, match="did not enter it"):
        forbid.__exit__(None, None, None)
    leave.set()
    for t in threads:
        t.join(30)
    assert seen == {"a": "forbid", "b": "forbid"}
    assert rs.transfer_policy.current() == "allow"


def test_a_transfer_policy_entered_on_one_thread_closes_on_another():
    import contextlib
    import copy
    import pickle
    stack = contextlib.ExitStack()
    stack.enter_context(rs.transfer_policy("forbid"))
    assert rs.transfer_policy.current() == "forbid"
    errors = []

    def close():
        try:
            stack.close()
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
    t = threading.Thread(target=close)
    t.start()
    t.join(30)
    assert not errors and rs.transfer_policy.current() == "allow"
    log = rs.transfer_policy("log")
    for made in (pickle.loads(pickle.dumps(log)), copy.copy(log), copy.deepcopy(log)):
        with made:
            assert rs.transfer_policy.current() == "log"
    assert rs.transfer_policy.current() == "allow"


def test_a_transfer_policy_entered_again_stacks_and_an_exit_alone_is_refused():
    p = rs.transfer_policy("forbid")
    with p:
        with p:
            assert rs.transfer_policy.current() == "forbid"
        assert rs.transfer_policy.current() == "forbid"
    assert rs.transfer_policy.current() == "allow"
    with pytest.raises(rs.InvalidArgument):
        rs.transfer_policy("log").__exit__(None, None, None)


@pytest.mark.parametrize("args", [(), ("allow", "log"), (["allow"],), (None,)])
def test_transfer_policy_of_no_single_name_is_invalid_type(args):
    with pytest.raises(rs.InvalidType, match="does not fit"):
        rs.transfer_policy(*args)
    with pytest.raises(rs.InvalidArgument, match="unknown transfer policy"):
        rs.transfer_policy("sometimes")


def test_a_policy_object_entered_twice_closes_its_inner_entry_first():
    forbid = rs.transfer_policy("forbid")
    with forbid:
        with rs.transfer_policy("allow"):
            with forbid:
                assert rs.transfer_policy.current() == "forbid"
            assert rs.transfer_policy.current() == "allow"
        assert rs.transfer_policy.current() == "forbid"


@pytest.mark.parametrize("device", DEVICES)
def test_a_download_into_out_is_a_counted_transfer_refused_under_forbid(device):
    x = rs.to_device(np.arange(8, dtype=np.float32), device=device)
    out = np.zeros(8, np.float32)
    before = rs.ledger().get(device, {}).get("d2h_bytes", 0)
    x.to_host(out=out)
    assert rs.ledger()[device]["d2h_bytes"] - before == 32, "a download, as x.to_host() and C++ count it"
    out[:] = 0
    with rs.transfer_policy("forbid"):
        for call in (lambda: x.to_host(), lambda: x.to_host(out=out)):
            with pytest.raises(rs.TransferForbidden):
                call()
    assert not out.any(), "nothing written under forbid"
