// Data, namespace tcv::data: image files (decode, encode), datasets
// (ImageFolder, list files, IDX, CIFAR, in-memory), torchvision's transforms,
// EpochSampler and DistributedSampler, and the multi-threaded DataLoader.
// Includes the engine.
#pragma once

#include "data/cifar.h"
#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "data/folder.h"
#include "data/idx.h"
#include "data/image.h"
#include "data/transforms.h"
#include "tcv/engine.h"
