// The measurements behind tcv-bench, header-only so that the CLI test compiles
// the same code: whole training steps on synthetic data, and decode+augment
// throughput of the DataLoader on generated JPEGs.
#pragma once

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "apps/cli.h"
#include "data/dataset.h"
#include "data/folder.h"
#include "data/image.h"
#include "data/transforms.h"
#include "engine/allocator.h"
#include "engine/autocast.h"
#include "engine/cuda.h"
#include "engine/device.h"
#include "engine/json.h"
#include "engine/ops.h"
#include "engine/profiler.h"
#include "engine/rng.h"
#include "models/det/multibox_loss.h"
#include "models/det/ssd.h"
#include "models/pose/openpose.h"
#include "models/registry.h"
#include "models/seg/loss.h"
#include "models/seg/segmentation.h"
#include "train/grad_scaler.h"
#include "train/optim.h"

namespace tcv::bench {

using apps::UsageError;

/// Peak resident set size of this process (VmHWM in /proc/self/status), in bytes; 0 if unknown.
inline int64_t peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;  // kB
  }
  return 0;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

using apps::parse_int;

/// Walks "--flag value" / "--flag=value" arguments; `on(flag, value)` handles one.
template <typename Handler>
void parse_flags(const std::vector<std::string>& args, const std::vector<std::string>& with_value,
                 const std::vector<std::string>& switches, Handler on) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (std::find(switches.begin(), switches.end(), a) != switches.end()) {
      on(a, std::string());
      continue;
    }
    bool matched = false;
    for (const auto& flag : with_value) {
      if (a == flag) {
        if (i + 1 >= args.size()) throw UsageError{flag + " needs a value"};
        on(flag, args[++i]);
        matched = true;
      } else if (a.rfind(flag + "=", 0) == 0) {
        on(flag, a.substr(flag.size() + 1));
        matched = true;
      }
      if (matched) break;
    }
    if (!matched) throw UsageError{"unknown argument '" + a + "'"};
  }
}

// ---- tcv-bench train -----------------------------------------------------------

struct TrainBenchOptions {
  std::string model;
  int64_t batch = 64;
  int64_t image_size = 32;
  int64_t channels = 3;
  int64_t classes = 10;
  int64_t steps = 20;
  int64_t warmup = 5;
  std::string device = "cpu";
  std::string dtype = "f32";
  /// CPU f32 convolutions: auto | direct | winograd (kernels/cpu/conv.h); empty
  /// keeps TCV_CONV_ALGO's choice (auto when unset).
  std::string conv_algo;
  bool json = false;
  /// After the timed steps, this many more with the kernel profiler on
  /// (engine/profiler.h); 0 = none.
  int64_t profile_steps = 0;
};

struct TrainBenchResult {
  int64_t parameters = 0;
  double ms_per_step = 0.0;     ///< median over the timed steps
  double images_per_sec = 0.0;  ///< batch / median step time
  int64_t peak_rss = 0;         ///< VmHWM, bytes
  int64_t allocator_peak = 0;   ///< CpuAllocator peak_allocated, bytes
  int64_t allocator_reserved = 0;
  double final_loss = 0.0;
  /// What the model predicts: "K classes", or an OpenPose model's
  /// "H heatmaps + P PAFs" (it has no classes; --classes does not apply).
  std::string outputs;
  int64_t heatmaps = 0, pafs = 0;      ///< OpenPose models only
  std::vector<profiler::Row> profile;  ///< totals over opts.profile_steps steps
};

