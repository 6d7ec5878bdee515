// Weight-only int8 products for a few float32 rows at a time (generated tokens: decode and verify rows).
//
// int8_rows(x (M, K) float32, q int8 (n/16, K, 16), scale (n/16, K/32, 16) float16, n) -> (M, n)
//   The weight of engine.kernels.cpu.quantized_linear's int8 convention (GGUF's Q8_0 block: symmetric, one
//   float16 scale per 32 inputs of an output, w = q * scale, exact in float32), laid out by pack_lanes
//   (engine.kernels.cpu.row_linear): blocks of 16 outputs across the vector lanes, K innermost-but-one, then
//   the scales per block and group; n padded to a multiple of 16 with zeros.
//   y_o = sum_g scale_og * (x_g . q_og): each group's dot product in float32, inputs in order, scaled and
//   added in group order.
//
// Contract: output o of row r is one lane of one accumulator (q widened exactly to float32): no horizontal
// sums and no step that depends on M, the tile or the thread. A quarter of the float32 weight's bytes: where a
// float32 model's int8 head is read every step.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "native_common.h"

#include <algorithm>
#include <cstdint>

namespace {

constexpr int64_t LANES = 16;
constexpr int64_t GROUP = 32;  // inputs per scale

// rows [r, r + R) x blocks [b, b + C) of 16 outputs
template <int R, int C>
void tile(const float* x, int64_t k, const int8_t* q, const c10::Half* scale, int64_t b, int64_t r, int64_t n,
          float* out) {
  const int64_t groups = k / GROUP;
#if defined(RADIXGATE_VEC16)
  using namespace radixgate;
  f32x16 acc[R][C];
  for (int i = 0; i < R; ++i)
    for (int c = 0; c < C; ++c) acc[i][c] = zero16();
  add_sliced_products<R, C>(acc, x, k, q, k * LANES, b, r, GROUP, scale, groups * LANES);
  store_tile<R, C>(acc, out, r, b, n);
#else
  for (int i = 0; i < R; ++i)
    for (int c = 0; c < C; ++c) {
      float acc[LANES] = {0};
      for (int64_t g = 0; g < groups; ++g) {
        float part[LANES] = {0};
        for (int64_t j = g * GROUP; j < (g + 1) * GROUP; ++j)
          for (int64_t l = 0; l < LANES; ++l)
            part[l] += x[(r + i) * k + j] * static_cast<float>(q[((b + c) * k + j) * LANES + l]);
        for (int64_t l = 0; l < LANES; ++l)
          acc[l] += part[l] * radixgate::to_float(scale[((b + c) * groups + g) * LANES + l]);
      }
      const int64_t first = (b + c) * LANES;
      for (int64_t l = 0; l < LANES && first + l < n; ++l) out[(r + i) * n + first + l] = acc[l];
    }
#endif
}

}  // namespace

at::Tensor int8_rows(const at::Tensor& x, const at::Tensor& q, const at::Tensor& scale, int64_t n) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && x.scalar_type() == at::kFloat,
              "x must be contiguous float32 (M, K)");
  TORCH_CHECK(q.scalar_type() == at::kChar && q.is_contiguous() && q.dim() == 3 && q.size(1) == x.size(1) &&
              q.size(2) == LANES, "q must be contiguous int8 (n/16, K, 16)");
  TORCH_CHECK(x.size(1) % GROUP == 0, "K must be a multiple of ", GROUP);
  TORCH_CHECK(scale.scalar_type() == at::kHalf && scale.is_contiguous() &&
              scale.numel() == q.size(0) * (x.size(1) / GROUP) * LANES, "scale must be float16 (n/16, K/32, 16)");
  TORCH_CHECK(q.size(0) * LANES >= n && n > (q.size(0) - 1) * LANES, "n does not fit the blocks");
  at::Tensor out = at::empty({x.size(0), n}, x.options());
  const float* xp = x.data_ptr<float>();
  const int8_t* qp = q.data_ptr<int8_t>();
  const c10::Half* sp = scale.data_ptr<c10::Half>();
  float* op = out.data_ptr<float>();
  const int64_t k = x.size(1);
  radixgate::for_each_tile(x.size(0), q.size(0), [&]<int R, int C>(int64_t r, int64_t b) {
    tile<R, C>(xp, k, qp, sp, b, r, n, op);
  });
  return out;
}
