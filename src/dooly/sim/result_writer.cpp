#include "dooly/sim/result_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>

#include <fmt/compile.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dooly/common/error.hpp"

namespace dooly::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

}  // namespace

// A file written through a buffer into PATH.tmp, renamed over PATH when complete.
struct ResultWriter::Sink {
  explicit Sink(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (f_ == nullptr)
      DOOLY_THROW(InputError, "check the folder exists and is writable", "cannot write {}: {}", tmp_,
                  std::strerror(errno));
  }
  ~Sink() {
    if (f_ != nullptr) {
      std::fclose(f_);
      std::remove(tmp_.c_str());
    }
  }
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;
  Sink(Sink&&) = delete;
  Sink& operator=(Sink&&) = delete;

  fmt::memory_buffer& buf() { return buf_; }
  void maybe_flush() {
    if (buf_.size() > (1 << 20)) flush();
  }
  void commit() {
    flush();
    const bool ok = std::fclose(f_) == 0;
    f_ = nullptr;
    if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0)
      DOOLY_THROW(Error, "check the disk space and the folder", "cannot write {}: {}", path_, std::strerror(errno));
  }

  void flush() {
    if (!buf_.size()) return;
    if (std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size())
      DOOLY_THROW(Error, "check the disk space", "cannot write {}: {}", tmp_, std::strerror(errno));
    buf_.clear();
  }
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  fmt::memory_buffer buf_;
};

namespace {

using Sink = ResultWriter::Sink;

nlohmann::ordered_json stat_json(const Stat& s) {
  return {{"mean", s.mean}, {"median", s.median}, {"p90", s.p90}, {"p99", s.p99}};
}

nlohmann::ordered_json summary_json(const Summary& s) {
  nlohmann::ordered_json goodput = nullptr;
  if (s.slo) {
    nlohmann::ordered_json slo = nlohmann::ordered_json::object();
    if (s.slo->ttft_ms) slo["ttft_ms"] = *s.slo->ttft_ms;
    if (s.slo->tpot_ms) slo["tpot_ms"] = *s.slo->tpot_ms;
    if (s.slo->e2e_ms) slo["e2e_ms"] = *s.slo->e2e_ms;
    goodput = {{"slo", slo}, {"requests", s.good_requests}, {"request_goodput", s.request_goodput}};
  }
  return {{"requests", s.requests},
          {"completed", s.completed},
          {"total_input_tokens", s.input_tokens},
          {"total_output_tokens", s.output_tokens},
          {"duration_s", s.duration_s},
          {"request_throughput", s.request_throughput},
          {"output_throughput", s.output_throughput},
          {"total_token_throughput", s.total_token_throughput},
          {"ttft_ms", stat_json(s.ttft_ms)},
          {"tpot_ms", stat_json(s.tpot_ms)},
          {"itl_ms", stat_json(s.itl_ms)},
          {"e2e_ms", stat_json(s.e2e_ms)},
          {"goodput", goodput},
          {"energy_j", s.energy_j},
          {"step_energy_j", s.step_energy_j},
          {"idle_energy_j", s.idle_energy_j},
          {"j_per_output_token", s.j_per_output_token},
          {"j_per_request", s.j_per_request},
          {"average_power_w", s.average_power_w},
          {"steps", s.steps},
          {"preemptions", s.preemptions},
          {"mean_batch_requests", s.mean_batch_requests},
          {"mean_batch_tokens", s.mean_batch_tokens},
          {"extrapolated_steps", s.extrapolated_steps}};
}

nlohmann::ordered_json model_json(const ModelSpec& m) {
  return {{"name", m.name},
          {"config", m.path},
          {"model_type", m.model_type},
          {"params", m.params},
          {"layers", m.layers},
          {"full_attention_layers", m.full_layers},
          {"sliding_layers", m.sliding_layers},
          {"experts", m.experts}};
}

nlohmann::ordered_json head_json(const Simulation& sim) {
  const SimConfig& c = sim.config;
  return {{"version", 1},
          {"tool", "dooly simulate"},
          {"config",
           {{"model", c.model},
            {"workload", c.workload},
            {"engine", c.engine.engine},
            {"cost", c.cost},
            {"db", c.db},
            {"slo", c.slo},
            {"moe_routing", c.moe_routing},
            {"step_times", c.step_times},
            {"gpu_memory_gib", c.engine.gpu.memory_gib},
            {"idle_power_w", c.engine.gpu.idle_power_w}}},
          {"model", model_json(sim.model)},
          {"engine", sim.engine->resolved()},
          {"cost_model", sim.cost->describe()},
          {"cautions", sim.engine->cautions()}};
}

void write_requests(Sink& out, const Simulation& sim) {
  auto it = fmt::appender(out.buf());
  for (size_t i = 0; i < sim.states.size(); ++i) {
    const RequestState& r = sim.states[i];
    const double ttft = r.first_token_s - r.arrival_s, e2e = r.finish_s - r.arrival_s;
    fmt::format_to(it, FMT_COMPILE("{}\n  {{\"id\": {}, \"arrival_s\": {}, \"ttft_s\": {}, "), i ? "," : "",
                   json(sim.requests[i].id).dump(), r.arrival_s, ttft);
    if (r.output_tokens > 1) {
      fmt::format_to(it, FMT_COMPILE("\"tpot_s\": {}, "), (e2e - ttft) / static_cast<double>(r.output_tokens - 1));
    } else {
      fmt::format_to(it, "\"tpot_s\": null, ");
    }
    fmt::format_to(it,
                   FMT_COMPILE("\"e2e_s\": {}, \"energy_j\": {}, \"prompt_tokens\": {}, \"output_tokens\": {}, "
                               "\"first_token_s\": {}, \"finish_s\": {}, \"preemptions\": {}}}"),
                   e2e, r.energy_j, r.prompt_tokens, r.output_tokens, r.first_token_s, r.finish_s, r.preemptions);
    out.maybe_flush();
  }
}

void write_step(Sink& out, int64_t i, const StepRecord& s) {
  auto it = fmt::appender(out.buf());
  fmt::format_to(it,
                 FMT_COMPILE("{}\n  {{\"i\": {}, \"t_s\": {}, \"dt_s\": {}, \"requests\": {}, \"tokens\": {}, "
                             "\"prefill_tokens\": {}, \"decode_requests\": {}, \"padded_tokens\": {}, \"path\": "
                             "\"{}\", \"device_s\": {}, \"host_s\": {}, \"energy_j\": {}, \"waiting\": {}, "
                             "\"free_blocks\": {}, \"preempted\": {}"),
                 i ? "," : "", i, s.t_s, s.duration_s, s.requests, s.tokens, s.prefill_tokens, s.decode_requests,
                 s.padded_tokens, to_string(s.path), s.device_s, s.host_s, s.energy_j, s.waiting, s.free_blocks,
                 s.preempted);
  if (s.model_duration_s >= 0) fmt::format_to(it, FMT_COMPILE(", \"model_dt_s\": {}"), s.model_duration_s);
  out.buf().push_back('}');
  out.maybe_flush();
}

}  // namespace

