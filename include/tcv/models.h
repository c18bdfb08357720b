// Models, namespace tcv::models: ResNet, VGG and MobileNetV2 with
// torchvision's architectures and parameter names (so converted torchvision
// weights load by name), the Fashion-MNIST models, and the registry by name
// that tcv-train uses. Includes the layers.
#pragma once

#include "models/cls/fmnist.h"
#include "models/cls/mobilenet_v2.h"
#include "models/cls/resnet.h"
#include "models/cls/vgg.h"
#include "models/registry.h"
#include "tcv/nn.h"
