// Times a training transform as a loader thread runs it: on a fresh copy of
// one sample each iteration, with the random stream of that sample's index.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>

#include "data/rng.h"

namespace tcv::bench {

template <typename Sample, typename Transform>
void time_transform(benchmark::State& state, const Sample& src, const Transform& transform) {
  uint64_t k = 0;
  for (auto _ : state) {
    Sample s = src;
    data::Rng rng(1, k++);
    transform(s, rng);
    benchmark::DoNotOptimize(s.image.data_ptr());
  }
  state.counters["images/s"] =
      benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace tcv::bench
