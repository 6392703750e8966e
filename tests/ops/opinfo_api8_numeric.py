"""OpInfos of torch.gradient (ops/differences.py) and torch.histogramdd (ops/counting.py):
spacing as a number, numbers or coordinate tensors, dims, edge orders 1 and 2; bins as an int,
ints or edge tensors, ranges, weights, densities; see opinfo.py."""

import numpy as np

from .opinfo import OpInfo, Sample, rng

R = rng(9090)
X2 = R.standard_normal((4, 5))
X3 = R.standard_normal((3, 4, 5))
C4 = np.array([0.0, 1.0, 3.0, 4.5])
C5 = np.array([-1.0, 0.0, 0.5, 2.0, 4.0])


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def _gradient_samples():
    return [
        S(X2, desc="every dim"),
        S(R.standard_normal(6), desc="1-d"),
        S(X3, kwargs={"dim": 1}, desc="one dim"),
        S(X3, kwargs={"dim": [0, -1]}, desc="dims"),
        S(X3, kwargs={"spacing": 2.0}, desc="scalar spacing"),
        S(X2, kwargs={"spacing": [2.0, 0.5]}, desc="spacing per dim"),
        S(X3, kwargs={"spacing": [3.0], "dim": [2]}, desc="spacing list and dim"),
        S(X2, kwargs={"edge_order": 2}, desc="edge order 2"),
        S(X2, kwargs={"edge_order": 2, "spacing": [0.5, 4.0]}, desc="edge order 2 spaced"),
        S(X2, kwargs={"spacing": (C4, C5)}, desc="coordinates"),
        S(X2, kwargs={"spacing": (C4, C5), "edge_order": 2}, desc="coordinates, order 2"),
        S(X3, kwargs={"spacing": (C5,), "dim": 2}, desc="coordinates one dim"),
        S(X2, desc="strided", strided=True),
        S(np.arange(12).reshape(3, 4), desc="integers"),
        S(X2[:2], kwargs={"edge_order": 2}, desc="too short for order 2"),
        S(X2, kwargs={"edge_order": 3}, desc="edge order 3 refused"),
        S(X2, kwargs={"spacing": [1.0, 2.0, 3.0]}, desc="spacing length refused"),
        S(X2, kwargs={"spacing": (C5, C4)}, desc="coordinates length refused"),
    ]


PTS = R.standard_normal((20, 2))
PTS3 = R.uniform(-1, 1, (4, 5, 3))


def _histogramdd_samples():
    return [
        S(PTS, 3, desc="int bins"),
        S(PTS, [4, 2], desc="bins per dim"),
        S(PTS3, [2, 3, 4], desc="3-d points, batched"),
        S(PTS, 3, kwargs={"range": [-1.0, 1.0, 0.0, 2.0]}, desc="range"),
        S(PTS, 3, kwargs={"weight": R.uniform(0, 1, 20)}, desc="weights", nondiff=("weight",)),
        S(PTS, [3, 5], kwargs={"density": True}, desc="density"),
        S(
            PTS,
            [np.array([-2.0, -0.5, 0.0, 3.0]), np.array([-1.0, 1.0])],
            desc="edge tensors",
        ),
        S(np.zeros((5, 2)), 2, desc="one value: range widened"),
        S(np.zeros((0, 2)), 2, desc="no points"),
        S(PTS, [2, 2, 2], desc="bins length refused"),
        S(PTS, 2, kwargs={"range": [0.0, 1.0]}, desc="range length refused"),
        S(PTS[:, 0].copy(), 2, desc="1-d input refused"),
        S(PTS.astype(np.int64), 2, desc="integers refused"),
    ]


OPS = [
    OpInfo(
        "gradient",
        _gradient_samples,
        spellings=("T",),
        dtypes=("int64", "float32", "float64", "float16", "bfloat16"),
    ),
    OpInfo("histogramdd", _histogramdd_samples, grad=False, dtypes=("float32", "float64")),
]
