/* A fake libnvidia-ml.so.1 that serves exactly the NVML functions Variorum 0.8.0's NVIDIA port imports (nm -D -u
 * on libvariorum.so), so that real Variorum can run on a machine without a GPU (scripts/gpu/check_variorum_here.sh):
 * it checks the build, the loading chain and the JSON Variorum writes, never power. dooly's own stub
 * (tests/power/stub_nvml) lacks some of these, and dooly loads Variorum with RTLD_NOW.
 *   FAKE_NVML_GPUS      number of GPUs (default 1)
 *   FAKE_NVML_POWER_MW  power of GPU i: this + 1000 * i, in mW (default 150000), doubled in every other
 *                       FAKE_NVML_PERIOD_MS of wall-clock time (default 400), so readings change over a run
 * Build: gcc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o libnvidia-ml.so.1 fake_nvml_for_variorum.c */
#include <stdlib.h>
#include <sys/time.h>

typedef int nvmlReturn_t;
typedef struct fake_device* nvmlDevice_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
enum { OK = 0, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3 };

static struct fake_device {
  int index;
} devices[64];

static long env_long(const char* name, long fallback) {
  const char* v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : fallback;
}

nvmlReturn_t nvmlInit_v2(void) { return OK; }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { return OK; } /* what nvidia-ml-py calls */
nvmlReturn_t nvmlShutdown(void) { return OK; }

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  long n = env_long("FAKE_NVML_GPUS", 1);
  if (!count) return INVALID_ARGUMENT;
  *count = (unsigned int)(n < 0 ? 0 : n > 64 ? 64 : n);
  return OK;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!device || index >= 64) return INVALID_ARGUMENT;
  devices[index].index = (int)index;
  *device = &devices[index];
  return OK;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power_mw) {
  struct timeval tv;
  long period_ms = env_long("FAKE_NVML_PERIOD_MS", 400);
  long base = env_long("FAKE_NVML_POWER_MW", 150000) + 1000L * (device ? device->index : 0);
  if (!power_mw) return INVALID_ARGUMENT;
  gettimeofday(&tv, NULL);
  long ms = tv.tv_sec % 100000 * 1000L + tv.tv_usec / 1000;
  *power_mw = (unsigned int)((period_ms > 0 && (ms / period_ms) % 2) ? 2 * base : base);
  return OK;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* limit_mw) {
  if (!limit_mw) return INVALID_ARGUMENT;
  *limit_mw = 700000;
  return OK;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int* temp) { return NOT_SUPPORTED; }
nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t device, int type, int id, unsigned int* mhz) { return NOT_SUPPORTED; }
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* u) { return NOT_SUPPORTED; }
nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device, unsigned int limit_mw) { return NOT_SUPPORTED; }
const char* nvmlErrorString(nvmlReturn_t r) { return "fake NVML"; }
/* With nvmlDeviceGetName too, dooly's own nvml backend opens over this fake in its `average` mode (local
 * dry runs of scripts/gpu/validate_variorum.sh). */
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  const char fake[] = "fake NVML GPU";
  if (!name || length < sizeof fake) return INVALID_ARGUMENT;
  for (unsigned int i = 0; i < sizeof fake; ++i) name[i] = fake[i];
  return OK;
}
