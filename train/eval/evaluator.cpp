#include "train/eval/evaluator.h"

#include <algorithm>

#include "dist/process_group.h"
#include "engine/tensor.h"

namespace tcv::train {

double metric(const Metrics& m, const std::string& name) {
  for (const auto& [k, v] : m)
    if (k == name) return v;
  std::string known;
  for (const auto& [k, v] : m) known += (known.empty() ? "" : ", ") + k;
  TCV_THROW("no metric '", name, "' (known: ", known, ")");
}

std::vector<std::string> all_gather_bytes(dist::ProcessGroup& pg, const std::string& mine) {
  const int world = pg.size();
  Tensor len = from_vector<int64_t>({static_cast<int64_t>(mine.size())}, {1});
  Tensor lens = empty({world}, {.dtype = DType::i64});
  pg.all_gather(lens, len)->wait();
  const std::vector<int64_t> n = lens.to_vector<int64_t>();
  const int64_t longest = *std::max_element(n.begin(), n.end());
  const int64_t words = std::max<int64_t>((longest + 7) / 8, 1);
  Tensor in = zeros({words}, {.dtype = DType::i64});
  std::memcpy(in.data_ptr(), mine.data(), mine.size());
  Tensor out = empty({world * words}, {.dtype = DType::i64});
  pg.all_gather(out, in)->wait();
  std::vector<std::string> all(static_cast<size_t>(world));
  const auto* base = static_cast<const char*>(out.data_ptr());
  for (int r = 0; r < world; ++r) {
    TCV_CHECK(n[static_cast<size_t>(r)] >= 0 && n[static_cast<size_t>(r)] <= words * 8,
              "[all_gather_bytes] rank ", r, " sent a bad length ", n[static_cast<size_t>(r)]);
    all[static_cast<size_t>(r)].assign(base + static_cast<int64_t>(r) * words * 8,
                                       static_cast<size_t>(n[static_cast<size_t>(r)]));
  }
  return all;
}

void combine(Evaluator& e, dist::ProcessGroup& pg) {
  const std::vector<std::string> all = all_gather_bytes(pg, e.serialize());
  e.reset();
  for (const std::string& b : all) e.merge(b);
}

}  // namespace tcv::train
