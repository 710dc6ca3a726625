#include "dooly/energy/rank_outputs.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/common/log.hpp"
#include "dooly/energy/rank_writers.hpp"

namespace dooly::energy {

namespace fs = std::filesystem;

namespace {

int64_t wall_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void print_table(const std::string& table, const OutputSettings& o) {
  if (!o.table) return;
  if (!o.table_path.empty()) {
    write_file_atomic(o.table_path, table);
  } else {
    std::fputs(table.c_str(), stdout);
    std::fflush(stdout);
  }
}

}  // namespace

std::string write_reduced_outputs(const RanksReport& reduced, const OutputSettings& o) {
  std::string table = format_ranks_table(reduced);
  try {
    print_table(table, o);
  } catch (const std::exception& e) {
    log::error("{}", e.what());
  }
  write_file_atomic(o.prefix + ".csv", ranks_to_csv(reduced));
  write_file_atomic(o.prefix + ".json", ranks_to_json_text(reduced));
  log::info("wrote {}.csv and {}.json: {} of {} ranks reduced", o.prefix, o.prefix, reduced.present.size(),
            reduced.size);
  return table;
}

namespace {

// This rank's own file, and with rank_tables its CSV and table next to it; returns its table (or "").
std::string write_own(const Report& report, const RankFile& own, const OutputSettings& o) {
  std::string table;
  const std::string path = rank_file_path(o.prefix, own.rank.rank);
  write_file_atomic(path, json_text(rank_file_json(own)));
  log::info("rank {} of {}: wrote {}", own.rank.rank, own.rank.size, path);
  if (o.rank_tables) {
    const std::string stem = fmt::format("{}.rank{}", o.prefix, own.rank.rank);
    table = format_table(report);
    write_file_atomic(stem + ".csv", to_csv(report));
    write_file_atomic(stem + ".txt", table);
  }
  return table;
}

}  // namespace

RankFile make_rank_file(const Report& report, const RankInfo& rank, int64_t written_unix_ns) {
  RankFile f;
  f.rank = rank;
  f.written_unix_ns = written_unix_ns;
  f.report = report;
  for (const ChannelReport& ch : report.channels)
    f.device_ids.push_back(device_id(ch.channel, rank.host, rank.cuda_visible_devices));
  return f;
}

std::optional<std::string> foreign_reason(const RankFile& c, const RankInfo& own) {
  if (own.size > 0 && c.rank.size != own.size)
    return fmt::format("from a job of {} ranks, not this one's {}", c.rank.size, own.size);
  if (!c.rank.job.empty() && !own.job.empty()) {
    if (c.rank.job != own.job) return fmt::format("from job {}, not this run's job {}", c.rank.job, own.job);
    return std::nullopt;
  }
  if (c.written_unix_ns < own.start_unix_ns) return std::string("written before this run started (an earlier run's)");
  return std::nullopt;
}

Gathered gather_rank_files(const std::string& prefix, const RankInfo& own, double wait_s) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(wait_s, 0.0)));
  std::vector<int> pending;
  for (int r = 0; r < own.size; ++r)
    if (r != own.rank) pending.push_back(r);
  Gathered g;
  // Files seen and set aside (another run's, unreadable), by the write time they had: read again once it changes.
  std::map<int, std::pair<fs::file_time_type, std::string>> set_aside;
  auto poll = std::chrono::milliseconds(20);
  while (true) {
    for (auto it = pending.begin(); it != pending.end();) {
      const std::string path = rank_file_path(prefix, *it);
      std::error_code ec;
      const fs::file_time_type mtime = fs::last_write_time(path, ec);
      if (ec) {
        ++it;
        continue;
      }
      if (auto seen = set_aside.find(*it); seen != set_aside.end() && seen->second.first == mtime) {
        ++it;
        continue;
      }
      try {
        RankFile f = read_rank_file(path);
        if (f.rank.rank != *it) {
          set_aside[*it] = {mtime, fmt::format("it says rank {}", f.rank.rank)};
        } else if (auto why = foreign_reason(f, own)) {
          set_aside[*it] = {mtime, *why};
        } else {
          set_aside.erase(*it);
          g.files.push_back(std::move(f));
          it = pending.erase(it);
          continue;
        }
      } catch (const std::exception& e) {
        set_aside[*it] = {mtime, e.what()};
      }
      ++it;
    }
    const Clock::time_point now = Clock::now();
    if (pending.empty() || now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(poll, deadline - now));
    poll = std::min(poll * 2, std::chrono::milliseconds(500));
  }
  g.waited_s = std::chrono::duration<double>(Clock::now() - start).count();
  for (const auto& [rank, seen] : set_aside) g.ignored.push_back({rank_file_path(prefix, rank), seen.second});
  return g;
}

