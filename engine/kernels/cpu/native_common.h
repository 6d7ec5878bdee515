// Helpers shared by radixgate's native CPU kernels (engine.kernels.cpu.native builds them).
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace radixgate {

inline float to_float(float v) { return v; }
inline float to_float(c10::BFloat16 v) {  // exact: a bfloat16 is the top half of a float32
  const uint32_t bits = static_cast<uint32_t>(v.x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

#if defined(__AVX512F__)
// the first ``count`` (1..16) float32 lanes of ``acc`` to dst, each rounded once to T
template <typename T>
inline void store_lanes(T* dst, __m512 acc, int64_t count) {
  if constexpr (std::is_same_v<T, float>) {
    _mm512_mask_storeu_ps(dst, static_cast<__mmask16>((1u << count) - 1), acc);
  } else {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, acc);
    for (int64_t l = 0; l < count; ++l) dst[l] = static_cast<T>(lanes[l]);
  }
}
#endif

}  // namespace radixgate
