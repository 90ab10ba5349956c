// The MPI backend (Debian OpenMPI): CPU ranks on one host or many, started by mpirun or srun.
#pragma once
#include <memory>

#include "engine/dist/process_group.h"

namespace tb::dist::mpi {

// A group over all ranks of MPI_COMM_WORLD (its own duplicate communicator). Initialises MPI on
// first use (Note [MPI threads]); `world` must agree with MPI's own rank and size.
std::shared_ptr<ProcessGroup> make_group(const WorldInfo& world, Options options);

// The thread level MPI gave (MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE), initialising MPI if
// needed.
int thread_level();

}  // namespace tb::dist::mpi
