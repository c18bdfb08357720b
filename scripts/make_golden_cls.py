#!/usr/bin/env python3
"""Writes tests/data/golden/cls_models.safetensors: forward outputs and parameter
gradients of ResNet-18 (CIFAR stem) and MobileNetV2 computed by PyTorch, for
tests/models/test_golden.cpp (which needs no PyTorch).

Needs only torch (Debian's python3-torch, 1.13); the models are written here with
torchvision's structure and parameter names, so torchvision is not needed.
Weights and inputs come from closed-form formulas that the C++ test repeats:

  seed(name)  = sum((j + 1) * ord(c) for j, c in enumerate(name)) % 1009
  u(i, seed)  = fmix32((i * 0x9E3779B1 + seed * 0x7F4A7C15 + 1) mod 2^32) / 2^32, in [0, 1)
                (murmur3's finalizer, so tensors look random: a sinusoid in i would
                make every output channel a mix of the same two patterns and the
                training-mode network ill-conditioned)
  r           = 2 * u(i, seed(name)) - 1, in [-1, 1); i = flat (row-major) element index
  conv/linear weight (dim >= 2): sqrt(6 / fan_in) * r, fan_in = numel / size(0)
  BN weight (1-d "weight"):      1 + 0.2 * r
  bias (1-d "bias"):             0.1 * r
  running_mean:                  0.1 * r
  running_var:                   1 + 0.5 * r
  num_batches_tracked:           0
  input x[i]:                    2 * u(i, 7) - 1
  target[n]:                     (3 * n + 1) % num_classes
  (computed in float64, then rounded to float32)

PyTorch computes in float64 on those float32 values (the golden numbers are its
float64 results rounded to float32), so they are the reference that tcv's f32
and f64 runs are both checked against.

For each model: eval-mode logits with those weights; then, in training mode
(batch statistics), the logits, the mean cross-entropy loss, the running
statistics after that forward and the gradients of selected parameters (whole
when small, else every k-th element with k = numel // 1024 + 1, plus the L2
norm of the whole gradient).

Run: /usr/bin/python3 scripts/make_golden_cls.py [--check-counts]
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_common import formula_weights, uniform, write_safetensors  # noqa: E402


# ---------------------------------------------------------------- models
# Structures and names as torchvision 0.14 (torchvision/models/{resnet,vgg,mobilenetv2}.py).

def conv3x3(i, o, stride=1, groups=1, dilation=1):
    return nn.Conv2d(i, o, 3, stride=stride, padding=dilation, groups=groups, bias=False,
                     dilation=dilation)


def conv1x1(i, o, stride=1):
    return nn.Conv2d(i, o, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64,
                 dilation=1):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride, 1, dilation)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes, 1, 1, dilation)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = self.downsample(x) if self.downsample is not None else x
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64,
                 dilation=1):
        super().__init__()
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = self.downsample(x) if self.downsample is not None else x
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=1000, cifar=False):
        super().__init__()
        self.inplanes, self.dilation = 64, 1
        if cifar:
            self.conv1 = nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False)
        else:
            self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = None if cifar else nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], 2)
        self.layer3 = self._make_layer(block, 256, layers[2], 2)
        self.layer4 = self._make_layer(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        if self.maxpool is not None:
            x = self.maxpool(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


VGG_CFGS = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512,
          512, 512, "M"],
}


class VGG(nn.Module):
    def __init__(self, cfg, batch_norm=False, num_classes=1000):
        super().__init__()
        layers, c = [], 3
        for v in VGG_CFGS[cfg]:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers.append(nn.Conv2d(c, v, 3, padding=1))
                if batch_norm:
                    layers.append(nn.BatchNorm2d(v))
                layers.append(nn.ReLU(inplace=True))
                c = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(),
                                        nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(),
                                        nn.Linear(4096, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def make_divisible(v, divisor, min_value=None):
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvBNReLU6(nn.Sequential):
    def __init__(self, i, o, kernel_size=3, stride=1, groups=1):
        super().__init__(nn.Conv2d(i, o, kernel_size, stride, (kernel_size - 1) // 2,
                                   groups=groups, bias=False),
                         nn.BatchNorm2d(o), nn.ReLU6(inplace=True))


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, expand_ratio):
        super().__init__()
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(ConvBNReLU6(inp, hidden_dim, kernel_size=1))
        layers += [ConvBNReLU6(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim),
                   nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False), nn.BatchNorm2d(oup)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes=1000, dropout=0.2):
        super().__init__()
        setting = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2], [6, 96, 3, 1],
                   [6, 160, 3, 2], [6, 320, 1, 1]]
        input_channel, self.last_channel = 32, 1280
        features = [ConvBNReLU6(3, input_channel, stride=2)]
        for t, c, n, s in setting:
            for i in range(n):
                features.append(InvertedResidual(input_channel, c, s if i == 0 else 1, t))
                input_channel = c
        features.append(ConvBNReLU6(input_channel, self.last_channel, kernel_size=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout),
                                        nn.Linear(self.last_channel, num_classes))

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


# ---------------------------------------------------------------- formulas



def formula_tensor(name, t):
    return torch.from_numpy(formula_weights(name, t.shape))


def formula_input(shape):
    v = 2.0 * uniform(int(np.prod(shape)), 7) - 1.0
    return torch.from_numpy(v.astype(np.float32)).reshape(shape)


def sample(t):
    flat = t.reshape(-1)
    if flat.numel() <= 6000:
        return flat.clone()
    return flat[:: flat.numel() // 1024 + 1].clone()


# ---------------------------------------------------------------- golden

def golden(prefix, model, input_shape, num_classes, grads, stats):
    out = {}
    # f32 formula values, computed in f64: f32 results of a deep network in training
    # mode can sit on either side of a ReLU kink wherever a pre-activation is within
    # f32 noise of it, and one such gate moves early-layer gradients by ~1e-3.
    model = model.double()
    with torch.no_grad():
        for name, t in model.state_dict().items():
            t.copy_(formula_tensor(name, t))
    x = formula_input(input_shape).double()
    target = torch.tensor([(3 * n + 1) % num_classes for n in range(input_shape[0])])
    out[prefix + ".input_sample"] = x.reshape(-1)[::97].clone()
    model.eval()
    with torch.no_grad():
        out[prefix + ".eval.logits"] = model(x)
    model.train()
    logits = model(x)
    loss = F.cross_entropy(logits, target)
    loss.backward()
    out[prefix + ".train.logits"] = logits.detach()
    out[prefix + ".train.loss"] = loss.detach().reshape(1)
    sd = model.state_dict()
    for s in stats:
        out[prefix + ".stat." + s] = sd[s].clone()
    params = dict(model.named_parameters())
    for g in grads:
        grad = params[g].grad
        out[prefix + ".grad." + g] = sample(grad)
        out[prefix + ".grad_norm." + g] = grad.double().norm().float().reshape(1)
    print(f"{prefix}: loss {loss.item():.6f}, eval logits {out[prefix + '.eval.logits'][0, :4]}")
    return out


def save_safetensors(path, tensors, metadata, dtype=torch.float32):
    """Writes `tensors` (name -> torch tensor, stored as `dtype`: float32 or float64)."""
    write_safetensors(path, {n: t.detach().to(dtype).numpy() for n, t in tensors.items()}, metadata)


def count(m):
    return sum(p.numel() for p in m.parameters())


def check_counts():
    for name, m in [("resnet18", ResNet(BasicBlock, [2, 2, 2, 2])),
                    ("resnet34", ResNet(BasicBlock, [3, 4, 6, 3])),
                    ("resnet50", ResNet(Bottleneck, [3, 4, 6, 3])),
                    ("resnet101", ResNet(Bottleneck, [3, 4, 23, 3])),
                    ("resnet18_cifar10", ResNet(BasicBlock, [2, 2, 2, 2], 10, cifar=True)),
                    ("resnet50_cifar10", ResNet(Bottleneck, [3, 4, 6, 3], 10, cifar=True)),
                    ("mobilenet_v2", MobileNetV2()), ("mobilenet_v2_10", MobileNetV2(10))]:
        sd = m.state_dict()
        print(name, count(m), len(sd), list(sd)[-3:])
    for cfg in "ABDE":
        for bn in (False, True):
            m = VGG(cfg, bn)
            print("vgg", cfg, bn, count(m), len(m.state_dict()), list(m.state_dict())[-8:-6])
            del m


def main():
    torch.set_num_threads(2)
    if "--check-counts" in sys.argv:
        check_counts()
        return
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    tensors = {}
    tensors.update(golden(
        "resnet18_cifar", ResNet(BasicBlock, [2, 2, 2, 2], 10, cifar=True), (2, 3, 32, 32), 10,
        ["conv1.weight", "bn1.weight", "bn1.bias", "layer1.0.conv1.weight",
         "layer2.0.downsample.0.weight", "layer3.1.bn1.bias", "layer4.1.conv2.weight",
         "layer4.1.bn2.weight", "fc.weight", "fc.bias"],
        ["bn1.running_mean", "bn1.running_var", "layer4.1.bn2.running_var"]))
    tensors.update(golden(
        "mobilenet_v2", MobileNetV2(10, dropout=0.0), (4, 3, 96, 96), 10,
        ["features.0.0.weight", "features.0.1.weight", "features.1.conv.0.0.weight",
         "features.2.conv.0.0.weight", "features.10.conv.1.1.bias", "features.17.conv.2.weight",
         "features.18.0.weight", "features.18.1.bias", "classifier.1.weight",
         "classifier.1.bias"],
        ["features.0.1.running_var", "features.17.conv.3.running_mean"]))
    path = os.path.join(root, "tests", "data", "golden", "cls_models.safetensors")
    save_safetensors(path, tensors, {
        "generator": "scripts/make_golden_cls.py",
        "torch": torch.__version__,
        "precision": "float64 computation, stored as float32",
        "resnet18_cifar": "ResNet-18, CIFAR stem, 10 classes, input (2, 3, 32, 32)",
        "mobilenet_v2": "MobileNetV2, 10 classes, dropout 0, input (4, 3, 96, 96)",
    })
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(tensors)} tensors)")


if __name__ == "__main__":
    main()
