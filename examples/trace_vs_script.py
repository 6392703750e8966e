"""Trace vs script: capturing a function whose branch depends on a tensor's value.

``ember.trace`` runs the function once with symbolic tensors, so it cannot decide
``if (x * x).sum() > 4`` and says so (TraceError, at your line). ``ember.script`` rewrites the
``if`` into ``ember.cond``: the graph holds both branches and picks one per call.

Run: python examples/trace_vs_script.py
"""

import numpy as np

import ember


def soft_clip(x):
    """Rescale ``x`` to norm 2 when its norm is above 2, else square it."""
    if (x * x).sum() > 4.0:
        y = x * (2.0 / (x * x).sum().sqrt())
    else:
        y = x * x
    return y


def main() -> None:
    small = ember.tensor(np.array([0.5, -1.0, 0.25]))
    large = ember.tensor(np.array([3.0, -4.0, 12.0]))

    print("1. ember.trace(soft_clip, x):")
    try:
        ember.trace(soft_clip, small)
    except ember.TraceError as error:
        print(f"   TraceError: {error}\n")

    print("2. ember.trace(ember.script(soft_clip), x): one graph, both branches")
    scripted = ember.script(soft_clip)
    traced = ember.trace(scripted, small)
    for name, x in (("small", small), ("large", large)):
        got, want = traced(x).numpy(), soft_clip(x).numpy()  # the graph vs plain Python
        print(
            f"   {name}: graph {np.round(got, 4)}  python {np.round(want, 4)}  "
            f"match={np.allclose(got, want)}"
        )

    print("\n3. the graph (a cond node holding both branches):")
    print(traced.graph)

    print("\n4. the converted source (scripted.source):")
    print(scripted.source)


if __name__ == "__main__":
    main()
