// int8 weights times int8 activations for a few rows at a time (generated tokens: decode and verify rows):
// llama.cpp's Q8_0 x Q8_0 product (the LM head of the w4a8 mode).
//
// int8_dot_rows(x (M, K), q int8 (n/16, K/32, 8, 16, 4), scale (n/16, K/32, 16) float16, n) -> (M, n)
//   The weight is engine.kernels.cpu.quantized_linear's int8 (GGUF's Q8_0 block: per 32 inputs of an output a
//   float16 scale, w = q * scale, q in -127..127), laid out by pack_int8_dot_lanes (engine.kernels.cpu.row_linear):
//   blocks of 16 outputs across the lanes; per block and group of 32 inputs, 8 chunks of 16 lanes x 4 bytes,
//   byte j of lane l in chunk c holding input 4c + j; the scales as int8_rows reads them. n is padded to a
//   multiple of 16 with zeros. Each row's group g is quantized to int8 (int8_activations.h, step d_g); then
//   y_o = sum_g float(sum_i q_oi x8_i) * (scale_og * d_g), in float32, added by fused multiply-adds in group
//   order; the integer dot products are exact (|q x8| <= 127 * 127: the sign of q moves onto x8, so the byte
//   product instructions see |q| unsigned).
//
// Contract (dot_rows.h): a row's bits depend on that row only; the scalar fallback takes the same steps. The
// activations are rounded to 8 bits: what it costs is what `radixgate bench accuracy --quantization w4a8`
// measures.
#include <ATen/ATen.h>

#include "dot_rows.h"

#include <cstdint>
#include <cstring>

namespace {

constexpr int64_t LANES = radixgate::DOT_LANES;
constexpr int64_t GROUP = radixgate::ACTIVATION_GROUP;
constexpr int64_t CHUNKS = 8;  // 4 inputs each

struct Int8Weight {
  static constexpr int64_t GROUP_BYTES = CHUNKS * LANES * 4;
  static constexpr bool HAS_MIN = false;

  static int32_t lane_dot(const uint8_t* qg, int64_t l, const int8_t* x8) {
    const int8_t* q = reinterpret_cast<const int8_t*>(qg);
    int32_t s = 0;
    for (int64_t c = 0; c < CHUNKS; ++c)
      for (int64_t j = 0; j < 4; ++j) s += q[(c * LANES + l) * 4 + j] * x8[4 * c + j];
    return s;
  }

#if defined(RADIXGATE_DOT_VEC)
  template <int R>
  static void dot8(const uint8_t* qg, int64_t h, const int8_t* x8, int64_t row_stride, __m256i (&dots)[R]) {
    for (int i = 0; i < R; ++i) dots[i] = _mm256_setzero_si256();
    for (int64_t c = 0; c < CHUNKS; ++c) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qg + (c * LANES + 8 * h) * 4));
      const __m256i magnitude = _mm256_abs_epi8(v);
      for (int i = 0; i < R; ++i) {
        int32_t quad;
        std::memcpy(&quad, x8 + i * row_stride + 4 * c, 4);
        const __m256i signed_x = _mm256_sign_epi8(_mm256_set1_epi32(quad), v);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
        dots[i] = _mm256_dpbusd_epi32(dots[i], magnitude, signed_x);
#else
        // a pair of products: |sum| <= 2 * 127 * 127 = 32258 fits 16 bits (no saturation)
        const __m256i pairs = _mm256_maddubs_epi16(magnitude, signed_x);
        dots[i] = _mm256_add_epi32(dots[i], _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
      }
    }
  }
#endif
};

}  // namespace

at::Tensor int8_dot_rows(const at::Tensor& x, const at::Tensor& q, const at::Tensor& scale, int64_t n) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "x must be contiguous (M, K)");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16, "x must be float32 or bfloat16");
  const int64_t k = x.size(1), groups = k / GROUP;
  TORCH_CHECK(k % GROUP == 0, "K must be a multiple of ", GROUP);
  TORCH_CHECK(q.scalar_type() == at::kChar && q.is_contiguous() && q.dim() == 5 && q.size(1) == groups &&
              q.size(2) == CHUNKS && q.size(3) == LANES && q.size(4) == 4,
              "q must be contiguous int8 (n/16, K/32, 8, 16, 4)");
  TORCH_CHECK(scale.scalar_type() == at::kHalf && scale.is_contiguous() &&
              scale.numel() == q.size(0) * groups * LANES, "scale must be float16 (n/16, K/32, 16)");
  TORCH_CHECK(q.size(0) * LANES >= n && n > (q.size(0) - 1) * LANES, "n does not fit the blocks");
  return radixgate::dot_rows<Int8Weight>(x, q, radixgate::Scales<c10::Half>{scale.data_ptr<c10::Half>(), groups}, n);
}
