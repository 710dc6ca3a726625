#pragma once
// A window edge recorded by a hook: the only thing the begin/end callbacks do is append one of these.
#include <cstdint>

#include "dooly/energy/key_table.hpp"

namespace dooly::energy {

namespace flags {
// The window nests on its thread's stack (kernels, regions, copies, fences). Without it the window is free
// (sections: start/stop in any order); free windows get inclusive figures only.
inline constexpr uint32_t nested = 1u << 0;
}  // namespace flags

struct Event {
  int64_t t_ns = 0;
  KeyId key = 0;
  uint32_t thread = 0;
  int32_t device = -1;  // CUDA ordinal the work ran on; -1 = host / unknown (charged on every channel)
  bool begin = true;
  uint32_t flags = flags::nested;
};

}  // namespace dooly::energy
