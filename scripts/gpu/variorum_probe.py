#!/usr/bin/env python3
"""Calls a real libvariorum.so's variorum_get_power_json once, writes the JSON it returns byte for byte, prints
its keys, then times 50 more calls (each runs Variorum's variorum_enter/variorum_exit: nvmlInit and nvmlShutdown
for the NVIDIA port). Used by scripts/gpu/validate_variorum.sh and scripts/gpu/check_variorum_here.sh.
  variorum_probe.py <libvariorum.so> <out.json>        exit 1 when the first call fails
"""
import ctypes, json, statistics, sys, time
lib = ctypes.CDLL(sys.argv[1])
lib.variorum_get_current_version.restype = ctypes.c_char_p
print("variorum_get_current_version:", lib.variorum_get_current_version().decode())
def call():
    out = ctypes.c_char_p()
    rc = lib.variorum_get_power_json(ctypes.byref(out))
    return rc, out.value
rc, text = call()
print("first call: rc", rc)
if rc != 0 or text is None:
    sys.exit(1)
open(sys.argv[2], "wb").write(text)
doc = json.loads(text)
host, node = next(iter(doc.items()))
print("host key:", host, "; keys:", sorted(node))
for k, v in node.items():
    print(" ", k, "=", json.dumps(v))
costs, values = [], []
for _ in range(50):
    t = time.perf_counter(); rc, text = call(); costs.append(time.perf_counter() - t)
    if rc == 0 and text:
        values.append(json.loads(text))
print(f"50 calls: {len(values)} ok; per call median {statistics.median(costs)*1e3:.2f} ms, "
      f"min {min(costs)*1e3:.2f} ms, max {max(costs)*1e3:.2f} ms")
# Again with NVML held open by this process (as in a program that also uses NVML, e.g. the demo's counter
# reference): Variorum's nvmlInit/nvmlShutdown then only count references.
try:
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    held = nvml.nvmlInit_v2() == 0
except OSError:
    held = False
if held:
    warm = []
    for _ in range(50):
        t = time.perf_counter(); call(); warm.append(time.perf_counter() - t)
    print(f"50 calls with NVML held open: per call median {statistics.median(warm)*1e3:.2f} ms, "
          f"max {max(warm)*1e3:.2f} ms")
    nvml.nvmlShutdown()
gpu = [v[host].get("socket_0", {}).get("power_gpu_watts", {}) for v in values]
print("socket_0 power_gpu_watts over the calls:", [g.get("GPU_0") if isinstance(g, dict) else g for g in gpu][:10], "...")
