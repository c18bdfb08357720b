// CIFAR-10 and CIFAR-100 in their binary format: records of 1 (CIFAR-10) or 2
// (CIFAR-100: coarse, fine) label bytes followed by 3072 pixel bytes (the red,
// green and blue 32x32 planes).
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"

namespace tcv::data {

enum class CifarKind { cifar10, cifar100 };
/// Which CIFAR-100 label becomes the class: fine (100) or coarse (20).
enum class CifarLabel { fine, coarse };

/// Reads CIFAR binary files (concatenated in order) into u8 (N, 3, 32, 32)
/// images and i64 labels. A file that is missing, empty or not a whole number
/// of records, or holds a label out of range, is an error naming the file.
ImageClassificationDataset read_cifar(const std::vector<std::string>& files, CifarKind kind,
                                      CifarLabel label = CifarLabel::fine);

/// The standard files under `dir` (or its cifar-10-batches-bin / cifar-100-binary
/// sub-directory): CIFAR-10 data_batch_1..5.bin or test_batch.bin; CIFAR-100
/// train.bin or test.bin.
ImageClassificationDataset load_cifar(const std::string& dir, CifarKind kind, bool train,
                                      CifarLabel label = CifarLabel::fine);

/// CIFAR-10's class names, in label order.
const std::vector<std::string>& cifar10_classes();

}  // namespace tcv::data
