#!/usr/bin/env python3
"""Reference files for tcv's segmentation models, from torchvision 0.14 and PyTorch 1.13
(Debian's python3-torchvision and python3-torch; run with /usr/bin/python3):

  tests/data/golden/seg_state_dicts.json   (--keys) the state_dict keys and shapes of
      torchvision's deeplabv3_resnet50/101 and fcn_resnet50/101 and of PSPNet-R50/R101
      (below), 21 classes with the auxiliary head, stored as the ResNet-50 and -101
      backbone lists plus one list per head (the script checks that each model's
      state_dict is exactly backbone + head), with the parameter counts.
  tests/data/golden/seg_deeplabv3.safetensors   (default) deeplabv3_resnet50's outputs,
      losses, running statistics and sampled gradients on the closed-form weights and
      input of scripts/make_golden_cls.py, for tests/models/test_golden_seg.cpp.

The golden run: torchvision's deeplabv3_resnet50(num_classes=21, aux_loss=True) with its
two dropouts at p = 0, every state_dict entry set by formula_tensor (make_golden_cls.py),
input x = formula_input((2, 3, 112, 104)) (layer4 is 14x13, so the rate-12 ASPP branch
reads off-centre taps in both dims), target

  t[n, y, x] = (3n + 5y + 7x) mod 21, set to 255 (ignored) where (x + 2y + n) mod 11 == 0,

loss = CE(out, t, ignore_index=255) + 0.4 * CE(aux, t, ignore_index=255). PyTorch
computes in float64 on the float32 formula values (stored as float32): eval-mode out and
aux, then in training mode out, aux, the three losses, three running statistics after
the forward, and the gradients of selected parameters (every k-th element, k = numel //
1024 + 1, and the L2 norm of each whole gradient). Tensors larger than 6000 elements are
stored sampled the same way.

  /usr/bin/python3 scripts/make_golden_seg.py [--keys]
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden_cls import formula_input, formula_tensor, sample, save_safetensors  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NUM_CLASSES = 21
AUX_WEIGHT = 0.4
INPUT_SHAPE = (2, 3, 112, 104)


# ---------------------------------------------------------------- PSPNet
# tcv's PSPNet written in PyTorch with torchvision's pieces and naming; the
# benchmark in bench/compare/seg_step_torch.py trains this one.

class PyramidPooling(nn.Module):
    def __init__(self, in_channels, bins=(1, 2, 3, 6), out_channels=512):
        super().__init__()
        self.stages = nn.ModuleList([
            nn.Sequential(nn.AdaptiveAvgPool2d(b), nn.Conv2d(in_channels, out_channels, 1, bias=False),
                          nn.BatchNorm2d(out_channels), nn.ReLU()) for b in bins])

    def forward(self, x):
        size = x.shape[-2:]
        return torch.cat([x] + [F.interpolate(s(x), size=size, mode="bilinear", align_corners=False)
                                for s in self.stages], 1)


class PSPHead(nn.Sequential):
    def __init__(self, in_channels, num_classes, bins=(1, 2, 3, 6)):
        super().__init__(PyramidPooling(in_channels, bins, 512),
                         nn.Conv2d(in_channels + len(bins) * 512, 512, 3, padding=1, bias=False),
                         nn.BatchNorm2d(512), nn.ReLU(), nn.Dropout2d(0.1),
                         nn.Conv2d(512, num_classes, 1))


class PSPAuxHead(nn.Sequential):
    """torchvision's FCNHead with Dropout2d."""

    def __init__(self, in_channels, num_classes):
        inter = in_channels // 4
        super().__init__(nn.Conv2d(in_channels, inter, 3, padding=1, bias=False),
                         nn.BatchNorm2d(inter), nn.ReLU(), nn.Dropout2d(0.1),
                         nn.Conv2d(inter, num_classes, 1))


