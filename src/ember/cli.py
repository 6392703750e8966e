"""The ``ember`` command. Subcommands:

* ``ember train``: train a built-in model on a built-in dataset (see ember/train.py).
"""

from __future__ import annotations

import argparse
import sys

from .errors import EmberError


def _train_parser(sub) -> None:
    p = sub.add_parser(
        "train",
        help="train a built-in model on a built-in dataset",
        description="Train a built-in model, print the test accuracy after every epoch, and "
        "save a checkpoint after every epoch. A run resumed with --resume from one of "
        "its checkpoints ends bit-identical to an uninterrupted run.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
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
    p.add_argument("--no-progress", action="store_true", help="no progress bar or epoch lines")


def _run_train(args) -> int:
    from .train import TrainConfig, run

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
    )
    result = run(config)
    print(f"test accuracy: {result.test_accuracy:.2%}")
    print(f"checkpoint: {result.checkpoint}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="ember", description="ember: graph-first deep learning")
    sub = parser.add_subparsers(dest="command", required=True)
    _train_parser(sub)
    args = parser.parse_args(argv)
    try:
        if args.command == "train":
            return _run_train(args)
    except (EmberError, ValueError, FloatingPointError) as exc:
        print(f"ember {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return 1


if __name__ == "__main__":
    sys.exit(main())
