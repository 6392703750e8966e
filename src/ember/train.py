"""The main job: train a built-in model on a built-in dataset, with checkpoints and exact resume.

`run(TrainConfig(...))` trains, evaluates after every epoch, writes a checkpoint after every
epoch (model, optimizer, scheduler, RNG and loader state, history), and returns a `TrainResult`.
Resuming from a checkpoint restores all of that state, so a run stopped after epoch k and resumed
ends bit-identical to an uninterrupted run with the same seed.

Everything is checked before the first batch: the settings (`TrainConfigError`: a batch size of
0, a --stop-after of 0, a negative learning rate ...), that the checkpoint can be written where
it is asked for, and, on resume, every field of the checkpoint against what this run expects
(`CheckpointError` naming the file, the field and the problem), so nothing fails after an epoch
of training, and a damaged checkpoint never resumes as something else.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from . import amp, dtypes, models, nn, optim
from ._files import create_temporary
from .autograd import no_grad
from .data import DataLoader, datasets
from .errors import CheckpointError, EmberError
from .io import load, save
from .random import Generator, default_generator, manual_seed
from .tensor import Tensor

DATASETS = ("digits", "fashion-mnist")
AMP_DTYPES = {"bf16": dtypes.bfloat16, "fp16": dtypes.float16}  # --amp: autocast's dtype

# defaults per dataset: epochs and learning rate that reach the accuracy targets quickly
_DEFAULTS = {
    "digits": {"epochs": 12, "lr": 0.05, "batch_size": 32},
    "fashion-mnist": {"epochs": 5, "lr": 0.05, "batch_size": 64},
}


class TrainConfigError(EmberError, ValueError):
    """A training setting that cannot work (names the setting and the value)."""


def _bad_setting(name: str, value, requirement: str) -> TrainConfigError:
    return TrainConfigError(f"{name} must be {requirement}, got {value!r}", op="train")


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _is_real(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(
        x, (bool, np.bool_)
    )


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
    amp: str | None = None  # "bf16" | "fp16": forward and loss under autocast (fp16: GradScaler)
    # data-parallel over ember.distributed's ranks (`ember train --nproc N` starts them): each
    # rank takes batch_size / ranks samples of each batch (DistributedSampler); rank 0 reports
    # and writes the checkpoint, which holds the bare model's state as a one-process run's does
    distributed: bool = False

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
        resolved = dataclasses.replace(
            self,
            epochs=self.epochs if self.epochs is not None else defaults["epochs"],
            lr=self.lr if self.lr is not None else defaults["lr"],
            batch_size=self.batch_size if self.batch_size is not None else defaults["batch_size"],
            checkpoint=self.checkpoint or os.path.join("runs", f"{self.model}-{self.dataset}.ckpt"),
        )
        resolved.check()
        return resolved

    def check(self) -> None:
        """Refuse settings that cannot work (`TrainConfigError`), before anything runs."""
        counts = [("epochs", self.epochs, 1), ("batch_size", self.batch_size, 1)]
        counts += [("seed", self.seed, 0), ("prefetch", self.prefetch, 0)]
        if self.stop_after is not None:
            counts.append(("stop_after", self.stop_after, 1))
        for name, value, least in counts:
            if not _is_int(value) or value < least:
                raise _bad_setting(name, value, f"a whole number of at least {least}")
        if self.seed >= 2**63:
            raise _bad_setting("seed", self.seed, "below 2**63")
        reals = [
            ("lr", self.lr, lambda x: x > 0, "a positive number"),
            ("momentum", self.momentum, lambda x: 0 <= x < 1, "in [0, 1)"),
            ("weight_decay", self.weight_decay, lambda x: x >= 0, "zero or more"),
        ]
        for name, value, ok, requirement in reals:
            if not (_is_real(value) and math.isfinite(value) and ok(value)):
                raise _bad_setting(name, value, requirement)
        if self.amp is not None and self.amp not in AMP_DTYPES:
            raise _bad_setting("amp", self.amp, f"one of {', '.join(AMP_DTYPES)}")


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
    "amp",  # (absent from checkpoints written before --amp: None)
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
    _check_checkpoint_path(cfg.checkpoint)
    world, lead = 1, True
    if cfg.distributed:
        from . import distributed as dist

        if not dist.is_initialized():
            dist.init_process_group()
        world, lead = dist.get_world_size(), dist.get_rank() == 0
        if cfg.batch_size % world:
            raise _bad_setting("batch_size", cfg.batch_size, f"a multiple of the {world} ranks")
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
    # fp16 gradients underflow without loss scaling; bfloat16 has float32's range
    scaler = amp.GradScaler("cpu", enabled=cfg.amp == "fp16")
    shuffle = Generator(cfg.seed + 1)
    net, sampler = model, None
    if cfg.distributed:
        from .nn.parallel import DistributedDataParallel
        from .utils.data import DistributedSampler

        net = DistributedDataParallel(model)
        sampler = DistributedSampler(train_set, seed=cfg.seed + 1)
        train_loader = DataLoader(
            train_set, batch_size=cfg.batch_size // world, sampler=sampler, prefetch=cfg.prefetch
        )
    else:
        train_loader = DataLoader(
            train_set,
            batch_size=cfg.batch_size,
            shuffle=True,
            generator=shuffle,
            prefetch=cfg.prefetch,
        )
    test_loader = DataLoader(test_set, batch_size=512)
    history: list[dict] = []
    start_epoch = 0
    last_epoch = cfg.epochs if cfg.stop_after is None else min(cfg.epochs, cfg.stop_after)
    if cfg.resume:
        state = _read_checkpoint(cfg.resume, cfg, scheduler)
        start_epoch = state["epoch"]
        if start_epoch >= last_epoch:
            until = "--stop-after" if last_epoch < cfg.epochs else "--epochs"
            raise TrainConfigError(
                f"{cfg.resume} already holds {start_epoch} epoch(s) and {until} asks for "
                f"{last_epoch}: nothing to train",
                op="train",
            )
        for field_name, target in (
            ("model", model),
            ("optimizer", optimizer),
            ("scheduler", scheduler),
        ):
            _restore(cfg.resume, field_name, target, state[field_name])
        if state.get("scaler"):
            _restore(cfg.resume, "scaler", scaler, state["scaler"])
        shuffle.set_state(state["shuffle_rng"])
        default_generator.set_state(state["default_rng"])
        history = list(state["history"])

    for epoch in range(start_epoch, last_epoch):
        if sampler is not None:
            sampler.set_epoch(epoch)
        stats = _train_epoch(net, optimizer, scaler, train_loader, epoch, cfg, lead)
        scheduler.step()
        stats["test_accuracy"] = evaluate(model, test_loader)
        history.append(stats)
        if not lead:
            continue
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
                "scaler": scaler.state_dict(),
                "shuffle_rng": shuffle.json_state(),
                "default_rng": default_generator.json_state(),
                "history": history,
            },
            _ensure_dir(cfg.checkpoint),
        )
    accuracy = history[-1]["test_accuracy"] if history else evaluate(model, test_loader)
    return TrainResult(accuracy, history, cfg.checkpoint, model)


def _train_epoch(
    model, optimizer, scaler, loader, epoch: int, cfg: TrainConfig, lead: bool
) -> dict:
    bar = None
    if cfg.progress and lead:
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
    dtype = AMP_DTYPES.get(cfg.amp)
    for images, labels in loader:
        with amp.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            logits = model(images)
            loss = nn.functional.cross_entropy(logits, labels)  # (float32 under autocast)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
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
    if cfg.distributed:  # the epoch's figures over every rank's samples
        from . import distributed as dist

        totals = Tensor(np.array([loss_sum, correct, seen], dtype=np.float64))
        dist.all_reduce(totals)
        loss_sum, correct, seen = float(totals[0]), int(totals[1]), int(totals[2])
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


_HISTORY_KEYS = ("epoch", "loss", "train_accuracy", "test_accuracy", "seconds")


def _read_checkpoint(path: str, cfg: TrainConfig, scheduler) -> dict:
    """The state in ``path``, every field checked against this run (see the module docstring);
    ``scheduler`` is this run's, fresh, to compare the saved one with."""
    state = load(path)

    def bad(field_name: str, problem: str) -> CheckpointError:
        return CheckpointError(
            f"{path}: cannot resume: field {field_name!r} {problem}", op="train --resume"
        )

    if not isinstance(state, dict) or state.get("format") != "ember-train":
        raise CheckpointError(f"{path} is not a checkpoint written by `ember train`")
    fields = ("config", "epoch", "model", "optimizer", "scheduler", "shuffle_rng", "default_rng")
    for name in (*fields, "history"):
        if name not in state:
            raise bad(name, "is missing")
    saved = state["config"]
    if not isinstance(saved, dict):
        raise bad("config", f"should be a dict, got {type(saved).__name__}")
    saved = {"amp": None, **saved}
    for key in _RESUME_KEYS:
        if key not in saved:
            raise bad("config", f"has no {key!r} entry")
        if saved[key] != getattr(cfg, key):
            raise CheckpointError(
                f"{path} was written with {key}={saved[key]!r} but this run has "
                f"{key}={getattr(cfg, key)!r}; resume with the same settings"
            )
    epoch = state["epoch"]
    if not _is_int(epoch) or not 1 <= epoch <= cfg.epochs:
        raise bad("epoch", f"should be a whole number from 1 to {cfg.epochs}, got {epoch!r}")
    state["epoch"] = int(epoch)
    for name in ("model", "optimizer", "scheduler"):
        if not isinstance(state[name], dict):
            raise bad(name, f"should be a dict, got {type(state[name]).__name__}")
    problem = _unlike(state["scheduler"], scheduler.state_dict(), "")
    if problem:
        raise bad("scheduler", problem)
    if state["scheduler"]["last_epoch"] != epoch:
        raise bad("scheduler", f"has last_epoch {state['scheduler']['last_epoch']!r}, not {epoch}")
    for name in ("shuffle_rng", "default_rng"):
        try:
            Generator().set_state(state[name])
        except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as exc:
            raise bad(name, f"is not a generator state ({type(exc).__name__}: {exc})") from exc
    history = state["history"]
    if not isinstance(history, list) or len(history) != epoch:
        raise bad("history", f"should be a list of {epoch} epoch records, got {history!r:.80}")
    for k, record in enumerate(history):
        if not (isinstance(record, dict) and set(_HISTORY_KEYS) <= set(record)):
            raise bad("history", f"entry {k} should be a dict with {', '.join(_HISTORY_KEYS)}")
        if not all(_is_real(record[key]) for key in _HISTORY_KEYS):
            raise bad("history", f"entry {k} holds a value that is not a number")
    return state