inline TrainBenchOptions parse_train_args(const std::vector<std::string>& args) {
  TrainBenchOptions o;
  parse_flags(args,
              {"--model", "--batch", "--image-size", "--channels", "--classes", "--steps",
               "--warmup", "--device", "--dtype", "--conv-algo", "--profile-steps"},
              {"--json", "--profile"}, [&](const std::string& flag, const std::string& v) {
                if (flag == "--json")
                  o.json = true;
                else if (flag == "--profile")
                  o.profile_steps = std::max<int64_t>(o.profile_steps, 3);
                else if (flag == "--profile-steps")
                  o.profile_steps = parse_int(flag, v, 1);
                else if (flag == "--model")
                  o.model = v;
                else if (flag == "--batch")
                  o.batch = parse_int(flag, v, 1);
                else if (flag == "--image-size")
                  o.image_size = parse_int(flag, v, 1);
                else if (flag == "--channels")
                  o.channels = parse_int(flag, v, 1);
                else if (flag == "--classes")
                  o.classes = parse_int(flag, v, 1);
                else if (flag == "--steps")
                  o.steps = parse_int(flag, v, 1);
                else if (flag == "--warmup")
                  o.warmup = parse_int(flag, v, 0);
                else if (flag == "--device")
                  o.device = v;
                else if (flag == "--dtype")
                  o.dtype = v;
                else if (flag == "--conv-algo")
                  o.conv_algo = v;
              });
  if (o.model.empty())
    throw UsageError{"train: --model NAME is required (tcv-train --list-models)"};
  if (o.device != "cpu" && o.device.rfind("cuda", 0) != 0)
    throw UsageError{"--device must be cpu, cuda or cuda:N, got '" + o.device + "'"};
  if (o.dtype != "f32" && o.dtype != "bf16" && o.dtype != "f16")
    throw UsageError{"--dtype must be f32, bf16 or f16, got '" + o.dtype + "'"};
  if (!o.conv_algo.empty() && o.conv_algo != "auto" && o.conv_algo != "direct" &&
      o.conv_algo != "winograd")
    throw UsageError{"--conv-algo must be auto, direct or winograd, got '" + o.conv_algo + "'"};
  if (o.device == "cpu" && o.dtype != "f32") {
    DType dt = DType::bf16;
    autocast::parse_mode(o.dtype, dt);
    if (!autocast::supported(kCPU, dt))
      throw Error("[tcv-bench train] --dtype " + o.dtype + ": " +
                  autocast::unsupported_reason(kCPU, dt));
  }
  if (o.device != "cpu") {
    const Device d = Device::parse(o.device);
    if (!cuda_ops_supported())
      throw Error("[tcv-bench train] --device " + o.device +
                  ": this build of tcv has no CUDA (built without nvcc)");
    if (d.index >= cuda_device_count())
      throw Error("[tcv-bench train] --device " + o.device + ": " +
                  std::to_string(cuda_device_count()) + " CUDA device(s) visible");
  }
  return o;
}

/// Synthetic detection targets: image b of the batch holds 1 + b % 4 boxes of
/// 10% to 50% of the image side, labels 1 .. classes − 1, in pixels (seeded).
inline std::vector<models::det::DetTarget> synthetic_boxes(int64_t batch, int64_t size,
                                                           int64_t classes, Device device) {
  Generator g(7);
  std::vector<models::det::DetTarget> t;
  const double s = static_cast<double>(size);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = 1 + b % 4;
    const Tensor wh = uniform({n, 2}, 0.1 * s, 0.5 * s, {}, &g);
    const Tensor xy = ops::mul(rand({n, 2}, {}, &g), ops::sub(full({1, 2}, s), wh));
    t.push_back(
        {ops::cat({xy, ops::add(xy, wh)}, 1).to(device),
         randint(1, std::max<int64_t>(classes, 2), {n}, {.dtype = DType::i64}, &g).to(device)});
  }
  return t;
}

