"""Train the inspection domain's two frozen models at build time and record them in ``data/``.

``python -m agentic_ray.domains.inspection.build_models`` (seeded; a few minutes on 2 CPUs) writes:

* ``detector.pt`` + ``detector.json``: the CenterNet-style detector behind ``detect`` (:mod:`.detector`), trained
  on synthetic parts (:func:`training_part`), with its version, SHA-256, training settings and its precision,
  recall and F1 on held-out parts (other seeds) at the skill's default parameters;
* ``quality_scorer.pt`` + ``quality_scorer.json``: the model-based reward's scorer
  (:class:`~agentic_ray.rewards.detection_quality_model.DetectionQualityNet`): the image plus the painted crack
  boxes the detector reported at random parameter settings, regressed on the F1 those boxes score against the
  truth; the record holds its held-out mean absolute error and the error of always predicting the mean.

Both records carry ``version``; bump :data:`DETECTOR_VERSION` / :data:`QUALITY_VERSION` when the training changes.
``--quantiles-only`` then writes ``quantiles.json`` (:func:`fit_feature_quantiles`, which runs the shipped
detector); the prototypes come from ``python -m agentic_ray.envs.prototypes inspection`` as for every domain.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentic_ray.domains.inspection import detector as det
from agentic_ray.domains.inspection.font import make_serial
from agentic_ray.domains.inspection.images import DEFECT_CLASSES, IMAGE_SIZE, PartSpec, draw_part, render
from agentic_ray.domains.quantile_fit import fit_quantiles
from agentic_ray.domains.quantile_map import QuantileMap
from agentic_ray.rewards.detection_functional import f1_score, match_detections
from agentic_ray.rewards.detection_quality_model import DetectionQualityNet, box_channels

DETECTOR_VERSION = "1"
QUALITY_VERSION = "1"
CRACK = DEFECT_CLASSES.index("crack")
DEFAULTS = det.DEFAULT_PARAMS


def training_part(rng: np.random.Generator) -> PartSpec:
    """A part as the lines produce them: 0-2 cracks of any severity, 0-3 scratches, any camera contrast."""
    n_cracks = int(rng.choice(3, p=[0.35, 0.4, 0.25]))
    return draw_part(rng, make_serial(rng), list(rng.uniform(0.1, 1.0, n_cracks)), int(rng.integers(0, 4)))


def dataset(n: int, seed: int) -> tuple[np.ndarray, list[Any]]:
    """``n`` rendered training parts: pixels ``(n, 64, 64)`` and their :class:`RenderedPart` records."""
    rng = np.random.default_rng(seed)
    parts = [render(training_part(rng)) for _ in range(n)]
    return np.stack([p.pixels for p in parts]), parts


def targets(parts: list[Any]) -> dict[str, torch.Tensor]:
    """CenterNet targets on the 16x16 grid: Gaussian heatmaps per class, and at each centre cell the log box size
    (in grid cells: IoU cares about relative size errors), the sub-cell offset and the severity."""
    n, g, c = len(parts), det.GRID, len(DEFECT_CLASSES)
    heat = np.zeros((n, c, g, g), dtype=np.float32)
    reg = np.zeros((n, 5, g, g), dtype=np.float32)
    mask = np.zeros((n, g, g), dtype=np.float32)
    ys, xs = np.mgrid[0:g, 0:g]
    for i, p in enumerate(parts):
        for (x0, y0, x1, y1), k, s in zip(p.boxes, p.classes, p.severities, strict=True):
            cx, cy = (x0 + x1) / 2 / det.STRIDE, (y0 + y1) / 2 / det.STRIDE
            gx, gy = min(int(cx), g - 1), min(int(cy), g - 1)
            sigma = max(0.8, ((x1 - x0) + (y1 - y0)) / 2 / det.STRIDE / 5)
            bump = np.exp(-((xs - gx) ** 2 + (ys - gy) ** 2) / (2 * sigma**2))
            heat[i, k] = np.maximum(heat[i, k], bump)
            reg[i, :, gy, gx] = (
                np.log(max(x1 - x0, 1.0) / det.STRIDE),
                np.log(max(y1 - y0, 1.0) / det.STRIDE),
                cx - gx,
                cy - gy,
                s,
            )
            mask[i, gy, gx] = 1.0 + float(k == CRACK)  # 2 = crack (severity supervised), 1 = scratch
    return {"heat": torch.from_numpy(heat), "reg": torch.from_numpy(reg), "mask": torch.from_numpy(mask)}


def centernet_loss(out: torch.Tensor, t: dict[str, torch.Tensor]) -> torch.Tensor:
    """CenterNet's penalty-reduced focal loss on the heatmaps plus L1 on size, offset and (cracks) severity."""
    c = len(DEFECT_CLASSES)
    pred = torch.sigmoid(out[:, :c]).clamp(1e-4, 1 - 1e-4)
    gt = t["heat"]
    pos = (gt >= 1.0 - 1e-6).float()
    pos_loss = -((1 - pred) ** 2) * torch.log(pred) * pos
    neg_loss = -((1 - gt) ** 4) * (pred**2) * torch.log(1 - pred) * (1 - pos)
    n_pos = pos.sum().clamp(min=1.0)
    focal = (pos_loss.sum() + neg_loss.sum()) / n_pos
    m = (t["mask"] > 0).float()
    reg = out[:, c:]
    l1 = (reg[:, :4] - t["reg"][:, :4]).abs().sum(1) * m
    sev_m = (t["mask"] > 1.5).float()
    sev = (reg[:, 4] - t["reg"][:, 4]).abs() * sev_m
    return focal + (l1.sum() + 2.0 * sev.sum()) / m.sum().clamp(min=1.0)


