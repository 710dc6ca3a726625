#pragma once
// A request as the simulator follows it: what the workload asked for, where the engine has it (the engine models
// read and write the scheduling part), and when its tokens came out (the simulator writes the timing part).
#include <cstdint>

namespace dooly::sim {

enum class Status : uint8_t {
  unsent,      // not arrived yet (closed loop: its user has not sent it)
  waiting,     // in the engine's waiting queue (HF: PENDING; vLLM: WAITING or PREEMPTED)
  prefilling,  // part of its prompt computed (HF: PREFILLING, a split prefill)
  decoding,    // its whole prompt scheduled; one token per step
  finished,
};

struct RequestState {
  // The workload's.
  double arrival_s = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;

  // The engine's.
  Status status = Status::unsent;
  int64_t prefill_tokens = 0;  // tokens to compute before the next token: the prompt (+ outputs after a recompute)
  int64_t remaining_prefill = 0;
  int64_t position = 0;          // tokens in the KV cache (HF: position_offset; vLLM: num_computed_tokens)
  int64_t generated = 0;         // output tokens so far
  int64_t allocated_blocks = 0;  // HF: state.allocated_blocks (logical); vLLM: blocks held
  uint32_t queue_epoch = 0;      // which entry of the waiting queue is current (a request can be queued again)
  int32_t preemptions = 0;       // soft resets (HF) or recompute preemptions (vLLM)

  // The simulator's.
  double first_token_s = -1;
  double last_token_s = -1;
  double finish_s = -1;
  double energy_j = 0;
  int32_t user = -1;  // closed loop: who sent it
};

}  // namespace dooly::sim
