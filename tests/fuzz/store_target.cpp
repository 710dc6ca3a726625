// The store target apart from the others: it needs SQLite and a file (SQLite reads files, not buffers).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "dooly/store/store.hpp"
#include "targets.hpp"

namespace dooly::fuzz {

namespace {
std::string scratch_path() {
  const char* dir = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
  return std::string(dir) + "/dooly-fuzz-store-" + std::to_string(::getpid()) + ".sqlite";
}

void remove_all(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
}

bool write_bytes(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

// Every query of the API on whatever the file holds.
void read_everything(store::Store& s) {
  (void)s.summary();
  const auto models = s.models();
  const auto provenances = s.provenances();
  for (const auto& m : models)
    for (const auto& p : provenances) {
      for (const auto& use : s.signatures_of_model(m.id, p.id)) {
        (void)s.models_using(use.signature.id);
        (void)s.measurements_for(use.signature.id, p.id);
        (void)s.point_keys(use.signature.id, p.id, true);
        (void)s.resolution_of(use.signature.id, p.id);
        (void)s.find_signature(use.signature.hash);
      }
    }
  for (const auto& p : provenances) {
    (void)s.missing_signatures(p.id);
    (void)s.resolutions(p.id);
  }
  (void)s.provenances_with_occurrences();
}
}  // namespace

int store(const uint8_t* data, size_t size) {
  const std::string path = scratch_path();
  for (auto mode : {store::Store::Mode::read_only, store::Store::Mode::read_write}) {
    remove_all(path);
    if (!write_bytes(path, data, size)) return 0;
    try {
      store::Store s = store::Store::open(path, mode, std::chrono::milliseconds(0));
      read_everything(s);
    } catch (const Error&) {  // StoreError (a file that is not a usable store) or InputError
    }
  }
  remove_all(path);
  return 0;
}

}  // namespace dooly::fuzz