def train_detector(
    n_train: int = 3000, epochs: int = 20, seed: int = 0, width: int = 32, log: Any = print
) -> tuple[det.CrackNet, dict[str, Any]]:
    """Train the detector from scratch (seeded)."""
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    x, parts = dataset(n_train, seed)
    tg = targets(parts)
    gen_s = time.perf_counter() - t0
    net = det.CrackNet(width)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    xt = torch.from_numpy(x)[:, None]
    g = torch.Generator().manual_seed(seed)
    for ep in range(epochs):
        perm = torch.randperm(n_train, generator=g)
        total = 0.0
        for j in range(0, n_train, 64):
            b = perm[j : j + 64]
            xb = xt[b]
            if (
                ep % 2
            ):  # every other epoch mirrored: centre cell gx -> 15 - gx, offset o -> 1 - o, the rest as is
                xb = xb.flip(-1)
                tb = {k: v[b].flip(-1) for k, v in tg.items()}
                tb["reg"] = tb["reg"].clone()
                tb["reg"][:, 2] = torch.where(tb["mask"] > 0, 1.0 - tb["reg"][:, 2], tb["reg"][:, 2])
            else:
                tb = {k: v[b] for k, v in tg.items()}
            loss = centernet_loss(net(xb), tb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(b)
        sched.step()
        log(f"detector epoch {ep + 1}/{epochs}: loss {total / n_train:.4f}")
    net.eval()
    info = {
        "n_train": n_train,
        "epochs": epochs,
        "seed": seed,
        "width": width,
        "data_s": round(gen_s, 1),
        "train_s": round(time.perf_counter() - t0 - gen_s, 1),
    }
    return net, info


def crack_f1(d: list[det.Detection], part: Any) -> tuple[int, int, int]:
    """``(tp, fp, fn)`` of the reported cracks against the true cracks (IoU >= 0.5)."""
    pb = torch.tensor([x.box for x in d if x.cls == "crack"], dtype=torch.float32).reshape(-1, 4)
    tb = torch.as_tensor(part.boxes[part.classes == CRACK]).reshape(-1, 4)
    return match_detections(
        pb,
        torch.zeros(len(pb), dtype=torch.long),
        torch.tensor([x.score for x in d if x.cls == "crack"]),
        tb,
        torch.zeros(len(tb), dtype=torch.long),
    )


def evaluate(cands: list[det.Candidates], parts: list[Any], **params: Any) -> dict[str, float]:
    """Precision, recall and F1 of the cracks over many images (counts pooled), at the given parameters."""
    tp = fp = fn = 0
    for c, p in zip(cands, parts, strict=True):
        a, b, e = crack_f1(det.postprocess(c, **params), p)
        tp, fp, fn = tp + a, fp + b, fn + e
    return {
        "precision": tp / max(tp + fp, 1),
        "recall": tp / max(tp + fn, 1),
        "f1": f1_score(tp, fp, fn),
    }


def train_quality(
    detector_net: det.CrackNet, n_images: int = 1000, per_image: int = 3, epochs: int = 8, seed: int = 1
) -> tuple[DetectionQualityNet, dict[str, Any]]:
    """Train the quality scorer on the detector's crack reports at random parameter settings, labelled with
    their true F1; 20% of the images are held out for the recorded error."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x, parts = dataset(n_images, seed + 1000)
    with torch.inference_mode():
        cands = det.decode(detector_net(torch.from_numpy(x)[:, None]))
    inputs, labels = [], []
    for img, c, p in zip(x, cands, parts, strict=True):
        for _ in range(per_image):
            d = det.postprocess(
                c,
                confidence_threshold=float(rng.uniform(0.3, 0.9)),
                iou_threshold=float(rng.uniform(0.1, 0.9)),
                max_detections=int(rng.integers(1, 11)),
                class_filter=str(rng.choice(det.CLASS_FILTERS)),
            )
            cracks = [y for y in d if y.cls == "crack"]
            chans = box_channels(
                np.array([y.box for y in cracks]).reshape(-1, 4), np.zeros(len(cracks), dtype=np.int64), 1, 64
            )
            inputs.append(np.concatenate([img[None], chans]))
            labels.append(f1_score(*crack_f1(d, p)))
    xi = torch.from_numpy(np.stack(inputs))
    yi = torch.tensor(labels, dtype=torch.float32)
    n_hold = len(xi) // 5
    xtr, ytr, xte, yte = xi[n_hold:], yi[n_hold:], xi[:n_hold], yi[:n_hold]
    net = DetectionQualityNet(1)
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    for _ in range(epochs):
        perm = torch.randperm(len(xtr))
        for j in range(0, len(xtr), 64):
            b = perm[j : j + 64]
            loss = torch.nn.functional.binary_cross_entropy_with_logits(net(xtr[b]), ytr[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    with torch.inference_mode():
        pred = torch.sigmoid(net(xte))
    info = {
        "n_samples": len(xi),
        "epochs": epochs,
        "seed": seed,
        "holdout_mae": round(float((pred - yte).abs().mean()), 4),
        "holdout_mae_of_mean": round(float((ytr.mean() - yte).abs().mean()), 4),
    }
    return net, info


def fit_feature_quantiles(n_tasks: int = 400, seed: int = 3) -> QuantileMap:
    """The domain's quantile tables: the generic fit (:func:`~agentic_ray.domains.quantile_fit.fit_quantiles`:
    the listing's contrast, tool latency and error rate) plus what the tools report, which is no world fact and so
    not in ``entity_fields``: the detector's counts and severity at random parameters, and severity ranks."""
    from agentic_ray.domains import get_domain

    domain = get_domain("inspection")
    qm = fit_quantiles(domain, n_tasks=n_tasks, seed=seed)
    rng = np.random.default_rng(seed)
    samples: dict[str, list[float]] = {"part.n_cracks": [], "part.n_scratches": [], "part.crack_severity": []}
    for _ in range(n_tasks // 4):
        fam = domain.families[int(rng.integers(len(domain.families)))]
        world, _task = domain.make_task(fam, domain.draw_training_seed(rng))
        for p in world.parts:
            found = det.postprocess(
                world.candidates(p.id),
                float(rng.uniform(0.3, 0.9)),
                float(rng.uniform(0.1, 0.9)),
                int(rng.integers(1, 11)),
                str(rng.choice(det.CLASS_FILTERS)),
            )
            cracks = [d.severity for d in found if d.cls == "crack"]
            samples["part.n_cracks"].append(len(cracks))
            samples["part.n_scratches"].append(len(found) - len(cracks))
            samples["part.crack_severity"].append(max(cracks, default=0.0))
    extra = QuantileMap.fit({**samples, "part.severity_rank": [float(r) for r in range(1, 7)]})
    qm.xp.update(extra.xp)
    qm.fp.update(extra.fp)
    return qm


def _save(net: torch.nn.Module, weights: Path, record: Path, meta: dict[str, Any]) -> None:
    torch.save(net.state_dict(), weights)
    meta = {**meta, "file": weights.name, "sha256": det.file_digest(weights)}
    record.write_text(json.dumps(meta, indent=2) + "\n")


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - build entry point, run once
    argv = sys.argv[1:] if argv is None else argv
    quantiles_only = "--quantiles-only" in argv
    argv = [a for a in argv if a != "--quantiles-only"]
    out = Path(argv[0]) if argv else det.DATA
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # on a shared 2-CPU box one thread ran a batch 3x faster than two
    if quantiles_only:  # the tables read the shipped detector; run after the models are built
        fit_feature_quantiles().to_json(out / "quantiles.json")
        print(f"wrote {out}/quantiles.json")
        return
    net, info = train_detector()
    torch.save(net.state_dict(), out / "detector.pt")  # kept even if what follows fails
    xv, pv = dataset(400, 10_000)  # held out: other seeds than training
    with torch.inference_mode():
        cands = det.decode(net(torch.from_numpy(xv)[:, None]))
    held = {k: round(v, 4) for k, v in evaluate(cands, pv, **DEFAULTS).items()}
    sweep = {
        f"{t:.2f}": round(evaluate(cands, pv, **{**DEFAULTS, "confidence_threshold": t})["f1"], 4)
        for t in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    }
    print("held-out at defaults:", held, "f1 by threshold:", sweep)
    _save(
        net,
        out / "detector.pt",
        out / "detector.json",
        {
            "version": DETECTOR_VERSION,
            "classes": list(DEFECT_CLASSES),
            "width": info["width"],
            "training": info,
            "heldout": {
                "n_images": 400,
                "seed": 10_000,
                "defaults": DEFAULTS,
                **held,
                "f1_by_threshold": sweep,
            },
        },
    )
    qnet, qinfo = train_quality(net)
    print("quality scorer:", qinfo)
    _save(
        qnet,
        out / "quality_scorer.pt",
        out / "quality_scorer.json",
        {
            "version": QUALITY_VERSION,
            "target": "F1 of the reported crack boxes against the true cracks (IoU >= 0.5)",
            "classes": ["crack"],
            "num_classes": 1,
            "image_size": IMAGE_SIZE,
            "width": 16,
            "training": qinfo,
        },
    )
    print(f"wrote {out}/detector.* and {out}/quality_scorer.*")


if __name__ == "__main__":  # pragma: no cover
    main()
