// libFuzzer's entry for one target, chosen at compile time (DOOLY_FUZZ_TARGET=recording, analyze, ...).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return dooly::fuzz::DOOLY_FUZZ_TARGET(data, size);
}
