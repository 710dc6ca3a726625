"""scripts/gpu/summarize_variorum.py: the nvml-vs-Variorum comparison of scripts/gpu/validate_variorum.sh."""

import json
import subprocess
import sys


def _channel(name, domain, description, window_ms, samples, regions, counter=None):
    return {"name": name, "domain": domain, "device": 0 if domain == "gpu" else -1,
            "sensor": {"description": description, "window_ns": window_ms * 1_000_000, "delay_ns": 0,
                       "update_ns": 100_000_000},
            "baseline_w": 120.0, "baseline_method": "measured at start", "run_time_s": 10.0, "samples": samples,
            "samples_dropped": 0,
            "conservation": {"run_energy_j": 3000.0, "attributed_j": 2500.0, "unattributed_j": 500.0,
                             "counter_delta_j": counter, "ratio": counter / 3000.0 if counter else None},
            "model_fit": {"fitted": True, "why_not": "", "intercept_w": 120.0},
            "regions": [{"name": n, "calls": c, "time_s": t, "energy_j": e, "j_per_call": jpc,
                         "avg_power_w": e / t, "model_energy_j": e, "model_j_per_call": jpc}
                        for n, c, t, e, jpc in regions]}


def _write(tmp_path, name, report, reference, recording=None):
    prefix = tmp_path / name
    (tmp_path / f"{name}.json").write_text(json.dumps(report))
    (tmp_path / f"{name}.txt").write_text(reference)
    if recording:
        (tmp_path / f"{name}.recording").write_text(recording)
    return f"{name}={prefix}"


def test_compares_runs_region_by_region_and_lists_the_node_view(repo_root, tmp_path):
    ref = "reference phase=alone:stream kernel=stream_triad calls=10 time_s=4 kernel_time_s=4 counter_j=1520\n"
    nvml = {"backend": "nvml", "mode": "model", "meta": {"sampler_period_ms": 500},
            "channels": [_channel("gpu0", "gpu", "nvmlDeviceGetSamples", 25, 400,
                                  [("alone:stream", 1, 4.0, 1520.0, 1040.0), ("stream_triad", 10, 4.0, 1500.0, 102.0)],
                                  counter=3000.0)]}
    variorum = {"backend": "variorum", "mode": "model", "meta": {"sampler_period_ms": 20},
                "channels": [_channel("node", "node", "Variorum power_node_watts", 0, 500, [("alone:stream", 1, 4.0, 2400.0, 0)]),
                             _channel("gpu0", "gpu", "Variorum power_gpu_watts (NVML 1-second average)", 1000, 500,
                                      [("alone:stream", 1, 4.0, 1444.0, 964.0), ("stream_triad", 10, 4.0, 1530.0, 105.06)])]}
    args = [_write(tmp_path, "nvml", nvml, ref),
            _write(tmp_path, "variorum", variorum, ref, recording="s,1,0,100\ns,1,20000000,101\ns,1,40000000,102\n")]
    out = subprocess.run([sys.executable, str(repo_root / "scripts" / "gpu" / "summarize_variorum.py"), *args],
                         check=True, capture_output=True, text=True).stdout
    assert "-- variorum: backend variorum" in out
    assert "window 1000 ms" in out and "50.0/s" in out
    assert "interval median 20.0 ms" in out  # from the recording, channel index 1 = gpu0
    assert "ratio 1.0000" in out
    line = next(l for l in out.splitlines() if l.startswith("stream_triad") and "variorum" in l)
    assert "+2.0%" in line and "+3.0%" in line  # energy 1530 vs 1500, J/call 105.06 vs 102
    assert "alone:stream counter 1520.0 J, trapezoid 1444.0 (-5.0%)" in out
    assert "-- variorum: node [node] Variorum power_node_watts" in out
    assert "-- nvml: none" in out
