#pragma once
// A device that several ranks measured, attributed once with every sharing rank's windows: the readings of the
// rank that measured it longest, the windows of all of them (their recordings, DOOLY_RECORD, one per rank), each
// rank's regions kept apart. On one host every rank's stamps are on the same monotonic clock, so the windows line
// up with the readings. docs/mpi.md, "A GPU that several ranks share".
#include <string>
#include <vector>

#include "dooly/energy/rank_reduce.hpp"
#include "dooly/energy/recording.hpp"
#include "dooly/energy/recording_analysis.hpp"

namespace dooly::energy {

// One recording for a shared device: `channel` of `recordings[counted]` (its readings and counter readings, as
// channel 0) and every recording's windows, a window of recording i on GPU `devices[i]` (that rank's ordinal of
// this device) or on the host, its key named "<name>" + rank_tag(ranks[i]) and its thread numbered apart from the
// other ranks'. Windows on the ranks' other GPUs are left out. Throws InputError when the channel is not in the
// counted recording.
Recording joint_recording(const std::vector<const Recording*>& recordings, const std::vector<int>& ranks,
                          const std::vector<int>& devices, size_t counted, const std::string& channel);
std::string rank_tag(int rank);  // what joint_recording appends to a rank's region names

struct Reattribution {
  std::vector<std::string> devices;  // ids attributed jointly
  std::vector<std::string> skipped;  // "<id>: why not" (a sharing rank did not record, a recording unreadable)
};

// For every device of `files` that several ranks measured and all of them recorded (a rank's report meta
// "recording" names its file): the joint recording analysed once; each sharing rank's rows of that device's
// channel become its own share, the counted rank's channel takes the joint run, attributed and unattributed
// energy and the others' none, so the reduction's sums count the device once. Devices not all recorded stay as
// they were (and are named in `skipped`).
Reattribution reattribute_shared_devices(std::vector<RankFile>& files, const AnalysisOptions& options);

}  // namespace dooly::energy
