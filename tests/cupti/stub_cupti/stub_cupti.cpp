// A stub libcupti.so for tests: the CUPTI functions dooly uses, delivering activity buffers of recorded kernel,
// memcpy and memset records through the client's real buffer callbacks. Its record layouts are written here from
// CUPTI's documented structs (CUpti_ActivityKernel10, Memcpy6, Memset4), independently of dooly's offsets, so a slip on
// either side shows up as wrong values. Tests drive it through the stub_cupti_* functions (found with dlsym in the same
// loaded copy).
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

extern "C" {
typedef int CUptiResult;
typedef void (*RequestFn)(uint8_t**, size_t*, size_t*);
typedef void (*CompleteFn)(void*, uint32_t, uint8_t*, size_t, size_t);
}

namespace {

struct __attribute__((packed, aligned(8))) Kernel10 {
  int32_t kind;
  uint8_t cacheConfig;
  uint8_t sharedMemoryConfig;
  uint16_t registersPerThread;
  int32_t partitionedGlobalCacheRequested;
  int32_t partitionedGlobalCacheExecuted;
  uint64_t start;
  uint64_t end;
  uint64_t completed;
  uint32_t deviceId;
  uint32_t contextId;
  uint32_t streamId;
  int32_t gridX, gridY, gridZ;
  int32_t blockX, blockY, blockZ;
  int32_t staticSharedMemory;
  int32_t dynamicSharedMemory;
  uint32_t localMemoryPerThread;
  uint32_t localMemoryTotal;
  uint32_t correlationId;
  int64_t gridId;
  const char* name;
  void* reserved0;
  uint64_t queued;
  uint64_t submitted;
  uint8_t rest[80];  // the later fields: the client must step over them by CUPTI's record size
};
struct __attribute__((packed, aligned(8))) Memcpy6 {
  int32_t kind;
  uint8_t copyKind, srcKind, dstKind, flags;
  uint64_t bytes;
  uint64_t start;
  uint64_t end;
  uint32_t deviceId;
  uint32_t contextId;
  uint32_t streamId;
  uint32_t correlationId;
  uint32_t runtimeCorrelationId;
  uint32_t pad;
  void* reserved0;
  uint64_t graphNodeId;
  uint32_t graphId;
  uint32_t channelID;
  int32_t channelType;
  uint8_t isDeviceLaunched;
  uint8_t pad2[3];
  uint64_t copyCount;
};
struct __attribute__((packed, aligned(8))) Memset4 {
  int32_t kind;
  uint32_t value;
  uint64_t bytes;
  uint64_t start;
  uint64_t end;
  uint32_t deviceId;
  uint32_t contextId;
  uint32_t streamId;
  uint32_t correlationId;
  uint16_t flags;
  uint16_t memoryKind;
  uint32_t pad;
  void* reserved0;
  uint64_t graphNodeId;
  uint32_t graphId;
  uint32_t channelID;
  int32_t channelType;
  uint8_t isDeviceLaunched;
  uint8_t pad2[3];
};
static_assert(sizeof(Kernel10) == 216 && sizeof(Memcpy6) == 96 && sizeof(Memset4) == 88);

size_t record_size(int32_t kind) {
  switch (kind) {
    case 10:
    case 3:
      return sizeof(Kernel10);
    case 1:
      return sizeof(Memcpy6);
    case 2:
      return sizeof(Memset4);
    default:
      return 0;
  }
}

std::mutex mu;
RequestFn request_fn = nullptr;
CompleteFn complete_fn = nullptr;
std::set<int> enabled;
std::vector<std::vector<uint8_t>> queued;  // records waiting for the next delivery, as bytes
std::set<std::string> names;               // kernel names: their pointers stay valid, as CUPTI's do
int64_t clock_offset_ns = 1'000'000'000'000;
size_t dropped_next = 0, dropped_total = 0;
size_t incomplete_queued = 0;  // queued records with no end yet: a default flush holds them back, as CUPTI does
int default_flushes = 0;       // cuptiActivityFlushAll(0) calls (the tracer's periodic flush)

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <typename T>
void enqueue(const T& rec) {
  std::vector<uint8_t> bytes(sizeof(T));
  std::memcpy(bytes.data(), &rec, sizeof(T));
  queued.push_back(std::move(bytes));
}

}  // namespace

