#pragma once
// The pieces of CUPTI's C ABI that dooly uses, declared here from CUPTI's documented layouts (CUDA 12/13,
// CUPTI_API_VERSION 130001) so that dooly builds without the CUDA toolkit and loads libcupti with dlopen. The
// stub library of the tests declares its own copy independently; the NVTX part meets the real NVTX (the toolkit's
// nvtx3 headers) in tests/cupti/injection_app.cpp where the headers are installed.
//
// Activity records are read by offset from the start of the record: the fields dooly reads sit in the part of
// each record that has kept its place across versions (CUpti_ActivityKernel4..10, Memcpy5..6, Memset3..4).
#include <cstddef>
#include <cstdint>

namespace dooly::cupti::abi {

using Result = int;  // CUptiResult
inline constexpr Result kSuccess = 0;
inline constexpr Result kErrorMaxLimitReached = 12;  // cuptiActivityGetNextRecord: no more records
inline constexpr Result kErrorNotInitialized = 15;
inline constexpr Result kErrorInsufficientPrivileges = 35;
inline constexpr Result kErrorMultipleSubscribers = 39;

// CUpti_ActivityKind
inline constexpr int kKindMemcpy = 1;
inline constexpr int kKindMemset = 2;
inline constexpr int kKindKernel = 3;
inline constexpr int kKindConcurrentKernel = 10;

inline constexpr uint32_t kFlushForced = 1;  // CUPTI_ACTIVITY_FLAG_FLUSH_FORCED

// NVTX's injection interface (nvtx3/nvtxDetail/nvtxTypes.h, nvtxInit.h): NVTX loads the library that
// NVTX_INJECTION64_PATH names, calls its InitializeInjectionNvtx2(getExportTable), and the library writes its own
// functions into NVTX's per-module function tables. Each module's table is an array of pointers to NVTX's
// function-pointer slots, indexed by the callback ids below (valid ids 1..size).
using NvtxFunctionPointer = void (*)();
using NvtxFunctionTable = NvtxFunctionPointer**;
using NvtxGetExportTable = const void* (*)(uint32_t export_table_id);
struct NvtxExportTableCallbacks {  // export table NVTX_ETID_CALLBACKS
  size_t struct_size;
  int (*GetModuleFunctionTable)(int module, NvtxFunctionTable* out_table, unsigned int* out_size);  // 1: found
};
inline constexpr uint32_t kNvtxEtidCallbacks = 1;
inline constexpr int kNvtxModuleCore = 1, kNvtxModuleCore2 = 5;
enum NvtxCoreCbid : unsigned {  // NVTX_CBID_CORE_*
  kNvtxRangeStartEx = 4,
  kNvtxRangeStartA = 5,
  kNvtxRangeEnd = 7,
  kNvtxRangePushEx = 8,
  kNvtxRangePushA = 9,
  kNvtxRangePop = 11,
};
enum NvtxCore2Cbid : unsigned {  // NVTX_CBID_CORE2_*
  kNvtxDomainRangeStartEx = 2,
  kNvtxDomainRangeEnd = 3,
  kNvtxDomainRangePushEx = 4,
  kNvtxDomainRangePop = 5,
  kNvtxDomainRegisterStringA = 10,
  kNvtxDomainCreateA = 12,
};

// Record prefixes: {offset, width} of each field read.
struct KernelRecord {                                // CUpti_ActivityKernel4..10 (kind CONCURRENT_KERNEL or KERNEL)
  static constexpr size_t registers_per_thread = 6;  // uint16_t
  static constexpr size_t start = 16, end = 24;      // uint64_t, ns on CUPTI's clock
  static constexpr size_t device_id = 40, context_id = 44, stream_id = 48;  // uint32_t
  static constexpr size_t grid_x = 52, block_x = 64;                        // int32_t x3 each
  static constexpr size_t static_shared = 76, dynamic_shared = 80;          // int32_t
  static constexpr size_t correlation_id = 92;                              // uint32_t
  static constexpr size_t name = 104;                                       // const char*
  static constexpr size_t min_size = 112;
};
struct MemcpyRecord {                     // CUpti_ActivityMemcpy5..6
  static constexpr size_t copy_kind = 4;  // uint8_t
  static constexpr size_t bytes = 8, start = 16, end = 24;
  static constexpr size_t device_id = 32, context_id = 36, stream_id = 40, correlation_id = 44;
  static constexpr size_t min_size = 48;
};
struct MemsetRecord {  // CUpti_ActivityMemset3..4
  static constexpr size_t bytes = 8, start = 16, end = 24;
  static constexpr size_t device_id = 32, context_id = 36, stream_id = 40, correlation_id = 44;
  static constexpr size_t min_size = 48;
};
// CUpti_ActivityMemcpyKind
inline const char* memcpy_kind_name(uint8_t kind) noexcept {
  switch (kind) {
    case 1:
      return "HtoD";
    case 2:
      return "DtoH";
    case 3:
      return "HtoA";
    case 4:
      return "AtoH";
    case 5:
      return "AtoA";
    case 6:
      return "AtoD";
    case 7:
      return "DtoA";
    case 8:
      return "DtoD";
    case 9:
      return "HtoH";
    case 10:
      return "PtoP";
    default:
      return "unknown";
  }
}

struct Activity {  // CUpti_Activity: every record starts with its kind
  int kind;
};

// The NVTX argument dooly reads.
struct NvtxEventAttributes {  // nvtxEventAttributes_t (version 2/3): the message is what dooly reads
  uint16_t version;
  uint16_t size;
  uint32_t category;
  int32_t color_type;
  uint32_t color;
  int32_t payload_type;
  int32_t reserved0;
  uint64_t payload;
  int32_t message_type;  // 1 ASCII, 2 UNICODE, 3 REGISTERED
  const void* message;   // const char* / const wchar_t* / nvtxStringHandle_t
};
inline constexpr int32_t kNvtxMessageAscii = 1, kNvtxMessageRegistered = 3;
static_assert(offsetof(NvtxEventAttributes, message_type) == 32 && offsetof(NvtxEventAttributes, message) == 40);

using BufferRequested = void (*)(uint8_t** buffer, size_t* size, size_t* max_records);
using BufferCompleted = void (*)(void* context, uint32_t stream_id, uint8_t* buffer, size_t size, size_t valid_size);

// The functions, by the names dlsym finds.
struct Api {
  Result (*cuptiGetResultString)(Result, const char**) = nullptr;
  Result (*cuptiActivityRegisterCallbacks)(BufferRequested, BufferCompleted) = nullptr;
  Result (*cuptiActivityEnable)(int) = nullptr;
  Result (*cuptiActivityDisable)(int) = nullptr;
  Result (*cuptiActivityFlushAll)(uint32_t) = nullptr;
  Result (*cuptiActivityGetNextRecord)(uint8_t*, size_t, Activity**) = nullptr;
  Result (*cuptiActivityGetNumDroppedRecords)(void*, uint32_t, size_t*) = nullptr;
  Result (*cuptiGetTimestamp)(uint64_t*) = nullptr;
};

}  // namespace dooly::cupti::abi
