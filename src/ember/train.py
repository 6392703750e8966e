"""The main job: train a built-in model on a built-in dataset, with checkpoints and exact resume.

`run(TrainConfig(...))` trains, evaluates after every epoch, writes a checkpoint after every
epoch (model, optimizer, scheduler, RNG and loader state, history), and returns a `TrainResult`.
Resuming from a checkpoint restores all of that state, so a run stopped after epoch k and resumed
ends bit-identical to an uninterrupted run with the same seed.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from . import models, nn, optim
from .autograd import no_grad
from .data import DataLoader, datasets
from .errors import CheckpointError
from .io import load, save
from .random import Generator, default_generator, manual_seed

DATASETS = ("digits", "fashion-mnist")

# defaults per dataset: epochs and learning rate that reach the accuracy targets quickly
_DEFAULTS = {
    "digits": {"epochs": 12, "lr": 0.05, "batch_size": 32},
    "fashion-mnist": {"epochs": 5, "lr": 0.05, "batch_size": 64},
}


@dataclass
class TrainConfig:
    model: str = "cnn"
    dataset: str = "digits"
    epochs: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    momentum: float = 0.9
    weight_decay: float = 5e-4
    seed: int = 0
    data_root: str | None = None
    checkpoint: str | None = None
    resume: str | None = None
    progress: bool = True
    prefetch: int = 2
    stop_after: int | None = None  # stop after this epoch (a planned interruption; --resume)

    def resolved(self) -> TrainConfig:
        """A copy with the per-dataset defaults filled in."""
        if self.dataset not in _DEFAULTS:
            raise ValueError(
                f"unknown dataset {self.dataset!r}; choose one of {', '.join(DATASETS)}"
            )
        if self.model not in models.MODEL_NAMES:
            raise ValueError(
                f"unknown model {self.model!r}; choose one of {', '.join(models.MODEL_NAMES)}"
            )
        defaults = _DEFAULTS[self.dataset]
        return dataclasses.replace(
            self,
            epochs=self.epochs if self.epochs is not None else defaults["epochs"],
            lr=self.lr if self.lr is not None else defaults["lr"],
            batch_size=self.batch_size or defaults["batch_size"],
            checkpoint=self.checkpoint or os.path.join("runs", f"{self.model}-{self.dataset}.ckpt"),
        )


@dataclass
class TrainResult:
    test_accuracy: float
    history: list[dict] = field(default_factory=list)
    checkpoint: str = ""
    model: nn.Module | None = None


# the settings a resumed run must share with the run that wrote the checkpoint (epochs too: it
# sets the length of the cosine schedule)
_RESUME_KEYS = (
    "model",
    "dataset",
    "epochs",
    "batch_size",
    "lr",
    "momentum",
    "weight_decay",
    "seed",
)


def load_datasets(name: str, root: str | None):
    if name == "digits":
        return datasets.digits(train=True), datasets.digits(train=False)
    kwargs = {} if root is None else {"root": root}
    return datasets.fashion_mnist(train=True, **kwargs), datasets.fashion_mnist(
        train=False, **kwargs
    )


def evaluate(model: nn.Module, loader) -> float:
    model.eval()
    correct = total = 0
    with no_grad():
        for images, labels in loader:
            predictions = model(images).argmax(1)
            correct += int((predictions == labels).sum().item())
            total += labels.shape[0]
    model.train()
    return correct / max(total, 1)


def run(config: TrainConfig) -> TrainResult:
    cfg = config.resolved()
    manual_seed(cfg.seed)
    train_set, test_set = load_datasets(cfg.dataset, cfg.data_root)
    image_shape = tuple(train_set[0][0].shape)
    model = models.build(cfg.model, image_shape, num_classes=10)
    optimizer = optim.SGD(
        model.parameters(),
        lr=cfg.lr,
        momentum=cfg.momentum,
        weight_decay=cfg.weight_decay,
        nesterov=True,
    )
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=cfg.epochs)
    shuffle = Generator(cfg.seed + 1)
    train_loader = DataLoader(
        train_set, batch_size=cfg.batch_size, shuffle=True, generator=shuffle, prefetch=cfg.prefetch
    )
    test_loader = DataLoader(test_set, batch_size=512)
    history: list[dict] = []
    start_epoch = 0
    if cfg.resume:
        state = _read_checkpoint(cfg.resume, cfg)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        shuffle.set_state(state["shuffle_rng"])
        default_generator.set_state(state["default_rng"])
        history = list(state["history"])
        start_epoch = int(state["epoch"])

    last_epoch = cfg.epochs if cfg.stop_after is None else min(cfg.epochs, cfg.stop_after)
    for epoch in range(start_epoch, last_epoch):
        stats = _train_epoch(model, optimizer, train_loader, epoch, cfg)
        scheduler.step()
        stats["test_accuracy"] = evaluate(model, test_loader)
        history.append(stats)
        if cfg.progress:
            print(
                f"epoch {epoch + 1}/{cfg.epochs}: loss {stats['loss']:.4f}, train accuracy "
                f"{stats['train_accuracy']:.2%}, test accuracy {stats['test_accuracy']:.2%}",
                file=sys.stderr,
            )
        save(
            {
                "format": "ember-train",
                "config": _config_record(cfg),
                "epoch": epoch + 1,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "shuffle_rng": shuffle.get_state(),
                "default_rng": default_generator.get_state(),
                "history": history,
            },
            _ensure_dir(cfg.checkpoint),
        )
    accuracy = history[-1]["test_accuracy"] if history else evaluate(model, test_loader)
    return TrainResult(accuracy, history, cfg.checkpoint, model)


def _train_epoch(model, optimizer, loader, epoch: int, cfg: TrainConfig) -> dict:
    bar = None
    if cfg.progress:
        from tqdm import tqdm

        bar = tqdm(
            total=len(loader),
            desc=f"epoch {epoch + 1}/{cfg.epochs}",
            unit="batch",
            leave=False,
            file=sys.stderr,
            dynamic_ncols=True,
        )
    model.train()
    loss_sum = 0.0
    correct = seen = 0
    start = time.perf_counter()
    for images, labels in loader:
        logits = model(images)
        loss = nn.functional.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        batch = labels.shape[0]
        loss_sum += loss.item() * batch
        correct += int((logits.detach().argmax(1) == labels).sum().item())
        seen += batch
        if bar is not None:
            elapsed = time.perf_counter() - start
            bar.set_postfix(
                loss=f"{loss_sum / seen:.4f}",
                acc=f"{correct / seen:.2%}",
                samples_per_s=f"{seen / max(elapsed, 1e-9):.0f}",
                refresh=False,
            )
            bar.update()
    if bar is not None:
        bar.close()
    loss = loss_sum / max(seen, 1)
    if not math.isfinite(loss):
        raise FloatingPointError(
            f"training diverged at epoch {epoch + 1} (loss {loss}); lower --lr"
        )
    return {
        "epoch": epoch + 1,
        "loss": loss,
        "train_accuracy": correct / max(seen, 1),
        "seconds": time.perf_counter() - start,
    }


def _config_record(cfg: TrainConfig) -> dict:
    return {key: getattr(cfg, key) for key in _RESUME_KEYS}


def _read_checkpoint(path: str, cfg: TrainConfig) -> dict:
    state = load(path)
    if not isinstance(state, dict) or state.get("format") != "ember-train":
        raise CheckpointError(f"{path} is not a checkpoint written by `ember train`")
    saved = state["config"]
    for key in _RESUME_KEYS:
        if saved.get(key) != getattr(cfg, key):
            raise CheckpointError(
                f"{path} was written with {key}={saved.get(key)!r} but this run has "
                f"{key}={getattr(cfg, key)!r}; resume with the same settings"
            )
    return state


def _ensure_dir(path: str) -> str:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    return path


def parameters_equal(a: nn.Module, b: nn.Module) -> bool:
    """True when two models hold bit-identical state (used to verify exact resumption)."""
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(np.array_equal(sa[k].numpy(), sb[k].numpy()) for k in sa)