extern "C" {

// --- CUPTI ---
CUptiResult cuptiGetResultString(CUptiResult r, const char** s) {
  *s = r == 0 ? "CUPTI_SUCCESS" : "CUPTI_ERROR_STUB";
  return 0;
}
CUptiResult cuptiActivityRegisterCallbacks(RequestFn req, CompleteFn comp) {
  std::lock_guard<std::mutex> lock(mu);
  request_fn = req;
  complete_fn = comp;
  return 0;
}
CUptiResult cuptiActivityEnable(int kind) {
  std::lock_guard<std::mutex> lock(mu);
  enabled.insert(kind);
  return 0;
}
CUptiResult cuptiActivityDisable(int kind) {
  std::lock_guard<std::mutex> lock(mu);
  enabled.erase(kind);
  return 0;
}
int stub_cupti_deliver();
// CUPTI: a forced flush (flag 1) hands over every buffer; a default one (0) only buffers whose records are all
// complete, so here nothing while a queued record has no end.
CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (flag == 0) ++default_flushes;
    if (flag == 0 && incomplete_queued > 0) return 0;
  }
  stub_cupti_deliver();
  return 0;
}
// Walks a buffer the way CUPTI does: *record is null to start, else the previous record.
CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, void** record) {
  uint8_t* next = buffer;
  if (*record) {
    int32_t kind;
    std::memcpy(&kind, *record, 4);
    next = static_cast<uint8_t*>(*record) + record_size(kind);
  }
  if (next + 4 > buffer + valid) return 12;  // CUPTI_ERROR_MAX_LIMIT_REACHED
  *record = next;
  return 0;
}
CUptiResult cuptiActivityGetNumDroppedRecords(void*, uint32_t, size_t* dropped) {
  std::lock_guard<std::mutex> lock(mu);
  *dropped = dropped_next;
  dropped_next = 0;
  return 0;
}
CUptiResult cuptiGetTimestamp(uint64_t* t) {
  *t = static_cast<uint64_t>(steady_ns() + clock_offset_ns);
  return 0;
}
// --- test controls ---
void stub_cupti_reset() {
  std::lock_guard<std::mutex> lock(mu);
  queued.clear();
  incomplete_queued = 0;
  default_flushes = 0;
  enabled.clear();
  dropped_next = dropped_total = 0;
}
int64_t stub_cupti_clock_offset() { return clock_offset_ns; }
int stub_cupti_queued() {
  std::lock_guard<std::mutex> lock(mu);
  return static_cast<int>(queued.size());
}
int stub_cupti_default_flushes() {
  std::lock_guard<std::mutex> lock(mu);
  return default_flushes;
}
int stub_cupti_enabled(int kind) {
  std::lock_guard<std::mutex> lock(mu);
  return enabled.count(kind) ? 1 : 0;
}
void stub_cupti_kernel(const char* name, uint64_t start, uint64_t end, uint32_t device, uint32_t context,
                       uint32_t stream) {
  std::lock_guard<std::mutex> lock(mu);
  Kernel10 k{};
  k.kind = 10;
  k.registersPerThread = 32;
  k.start = start;
  k.end = end;
  k.completed = end;
  k.deviceId = device;
  k.contextId = context;
  k.streamId = stream;
  k.gridX = 1024;
  k.gridY = k.gridZ = 1;
  k.blockX = 256;
  k.blockY = k.blockZ = 1;
  k.correlationId = static_cast<uint32_t>(queued.size() + 1);
  k.name = names.insert(name).first->c_str();
  if (end == 0) ++incomplete_queued;
  enqueue(k);
}
void stub_cupti_memcpy(uint8_t copy_kind, uint64_t bytes, uint64_t start, uint64_t end, uint32_t device,
                       uint32_t stream) {
  std::lock_guard<std::mutex> lock(mu);
  Memcpy6 m{};
  m.kind = 1;
  m.copyKind = copy_kind;
  m.bytes = bytes;
  m.start = start;
  m.end = end;
  m.deviceId = device;
  m.contextId = 1;
  m.streamId = stream;
  enqueue(m);
}
void stub_cupti_memset(uint64_t bytes, uint64_t start, uint64_t end, uint32_t device, uint32_t stream) {
  std::lock_guard<std::mutex> lock(mu);
  Memset4 m{};
  m.kind = 2;
  m.bytes = bytes;
  m.start = start;
  m.end = end;
  m.deviceId = device;
  m.contextId = 1;
  m.streamId = stream;
  enqueue(m);
}
// A record of a kind dooly does not read (CUPTI_ACTIVITY_KIND_OVERHEAD-like: only its kind matters here).
void stub_cupti_drop_next(size_t n) {
  std::lock_guard<std::mutex> lock(mu);
  dropped_next += n;
}
// Hands the queued records to the client in as many buffers as they need; returns how many were delivered. A
// buffer request the client refuses drops the records it would have held (counted for GetNumDroppedRecords).
int stub_cupti_deliver() {
  std::vector<std::vector<uint8_t>> recs;
  RequestFn req;
  CompleteFn comp;
  {
    std::lock_guard<std::mutex> lock(mu);
    recs.swap(queued);
    incomplete_queued = 0;
    req = request_fn;
    comp = complete_fn;
  }
  if (!req || !comp) return 0;
  int delivered = 0;
  size_t i = 0;
  while (i < recs.size()) {
    uint8_t* buf = nullptr;
    size_t size = 0, max_records = 0;
    req(&buf, &size, &max_records);
    if (!buf || size < recs[i].size()) {
      {
        std::lock_guard<std::mutex> lock(mu);
        dropped_next += recs.size() - i;
      }
      comp(nullptr, 0, buf, size, 0);
      return delivered;
    }
    size_t used = 0;
    while (i < recs.size() && used + recs[i].size() <= size) {
      std::memcpy(buf + used, recs[i].data(), recs[i].size());
      used += recs[i].size();
      ++i;
      ++delivered;
    }
    comp(nullptr, 0, buf, size, used);
  }
  return delivered;
}
}  // extern "C"

extern "C" {
// Buffers the client handed out and CUPTI still holds (records being collected): taken now, given back by
// stub_cupti_release_held (empty). Returns how many the client gave.
static std::vector<uint8_t*> held;
int stub_cupti_hold_buffers(int n) {
  int got = 0;
  for (int i = 0; i < n; ++i) {
    uint8_t* buf = nullptr;
    size_t size = 0, max_records = 0;
    if (request_fn) request_fn(&buf, &size, &max_records);
    if (buf) {
      held.push_back(buf);
      ++got;
    }
  }
  return got;
}
void stub_cupti_release_held() {
  for (uint8_t* b : held)
    if (complete_fn) complete_fn(nullptr, 0, b, 0, 0);
  held.clear();
}
}  // extern "C"
