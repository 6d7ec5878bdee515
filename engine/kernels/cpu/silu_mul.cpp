// The gated MLP's activation: silu(gate) * up over a fused gate/up projection, float32 and bfloat16 rows.
//
// silu_mul(gate_up (T, 2I)) -> (T, I): y = g / (1 + exp(-g)) * u with g, u the row's two halves, float32
// inside, rounded once (torch rounds silu(g) and the product separately). Elementwise: batch-free bits. With
// vectors (AVX2 / AVX-512) exp is native_common.h's exp16 (~2 ulp); without, std::exp.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "native_common.h"

#include <cmath>

namespace {

using radixgate::to_float;

#if defined(RADIXGATE_VEC16)
using namespace radixgate;

inline f32x16 silu_mul16(f32x16 g, f32x16 u) {  // g / (1 + exp(-g)) * u
  return mul16(div16(g, add16(set16(1.0f), exp16(sub16(zero16(), g)))), u);
}

// One row: 16 outputs at a time; a tail of fewer goes through the same lanes.
template <typename T>
void silu_mul_row(const T* g, const T* u, T* dst, int64_t width) {
  int64_t j = 0;
  for (; j + 16 <= width; j += 16) store16(dst + j, silu_mul16(load16(g + j), load16(u + j)));
  if (j < width) {
    alignas(64) float gl[16] = {0}, ul[16] = {0};
    for (int64_t l = 0; j + l < width; ++l) {
      gl[l] = to_float(g[j + l]);
      ul[l] = to_float(u[j + l]);
    }
    store_lanes(dst + j, silu_mul16(load16(gl), load16(ul)), width - j);
  }
}
#else
template <typename T>
void silu_mul_row(const T* g, const T* u, T* dst, int64_t width) {
  for (int64_t j = 0; j < width; ++j) {
    const float gf = to_float(g[j]);
    dst[j] = static_cast<T>(gf / (1.0f + std::exp(-gf)) * to_float(u[j]));
  }
}
#endif

template <typename T>
void run(const at::Tensor& gate_up, at::Tensor& out) {
  const int64_t tokens = gate_up.size(0), width = gate_up.size(1) / 2;
  const T* src = gate_up.data_ptr<T>();
  T* dst = out.data_ptr<T>();
  const int64_t grain = tokens * width < 65536 ? tokens : 1;
  at::parallel_for(0, tokens, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) silu_mul_row(src + t * 2 * width, src + t * 2 * width + width, dst + t * width, width);
  });
}

}  // namespace

at::Tensor silu_mul(const at::Tensor& gate_up) {
  TORCH_CHECK(gate_up.dim() == 2 && gate_up.is_contiguous() && gate_up.size(1) % 2 == 0,
              "gate_up must be contiguous (T, 2I)");
  at::Tensor out = at::empty({gate_up.size(0), gate_up.size(1) / 2}, gate_up.options());
  if (gate_up.scalar_type() == at::kFloat) {
    run<float>(gate_up, out);
  } else {
    TORCH_CHECK(gate_up.scalar_type() == at::kBFloat16, "silu_mul takes float32 or bfloat16");
    run<c10::BFloat16>(gate_up, out);
  }
  return out;
}
