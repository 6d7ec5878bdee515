// The gated MLP's activation: silu(gate) * up over a fused gate/up projection, float32 and bfloat16 rows.
//
// silu_mul(gate_up (T, 2I)) -> (T, I): y = g / (1 + exp(-g)) * u with g, u the row's two halves, float32
// inside, rounded once (torch rounds silu(g) and the product separately). Elementwise: batch-free bits.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "native_common.h"

#include <cmath>

namespace {

using radixgate::to_float;


template <typename T>
void run(const at::Tensor& gate_up, at::Tensor& out) {
  const int64_t tokens = gate_up.size(0), width = gate_up.size(1) / 2;
  const T* src = gate_up.data_ptr<T>();
  T* dst = out.data_ptr<T>();
  const int64_t grain = tokens * width < 65536 ? tokens : 1;
  at::parallel_for(0, tokens, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const T* g = src + t * 2 * width;
      const T* u = g + width;
      for (int64_t j = 0; j < width; ++j) {
        const float gf = to_float(g[j]);
        dst[t * width + j] = static_cast<T>(gf / (1.0f + std::exp(-gf)) * to_float(u[j]));
      }
    }
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
