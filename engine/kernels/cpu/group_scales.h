// Where the lane-packed quantized row kernels (int4_rows, int4_dot_rows, int8_rows) find each group's scales:
// 16 outputs per block across the lanes, one scale (and for int4 one min) per output and group of inputs.
//
//   Scales<S>        one S (float16 or float32) per lane: (blocks, groups, 16), or with mins
//                    (blocks, groups, 2, 16), the group's 16 scales then its 16 mins
//   SuperScales<I>   GGUF's K-quant super-blocks of 256 inputs, kept as the file has them: an integer I per lane
//                    and group (Q4_K: uint8 scale and min per 32, (blocks, groups, 2, 16); Q6_K: int8 scale per 16,
//                    (blocks, groups, 16)) and float16 per lane and super-block ((blocks, groups / per_super, 2 or
//                    1, 16): Q4_K's d then -dmin, Q6_K's d): scale = d * sc, min = -dmin * m, each exact in
//                    float32 (an 11-bit significand times an integer of at most 8 bits), the same float32
//                    values gguf's dequantization computes, so either form gives the same bits.
//
// lanes16(block, g) (and min16), lanes8(block, g, h) (and min8, lanes [8h, 8h + 8)), scalar(block, g, l) (and
// min_scalar): the same float32 values on every path.
#pragma once

#include "native_common.h"

#include <cstdint>

namespace radixgate {

template <typename S, bool HAS_MIN = false>
struct Scales {
  static constexpr bool ANY = true;
  static constexpr int64_t ROWS = HAS_MIN ? 2 : 1;
  const S* p;
  int64_t groups;

  const S* at(int64_t block, int64_t g) const { return p + (block * groups + g) * ROWS * 16; }
  float scalar(int64_t block, int64_t g, int64_t l) const { return to_float(at(block, g)[l]); }
  float min_scalar(int64_t block, int64_t g, int64_t l) const { return to_float(at(block, g)[16 + l]); }
#if defined(RADIXGATE_VEC16)
  f32x16 lanes16(int64_t block, int64_t g) const { return load16(at(block, g)); }
  f32x16 min16(int64_t block, int64_t g) const { return load16(at(block, g) + 16); }
  __m256 lanes8(int64_t block, int64_t g, int64_t h) const { return widen8(at(block, g) + 8 * h); }
  __m256 min8(int64_t block, int64_t g, int64_t h) const { return widen8(at(block, g) + 16 + 8 * h); }
#endif
};

template <typename I, bool HAS_MIN = false>
struct SuperScales {
  static constexpr bool ANY = true;
  static constexpr int64_t ROWS = HAS_MIN ? 2 : 1;
  const I* sc;           // (blocks, groups, ROWS, 16)
  const c10::Half* d;    // (blocks, groups / per_super, ROWS, 16)
  int64_t groups;
  int64_t per_super;     // groups per super-block of 256 inputs: 8 (Q4_K) or 16 (Q6_K)

  const I* small(int64_t block, int64_t g) const { return sc + (block * groups + g) * ROWS * 16; }
  const c10::Half* big(int64_t block, int64_t g) const {
    return d + (block * (groups / per_super) + g / per_super) * ROWS * 16;
  }
  float scalar(int64_t block, int64_t g, int64_t l) const {
    return to_float(big(block, g)[l]) * static_cast<float>(small(block, g)[l]);
  }
  float min_scalar(int64_t block, int64_t g, int64_t l) const {
    return to_float(big(block, g)[16 + l]) * static_cast<float>(small(block, g)[16 + l]);
  }
#if defined(RADIXGATE_VEC16)
  f32x16 lanes16(int64_t block, int64_t g) const { return mul16(load16(big(block, g)), load16(small(block, g))); }
  f32x16 min16(int64_t block, int64_t g) const {
    return mul16(load16(big(block, g) + 16), load16(small(block, g) + 16));
  }
  __m256 lanes8(int64_t block, int64_t g, int64_t h) const {
    return _mm256_mul_ps(widen8(big(block, g) + 8 * h), widen8(small(block, g) + 8 * h));
  }
  __m256 min8(int64_t block, int64_t g, int64_t h) const {
    return _mm256_mul_ps(widen8(big(block, g) + 16 + 8 * h), widen8(small(block, g) + 16 + 8 * h));
  }
#endif
};

}  // namespace radixgate
