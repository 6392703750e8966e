"""kernels/cstep.py's `data_address`: every path gives ``ndarray.ctypes.data``."""

import numpy as np

from ember.kernels import cstep


class _Sub(np.ndarray):
    pass


def _arrays():
    a = np.arange(24.0).reshape(4, 6)
    frozen = a.copy()
    frozen.flags.writeable = False
    yield from (a, a[1:], a[:, 1:], a[::2, ::3], a.T, np.asfortranarray(a), frozen)
    yield from (np.empty(0, np.float32), np.zeros((), np.int8), np.broadcast_to(a[0], (5, 6)))
    yield a.view(_Sub)[1:]  # (a subclass: the buffer export or ctypes path)


def test_the_field_is_read_on_this_numpy():
    # the data field is where NumPy's header puts it: the fast path is taken (a NumPy that
    # moved it would fall back, correctly but slower, and fail here so it is noticed)
    assert cstep._FIELD_READ


def test_every_path_gives_the_first_elements_address():
    for a in _arrays():
        want = a.ctypes.data
        assert cstep.data_address(a) == want
        assert cstep._exported_address(a) == want
        assert cstep._field_address(a) == want
