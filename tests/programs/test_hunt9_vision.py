"""Vision programs as users write them: MobileNetV3 blocks (hardswish, hard-sigmoid
squeeze-excite, make_divisible), ResNeXt/ShuffleNet grouped convolutions with a channel shuffle,
DeepLab's ASPP (dilated convolutions, image pooling, bilinear upsampling), an FPN with nearest
upsampling, anchors with IoU and a batched NMS in tensor ops, a CenterNet heatmap decoder,
a PixelCNN with masked convolutions, EfficientNet's stochastic depth.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def mobilenet_v3(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def make_divisible(v, divisor=8, min_value=None):
        min_value = min_value or divisor
        new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
        if new_v < 0.9 * v:
            new_v += divisor
        return new_v

    class SE(nn.Module):
        def __init__(s, c, r=4):
            super().__init__()
            h = make_divisible(c // r)
            s.fc1 = nn.Conv2d(c, h, 1)
            s.fc2 = nn.Conv2d(h, c, 1)

        def forward(s, x):
            w = F.adaptive_avg_pool2d(x, 1)
            w = F.relu(s.fc1(w), inplace=True)
            return x * F.hardsigmoid(s.fc2(w), inplace=True)

    class Block(nn.Module):
        def __init__(s, cin, exp, cout, k, se, act, stride):
            super().__init__()
            s.use_res = stride == 1 and cin == cout
            layers = []
            if exp != cin:
                layers += [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), act()]
            layers += [
                nn.Conv2d(exp, exp, k, stride, (k - 1) // 2, groups=exp, bias=False),
                nn.BatchNorm2d(exp),
                act(),
            ]
            if se:
                layers.append(SE(exp))
            layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
            s.block = nn.Sequential(*layers)

        def forward(s, x):
            y = s.block(x)
            return y + x if s.use_res else y

    class Net(nn.Module):
        def __init__(s, ncls=5):
            super().__init__()
            s.stem = nn.Sequential(
                nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish()
            )
            s.blocks = nn.Sequential(
                Block(8, 8, 8, 3, True, nn.ReLU, 1),
                Block(8, 24, 12, 3, False, nn.ReLU, 2),
                Block(12, 36, 12, 5, True, nn.Hardswish, 1),
            )
            s.head = nn.Sequential(
                nn.Linear(12, 20), nn.Hardswish(inplace=True), nn.Dropout(0.0), nn.Linear(20, ncls)
            )

        def forward(s, x):
            x = s.blocks(s.stem(x))
            x = torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1)
            return s.head(x)

    m = ctx.init(Net())
    opt = torch.optim.RMSprop(m.parameters(), lr=1e-3, alpha=0.9, eps=0.0316, momentum=0.9)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((4, 3, 16, 16)).astype(np.float32))
    y = ctx.t(rng.integers(0, 5, 4))

    def step(x, y):
        loss = F.cross_entropy(m(x), y, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = [step(x, y) for _ in range(3)]
    m.eval()
    with torch.inference_mode():
        ev = m(x)
    return {"l": losses, "ev": ev, "bn": m.blocks[1].block[1].running_var}


def resnext_shuffle(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def channel_shuffle(x, groups):
        b, c, h, w = x.size()
        x = x.view(b, groups, c // groups, h, w)
        x = torch.transpose(x, 1, 2).contiguous()
        return x.view(b, -1, h, w)

    class Bottleneck(nn.Module):
        expansion = 2

        def __init__(s, cin, width, groups, stride=1):
            super().__init__()
            cout = width * s.expansion
            s.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            s.bn1 = nn.BatchNorm2d(width)
            s.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
            s.bn2 = nn.BatchNorm2d(width)
            s.conv3 = nn.Conv2d(width, cout, 1, bias=False, groups=2)
            s.bn3 = nn.BatchNorm2d(cout)
            s.groups = groups
            s.down = None
            if stride != 1 or cin != cout:
                s.down = nn.Sequential(
                    nn.AvgPool2d(stride, stride, ceil_mode=True, count_include_pad=False),
                    nn.Conv2d(cin, cout, 1, bias=False),
                    nn.BatchNorm2d(cout),
                )

        def forward(s, x):
            idt = x if s.down is None else s.down(x)
            out = F.relu(s.bn1(s.conv1(x)))
            out = channel_shuffle(out, s.groups)
            out = F.relu(s.bn2(s.conv2(out)))
            out = s.bn3(s.conv3(out))
            out += idt
            return F.relu_(out)

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
            s.pool = nn.MaxPool2d(3, 2, 1)
            s.layer1 = Bottleneck(8, 8, 4)
            s.layer2 = Bottleneck(16, 8, 4, stride=2)
            s.fc = nn.Linear(16, 3)
            for mod in s.modules():
                if isinstance(mod, nn.BatchNorm2d):
                    nn.init.constant_(mod.weight, 1)
                    nn.init.constant_(mod.bias, 0)
            nn.init.zeros_(s.layer2.bn3.weight)

        def forward(s, x):
            x = s.pool(F.relu(s.stem(x)))
            x = s.layer2(s.layer1(x))
            return s.fc(x.mean((2, 3)))

    m = ctx.init(Net())
    decay, no_decay = [], []
    for name, p in m.named_parameters():
        (no_decay if p.ndim <= 1 or name.endswith(".bias") else decay).append(p)
    opt = torch.optim.SGD(
        [{"params": decay, "weight_decay": 5e-4}, {"params": no_decay, "weight_decay": 0.0}],
        lr=0.1,
        momentum=0.9,
        nesterov=True,
    )
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((2, 3, 13, 13)).astype(np.float32))
    y = ctx.t(np.array([0, 2]))

    def step(x, y):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = [step(x, y) for _ in range(3)]
    return {"l": losses, "w": m.layer2.conv2.weight, "n": [len(decay), len(no_decay)]}


def deeplab_aspp(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class ASPPPooling(nn.Sequential):
        def __init__(s, cin, cout):
            super().__init__(
                nn.AdaptiveAvgPool2d(1), nn.Conv2d(cin, cout, 1, bias=False), nn.ReLU()
            )

        def forward(s, x):
            size = x.shape[-2:]
            for mod in s:
                x = mod(x)
            return F.interpolate(x, size=size, mode="bilinear", align_corners=False)

    class ASPP(nn.Module):
        def __init__(s, cin, rates, cout=6):
            super().__init__()
            mods = [nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.GroupNorm(2, cout))]
            for r in rates:
                mods.append(
                    nn.Sequential(
                        nn.Conv2d(cin, cout, 3, padding=r, dilation=r, bias=False),
                        nn.GroupNorm(2, cout),
                        nn.ReLU(),
                    )
                )
            mods.append(ASPPPooling(cin, cout))
            s.convs = nn.ModuleList(mods)
            s.project = nn.Sequential(
                nn.Conv2d(len(mods) * cout, cout, 1, bias=False), nn.ReLU(), nn.Dropout(0.0)
            )

        def forward(s, x):
            return s.project(torch.cat([c(x) for c in s.convs], dim=1))

    class Net(nn.Module):
        def __init__(s, ncls=3):
            super().__init__()
            s.backbone = nn.Sequential(
                nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 2, 1), nn.ReLU()
            )
            s.aspp = ASPP(8, [1, 2, 3])
            s.cls = nn.Conv2d(6, ncls, 1)

        def forward(s, x):
            H, W = x.shape[-2:]
            out = s.cls(s.aspp(s.backbone(x)))
            return F.interpolate(out, size=(H, W), mode="bilinear", align_corners=True)

    m = ctx.init(Net())
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    sched = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=5, power=0.9)
    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((2, 3, 14, 18)).astype(np.float32))
    tgt = rng.integers(0, 3, (2, 14, 18))
    tgt[0, :3, :3] = 255
    y = ctx.t(tgt)

    def step(x, y):
        out = m(x)
        loss = F.cross_entropy(out, y, ignore_index=255)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, out.argmax(1)

    step = ctx.fn(step)
    res = []
    for _ in range(3):
        loss, pred = step(x, y)
        sched.step()
        res.append(loss)
    valid = y != 255
    acc = (pred[valid] == y[valid]).float().mean()
    return {"l": res, "lr": sched.get_last_lr(), "acc": acc}


def fpn(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class FPN(nn.Module):
        def __init__(s, in_chs, out_ch):
            super().__init__()
            s.inner = nn.ModuleList([nn.Conv2d(c, out_ch, 1) for c in in_chs])
            s.layer = nn.ModuleList([nn.Conv2d(out_ch, out_ch, 3, padding=1) for _ in in_chs])

        def forward(s, feats):
            last = s.inner[-1](feats[-1])
            results = [s.layer[-1](last)]
            for idx in range(len(feats) - 2, -1, -1):
                lat = s.inner[idx](feats[idx])
                if idx == 0:
                    top = F.interpolate(last, size=lat.shape[-2:], mode="nearest")
                else:
                    top = F.interpolate(last, scale_factor=2.0, mode="nearest")
                last = lat + top
                results.insert(0, s.layer[idx](last))
            results.append(F.max_pool2d(results[-1], 1, 2, 0))
            return results

    class Backbone(nn.Module):
        def __init__(s):
            super().__init__()
            s.c1 = nn.Conv2d(3, 4, 3, 2, 1)
            s.c2 = nn.Conv2d(4, 6, 3, 2, 1)
            s.c3 = nn.Conv2d(6, 8, 3, 2, 1)

        def forward(s, x):
            f1 = F.relu(s.c1(x))
            f2 = F.relu(s.c2(f1))
            f3 = F.relu(s.c3(f2))
            return [f1, f2, f3]

    bb = ctx.init(Backbone(), "bb")
    neck = ctx.init(FPN([4, 6, 8], 5), "fpn")
    head = ctx.init(nn.Conv2d(5, 2, 3, padding=1), "head")
    params = [*bb.parameters(), *neck.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((2, 3, 16, 24)).astype(np.float32))

    def step(x):
        outs = neck(bb(x))
        loss = sum(head(o).sigmoid().mean() for o in outs)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, [tuple(o.shape) for o in outs]

    step = ctx.fn(step)
    out = [step(x) for _ in range(2)]
    return {"l": [o[0] for o in out], "shapes": [list(s) for s in out[0][1]]}


def anchors_nms(torch, ctx):
    F = torch.nn.functional

    def make_anchors(fh, fw, stride, sizes, ratios):
        scales = torch.as_tensor(sizes, dtype=torch.float32)
        ar = torch.as_tensor(ratios, dtype=torch.float32)
        h_r = torch.sqrt(ar)
        w_r = 1 / h_r
        ws = (w_r[:, None] * scales[None, :]).view(-1)
        hs = (h_r[:, None] * scales[None, :]).view(-1)
        base = torch.stack([-ws, -hs, ws, hs], dim=1) / 2
        base = base.round()
        sx = torch.arange(0, fw, dtype=torch.int32) * stride
        sy = torch.arange(0, fh, dtype=torch.int32) * stride
        yy, xx = torch.meshgrid(sy, sx, indexing="ij")
        xx, yy = xx.reshape(-1), yy.reshape(-1)
        shifts = torch.stack((xx, yy, xx, yy), dim=1)
        return (shifts.view(-1, 1, 4) + base.view(1, -1, 4)).reshape(-1, 4)

    def box_area(b):
        return (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])

    def box_iou(a, b):
        lt = torch.max(a[:, None, :2], b[:, :2])
        rb = torch.min(a[:, None, 2:], b[:, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[..., 0] * wh[..., 1]
        return inter / (box_area(a)[:, None] + box_area(b) - inter)

    def nms(boxes, scores, thr):
        order = scores.argsort(descending=True)
        keep = []
        while order.numel() > 0:
            i = order[0]
            keep.append(i.item())
            if order.numel() == 1:
                break
            ious = box_iou(boxes[i].unsqueeze(0), boxes[order[1:]]).squeeze(0)
            order = order[1:][ious <= thr]
        return torch.tensor(keep, dtype=torch.int64)

    def batched_nms(boxes, scores, idxs, thr):
        max_coord = boxes.max()
        offsets = idxs.to(boxes) * (max_coord + torch.tensor(1).to(boxes))
        return nms(boxes + offsets[:, None], scores, thr)

    def encode(ref, prop, w=(10.0, 10.0, 5.0, 5.0)):
        pw, ph = prop[:, 2] - prop[:, 0], prop[:, 3] - prop[:, 1]
        px, py = prop[:, 0] + 0.5 * pw, prop[:, 1] + 0.5 * ph
        gw, gh = ref[:, 2] - ref[:, 0], ref[:, 3] - ref[:, 1]
        gx, gy = ref[:, 0] + 0.5 * gw, ref[:, 1] + 0.5 * gh
        return torch.stack(
            (w[0] * (gx - px) / pw, w[1] * (gy - py) / ph, w[2] * torch.log(gw / pw),
             w[3] * torch.log(gh / ph)), dim=1)  # fmt: skip

    anchors = make_anchors(4, 5, 8, (8, 16), (0.5, 1.0, 2.0))
    rng = np.random.default_rng(4)
    gt = ctx.t(np.array([[2, 3, 14, 20], [20, 4, 36, 18.0]], dtype=np.float32))
    iou = box_iou(anchors, gt)
    matched_vals, matches = iou.max(dim=1)
    labels = (matched_vals >= 0.4).to(torch.float32)
    labels[matched_vals < 0.2] = 0.0
    between = (matched_vals >= 0.2) & (matched_vals < 0.4)
    labels[between] = -1.0
    # allow low-quality matches: each gt's best anchors are positive
    best_per_gt, _ = iou.max(dim=0)
    pairs = torch.nonzero(iou == best_per_gt[None, :])
    labels[pairs[:, 0]] = 1.0
    deltas = encode(gt[matches], anchors.float())

    # a tiny head regressing the deltas of the positive anchors
    head = ctx.init(torch.nn.Linear(4, 4 + 1))
    opt = torch.optim.SGD(head.parameters(), lr=0.05)
    feats = anchors.float() / 40.0
    pos = labels == 1
    sampled = labels >= 0

    def step(feats):
        out = head(feats)
        cls_loss = F.binary_cross_entropy_with_logits(out[sampled, 4], labels[sampled])
        reg = F.smooth_l1_loss(out[pos, :4], deltas[pos], beta=1 / 9, reduction="sum")
        loss = cls_loss + reg / sampled.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    losses = [step(feats) for _ in range(2)]
    scores = torch.sigmoid(head(feats)[:, 4]).detach()
    scores = scores + ctx.t(rng.uniform(0, 0.01, scores.shape[0]).astype(np.float32))
    cls_idx = torch.arange(anchors.shape[0]) % 2
    keep = batched_nms(anchors.float(), scores, cls_idx, 0.5)
    return {
        "anchors": anchors,
        "labels": labels,
        "deltas": deltas,
        "l": losses,
        "keep": keep,
        "npos": int(pos.sum()),
    }


def centernet(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def focal(pred, gt, alpha=2, beta=4):
        pos = gt.eq(1).float()
        neg = gt.lt(1).float()
        neg_w = torch.pow(1 - gt, beta)
        pred = pred.clamp(1e-4, 1 - 1e-4)
        pos_loss = (torch.log(pred) * torch.pow(1 - pred, alpha) * pos).sum()
        neg_loss = (torch.log(1 - pred) * torch.pow(pred, alpha) * neg_w * neg).sum()
        num_pos = pos.sum()
        return -(pos_loss + neg_loss) / num_pos.clamp(min=1)

    def gaussian_heatmap(hm, cx, cy, sigma):
        H, W = hm.shape
        ys = torch.arange(H, dtype=torch.float32)[:, None]
        xs = torch.arange(W, dtype=torch.float32)[None, :]
        g = torch.exp(-((xs - cx) ** 2 + (ys - cy) ** 2) / (2 * sigma**2))
        return torch.maximum(hm, g)

    def decode(heat, wh, K=3):
        hmax = F.max_pool2d(heat, 3, stride=1, padding=1)
        keep = (hmax == heat).float()
        heat = heat * keep
        B, C, H, W = heat.shape
        scores, inds = torch.topk(heat.view(B, -1), K)
        clses = torch.div(inds, H * W, rounding_mode="floor")
        inds = inds % (H * W)
        ys = torch.div(inds, W, rounding_mode="trunc").float()
        xs = (inds % W).float()
        wh = wh.view(B, 2, -1).permute(0, 2, 1)
        whk = wh.gather(1, inds.unsqueeze(2).expand(B, K, 2))
        boxes = torch.stack(
            [
                xs - whk[..., 0] / 2,
                ys - whk[..., 1] / 2,
                xs + whk[..., 0] / 2,
                ys + whk[..., 1] / 2,
            ],
            dim=2,
        )
        return scores, clses, boxes

    class Head(nn.Module):
        def __init__(s, C=2):
            super().__init__()
            s.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True))
            s.hm = nn.Conv2d(8, C, 1)
            s.wh = nn.Conv2d(8, 2, 1)
            s.hm.bias.data.fill_(-2.19)

        def forward(s, x):
            f = s.body(x)
            return s.hm(f).sigmoid_(), s.wh(f)

    m = ctx.init(Head())
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    H = W = 8
    hm = torch.zeros(2, 2, H, W)
    hm[0, 0] = gaussian_heatmap(hm[0, 0], 2, 3, 1.0)
    hm[0, 1] = gaussian_heatmap(hm[0, 1], 6, 5, 1.5)
    hm[1, 0] = gaussian_heatmap(hm[1, 0], 4, 4, 1.0)
    hm[1, 0] = gaussian_heatmap(hm[1, 0], 1, 6, 0.8)
    ind = ctx.t(np.array([[3 * W + 2, 5 * W + 6], [4 * W + 4, 6 * W + 1]]))
    wh_t = ctx.t(np.array([[[2.0, 3], [4, 2]], [[3, 3], [1, 2]]], dtype=np.float32))
    rng = np.random.default_rng(5)
    x = ctx.t(rng.standard_normal((2, 3, H, W)).astype(np.float32))

    def step(x):
        heat, wh = m(x)
        whf = wh.flatten(2).transpose(1, 2)
        pred_wh = torch.gather(whf, 1, ind[..., None].expand(-1, -1, 2))
        loss = focal(heat, hm) + 0.1 * F.l1_loss(pred_wh, wh_t, reduction="sum") / 4
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = [step(x) for _ in range(2)]
    with torch.no_grad():
        heat, wh = m(x)
    scores, clses, boxes = decode(heat, wh)
    s2, c2, b2 = decode(hm * ctx.t(np.array([1.0, 0.9], np.float32)).view(1, 2, 1, 1), wh, K=2)
    return {"l": losses, "hm": hm, "s": scores, "c": clses, "b": boxes, "s2": s2, "c2": c2}


def pixelcnn(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class MaskedConv2d(nn.Conv2d):
        def __init__(s, mask_type, *args, **kwargs):
            super().__init__(*args, **kwargs)
            assert mask_type in ("A", "B")
            s.register_buffer("mask", s.weight.data.clone())
            _, _, kH, kW = s.weight.size()
            s.mask.fill_(1)
            s.mask[:, :, kH // 2, kW // 2 + (mask_type == "B") :] = 0
            s.mask[:, :, kH // 2 + 1 :] = 0

        def forward(s, x):
            s.weight.data *= s.mask
            return super().forward(x)

    class PixelCNN(nn.Module):
        def __init__(s, ch=8, levels=4):
            super().__init__()
            s.net = nn.Sequential(
                MaskedConv2d("A", 1, ch, 5, padding=2, bias=False),
                nn.BatchNorm2d(ch),
                nn.ReLU(True),
                MaskedConv2d("B", ch, ch, 3, padding=1, bias=False),
                nn.BatchNorm2d(ch),
                nn.ReLU(True),
                nn.Conv2d(ch, levels, 1),
            )
            s.levels = levels

        def forward(s, x):
            return s.net(x / (s.levels - 1))

    m = ctx.init(PixelCNN())
    opt = torch.optim.Adam(m.parameters(), lr=2e-3)
    rng = np.random.default_rng(6)
    imgs = ctx.t(rng.integers(0, 4, (3, 1, 6, 6)))

    def step(imgs):
        logits = m(imgs.float())
        loss = F.cross_entropy(logits, imgs.squeeze(1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    losses = [step(imgs) for _ in range(3)]
    m.eval()
    # autoregressive sampling, greedy so the two libraries agree
    sample = torch.zeros(2, 1, 4, 4)
    with torch.no_grad():
        for i in range(4):
            for j in range(4):
                logits = m(sample)[:, :, i, j]
                sample[:, 0, i, j] = logits.argmax(-1).float()
    nll_bits = F.cross_entropy(m(imgs.float()), imgs.squeeze(1), reduction="none").mean(
        (1, 2)
    ) / math.log(2)
    return {"l": losses, "sample": sample, "bits": nll_bits, "w": m.net[0].weight}


def stochastic_depth(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def drop_path(x, keep_mask, p, training):
        if p == 0.0 or not training:
            return x
        keep = 1.0 - p
        shape = (x.shape[0],) + (1,) * (x.ndim - 1)
        mask = keep_mask.view(shape).to(x.dtype)
        if keep > 0.0:
            mask.div_(keep)
        return x * mask

    class MBConv(nn.Module):
        def __init__(s, c, p):
            super().__init__()
            s.p = p
            s.expand = nn.Sequential(nn.Conv2d(c, 2 * c, 1, bias=False), nn.BatchNorm2d(2 * c))
            s.dw = nn.Conv2d(2 * c, 2 * c, 3, padding=1, groups=2 * c, bias=False)
            s.bn = nn.BatchNorm2d(2 * c, eps=1e-3, momentum=0.01)
            s.se_r = nn.Conv2d(2 * c, 2, 1)
            s.se_e = nn.Conv2d(2, 2 * c, 1)
            s.proj = nn.Sequential(nn.Conv2d(2 * c, c, 1, bias=False), nn.BatchNorm2d(c))

        def forward(s, x, keep_mask):
            h = F.silu(s.expand(x))
            h = F.silu(s.bn(s.dw(h)))
            h = h * torch.sigmoid(s.se_e(F.silu(s.se_r(h.mean((2, 3), keepdim=True)))))
            h = s.proj(h)
            return x + drop_path(h, keep_mask, s.p, s.training)

    blocks = nn.ModuleList([MBConv(4, 0.1 * i) for i in range(3)])
    m = ctx.init(blocks)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=1e-2)
    rng = np.random.default_rng(7)
    x = ctx.t(rng.standard_normal((4, 4, 6, 6)).astype(np.float32))
    masks = [ctx.t(rng.random((3, 4)) > 0.2) for _ in range(3)]

    def step(x, km):
        h = x
        for i, b in enumerate(m):
            h = b(h, km[i])
        loss = h.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = [step(x, masks[i]) for i in range(3)]
    m.eval()
    with torch.no_grad():
        h = x
        for b in m:
            h = b(h, None)
    return {"l": losses, "ev": h}


PROGRAMS = [
    mobilenet_v3,
    resnext_shuffle,
    deeplab_aspp,
    fpn,
    anchors_nms,
    centernet,
    pixelcnn,
    stochastic_depth,
]
CAPTURED = [mobilenet_v3, deeplab_aspp, fpn, centernet]  # (the others: eagerly, for time)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
