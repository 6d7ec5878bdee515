// Rows quantized to int8 per group of 32 inputs (GGUF's Q8_1 rounding), for the byte dot-product kernels
// (int4_dot_rows, int8_dot_rows): d_g = max|x_g| / 127 and x8_i = nearbyint(x_i / d_g) in -127..127 (all
// zeros where max|x_g| is 0), beside each group's sum d_g * sum(x8_i) (the integer sum is exact): the sum of
// the rounded values, not of x, so that an int4 weight's min term sees the same activations as its q term
// and the two rounding errors do not add up (docs/performance.md, session 27).
#pragma once

#include "native_common.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace radixgate {

constexpr int64_t ACTIVATION_GROUP = 32;

struct Int8Rows {
  std::vector<int8_t> x8;  // (M, K)
  std::vector<float> d;    // (M, K / 32): the step of each group
  std::vector<float> sums; // (M, K / 32): d_g * the integer sum of the group's x8
};

template <typename T>
Int8Rows quantize_rows(const T* x, int64_t m, int64_t k) {
  const int64_t groups = k / ACTIVATION_GROUP;
  Int8Rows out{std::vector<int8_t>(m * k), std::vector<float>(m * groups), std::vector<float>(m * groups)};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t g = 0; g < groups; ++g) {
      const T* xg = x + i * k + g * ACTIVATION_GROUP;
      float amax = 0.0f;
      for (int64_t j = 0; j < ACTIVATION_GROUP; ++j) amax = std::max(amax, std::fabs(to_float(xg[j])));
      const float d = amax / 127.0f;
      int32_t total = 0;
      for (int64_t j = 0; j < ACTIVATION_GROUP; ++j) {
        const float v = d > 0.0f ? std::nearbyint(to_float(xg[j]) / d) : 0.0f;
        const int8_t x8 = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
        out.x8[i * k + g * ACTIVATION_GROUP + j] = x8;
        total += x8;
      }
      out.d[i * groups + g] = d;
      out.sums[i * groups + g] = d * static_cast<float>(total);
    }
  return out;
}

}  // namespace radixgate
