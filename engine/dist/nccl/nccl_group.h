// The NCCL backend (NCCL from the CUDA toolkit): a ProcessGroup whose primitives run NCCL's
// collectives on this rank's GPU. The engine's tensors live on the CPU, so every call stages
// through a device buffer of the group's own: copy in on the group's stream, run the NCCL call,
// copy out, wait (Note [NCCL staging] in nccl_group.cpp). CUDA and NCCL headers stay inside
// nccl_group.cpp; callers see only make_group.
//
// Device: local_rank % (number of visible GPUs). Without a GPU (cudaGetDeviceCount fails, e.g.
// "driver version is insufficient", or finds none) make_group throws DistError whose message
// starts with "nccl: no GPU", and tests skip on that.
//
// Note [NCCL bootstrap]
// Rank 0 creates the ncclUniqueId and publishes it as a file in the run dir
//   <dir>/nccl-<launch id>-<n>.id, <dir> = Options::run_dir, else $TRAINBENCH_DIST_DIR, else .
// (written to a temporary name and renamed, so a reader never sees half an id); the others poll
// for it until the group's timeout. n counts the nccl groups this process created, the launch id
// comes from the launcher ($TRAINBENCH_NCCL_RUN_ID, PMIX_NAMESPACE, Slurm's job.step, torchrun's
// TORCHELASTIC_RUN_ID, else "local"), and rank 0 deletes the file once the communicator is up
// (every rank has read it by then), so an earlier launch's file cannot be mistaken for this one's
// unless that launch died during initialisation and shares both the dir and the launch id.
// Several hosts: every rank must see rank 0's file, so the run dir must be on a shared
// filesystem; without one, bootstrap through MPI instead (rank 0 MPI_Bcasts the 128-byte id;
// not wired in here).
//
// Send/recv: NCCL carries no tags; messages between two ranks match in issue order, as in
// PyTorch's NCCL backend. Tags are accepted and ignored.
#pragma once
#include <memory>

#include "engine/dist/process_group.h"

namespace tb::dist::nccl {

// Creates the communicator (blocks until every rank has joined or options.timeout passes) and
// returns the started group. Throws DistError("nccl", "no GPU ...") without a GPU, and
// DistError naming the step (bootstrap, init) otherwise.
std::shared_ptr<ProcessGroup> make_group(const WorldInfo& w, Options o);

}  // namespace tb::dist::nccl