void check_writable(const std::string& path) {
  const fs::path dir = fs::absolute(path).parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    DOOLY_THROW(InputError, "create the folder first", "cannot write {}: folder {} does not exist", path, dir.string());
  if (fs::is_directory(path, ec)) DOOLY_THROW(InputError, "give a file name", "cannot write {}: it is a folder", path);
}

ResultWriter::ResultWriter(const std::string& path, const Simulation& sim) : out_(std::make_unique<Sink>(path)) {
  std::string head = head_json(sim).dump(1);
  head.pop_back();  // the closing brace: the steps, requests and summary follow
  while (!head.empty() && head.back() == '\n') head.pop_back();
  fmt::format_to(fmt::appender(out_->buf()), "{},\n\"steps\": [", head);
}

ResultWriter::~ResultWriter() = default;

void ResultWriter::on_step(int64_t index, const StepRecord& step) { write_step(*out_, index, step); }

void ResultWriter::finish(const Simulation& sim, const SimResult& result) {
  fmt::format_to(fmt::appender(out_->buf()), "\n],\n\"requests\": [");
  write_requests(*out_, sim);
  nlohmann::ordered_json summary = summary_json(result.summary);
  fmt::format_to(fmt::appender(out_->buf()), "\n],\n\"summary\": {}\n}}\n", summary.dump(1));
  out_->commit();
}

void write_result_json(const std::string& path, const Simulation& sim, const SimResult& result) {
  ResultWriter w(path, sim);
  for (size_t i = 0; i < result.recorder.steps.size(); ++i)
    w.on_step(static_cast<int64_t>(i), result.recorder.steps[i]);
  w.finish(sim, result);
}

void write_requests_csv(const std::string& path, const Simulation& sim) {
  Sink out(path);
  auto it = fmt::appender(out.buf());
  fmt::format_to(it,
                 "# dooly simulate requests, version 1\nid,arrival_s,ttft_s,tpot_s,e2e_s,energy_j,prompt_tokens,"
                 "output_tokens,preemptions\n");
  for (size_t i = 0; i < sim.states.size(); ++i) {
    const RequestState& r = sim.states[i];
    const double ttft = r.first_token_s - r.arrival_s, e2e = r.finish_s - r.arrival_s;
    const std::string tpot =
        r.output_tokens > 1 ? fmt::format("{}", (e2e - ttft) / static_cast<double>(r.output_tokens - 1)) : "";
    std::string id = sim.requests[i].id;
    if (id.find_first_of(",\"\n") != std::string::npos) {  // RFC 4180 quoting
      std::string q = "\"";
      for (char ch : id) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
      id = q + "\"";
    }
    fmt::format_to(it, "{},{},{},{},{},{},{},{},{}\n", id, r.arrival_s, ttft, tpot, e2e, r.energy_j, r.prompt_tokens,
                   r.output_tokens, r.preemptions);
    out.maybe_flush();
  }
  out.commit();
}

}  // namespace dooly::sim
