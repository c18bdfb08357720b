#include "dist/fingerprint.h"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace tcv::dist::detail {

const char* collective_kind_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_reduce:
      return "all_reduce";
    case CollectiveKind::broadcast:
      return "broadcast";
    case CollectiveKind::all_gather:
      return "all_gather";
    case CollectiveKind::reduce_scatter:
      return "reduce_scatter";
    case CollectiveKind::barrier:
      return "barrier";
  }
  return "unknown collective";
}

std::string Fingerprint::call_str() const {
  std::string s = collective_kind_name(kind);
  if (kind == CollectiveKind::barrier) return s;
  if (kind == CollectiveKind::all_reduce || kind == CollectiveKind::reduce_scatter)
    s += std::string(" ") + reduce_op_name(op);
  s += tcv::detail::str_cat(" (", dtype_name(dtype), ", ", count, " elements)");
  if (kind == CollectiveKind::broadcast) s += " from rank " + std::to_string(root);
  return s;
}

std::string Fingerprint::str() const {
  return tcv::detail::str_cat("#", seq, " ", call_str());
}

std::array<int64_t, 4> Fingerprint::pack() const {
  const int64_t head = static_cast<int64_t>(kind) | static_cast<int64_t>(op) << 8 |
                       static_cast<int64_t>(dtype) << 16;
  return {static_cast<int64_t>(seq), head, static_cast<int64_t>(root), count};
}

Fingerprint Fingerprint::unpack(const int64_t* w) {
  Fingerprint f;
  f.seq = static_cast<uint64_t>(w[0]);
  f.kind = static_cast<CollectiveKind>(w[1] & 0xff);
  f.op = static_cast<ReduceOp>((w[1] >> 8) & 0xff);
  f.dtype = static_cast<DType>((w[1] >> 16) & 0xff);
  f.root = static_cast<int32_t>(w[2]);
  f.count = w[3];
  return f;
}

uint32_t Fingerprint::tag() const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the packed words
  for (int64_t w : pack())
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint64_t>(w >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  return static_cast<uint32_t>(h ^ (h >> 32)) & 0x7fffffffu;
}

uint32_t Fingerprint::check_tag(uint64_t seq) {
  return 0x80000000u | static_cast<uint32_t>(seq & 0x7fffffffu);
}

std::string compare_fingerprints(const std::vector<Fingerprint>& all, const std::string& backend) {
  if (std::all_of(all.begin(), all.end(), [&](const Fingerprint& f) { return f == all[0]; }))
    return "";
  // Group the ranks by what they issued, in order of the lowest rank.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (size_t r = 0; r < all.size(); ++r) {
    const std::string s = all[r].str();
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == s; });
    if (it == groups.end()) {
      groups.push_back({s, {static_cast<int>(r)}});
    } else {
      it->second.push_back(static_cast<int>(r));
    }
  }
  std::string msg =
      "[" + backend + "] ranks disagree on collective #" + std::to_string(all[0].seq) + ": ";
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& ranks = groups[g].second;
    msg += g ? "; " : "";
    msg += ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) msg += (i ? ", " : "") + std::to_string(ranks[i]);
    msg += " issued " + groups[g].first;
  }
  return msg +
         " (every rank must issue the same collectives, with the same sizes, in the same order)";
}

int64_t checked_collectives(int64_t configured) {
  const char* env = std::getenv("TCV_DISTRIBUTED_DEBUG");
  if (!env) return configured;
  std::string v(env);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::toupper(c); });
  if (v == "OFF") return 0;
  if (v == "DETAIL") return -1;
  return configured;
}

}  // namespace tcv::dist::detail
