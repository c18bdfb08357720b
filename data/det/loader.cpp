#include "data/det/loader.h"

namespace tcv::data {

DetBatch collate_det(SampleSource<DetSample>& samples, const Normalize& norm,
                     const std::string& name) {
  ImageStack images(norm, samples.capacity(), name);
  DetBatch batch;
  for (DetSample s; samples.next(s);) {
    images.add(s.image, s.index);
    const DetTarget& t = s.target;
    const int64_t m = t.size();
    Tensor boxes = empty({m, 4});  // (n_i, 4)
    Tensor labels = empty({m}, {.dtype = DType::i64});
    Tensor difficult = empty({m}, {.dtype = DType::u8});
    Tensor iscrowd = empty({m}, {.dtype = DType::u8});
    const auto fw = static_cast<double>(images.width()), fh = static_cast<double>(images.height());
    for (int64_t k = 0; k < m; ++k) {
      const Box& bx = t.boxes[static_cast<size_t>(k)];
      float* bp = boxes.data<float>() + 4 * k;
      bp[0] = static_cast<float>(bx[0] / fw);
      bp[1] = static_cast<float>(bx[1] / fh);
      bp[2] = static_cast<float>(bx[2] / fw);
      bp[3] = static_cast<float>(bx[3] / fh);
      labels.data<int64_t>()[k] = t.labels[static_cast<size_t>(k)];
      difficult.data<uint8_t>()[k] = t.difficult[static_cast<size_t>(k)];
      iscrowd.data<uint8_t>()[k] = t.iscrowd[static_cast<size_t>(k)];
    }
    batch.boxes.push_back(boxes);
    batch.labels.push_back(labels);
    batch.difficult.push_back(difficult);
    batch.iscrowd.push_back(iscrowd);
    batch.indices.push_back(s.index);
    batch.image_ids.push_back(s.image_id);
    batch.sizes.push_back({s.orig_height, s.orig_width});
  }
  batch.images = images.take();
  return batch;
}

void DetBatch::pin_memory() {
  if (images.numel() > 0) images = images.pin_memory();
}

DetDataLoader::DetDataLoader(std::shared_ptr<const DetDataset> dataset, DetTransform transform,
                             LoaderOptions opts)
    : SampleLoader(dataset, std::move(transform), opts,
                   {"DetDataLoader", 0xD1B54A32D192ED03ull,
                    [norm = opts.normalize, name = dataset->name()](SampleSource<DetSample>& s) {
                      return collate_det(s, norm, name);
                    }}) {
  ImageStack::check(options().normalize);
}

}  // namespace tcv::data
