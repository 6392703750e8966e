"""Central finite differences, the independent reference the gradient tests compare with."""

import numpy as np

import ember


def fd(fn, *args, wrt=0, eps=1e-6) -> np.ndarray:
    """Central differences of the scalar ``fn(*tensors)`` with respect to argument ``wrt``
    (``args`` are NumPy arrays, float64 for accuracy)."""
    x = args[wrt]
    g = np.zeros_like(x)
    for j in range(x.size):
        p, m = x.copy(), x.copy()
        p.flat[j] += eps
        m.flat[j] -= eps
        hi = [ember.tensor(p if i == wrt else a) for i, a in enumerate(args)]
        lo = [ember.tensor(m if i == wrt else a) for i, a in enumerate(args)]
        g.flat[j] = (float(fn(*hi)) - float(fn(*lo))) / (2 * eps)
    return g