class PSPNet(nn.Module):
    """Dilated ResNet (output stride 8), PSPHead on layer4, PSPAuxHead on layer3, both
    outputs upsampled bilinearly to the input size; returns {"out", "aux"} as
    torchvision's segmentation models."""

    def __init__(self, num_classes=21, depth=50):
        super().__init__()
        from torchvision.models import resnet50, resnet101
        from torchvision.models._utils import IntermediateLayerGetter
        net = (resnet50 if depth == 50 else resnet101)(
            weights=None, replace_stride_with_dilation=[False, True, True])
        self.backbone = IntermediateLayerGetter(net, return_layers={"layer4": "out", "layer3": "aux"})
        self.classifier = PSPHead(2048, num_classes)
        self.aux_classifier = PSPAuxHead(1024, num_classes)

    def forward(self, x):
        size = x.shape[-2:]
        f = self.backbone(x)
        up = lambda t: F.interpolate(t, size=size, mode="bilinear", align_corners=False)  # noqa: E731
        return {"out": up(self.classifier(f["out"])), "aux": up(self.aux_classifier(f["aux"]))}


def seg_models():
    from torchvision.models import segmentation as s
    kw = dict(weights=None, weights_backbone=None, num_classes=NUM_CLASSES, aux_loss=True)
    return {
        "deeplabv3_resnet50": lambda: s.deeplabv3_resnet50(**kw),
        "deeplabv3_resnet101": lambda: s.deeplabv3_resnet101(**kw),
        "fcn_resnet50": lambda: s.fcn_resnet50(**kw),
        "fcn_resnet101": lambda: s.fcn_resnet101(**kw),
        "pspnet_resnet50": lambda: PSPNet(NUM_CLASSES, 50),
        "pspnet_resnet101": lambda: PSPNet(NUM_CLASSES, 101),
    }


# ---------------------------------------------------------------- key lists

