// dooly trace --engine hf --model data/models/llama-3.1-8b.json --attention 'paged|sdpa' --out traces/
// The tracer is Python (it drives PyTorch), and so are its flags: python/dooly/cli_trace.py declares them once.
// This subcommand declares none. It finds the project's venv and the built binding and execs
// `python -m dooly.cli_trace` with every argument after `trace` as given, `--help` included, so
// `dooly trace --help` is Python's help and a flag added there needs no change here.
#include <string>
#include <vector>

#include "dooly/cli/command_registry.hpp"
#include "dooly/cli/python_exec.hpp"

namespace {

void setup_trace(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "trace", "Trace a serving engine's forward passes with taint-labelled dimensions (flags: dooly trace --help)");
  cmd->set_help_flag();   // --help too is the tracer's: python -m dooly.cli_trace --help
  cmd->prefix_command();  // everything after `trace` is forwarded untouched, in order
  cmd->callback(
      [cmd] { dooly::cli::exec_python_module("dooly.cli_trace", cmd->remaining(), "python/dooly/cli_trace.py"); });
}

const bool registered = dooly::cli::add_command("trace", &setup_trace);

}  // namespace
