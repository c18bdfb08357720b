#!/usr/bin/env python3
"""Reference file for tcv's pspnet_deepbase_resnet50/101: a PyTorch transcription of
TorchCV's PSPNet (donnyyou/torchcv at 5cb5203):

  model/seg/nets/pspnet.py            PSPNet, PPMBilinearDeepsup, _ConvBatchNormReluBlock
  lib/model/base/deepbase_resnet.py   DeepbaseResNet, Bottleneck, deepbase_resnet*_d8
  lib/model/module_helper.py          BNReLU (norm_type "batchnorm": BatchNorm2d + ReLU)
  model/seg/loss/{loss,ce_loss}.py    dsnce_loss = 1.0 ce_loss(out) + 0.4 dsn_ce_loss(dsn_out)
  configs/seg/cityscapes/base_fcn_cityscapes_seg.conf   the loss weights and class weights

The classes below copy TorchCV's, without its configer (the values it reads are
arguments) and without the ImageNet classifier (avgpool, fc) that PSPNet drops. As
TorchCV's HEAD: every bilinear upsampling has align_corners=False (issue 27 says True),
the max-pool is 3x3 / 2, padding 1, floor mode (issue 27 says ceil mode).

  /usr/bin/python3 scripts/make_golden_pspnet_torchcv.py [--keys]

--keys writes tests/data/golden/seg_pspnet_torchcv_keys.json: the state_dict keys and
shapes (in order) and the parameter counts of both models at 19 classes.
The default writes tests/data/golden/seg_pspnet_torchcv.safetensors for
tests/models/test_golden_pspnet_torchcv.cpp: pspnet_deepbase_resnet50 (19 classes,
dropouts at p = 0, every state_dict entry set by formula_tensor of
scripts/make_golden_cls.py under TorchCV's names), input formula_input((2, 3, 63, 54))
(the stem gives 32x27, where a ceil-mode max-pool would give 17 rows instead of 16),
target

  t[n, y, x] = (3n + 5y + 7x) mod 19, 255 (ignored) where (x + 2y + n) mod 11 == 0,

loss = CE_w(out, t) + 0.4 CE_w(dsn_out, t) with TorchCV's 19 Cityscapes class weights
(weighted means, ignore 255 standing for TorchCV's -1). Computed in float64 and STORED
AS FLOAT64 (the test's tolerance is 1e-9 relative): eval-mode outputs, training-mode
outputs, the three losses, sampled running statistics after the step's forward, and
sampled gradients with their L2 norms (sampling as make_golden_seg.py: all elements up
to 6000, else every k-th, k = numel // 1024 + 1).
"""
import os
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden_seg import formula_model_and_batch, golden_main, golden_step, save_golden  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NUM_CLASSES = 19
INPUT_SHAPE = (2, 3, 63, 54)
# base_fcn_cityscapes_seg.conf: loss.loss_weights.dsnce_loss and loss.params.ce_loss.weight
CE_WEIGHT, DSN_WEIGHT = 1.0, 0.4
CLASS_WEIGHTS = [0.8373, 0.9180, 0.8660, 1.0345, 1.0166, 0.9969, 0.9754, 1.0489, 0.8786, 1.0023,
                 0.9539, 0.9843, 1.1116, 0.9037, 1.0865, 1.0955, 1.0865, 1.1529, 1.0507]


# ---------------------------------------------------------------- lib/model/base/deepbase_resnet.py

