#include "data/cifar.h"

#include <cstring>
#include <filesystem>
#include <fstream>

namespace tcv::data {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kPixels = 3 * 32 * 32;

}  // namespace

ImageClassificationDataset read_cifar(const std::vector<std::string>& files, CifarKind kind,
                                      CifarLabel label) {
  TCV_CHECK(!files.empty(), "[read_cifar] no files given");
  const int64_t label_bytes = kind == CifarKind::cifar10 ? 1 : 2;
  const int64_t record = label_bytes + kPixels;
  const int64_t classes = kind == CifarKind::cifar10 ? 10 : (label == CifarLabel::fine ? 100 : 20);
  const int64_t which = kind == CifarKind::cifar100 && label == CifarLabel::fine ? 1 : 0;
  std::vector<std::string> bytes(files.size());
  int64_t n = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    std::error_code ec;
    TCV_CHECK(fs::is_regular_file(files[f], ec), files[f], ": CIFAR file not found");
    std::ifstream in(files[f], std::ios::binary);
    TCV_CHECK(in.good(), files[f], ": cannot open CIFAR file");
    bytes[f].assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    TCV_CHECK(!in.bad(), files[f], ": read error");
    const auto size = static_cast<int64_t>(bytes[f].size());
    TCV_CHECK(size > 0 && size % record == 0, files[f], ": ", size,
              " bytes is not a whole number of ", record, "-byte ",
              kind == CifarKind::cifar10 ? "CIFAR-10" : "CIFAR-100",
              " records (truncated, or the other CIFAR format?)");
    n += size / record;
  }
  Tensor images = empty({n, 3, 32, 32}, {.dtype = DType::u8});  // (N, 3, 32, 32)
  Tensor labels = empty({n}, {.dtype = DType::i64});            // (N)
  uint8_t* px = images.data<uint8_t>();
  int64_t* y = labels.data<int64_t>();
  int64_t i = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    const auto* b = reinterpret_cast<const uint8_t*>(bytes[f].data());
    const int64_t records = static_cast<int64_t>(bytes[f].size()) / record;
    for (int64_t r = 0; r < records; ++r, ++i) {
      const uint8_t* rec = b + r * record;
      y[i] = rec[which];
      TCV_CHECK(y[i] < classes, files[f], ": record ", r, " has label ", y[i], ", outside [0, ",
                classes, ")");
      std::memcpy(px + i * kPixels, rec + label_bytes, kPixels);
    }
  }
  return ImageClassificationDataset(images, labels, classes, files.front());
}

ImageClassificationDataset load_cifar(const std::string& dir, CifarKind kind, bool train,
                                      CifarLabel label) {
  const bool ten = kind == CifarKind::cifar10;
  std::vector<std::string> names;
  if (ten && train)
    for (int k = 1; k <= 5; ++k) names.push_back("data_batch_" + std::to_string(k) + ".bin");
  else if (ten)
    names.push_back("test_batch.bin");
  else
    names.push_back(train ? "train.bin" : "test.bin");
  fs::path base(dir);
  const fs::path sub = base / (ten ? "cifar-10-batches-bin" : "cifar-100-binary");
  std::error_code ec;
  if (!fs::exists(base / names[0], ec) && fs::exists(sub / names[0], ec)) base = sub;
  std::vector<std::string> files;
  for (const auto& nm : names) {
    const fs::path p = base / nm;
    TCV_CHECK(fs::exists(p, ec), dir, ": no ", nm, " here or under ", sub.filename().string());
    files.push_back(p.string());
  }
  return read_cifar(files, kind, label);
}

const std::vector<std::string>& cifar10_classes() {
  static const std::vector<std::string> names = {
      "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
  return names;
}

}  // namespace tcv::data
