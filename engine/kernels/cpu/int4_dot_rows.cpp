// int4 weights times int8 activations for a few rows at a time (generated tokens: decode and verify rows):
// llama.cpp's Q4_1 x Q8_1 product.
//
// int4_dot_rows(x (M, K), q uint8 (n/16, K/32, 4, 16, 4), scale_min (n/16, K/32, 2, 16) float16 or float32, n)
//   -> (M, n)
//   The weight is engine.kernels.cpu.quantized_linear's int4 (GGUF's Q4_1 block: per 32 inputs of an output a
//   float16 scale and min, w = q * scale + min), laid out by pack_int4_dot_lanes (engine.kernels.cpu.row_linear):
//   blocks of 16 outputs across the lanes; per block and group of 32 inputs, 4 chunks of 16 lanes x 4 bytes,
//   byte j of lane l in chunk c holding input 8c + j in its low nibble and input 8c + 4 + j in its high one;
//   then the group's 16 scales and 16 mins (int4_rows's scale_min). n is padded to a multiple of 16 with zeros.
//   Each row's group g of 32 inputs is quantized first (int8_activations.h: GGUF's Q8_1 rounding, step d_g).
//   Then, in float32,
//   y_o = sum_g [ float(sum_i q_oi x8_i) * (scale_og * d_g) + min_og * (d_g * sum_i x8_i) ]
//   each group's two terms added by fused multiply-adds in group order; both integer sums are exact (the CPU's
//   byte dot product: VNNI where it has it, else vpmaddubsw and vpmaddwd): the dequantized weight times the
//   dequantized activations.
//
// Contract (dot_rows.h): every step is lane-wise and in a fixed order: a row's bits depend on that row only,
// never on M, the tile or the thread, and the scalar fallback (no AVX2) takes the same steps. The activations are
// rounded to 8 bits: this is not the float model's product, and what it costs is what
// `radixgate bench accuracy --quantization w4a8` measures.
#include <ATen/ATen.h>

#include "dot_rows.h"

#include <cstdint>
#include <cstring>

namespace {

constexpr int64_t LANES = radixgate::DOT_LANES;
constexpr int64_t GROUP = radixgate::ACTIVATION_GROUP;  // inputs per (scale, min) and per activation step
constexpr int64_t CHUNKS = 4;                            // 8 inputs each: 4 in the low nibbles, 4 in the high ones

struct Int4Weight {
  static constexpr int64_t GROUP_BYTES = CHUNKS * LANES * 4;
  static constexpr bool HAS_MIN = true;

  static int32_t lane_dot(const uint8_t* qg, int64_t l, const int8_t* x8) {
    int32_t s = 0;
    for (int64_t c = 0; c < CHUNKS; ++c)
      for (int64_t j = 0; j < 4; ++j) {
        const uint8_t byte = qg[(c * LANES + l) * 4 + j];
        s += (byte & 0xF) * x8[8 * c + j] + (byte >> 4) * x8[8 * c + 4 + j];
      }
    return s;
  }

#if defined(RADIXGATE_DOT_VEC)
  template <int R>
  static void dot8(const uint8_t* qg, int64_t h, const int8_t* x8, int64_t row_stride, __m256i (&dots)[R]) {
    const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
    // VNNI: int32 sums as it goes; else pairs of byte products summed into 16 bits first:
    // |sum| <= 8 * 2 * 15 * 127 = 30480 fits (no saturation), widened once at the end
    __m256i acc[R];
    for (int i = 0; i < R; ++i) acc[i] = _mm256_setzero_si256();
    for (int64_t c = 0; c < CHUNKS; ++c) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qg + (c * LANES + 8 * h) * 4));
      const __m256i low = _mm256_and_si256(v, low_nibbles);
      const __m256i high = _mm256_and_si256(_mm256_srli_epi16(v, 4), low_nibbles);
      for (int i = 0; i < R; ++i) {
        int32_t lo, hi;
        std::memcpy(&lo, x8 + i * row_stride + 8 * c, 4);
        std::memcpy(&hi, x8 + i * row_stride + 8 * c + 4, 4);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
        acc[i] = _mm256_dpbusd_epi32(acc[i], low, _mm256_set1_epi32(lo));
        acc[i] = _mm256_dpbusd_epi32(acc[i], high, _mm256_set1_epi32(hi));
#else
        acc[i] = _mm256_add_epi16(acc[i], _mm256_maddubs_epi16(low, _mm256_set1_epi32(lo)));
        acc[i] = _mm256_add_epi16(acc[i], _mm256_maddubs_epi16(high, _mm256_set1_epi32(hi)));
#endif
      }
    }
    for (int i = 0; i < R; ++i) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
      dots[i] = acc[i];