def conv3x3(in_planes, out_planes, stride=1, groups=1, dilation=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride,
                     padding=dilation, groups=groups, bias=False, dilation=dilation)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1,
                 base_width=64, dilation=1, norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        width = int(planes * (base_width / 64.)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class DeepbaseResNet(nn.Module):
    """TorchCV's DeepbaseResNet without avgpool and fc (PSPNet never uses them; TorchCV
    builds them, so its backbone object has them but PSPNet's state_dict does not)."""

    def __init__(self, block, layers, replace_stride_with_dilation=None):
        super().__init__()
        norm_layer = nn.BatchNorm2d
        self._norm_layer = norm_layer
        self.inplanes = 128
        self.dilation = 1
        if replace_stride_with_dilation is None:
            replace_stride_with_dilation = [False, False, False]
        self.groups = 1
        self.base_width = 64
        self.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=2, padding=1, bias=False)
        self.bn1 = norm_layer(64)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(64, 64, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = norm_layer(64)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv3 = nn.Conv2d(64, self.inplanes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn3 = norm_layer(self.inplanes)
        self.relu3 = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2,
                                       dilate=replace_stride_with_dilation[0])
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2,
                                       dilate=replace_stride_with_dilation[1])
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2,
                                       dilate=replace_stride_with_dilation[2])
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
        norm_layer = self._norm_layer
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       norm_layer(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample, self.groups,
                        self.base_width, previous_dilation, norm_layer)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, groups=self.groups,
                                base_width=self.base_width, dilation=self.dilation,
                                norm_layer=norm_layer))
        return nn.Sequential(*layers)


def deepbase_resnet_d8(depth):
    layers = {50: [3, 4, 6, 3], 101: [3, 4, 23, 3]}[depth]
    return DeepbaseResNet(Bottleneck, layers, replace_stride_with_dilation=[False, True, True])


# ---------------------------------------------------------------- lib/model/module_helper.py

def BNReLU(num_features):  # ModuleHelper.BNReLU(norm_type="batchnorm")
    return nn.Sequential(nn.BatchNorm2d(num_features), nn.ReLU())


# ---------------------------------------------------------------- model/seg/nets/pspnet.py

class _ConvBatchNormReluBlock(nn.Module):
    def __init__(self, inplanes, outplanes, kernel_size, stride, padding=1, dilation=1):
        super().__init__()
        self.conv = nn.Conv2d(in_channels=inplanes, out_channels=outplanes,
                              kernel_size=kernel_size, stride=stride, padding=padding,
                              dilation=dilation, bias=False)
        self.bn_relu = BNReLU(outplanes)

    def forward(self, x):
        return self.bn_relu(self.conv(x))


class PPMBilinearDeepsup(nn.Module):
    def __init__(self, fc_dim=4096):
        super().__init__()
        pool_scales = (1, 2, 3, 6)
        self.ppm = nn.ModuleList([nn.Sequential(nn.AdaptiveAvgPool2d(scale),
                                                nn.Conv2d(fc_dim, 512, kernel_size=1, bias=False),
                                                BNReLU(512)) for scale in pool_scales])

    def forward(self, x):
        input_size = x.size()
        ppm_out = [x]
        for pool_scale in self.ppm:
            ppm_out.append(F.interpolate(pool_scale(x), (input_size[2], input_size[3]),
                                         mode='bilinear', align_corners=False))
        return torch.cat(ppm_out, 1)


