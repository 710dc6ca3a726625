#include "dooly/cupti/activity_record.hpp"

#include <cstring>

namespace dooly::cupti {

namespace {
template <typename T>
T field(const abi::Activity* r, size_t offset) noexcept {
  T v;
  std::memcpy(&v, reinterpret_cast<const char*>(r) + offset, sizeof(T));
  return v;
}
template <typename Layout>
void common_fields(const abi::Activity* r, GpuRecord& out) noexcept {
  out.start_ns = field<uint64_t>(r, Layout::start);
  out.end_ns = field<uint64_t>(r, Layout::end);
  out.device = field<uint32_t>(r, Layout::device_id);
  out.context = field<uint32_t>(r, Layout::context_id);
  out.stream = field<uint32_t>(r, Layout::stream_id);
  out.correlation = field<uint32_t>(r, Layout::correlation_id);
}
}  // namespace

bool read_record(const abi::Activity* r, GpuRecord& out) noexcept {
  out = GpuRecord{};
  switch (r->kind) {
    case abi::kKindConcurrentKernel:
    case abi::kKindKernel:
      out.kind = RecordKind::kernel;
      common_fields<abi::KernelRecord>(r, out);
      out.name = field<const char*>(r, abi::KernelRecord::name);
      for (int i = 0; i < 3; ++i) {
        out.grid[i] = field<int32_t>(r, abi::KernelRecord::grid_x + 4 * static_cast<size_t>(i));
        out.block[i] = field<int32_t>(r, abi::KernelRecord::block_x + 4 * static_cast<size_t>(i));
      }
      out.registers_per_thread = field<uint16_t>(r, abi::KernelRecord::registers_per_thread);
      out.shared_bytes =
          field<int32_t>(r, abi::KernelRecord::static_shared) + field<int32_t>(r, abi::KernelRecord::dynamic_shared);
      break;
    case abi::kKindMemcpy:
      out.kind = RecordKind::memcpy;
      common_fields<abi::MemcpyRecord>(r, out);
      out.copy_kind = field<uint8_t>(r, abi::MemcpyRecord::copy_kind);
      out.bytes = field<uint64_t>(r, abi::MemcpyRecord::bytes);
      break;
    case abi::kKindMemset:
      out.kind = RecordKind::memset;
      common_fields<abi::MemsetRecord>(r, out);
      out.bytes = field<uint64_t>(r, abi::MemsetRecord::bytes);
      break;
    default:
      return false;
  }
  return out.end_ns != 0 && out.end_ns >= out.start_ns;
}

}  // namespace dooly::cupti
