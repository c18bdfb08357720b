#include "data/pose/skeleton.h"

namespace tcv::data {

const std::array<std::string, kCocoKeypoints>& coco_keypoint_names() {
  static const std::array<std::string, kCocoKeypoints> names{
      "nose",           "left_eye",   "right_eye",   "left_ear",   "right_ear",   "left_shoulder",
      "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip",
      "right_hip",      "left_knee",  "right_knee",  "left_ankle", "right_ankle"};
  return names;
}

const std::array<std::string, kOpenposeKeypoints>& openpose_keypoint_names() {
  static const std::array<std::string, kOpenposeKeypoints> names{
      "nose",    "neck",    "r_shoulder", "r_elbow", "r_wrist", "l_shoulder",
      "l_elbow", "l_wrist", "r_hip",      "r_knee",  "r_ankle", "l_hip",
      "l_knee",  "l_ankle", "r_eye",      "l_eye",   "r_ear",   "l_ear"};
  return names;
}

const std::array<int, kCocoKeypoints>& coco_to_openpose() {
  static const std::array<int, kCocoKeypoints> m{0, 15, 14, 17, 16, 5, 2,  6, 3,
                                                 7, 4,  11, 8,  12, 9, 13, 10};
  return m;
}

const std::array<int, kOpenposeKeypoints>& openpose_to_coco() {
  static const std::array<int, kOpenposeKeypoints> m = [] {
    std::array<int, kOpenposeKeypoints> r{};
    r.fill(-1);
    for (int k = 0; k < kCocoKeypoints; ++k) r[static_cast<size_t>(coco_to_openpose()[k])] = k;
    return r;
  }();
  return m;
}

const std::array<std::array<int, 2>, kOpenposeLimbs>& openpose_limbs() {
  // TorchCV's limb_seq (1-based) minus one.
  static const std::array<std::array<int, 2>, kOpenposeLimbs> limbs{{{2, 3},
                                                                     {3, 4},
                                                                     {5, 6},
                                                                     {6, 7},
                                                                     {8, 9},
                                                                     {9, 10},
                                                                     {11, 12},
                                                                     {12, 13},
                                                                     {0, 1},
                                                                     {1, 8},
                                                                     {1, 11},
                                                                     {1, 2},
                                                                     {1, 5},
                                                                     {0, 15},
                                                                     {0, 14},
                                                                     {15, 17},
                                                                     {14, 16},
                                                                     {2, 16},
                                                                     {5, 17}}};
  return limbs;
}

const std::array<int, kOpenposeLimbs>& openpose_limb_order() {
  static const std::array<int, kOpenposeLimbs> order{11, 12, 0, 1,  2,  3,  9,  4,  5, 10,
                                                     6,  7,  8, 14, 16, 13, 15, 17, 18};
  return order;
}

const std::array<std::array<int, 2>, 8>& coco_flip_pairs() {
  static const std::array<std::array<int, 2>, 8> pairs{
      {{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}, {13, 14}, {15, 16}}};
  return pairs;
}

const std::array<std::array<int, 2>, 19>& coco_skeleton() {
  static const std::array<std::array<int, 2>, 19> s{{{16, 14},
                                                     {14, 12},
                                                     {17, 15},
                                                     {15, 13},
                                                     {12, 13},
                                                     {6, 12},
                                                     {7, 13},
                                                     {6, 7},
                                                     {6, 8},
                                                     {7, 9},
                                                     {8, 10},
                                                     {9, 11},
                                                     {2, 3},
                                                     {1, 2},
                                                     {1, 3},
                                                     {2, 4},
                                                     {3, 5},
                                                     {4, 6},
                                                     {5, 7}}};
  return s;
}

}  // namespace tcv::data
