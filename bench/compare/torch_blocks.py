"""PyTorch building blocks the comparison scripts mirror from tcv's models."""
import torch.nn as nn


class BasicBlock(nn.Module):
    """torchvision's ResNet basic block. Without an explicit `downsample`, a
    1x1 conv + BN shortcut is made when the stride or the width changes."""
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        if downsample is None and (stride != 1 or inplanes != planes):
            downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                       nn.BatchNorm2d(planes))
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


def conv_bn_relu6(cin, cout, kernel=3, stride=1, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups,
                                   bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6(inplace=True))


class InvertedResidual(nn.Module):
    """torchvision's MobileNetV2 block: 1x1 expand, 3x3 depthwise, 1x1 project."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.residual = stride == 1 and cin == cout
        layers = [conv_bn_relu6(cin, hidden, 1)] if expand != 1 else []
        layers += [conv_bn_relu6(hidden, hidden, 3, stride, hidden),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.residual else self.conv(x)


class MobileNetV2(nn.Module):
    """torchvision.models.mobilenet_v2 (width 1.0), as tcv's mobilenet_v2."""

    def __init__(self, num_classes=10, in_channels=3):
        super().__init__()
        layers = [conv_bn_relu6(in_channels, 32, 3, 2)]
        cin = 32
        for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                           (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(conv_bn_relu6(cin, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1).flatten(1)
        return self.classifier(x)