def _unlike(saved, fresh, where: str) -> str | None:
    """Why ``saved`` does not have the form of ``fresh`` (the same keys, list lengths and kinds
    of value), or None."""
    at = f" at {where}" if where else ""
    if isinstance(fresh, dict):
        if not isinstance(saved, dict) or set(saved) != set(fresh):
            return f"does not have the entries {sorted(fresh)}{at}"
        for key in fresh:
            problem = _unlike(saved[key], fresh[key], f"{where}.{key}" if where else str(key))
            if problem:
                return problem
        return None
    if isinstance(fresh, (list, tuple)):
        if not isinstance(saved, (list, tuple)) or len(saved) != len(fresh):
            return f"should hold {len(fresh)} values{at}"
        for i, (a, b) in enumerate(zip(saved, fresh)):
            problem = _unlike(a, b, f"{where}[{i}]")
            if problem:
                return problem
        return None
    if isinstance(fresh, bool) or fresh is None or isinstance(fresh, str):
        ok = type(saved) is type(fresh)
    elif _is_real(fresh):
        ok = _is_real(saved) and math.isfinite(saved)
    else:
        ok = True  # (a value of another kind: left to the object's own load_state_dict)
    return None if ok else f"holds {saved!r:.60} where a {type(fresh).__name__} belongs{at}"


