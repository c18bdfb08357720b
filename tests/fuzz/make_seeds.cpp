// Writes the seed corpus of every harness from real files, each a few KB:
// checkpoints tcv writes of fuzz::tiny_model (SGD and Adam state, trainer
// state), Fashion-MNIST IDX files cut to a few images (raw and gzip), CIFAR
// records, PNG/JPEG/BMP encodings of Fashion-MNIST images, the shipped TOML
// configs, list files, TCP store requests, and the VOC XML, COCO JSON and
// label PNGs of a small scene set (data/det/scenes.h) plus hand-made PNGs of
// the label depths scenes do not write (1, 2, 4 and 16 bits, grayscale), the
// person keypoint files of a small stick-figure set (data/pose/scenes.h) plus
// hand-made ones, and masks (RLE, compressed RLE, polygons).
//
// Usage: tcv-fuzz-seeds OUT_DIR SOURCE_DIR   (writes OUT_DIR/<harness>/<seed>)
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/det/scenes.h"
#include "data/idx.h"
#include "data/image.h"
#include "data/pose/scenes.h"
#include "dist/store_wire.h"
#include "engine/json.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "engine/serialize.h"
#include "fuzz_support.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/optim.h"
#include "train/task.h"

namespace fs = std::filesystem;
using namespace tcv;

