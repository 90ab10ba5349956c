// The Gloo backend (Debian libgloo-dev): a ProcessGroup whose primitives are Gloo's own CPU
// algorithms over its TCP transport, for parity with PyTorch's "gloo" backend. Gloo's headers
// stay inside gloo_group.cpp; callers see only make_group.
//
// Note [Gloo rendezvous]
// Ranks find each other through a gloo::rendezvous::FileStore: each rank writes its listening
// addresses under a key and reads everyone else's. The store folder is
//   <dir>/gloo-store, <dir> = Options::run_dir, else $TRAINBENCH_DIST_DIR, else
//   $TRAINBENCH_GLOO_STORE, else the current directory,
// so every rank must see the same folder: one host, or a shared filesystem for several hosts.
// Each group's keys sit under a prefix that matches across ranks and differs between groups and
// launches: "tb/<launch id>/<n>", where n counts the gloo groups this process created (every rank
// creates its groups in the same order) and the launch id comes from the launcher
// ($TRAINBENCH_GLOO_RUN_ID, else OpenMPI/PMIx's PMIX_NAMESPACE, else Slurm's job and step ids,
// else torchrun's TORCHELASTIC_RUN_ID, else "local").
// Stale files: Gloo's FileStore refuses to overwrite a key, and a peer reading an old key would
// dial a dead address. Three things keep an earlier run from breaking this one: the launcher
// gives every launch a fresh run dir, the launch id is in the key names, and each rank deletes
// its own key files once every rank has connected (a barrier after the full mesh), so a run that
// got past rendezvous leaves nothing behind. Only a run killed during rendezvous can leave
// files; if the next run has no launch id and the same dir, it fails with an error naming the
// folder (and removes the stale key it tripped on, so the run after it starts clean).
// Timeouts: rendezvous waits up to Options::timeout for every rank (Gloo's own 30 s default for
// reading peers' keys is lifted to it), so ranks may start far apart on a loaded machine.
//
// Transport: TCP on loopback (127.0.0.1) when the launcher says every rank is on this host (or
// says nothing); on the machine's hostname when it reports ranks on other hosts
// (OMPI_COMM_WORLD_LOCAL_SIZE, LOCAL_WORLD_SIZE or SLURM_NTASKS_PER_NODE below the world size).
// $TRAINBENCH_GLOO_IFACE (an interface, e.g. eth0) or $TRAINBENCH_GLOO_HOSTNAME (a name or
// address to bind) choose explicitly; set one of them where the hostname resolves to a loopback
// address (Debian's /etc/hosts maps it to 127.0.1.1), as with PyTorch's GLOO_SOCKET_IFNAME.
#pragma once
#include <memory>

#include "engine/dist/process_group.h"

namespace tb::dist::gloo {

// Connects this rank to the others (blocks until all have joined or options.timeout passes) and
// returns the started group. Throws DistError("gloo", ...) when rendezvous fails.
std::shared_ptr<ProcessGroup> make_group(const WorldInfo& w, Options o);

}  // namespace tb::dist::gloo