std::string write_rank_outputs(const Report& report, const OutputSettings& o) noexcept {
  std::string table;
  try {
    const RankInfo& me = *o.ranks;
    RankFile own = make_rank_file(report, me, wall_now_ns());
    table = write_own(report, own, o);
    if (me.rank != 0) return table;
    if (me.size == 0) {
      log::warn(
          "the launcher ({}) does not say how many ranks there are: each rank wrote its {}.rank<N>.json; reduce them "
          "with `dooly ranks {}` once all have",
          me.launcher, o.prefix, o.prefix);
      return table;
    }
    Gathered g = gather_rank_files(o.prefix, me, o.ranks_wait_s);
    g.files.push_back(std::move(own));
    RanksReport reduced = reduce_ranks(g.files, me.size);
    reduced.ignored = std::move(g.ignored);
    reduced.waited_s = g.waited_s;
    if (!reduced.missing.empty())
      log::warn(
          "rank(s) {} wrote no {}.rank<N>.json of this run within {:.3g} s (DOOLY_RANKS_WAIT_S): the reduced "
          "report lacks them; once they have written, `dooly ranks {}` reduces all",
          format_rank_list(reduced.missing), o.prefix, g.waited_s, o.prefix);
    table = write_reduced_outputs(reduced, o);
    if (!o.keep_rank_files && reduced.missing.empty()) {
      for (int r : reduced.present) {
        std::error_code ec;
        fs::remove(rank_file_path(o.prefix, r), ec);
      }
    }
  } catch (const std::exception& e) {
    log::error("{}", e.what());
  }
  return table;
}

FoundRankFiles find_rank_files(const std::string& prefix, const std::optional<std::string>& job) {
  const fs::path p(prefix);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string base = p.filename().string() + ".rank";
  std::vector<RankFile> files;
  std::vector<IgnoredRankFile> ignored;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= base.size() + 5 || name.compare(0, base.size(), base) != 0 ||
        name.compare(name.size() - 5, 5, ".json") != 0)
      continue;
    const std::string digits = name.substr(base.size(), name.size() - base.size() - 5);
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    const std::string path = (dir / name).string();
    try {
      files.push_back(read_rank_file(path));
    } catch (const InputError& e) {
      ignored.push_back({path, e.problem()});
    }
  }
  if (ec)
    DOOLY_THROW(InputError, "give the prefix the ranks wrote with (DOOLY_OUTPUT)", "cannot list '{}': {}", dir.string(),
                ec.message());
  if (files.empty())
    DOOLY_THROW(InputError, "give the prefix the ranks wrote with (DOOLY_OUTPUT), without .rank<N>.json",
                "no readable rank file {}<N>.json in '{}'{}", base, dir.string(),
                ignored.empty() ? std::string() : " (" + ignored.front().why + ")");
  std::string chosen;
  if (job) {
    chosen = *job;
  } else {
    const auto last = std::max_element(files.begin(), files.end(), [](const RankFile& a, const RankFile& b) {
      return a.written_unix_ns < b.written_unix_ns;
    });
    chosen = last->rank.job;
  }
  FoundRankFiles found;
  for (RankFile& f : files) {
    if (f.rank.job != chosen) {
      ignored.push_back({f.path, fmt::format("from job {}, not job {}", f.rank.job.empty() ? "(none)" : f.rank.job,
                                             chosen.empty() ? "(none)" : chosen)});
      continue;
    }
    found.size = std::max(found.size, f.rank.size);
    found.files.push_back(std::move(f));
  }
  if (found.files.empty())
    DOOLY_THROW(InputError, "give a job that wrote rank files here (see the 'job' of a rank file's 'rank' object)",
                "no rank file {}<N>.json in '{}' is of job {}", base, dir.string(), chosen);
  std::sort(ignored.begin(), ignored.end(),
            [](const IgnoredRankFile& a, const IgnoredRankFile& b) { return a.path < b.path; });
  found.ignored = std::move(ignored);
  return found;
}

RanksReport merge_rank_files(const std::string& prefix, const std::optional<std::string>& job) {
  FoundRankFiles found = find_rank_files(prefix, job);
  RanksReport reduced = reduce_ranks(found.files, found.size);
  reduced.ignored = std::move(found.ignored);
  return reduced;
}

}  // namespace dooly::energy
