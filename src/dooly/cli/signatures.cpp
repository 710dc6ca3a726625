// dooly signatures traces/*.json --db dooly.sqlite
// Signs every traced step's call tree, stores signatures, the model, its provenance and the occurrence counts,
// and prints how many of each model's op signatures are new and how many it shares with what the store
// already held (earlier models of this run included).
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dooly/cli/command_registry.hpp"
#include "dooly/common/error.hpp"
#include "dooly/signature/sign.hpp"
#include "dooly/store/store.hpp"
#include "dooly/trace/trace.hpp"

namespace {

using nlohmann::json;

struct SignaturesArgs {
  std::vector<std::string> traces;
  std::string db = "dooly.sqlite";
};

std::string text_of(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return "";
  return j.at(key).is_string() ? j.at(key).get<std::string>() : j.at(key).dump();
}

dooly::store::Provenance provenance_of(const dooly::trace::Trace& t) {
  const json& e = t.engine_info;
  dooly::store::Provenance p;
  p.gpu_name = t.device.rfind("cuda", 0) == 0 ? text_of(e, "device_name") : "cpu";
  p.cuda_version = t.device.rfind("cuda", 0) == 0 ? text_of(e, "cuda_version") : "";
  p.engine = e.value("engine", "hf-transformers");
  p.engine_version = text_of(e, "transformers_version");
  p.attention_backend = t.backend();
  p.dtype = t.dtype;
  p.kv_cache_dtype = text_of(e, "kv_dtype");
  p.block_size = e.value("block_size", int64_t{0});
  json extra = {{"torch", text_of(e, "torch_version")}, {"trace_format", t.version}};
  p.extra_json = extra.dump();
  return p;
}

dooly::store::Phase phase_of(const std::string& kind) {
  auto p = dooly::store::parse_phase(kind);
  if (!p) DOOLY_THROW(InputError, "re-create the trace with `dooly trace`", "unknown step kind '{}'", kind);
  return *p;
}

void run_signatures(const SignaturesArgs& a) {
  using namespace dooly;
  store::Store db = store::Store::open(a.db);
  std::fputs(fmt::format("{:<24} {:<21} {:>7} {:>7} {:>5} {:>20}\n", "model", "backend", "ops", "unique", "new",
                         "shared-with-earlier").c_str(), stdout);
  int64_t total_ops = 0;
  std::set<std::string> all_ops, all_modules;
  int64_t new_modules = 0;
  for (const auto& path : a.traces) {
    const trace::Trace t = trace::read_trace(path);
    const std::vector<signature::UnitCount> units = signature::count_units(t);
    auto tx = db.transaction();
    const int64_t model_id = db.upsert_model({0, t.model, t.family, t.architecture, t.config_hash});
    const int64_t prov_id = db.upsert_provenance(provenance_of(t));
    std::map<std::string, std::pair<int64_t, bool>> stored;  // hash -> (id, inserted now)
    std::vector<store::Occurrence> occ;
    int64_t ops = 0;
    std::set<std::string> model_ops;
    for (const auto& u : units) {
      auto it = stored.find(u.sig.hash);
      if (it == stored.end()) {
        const auto up = db.upsert_signature(u.sig.hash, u.sig.name,
                                            u.sig.is_op ? store::SignatureKind::op : store::SignatureKind::module,
                                            u.sig.canonical, u.sig.metadata.dump());
        it = stored.emplace(u.sig.hash, std::make_pair(up.id, up.inserted)).first;
      }
      occ.push_back({it->second.first, phase_of(u.phase), u.count});
      if (u.sig.is_op) {
        ops += u.count;
        model_ops.insert(u.sig.hash);
        all_ops.insert(u.sig.hash);
      } else {
        new_modules += it->second.second && all_modules.insert(u.sig.hash).second;
        all_modules.insert(u.sig.hash);
      }
    }
    db.replace_occurrences(model_id, prov_id, occ);
    tx.commit();
    int64_t fresh = 0;
    for (const auto& h : model_ops) fresh += stored.at(h).second;
    total_ops += ops;
    std::fputs(fmt::format("{:<24} {:<21} {:>7} {:>7} {:>5} {:>20}\n", t.model, t.backend(), ops, model_ops.size(),
                           fresh, static_cast<int64_t>(model_ops.size()) - fresh).c_str(), stdout);
  }
  std::fputs(fmt::format("total occurrences {} -> unique signatures {}\n", total_ops, all_ops.size()).c_str(), stdout);
  std::fputs(fmt::format("module representatives: {} unique ({} new in {})\n", all_modules.size(), new_modules, a.db).c_str(),
             stdout);
}

void setup_signatures(CLI::App& app) {
  auto a = std::make_shared<SignaturesArgs>();
  CLI::App* cmd = app.add_subcommand("signatures", "Sign traced ops and modules and store them with occurrence counts");
  cmd->add_option("traces", a->traces, "trace files written by `dooly trace`")->required()->check(CLI::ExistingFile);
  cmd->add_option("--db", a->db, "the SQLite store (created if missing)");
  cmd->callback([a] { run_signatures(*a); });
}

const bool registered = dooly::cli::add_command("signatures", &setup_signatures);

}  // namespace