/// Times whole SGD steps (forward, loss, backward, SGD momentum 0.9) on one
/// synthetic batch, after `warmup` untimed steps. The loss is cross-entropy
/// for classifiers, the MultiBox loss against synthetic boxes for SSD, and for
/// a segmentation model (models/seg) on (B, S, S) masks its own loss,
/// cross-entropy (ignore 255) on the main output plus 0.4 times that of the
/// auxiliary one. An OpenPose model (models/pose) trains with its staged masked
/// L2 loss against synthetic targets at stride 8: heatmaps uniform in [0, 1),
/// PAFs uniform in [-1, 1), a (B, 1, S/8, S/8) mask with 5% of its pixels 0,
/// and SGD at a learning rate of 1e-5.
inline TrainBenchResult run_train_bench(const TrainBenchOptions& o) {
  models::register_builtin_models();
  const Device device = Device::parse(o.device);
  const bool gpu = device.is_cuda();
  if (!o.conv_algo.empty()) ops::set_conv_algo(ops::parse_conv_algo(o.conv_algo, "--conv-algo"));
  CpuAllocator::instance().reset_peak();
  manual_seed(0);
  auto model = models::create_model(o.model, {.num_classes = o.classes, .in_channels = o.channels});
  model->to(device);
  model->train();
  TrainBenchResult r;
  for (const auto& [name, p] : model->named_parameters()) r.parameters += p.numel();
  // A segmentation model trains on masks with its own loss (CE(out) + 0.4·CE(aux)).
  auto seg = std::dynamic_pointer_cast<models::seg::SegmentationModel>(model);
  // (B, C, S, S) and (B) labels or (B, S, S) masks with 5% of the pixels 255
  // (ignored), made on the CPU (same numbers on every device) and moved.
  Tensor x = randn({o.batch, o.channels, o.image_size, o.image_size}).to(device);
  Tensor y;
  if (seg) {
    y = randint(0, o.classes, {o.batch, o.image_size, o.image_size});
    y = ops::masked_fill(y, ops::lt(rand({o.batch, o.image_size, o.image_size}), 0.05), 255)
            .to(device);
  } else {
    y = randint(0, o.classes, {o.batch}).to(device);
  }
  auto* ssd = dynamic_cast<models::det::SSD*>(model.get());
  std::vector<models::det::DetTarget> boxes;
  Tensor anchors;
  if (ssd) {
    boxes = synthetic_boxes(o.batch, o.image_size, o.classes, device);
    anchors = ssd->default_boxes(o.image_size, o.image_size, device);
  }
  auto* pose = dynamic_cast<models::pose::OpenPose*>(model.get());
  if (pose) {
    r.heatmaps = pose->options.heatmap_channels;
    r.pafs = pose->options.paf_channels;
    r.outputs = std::to_string(r.heatmaps) + " heatmaps + " + std::to_string(r.pafs) + " PAFs";
  } else {
    r.outputs = std::to_string(o.classes) + " classes";
  }
  // OpenPose's loss is a sum over every output value (about 10^5 per image):
  // a learning rate of 1e-5 keeps its steps finite.
  train::SGD opt(model->named_parameters(), {.lr = pose ? 1e-5 : 0.01, .momentum = 0.9});
  Tensor paf_target, heatmap_target, pose_mask;
  if (pose) {
    const int64_t h = o.image_size / models::pose::OpenPose::stride;
    TCV_CHECK(h >= 1, "[tcv-bench train] ", o.model, " needs --image-size of at least ",
              models::pose::OpenPose::stride, ", got ", o.image_size);
    heatmap_target = rand({o.batch, pose->options.heatmap_channels, h, h}).to(device);
    paf_target =
        ops::add(ops::mul(rand({o.batch, pose->options.paf_channels, h, h}), 2.0), -1.0).to(device);
    pose_mask = ops::gt(rand({o.batch, 1, h, h}), 0.05).to(DType::f32).to(device);
  }
  DType amp_dtype = DType::bf16;
  const bool amp = autocast::parse_mode(o.dtype == "f32" ? "off" : o.dtype, amp_dtype);
  std::unique_ptr<train::GradScaler> scaler;
  if (amp && amp_dtype == DType::f16) scaler = std::make_unique<train::GradScaler>();
  auto step = [&] {
    opt.zero_grad();
    Tensor loss;
    {
      autocast::Guard guard(amp, amp_dtype);
      if (seg) {
        models::seg::SegOutput out = seg->forward_seg(x);
        out.out = autocast::to_f32(out.out);
        if (out.aux.defined()) out.aux = autocast::to_f32(out.aux);
        loss = models::seg::seg_loss(out, y).total;
      } else if (pose) {
        models::pose::PoseOutput out = pose->forward_stages(x);
        for (Tensor& t : out.pafs) t = autocast::to_f32(t);
        for (Tensor& t : out.heatmaps) t = autocast::to_f32(t);
        loss = models::pose::openpose_loss(out, paf_target, heatmap_target, pose_mask).total;
      } else if (ssd) {
        const models::det::SsdOutput out = ssd->forward_heads(x);
        loss = models::det::multibox_loss(autocast::to_f32(out.loc), autocast::to_f32(out.conf),
                                          anchors, boxes)
                   .total();
      } else {
        loss = ops::cross_entropy(autocast::to_f32((*model)(x)), y);
      }
    }
    if (scaler) {
      scaler->scale(loss).backward();
      scaler->step(opt);
    } else {
      loss.backward();
      opt.step();
    }
    // The step is done when its last kernel is: wait for the GPU.
    if (gpu) cuda::stream_synchronize(nullptr);
    return loss;
  };
  for (int64_t i = 0; i < o.warmup; ++i) step();
  if (gpu) cuda::reset_peak_memory(device.index);
  std::vector<double> ms;
  Tensor loss;
  for (int64_t i = 0; i < o.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    loss = step();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  r.final_loss = loss.item();
  r.ms_per_step = median(ms);
  if (o.profile_steps > 0) {
    profiler::take();  // drop anything recorded before
    profiler::set_enabled(true);
    for (int64_t i = 0; i < o.profile_steps; ++i) step();
    profiler::set_enabled(false);
    r.profile = profiler::take();
  }
  r.images_per_sec = r.ms_per_step > 0 ? 1000.0 * static_cast<double>(o.batch) / r.ms_per_step : 0;
  if (gpu) {
    const auto st = cuda::memory_stats(device.index);
    r.allocator_peak = st.peak_allocated;
    r.allocator_reserved = st.peak_reserved;
  } else {
    const MemoryStats st = CpuAllocator::instance().stats();
    r.allocator_peak = st.peak_allocated;
    r.allocator_reserved = st.reserved;
  }
  r.peak_rss = peak_rss_bytes();
  return r;
}

inline Json train_result_json(const TrainBenchOptions& o, const TrainBenchResult& r) {
  Json j = Json::object();
  j["bench"] = "train";
  j["impl"] = "tcv";
  j["model"] = o.model;
  j["loss"] = o.model.rfind("ssd", 0) == 0        ? "multibox"
              : o.model.rfind("openpose", 0) == 0 ? "openpose_masked_l2"
                                                  : "cross_entropy";
  j["device"] = o.device;
  j["dtype"] = o.dtype;
  j["conv_algo"] = ops::conv_algo_name(ops::get_conv_algo());
  j["batch"] = o.batch;
  j["image_size"] = o.image_size;
  j["channels"] = o.channels;
  if (r.heatmaps > 0) {
    j["heatmaps"] = r.heatmaps;
    j["pafs"] = r.pafs;
  } else {
    j["classes"] = o.classes;
  }
  j["steps"] = o.steps;
  j["warmup"] = o.warmup;
  j["threads"] = omp_get_max_threads();
  j["parameters"] = r.parameters;
  j["images_per_sec"] = r.images_per_sec;
  j["ms_per_step"] = r.ms_per_step;
  j["peak_rss_bytes"] = r.peak_rss;
  j["allocator_peak_bytes"] = r.allocator_peak;
  j["allocator_reserved_bytes"] = r.allocator_reserved;
  j["final_loss"] = r.final_loss;
  if (o.profile_steps > 0) {
    Json rows = Json::array();
    const double n = static_cast<double>(o.profile_steps);
    for (const profiler::Row& row : r.profile) {
      Json e = Json::object();
      e["kernel"] = row.name;
      e["device"] = row.device;
      e["calls_per_step"] = static_cast<double>(row.calls) / n;
      e["ms_per_step"] = row.total_ms / n;
      rows.push_back(e);
    }
    j["profile_steps"] = o.profile_steps;
    j["profile"] = rows;
  }
  return j;
}

// ---- tcv-bench data ------------------------------------------------------------

struct DataBenchOptions {
  int64_t images = 500;
  int64_t size = 256;  ///< generated images are size x size
  int64_t crop = 224;  ///< RandomResizedCrop output
  int64_t batch = 32;
  std::vector<int> workers{0, 1, 2};
  int64_t epochs = 1;  ///< timed epochs per worker count (the best one is reported)
  std::string dir;     ///< where the JPEGs go (kept); empty: a temp dir, removed after
  bool json = false;
};

struct DataBenchRun {
  int workers = 0;
  double images_per_sec = 0.0;
  double seconds = 0.0;
  int64_t images = 0;
};

inline DataBenchOptions parse_data_args(const std::vector<std::string>& args) {
  DataBenchOptions o;
  parse_flags(args, {"--images", "--size", "--crop", "--batch", "--workers", "--epochs", "--dir"},
              {"--json"}, [&](const std::string& flag, const std::string& v) {
                if (flag == "--json")
                  o.json = true;
                else if (flag == "--images")
                  o.images = parse_int(flag, v, 1);
                else if (flag == "--size")
                  o.size = parse_int(flag, v, 8);
                else if (flag == "--crop")
                  o.crop = parse_int(flag, v, 1);
                else if (flag == "--batch")
                  o.batch = parse_int(flag, v, 1);
                else if (flag == "--epochs")
                  o.epochs = parse_int(flag, v, 1);
                else if (flag == "--dir")
                  o.dir = v;
                else if (flag == "--workers") {
                  o.workers.clear();
                  size_t start = 0;
                  while (start <= v.size()) {
                    const size_t comma = std::min(v.find(',', start), v.size());
                    o.workers.push_back(
                        static_cast<int>(parse_int(flag, v.substr(start, comma - start), 0)));
                    start = comma + 1;
                  }
                }
              });
  return o;
}

/// Writes `n` size x size RGB JPEGs (quality 90) of smooth random patterns plus
/// noise, alternating between the class directories root/class0 and root/class1.
/// Files already there are reused.
inline void generate_jpegs(const std::string& root, int64_t n, int64_t size) {
  namespace fs = std::filesystem;
  fs::create_directories(fs::path(root) / "class0");
  fs::create_directories(fs::path(root) / "class1");
  for (int64_t i = 0; i < n; ++i) {
    const fs::path path =
        fs::path(root) / ("class" + std::to_string(i % 2)) / ("img" + std::to_string(i) + ".jpg");
    if (fs::exists(path)) continue;
    data::Rng rng(1234, static_cast<uint64_t>(i));
    Tensor img = empty({3, size, size}, {.dtype = DType::u8});  // (3, S, S)
    uint8_t* p = img.data<uint8_t>();
    for (int64_t c = 0; c < 3; ++c) {
      const double fx = rng.uniform(0.005, 0.08), fy = rng.uniform(0.005, 0.08);
      const double phase = rng.uniform(0.0, 6.283), amp = rng.uniform(40.0, 110.0);
      for (int64_t yy = 0; yy < size; ++yy)
        for (int64_t xx = 0; xx < size; ++xx) {
          const double v = 128.0 + amp * std::sin(fx * xx + phase) * std::cos(fy * yy) +
                           8.0 * (rng.uniform() - 0.5);
          p[(c * size + yy) * size + xx] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
        }
    }
    data::write_image(path.string(), img, 90);
  }
}

/// One epoch of ImageFolder -> RandomResizedCrop(crop) + flip + normalize ->
/// DataLoader per worker count, in images/s (best of `epochs`).
inline std::vector<DataBenchRun> run_data_bench(const DataBenchOptions& o) {
  namespace fs = std::filesystem;
  const bool temp = o.dir.empty();
  const std::string root =
      temp ? (fs::temp_directory_path() / ("tcv-bench-data-" + std::to_string(::getpid()))).string()
           : o.dir;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup{temp ? root : std::string()};
  generate_jpegs(root, o.images, o.size);

  data::Compose pipeline;
  pipeline.add(data::RandomResizedCrop{.size = o.crop})
      .add(data::RandomHorizontalFlip{})
      .add(data::NormalizeImage{{0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}});
  auto folder = std::make_shared<const data::ImageFolder>(root, pipeline);

  std::vector<DataBenchRun> runs;
  for (int w : o.workers) {
    data::LoaderOptions lo;
    lo.batch_size = o.batch;
    lo.shuffle = true;
    lo.workers = w;
    data::DataLoader loader(std::shared_ptr<const data::Dataset>(folder), lo);
    DataBenchRun best{.workers = w};
    for (int64_t e = 0; e < o.epochs; ++e) {
      const auto t0 = std::chrono::steady_clock::now();
      loader.start_epoch(e);
      data::Batch b;
      int64_t seen = 0;
      while (loader.next(b)) seen += b.x.size(0);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double rate = s > 0 ? static_cast<double>(seen) / s : 0.0;
      if (rate > best.images_per_sec) best = {w, rate, s, seen};
    }
    runs.push_back(best);
  }
  return runs;
}

inline Json data_result_json(const DataBenchOptions& o, const std::vector<DataBenchRun>& runs) {
  Json j = Json::object();
  j["bench"] = "data";
  j["impl"] = "tcv";
  j["images"] = o.images;
  j["size"] = o.size;
  j["crop"] = o.crop;
  j["batch"] = o.batch;
  j["epochs"] = o.epochs;
  Json arr = Json::array();
  for (const auto& r : runs) {
    Json e = Json::object();
    e["workers"] = r.workers;
    e["images_per_sec"] = r.images_per_sec;
    e["seconds"] = r.seconds;
    e["images"] = r.images;
    arr.push_back(std::move(e));
  }
  j["runs"] = std::move(arr);
  j["peak_rss_bytes"] = peak_rss_bytes();
  return j;
}

}  // namespace tcv::bench