class PSPNet(nn.Sequential):
    def __init__(self, num_classes, depth):
        super().__init__()
        self.num_classes = num_classes
        base = deepbase_resnet_d8(depth)
        self.stage1 = nn.Sequential(
            base.conv1, base.bn1, base.relu1, base.conv2, base.bn2, base.relu2, base.conv3, base.bn3,
            base.relu3, base.maxpool, base.layer1, base.layer2, base.layer3)
        self.stage2 = base.layer4
        num_features = 2048
        self.dsn = nn.Sequential(
            _ConvBatchNormReluBlock(num_features // 2, num_features // 4, 3, 1),
            nn.Dropout2d(0.1),
            nn.Conv2d(num_features // 4, self.num_classes, 1, 1, 0))
        self.ppm = PPMBilinearDeepsup(fc_dim=num_features)
        self.cls = nn.Sequential(
            nn.Conv2d(num_features + 4 * 512, 512, kernel_size=3, padding=1, bias=False),
            BNReLU(512),
            nn.Dropout2d(0.1),
            nn.Conv2d(512, self.num_classes, kernel_size=1))

    def forward(self, img):
        x = self.stage1(img)
        aux_x = self.dsn(x)
        x = self.stage2(x)
        x = self.ppm(x)
        x = self.cls(x)
        x_dsn = F.interpolate(aux_x, size=(img.size(2), img.size(3)), mode="bilinear",
                              align_corners=False)
        x = F.interpolate(x, size=(img.size(2), img.size(3)), mode="bilinear",
                          align_corners=False)
        return dict(dsn_out=x_dsn, out=x)


# ---------------------------------------------------------------- counts

def write_keys():
    out = {"generator": "scripts/make_golden_pspnet_torchcv.py --keys", "torch": torch.__version__,
           "num_classes": NUM_CLASSES, "models": {}}
    for depth in (50, 101):
        m = PSPNet(NUM_CLASSES, depth)
        n = sum(p.numel() for p in m.parameters())
        name = f"pspnet_deepbase_resnet{depth}"
        out["models"][name] = {"parameters": n,
                               "state_dict": [[k, list(t.shape)] for k, t in m.state_dict().items()]}
        print(f"{name}: {n:,} parameters, {len(m.state_dict())} state_dict entries "
              f"({NUM_CLASSES} classes)")
    path = os.path.join(ROOT, "tests", "data", "golden", "seg_pspnet_torchcv_keys.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


# ---------------------------------------------------------------- golden run

GRADS = [
    "stage1.0.weight", "stage1.1.weight", "stage1.3.weight", "stage1.6.weight", "stage1.7.bias",
    "stage1.10.0.conv1.weight", "stage1.10.0.downsample.0.weight",
    "stage1.11.0.downsample.0.weight", "stage1.12.0.conv2.weight", "stage1.12.5.conv2.weight",
    "stage2.0.downsample.0.weight", "stage2.2.conv2.weight", "stage2.2.bn3.bias",
    "dsn.0.conv.weight", "dsn.0.bn_relu.0.weight", "dsn.2.weight", "dsn.2.bias",
    "ppm.ppm.0.1.weight", "ppm.ppm.0.2.0.weight", "ppm.ppm.3.1.weight", "ppm.ppm.3.2.0.bias",
    "cls.0.weight", "cls.1.0.weight", "cls.3.weight", "cls.3.bias",
]
STATS = ["stage1.1.running_mean", "stage1.7.running_var", "stage1.12.5.bn2.running_var",
         "stage2.2.bn2.running_var", "dsn.0.bn_relu.0.running_mean", "ppm.ppm.0.2.0.running_var",
         "ppm.ppm.3.2.0.running_mean", "cls.1.0.running_var"]


def write_golden():
    torch.set_num_threads(2)
    model = PSPNet(NUM_CLASSES, 50)
    model.dsn[1].p = 0.0  # the dropouts off: outputs are deterministic
    model.cls[2].p = 0.0
    model, x, target = formula_model_and_batch(model, INPUT_SHAPE, NUM_CLASSES)
    cw = torch.tensor(CLASS_WEIGHTS, dtype=torch.float64)
    p = "pspnet_deepbase_resnet50"
    out = golden_step(model, x, target, p, "dsn_out", CE_WEIGHT, DSN_WEIGHT, cw, STATS, GRADS)
    path = os.path.join(ROOT, "tests", "data", "golden", "seg_pspnet_torchcv.safetensors")
    save_golden(path, out, "scripts/make_golden_pspnet_torchcv.py", "float64", {
        "model": "TorchCV PSPNet on deepbase_resnet50_d8 (5cb5203), 19 classes, dropout p = 0",
        "input": "formula_input((2, 3, 63, 54)); target (3n + 5y + 7x) mod 19, 255 where "
                 "(x + 2y + n) mod 11 == 0; loss CE_w(out) + 0.4 CE_w(dsn_out), TorchCV's "
                 "Cityscapes class weights, ignore_index 255",
    })


if __name__ == "__main__":
    golden_main(write_keys, write_golden)