def _restore(path: str, field_name: str, target, saved) -> None:
    """``target.load_state_dict(saved)``, any refusal reported as the checkpoint's problem."""
    try:
        target.load_state_dict(saved)
    except (EmberError, KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        detail = exc.detail if isinstance(exc, EmberError) else f"{type(exc).__name__}: {exc}"
        raise CheckpointError(
            f"{path}: cannot resume: field {field_name!r} does not fit this run's "
            f"{type(target).__name__} ({detail})",
            op="train --resume",
        ) from exc


def _check_checkpoint_path(path: str) -> None:
    """Fail now, not after an epoch, when the checkpoint cannot be written at ``path``: its
    folder is made (as saving would) and a file is created in it and removed."""
    if os.path.isdir(path):
        raise TrainConfigError(f"--checkpoint {path} is a directory, not a file", op="train")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        os.unlink(create_temporary(directory, os.path.basename(path)))
    except OSError as exc:
        raise TrainConfigError(
            f"--checkpoint {path} cannot be written ({exc.strerror or exc})", op="train"
        ) from exc


def _ensure_dir(path: str) -> str:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    return path


def parameters_equal(a: nn.Module, b: nn.Module) -> bool:
    """True when two models hold bit-identical state (used to verify exact resumption)."""
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(
        np.array_equal(sa[k].numpy(force=True), sb[k].numpy(force=True)) for k in sa
    )
