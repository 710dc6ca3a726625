#pragma once
// The simulation's entities in one place, for the event handlers (events/*.cpp): the requests, the engine (with its
// queues, KV cache and scheduler policy inside), the clock, the event queue and what is being recorded.
#include <cstdint>
#include <vector>

#include "dooly/sim/engine.hpp"
#include "dooly/sim/event.hpp"
#include "dooly/sim/recorder.hpp"
#include "dooly/sim/request_state.hpp"

namespace dooly::sim {

// How requests arrive: at their own times (open loop), or sent by users one after another (closed loop).
struct ArrivalProcess {
  bool closed = false;
  int64_t users = 0;
  double think_s = 0;  // a user's pause between a response and its next request
};

struct World {
  World(std::vector<RequestState>& r, Engine& e) : requests(r), engine(e) {}

  std::vector<RequestState>& requests;  // open loop: sorted by arrival time
  Engine& engine;
  ArrivalProcess arrivals;
  double idle_power_w = 0;
  EventQueue queue;
  Recorder recorder;
  double now_s = 0;
  bool engine_busy = false;  // a step runs, or the next one is due
  int64_t steps_started = 0;
  size_t next_request = 0;  // the next request to arrive (open loop) or to be sent (closed loop)
  const StepPlan* running = nullptr;
  std::vector<int32_t> finished;  // scratch: the requests a step finished
};

// Event handlers, one file each (events/).
void on_arrival(World& w, const Event& e);
void on_step_start(World& w, const Event& e);
void on_step_end(World& w, const Event& e);

// Wakes the engine when a request arrives while it has nothing to do (HF: the loop waits on _has_new_requests).
void wake_engine(World& w);
// Closed loop: the user who sent `finished` sends the next request after thinking.
void send_next(World& w, int32_t user, double at_s);

}  // namespace dooly::sim
