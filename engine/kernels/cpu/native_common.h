// Helpers shared by radixgate's native CPU kernels (engine.kernels.cpu.native builds them).
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>
#include <cstring>

namespace radixgate {

inline float to_float(float v) { return v; }
inline float to_float(c10::BFloat16 v) {  // exact: a bfloat16 is the top half of a float32
  const uint32_t bits = static_cast<uint32_t>(v.x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

}  // namespace radixgate