#else
      dots[i] = _mm256_madd_epi16(acc[i], _mm256_set1_epi16(1));
#endif
    }
  }
#endif
};

}  // namespace

at::Tensor int4_dot_rows(const at::Tensor& x, const at::Tensor& q, const at::Tensor& scale_min, int64_t n) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "x must be contiguous (M, K)");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16, "x must be float32 or bfloat16");
  const int64_t k = x.size(1), groups = k / GROUP;
  TORCH_CHECK(k % GROUP == 0, "K must be a multiple of ", GROUP);
  TORCH_CHECK(q.scalar_type() == at::kByte && q.is_contiguous() && q.dim() == 5 && q.size(1) == groups &&
              q.size(2) == CHUNKS && q.size(3) == LANES && q.size(4) == 4,
              "q must be contiguous uint8 (n/16, K/32, 4, 16, 4)");
  const bool is_half = scale_min.scalar_type() == at::kHalf;
  TORCH_CHECK((is_half || scale_min.scalar_type() == at::kFloat) && scale_min.is_contiguous() &&
              scale_min.numel() == q.size(0) * groups * 2 * LANES,
              "scale_min must be float16 or float32 (n/16, K/32, 2, 16)");
  TORCH_CHECK(q.size(0) * LANES >= n && n > (q.size(0) - 1) * LANES, "n does not fit the blocks");
  if (is_half) return radixgate::dot_rows<Int4Weight>(x, q, radixgate::Scales<c10::Half, true>{
      scale_min.data_ptr<c10::Half>(), groups}, n);
  return radixgate::dot_rows<Int4Weight>(x, q, radixgate::Scales<float, true>{scale_min.data_ptr<float>(), groups}, n);
}

// GGUF's Q4_K super-blocks as the file has them: sc_m and d_dmin as int4_super_rows takes them (group_scales.h)
at::Tensor int4_super_dot_rows(const at::Tensor& x, const at::Tensor& q, const at::Tensor& sc_m,
                               const at::Tensor& d_dmin, int64_t n) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "x must be contiguous (M, K)");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16, "x must be float32 or bfloat16");
  const int64_t k = x.size(1), groups = k / GROUP;
  TORCH_CHECK(k % 256 == 0, "K must be a multiple of 256");
  TORCH_CHECK(q.scalar_type() == at::kByte && q.is_contiguous() && q.dim() == 5 && q.size(1) == groups &&
              q.size(2) == CHUNKS && q.size(3) == LANES && q.size(4) == 4,
              "q must be contiguous uint8 (n/16, K/32, 4, 16, 4)");
  TORCH_CHECK(sc_m.scalar_type() == at::kByte && sc_m.is_contiguous() && sc_m.numel() == q.size(0) * groups * 2 * LANES,
              "sc_m must be uint8 (n/16, K/32, 2, 16)");
  TORCH_CHECK(d_dmin.scalar_type() == at::kHalf && d_dmin.is_contiguous() &&
              d_dmin.numel() == q.size(0) * (groups / 8) * 2 * LANES, "d_dmin must be float16 (n/16, K/256, 2, 16)");
  TORCH_CHECK(q.size(0) * LANES >= n && n > (q.size(0) - 1) * LANES, "n does not fit the blocks");
  return radixgate::dot_rows<Int4Weight>(x, q, radixgate::SuperScales<uint8_t, true>{
      sc_m.data_ptr<uint8_t>(), d_dmin.data_ptr<c10::Half>(), groups, 8}, n);
}
