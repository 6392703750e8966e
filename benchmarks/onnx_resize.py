"""ONNX Resize imported by ember against onnxruntime: nearest (a whole factor, asymmetric/floor:
the gather's replicating loop, kernels/cgather.py; half-pixel) and linear, one thread each,
interleaved, best of ``--rounds`` of process CPU time per call. Ratios are ember's time over
onnxruntime's; the outputs are checked against onnxruntime's first.

    EMBER_NUM_THREADS=1 python benchmarks/onnx_resize.py [--rounds 9]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from zoo import cpu_header  # noqa: E402

import ember  # noqa: E402

CASES = [  # (input shape, scales, mode, coordinate transformation)
    ((1, 64, 32, 32), (1, 1, 2, 2), "nearest", "asymmetric"),
    ((8, 64, 32, 32), (1, 1, 2, 2), "nearest", "asymmetric"),
    ((1, 32, 16, 16), (1, 1, 4, 4), "nearest", "asymmetric"),
    ((1, 64, 32, 32), (1, 1, 2, 2), "nearest", "half_pixel"),
    ((1, 64, 32, 32), (1, 1, 2, 2), "linear", "half_pixel"),
]


def _model(shape, scales, mode, how) -> bytes:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    init = helper.make_tensor("scales", TensorProto.FLOAT, [4], [float(s) for s in scales])
    nearest = "round_prefer_floor" if how == "half_pixel" else "floor"
    node = helper.make_node(
        "Resize", ["x", "", "scales"], ["y"], mode=mode,
        coordinate_transformation_mode=how, nearest_mode=nearest,
    )  # fmt: skip
    graph = helper.make_graph([node], "resize", [x], [y], initializer=[init])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def main() -> None:
    import onnxruntime as ort

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    for line in cpu_header():
        print(line)
    ember.set_num_threads(1)
    for shape, scales, mode, how in CASES:
        data = _model(shape, scales, mode, how)
        a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        f, t = ember.onnx.load(data), ember.tensor(a)
        want = session.run(None, {"x": a})[0]
        got = f(t)
        got = (got[0] if isinstance(got, tuple) else got).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        sides = {"ember": lambda: f(t), "ort": lambda: session.run(None, {"x": a})}
        best = dict.fromkeys(sides, float("inf"))
        for _ in range(args.rounds):
            for key, run in sides.items():
                start = time.process_time()
                for _ in range(args.calls):
                    run()
                best[key] = min(best[key], (time.process_time() - start) / args.calls)
        cells = "  ".join(f"{k} {v * 1e6:8.1f} us" for k, v in best.items())
        print(f"{mode:8s} {how:11s} {shape} x{scales[2:]}: {cells}  ember/ORT "
              f"{best['ember'] / best['ort']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
