#pragma once
// NVTX as a module that uses it sees it, for the tracer's tests and bench/cupti_nvtx_bench.cpp: the injection
// tables NVTX hands to libdooly_cupti.so's entry, and calls through their slots as nvtx3's inline functions make them.
#include <stdexcept>

#include "dooly/cupti/cupti_abi.hpp"
#include "dooly/cupti/tracer.hpp"

namespace dooly::testing {

namespace abi = cupti::abi;

// NVTX as a module that uses it sees it (nvtx3/nvtxDetail/nvtxImpl.h): per module, an array of pointers to the
// function-pointer slots its nvtx* calls go through, handed to the injection by GetModuleFunctionTable; each call
// reads its slot. One instance: NVTX's export-table getter carries no user pointer.
struct FakeNvtx {
  abi::NvtxFunctionPointer core[16] = {}, core2[16] = {};
  abi::NvtxFunctionPointer* core_table[16] = {};
  abi::NvtxFunctionPointer* core2_table[16] = {};
  abi::NvtxExportTableCallbacks callbacks{sizeof(abi::NvtxExportTableCallbacks), &module_table};

  static FakeNvtx& get() {
    static FakeNvtx n;
    return n;
  }
  static int module_table(int module, abi::NvtxFunctionTable* out, unsigned* size) {
    FakeNvtx& n = get();
    if (module != abi::kNvtxModuleCore && module != abi::kNvtxModuleCore2) return 0;
    *out = module == abi::kNvtxModuleCore ? n.core_table : n.core2_table;
    *size = 15;
    return 1;
  }
  static const void* export_table(uint32_t id) { return id == abi::kNvtxEtidCallbacks ? &get().callbacks : nullptr; }
  // A fresh module (every slot empty) handed to the injection, as NVTX does at a module's first call.
  int inject() {
    for (int i = 0; i < 16; ++i) {
      core[i] = core2[i] = nullptr;
      core_table[i] = &core[i];
      core2_table[i] = &core2[i];
    }
    return cupti::Tracer::install_nvtx(&export_table);
  }
  template <typename Fn, typename... A>
  auto call(abi::NvtxFunctionPointer slot, A... a) {
    if (!slot) throw std::runtime_error("the injection left this NVTX function empty");
    return reinterpret_cast<Fn>(slot)(a...);
  }
  int push(const char* m) { return call<int (*)(const char*)>(core[abi::kNvtxRangePushA], m); }
  int pop() { return call<int (*)()>(core[abi::kNvtxRangePop]); }
  uint64_t start_ex(const abi::NvtxEventAttributes* a) {
    return call<uint64_t (*)(const abi::NvtxEventAttributes*)>(core[abi::kNvtxRangeStartEx], a);
  }
  void end(uint64_t id) { call<void (*)(uint64_t)>(core[abi::kNvtxRangeEnd], id); }
  const void* create_domain(const char* name) {
    return call<const void* (*)(const char*)>(core2[abi::kNvtxDomainCreateA], name);
  }
  const void* register_string(const void* domain, const char* text) {
    return call<const void* (*)(const void*, const char*)>(core2[abi::kNvtxDomainRegisterStringA], domain, text);
  }
  uint64_t domain_start_ex(const void* domain, const abi::NvtxEventAttributes* a) {
    return call<uint64_t (*)(const void*, const abi::NvtxEventAttributes*)>(core2[abi::kNvtxDomainRangeStartEx], domain,
                                                                            a);
  }
  int domain_push_ex(const void* domain, const abi::NvtxEventAttributes* a) {
    return call<int (*)(const void*, const abi::NvtxEventAttributes*)>(core2[abi::kNvtxDomainRangePushEx], domain, a);
  }
  int domain_pop(const void* domain) { return call<int (*)(const void*)>(core2[abi::kNvtxDomainRangePop], domain); }
};

}  // namespace dooly::testing
