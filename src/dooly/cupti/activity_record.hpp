#pragma once
// One CUPTI activity record (kernel, memcpy, memset) read into dooly's terms, by the field offsets of
// cupti_abi.hpp. Times are still on CUPTI's clock here.
#include <cstdint>

#include "dooly/cupti/cupti_abi.hpp"

namespace dooly::cupti {

enum class RecordKind { kernel, memcpy, memset, other };

struct GpuRecord {
  RecordKind kind = RecordKind::other;
  uint64_t start_ns = 0, end_ns = 0;  // CUPTI's clock
  uint32_t device = 0, context = 0, stream = 0, correlation = 0;
  const char* name = nullptr;  // kernels: CUPTI's string, shared by every record of that kernel
  uint8_t copy_kind = 0;       // memcpy: CUpti_ActivityMemcpyKind
  uint64_t bytes = 0;          // memcpy, memset
  int32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint16_t registers_per_thread = 0;
  int32_t shared_bytes = 0;  // static + dynamic
};

// false for kinds dooly does not read (the record is skipped) and for records CUPTI left incomplete
// (an end of 0 or before the start: the work had not finished when the buffer was flushed).
bool read_record(const abi::Activity* record, GpuRecord& out) noexcept;

}  // namespace dooly::cupti
