#pragma once
// The fuzz targets' entry points: one per reader, plus the whole `dooly analyze` pipeline. Each takes any
// bytes and returns 0; bad input may only end in dooly's own InputError (or StoreError for the store), which
// the entry catches: anything else (another exception, a crash, a sanitizer report, a hang) is a finding.
// Built twice: into libFuzzer executables (fuzz preset, clang) and into fuzz_replay_test, which replays the
// checked-in corpus and the crash files under ctest in every build.
#include <cstddef>
#include <cstdint>

namespace dooly::fuzz {

int recording(const uint8_t* data, size_t size);      // energy/recording: read_recording (the whole format)
int readings(const uint8_t* data, size_t size);       // power/replay/recorded_readings (what replay reads)
int analyze(const uint8_t* data, size_t size);        // recording -> attribution -> table, CSV, JSON
int variorum_json(const uint8_t* data, size_t size);  // power/variorum: parse_power_json
int trace_json(const uint8_t* data, size_t size);     // trace: JSON text -> parse_trace
int model_config(const uint8_t* data, size_t size);   // trace: check_model_config
int store(const uint8_t* data, size_t size);          // store: a file of these bytes opened and queried
int grid(const uint8_t* data, size_t size);           // plan: JSON text -> parse_grid (dooly profile's grid file)
int value_form(const uint8_t* data, size_t size);     // plan: a dimension's value form evaluated and its variables
int result_json(const uint8_t* data, size_t size);    // sim: a result file (dooly live / simulate), compared
int workload(const uint8_t* data, size_t size);  // sim: the first line as a workload spec, all as a JSONL trace and
                                                 // as --step-times' durations

}  // namespace dooly::fuzz