namespace {

fs::path out_root;

void put(const std::string& harness, const std::string& name, const std::string& bytes) {
  const fs::path dir = out_root / harness;
  fs::create_directories(dir);
  std::ofstream f(dir / name, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  TCV_CHECK(f.good(), "cannot write ", (dir / name).string());
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  TCV_CHECK(f.good(), "cannot read ", p.string());
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string gzip(const std::string& raw) {
  z_stream zs{};
  TCV_CHECK(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK, "zlib");
  std::string out(deflateBound(&zs, raw.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  TCV_CHECK(deflate(&zs, Z_FINISH) == Z_STREAM_END, "zlib deflate");
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

/// An IDX file of type `code` from dims and the already big-endian elements.
std::string idx(uint8_t code, const std::vector<uint32_t>& dims, const std::string& elems) {
  std::string s{0, 0, static_cast<char>(code), static_cast<char>(dims.size())};
  for (uint32_t d : dims) s += be32(d);
  return s + elems;
}

void checkpoints() {
  manual_seed(1);
  for (const char* kind : {"sgd", "adam"}) {
    auto model = fuzz::tiny_model();
    std::unique_ptr<train::Optimizer> opt;
    if (std::string(kind) == "sgd")
      opt = std::make_unique<train::SGD>(model->named_parameters(),
                                         train::SGDOptions{.lr = 0.1, .momentum = 0.9});
    else
      opt = std::make_unique<train::Adam>(model->named_parameters(), train::AdamOptions{});
    // One step, so the optimizer has its buffers.
    const auto& m = *model;
    Tensor y = m[1]->forward(m[0]->forward(randn({2, 1, 4, 4})));  // (2, 2, 2, 2)
    ops::sum(m[2]->forward(y.reshape({2, 8}))).backward();
    opt->step();
    train::TrainerState st;
    st.epoch = 1;
    st.epoch_iter = 3;
    st.iter = 10;
    st.lr = 0.1;
    st.rng_seed = 42;
    st.rng_offset = 1u << 20;
    st.best_score = 81.5;
    st.last_score = 80.25;
    st.elapsed_s = 12.5;
    st.model_name = "tiny";
    if (std::string(kind) == "adam") {  // a detection run's state: best by mAP
      st.task = "det";
      st.best_metric = "map";
      st.best_score = 0.4125;
      st.last_score = 0.39;
    }
    const fs::path stem = out_root / (std::string("tmp-") + kind);
    train::save_checkpoint(stem.string(), *model, opt.get(), st);
    const std::string weights = slurp(stem.string() + ".safetensors");
    const std::string state =
        load_safetensors(stem.string() + ".safetensors").metadata.at("trainer_state");
    put("safetensors", std::string(kind) + "_checkpoint.safetensors", weights);
    put("trainer_state", std::string(kind) + ".json", state);
    put("json", std::string(kind) + "_trainer_state.json", state);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i)
      n |= static_cast<uint64_t>(static_cast<uint8_t>(weights[i])) << (8 * i);
    put("json", std::string(kind) + "_safetensors_header.json", weights.substr(8, n));
    fs::remove(stem.string() + ".safetensors");
    // Only the model's weights, as torchvision conversions hold them.
    NamedTensors plain;
    for (auto& [name, t] : model->state_dict()) plain.emplace_back(name, t);
    const fs::path p = out_root / "tmp-plain.safetensors";
    save_safetensors(p.string(), plain, {{"format", "pt"}});
    put("safetensors", "weights_only.safetensors", slurp(p));
    fs::remove(p);
  }
  // Every dtype and an empty tensor.
  NamedTensors all;
  all.emplace_back("f64", from_vector<double>({0.1, -2}));
  all.emplace_back("f16", from_vector<float>({0.5f, -1.25f}).to(DType::f16));
  all.emplace_back("bf16", from_vector<float>({1.0f}).to(DType::bf16));
  all.emplace_back("i32", from_vector<int32_t>({-7, 8}));
  all.emplace_back("i64", from_vector<int64_t>({int64_t{1} << 40}));
  all.emplace_back("u8", from_vector<uint8_t>({0, 255}));
  all.emplace_back("bool", from_vector<bool>({true, false}));
  all.emplace_back("empty", zeros({0, 3}));
  const fs::path p = out_root / "tmp-all.safetensors";
  save_safetensors(p.string(), all, {{"k", "v"}});
  put("safetensors", "every_dtype.safetensors", slurp(p));
  fs::remove(p);
}

void json_lines() {
  put("json", "metrics_train.json",
      R"({"split":"train","epoch":1,"iter":50,"loss":0.6931,"lr":0.1,"images_per_sec":1234.5,"time":3.25})");
  put("json", "metrics_val.json",
      R"({"split":"val","epoch":1,"iter":100,"top1":81.5,"top5":99.0,"loss":0.5,"images":10000,"time":9.0})");
  put("json", "escapes.json",
      R"(["a\"b\\c\n\u00e9\ud83d\ude00", -0.0, 1e-300, 18446744073709551615, -9223372036854775808, {}, [], null, true])");
}

void idx_files(const std::string& fmnist) {
  const data::IdxFiles files = data::find_idx_files(fmnist);
  const std::string images = data::read_maybe_gzip(files.test_images);
  const std::string labels = data::read_maybe_gzip(files.test_labels);
  // The real headers with the counts cut to 2 images and 8 labels.
  const std::string two = idx(0x08, {2, 28, 28}, images.substr(16, 2 * 784));
  const std::string eight = idx(0x08, {8}, labels.substr(8, 8));
  TCV_CHECK(images.substr(0, 4) == two.substr(0, 4) && labels.substr(0, 4) == eight.substr(0, 4),
            "unexpected IDX magic in ", fmnist);
  put("idx", "fmnist_images_2.idx", two);
  put("idx", "fmnist_images_2.idx.gz", gzip(two));
  put("idx", "fmnist_labels_8.idx", eight);
  put("idx", "fmnist_labels_8.idx.gz", gzip(eight));
  put("idx", "i8.idx", idx(0x09, {3}, std::string("\x01\xff\x7f", 3)));
  put("idx", "i16.idx", idx(0x0B, {2}, std::string("\x80\x00\x00\x01", 4)));
  put("idx", "i32.idx", idx(0x0C, {1, 1}, std::string("\xff\xff\xff\xfe", 4)));
  put("idx", "f32.idx", idx(0x0D, {2}, std::string("\x3f\x80\x00\x00\xc0\x00\x00\x00", 8)));
  put("idx", "f64.idx", idx(0x0E, {1}, std::string("\x3f\xf0\x00\x00\x00\x00\x00\x00", 8)));

  // CIFAR records: Fashion-MNIST pixels padded to 32 x 32 in three planes.
  auto record = [&](int k, const std::string& label_bytes) {
    std::string r = label_bytes;
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x)
          r += (y >= 2 && y < 30 && x >= 2 && x < 30)
                   ? images[16 + k * 784 + (y - 2) * 28 + (x - 2)]
                   : '\0';
    return r;
  };
  put("cifar", "cifar10_2.bin", std::string(1, 0) + record(0, "\x09") + record(1, "\x02"));
  put("cifar", "cifar100_fine_2.bin",
      std::string(1, 1) + record(0, std::string("\x13\x63", 2)) +
          record(1, std::string("\x00\x05", 2)));
  put("cifar", "cifar100_coarse_1.bin", std::string(1, 2) + record(2, std::string("\x04\x20", 2)));

  // Images: the first test image, gray and as colour, in every format tcv writes.
  const Tensor gray = data::parse_idx(two, "seed").select(0, 0).unsqueeze(0);  // (1, 28, 28)
  const Tensor rgb =
      ops::cat({gray, zeros({1, 28, 28}, {.dtype = DType::u8}), gray}, 0);  // (3, 28, 28)
  const Tensor rgba = ops::cat({rgb, gray}, 0).contiguous();                // (4, 28, 28)
  int k = 0;
  for (const auto& [name, img] :
       std::vector<std::pair<std::string, Tensor>>{{"gray", gray}, {"rgb", rgb}, {"rgba", rgba}}) {
    for (const auto& [ext, fmt] :
         std::vector<std::pair<std::string, data::ImageFormat>>{{"png", data::ImageFormat::png},
                                                                {"jpg", data::ImageFormat::jpeg},
                                                                {"bmp", data::ImageFormat::bmp}}) {
      if (name == "rgba" && ext != "png") continue;
      // The first byte picks the mode (keep, gray, rgb); spread them over the seeds.
      put("image", name + "." + ext,
          std::string(1, static_cast<char>(k++ % 3)) + data::encode_image(img, fmt, 90));
    }
  }
}

void configs(const fs::path& source) {
  for (const char* task : {"cls", "det", "seg"})
    for (const auto& e : fs::directory_iterator(source / "configs" / task))
      if (e.path().extension() == ".toml")
        put("config", e.path().filename().string(), slurp(e.path()));
  put("config", "resolved_defaults.toml", train::Config().to_toml());
  put("config_set", "overrides.txt",
      "solver.lr.base_lr=0.05\n"
      "train.batch_size = 32\n"
      "data.input_size=[32, 32]\n"
      "solver.lr.lr_policy=cosine\n"
      "network.model_name=\"resnet18\"\n"
      "train.aug.color_jitter=[0.4, 0.4, 0.4, 0.1]\n"
      "solver.optim.sgd.nesterov=true\n"
      "solver.lr.multistep.stepvalue=[30, 60]\n");
  put("config_set", "one.txt", "data.workers=4\n");
}

std::string png_chunk(const std::string& type, const std::string& data) {
  std::string c = type + data;
  const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(c.data()), static_cast<uInt>(c.size()));
  return be32(static_cast<uint32_t>(data.size())) + c + be32(static_cast<uint32_t>(crc));
}

/// A PNG of `rows` (each already filtered: a filter byte, then the packed samples).
std::string png(uint32_t w, uint32_t h, int depth, int color_type, const std::string& rows,
                const std::string& palette = "") {
  std::string ihdr = be32(w) + be32(h);
  ihdr += {static_cast<char>(depth), static_cast<char>(color_type), 0, 0, 0};
  uLongf n = compressBound(static_cast<uLong>(rows.size()));
  std::string z(n, '\0');
  TCV_CHECK(compress2(reinterpret_cast<Bytef*>(z.data()), &n,
                      reinterpret_cast<const Bytef*>(rows.data()), rows.size(), 9) == Z_OK,
            "zlib compress");
  z.resize(n);
  std::string out = "\x89PNG\r\n\x1a\n";
  out += png_chunk("IHDR", ihdr);
  if (!palette.empty()) out += png_chunk("PLTE", palette);
  return out + png_chunk("IDAT", z) + png_chunk("IEND", "");
}

// Writes a generated set of 64x48 images (train + val of them) to
// out_root/tmp-<name> with write(options, dir), hands the directory to take,
// then removes it.
template <typename Options, typename Write, typename Take>
void from_generated_set(const char* name, int64_t train, int64_t val, uint64_t seed, Write write,
                        Take take) {
  Options o;
  o.scene.width = 64;
  o.scene.height = 48;
  o.train = train;
  o.val = val;
  o.seed = seed;
  const fs::path dir = out_root / (std::string("tmp-") + name);
  write(o, dir.string());
  take(dir);
  fs::remove_all(dir);
}

void scene_files() {
  from_generated_set<data::SceneSetOptions>(
      "scenes", 2, 1, 7, data::write_scene_set, [](const fs::path& dir) {
        for (const auto& [sub, harness] :
             std::vector<std::pair<std::string, std::string>>{{"Annotations", "voc_xml"},
                                                              {"annotations", "coco_json"},
                                                              {"annotations", "det_coco_segm"},
                                                              {"SegmentationClass", "label_png"},
                                                              {"SegmentationObject", "label_png"}})
          for (const auto& e : fs::directory_iterator(dir / sub))
            put(harness, sub + "_" + e.path().filename().string(), slurp(e.path()));
      });
  // A VOC file as the devkit writes them (tabs, <source>, <owner>, a truncated object).
  put("voc_xml", "voc2007_000005.xml",
      "<annotation>\n\t<folder>VOC2007</folder>\n\t<filename>000005.jpg</filename>\n"
      "\t<source>\n\t\t<database>The VOC2007 Database</database>\n\t</source>\n"
      "\t<size>\n\t\t<width>500</width>\n\t\t<height>375</height>\n\t\t<depth>3</depth>\n"
      "\t</size>\n\t<segmented>0</segmented>\n\t<object>\n\t\t<name>chair</name>\n"
      "\t\t<pose>Rear</pose>\n\t\t<truncated>0</truncated>\n\t\t<difficult>0</difficult>\n"
      "\t\t<bndbox>\n\t\t\t<xmin>263</xmin>\n\t\t\t<ymin>211</ymin>\n"
      "\t\t\t<xmax>324</xmax>\n\t\t\t<ymax>339</ymax>\n\t\t</bndbox>\n\t</object>\n"
      "\t<object>\n\t\t<name>chair</name>\n\t\t<pose>Unspecified</pose>\n"
      "\t\t<truncated>1</truncated>\n\t\t<difficult>1</difficult>\n\t\t<bndbox>\n"
      "\t\t\t<xmin>5.5</xmin>\n\t\t\t<ymin>244</ymin>\n\t\t\t<xmax>67</xmax>\n"
      "\t\t\t<ymax>374</ymax>\n\t\t</bndbox>\n\t</object>\n</annotation>\n");
  // COCO with what scenes do not write: crowd regions, supercategories, no "annotations".
  put("coco_json", "crowd.json",
      R"({"info":{"year":2017},"images":[{"id":397133,"file_name":"000000397133.jpg",)"
      R"("width":640,"height":427}],"annotations":[{"id":1,"image_id":397133,)"
      R"("category_id":44,"bbox":[217.62,240.54,38.99,57.75],"area":2000.5,"iscrowd":0},)"
      R"({"id":2,"image_id":397133,"category_id":1,"bbox":[0,0,10,10],"iscrowd":1,)"
      R"("segmentation":{"counts":[0,100],"size":[427,640]}}],"categories":[{"id":1,)"
      R"("name":"person","supercategory":"person"},{"id":44,"name":"bottle",)"
      R"("supercategory":"kitchen"}]})");
  put("det_coco_segm", "crowd.json", slurp(out_root / "coco_json" / "crowd.json"));
  put("det_coco_segm", "segmentations.json",
      R"({"images":[{"id":1,"file_name":"a.jpg","width":40,"height":30}],"annotations":[)"
      R"({"id":1,"image_id":1,"category_id":3,"bbox":[2,3,30,20],"area":600,"iscrowd":0,)"
      R"("segmentation":[[2,3,32,3,32,23,2,23]]},{"id":2,"image_id":1,"category_id":3,)"
      R"("bbox":[0,0,1,3],"area":3,"iscrowd":1,"segmentation":{"counts":"X13UT1",)"
      R"("size":[30,40]}},{"id":3,"image_id":1,"category_id":5,"bbox":[10,10,5,5],)"
      R"("iscrowd":1,"segmentation":{"counts":[410,5,25,5,755],"size":[30,40]}}],)"
      R"("categories":[{"id":3,"name":"car"},{"id":5,"name":"person"}]})");
  put("coco_json", "no_annotations.json",
      R"({"images":[{"id":1,"file_name":"a.jpg","width":2,"height":3}],"categories":[]})");
  // Label PNGs of every depth: 1, 2, 4 bit palette; 1, 2, 4, 8, 16 bit grayscale.
  const std::string pal("\0\0\0\x80\0\0\0\x80\0\x80\x80\0", 12);
  for (int depth : {1, 2, 4}) {
    std::string rows;
    const size_t row_bytes = (5 * depth + 7) / 8;
    for (int y = 0; y < 3; ++y) rows += std::string(1, '\0') + std::string(row_bytes, '\x1b');
    put("label_png", "palette_" + std::to_string(depth) + "bit.png",
        png(5, 3, depth, 3, rows, pal));
    put("label_png", "gray_" + std::to_string(depth) + "bit.png", png(5, 3, depth, 0, rows));
  }
  std::string rows16;
  for (int y = 0; y < 2; ++y) rows16 += std::string("\0\0\x07\0\xff\0\x13", 7);
  put("label_png", "gray_16bit.png", png(3, 2, 16, 0, rows16));
  std::string rows8;
  for (int y = 0; y < 4; ++y) rows8 += std::string("\x01\x00\x05\xff\x10", 5);  // Sub filter
  put("label_png", "gray_8bit_sub.png", png(4, 4, 8, 0, rows8));
}

// Person keypoint files: a small stick-figure set (people with RLE masks,
// crowds of tiny figures), and hand-made ones with what scenes do not write:
// polygons, compressed RLE, a crowd without keypoints, people without boxes.
void pose_files() {
  from_generated_set<data::PoseSceneSetOptions>(
      "pose-scenes", 3, 2, 5, data::write_pose_scene_set, [](const fs::path& dir) {
        for (const auto& e : fs::directory_iterator(dir / "annotations"))
          put("pose_keypoints", e.path().filename().string(), slurp(e.path()));
      });
  std::string kp = "[";
  for (int k = 0; k < 17; ++k) kp += (k ? "," : "") + std::to_string(4 + k) + ",10,2";
  kp += "]";
  const std::string head = R"({"images":[{"id":1,"file_name":"a.jpg","width":40,"height":30},)"
                           R"({"id":2,"file_name":"b.jpg","width":8,"height":8}],)"
                           R"("categories":[{"id":1,"name":"person","supercategory":"person"}],)"
                           R"("annotations":[)";
  put("pose_keypoints", "polygons_and_crowds.json",
      head +
          R"({"id":1,"image_id":1,"category_id":1,"iscrowd":0,"num_keypoints":17,)"
          R"("bbox":[2,3,30,20],"area":600,"keypoints":)" +
          kp +
          R"(,"segmentation":[[2,3,32,3,32,23,2,23],[5,5,9,5,7,9]]},)"
          R"({"id":2,"image_id":1,"category_id":1,"iscrowd":1,"bbox":[0,0,40,30],)"
          R"("area":30,"segmentation":{"counts":[40,3,1157],"size":[30,40]}},)"
          R"({"id":3,"image_id":1,"category_id":1,"iscrowd":1,"bbox":[0,0,1,3],)"
          R"("segmentation":{"counts":"X13UT1","size":[30,40]}},)"
          R"({"id":4,"image_id":2,"category_id":1,"keypoints":)" +
          kp + R"(}]})");
  put("pose_keypoints", "no_annotations.json",
      R"({"images":[{"id":1,"file_name":"a.jpg","width":2,"height":3}],"categories":[]})");
}

// Masks for fuzz_coco_rle: kind (0 compressed, 1 uncompressed, 2 polygons),
// height, width, payload.
void rle_masks() {
  auto i64s = [](const std::vector<int64_t>& v) {
    std::string s(v.size() * 8, '\0');
    std::memcpy(s.data(), v.data(), s.size());
    return s;
  };
  auto f64s = [](const std::vector<double>& v) {
    std::string s(v.size() * 8, '\0');
    std::memcpy(s.data(), v.data(), s.size());
    return s;
  };
  put("coco_rle", "compressed_30x40", std::string("\0\x1d\x27", 3) + "X13UT1");
  put("coco_rle", "compressed_4x5", std::string("\0\x03\x04", 3) + "3421");
  put("coco_rle", "uncompressed_8x8", std::string("\x01\x07\x07", 3) + i64s({3, 4, 57}));
  put("coco_rle", "uncompressed_alternating_4x4",
      std::string("\x01\x03\x03", 3) + i64s({0, 1, 1, 2, 3, 4, 5}));
  put("coco_rle", "polygons_8x8",
      std::string("\x02\x07\x07", 3) + std::string(1, '\x01') +
          f64s({2, 2, 6, 2, 6, 5, 2, 5, 0, 0, 8, 0, 4, 8}));
}

void list_files() {
  put("list_file", "train.txt",
      "# path label\n"
      "cls0/img 1.png 0\n"
      "cls1/b.jpg\t1\n"
      "\n"
      "  /abs/path/c.bmp 9  \n");
  put("list_file", "one.txt", "a.png 3\n");
}

void store_requests() {
  using dist::Bytes;
  auto frame = [](const Bytes& body) {
    Bytes f;
    dist::put_u32(f, static_cast<uint32_t>(body.size()));
    f.insert(f.end(), body.begin(), body.end());
    return std::string(f.begin(), f.end());
  };
  auto op = [](dist::StoreOp o) { return Bytes{static_cast<uint8_t>(o)}; };
  Bytes set = op(dist::StoreOp::set), get = op(dist::StoreOp::get), add = op(dist::StoreOp::add),
        add2 = add, check = op(dist::StoreOp::check), wait = op(dist::StoreOp::wait),
        del = op(dist::StoreOp::del);
  dist::put_str(set, "/tcv/rank/0");
  dist::put_str(set, "nccl-unique-id-bytes");
  dist::put_str(get, "/tcv/rank/0");
  dist::put_str(add, "/tcv/barrier/0");
  dist::put_i64(add, 1);
  dist::put_str(add2, "/tcv/barrier/0");
  dist::put_i64(add2, -5);
  dist::put_u32(check, 2);
  dist::put_str(check, "a");
  dist::put_str(check, "/tcv/rank/0");
  dist::put_u32(wait, 1);
  dist::put_str(wait, "/tcv/barrier/0/done");
  dist::put_str(del, "/tcv/rank/0");
  put("store", "session.bin",
      frame(set) + frame(get) + frame(add) + frame(add2) + frame(check) + frame(wait) + frame(del));
  put("store", "barrier.bin", frame(add) + frame(add) + frame(wait));
}

}  // namespace

int main(int argc, char** argv) {
  train::register_builtin_tasks();  // the config seeds hold every task's keys
  if (argc != 3) {
    std::cerr << "usage: tcv-fuzz-seeds OUT_DIR SOURCE_DIR\n";
    return 2;
  }
  try {
    out_root = argv[1];
    fs::create_directories(out_root);
    checkpoints();
    json_lines();
    idx_files("/usr/share/datasets/fashion-mnist");
    configs(argv[2]);
    list_files();
    store_requests();
    scene_files();
    pose_files();
    rle_masks();
  } catch (const std::exception& e) {
    std::cerr << "tcv-fuzz-seeds: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