def write_keys():
    out = {"generator": "scripts/make_golden_seg.py --keys", "torch": torch.__version__,
           "num_classes": NUM_CLASSES, "models": {}, "lists": {}}
    for name, make in seg_models().items():
        m = make()
        sd = [(k, list(t.shape)) for k, t in m.state_dict().items()]
        depth = "resnet101" if name.endswith("101") else "resnet50"
        head = name.split("_")[0]
        backbone = [e for e in sd if e[0].startswith("backbone.")]
        rest = [e for e in sd if not e[0].startswith("backbone.")]
        assert sd == backbone + rest, f"{name}: backbone keys are not first"
        for key, lst in (("backbone_" + depth, backbone), ("head_" + head, rest)):
            if key in out["lists"]:
                assert out["lists"][key] == lst, f"{name}: {key} differs between models"
            out["lists"][key] = lst
        out["models"][name] = {"parameters": sum(p.numel() for p in m.parameters()),
                               "state_dict_entries": len(sd),
                               "lists": ["backbone_" + depth, "head_" + head]}
        print(f"{name}: {out['models'][name]['parameters']:,} parameters, {len(sd)} entries")
    path = os.path.join(ROOT, "tests", "data", "golden", "seg_state_dicts.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


# ---------------------------------------------------------------- golden run

def formula_target(n, h, w, num_classes=NUM_CLASSES):
    t = torch.empty(n, h, w, dtype=torch.int64)
    for b in range(n):
        for y in range(h):
            for x in range(w):
                t[b, y, x] = 255 if (x + 2 * y + b) % 11 == 0 else (3 * b + 5 * y + 7 * x) % num_classes
    return t


def golden_step(model, x, target, p, aux_key, main_weight, aux_weight, class_weight, stats, grads):
    """The tensors a segmentation golden file holds, under prefix p: samples of the
    input and target, both outputs in eval mode, then one training forward and
    backward of main_weight CE(out) + aux_weight CE(aux) (class_weight, ignore
    255): both outputs, the three losses, the running statistics `stats` after
    the forward and the gradients `grads` (samples and L2 norms)."""
    out = {p + ".input_sample": x.reshape(-1)[::97].clone(),
           p + ".target_sample": sample(target.double())}
    model.eval()
    with torch.no_grad():
        r = model(x)
        out[p + ".eval.out"] = sample(r["out"])
        out[p + ".eval.aux"] = sample(r[aux_key])
    model.train()
    r = model(x)
    loss_out = F.cross_entropy(r["out"], target, weight=class_weight, ignore_index=255)
    loss_aux = F.cross_entropy(r[aux_key], target, weight=class_weight, ignore_index=255)
    loss = main_weight * loss_out + aux_weight * loss_aux
    loss.backward()
    out[p + ".train.out"] = sample(r["out"].detach())
    out[p + ".train.aux"] = sample(r[aux_key].detach())
    out[p + ".train.loss_out"] = loss_out.detach().reshape(1)
    out[p + ".train.loss_aux"] = loss_aux.detach().reshape(1)
    out[p + ".train.loss"] = loss.detach().reshape(1)
    sd = model.state_dict()
    for s in stats:
        out[p + ".stat." + s] = sample(sd[s])
    params = dict(model.named_parameters())
    for g in grads:
        grad = params[g].grad
        out[p + ".grad." + g] = sample(grad)
        out[p + ".grad_norm." + g] = grad.norm().reshape(1)
    print(f"{p}: loss {loss.item():.12f} (out {loss_out.item():.12f}, aux {loss_aux.item():.12f})")
    return out


GRADS = [
    "backbone.conv1.weight", "backbone.bn1.weight", "backbone.layer1.0.conv1.weight",
    "backbone.layer2.0.downsample.0.weight", "backbone.layer3.0.conv2.weight",
    "backbone.layer3.5.conv2.weight", "backbone.layer4.0.downsample.0.weight",
    "backbone.layer4.2.conv2.weight", "backbone.layer4.2.bn3.bias",
    "classifier.0.convs.0.0.weight", "classifier.0.convs.1.0.weight",
    "classifier.0.convs.3.0.weight", "classifier.0.convs.4.1.weight",
    "classifier.0.convs.4.2.weight", "classifier.0.project.0.weight", "classifier.1.weight",
    "classifier.2.bias", "classifier.4.weight", "classifier.4.bias",
    "aux_classifier.0.weight", "aux_classifier.1.weight", "aux_classifier.4.weight",
    "aux_classifier.4.bias",
]
STATS = ["backbone.bn1.running_mean", "backbone.layer4.2.bn2.running_var",
         "classifier.0.convs.4.2.running_var", "aux_classifier.1.running_mean"]


def write_golden():
    from torchvision.models.segmentation import deeplabv3_resnet50
    torch.set_num_threads(2)
    model = deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=NUM_CLASSES,
                               aux_loss=True)
    model.classifier[0].project[3].p = 0.0  # the dropouts off: outputs are deterministic
    model.aux_classifier[3].p = 0.0
    model, x, target = formula_model_and_batch(model, INPUT_SHAPE)
    p = "deeplabv3_resnet50"
    out = golden_step(model, x, target, p, "aux", 1.0, AUX_WEIGHT, None, STATS, GRADS)
    path = os.path.join(ROOT, "tests", "data", "golden", "seg_deeplabv3.safetensors")
    save_golden(path, out, "scripts/make_golden_seg.py", "float32", {
        "model": "torchvision deeplabv3_resnet50, 21 classes, aux head, dropout p = 0",
        "input": "formula_input((2, 3, 112, 104)); target (3n + 5y + 7x) mod 21, 255 where "
                 "(x + 2y + n) mod 11 == 0; loss CE(out) + 0.4 CE(aux), ignore_index 255",
    })


def formula_model_and_batch(model, input_shape, num_classes=NUM_CLASSES):
    """The model in float64 with every state_dict entry set by formula_tensor,
    the formula input of `input_shape` and its formula_target."""
    model = model.double()
    with torch.no_grad():
        for name, t in model.state_dict().items():
            t.copy_(formula_tensor(name, t))
    n, _, h, w = input_shape
    return model, formula_input(input_shape).double(), formula_target(n, h, w, num_classes)


def save_golden(path, out, generator, stored_as, metadata):
    """Writes a segmentation golden file (computed in float64, stored as `stored_as`)
    with its generator, torch version and precision in the metadata."""
    save_safetensors(path, out, {
        "generator": generator,
        "torch": torch.__version__,
        "precision": f"float64 computation, stored as {stored_as}",
        **metadata,
    }, getattr(torch, stored_as))
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(out)} tensors)")


def golden_main(write_keys, write_golden):
    """`--keys` writes the parameter key list, otherwise the golden file."""
    if "--keys" in sys.argv:
        write_keys()
    else:
        write_golden()


if __name__ == "__main__":
    golden_main(write_keys, write_golden)
