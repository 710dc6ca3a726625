#!/usr/bin/env bash
# Checks on a machine WITHOUT a GPU everything of the real-Variorum path that does not need one
# (docs/power-sources.md, "Real Variorum"):
#   1. scripts/gpu/build_variorum.sh gpu, exactly as the GPU machine runs it (the kit's debs unpacked into a
#      private prefix, NVML's header from the kit, the generated link stub);
#   2. the symbols dooly calls are in the library (nm -D), and what it imports from NVML;
#   3. real Variorum runs over scripts/gpu/fake_nvml_for_variorum.c (the NVML functions it imports; fixed
#      power, no GPU): its JSON (variorum_probe.py) and dooly's parser on it;
#   4. if DOOLY_SO (libkp_gpu_energy.so) and DEMO (a Kokkos program, e.g. a Serial kokkos_energy_demo) are given:
#      the connector with DOOLY_POWER_SOURCE=variorum on that library, end to end (power is the fake's).
# Output under ${OUT:-build/variorum/check}.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/build/variorum/check}
mkdir -p "$OUT"
export VARIORUM_WORK=${VARIORUM_WORK:-$ROOT/build/variorum}
LIB=$(bash "$ROOT/scripts/gpu/build_variorum.sh" gpu | sed -n 's/^VARIORUM_LIBRARY=//p')
echo "check: built $LIB"
echo "check: dooly calls variorum_get_power_json: $(nm -D --defined-only "$LIB" | grep -w variorum_get_power_json)"
echo "check: NVML functions Variorum imports: $(nm -D --undefined-only "$LIB" | awk '/nvml/ {print $2}' | tr '\n' ' ')"
FAKE=$VARIORUM_WORK/fake-nvml
mkdir -p "$FAKE"
gcc -Wall -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o "$FAKE/libnvidia-ml.so.1" "$ROOT/scripts/gpu/fake_nvml_for_variorum.c"
missing=$(nm -D --undefined-only "$LIB" | awk '/nvml/ {print $2}' | while read -r s; do
  nm -D --defined-only "$FAKE/libnvidia-ml.so.1" | grep -qw "$s" || echo "$s"; done)
[ -z "$missing" ] || { echo "check: the fake NVML lacks $missing (Variorum imports more than before?)"; exit 1; }
echo "check: probe over the fake NVML"
LD_LIBRARY_PATH=$FAKE python3 "$ROOT/scripts/gpu/variorum_probe.py" "$LIB" "$OUT/variorum-fake.json" | tee "$OUT/probe.txt"
if [ -n "${DOOLY_SO:-}" ] && [ -n "${DEMO:-}" ]; then
  echo "check: $DEMO under $DOOLY_SO with DOOLY_POWER_SOURCE=variorum"
  LD_LIBRARY_PATH=$FAKE KOKKOS_TOOLS_LIBS="$DOOLY_SO" KOKKOS_PROFILE_LIBRARY="$DOOLY_SO" DOOLY_POWER_SOURCE=variorum \
    DOOLY_VARIORUM_LIBRARY="$LIB" DOOLY_OUTPUT="$OUT/demo" DOOLY_RECORD="$OUT/demo.recording" DOOLY_LOG=info \
    "$DEMO" ${DEMO_ARGS:-} > "$OUT/demo.txt" 2> "$OUT/demo.err" || { cat "$OUT/demo.err"; exit 1; }
  grep -E "^dooly: |^run " "$OUT/demo.txt" || true
  python3 - "$OUT/demo.json" <<'EOF'
import json, sys
rep = json.load(open(sys.argv[1]))
chans = [(c["name"], c["domain"], c["sensor"]["description"], c["samples"]) for c in rep["channels"]]
print("check: channels", chans)
assert [c[0] for c in chans] == ["gpu0"], chans
assert chans[0][3] > 0, "no samples"
print("check: connector on real Variorum: OK")
EOF
fi
echo "check: done (output in $OUT)"
