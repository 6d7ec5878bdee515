// Weight-only int8 products for a few rows at a time (generated tokens: decode and verify rows).
//
// int8_rows(x (M, K) float32 or bfloat16, q int8 (n/16, K, 16), scale (n/16, K/G, 16) float16 or float32, n)
//   -> (M, n) in x's dtype
//   Symmetric int8 weights with one scale per G inputs of an output (G = K / scale.size(1): 32 or 16),
//   w = q * scale, exact in float32: GGUF's Q8_0 block (engine.kernels.cpu.quantized_linear's int8, float16
//   scales per 32), and the file's own blocks of Q5_0 (q - 16, float16 d per 32) and Q6_K (q - 32, the float32
//   d * scale per 16) kept by engine.kernels.cpu.gguf_blocks. Laid out by pack_lanes
//   (engine.kernels.cpu.row_linear): blocks of 16 outputs across the vector lanes, K innermost-but-one, then
//   the scales per block and group; n padded to a multiple of 16 with zeros.
//   y_o = sum_g scale_og * (x_g . q_og): each group's dot product in float32, inputs in order, scaled and
//   added in group order, rounded once to x's dtype.
//
// Contract: output o of row r is one lane of one accumulator (q widened exactly to float32, bfloat16 x
// widened exactly): no horizontal sums and no step that depends on M, the tile or the thread.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "group_scales.h"
#include "native_common.h"

#include <algorithm>
#include <cstdint>

namespace {

constexpr int64_t LANES = 16;

// rows [r, r + R) x blocks [b, b + C) of 16 outputs; group: inputs per scale
template <int R, int C, typename T, typename Scales>
void tile(const T* x, int64_t k, int64_t group, const int8_t* q, const Scales& scale, int64_t b, int64_t r, int64_t n,
          T* out) {
  const int64_t groups = k / group;
#if defined(RADIXGATE_VEC16)
  using namespace radixgate;
  f32x16 acc[R][C];
  for (int i = 0; i < R; ++i)
    for (int c = 0; c < C; ++c) acc[i][c] = zero16();
  add_sliced_products<R, C>(acc, x, k, q, k * LANES, b, r, group, scale);
  store_tile<R, C>(acc, out, r, b, n);
#else
  using radixgate::to_float;
  for (int i = 0; i < R; ++i)
    for (int c = 0; c < C; ++c) {
      float acc[LANES] = {0};
      for (int64_t g = 0; g < groups; ++g) {
        float part[LANES] = {0};
        for (int64_t j = g * group; j < (g + 1) * group; ++j)
          for (int64_t l = 0; l < LANES; ++l)
            part[l] += to_float(x[(r + i) * k + j]) * static_cast<float>(q[((b + c) * k + j) * LANES + l]);
        for (int64_t l = 0; l < LANES; ++l) acc[l] += part[l] * scale.scalar(b + c, g, l);
      }
      const int64_t first = (b + c) * LANES;
      for (int64_t l = 0; l < LANES && first + l < n; ++l) out[(r + i) * n + first + l] = static_cast<T>(acc[l]);
    }
#endif
}

template <typename T, typename Scales>
void run(const at::Tensor& x, const at::Tensor& q, const Scales& sp, int64_t group, int64_t n, at::Tensor& out) {
  const T* xp = x.data_ptr<T>();
  const int8_t* qp = q.data_ptr<int8_t>();
  T* op = out.data_ptr<T>();
  const int64_t k = x.size(1);
  radixgate::for_each_tile(x.size(0), q.size(0), [&]<int R, int C>(int64_t r, int64_t b) {
    tile<R, C, T, Scales>(xp, k, group, qp, sp, b, r, n, op);
  });
}

template <typename Scales>
at::Tensor run_any(const at::Tensor& x, const at::Tensor& q, const Scales& scales, int64_t group, int64_t n) {
  at::Tensor out = at::empty({x.size(0), n}, x.options());
  if (x.scalar_type() == at::kFloat) run<float>(x, q, scales, group, n, out);
  else run<c10::BFloat16>(x, q, scales, group, n, out);
  return out;
}

void check_rows(const at::Tensor& x, const at::Tensor& q, int64_t n) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "x must be contiguous (M, K)");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16, "x must be float32 or bfloat16");
  TORCH_CHECK(q.scalar_type() == at::kChar && q.is_contiguous() && q.dim() == 3 && q.size(1) == x.size(1) &&
              q.size(2) == LANES, "q must be contiguous int8 (n/16, K, 16)");
  TORCH_CHECK(q.size(0) * LANES >= n && n > (q.size(0) - 1) * LANES, "n does not fit the blocks");
}

}  // namespace

at::Tensor int8_rows(const at::Tensor& x, const at::Tensor& q, const at::Tensor& scale, int64_t n) {
  check_rows(x, q, n);
  const bool is_half = scale.scalar_type() == at::kHalf;
  TORCH_CHECK((is_half || scale.scalar_type() == at::kFloat) && scale.is_contiguous() && scale.dim() == 3 &&
              scale.size(0) == q.size(0) && scale.size(2) == LANES, "scale must be float16 or float32 (n/16, K/G, 16)");
  const int64_t groups = scale.size(1);
  TORCH_CHECK(groups > 0 && x.size(1) % groups == 0 && (x.size(1) / groups == 16 || x.size(1) / groups == 32),
              "scale must hold one group per 16 or 32 inputs");
  const int64_t group = x.size(1) / groups;
  if (is_half) return run_any(x, q, radixgate::Scales<c10::Half>{scale.data_ptr<c10::Half>(), groups}, group, n);
  return run_any(x, q, radixgate::Scales<float>{scale.data_ptr<float>(), groups}, group, n);
}

// GGUF's Q6_K super-blocks as the file has them (group_scales.h): sc int8 (n/16, K/16, 16), each group of 16
// inputs' scale; d float16 (n/16, K/256, 16), each super-block's d
at::Tensor int8_super_rows(const at::Tensor& x, const at::Tensor& q, const at::Tensor& sc, const at::Tensor& d,
                           int64_t n) {
  check_rows(x, q, n);
  const int64_t groups = x.size(1) / 16;
  TORCH_CHECK(x.size(1) % 256 == 0, "K must be a multiple of 256");
  TORCH_CHECK(sc.scalar_type() == at::kChar && sc.is_contiguous() && sc.numel() == q.size(0) * groups * LANES,
              "sc must be int8 (n/16, K/16, 16)");
  TORCH_CHECK(d.scalar_type() == at::kHalf && d.is_contiguous() && d.numel() == q.size(0) * (groups / 16) * LANES,
              "d must be float16 (n/16, K/256, 16)");
  return run_any(x, q, radixgate::SuperScales<int8_t>{sc.data_ptr<int8_t>(), d.data_ptr<c10::Half>(), groups, 16},
                 16, n);
}
