// dooly::testing::spawn_program: a program run as a user's shell would run it, for the tests that load dooly into
// other processes (a real Kokkos runtime, mpirun). The child gets this process's environment minus every variable
// that would steer it from outside the test (dooly's, the Kokkos tool's, any launcher's rank variables and
// CUDA_VISIBLE_DEVICES), plus `env`; its stdout and stderr go to files in `dir` and come back as text.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace dooly::testing {

struct Spawned {
  int exit_code = -1;  // 128 + the signal when one ended it; -1 when it could not start (err says why)
  std::string out;
  std::string err;
};

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// args[0]: the program's full path.
inline Spawned spawn_program(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                             const std::filesystem::path& dir) {
  static constexpr std::array<const char*, 9> kStripped = {
      "DOOLY_", "KOKKOS_TOOLS_", "KOKKOS_PROFILE_LIBRARY", "CUDA_VISIBLE_DEVICES=", "OMPI_COMM_WORLD_",
      "PMI_",   "PMIX_",         "MV2_COMM_WORLD_",        "SLURM_"};
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    bool stripped = false;
    for (const char* prefix : kStripped) stripped = stripped || kv.rfind(prefix, 0) == 0;
    if (!stripped) env_store.push_back(kv);
  }
  for (const auto& [k, v] : env) env_store.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> arg_store = args;
  std::vector<char*> argv;
  for (auto& s : arg_store) argv.push_back(s.data());
  argv.push_back(nullptr);

  const std::string out_path = (dir / "stdout.txt").string(), err_path = (dir / "stderr.txt").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  Spawned r;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    r.err = std::string("posix_spawn failed: ") + std::strerror(rc);
    return r;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(out_path);
  r.err = read_text(err_path);
  return r;
}

}  // namespace dooly::testing
